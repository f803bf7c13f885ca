// write_table(): the report as a fixed-width table for a terminal, the same numbers as
// the JSON report.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>

#include "report/report_io.hpp"

namespace stepsim::report {
namespace {

constexpr int kLabel = 30;

// "13.750 s", "250.0 ms", "12.5 us": three or four significant digits in a unit that fits.
std::string duration(double s) {
  const double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a >= 1) return fmt::format("{:.3f} s", s);
  if (a >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  if (a >= 1e-6) return fmt::format("{:.3f} us", s * 1e6);
  return fmt::format("{:.3f} ns", s * 1e9);
}

std::string percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f} %", 100.0 * part / whole) : std::string("-");
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / 1073741824.0); }

void row(std::ostream& out, const std::string& label, const std::string& a, const std::string& b = "") {
  out << fmt::format("{:<{}}{:>14}{:>12}\n", label, kLabel, a, b);
}

double per_kind(const PerKind& v, std::size_t k) { return v[k]; }

void write_header(const Report& r, std::ostream& out) {
  out << fmt::format("stepsim {}, {} GPU{}\n\n", r.stepsim_version, r.gpus, r.gpus == 1 ? "" : "s");
  row(out, "step time", duration(r.step_time_s));
  row(out, "tokens per second", fmt::format("{:.1f}", r.throughput.tokens_per_s));
  row(out, "samples per second", fmt::format("{:.2f}", r.throughput.samples_per_s));
  row(out, "model TFLOPS per GPU", fmt::format("{:.1f}", r.throughput.tflops_per_gpu));
  row(out, "MFU", fmt::format("{:.1f} %", 100.0 * r.throughput.mfu));
  if (r.throughput.hfu > 0) row(out, "HFU (recompute counted)", fmt::format("{:.1f} %", 100.0 * r.throughput.hfu));
}

// Energy always when the GPU's board power is known; money only with a GPU-hour price.
void write_cost(const CostReport& c, std::ostream& out) {
  if (c.gpu_power_w <= 0 && c.gpu_hour_price <= 0) return;
  out << '\n';
  if (c.gpu_power_w > 0) {
    row(out, "energy per step (GPU boards)", fmt::format("{:.3g} kWh", c.energy_per_step_j / 3.6e6));
    row(out, "energy per million tokens", fmt::format("{:.3g} kWh", c.energy_per_mtoken_kwh));
  }
  if (c.gpu_hour_price > 0) {
    row(out, "cost per step", fmt::format("{:.4g}", c.cost_per_step));
    row(out, "cost per million tokens", fmt::format("{:.4g}", c.cost_per_mtoken));
  } else {
    out << "cost: no GPU-hour price given (--set cluster.gpu_hour_price=PRICE)\n";
  }
}

void write_breakdown(const Report& r, std::ostream& out) {
  const Breakdown& b = r.breakdown_s;
  const double step = r.step_time_s;
  out << '\n';
  row(out, "breakdown of the step", "time", "of step");
  row(out, "  compute", duration(b.compute), percent(b.compute, step));
  if (r.compute_slowdown_s > 0)
    row(out, "    slowed by overlapping comm", duration(r.compute_slowdown_s), percent(r.compute_slowdown_s, step));
  row(out, "  exposed communication", duration(b.exposed_total()), percent(b.exposed_total(), step));
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    const double s = per_kind(b.exposed_comm, k);
    if (s > 0) row(out, fmt::format("    {}", to_string(static_cast<CommKind>(k))), duration(s), percent(s, step));
  }
  row(out, "  bubble", duration(b.bubble), percent(b.bubble, step));
  row(out, "  optimizer", duration(b.optimizer), percent(b.optimizer, step));
  row(out, "  other", duration(b.other), percent(b.other, step));
  const double own = r.host.breakdown_gpu_wait_s;
  if (own > 0) row(out, "    GPU waiting for the host", duration(own), percent(own, step));
  const double copies = r.offload_wait_s;
  if (copies > 0) row(out, "    waiting for offload copies", duration(copies), percent(copies, step));
  // Another stage's GPU waits longer for its host, and holds this one back (its bubble).
  if (r.host.gpu_wait_s <= own) return;
  out << '\n';
  row(out, fmt::format("host wait, {}", r.host.rank), duration(r.host.gpu_wait_s), percent(r.host.gpu_wait_s, step));
}

void write_comm(const Report& r, std::ostream& out) {
  out << '\n';
  row(out, "communication", "busy", "exposed");
  bool any = false;
  for (std::size_t k = 0; k < kCommKinds; ++k) {
    const double busy = per_kind(r.comm_s, k);
    const double exposed = per_kind(r.breakdown_s.exposed_comm, k);
    if (busy <= 0 && exposed <= 0) continue;
    any = true;
    row(out, fmt::format("  {}", to_string(static_cast<CommKind>(k))), duration(busy), duration(exposed));
  }
  if (!any) row(out, "  none", "");
  row(out, "hidden behind compute", fmt::format("{:.1f} %", 100.0 * r.overlap.hidden_fraction));
  row(out, "exposed, of the step", fmt::format("{:.1f} %", 100.0 * r.overlap.exposed_fraction_of_step));
}

void write_memory(const MemoryReport& m, std::ostream& out) {
  out << '\n';
  if (!m.modelled) return row(out, "memory per GPU", "not modelled");
  row(out, "memory per GPU", gib(m.device), m.fits ? "fits" : "too large");
  row(out, "  capacity", gib(m.capacity));
  row(out, "  headroom", gib(m.headroom));
  // What the GPU has in use beside the caching allocator: the CUDA context, NCCL's buffers.
  row(out, "  CUDA context, NCCL", gib(m.device - m.reserved));
  row(out, "  allocator reserved", gib(m.reserved));
  row(out, "  tensors at the peak", gib(m.peak));
  row(out, "  parameters", gib(m.params));
  row(out, "  gradients", gib(m.grads));
  row(out, "  optimizer state", gib(m.optimizer));
  row(out, "  activations", gib(m.activations));
  row(out, "  buffers", gib(m.buffers));
}

// One row per pipeline stage: where its time goes and its memory in use (as "memory per GPU",
// which is the largest stage's).
void write_stages(const Report& r, std::ostream& out) {
  if (r.stages.size() < 2) return;
  out << "\npipeline stages"
      << fmt::format("{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}\n", "compute", "slowdown", "exposed", "bubble",
                     "optimizer", "other", "memory");
  auto ms = [](double s) { return fmt::format("{:.1f} ms", s * 1e3); };
  for (const StageReport& st : r.stages) {
    const Breakdown& b = st.breakdown_s;
    const std::string memory =
        st.memory_bytes.modelled ? fmt::format("{:.1f} GiB", st.memory_bytes.device / 1073741824.0) : "-";
    out << fmt::format("  stage {:<7}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}\n", st.stage, ms(b.compute),
                       ms(st.compute_slowdown_s), ms(b.exposed_total()), ms(b.bubble), ms(b.optimizer), ms(b.other),
                       memory);
  }
}

// The cause of the exposure and the simulated alternatives, best first.
void write_advice(const Report& r, std::ostream& out) {
  if (r.advice_cause.empty()) return;
  out << "\nadvice: " << r.advice_cause << '\n';
  if (r.advice.empty()) return;
  out << fmt::format("  {:<66}{:>12}{:>10}{:>10}\n", "change (simulated)", "step", "vs now", "exposed");
  for (const Advice& a : r.advice) {
    if (a.status != "ok") continue;
    out << fmt::format("  {:<66}{:>12}{:>+9.1f}%{:>9.1f}%\n", a.change, duration(a.step_time_s),
                       100.0 * (a.step_time_s / r.step_time_s - 1.0), 100.0 * a.exposed_fraction_of_step);
  }
  for (const Advice& a : r.advice)
    if (a.status != "ok") out << fmt::format("  {}: {}\n", a.change, a.status);
}

// Only when ranks differ: several simulated per stage, or collectives that waited for peers.
void write_ranks(const Report& r, std::ostream& out) {
  const RanksReport& k = r.ranks;
  double waited = 0;
  for (double w : k.rendezvous_wait_s) waited += w;
  if (k.simulated <= static_cast<int>(std::max<std::size_t>(r.stages.size(), 1)) && waited <= 0) return;
  out << '\n';
  row(out, fmt::format("ranks ({} simulated)", k.simulated), "min", "median");
  const auto spread = [&](const char* label, const RankSpread& s) {
    row(out, label, duration(s.min), duration(s.median));
    row(out, "", fmt::format("max {}", duration(s.max)), fmt::format("rank {}", s.max_rank));
  };
  spread("  step time", k.step_time_s);
  spread("  compute", k.compute_s);
  row(out, "waited for peers (per rank)", "mean", "max");
  for (std::size_t i = 0; i < kCommKinds; ++i)
    if (k.rendezvous_wait_max_s[i] > 0)
      row(out, fmt::format("  {}", to_string(static_cast<CommKind>(i))), duration(k.rendezvous_wait_s[i]),
          duration(k.rendezvous_wait_max_s[i]));
  if (k.straggler.rank < 0) return;
  out << fmt::format("straggler: rank {}, {}; peers waited {} for it\n", k.straggler.rank, k.straggler.cause,
                     duration(k.straggler.caused_wait_s));
}

void write_notes(const std::vector<std::string>& notes, std::ostream& out) {
  if (notes.empty()) return;
  out << "\nnotes\n";
  for (const std::string& n : notes) out << "  - " << n << '\n';
}

}  // namespace

void write_table(const Report& report, std::ostream& out) {
  write_header(report, out);
  write_breakdown(report, out);
  write_comm(report, out);
  write_memory(report.memory_bytes, out);
  write_stages(report, out);
  write_cost(report.cost, out);
  if (!report.flop_convention.empty()) out << "\nFLOPs: " << report.flop_convention << '\n';
  write_advice(report, out);
  write_ranks(report, out);
  write_notes(report.notes, out);
}

}  // namespace stepsim::report
