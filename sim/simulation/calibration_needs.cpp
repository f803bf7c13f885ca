// The calibration a scenario needs, collected from the costs its program builder asks for.
#include "simulation/calibration_needs.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "calibration/link_bound.hpp"
#include "engine/program.hpp"
#include "hardware/gpu_model.hpp"
#include "parallelism/costs.hpp"
#include "parallelism/program_builder.hpp"
#include "workload/work.hpp"

namespace stepsim {
namespace {

// The model's costs, noting each collective request and GEMM they answer.
class NeedsRecorder final : public parallelism::Costs {
 public:
  NeedsRecorder(const Scenario& scenario, const hardware::GpuModel& gpu) : gpu_(gpu), model_(scenario, gpu) {}
  Time compute(const workload::OpCost& op) const override {
    if (op.cls == workload::OpClass::gemm) {
      const workload::GemmShape g = workload::one_gemm(op);  // a grouped GEMM's: one expert's
      gemms_.insert({g.m, g.n, g.k, gpu_.dtype(op)});
    }
    return model_.compute(op);
  }
  parallelism::CollectiveCost collective(const collectives::Request& r) const override {
    requests_.push_back(r);
    return model_.collective(r);
  }
  Time kernel_launch() const override { return model_.kernel_launch(); }
  double comm_slowdown() const override { return model_.comm_slowdown(); }

  const std::vector<collectives::Request>& requests() const { return requests_; }
  const std::set<calibration::GemmNeed>& gemms() const { return gemms_; }

 private:
  const hardware::GpuModel& gpu_;
  parallelism::ModelCosts model_;
  mutable std::vector<collectives::Request> requests_;
  mutable std::set<calibration::GemmNeed> gemms_;
};

// A communicator's shape in hosts, as nccl-tests runs it and calibration files record it: the
// model's nodes are NVLink domains, and a domain of several hosts (a GB200 NVL72 rack's trays)
// holds its ranks on its hosts in turn. The most ranks on each host (up to a host's GPUs, a
// divisor of the domain's ranks) whose hosts, filled into domains as an import reads them back
// (domain_shape), make the very shape: 36 ranks over two racks' 18 trays are one rank a tray,
// where three a tray would put all 12 trays in one rack.
std::pair<int, int> host_shape(const ClusterSpec& cluster, const collectives::GroupShape& shape) {
  if (cluster.domain_gpus() <= cluster.gpus_per_node) return {shape.nodes, shape.ranks_per_node};
  for (int per_host = std::min(shape.ranks_per_node, cluster.gpus_per_node); per_host >= 1; --per_host) {
    if (shape.ranks_per_node % per_host != 0) continue;
    const collectives::GroupShape back = calibration::domain_shape(cluster, shape.ranks, shape.ranks / per_host);
    if (back.nodes == shape.nodes && back.ranks_per_node == shape.ranks_per_node)
      return {shape.ranks / per_host, per_host};
  }
  // No layout reads back as this shape: one rank a host, the one that spreads it the most.
  return {shape.ranks, 1};
}

}  // namespace

calibration::CalibrationNeeds calibration_needs(const Scenario& scenario) {
  const workload::ModelWork work = workload::build_work(scenario);
  const hardware::GpuModel gpu(scenario.cluster.gpu, scenario.training.precision);
  const NeedsRecorder costs(scenario, gpu);
  (void)parallelism::build_program(scenario, work, costs);  // for the costs it asks for
  std::map<std::tuple<CollOp, int, int, int, std::string>, calibration::CollectiveNeed> needs;
  for (const collectives::Request& r : costs.requests()) {
    const std::string dtype = calibration::collective_type(scenario, r.op, r.kind);
    const double bytes = r.size.as_double();
    const auto [hosts, per_host] = host_shape(scenario.cluster, r.shape);
    const auto key = std::tuple{r.op, r.shape.ranks, hosts, per_host, dtype};
    auto [at, fresh] =
        needs.try_emplace(key, calibration::CollectiveNeed{r.op, r.shape.ranks, hosts, per_host, dtype, bytes, bytes});
    at->second.min_bytes = std::min(at->second.min_bytes, bytes);
    at->second.max_bytes = std::max(at->second.max_bytes, bytes);
  }
  calibration::CalibrationNeeds out;
  for (const auto& [key, need] : needs) out.collectives.push_back(need);
  out.gemms.assign(costs.gemms().begin(), costs.gemms().end());
  out.forced = scenario.collectives;
  return out;
}

}  // namespace stepsim
