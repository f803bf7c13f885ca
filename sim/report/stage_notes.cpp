// bubble_note(): why the pipeline stage with the largest bubble waits, against the bubble its
// schedule would have if every stage did the same work.
#include <fmt/format.h>

#include "report/report_io.hpp"

namespace stepsim::report {
namespace {

double work_of(const StageReport& st) { return st.breakdown_s.compute + st.breakdown_s.optimizer; }

std::string why_heavier(int stage, int pp) {
  if (stage == pp - 1) return "it also runs the LM head and the loss (the output layer over the whole vocabulary)";
  if (stage == 0) return "it also runs the embedding";
  return "it holds more layers than the others";
}

// Zero-bubble and DualPipe schedules have no single even-pipeline formula (it depends on the
// ratio of the input- and weight-gradient passes): the bubble is set against what 1F1B would
// leave on an even pipeline, (pp-1)/m of a stage's compute.
std::string split_bubble_note(const StageReport& widest, const StageReport& lightest, const PipelineFacts& p) {
  const double one_f_one_b = static_cast<double>(p.pp - 1) / static_cast<double>(p.micro_batches) * work_of(lightest);
  return fmt::format(
      "pipeline: stage {} has the largest bubble, {:.1f} ms ({:.1f}% of its compute); under {} it depends on how long "
      "the input- and weight-gradient passes take, so compare it with the {:.1f} ms 1F1B would leave on an even "
      "pipeline, (pp-1)/m = {}/{} of a stage's compute",
      widest.stage, widest.breakdown_s.bubble * 1e3,
      work_of(widest) > 0 ? 100.0 * widest.breakdown_s.bubble / work_of(widest) : 0.0, p.split_schedule,
      one_f_one_b * 1e3, p.pp - 1, p.micro_batches);
}

}  // namespace

std::string bubble_note(const Report& r, const PipelineFacts& p) {
  if (r.stages.size() < 2 || p.micro_batches <= 0) return "";
  const StageReport* widest = &r.stages.front();
  const StageReport* busiest = &r.stages.front();
  const StageReport* lightest = &r.stages.front();
  for (const StageReport& st : r.stages) {
    if (st.breakdown_s.bubble > widest->breakdown_s.bubble) widest = &st;
    if (work_of(st) > work_of(*busiest)) busiest = &st;
    if (work_of(st) < work_of(*lightest)) lightest = &st;
  }
  if (widest->breakdown_s.bubble <= 0) return "";
  if (!p.split_schedule.empty()) return split_bubble_note(*widest, *lightest, p);
  const double ideal_fraction =
      static_cast<double>(p.pp - 1) / (static_cast<double>(p.virtual_stages) * static_cast<double>(p.micro_batches));
  const double ideal = ideal_fraction * work_of(*lightest);
  std::string note = fmt::format(
      "pipeline: stage {} has the largest bubble, {:.1f} ms ({:.1f}x the {:.1f} ms of an even pipeline: "
      "(pp-1)/(v·m) = {}/({}·{}) of a stage's compute)",
      widest->stage, widest->breakdown_s.bubble * 1e3, ideal > 0 ? widest->breakdown_s.bubble / ideal : 0.0,
      ideal * 1e3, p.pp - 1, p.virtual_stages, p.micro_batches);
  const double excess = work_of(*busiest) - work_of(*lightest);
  if (excess > 0.01 * work_of(*lightest))
    note += fmt::format(
        "; stage {} computes {:.1f} ms more than stage {} because {}, and the other stages wait for it at every "
        "pipeline round",
        busiest->stage, excess * 1e3, lightest->stage, why_heavier(busiest->stage, p.pp));
  return note;
}

}  // namespace stepsim::report
