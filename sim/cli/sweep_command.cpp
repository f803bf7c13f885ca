// `stepsim sweep`: many simulations of one scenario with keys varied over lists and ranges,
// rows streamed to CSV or JSON lines; resumable, shardable across a Slurm job array, and
// mergeable; or, with --best, the fastest configurations that fit for a GPU count.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <limits>

#include "cli/options.hpp"
#include "io/scenario_loader.hpp"
#include "stepsim/error.hpp"
#include "sweep/best.hpp"
#include "sweep/merge.hpp"
#include "sweep/plan.hpp"
#include "sweep/point.hpp"
#include "sweep/progress.hpp"
#include "sweep/runner.hpp"
#include "sweep/shard.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kSweepUsage =
    "usage: stepsim sweep [SCENARIO.json] --vary KEY=VALUES [--vary ...] [--set KEY=VALUE]...\n"
    "                     [--calibration FILE]... [--spec FILE] [--gpus N] [-o FILE] [--jobs J]\n"
    "                     [--keep-oom] [--resume] [--shard K/N]\n"
    "       stepsim sweep [SCENARIO.json] --best K --gpus N [--set KEY=VALUE]... [--calibration FILE]...\n"
    "                     [--jobs J]\n"
    "       stepsim sweep --merge OUT FILE...\n\n"
    "Simulates every point of the cartesian product of the --vary keys (the first key varies\n"
    "slowest) on all cores and writes one row per point, in point order, to FILE (.csv or\n"
    ".jsonl; without -o or with '-o -', CSV on stdout; /dev/stdout, a device or a FIFO is written\n"
    "through, never emptied). Without SCENARIO: the embedded default.\n\n"
    "VALUES: a list v1,v2,... or a range LO:HI:xF (geometric, F > 1) or LO:HI:+S (arithmetic).\n"
    "A value that is a JSON list, object or string keeps its commas: for a list-valued key,\n"
    "'training.cuda_graph_scope=[\"attn\"],[\"attn\",\"mlp\"]' is two values.\n"
    "--spec FILE lists the keys to vary, one KEY=VALUES a line as --vary takes them (blank lines\n"
    "and lines starting with '#' skipped; a '#' after a space or tab, outside a JSON string,\n"
    "starts a comment; the key and each value trimmed): the same sweep as those --vary flags, the\n"
    "same rows and sweep_id; with --vary, the file's keys come first. An error about a key of the\n"
    "file names the file and the line ('axes.txt: line 3: ...'); an invalid point's reason names\n"
    "--vary, as the rows of the --vary flags do.\n\n"
    "Rows: point (index in the sweep), point_id (FNV-1a 64 of the resolved scenario, or of the\n"
    "assignments when they do not resolve), sweep_id (FNV-1a 64 of what makes the sweep: stepsim's\n"
    "version, the resolved scenario with its derived keys (a scenario and its resolved file are one\n"
    "sweep; its text where --set alone does not validate), the contents of every calibration file a point may read,\n"
    "--vary's values' too, --set, --vary, --gpus and --keep-oom), sweep_points (the sweep's point\n"
    "count), the varied keys, parallel.dp with --gpus, status,\n"
    "reason, then step time, throughput, MFU, exposed communication per kind, hidden fraction,\n"
    "bubble and memory (peak, in use, headroom, capacity, fits). Status: ok; invalid (the scenario does not validate, "
    "or tp·pp·cp does\n"
    "not divide --gpus: the reason says why); oom (memory in use plus headroom above capacity: memory columns\n"
    "only; --keep-oom reports such points as ok with fits=false and all columns); error (an\n"
    "internal error in that point). No point stops the sweep, but one that runs out of memory\n"
    "while others run beside it (exit status 2: run fewer at once, with --resume). The scenario with\n"
    "--set alone need not validate: its points' values and --gpus's dp may make it valid (a --set\n"
    "no point makes valid is refused). --gpus takes each point's tp, pp and cp as its keys give\n"
    "them, a varied example preset's own included.\n\n"
    "Resume: each row is one append of a whole line, synced every few seconds and at the end,\n"
    "so a killed sweep leaves whole rows; --resume keeps them (a torn last or first line is cut)\n"
    "and runs the points not yet written; rows found with gaps between them (a merge of some\n"
    "shards) are then written again in point order, whole or not at all. Rows of another sweep\n"
    "(another sweep_id), a row whose point_id is not its point's, a point twice or out of order,\n"
    "with --shard K/N a point of another shard (a merge of the shards resumes without --shard),\n"
    "or a file that is no sweep's rows, are refused, the file left as it was, and a file has one\n"
    "writer: a sweep holds a lock on its output, and a second one is refused.\n\n"
    "Shards: --shard K/N (0-based), or in a job array K = (SLURM_ARRAY_TASK_ID -\n"
    "SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP of N = SLURM_ARRAY_TASK_COUNT (--array=0-6:2:\n"
    "shards 0 to 3), runs the points whose index mod N is K and writes\n"
    "out.shard-K-of-N.csv for -o out.csv ('{shard}' in the name is replaced by K instead): a\n"
    "regular file, never stdout, a device or a FIFO.\n"
    "--merge OUT FILE... joins shard files of one sweep in point order, one row per point, writes OUT\n"
    "as every output is written (whole or not at all; a FIFO or device written through; '-' is\n"
    "stdout) and names the points no file has.\n\n"
    "--best K: searches TP (inside an NVLink domain), PP, CP, DP (derived from --gpus), EP for a\n"
    "mixture of experts (1, the largest inside an NVLink domain, the largest), micro-batch,\n"
    "pipeline schedule and virtual stages, the least recompute that fits and TP\n"
    "communication overlap; then, on the three fastest layouts, the data-parallel kind, bucket\n"
    "size (PyTorch DDP's 25 and 100 MiB; Megatron-Core's and DeepSpeed's in parameters: the default,\n"
    "a quarter and four times it), overlap and recompute (of the kinds DDP, ZeRO-1, ZeRO-2 and FSDP, those the "
    "scenario "
    "admits:\n"
    "gradient_as_bucket_view=false keeps it to DDP, model.moe.a2a_overlap away from FSDP).\n"
    "It drops what does not fit, and prints the K fastest distinct results (configurations with\n"
    "identical results share a row) with their breakdown and what limits the first; when none\n"
    "fits, the first refusal's reason and the configuration nearest to fitting with its memory\n"
    "(in use and headroom against the capacity). --precision bf16,fp8 searches those precisions\n"
    "too (not beside --set training.precision, which fixes one). CP and TP overlap are searched where the\n"
    "model runs them (neither with latent attention, no CP with sliding windows).\n"
    "'stepsim plan' runs the same search on several clusters.";

constexpr const char* kSweepExamples =
    "  stepsim sweep --vary data_parallel.bucket_cap_mb=1,5,10,25,50,100,200 --vary parallel.tp=1,2,4,8 \\\n"
    "      --set model=llama3-8b --gpus 64 -o out.csv\n"
    "  stepsim sweep --vary data_parallel.bucket_cap_mb=1:256:x2 -o buckets.jsonl\n"
    "  stepsim sweep --vary data_parallel.bucket_cap_mb=25,100 --calibration node.calib.json -o calibrated.csv\n"
    "  printf 'parallel.tp=1:8:x2\\nparallel.pp=1,2,4\\n' > axes.txt && stepsim sweep --spec axes.txt --gpus 64\n"
    "  stepsim sweep --vary parallel.tp=1:8:x2 --vary parallel.pp=1,2,4 --gpus 64 -o out.csv --resume\n"
    "  stepsim sweep --vary training.micro_batch=1:4:+1 --shard 0/4 -o out.csv   # writes out.shard-0-of-4.csv\n"
    "  stepsim sweep --merge out.csv out.shard-*-of-4.csv\n"
    "  stepsim sweep --set model=gpt3-175b --set cluster=dgx-a100-80g-hdr --gpus 1024 --best 5\n";

struct SweepFlags {
  std::vector<std::string> positional, vary, sets, precisions, calibrations;
  std::string output = "-", shard, merge, jobs, spec;
  int gpus = 0, best = 0;
  bool keep_oom = false, resume = false;
};

InputError gpus_refusal(const std::string& text) {
  return InputError("--gpus", text, fmt::format("expected a GPU count of 1 to {}", std::numeric_limits<int>::max()));
}

InputError best_refusal(const std::string& text) {
  return InputError("--best", text,
                    fmt::format("expected 1 to {} configurations to print", std::numeric_limits<int>::max()));
}

po::options_description describe(SweepFlags& f) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("vary", po::value(&f.vary)->value_name("KEY=VALUES")->composing(),
                                                 "a key and its values or range (repeatable)")(
      "spec", po::value(&f.spec)->value_name("FILE"),
      "the keys to vary from FILE, one KEY=VALUES a line as --vary takes them (blank lines, lines starting "
      "with '#' and comments from ' #' skipped); with --vary, the file's keys come first")(
      "set", po::value(&f.sets)->value_name("KEY=VALUE")->composing(), "override a scenario key for every point")(
      "calibration", po::value(&f.calibrations)->value_name("FILE")->composing(),
      "apply a calibration file (stepsim calibrate) to every point, after the scenario's own (repeatable; a "
      "--vary of calibration replaces both)")("gpus", number_value(f.gpus, "--gpus", gpus_refusal)->value_name("N"),
                                              "GPU count: parallel.dp = N / (tp·pp·cp) per point")(
      "output,o", po::value(&f.output)->value_name("FILE"), "rows to FILE.csv or FILE.jsonl ('-': CSV on stdout)")(
      "jobs,j", po::value(&f.jobs)->value_name("J"),
      "simulations at once, 1 to 4096 and at most the points (default: every core this process may use); a point "
      "running out of memory beside others stops the sweep (exit status 2)")(
      "keep-oom", po::bool_switch(&f.keep_oom), "report points that do not fit as ok, with fits=false")(
      "resume", po::bool_switch(&f.resume), "keep the rows already in FILE and run the rest")(
      "shard", po::value(&f.shard)->value_name("K/N"), "run shard K of N (default: from SLURM_ARRAY_TASK_*)")(
      "merge", po::value(&f.merge)->value_name("OUT"), "merge the shard FILEs given as arguments into OUT")(
      "best", number_value(f.best, "--best", best_refusal)->value_name("K"),
      "print the K fastest configurations that fit on --gpus N")(
      "precision", po::value(&f.precisions)->value_name("LIST")->composing(),
      "with --best: training precisions to search, of bf16, fp16, fp8, tf32, fp32, mxfp8, nvfp4, e.g. "
      "bf16,fp8 (default: the scenario's)")("inputs", po::value(&f.positional)->value_name("SCENARIO.json"),
                                            "scenario file (or the files to merge)");
  return desc;
}

// The flags a mode has no use for, refused rather than ignored.
void refuse_flags(const po::variables_map& vm, std::initializer_list<const char*> names, const std::string& mode,
                  const std::string& why) {
  for (const char* name : names) {
    if (vm.count(name) == 0 || vm[name].defaulted()) continue;
    // bool_switch flags are "defaulted" only when absent; a present one is true.
    const std::string flag = std::string(name) == "output" ? "-o" : "--" + std::string(name);
    throw InputError(flag, "", fmt::format("cannot be combined with {}, {}", mode, why));
  }
}

std::string plural_points(const std::vector<std::size_t>& points) {
  return fmt::format("{} {}", points.size() == 1 ? "point" : "points", sweep::point_list(points));
}

int run_merge(const SweepFlags& f, const po::variables_map& vm) {
  refuse_flags(vm,
               {"vary", "spec", "set", "calibration", "gpus", "best", "resume", "shard", "keep-oom", "output", "jobs"},
               "--merge", "which only joins files");
  const auto summary = sweep::merge_files(f.merge, f.positional);
  if (!summary.torn.empty()) spdlog::warn("left out the torn last line of {}", fmt::join(summary.torn, ", "));
  std::cerr << fmt::format("stepsim: sweep: merged {} rows from {} files into {} ({} duplicates dropped{})\n",
                           summary.rows, f.positional.size(), f.merge, summary.duplicates.size(),
                           summary.duplicates.empty() ? "" : ": " + plural_points(summary.duplicates));
  if (!summary.missing.empty())
    std::cerr << fmt::format(
        "stepsim: sweep: {} lacks {} of the sweep's {} points: {} (merge the other shards' "
        "files too)\n",
        f.merge, summary.missing.size(), summary.points, sweep::point_list(summary.missing));
  return 0;
}

// --jobs as a whole number from 1 to sweep::kMaxJobs; 0 when not given (every usable core).
unsigned jobs_of(const SweepFlags& f, const po::variables_map& vm) {
  if (vm.count("jobs") == 0) return 0;
  const auto jobs = number_of<long long>(f.jobs);
  if (!jobs || *jobs < 1 || *jobs > sweep::kMaxJobs) throw sweep::jobs_error(f.jobs);
  return static_cast<unsigned>(*jobs);
}

sweep::SweepSpec spec_of(const SweepFlags& f, const po::variables_map& vm) {
  if (f.positional.size() > 1)
    throw InputError("<command line>", "SCENARIO",
                     "expected at most one scenario file (several files go with --merge)");
  if (!f.positional.empty() && f.positional.front().empty())
    throw InputError("<command line>", "SCENARIO",
                     "the scenario file name is empty (omit it to sweep the embedded default)");
  // Given, a count of GPUs to derive parallel.dp from: 0 would derive nothing.
  if (vm.count("gpus") != 0 && f.gpus < 1) throw gpus_refusal(std::to_string(f.gpus));
  if (f.gpus == 0 && f.best > 0)
    throw InputError("--best", std::to_string(f.best),
                     "the search needs the GPU count whose layouts it tries: give --gpus N (1 or more)");
  if (vm.count("spec") != 0) require_stdin_once("sweep", {f.positional.empty() ? "" : f.positional.front(), f.spec});
  sweep::SweepSpec spec;
  // Read once for every point (a pipe or standard input can only be read once).
  spec.scenario = io::read_scenario_input(f.positional.empty() ? "" : f.positional.front());
  spec.sets = io::sets_with_calibration(spec.scenario, f.sets, f.calibrations);
  spec.gpus = f.gpus;
  spec.keep_oom = f.keep_oom;
  // The spec file's axes, then --vary's: the first varies slowest.
  if (vm.count("spec") != 0) spec.axes = sweep::read_spec_file(f.spec);
  for (const auto& text : f.vary) spec.axes.push_back(sweep::parse_axis(text));
  (void)sweep::point_count(spec.axes);
  return spec;
}

}  // namespace

int run_sweep(const Args& args) {
  SweepFlags f;
  const auto desc = describe(f);
  po::options_description visible("Options");
  for (const auto& option : desc.options())
    if (option->long_name() != "inputs") visible.add(option);
  po::positional_options_description positional;
  positional.add("inputs", -1);
  const auto vm = parse_args("sweep", args, desc, positional);
  if (help_requested(vm, kSweepUsage, visible, kSweepExamples)) return 0;
  if (vm.count("merge") != 0) return run_merge(f, vm);
  const unsigned jobs = jobs_of(f, vm);
  sweep::SweepSpec spec = spec_of(f, vm);
  if (vm.count("best") != 0) {
    if (f.best < 1) throw best_refusal(std::to_string(f.best));
    if (vm.count("spec") != 0) throw InputError("--spec", f.spec, "cannot be combined with --best");
    if (!spec.axes.empty()) throw InputError("--vary", spec.axes.front().key, "cannot be combined with --best");
    refuse_flags(vm, {"output", "shard", "resume", "keep-oom"}, "--best", "which prints its table on stdout");
    sweep::SearchSpace space;
    space.precisions = sweep::parse_precisions(f.precisions, spec.sets);
    sweep::print_best(spec, static_cast<std::size_t>(f.best), jobs, sweep::Progress::stderr_is_terminal(), std::cout,
                      space);
    return 0;
  }
  if (!f.precisions.empty())
    throw InputError("--precision", f.precisions.front(), "applies to --best (a row sweep varies training.precision)");
  if (spec.axes.empty())
    throw InputError("--vary", "", "expected at least one --vary KEY=VALUES (or --spec FILE, or --best K)");
  sweep::prepare(spec);
  sweep::RunOptions options;
  options.jobs = jobs;
  options.resume = f.resume;
  options.progress = sweep::Progress::stderr_is_terminal();
  if (vm.count("shard") != 0) {
    options.shard = sweep::parse_shard(f.shard);
  } else if (auto shard = sweep::shard_from_environment([](const char* name) { return std::getenv(name); })) {
    options.shard = *shard;
  }
  (void)sweep::format_of(f.output, "-o");
  options.output = sweep::shard_output(f.output, options.shard);
  const auto s = sweep::run_sweep(spec, options);
  std::cerr << fmt::format(
      "stepsim: sweep: {} points{}: {} ok, {} invalid, {} oom, {} error{}{}\n", s.points,
      options.shard.count > 1 ? fmt::format(" in shard {}/{}", options.shard.index, options.shard.count)
                              : std::string(),
      s.ok, s.invalid, s.oom, s.error, s.skipped ? fmt::format(", {} already written", s.skipped) : std::string(),
      options.output == "-" ? std::string() : " -> " + options.output);
  return 0;
}

}  // namespace stepsim::cli
