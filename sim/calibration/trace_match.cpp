// Matching a trace's kernels to a scenario's ops, and the fit by class totals.
#include "calibration/trace_match.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

namespace stepsim::calibration {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A profiler kernel's class from its name: cuBLAS/CUTLASS GEMMs, flash/fused attention,
// everything else memory-bound element-wise work.
workload::OpClass class_of_kernel(const std::string& name) {
  const std::string n = lower(name);
  for (const char* a : {"flash", "fmha", "attention", "attn"})
    if (n.find(a) != std::string::npos) return workload::OpClass::attention;
  for (const char* g : {"gemm", "xmma", "cutlass", "cublas", "nvjet", "matmul", "hmma", "wgmma", "s16816", "s1688"})
    if (n.find(g) != std::string::npos) return workload::OpClass::gemm;
  return workload::OpClass::elementwise;
}

// "L12 fc1" -> "fc1": stepsim's traces prefix an op with its layer.
std::string without_layer(const std::string& name) {
  if (name.size() < 3 || name[0] != 'L') return name;
  std::size_t i = 1;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == 1 || i >= name.size() || name[i] != ' ') return name;
  return name.substr(i + 1);
}

// "fc1 fwd (step 2/4)" -> "fc1 fwd" and 4 (parallelism's PieceNames); 1 for any other name.
std::string without_piece(const std::string& name, int& pieces) {
  pieces = 1;
  const std::size_t at = name.rfind(" (step ");
  if (at == std::string::npos || name.back() != ')') return name;
  const std::size_t slash = name.find('/', at);
  if (slash == std::string::npos) return name;
  pieces = std::max(1, std::atoi(name.c_str() + slash + 1));
  return name.substr(0, at);
}

// Overlap of [a, b) with the merged communication intervals.
double overlap_with(const std::vector<std::pair<double, double>>& comm, double a, double b) {
  double o = 0;
  for (const auto& [s, e] : comm) {
    if (s >= b) break;
    o += std::max(0.0, std::min(b, e) - std::max(a, s));
  }
  return o;
}

std::vector<std::pair<double, double>> comm_union(const std::vector<TraceKernel>& ks) {
  std::vector<std::pair<double, double>> v;
  for (const auto& k : ks)
    if (k.comm) v.emplace_back(k.start_us, k.end_us);
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& i : v) {
    if (!out.empty() && i.first <= out.back().second)
      out.back().second = std::max(out.back().second, i.second);
    else
      out.push_back(i);
  }
  return out;
}

// The ops (layer prefix kept) the trace shows run in pieces. The last piece carries the op's
// own name, so without the trace's FLOPs it cannot be told from the whole op.
std::set<std::string> split_ops(const std::vector<TraceKernel>& ks) {
  std::set<std::string> out;
  for (const auto& k : ks) {
    int pieces = 1;
    const std::string op = without_piece(k.name, pieces);
    if (pieces > 1) out.insert(op);
  }
  return out;
}

// The kernel as the model op (or piece) it stands for; nullopt when only its class is known.
std::optional<workload::OpCost> op_cost(const TraceKernel& k, const OpNames& names,
                                        const std::set<std::string>& split) {
  int pieces = 1;
  const workload::OpCost* op = op_of_kernel(names, k.name, pieces);
  if (op == nullptr) return std::nullopt;
  workload::OpCost cost = *op;
  if (k.work) {
    cost.flops = k.work->flops;
    cost.bytes = k.work->bytes;
    return cost;
  }
  if (pieces > 1 || split.count(k.name) > 0) return std::nullopt;
  return cost;
}

}  // namespace

void ClassTotals::add(workload::OpClass c, double us) {
  if (c == workload::OpClass::gemm)
    (gemm += us, ++n_gemm);
  else if (c == workload::OpClass::attention)
    (attention += us, ++n_attention);
  else
    (memory += us, ++n_memory);
}

OpNames op_names(const workload::ModelWork& w) {
  OpNames out;
  auto add = [&](const std::vector<workload::OpCost>& ops, bool recompute) {
    for (const auto& op : ops) {
      if (recompute)
        out[op.name + " recompute"] = op;
      else if (op.pass == workload::Pass::forward)
        out[op.name + " fwd"] = op;
      else
        out[op.name] = op;
    }
  };
  // A mixed stack's dense layers first: the ops both kinds share are the same.
  for (const auto* l : {&w.dense_layer, &w.layer, &w.pre, &w.post}) {
    add(l->forward, false);
    add(l->backward, false);
    add(l->recompute, true);
  }
  out["optimizer step"] = w.optimizer;
  return out;
}

const workload::OpCost* op_of_kernel(const OpNames& names, const std::string& kernel, int& pieces) {
  const auto it = names.find(without_piece(without_layer(kernel), pieces));
  return it == names.end() ? nullptr : &it->second;
}

Matched match_kernels(const std::vector<TraceKernel>& kernels, const OpNames& names) {
  Matched out;
  const auto comm = comm_union(kernels);
  const std::set<std::string> split = split_ops(kernels);
  for (const TraceKernel& k : kernels) {
    if (k.comm) {
      ++out.comm;
      ++out.comm_by_op[to_string(k.op)];
      continue;
    }
    MeasuredKernel m;
    m.time_us = k.end_us - k.start_us;
    m.overlap_us = overlap_with(comm, k.start_us, k.end_us);
    if (const auto cost = op_cost(k, names, split)) {
      m.op = *cost;
      m.matched = true;
      ++out.by_name;
    } else {
      m.op.cls = class_of_kernel(k.name);
      if (int pieces = 1; const auto* op = op_of_kernel(names, k.name, pieces)) m.op.cls = op->cls;
    }
    if (m.time_us <= 0) continue;
    out.totals.add(m.op.cls, m.time_us);
    out.kernels.push_back(m);
  }
  return out;
}

void fit_by_totals(TraceFit& fit, const Matched& m, const ClassTotals& sim, Precision precision) {
  for (auto& v : fit.values) {
    if (v.fitted || v.implausible) continue;
    if (m.by_name == 0 && (v.key == "gemm_half_flops" || v.key == "gemm_half_k" || v.key == "comm_slowdown"))
      v.why_not = "no kernel matched an op of the scenario by name, so no kernel's FLOPs are known";
    double simulated = 0, measured = 0;
    int n = 0;
    // Kernels known by class do not say their precision: under FP8 training the GEMM total
    // holds both kinds, and scales both maxima alike.
    const bool gemm = v.key == "gemm_max" || (v.key == "fp8_gemm_max" && precision == Precision::fp8);
    if (gemm) (simulated = sim.gemm, measured = m.totals.gemm, n = m.totals.n_gemm);
    if (v.key == "attention_max") (simulated = sim.attention, measured = m.totals.attention, n = m.totals.n_attention);
    if (v.key == "hbm") (simulated = sim.memory, measured = m.totals.memory, n = m.totals.n_memory);
    if (n == 0) {
      if (v.key == "attention_max") v.why_not = "the trace has no attention kernels (no transformer layers?)";
      continue;
    }
    if (const auto x = scale_by_totals(v.preset, simulated, measured); x && out_of_bounds(v.key, *x).empty()) {
      v.fitted = *x;
      v.kernels = n;
      v.residual = 0;
      v.why_not = "from class totals";
    } else if (x) {
      v.why_not =
          fmt::format("class totals imply {:.3g}, {}: the trace is not of this scenario", *x, out_of_bounds(v.key, *x));
    }
  }
}

}  // namespace stepsim::calibration
