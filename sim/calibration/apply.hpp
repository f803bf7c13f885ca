// Where measurements meet the model: a collective or compute kernel costs its measured time
// inside a measured table's range; outside it the model answers, corrected by what the
// nearest measured communicator shape says about the model's latency and bandwidth.
#pragma once

#include <optional>
#include <vector>

#include "calibration/tables.hpp"
#include "collectives/collective.hpp"
#include "hardware/gpu_model.hpp"
#include "stepsim/report.hpp"
#include "workload/work.hpp"

namespace stepsim::calibration {

enum class Source { model, measured, scaled };
const char* to_string(Source s);

struct CalibratedChoice {
  collectives::Choice choice;  // latency and algbw adjusted; algorithm and protocol the model's
  Source source = Source::model;
  const CollectiveTable* table = nullptr;  // the measured table used, if any
};

// The model's choice for `request`, with its latency and bandwidth replaced by measurement:
// - inside the sizes measured on this very shape, both are scaled so that the time equals
//   the interpolated measurement (the link loads keep the model's shape);
// - otherwise, with a measured table of the same tier (one node, or several), the model's
//   latency (its one-byte time on the request's shape) and the time its bytes take are
//   scaled so that the model gives the measured time at the table's smallest and largest
//   sizes; where those do not fix both, the latency by the measured/model ratio at the
//   smallest size (when latency-bound) and the bytes' time by the ratio at the largest (when
//   bandwidth-bound). On the table's own shape the result is carried to the measured time
//   at the nearer end and bounded by it (no faster above the largest size, no slower below
//   the smallest); on a shape that grows the table's it is no faster than the table's shape
//   at the same size, on one that shrinks it no slower. No scale is bounded;
// - otherwise the model.
// Tables in the collective's own element type `dtype` (nccl-tests' name) come first; a shape
// measured only in another type is matched by bytes; "": any type.
CalibratedChoice calibrate_collective(const MeasuredTables& tables, const ClusterSpec& cluster,
                                      const CollectivesSpec& forced, const collectives::Request& request,
                                      const std::string& dtype = "");

// Throws an InputError naming the table of `c` that measured collectives run otherwise than
// `forced` runs them: NCCL's own choice against a forced algorithm or protocol, or another
// one forced. Its times are not those of the collectives it would replace.
void check_measured_as(const Calibration& c, const CollectivesSpec& forced);

// How `t`'s collectives ran: its forced algorithm and protocol, automatic where NCCL chose.
CollectivesSpec measured_as(const CollectiveTable& t);

struct CalibratedTime {
  Time time;
  bool measured = false;
};

// A compute op's duration: measured GEMM, attention or memory-bandwidth table of the op's
// own precision (`gpu.dtype(op)`) inside its range, else the (possibly refitted) GPU model.
CalibratedTime calibrate_compute(const MeasuredTables& tables, const hardware::GpuModel& gpu,
                                 const workload::OpCost& op);

// The GPU figures the calibration files set (fitted efficiencies, measured launch overhead
// and slowdown), each with its value in force and where it came from; later files win, and a
// slowdown measured beside a running collective wins over one fitted to a trace.
std::vector<CalibratedValue> values_in_force(const MeasuredTables& tables, const GpuSpec& preset);

// The host's cost per operator beyond its launch that the calibration files set (the last
// file's), with `framework_dispatch` (training.framework's) as its preset; none when no file
// sets one. The simulation charges it in place of the framework's.
std::optional<CalibratedValue> calibrated_dispatch(const MeasuredTables& tables, Time framework_dispatch);

// The GPU with those values in force.
GpuSpec calibrated_gpu(const MeasuredTables& tables, GpuSpec gpu);

// The scenario's resolved JSON (`Scenario::resolved_json`) with those values in force in its
// cluster.gpu, so that the report's config shows what the simulation used.
std::string config_in_force(const std::string& resolved_json, const std::vector<CalibratedValue>& values);

// Fit of T = α + S/algbw: α from the smallest size, algbw from the largest, with the largest
// relative error over all sizes. One point cannot separate the two:
// α is then `fallback_alpha_us` (the model's latency) and marked as not fitted.
AlphaBeta fit_alpha_beta(const std::vector<CollectivePoint>& points, CollOp op, int ranks, double fallback_alpha_us);

}  // namespace stepsim::calibration
