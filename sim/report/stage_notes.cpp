// bubble_note(): why the pipeline stage with the largest bubble waits, against the bubble its
// schedule would have if every stage did the same work.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "report/report_io.hpp"

namespace stepsim::report {
namespace {

// What a stage computes in the pipeline's rounds. The optimizer step runs once a step, after
// them, and is left out.
double work_of(const StageReport& st) { return st.breakdown_s.compute; }

// An even pipeline spreads the stages' compute evenly: each stage computes their mean.
double even_work(const Report& r) {
  double sum = 0;
  for (const StageReport& st : r.stages) sum += work_of(st);
  return sum / static_cast<double>(r.stages.size());
}

std::string layers_text(int n) {
  if (n == 0) return "none";
  return fmt::format("{} layer{}", n, n == 1 ? "" : "s");
}

// Why stage `heavy` computes more than stage `light`, from what each holds: the parts whose
// time it has more of, the largest first, each at least a tenth of the difference in those parts.
std::string why_heavier(const StageReport& heavy, const StageReport& light, const PipelineFacts& p) {
  const auto stage = [&p](const StageReport& st) {
    const auto i = static_cast<std::size_t>(st.stage);
    return i < p.stages.size() ? p.stages[i] : StageWork{};
  };
  const StageWork h = stage(heavy);
  const StageWork l = stage(light);
  std::vector<std::pair<double, std::string>> parts;
  const double layers = h.layers_s - l.layers_s;
  if (h.layers != l.layers) {
    parts.emplace_back(layers,
                       fmt::format("it holds {} against {} ({:.1f} ms)", layers_text(h.layers),
                                   l.layers == 0 ? std::string("none") : std::to_string(l.layers), layers * 1e3));
  } else {
    parts.emplace_back(layers,
                       fmt::format("it spends {:.1f} ms longer on its {}", layers * 1e3, layers_text(h.layers)));
  }
  const double embedding = h.embedding_s - l.embedding_s;
  if (h.embedding && !l.embedding)
    parts.emplace_back(embedding, fmt::format("it also runs the embedding ({:.1f} ms)", embedding * 1e3));
  const double head = h.head_s - l.head_s;
  if (h.head && !l.head)
    parts.emplace_back(
        head, fmt::format("it also runs the LM head and the loss over the whole vocabulary ({:.1f} ms)", head * 1e3));
  double more = 0;
  for (const auto& part : parts) more += std::max(part.first, 0.0);
  std::erase_if(parts, [more](const auto& part) { return part.first <= 0 || part.first < 0.1 * more; });
  const double slowed = heavy.compute_slowdown_s - light.compute_slowdown_s;
  if (parts.empty())
    return slowed > 0 ? fmt::format("the communication beside it slows its compute {:.1f} ms more", slowed * 1e3)
                      : "its ops take longer";
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string text = parts.front().second;
  for (std::size_t k = 1; k < parts.size(); ++k)
    text += (k + 1 == parts.size() ? " and " : ", ") + parts[k].second.substr(3);  // past "it "
  return text;
}

// Zero-bubble and DualPipe schedules have no single even-pipeline formula (it depends on the
// ratio of the input- and weight-gradient passes): the bubble is set against what 1F1B would
// leave on an even pipeline, (pp-1)/m of a stage's compute.
std::string split_bubble_note(const Report& r, const StageReport& widest, const PipelineFacts& p) {
  const double one_f_one_b = static_cast<double>(p.pp - 1) / static_cast<double>(p.micro_batches) * even_work(r);
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
  if (!p.split_schedule.empty()) return split_bubble_note(r, *widest, p);
  const double ideal_fraction =
      static_cast<double>(p.pp - 1) / (static_cast<double>(p.virtual_stages) * static_cast<double>(p.micro_batches));
  const double ideal = ideal_fraction * even_work(r);
  std::string note = fmt::format(
      "pipeline: stage {} has the largest bubble, {:.1f} ms ({:.1f}x the {:.1f} ms of an even pipeline: "
      "(pp-1)/(v·m) = {}/({}·{}) of a stage's compute, the stages' mean)",
      widest->stage, widest->breakdown_s.bubble * 1e3, ideal > 0 ? widest->breakdown_s.bubble / ideal : 0.0,
      ideal * 1e3, p.pp - 1, p.virtual_stages, p.micro_batches);
  const double excess = work_of(*busiest) - work_of(*lightest);
  if (excess > 0.01 * work_of(*busiest))
    note += fmt::format(
        "; stage {} computes {:.1f} ms more than stage {} because {}, and the other stages wait for it at every "
        "pipeline round",
        busiest->stage, excess * 1e3, lightest->stage, why_heavier(*busiest, *lightest, p));
  return note;
}

}  // namespace stepsim::report
