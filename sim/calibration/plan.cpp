// The measurement plan: nccl-tests and stepsim-calibrate command lines for a scenario's needs.
#include "calibration/plan.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <cmath>

#include "calibration/nccl_import.hpp"
#include "collectives/collective.hpp"

namespace stepsim::calibration {
namespace {

// A power of two in nccl-tests' size syntax: 512, 1K, 64M, 4G.
std::string size_text(double bytes) {
  const auto b = static_cast<long long>(bytes);
  for (const auto& [unit, scale] : {std::pair{"G", 1LL << 30}, {"M", 1LL << 20}, {"K", 1LL << 10}})
    if (b >= scale && b % scale == 0) return fmt::format("{}{}", b / scale, unit);
  return fmt::format("{}", b);
}

double power_below(double bytes) { return std::exp2(std::floor(std::log2(std::max(bytes, 1.0)))); }
double power_above(double bytes) { return std::exp2(std::ceil(std::log2(std::max(bytes, 1.0)))); }

PlannedRun collective_run(const CollectiveNeed& n, CollectivesSpec forced) {
  const double b = power_below(n.min_bytes), e = power_above(n.max_bytes);
  // Open MPI's mpirun: -N ranks per node, and -x to set a variable on every rank (a variable
  // set before mpirun reaches only the ranks of the node it runs on).
  std::string env;
  if (point_to_point(n.op)) forced = CollectivesSpec{};  // NCCL_ALGO and NCCL_PROTO do not reach them
  if (const std::string a = nccl_algo_name(forced.algorithm); !a.empty()) env += " -x NCCL_ALGO=" + a;
  if (const std::string p = nccl_proto_name(forced.protocol); !p.empty()) env += " -x NCCL_PROTO=" + p;
  // NCCL says what the environment forced ("NCCL_ALGO set by environment to Ring") at INFO in
  // its ENV subsystem: the line import-nccl-tests reads to label the table as forced.
  if (!env.empty()) env += " -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=ENV";
  const std::string per_node = n.nodes > 1 ? fmt::format(" -N {}", n.ranks_per_node) : "";
  return {fmt::format("{} {} ranks on {} node(s) x {}, {}, {} to {}", to_string(n.op), n.ranks, n.nodes,
                      n.ranks_per_node, n.dtype, size_text(b), size_text(e)),
          fmt::format("mpirun -np {}{}{} {} -b {} -e {} -f 2 -g 1 -d {}", n.ranks, per_node, env,
                      nccl_test_program(n.op), size_text(b), size_text(e), n.dtype)};
}

// stepsim-calibrate times BF16 and FP8 GEMMs; shapes of other precisions are named, with no
// command (nothing at hand measures them).
std::vector<PlannedRun> gemm_runs(const std::vector<GemmNeed>& gemms) {
  std::string shapes, others;
  std::size_t measurable = 0;
  for (const GemmNeed& g : gemms) {
    const std::string shape = fmt::format("{}x{}x{}:{}", g.m, g.n, g.k, to_string(g.dtype));
    const bool measured = g.dtype == Precision::bf16 || g.dtype == Precision::fp8;
    (measured ? shapes : others) += (measured ? " --gemm " : " ") + shape;
    measurable += measured ? 1 : 0;
  }
  std::vector<PlannedRun> out;
  if (measurable > 0)
    out.push_back({fmt::format("{} GEMM shape(s)", measurable), "stepsim-calibrate -o gemm.calib.json" + shapes});
  if (!others.empty())
    out.push_back({fmt::format("{} GEMM shape(s) stepsim-calibrate does not time (bf16 and fp8 only):{}",
                               gemms.size() - measurable, others),
                   ""});
  return out;
}

}  // namespace

const char* nccl_type_of(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "float";
    case Precision::fp16:
      return "half";
    case Precision::tf32:
      return "float";
    case Precision::bf16:
    case Precision::fp8:
    case Precision::mxfp8:
    case Precision::nvfp4:
      break;  // the low-precision formats are GEMM inputs; what is communicated stays BF16
  }
  return "bfloat16";
}

std::string collective_type(const Scenario& s, CollOp op, CommKind kind) {
  const bool reduces = op == CollOp::allreduce || op == CollOp::reducescatter;
  if (reduces && (kind == CommKind::dp || kind == CommKind::fsdp))
    return nccl_type_of(s.data_parallel.grad_reduce_dtype);
  return nccl_type_of(s.training.precision);
}

std::vector<PlannedRun> plan_runs(const CalibrationNeeds& needs) {
  std::vector<PlannedRun> out;
  for (const CollectiveNeed& n : needs.collectives) out.push_back(collective_run(n, needs.forced));
  for (PlannedRun& r : gemm_runs(needs.gemms)) out.push_back(std::move(r));
  return out;
}

std::string plan_json(const CalibrationNeeds& needs, const std::vector<PlannedRun>& runs) {
  boost::json::array collectives, gemms, commands;
  for (const CollectiveNeed& n : needs.collectives)
    collectives.push_back({{"op", to_string(n.op)},
                           {"ranks", n.ranks},
                           {"nodes", n.nodes},
                           {"ranks_per_node", n.ranks_per_node},
                           {"dtype", n.dtype},
                           {"min_bytes", n.min_bytes},
                           {"max_bytes", n.max_bytes}});
  for (const GemmNeed& g : needs.gemms)
    gemms.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"dtype", to_string(g.dtype)}});
  for (const PlannedRun& r : runs) commands.push_back({{"what", r.what}, {"command", r.command}});
  const boost::json::object doc{
      {"collectives", std::move(collectives)}, {"gemms", std::move(gemms)}, {"commands", std::move(commands)}};
  return boost::json::serialize(doc) + "\n";
}

}  // namespace stepsim::calibration
