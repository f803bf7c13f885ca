// The compute model's efficiencies from measured kernels, through the GPU model itself. A
// compute-bound kernel's model time is inversely proportional to its maximum efficiency
// (gemm_max, fp8_gemm_max, attention_max) and a memory-bound one's to hbm, so each is the
// preset scaled by model / measured time; gemm_half_flops bends the GEMM curve by size and
// gemm_half_k by inner dimension, each the value (searched on a log scale, in turn) that leaves
// the smallest relative error once both GEMM maxima are scaled. Slowdown: a kernel that ran
// o µs beside communication progresses at 1 / (1 + s) then, so Σo / Σ(t0 − t + o) = 1 + s.
#include "calibration/trace_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "hardware/gpu_model.hpp"

namespace stepsim::calibration {
namespace {

using Kernels = std::vector<const MeasuredKernel*>;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double rms(const std::vector<double>& rel) {
  double s = 0;
  for (double r : rel) s += r * r;
  return rel.empty() ? 0 : std::sqrt(s / static_cast<double>(rel.size()));
}

bool alone(const MeasuredKernel& k) { return k.matched && k.overlap_us <= 0; }

// Bound by its FLOPs (or by its bytes) by a clear margin, and above the kernel floor: its
// time says something about that efficiency.
bool compute_bound(const hardware::GpuModel& m, const MeasuredKernel& k) {
  const Time c = m.compute_time(k.op);
  return c.us() > 1.05 * m.memory_time(k.op).us() && c.us() > 1.05 * m.floor(k.op).us();
}
bool memory_bound(const hardware::GpuModel& m, const MeasuredKernel& k) {
  const Time b = m.memory_time(k.op);
  return b.us() > 1.05 * m.compute_time(k.op).us() && b.us() > 1.05 * m.floor(k.op).us();
}

// The efficiencies being fitted and the kernels each speaks for.
struct Fit {
  const std::vector<MeasuredKernel>& all;
  GpuSpec gpu;
  Precision precision;

  hardware::GpuModel model() const { return {gpu, precision}; }

  Kernels gemms(bool fp8) const {
    const hardware::GpuModel m = model();
    return select([&](const MeasuredKernel& k) {
      return k.op.cls == workload::OpClass::gemm && k.op.fp8 == fp8 && alone(k) && compute_bound(m, k);
    });
  }
  Kernels attention() const {
    const hardware::GpuModel m = model();
    return select([&](const MeasuredKernel& k) {
      return k.op.cls == workload::OpClass::attention && alone(k) && compute_bound(m, k);
    });
  }
  Kernels memory() const {
    const hardware::GpuModel m = model();
    return select([&](const MeasuredKernel& k) { return k.op.bytes.count() > 0 && alone(k) && memory_bound(m, k); });
  }
  template <class Use>
  Kernels select(Use use) const {
    Kernels out;
    for (const auto& k : all)
      if (use(k)) out.push_back(&k);
    return out;
  }

  // Model over measured time of each kernel.
  std::vector<double> ratios(const Kernels& ks) const {
    const hardware::GpuModel m = model();
    std::vector<double> r;
    r.reserve(ks.size());
    for (const auto* k : ks) r.push_back(m.duration(k->op).us() / k->time_us);
    return r;
  }
  std::vector<double> errors(const Kernels& ks) const {
    std::vector<double> e = ratios(ks);
    for (double& x : e) x -= 1.0;
    return e;
  }
};

// The factor a on model times (a = old / new efficiency) that best fits measured ones in
// relative terms: the least squares of a·r − 1.
double least_squares_factor(const std::vector<double>& r) {
  double s = 0, s2 = 0;
  for (double x : r) (s += x, s2 += x * x);
  return s2 > 0 ? s / s2 : 1.0;
}

// Relative squared error of the GEMMs once both maxima are scaled to them with `field` at h.
double gemm_error(Fit& f, const Kernels (&groups)[2], double GpuEfficiency::*field, double h) {
  f.gpu.efficiency.*field = h;
  double err = 0;
  for (const Kernels& g : groups) {
    if (g.empty()) continue;
    const std::vector<double> r = f.ratios(g);
    const double a = least_squares_factor(r);
    for (double x : r) err += (a * x - 1) * (a * x - 1);
  }
  return err;
}

// Golden-section search of log h over [from, to] for `field`.
double search_half(Fit& f, const Kernels (&groups)[2], double GpuEfficiency::*field, double from, double to) {
  const double phi = 0.5 * (std::sqrt(5.0) - 1);
  double lo = std::log(from), hi = std::log(to);
  double x1 = hi - phi * (hi - lo), x2 = lo + phi * (hi - lo);
  double e1 = gemm_error(f, groups, field, std::exp(x1)), e2 = gemm_error(f, groups, field, std::exp(x2));
  for (int i = 0; i < 80; ++i) {
    if (e1 <= e2) {
      hi = x2, x2 = x1, e2 = e1;
      x1 = hi - phi * (hi - lo);
      e1 = gemm_error(f, groups, field, std::exp(x1));
    } else {
      lo = x1, x1 = x2, e1 = e2;
      x2 = lo + phi * (hi - lo);
      e2 = gemm_error(f, groups, field, std::exp(x2));
    }
  }
  return std::exp(0.5 * (lo + hi));
}

// gemm_half_k over [1, 1e5] elements, or 0 (no depth term) where that fits at least as well.
double search_depth(Fit& f, const Kernels (&groups)[2]) {
  const double k = search_half(f, groups, &GpuEfficiency::gemm_half_k, 1.0, 1e5);
  const double with = gemm_error(f, groups, &GpuEfficiency::gemm_half_k, k);
  return gemm_error(f, groups, &GpuEfficiency::gemm_half_k, 0.0) <= with ? 0.0 : k;
}

bool several_sizes(const Kernels (&groups)[2]) {
  double first = -1;
  for (const Kernels& g : groups)
    for (const auto* k : g) {
      if (first < 0) first = k->op.flops;
      if (k->op.flops != first) return true;
    }
  return false;
}

// GEMMs whose inner dimensions K differ by at least a factor 2 (gemm_half_k bends the curve
// only between them).
bool several_depths(const Fit& f, const Kernels (&groups)[2]) {
  const hardware::GpuModel m = f.model();
  double lo = 0, hi = 0;
  for (const Kernels& g : groups)
    for (const auto* k : g) {
      const double depth = m.depth_k(k->op);
      if (depth <= 0) continue;
      lo = lo > 0 ? std::min(lo, depth) : depth;
      hi = std::max(hi, depth);
    }
  return lo > 0 && hi >= 2 * lo;
}

void record(const Fit& f, const Kernels& ks, FittedValue& v, double value) {
  v.fitted = value;
  v.kernels = static_cast<int>(ks.size());
  v.residual = rms(f.errors(ks));
}

// Scales `field` by the least-squares (or median) factor of its kernels' model / measured time.
void scale(Fit& f, const Kernels& ks, double GpuEfficiency::*field, bool robust) {
  if (ks.empty()) return;
  const std::vector<double> r = f.ratios(ks);
  const double a = robust ? 1.0 / median(r) : least_squares_factor(r);
  f.gpu.efficiency.*field /= a;
}

void fit_gemm(Fit& f, FittedValue& bf16, FittedValue& fp8, FittedValue& half, FittedValue& depth) {
  Kernels groups[2];
  // Size and depth both bend the curve: each searched with the other held, in turn, until
  // neither moves (the kernels that count as compute-bound are chosen again each round).
  GpuEfficiency& e = f.gpu.efficiency;
  const auto moved = [](double before, double after) { return std::abs(after - before) > 1e-6 * std::abs(before); };
  for (int round = 0; round < 30; ++round) {
    groups[0] = f.gemms(false);
    // NVFP4's GEMMs run at fp4_gemm_max, which calibration files do not hold: they fit nothing.
    if (f.precision != Precision::nvfp4) groups[1] = f.gemms(true);
    if (groups[0].empty() && groups[1].empty()) break;
    const double half_before = e.gemm_half_flops, depth_before = e.gemm_half_k;
    if (several_sizes(groups)) e.gemm_half_flops = search_half(f, groups, &GpuEfficiency::gemm_half_flops, 1e3, 1e15);
    if (several_depths(f, groups)) e.gemm_half_k = search_depth(f, groups);
    scale(f, groups[0], &GpuEfficiency::gemm_max, false);
    scale(f, groups[1], &GpuEfficiency::fp8_gemm_max, false);
    if (round >= 2 && !moved(half_before, e.gemm_half_flops) && !moved(depth_before, e.gemm_half_k)) break;
  }
  if (!groups[0].empty()) record(f, groups[0], bf16, e.gemm_max);
  if (!groups[1].empty()) record(f, groups[1], fp8, e.fp8_gemm_max);
  Kernels both = groups[0];
  both.insert(both.end(), groups[1].begin(), groups[1].end());
  if (several_sizes(groups)) record(f, both, half, e.gemm_half_flops);
  if (several_depths(f, groups)) record(f, both, depth, e.gemm_half_k);
  const char* none = "no compute-bound GEMM kernel of a known op ran without communication";
  if (!bf16.fitted) bf16.why_not = none;
  if (!fp8.fitted)
    fp8.why_not = f.precision == Precision::nvfp4
                      ? "the run's low-precision GEMMs are NVFP4 (fp4_gemm_max is not fitted "
                        "from traces)"
                  : low_precision(f.precision) ? "no compute-bound FP8 GEMM kernel of a known op ran without "
                                                 "communication"
                                               : "the run has no FP8 GEMMs (training.precision is not fp8)";
  if (!half.fitted) half.why_not = both.empty() ? none : "the GEMM kernels that ran alone are all of one size";
  if (!depth.fitted)
    depth.why_not = both.empty() ? none : "the GEMM kernels that ran alone do not differ in K by a factor of 2";
}

// One efficiency from the median of what each of its kernels implies.
void fit_one(Fit& f, Kernels (Fit::*kernels)() const, double GpuEfficiency::*field, FittedValue& v, const char* none) {
  Kernels ks;
  for (int round = 0; round < 2; ++round) {
    ks = (f.*kernels)();
    scale(f, ks, field, true);
  }
  if (ks.empty()) {
    v.why_not = none;
    return;
  }
  record(f, ks, v, f.gpu.efficiency.*field);
}

void fit_slowdown(const Fit& f, FittedValue& v) {
  const hardware::GpuModel m = f.model();
  double overlap = 0, progress = 0;
  std::vector<std::pair<const MeasuredKernel*, double>> used;  // with its model time alone
  for (const auto& k : f.all) {
    if (!k.matched || k.overlap_us <= 0) continue;
    const double t0 = m.duration(k.op).us();
    if (t0 <= 1.05 * m.floor(k.op).us()) continue;
    overlap += k.overlap_us;
    progress += t0 - k.time_us + k.overlap_us;
    used.emplace_back(&k, t0);
  }
  if (used.empty() || progress <= 0) {
    v.why_not = "no kernel of a known op ran beside a communication kernel";
    return;
  }
  const double s = std::max(0.0, overlap / progress - 1.0);
  v.fitted = s;
  std::vector<double> rel;
  for (const auto& [k, t0] : used) rel.push_back((t0 + k->overlap_us * s / (1 + s) - k->time_us) / k->time_us);
  v.kernels = static_cast<int>(used.size());
  v.residual = rms(rel);
}

// A fitted value the trace cannot stand for: left unfitted, with the reason.
void leave_out(FittedValue& v, std::string why) {
  v.why_not = std::move(why);
  v.fitted.reset();
  v.implausible = true;
}

// Leaves unfitted, with a note, each of `keys` that the kernels put out of a calibration file's
// bounds; returns the first so left out.
std::string leave_out_implausible(TraceFit& fit, std::initializer_list<const char*> keys) {
  std::string first;
  for (const char* key : keys) {
    FittedValue& v = *fit.find(key);
    if (!v.fitted) continue;
    const std::string why = out_of_bounds(v.key, *v.fitted);
    if (why.empty()) continue;
    leave_out(v, fmt::format("the kernels imply {:.4g}, {}: the trace is not of this scenario", *v.fitted, why));
    if (first.empty()) first = key;
  }
  return first;
}

// The GEMM curve's values are fitted together: a maximum out of bounds takes the others with
// it, and the fits after it (attention, which shares the size curve) see the preset's curve.
void leave_out_implausible_gemm(Fit& f, TraceFit& fit, const GpuEfficiency& preset) {
  static constexpr const char* kCurve[] = {"gemm_max", "fp8_gemm_max", "gemm_half_flops", "gemm_half_k"};
  const std::string refused = leave_out_implausible(fit, {"gemm_max", "fp8_gemm_max"});
  if (refused.empty()) return;
  for (const char* key : kCurve) {
    FittedValue& v = *fit.find(key);
    if (v.fitted)
      leave_out(v, fmt::format("fitted with {}, which the kernels put out of bounds: the trace is not of this scenario",
                               refused));
  }
  for (const EfficiencyField& e : kEfficiencyFields)
    for (const char* key : kCurve)
      if (std::string_view(e.key) == key) f.gpu.efficiency.*e.preset = preset.*e.preset;
}

}  // namespace

std::string out_of_bounds(const std::string& key, double value) {
  for (const EfficiencyField& f : kEfficiencyFields) {
    if (key != f.key || (value >= f.lo && value <= f.hi)) continue;
    if (value > f.hi && f.hi == 1.0)
      return fmt::format("above 1, faster than the GPU's {}", key == "hbm" ? "HBM bandwidth" : "peak");
    if (value > f.hi) return fmt::format("above {:g}, the most a calibration file holds", f.hi);
    return fmt::format("below {:g}, the least a calibration file holds", f.lo);
  }
  return "";
}

FittedEfficiency TraceFit::efficiency() const {
  FittedEfficiency e;
  for (const auto& v : values)
    for (const EfficiencyField& f : kEfficiencyFields)
      if (v.fitted && v.key == f.key) e.*f.fitted = v.fitted;
  return e;
}

FittedValue* TraceFit::find(const std::string& key) {
  for (auto& v : values)
    if (v.key == key) return &v;
  return nullptr;
}

TraceFit fit_kernels(const std::vector<MeasuredKernel>& ks, const GpuSpec& gpu, Precision precision) {
  TraceFit out;
  for (const EfficiencyField& f : kEfficiencyFields)
    out.values.push_back({f.key, gpu.efficiency.*f.preset, std::nullopt, 0, 0, ""});
  Fit f{ks, gpu, precision};
  f.model();  // refuses a GPU without the run's peak before anything is fitted
  fit_gemm(f, *out.find("gemm_max"), *out.find("fp8_gemm_max"), *out.find("gemm_half_flops"),
           *out.find("gemm_half_k"));
  leave_out_implausible_gemm(f, out, gpu.efficiency);
  fit_one(f, &Fit::attention, &GpuEfficiency::attention_max, *out.find("attention_max"),
          "no attention kernel of a known op ran without communication");
  fit_one(f, &Fit::memory, &GpuEfficiency::hbm, *out.find("hbm"),
          "no memory-bound kernel of a known op ran without communication");
  fit_slowdown(f, *out.find("comm_slowdown"));
  leave_out_implausible(out, {"attention_max", "hbm", "comm_slowdown"});
  return out;
}

std::optional<double> scale_by_totals(double preset, double simulated_us, double measured_us) {
  if (!(simulated_us > 0) || !(measured_us > 0)) return std::nullopt;
  return preset * simulated_us / measured_us;
}

}  // namespace stepsim::calibration
