// The compute model's efficiencies from measured kernels. GEMM: t = (F + F½) / (peak · max)
// is a line in F, so a least-squares line through the compute-bound GEMMs gives max and F½.
// Attention and HBM: the median of each kernel's implied efficiency. Slowdown: a kernel that
// ran o µs beside communication progresses at 1 / (1 + s) then, so Σo / Σ(t0 − t + o) = 1 + s.
#include "calibration/trace_fit.hpp"

#include <algorithm>
#include <cmath>

#include "hardware/gpu_model.hpp"

namespace stepsim::calibration {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Model {
  double peak, fp32, bandwidth, kernel_min_us;
  GpuEfficiency e;
  GpuArch arch;

  // Of the fitted maximum, what the kernel reaches (the GPU model's own factor).
  double share(const MeasuredKernel& k) const {
    return k.cls == workload::OpClass::attention ? hardware::attention_share(k.flash2, arch) : 1.0;
  }
  double compute_us(const MeasuredKernel& k) const {
    const bool tensor = k.cls == workload::OpClass::gemm || k.cls == workload::OpClass::attention;
    if (!tensor) return k.flops / fp32 * 1e6;
    const double max = k.cls == workload::OpClass::gemm ? e.gemm_max : e.attention_max;
    return (k.flops + e.gemm_half_flops) / (peak * max * share(k)) * 1e6;
  }
  double memory_us(const MeasuredKernel& k) const { return k.bytes / (bandwidth * e.hbm) * 1e6; }
  double time_us(const MeasuredKernel& k) const { return std::max({compute_us(k), memory_us(k), kernel_min_us}); }
  // Bound by its FLOPs by a clear margin, and above the floor: its time says something about
  // the compute efficiency.
  bool compute_bound(const MeasuredKernel& k) const {
    return compute_us(k) > 1.05 * memory_us(k) && compute_us(k) > 1.05 * kernel_min_us;
  }
  bool memory_bound(const MeasuredKernel& k) const {
    return memory_us(k) > 1.05 * compute_us(k) && memory_us(k) > 1.05 * kernel_min_us;
  }
};

double rms(const std::vector<double>& rel) {
  double s = 0;
  for (double r : rel) s += r * r;
  return rel.empty() ? 0 : std::sqrt(s / static_cast<double>(rel.size()));
}

bool alone(const MeasuredKernel& k) { return k.matched && k.overlap_us <= 0; }

void fit_gemm(const std::vector<MeasuredKernel>& ks, Model& m, FittedValue& max, FittedValue& half) {
  for (int round = 0; round < 3; ++round) {
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& k : ks) {
      if (k.cls != workload::OpClass::gemm || !alone(k) || !m.compute_bound(k)) continue;
      // Weighted by 1/t² so that each kernel counts by its relative error.
      const double w = 1.0 / (k.time_us * k.time_us), x = k.flops, y = k.time_us;
      n += w;
      sx += w * x;
      sy += w * y;
      sxx += w * x * x;
      sxy += w * x * y;
    }
    const double det = n * sxx - sx * sx;
    if (n == 0 || det <= 0) break;
    const double slope = (n * sxy - sx * sy) / det, intercept = (sy * sxx - sx * sxy) / det;
    if (!(slope > 0)) break;
    m.e.gemm_max = 1e6 / (m.peak * slope);
    m.e.gemm_half_flops = std::max(0.0, intercept / slope);
    max.fitted = m.e.gemm_max;
    half.fitted = m.e.gemm_half_flops;
  }
  std::vector<double> rel;
  for (const auto& k : ks)
    if (k.cls == workload::OpClass::gemm && alone(k) && m.compute_bound(k))
      rel.push_back((m.time_us(k) - k.time_us) / k.time_us);
  max.kernels = half.kernels = static_cast<int>(rel.size());
  max.residual = half.residual = rms(rel);
  if (!max.fitted) {
    max.why_not = half.why_not = rel.size() < 2
                                     ? "fewer than two compute-bound GEMM kernels that ran without communication"
                                     : "the GEMM times do not grow with their FLOPs";
    max.kernels = half.kernels = 0;
  }
}

// Efficiency of one class from the median of what each kernel implies, kernels chosen by
// `use`, the implied value by `implied`.
template <class Use, class Implied, class Set>
void fit_median(const std::vector<MeasuredKernel>& ks, Model& m, FittedValue& v, Use use, Implied implied, Set set,
                const char* none) {
  std::vector<double> values;
  for (int round = 0; round < 2; ++round) {
    values.clear();
    for (const auto& k : ks)
      if (use(k)) values.push_back(implied(k));
    if (values.empty()) break;
    set(median(values));
  }
  if (values.empty()) {
    v.why_not = none;
    return;
  }
  v.fitted = median(values);
  std::vector<double> rel;
  for (const auto& k : ks)
    if (use(k)) rel.push_back((m.time_us(k) - k.time_us) / k.time_us);
  v.kernels = static_cast<int>(rel.size());
  v.residual = rms(rel);
}

void fit_slowdown(const std::vector<MeasuredKernel>& ks, const Model& m, FittedValue& v) {
  double overlap = 0, progress = 0;
  std::vector<const MeasuredKernel*> used;
  for (const auto& k : ks) {
    if (!k.matched || k.overlap_us <= 0 || m.time_us(k) <= 1.05 * m.kernel_min_us) continue;
    overlap += k.overlap_us;
    progress += m.time_us(k) - k.time_us + k.overlap_us;
    used.push_back(&k);
  }
  if (used.empty() || progress <= 0) {
    v.why_not = "no kernel of a known op ran beside a communication kernel";
    return;
  }
  const double s = std::max(0.0, overlap / progress - 1.0);
  v.fitted = s;
  std::vector<double> rel;
  for (const auto* k : used) rel.push_back((m.time_us(*k) + k->overlap_us * s / (1 + s) - k->time_us) / k->time_us);
  v.kernels = static_cast<int>(used.size());
  v.residual = rms(rel);
}

}  // namespace

FittedEfficiency TraceFit::efficiency() const {
  FittedEfficiency e;
  for (const auto& v : values) {
    if (!v.fitted) continue;
    if (v.key == "gemm_max") e.gemm_max = v.fitted;
    if (v.key == "gemm_half_flops") e.gemm_half_flops = v.fitted;
    if (v.key == "attention_max") e.attention_max = v.fitted;
    if (v.key == "hbm") e.hbm = v.fitted;
    if (v.key == "comm_slowdown") e.comm_slowdown = v.fitted;
  }
  return e;
}

TraceFit fit_kernels(const std::vector<MeasuredKernel>& ks, const GpuSpec& gpu, Precision precision) {
  Model m{gpu.flops.for_precision(precision).flops_per_s(),
          gpu.flops.fp32.positive() ? gpu.flops.fp32.flops_per_s() : gpu.flops.for_precision(precision).flops_per_s(),
          gpu.memory_bandwidth.bytes_per_s(),
          gpu.efficiency.kernel_min.us(),
          gpu.efficiency,
          gpu.arch};
  TraceFit out;
  auto value = [](const char* key, double preset) {
    FittedValue v;
    v.key = key;
    v.preset = preset;
    return v;
  };
  FittedValue max = value("gemm_max", m.e.gemm_max), half = value("gemm_half_flops", m.e.gemm_half_flops),
              attention = value("attention_max", m.e.attention_max), hbm = value("hbm", m.e.hbm),
              slowdown = value("comm_slowdown", m.e.comm_slowdown);
  fit_gemm(ks, m, max, half);
  fit_median(
      ks, m, attention,
      [&](const MeasuredKernel& k) { return k.cls == workload::OpClass::attention && alone(k) && m.compute_bound(k); },
      [&](const MeasuredKernel& k) {
        return (k.flops + m.e.gemm_half_flops) / (m.peak * k.time_us * 1e-6) / m.share(k);
      },
      [&](double v) { m.e.attention_max = v; }, "no attention kernel of a known op ran without communication");
  fit_median(
      ks, m, hbm, [&](const MeasuredKernel& k) { return k.bytes > 0 && alone(k) && m.memory_bound(k); },
      [&](const MeasuredKernel& k) { return k.bytes / (m.bandwidth * k.time_us * 1e-6); },
      [&](double v) { m.e.hbm = v; }, "no memory-bound kernel of a known op ran without communication");
  fit_slowdown(ks, m, slowdown);
  out.values = {max, half, attention, hbm, slowdown};
  return out;
}

std::optional<double> scale_by_totals(double preset, double simulated_us, double measured_us) {
  if (!(simulated_us > 0) || !(measured_us > 0)) return std::nullopt;
  return preset * simulated_us / measured_us;
}

}  // namespace stepsim::calibration
