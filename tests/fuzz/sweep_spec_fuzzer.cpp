// Fuzz target: a sweep's definition, one flag a line ("vary KEY=VALUES", "set KEY=VALUE",
// "gpus N", "keep-oom", "shard K/N", "slurm ID COUNT MIN", "name PATH"), through the axis and
// shard parsers, prepare() and the first points' rows; each row must read back as itself.
#include <sstream>
#include <string>

#include "fuzz/fuzz_outcome.hpp"
#include "sweep/point.hpp"
#include "sweep/rows.hpp"
#include "sweep/shard.hpp"

namespace {

using namespace stepsim::sweep;

// A simulation is not fuzzed here (simulate_set does that): only points that resolve.
constexpr std::size_t kPointsChecked = 3;

void check_row(const SweepSpec& spec, std::size_t index) {
  const PointResult r = resolve_point(spec, index);
  for (const Format format : {Format::csv, Format::jsonl}) {
    const std::string line = format_row(spec, r, format);
    if (line.empty() || line.find('\n') != line.size() - 1) stepsim::fuzz::finding("a row is not one line");
    const std::string row = line.substr(0, line.size() - 1);
    const auto header = format == Format::csv ? columns(spec) : header_of(row, format, "rows.jsonl");
    if (header != columns(spec)) stepsim::fuzz::finding("a JSON row's keys are not the columns");
    const RowHead head = head_of(row, format, header, "rows", 2);
    if (head.key.point != index || head.key.id != r.id || head.sweep != spec.sweep_id || head.points != spec.points)
      stepsim::fuzz::finding("a row does not read back as written: " + row);
  }
}

void run_spec(const std::string& text) {
  SweepSpec spec;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string verb, rest;
    words >> verb;
    std::getline(words >> std::ws, rest);
    if (verb == "vary") spec.axes.push_back(parse_axis(rest));
    if (verb == "set") spec.sets.push_back(rest);
    if (verb == "gpus") spec.gpus = std::stoi(rest);
    if (verb == "keep-oom") spec.keep_oom = true;
    if (verb == "shard") (void)shard_path("out-{shard}.csv", parse_shard(rest));
    if (verb == "name") (void)shard_path(rest, Shard{3, 8});
    if (verb == "slurm") {
      std::istringstream ids(rest);
      std::string id, count, min;
      ids >> id >> count >> min;
      (void)shard_from_environment([&](const char* name) -> const char* {
        const std::string n = name;
        return n == "SLURM_ARRAY_TASK_ID" ? id.c_str() : n == "SLURM_ARRAY_TASK_COUNT" ? count.c_str() : min.c_str();
      });
    }
  }
  if (spec.gpus < 0) return;
  (void)point_count(spec.axes);
  prepare(spec);
  for (std::size_t i = 0; i < spec.points && i < kPointsChecked; ++i) check_row(spec, i);
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return stepsim::fuzz::run_one([&] {
    try {
      run_spec(text);
    } catch (const std::invalid_argument&) {
      // std::stoi of a "gpus" line that is no number: the harness's own reading, not stepsim's
    } catch (const std::out_of_range&) {
    }
  });
}
