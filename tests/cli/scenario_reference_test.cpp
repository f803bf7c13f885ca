// docs/scenario-reference.md is what `stepsim presets --keys --markdown` prints, every key of
// the schema has a row with its meaning, and the presets' listings read as whole sentences.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <boost/json.hpp>
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_stepsim.hpp"
#include "cli/scenario_reference.hpp"
#include "io/scenario_loader.hpp"
#include "parallelism/stage_layout.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"

using stepsim::testing::refusal;
using stepsim::testing::Scratch;
using stepsim::testing::slurp;

TEST_CASE("The checked-in scenario reference is what the command generates") {
  Scratch scratch("scenario-reference");
  const auto run = scratch.run("presets --keys --markdown");
  REQUIRE(run.status == 0);
  INFO("regenerate it: build/ci/stepsim presets --keys --markdown > docs/scenario-reference.md");
  CHECK(run.out == slurp(std::string(STEPSIM_SOURCE_DIR) + "/docs/scenario-reference.md"));
}

TEST_CASE("Every scenario key has a unit, meaning and framework row in the reference") {
  const auto scenario = boost::json::parse(stepsim::io::load_scenario("").resolved_json);
  CHECK(stepsim::cli::undocumented_keys(scenario).empty());
  CHECK(stepsim::cli::leaf_keys(scenario).size() > 80);
  CHECK(stepsim::cli::undocumented_keys(boost::json::parse(R"({"parallel": {"made_up": 1}})")) ==
        std::vector<std::string>{"parallel.made_up"});
}

TEST_CASE("Key values are written as a scenario file writes them, not in exponent form") {
  CHECK(stepsim::cli::value_text(boost::json::value(0.8)) == "0.8");
  CHECK(stepsim::cli::value_text(boost::json::value(6e9)) == "6000000000");
  Scratch scratch("keys-format");
  const auto run = scratch.run("presets --keys");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("cluster.gpu.efficiency.gemm_max = 0.681\n") != std::string::npos);
  CHECK(run.out.find("E-1") == std::string::npos);
}

TEST_CASE("presets writes JSON with --json FILE like every other command") {
  Scratch scratch("presets-json");
  REQUIRE(scratch.run("presets --json list.json").status == 0);
  const auto list = boost::json::parse(slurp(scratch.file("list.json")));
  CHECK(list.as_array().size() > 20);
  const auto stdout_run = scratch.run("presets --json - --kind gpu");
  CHECK(boost::json::parse(stdout_run.out).as_array().size() == 8);
}

TEST_CASE("Example summaries end at the end of a sentence and hardware summaries say whether they are fitted") {
  Scratch scratch("presets-summary");
  const auto run = scratch.run("presets");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("fp32 gradient reduction.\n") != std::string::npos);
  CHECK(run.out.find(
            "a100-sxm4-80gb per node, NVLink 300 GB/s, 8 x 200 Gb/s NICs, host link 32 GB/s per GPU; fitted\n") !=
        std::string::npos);
  CHECK(run.out.find("132 SMs, 700 W; fitted\n") != std::string::npos);
  CHECK(run.out.find("148 SMs, 1000 W; partly fitted\n") != std::string::npos);   // b200
  CHECK(run.out.find("160 SMs, 1100 W; datasheet only\n") != std::string::npos);  // b300
  CHECK(run.out.find("4 x gb200 per node, 72 per NVLink domain, NVLink 900 GB/s + NVLS, 4 x 400 Gb/s NICs, "
                     "host link 450 GB/s shared by 2 GPUs; datasheet only\n") != std::string::npos);
  CHECK(run.out.find("4 x gb300 per node, 72 per NVLink domain, NVLink 900 GB/s + NVLS, 4 x 800 Gb/s NICs, "
                     "host link 450 GB/s shared by 2 GPUs; datasheet only\n") != std::string::npos);
  CHECK(run.out.find("8 x b300 per node, NVLink 900 GB/s + NVLS, 8 x 800 Gb/s NICs, host link 64 GB/s per GPU; "
                     "datasheet only\n") != std::string::npos);
}

TEST_CASE("Cluster summaries show the host link activation offload copies over") {
  // From the presets' files: a Grace's NVLink-C2C at 450 GB/s each way for the two GPUs of a
  // GB200 or GB300 superchip, each DGX H100 GPU's own PCIe Gen5 x16 at 64 GB/s, and each DGX
  // B300 GPU's path to its Xeon 6 host, whose PCIe Gen5 x16 root port gives 64 GB/s.
  Scratch scratch("presets-host-link");
  const auto run = scratch.run("presets --kind cluster");
  REQUIRE(run.status == 0);
  const auto line_of = [&](const std::string& name) {
    const std::size_t at = run.out.find("  " + name + " ");
    return at == std::string::npos ? std::string() : run.out.substr(at, run.out.find('\n', at) - at);
  };
  CHECK(line_of("gb200-nvl72").ends_with(", 4 x 400 Gb/s NICs, host link 450 GB/s shared by 2 GPUs; datasheet only"));
  CHECK(line_of("gb300-nvl72").ends_with(", host link 450 GB/s shared by 2 GPUs; datasheet only"));
  CHECK(line_of("dgx-h100-ndr").ends_with(", 8 x 400 Gb/s NICs, host link 64 GB/s per GPU; datasheet only"));
  CHECK(line_of("dgx-a100-80g-hdr").ends_with(", host link 32 GB/s per GPU; fitted"));
  CHECK(line_of("dgx-b300").ends_with(", 8 x 800 Gb/s NICs, host link 64 GB/s per GPU; datasheet only"));
  // The JSON list carries the same summaries.
  const auto json = scratch.run("presets --kind cluster --json -");
  REQUIRE(json.status == 0);
  const boost::json::value list = boost::json::parse(json.out);
  bool gb200 = false;
  for (const auto& p : list.as_array()) {
    if (p.at("name") != "gb200-nvl72") continue;
    gb200 = true;
    CHECK(std::string(p.at("summary").as_string()).find("host link 450 GB/s shared by 2 GPUs") != std::string::npos);
  }
  CHECK(gb200);
}

TEST_CASE("Asking for ZeRO-3 by that name says that it is fsdp here") {
  Scratch scratch("zero3");
  const auto run = scratch.run("simulate --set data_parallel.kind=zero3");
  CHECK(run.status == 2);
  CHECK(run.err.find("unknown value 'zero3': ZeRO-3 is 'fsdp' here") != std::string::npos);
  CHECK(run.err.find("zero1") == std::string::npos);
}

// parallel.stage_layers takes one entry per model chunk: pp of them, or pp·virtual_stages under
// the interleaved schedule, where stage s holds chunks s, s + pp, …. The loader's own answer
// and the layout's are the oracle for what the reference says.
TEST_CASE("The reference says how many entries parallel.stage_layers takes and which chunk each stage holds") {
  const std::vector<std::string> interleaved{"parallel.pp=2", "parallel.dp=4", "parallel.schedule=interleaved",
                                             "parallel.virtual_stages=2"};
  auto four = interleaved;
  four.push_back("parallel.stage_layers=[7,9,9,7]");
  const stepsim::Scenario s = stepsim::io::load_scenario("", four);
  auto two = interleaved;
  two.push_back("parallel.stage_layers=[16,16]");
  CHECK_THROWS_WITH(stepsim::io::load_scenario("", two), Catch::Contains("has 2 entries but pp·virtual_stages is 4"));
  // Stage 0 holds chunks 0 and 2: layers 0-6 and 16-24.
  const auto chunks = stepsim::parallelism::chunk_layers(s.parallel, s.model.layers);
  CHECK(stepsim::parallelism::chunk_of(chunks, s.parallel, 0, 1).first_layer == 16);
  CHECK(stepsim::parallelism::chunk_of(chunks, s.parallel, 1, 0).first_layer == 7);
  Scratch scratch("stage-layers-reference");
  const auto run = scratch.run("presets --keys --markdown");
  REQUIRE(run.status == 0);
  const auto at = run.out.find("| `parallel.stage_layers` |");
  REQUIRE(at != std::string::npos);
  const std::string row = run.out.substr(at, run.out.find('\n', at) - at);
  INFO(row);
  CHECK(row.find("pp·virtual_stages") != std::string::npos);
  CHECK(row.find("stage s holding chunks s, s + pp") != std::string::npos);
  CHECK(row.find("layers per stage") == std::string::npos);
}

// A name of another kind is said to be of that kind rather than unknown (with itself as the
// suggestion), and an unknown kind before the slash is refused as --kind refuses it.
TEST_CASE("A preset asked for under another kind names the kind it is") {
  Scratch scratch("presets-kind");
  const std::string gpu_not_model = "<command line>: stepsim presets: 'h200' is a gpu preset, not a model preset";
  CHECK(refusal(scratch.run("presets model/h200"), gpu_not_model) == "");
  CHECK(refusal(scratch.run("presets h200 --kind model"), gpu_not_model) == "");
  CHECK(refusal(scratch.run("presets --kind cluster llama3-8b"),
                "<command line>: stepsim presets: 'llama3-8b' is a model preset, not a cluster preset") == "");
  CHECK(refusal(scratch.run("presets gpu/bloom-176b"),
                "<command line>: stepsim presets: 'bloom-176b' is a model and an example preset, not a gpu preset") ==
        "");
  CHECK(refusal(scratch.run("presets foo/h200"),
                "<command line>: stepsim presets: unknown kind 'foo' (expected gpu, cluster, model or example)") == "");
  CHECK(refusal(scratch.run("presets --kind foo"),
                "<command line>: --kind: unknown kind 'foo' (expected gpu, cluster, model or example)") == "");
  CHECK(refusal(scratch.run("presets gpu/h2000"),
                "<command line>: stepsim presets: unknown gpu preset 'h2000' (did you mean 'h200'?)") == "");
  CHECK(scratch.run("presets gpus/h200").status == 0);
}

// A model preset's listed size is the simulator's own count, the weights a one-GPU run holds
// (memory_bytes.params, two bytes each in BF16); DeepSeek-V3's is the 671B its paper gives
// (multi-head latent attention's projections, not GQA's).
TEST_CASE("Model summaries give the parameters the simulator counts") {
  Scratch scratch("presets-parameters");
  const auto run = scratch.run("presets --kind model --json -");
  REQUIRE(run.status == 0);
  const boost::json::value list = boost::json::parse(run.out);
  int models = 0;
  for (const auto& preset : list.as_array()) {
    const std::string name(preset.at("name").as_string());
    const std::string summary(preset.at("summary").as_string());
    INFO(name << ": " << summary);
    const stepsim::Scenario s =
        stepsim::io::load_scenario("", {"model=" + name, "parallel.tp=1", "parallel.dp=1", "training.global_batch=1",
                                        "training.micro_batch=1", "training.precision=bf16"});
    const double params = stepsim::simulate(s, stepsim::SimulateOptions::report_only()).report.memory_bytes.params / 2;
    const std::string size =
        params >= 1e12 ? fmt::format("~{:.2f}T params:", params / 1e12) : fmt::format("~{:.1f}B params:", params / 1e9);
    CHECK(summary.starts_with(size));
    if (name == "deepseek-v3") CHECK(summary.starts_with("~671.0B params:"));
    ++models;
  }
  CHECK(models == 24);
}

// Megatron-Core's EP overlap is taken where its other options are, under megatron, nemo and the
// unspecified framework (whose keys default to Megatron-Core's), and refused under the
// frameworks that do not run Megatron-Core; the reference says so, where it had left the
// frameworks out and the guide had said "refused outside Megatron".
TEST_CASE("The reference says under which frameworks the EP all-to-all overlap runs, as they are taken") {
  constexpr const char* kMixtral = R"({ "model": "mixtral-8x7b", "cluster": "dgx-h100-ndr",
    "parallel": { "tp": 2, "dp": 8, "ep": 8, "sequence_parallel": true },
    "training": { "global_batch": 64, "micro_batch": 1 } })";
  for (const char* framework : {"unspecified", "megatron", "nemo"}) {
    INFO(framework);
    CHECK_NOTHROW(stepsim::io::load_scenario_text(
        kMixtral, "s.json", {"model.moe.a2a_overlap=true", std::string("training.framework=") + framework}));
  }
  std::string refused = "accepted";
  try {
    (void)stepsim::io::load_scenario_text(kMixtral, "s.json",
                                          {"model.moe.a2a_overlap=true", "training.framework=torchtitan"});
  } catch (const stepsim::InputError& e) {
    refused = e.what();
  }
  CHECK(refused ==
        "--set: training.framework: model.moe.a2a_overlap is Megatron-Core's (megatron or nemo), not torchtitan's");
  Scratch scratch("reference-a2a-overlap");
  const auto run = scratch.run("presets --keys --markdown");
  REQUIRE(run.status == 0);
  const std::size_t row = run.out.find("| `model.moe.a2a_overlap` |");
  REQUIRE(row != std::string::npos);
  const std::string text = run.out.substr(row, run.out.find('\n', row) - row);
  CHECK(text.find("training.framework megatron, nemo or unspecified") != std::string::npos);
}

// The reference and the README say which sections take a preset; the loader's answers are the
// oracle: a section that takes none refuses a name and a "preset" key.
TEST_CASE("Only model, cluster and cluster.gpu take a preset, as the reference and the README say") {
  const auto load_error = [](const boost::json::object& scenario) -> std::string {
    try {
      stepsim::io::load_scenario_text(boost::json::serialize(scenario), "s.json");
    } catch (const stepsim::InputError& e) {
      return e.what();
    }
    return "no error";
  };
  const boost::json::object base{
      {"model", "llama3-8b"}, {"cluster", "dgx-h100-ndr"}, {"training", {{"global_batch", 128}}}};
  for (const char* section :
       {"parallel", "training", "data_parallel", "tensor_parallel", "context_parallel", "collectives", "simulation"}) {
    INFO(section);
    boost::json::object named = base;
    named[section] = "default";
    CHECK_THAT(load_error(named), Catch::Contains(fmt::format("/{}: expected an object, got a string", section)));
    boost::json::object keyed = base;
    keyed[section] = boost::json::object{{"preset", "default"}};
    CHECK_THAT(load_error(keyed), Catch::Contains("unknown key 'preset'"));
  }
  boost::json::object presets = base;
  presets["model"] = {{"preset", "llama3-8b"}, {"layers", 4}};
  presets["cluster"] = {{"preset", "dgx-h100-ndr"}, {"gpu", {{"preset", "h200"}}}};
  CHECK(load_error(presets) == "no error");

  Scratch scratch("scenario-reference-presets");
  const auto run = scratch.run("presets --keys --markdown");
  REQUIRE(run.status == 0);
  CHECK_THAT(run.out, Catch::Contains("`model`, `cluster` and `cluster.gpu` are each a preset name") &&
                          Catch::Contains("every\nother section is an object of the keys below"));
  CHECK_THAT(slurp(std::string(STEPSIM_SOURCE_DIR) + "/README.md"),
             Catch::Contains("`model` and `cluster` (and\n`cluster.gpu`) are each a preset name") &&
                 Catch::Contains("the other sections are objects") &&
                 !Catch::Contains("each is a preset name or an object"));
}

// The README's table of what each framework runs: its torchtitan (eager) and torchtitan with
// torch.compile columns are what training.framework resolves the kernel keys to.
TEST_CASE("The README's framework table gives the cross-entropy torchtitan resolves to") {
  const std::string readme = slurp(std::string(STEPSIM_SOURCE_DIR) + "/README.md");
  const std::string row_start = "| `training.cross_entropy` |";
  const std::size_t at = readme.find(row_start);
  REQUIRE(at != std::string::npos);
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t i = at + 1; i < readme.size() && readme[i] != '\n'; ++i) {
    if (readme[i] != '|') {
      cell += readme[i];
      continue;
    }
    cells.push_back(cell);
    cell.clear();
  }
  REQUIRE(cells.size() == 4);  // key, Megatron/NeMo, torchtitan compiled, torchtitan eager
  const auto resolved = [](const std::string& framework) {
    const auto scenario =
        // FSDP: the default's TP beside DDP would run no mixed precision under torchtitan.
        boost::json::parse(
            stepsim::io::load_scenario("", {"training.framework=" + framework, "data_parallel.kind=fsdp"})
                .resolved_json);
    return std::string(scenario.at("training").at("cross_entropy").as_string());
  };
  const std::string eager = resolved("torchtitan");
  const std::string compiled = resolved("torchtitan-compile");
  INFO(cells[3]);
  CHECK(cells[3].find("`" + eager + "`") == 1);  // the cell starts with it
  INFO(cells[2]);
  CHECK(cells[2].find("`" + compiled + "`") != std::string::npos);
}

namespace {

// The reference's rows: key, value, meaning and framework option (the Markdown table's columns
// but the unit).
struct Row {
  std::string key, value, meaning, framework;
};

std::vector<Row> reference_rows() {
  std::ostringstream out;
  stepsim::cli::write_scenario_reference(boost::json::parse(stepsim::io::load_scenario("").resolved_json), out);
  std::vector<Row> rows;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("| `")) continue;
    std::vector<std::string> cells;
    for (std::size_t at = 1; at < line.size();) {
      const auto next = line.find(" | ", at);
      cells.push_back(line.substr(at, next == std::string::npos ? std::string::npos : next - at));
      if (next == std::string::npos) break;
      at = next + 3;
    }
    if (cells.size() < 4) continue;
    const auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(' '));
      s.erase(s.find_last_not_of(' ') + 1);
      return s;
    };
    std::string framework = cells.size() > 4 ? trim(cells[4]) : "";
    if (framework.ends_with("|")) framework = trim(framework.substr(0, framework.size() - 1));
    rows.push_back({trim(cells[0]).substr(1, trim(cells[0]).size() - 2), trim(cells[2]), trim(cells[3]), framework});
  }
  return rows;
}

}  // namespace

// A quantity with a unit takes its unit at zero too (a bare number where a unit is needed is an
// error that lists the units): where the reference says what zero means for such a
// key, it writes the zero as the key takes it, and that text is no unit error.
TEST_CASE("The reference writes a quantity's zero with its unit, as the key takes it") {
  int zeros = 0;
  for (const Row& row : reference_rows()) {
    const bool quantity =
        row.value.starts_with("`\"") && row.value.size() > 2 && std::isdigit(static_cast<unsigned char>(row.value[2]));
    if (!quantity) continue;
    INFO(row.key << ": " << row.meaning);
    CHECK(row.meaning.find("; 0:") == std::string::npos);
    CHECK(row.meaning.find("(0:") == std::string::npos);
    for (auto at = row.meaning.find("`\"0 "); at != std::string::npos; at = row.meaning.find("`\"0 ", at + 1)) {
      const std::string zero = row.meaning.substr(at + 2, row.meaning.find('"', at + 2) - at - 2);
      ++zeros;
      try {
        (void)stepsim::io::load_scenario("", {row.key + "=" + zero});
      } catch (const stepsim::InputError& e) {
        CHECK(std::string(e.what()).find("unit") == std::string::npos);
      }
    }
  }
  CHECK(zeros >= 8);  // six GPU peaks, the host link, NCCL's ramp
  // The host link described as none is refused for offload by name; a bare 0 for its unit.
  Scratch scratch("reference-zero");
  const std::string offload =
      "simulate ddp-1.3b-64xa100 --set cluster=dgx-h100-ndr --set training.framework=megatron "
      "--set training.activation_offload_layers=2 --set cluster.host_link.bandwidth=";
  CHECK(refusal(scratch.run(offload + "'0 GB/s'"),
                "--set: training.activation_offload_layers: cluster dgx-h100-ndr describes no link to host memory to "
                "offload over (set cluster.host_link.bandwidth)") == "");
  CHECK(refusal(scratch.run(offload + "0"),
                "--set: cluster.host_link.bandwidth: '0' has no unit (expected e.g. \"400 Gb/s\" or \"50 GB/s\")") ==
        "");
}

// Megatron-Core's TransformerConfig.__post_init__ refuses --recompute-granularity full without
// a method ('recompute_method must be "block" or "uniform"') and a number of layers
// (recompute_num_layers); stepsim's full recompute keeps every layer's input alone and
// recomputes it layer by layer, Megatron's uniform method over units of one layer.
TEST_CASE("The reference maps full recompute to the Megatron options that run it") {
  for (const Row& row : reference_rows()) {
    if (row.key != "training.recompute") continue;
    INFO(row.meaning);
    CHECK(row.meaning.find("`full` (whole layer: every layer keeps only its input") != std::string::npos);
    CHECK(row.framework.find("`--recompute-granularity full --recompute-method uniform --recompute-num-layers 1` "
                             "(full)") != std::string::npos);
    return;
  }
  FAIL("no training.recompute row");
}
