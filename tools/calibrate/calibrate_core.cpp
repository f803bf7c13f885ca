// stepsim-calibrate without a GPU: sweep plans, statistics and the output file.
#include "calibrate_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "calibration/apply.hpp"
#include "calibration/nccl_import.hpp"

namespace stepsim::calibrate_tool {

std::vector<GemmShape> gemm_plan(std::size_t limit) {
  // (hidden, ffn, kv width) of Llama-3 8B, Llama-3 70B and GPT-3 175B.
  struct Dims {
    long long hidden, ffn, kv;
  };
  constexpr Dims kModels[] = {{4096, 14336, 1024}, {8192, 28672, 1024}, {12288, 49152, 12288}};
  constexpr long long kTokens[] = {2048, 8192, 16384};
  constexpr long long kTp[] = {1, 2, 4, 8};
  std::set<GemmShape> shapes;
  for (const Dims& d : kModels)
    for (long long t : kTokens)
      for (long long tp : kTp) {
        const long long qkv = (d.hidden + 2 * d.kv) / tp, ffn = d.ffn / tp, h = d.hidden;
        for (const auto& [m, n, k] : {std::tuple{t, qkv, h}, {t, h, h / tp}, {t, ffn, h}, {t, h, ffn}}) {
          shapes.insert({m, n, k});  // forward
          shapes.insert({m, k, n});  // data gradient
          shapes.insert({k, n, m});  // weight gradient
        }
      }
  std::vector<GemmShape> all(shapes.begin(), shapes.end());
  std::sort(all.begin(), all.end(), [](const GemmShape& a, const GemmShape& b) {
    return a.flops() != b.flops() ? a.flops() < b.flops() : a < b;
  });
  if (limit == 0 || all.size() <= limit) return all;
  std::vector<GemmShape> out;
  for (std::size_t i = 0; i < limit; ++i) out.push_back(all[i * (all.size() - 1) / (limit - 1 == 0 ? 1 : limit - 1)]);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

GemmRequest parse_gemm(const std::string& text) {
  const auto fail = [&]() -> GemmRequest {
    throw std::invalid_argument(
        fmt::format("--gemm: expected MxNxK[:bf16|fp8] with whole M, N, K from 1 to 16777216, got '{}'", text));
  };
  const std::size_t colon = text.find(':');
  const std::string dims = text.substr(0, colon);
  GemmRequest out;
  if (colon != std::string::npos) {
    const std::string d = text.substr(colon + 1);
    if (d != "bf16" && d != "fp8") return fail();  // what the measuring program's GEMMs run
    out.dtype = d == "fp8" ? Precision::fp8 : Precision::bf16;
  }
  long long* fields[] = {&out.shape.m, &out.shape.n, &out.shape.k};
  std::size_t at = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t end = i < 2 ? dims.find('x', at) : dims.size();
    if (end == std::string::npos || end == at || end - at > 8) return fail();
    const std::string part = dims.substr(at, end - at);
    if (part.find_first_not_of("0123456789") != std::string::npos) return fail();
    *fields[i] = std::stoll(part);
    if (*fields[i] < 1 || *fields[i] > (1LL << 24)) return fail();
    at = end + 1;
  }
  return out;
}

std::vector<unsigned char> random_inputs(std::size_t bytes, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> low(0, 0x7e), exponent(0x38, 0x3f), sign(0, 1);
  std::vector<unsigned char> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    out[i] = static_cast<unsigned char>(i % 2 == 0 ? low(gen) : exponent(gen) | (sign(gen) << 7));
  return out;
}

std::vector<double> size_plan(double min_bytes, double max_bytes, double factor) {
  if (!(min_bytes >= 1) || !(max_bytes >= min_bytes) || !(factor > 1))
    throw std::invalid_argument(
        fmt::format("expected 1 <= min <= max and factor > 1, got {:g}, {:g}, {:g}", min_bytes, max_bytes, factor));
  std::vector<double> out;
  for (double s = min_bytes; s <= max_bytes * (1 + 1e-12); s *= factor) out.push_back(std::round(s));
  return out;
}

std::vector<int> group_sizes(int gpus) {
  std::vector<int> out;
  for (int g = 2; g < gpus; g *= 2) out.push_back(g);
  if (gpus >= 2) out.push_back(gpus);
  return out;
}

Summary summarize(std::vector<double> samples, const std::string& what) {
  if (samples.empty()) throw std::runtime_error(what + ": no timing was taken");
  for (double x : samples)
    if (!std::isfinite(x) || x <= 0)
      throw std::runtime_error(fmt::format("{}: a timing of {:g} us is not a measurement", what, x));
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  Summary s;
  s.median = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.min = samples.front();
  s.max = samples.back();
  s.samples = static_cast<int>(n);
  return s;
}

namespace {

// One variable's value as a table names it: "" for unset or NCCL's own choice.
template <class Named>
std::string forced_name(const char* variable, const char* value, const char* choices, Named named) {
  if (value == nullptr || *value == '\0') return "";
  const auto setting = named(value);
  if (!setting)
    throw std::invalid_argument(fmt::format(
        "{}={}: expected one of {} (or the variable unset): a calibration table stands for one forced setting "
        "or NCCL's own choice",
        variable, value, choices));
  if (*setting == std::remove_cvref_t<decltype(*setting)>::automatic) return "";
  return collectives::to_string(*setting);
}

}  // namespace

RunSettings nccl_forced(const char* nccl_algo, const char* nccl_proto) {
  return {forced_name("NCCL_ALGO", nccl_algo, "Ring, Tree, NVLS, NVLSTree, CollnetDirect, PAT",
                      calibration::algorithm_named),
          forced_name("NCCL_PROTO", nccl_proto, "LL, LL128, Simple", calibration::protocol_named)};
}

Recorder::Recorder(calibration::Provenance provenance, RunSettings forced) : forced_(std::move(forced)) {
  c_.provenance = std::move(provenance);
}

void Recorder::gemm(const GemmShape& s, Precision dtype, const Summary& us) {
  c_.compute.gemm.push_back({s.m, s.n, s.k, dtype, us.median});
}

void Recorder::attention(const calibration::AttentionPoint& shape, const Summary& us) {
  calibration::AttentionPoint a = shape;
  a.time_us = us.median;
  c_.compute.attention.push_back(a);
}

void Recorder::copy(double bytes_moved, const Summary& us) {
  c_.compute.memory.push_back({bytes_moved, bytes_moved / (us.median * 1e3)});
}

void Recorder::launch_overhead(const Summary& us) { c_.compute.launch_overhead_us = us.median; }

void Recorder::collective(CollOp op, int ranks, double bytes, const Summary& us) {
  auto it = std::find_if(c_.collectives.begin(), c_.collectives.end(),
                         [&](const calibration::CollectiveTable& t) { return t.op == op && t.ranks == ranks; });
  if (it == c_.collectives.end()) {
    calibration::CollectiveTable t;
    t.op = op;
    t.ranks = ranks;
    t.nodes = 1;
    t.ranks_per_node = ranks;
    if (!point_to_point(op)) {  // NCCL_ALGO and NCCL_PROTO do not reach sends and receives
      t.algorithm = forced_.algorithm;
      t.protocol = forced_.protocol;
    }
    c_.collectives.push_back(t);
    it = c_.collectives.end() - 1;
  }
  it->points.push_back({bytes, us.median});
}

void Recorder::slowdown(const Summary& alone, const Summary& beside) {
  c_.compute.comm_slowdown = std::max(0.0, beside.median / alone.median - 1.0);
}

std::string Recorder::json(std::vector<std::string>* left_out) const {
  calibration::Calibration c = c_;
  for (auto& t : c.collectives) {
    std::sort(t.points.begin(), t.points.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
    t.fit = calibration::fit_alpha_beta(t.points, t.op, t.ranks, 0.0);
  }
  std::vector<std::string> notes = calibration::leave_out_unreadable(c);
  if (left_out != nullptr) *left_out = std::move(notes);
  return calibration::calibration_json(c);
}

}  // namespace stepsim::calibrate_tool
