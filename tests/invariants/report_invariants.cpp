// Checks of the report's invariants, each one a sentence with the numbers that broke it.
#include "invariants/report_invariants.hpp"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <utility>

#include "stepsim/error.hpp"

namespace stepsim::test {
namespace {

using Named = std::pair<const char*, double>;

std::vector<Named> numbers_of(const Report& r) {
  std::vector<Named> n = {{"step_time_s", r.step_time_s},
                          {"throughput.tokens_per_s", r.throughput.tokens_per_s},
                          {"throughput.samples_per_s", r.throughput.samples_per_s},
                          {"throughput.tflops_per_gpu", r.throughput.tflops_per_gpu},
                          {"throughput.mfu", r.throughput.mfu},
                          {"breakdown_s.compute", r.breakdown_s.compute},
                          {"breakdown_s.bubble", r.breakdown_s.bubble},
                          {"breakdown_s.optimizer", r.breakdown_s.optimizer},
                          {"breakdown_s.other", r.breakdown_s.other},
                          {"overlap.hidden_fraction", r.overlap.hidden_fraction},
                          {"overlap.exposed_fraction_of_step", r.overlap.exposed_fraction_of_step},
                          {"memory_bytes.peak", r.memory_bytes.peak},
                          {"memory_bytes.params", r.memory_bytes.params},
                          {"memory_bytes.grads", r.memory_bytes.grads},
                          {"memory_bytes.optimizer", r.memory_bytes.optimizer},
                          {"memory_bytes.activations", r.memory_bytes.activations},
                          {"memory_bytes.buffers", r.memory_bytes.buffers},
                          {"memory_bytes.capacity", r.memory_bytes.capacity}};
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    n.emplace_back("breakdown_s.exposed_comm[kind]", r.breakdown_s.exposed_comm[k]);
    n.emplace_back("comm_s[kind]", r.comm_s[k]);
  }
  return n;
}

void check_finite_and_signs(const Report& r, std::vector<std::string>& out) {
  for (const auto& [name, value] : numbers_of(r)) {
    if (!std::isfinite(value)) out.push_back(fmt::format("{} is {}", name, value));
    if (value < 0) out.push_back(fmt::format("{} is negative: {}", name, value));
  }
}

void check_breakdown_sum(const Report& r, std::vector<std::string>& out) {
  const Breakdown& b = r.breakdown_s;
  const double sum = b.compute + b.exposed_total() + b.bubble + b.optimizer + b.other;
  // Each part is a whole number of picoseconds converted once: the sum may differ from the
  // step by a few rounding steps of a double, never by a picosecond.
  if (std::abs(sum - r.step_time_s) > 1e-12 + 1e-12 * r.step_time_s)
    out.push_back(fmt::format("breakdown parts sum to {:.15g} s, step is {:.15g} s (difference {:.3g} s)", sum,
                              r.step_time_s, sum - r.step_time_s));
}

void check_ranges(const Report& r, std::vector<std::string>& out) {
  if (!(r.step_time_s > 0)) out.push_back(fmt::format("step time is not positive: {}", r.step_time_s));
  const double hidden = r.overlap.hidden_fraction, exposed = r.overlap.exposed_fraction_of_step;
  if (!(hidden >= 0 && hidden <= 1)) out.push_back(fmt::format("hidden fraction {} is outside [0, 1]", hidden));
  if (!(exposed >= 0 && exposed <= 1))
    out.push_back(fmt::format("exposed fraction of the step {} is outside [0, 1]", exposed));
  const double mfu = r.throughput.mfu;
  if (!(mfu > 0 && mfu <= 1)) out.push_back(fmt::format("MFU {} is outside (0, 1]", mfu));
  // The GPUs execute the model's FLOPs and more (recompute), never above their peak.
  const double hfu = r.throughput.hfu;
  if (!(hfu >= mfu && hfu <= 1)) out.push_back(fmt::format("HFU {} is outside [MFU {}, 1]", hfu, mfu));
  const MemoryReport& m = r.memory_bytes;
  if (!(m.peak > 0 && m.params > 0 && m.capacity > 0))
    out.push_back(
        fmt::format("memory is not positive: peak {} B, params {} B, capacity {} B", m.peak, m.params, m.capacity));
}

struct Speedup {
  const char* what;
  std::function<void(ClusterSpec&)> apply;
};

void double_flops(ClusterSpec& c) {
  GpuFlops& f = c.gpu.flops;
  for (FlopRate* rate : {&f.bf16, &f.fp16, &f.fp8, &f.tf32, &f.fp32}) *rate = rate->scaled(2);
}

void double_hbm(ClusterSpec& c) { c.gpu.memory_bandwidth = c.gpu.memory_bandwidth.scaled(2); }

void double_links(ClusterSpec& c) {
  c.intra_node.bandwidth = c.intra_node.bandwidth.scaled(2);
  c.inter_node.nic_bandwidth = c.inter_node.nic_bandwidth.scaled(2);
}

}  // namespace

std::vector<std::string> report_violations(const Report& r) {
  std::vector<std::string> out;
  check_finite_and_signs(r, out);
  check_breakdown_sum(r, out);
  check_ranges(r, out);
  return out;
}

std::vector<std::string> faster_hardware_violations(const Scenario& s, double base) try {
  const Speedup speedups[] = {{"every GPU peak FLOPS doubled", double_flops},
                              {"HBM bandwidth doubled", double_hbm},
                              {"NVLink and NIC bandwidth doubled", double_links}};
  std::vector<std::string> out;
  for (const Speedup& speedup : speedups) {
    Scenario faster = s;
    speedup.apply(faster.cluster);
    const double t = simulate(faster).report.step_time_s;
    if (t > base)
      out.push_back(fmt::format("{}: step {:.9g} s, slower than {:.9g} s (+{:.3g} %)", speedup.what, t, base,
                                100 * (t / base - 1)));
  }
  return out;
} catch (const std::exception& e) {
  return {fmt::format("with faster hardware: {}", e.what())};
}

// A valid scenario that fails to simulate (an internal error, an exception) is a violation too.
std::vector<std::string> all_violations(const Scenario& s) try {
  const Report r = simulate(s).report;
  std::vector<std::string> out = report_violations(r);
  for (std::string& v : faster_hardware_violations(s, r.step_time_s)) out.push_back(std::move(v));
  return out;
} catch (const InputError&) {
  throw;
} catch (const std::exception& e) {
  return {fmt::format("does not simulate: {}", e.what())};
}

}  // namespace stepsim::test
