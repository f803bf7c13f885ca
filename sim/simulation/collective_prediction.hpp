// One collective's predicted time, algbw and busbw per size, as nccl-tests prints them, with
// the (algorithm, protocol) pair NCCL would choose: `stepsim collective` and the Python
// module ask the same function and write the same rows.
#pragma once

#include <boost/json/value.hpp>

#include <optional>
#include <string>
#include <vector>

#include "calibration/apply.hpp"
#include "collectives/collective.hpp"
#include "stepsim/error.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim {

// What to predict, as the command line spells it (errors name its flags).
struct CollectiveQuery {
  std::string op;                     // allreduce, allgather, ... (case-insensitive)
  std::optional<std::string> size;    // one size ("256MiB" when neither size nor sweep is given)
  std::optional<std::string> sweep;   // MIN:MAX, sizes a factor apart
  double factor = 2;                  // the size step of sweep
  int gpus = 8;                       // ranks of the communicator
  std::optional<int> ranks_per_node;  // ranks on each node; none: fill whole nodes
  std::string cluster = "dgx-h100-ndr";
  std::string algorithm = "auto";  // force one (ring, tree, ...)
  std::string protocol = "auto";   // force one (ll, ll128, simple)
  bool candidates = false;         // keep every candidate pair of each size (stepsim collective -v)
  std::vector<std::string> calibrations;
  std::vector<std::string> cluster_sets;  // "cluster.KEY=VALUE" (collective --set)
};

struct CollectiveRow {
  Bytes size;              // as nccl-tests runs and prints it (see CollectivePrediction::rounded)
  std::int64_t count = 0;  // nccl-tests' count column: float elements per rank (per peer for AllToAll)
  collectives::Choice choice;
  std::vector<collectives::Choice> all;  // with CollectiveQuery::candidates, in the order NCCL ranks them
  // The same pairs' algorithm bandwidths for the group alone on its links, before NICs shared
  // by its GPUs, an oversubscribed spine or a slower PCIe link held them down.
  std::vector<Bandwidth> alone;
  // With calibration files: the uncalibrated model, where the time came from, the measurement.
  std::optional<collectives::Choice> model;
  calibration::Source source = calibration::Source::model;
  std::optional<double> measured_us;
  // The element type of the measured table used ("" where none was): the rows are float's, as
  // nccl-tests' default; a table of another type stands for them matched by bytes.
  std::string table_dtype;
};

struct CollectivePrediction {
  CollOp op = CollOp::allreduce;
  ClusterSpec cluster;  // the cluster holding the communicator
  int gpus = 0;
  // How it is costed over the NVLink domains that hold its ranks: an uneven placement as an even
  // group of its emptiest domain's size (parallelism::shape_of), so not always where it lies.
  collectives::GroupShape shape;
  // Where it lies: the ranks of each NVLink domain holding some, in domain order (76 GPUs on
  // NVL72 racks: 72 and 4).
  std::vector<int> domain_ranks;
  std::vector<CollectiveRow> rows;
  // Sizes that nccl-tests rounds down (to whole float elements; for AllGather, ReduceScatter
  // and AllToAll to per-rank counts a multiple of four), and sizes that round to nothing.
  int rounded = 0;
  int dropped = 0;
};

// K ranks on the first GPUs of each node (all of a node's without K), costed over the NVLink
// domains that hold them (a GB200 NVL72 rack's 18 trays of 4 are one domain).
collectives::GroupShape communicator_shape(const ClusterSpec& cluster, int gpus, std::optional<int> ranks_per_node);
// The same K ranks on the first GPUs of each node: how many each NVLink domain holding some
// holds, in domain order.
std::vector<int> communicator_domain_ranks(const ClusterSpec& cluster, int gpus, std::optional<int> ranks_per_node);

// The errors of a value of --gpus, --ranks-per-node or --factor out of range, given as `text`:
// the range checks of predict_collective give them, and so does the command line for a value
// that is no number or that the query's type cannot hold.
InputError collective_gpus_error(const std::string& text);
InputError ranks_per_node_error(const std::string& text);
InputError factor_error(const std::string& text);

// Checks the query (InputError naming the flag) and predicts each size.
CollectivePrediction predict_collective(const CollectiveQuery& query);

// A calibrated choice as one collective alone runs it on the fabric: a time scaled from another
// shape's table can ask more of a NIC than it carries (a two-node table where NCCL's tree beats
// the model, applied to a ring of one rank per node), and the fabric limits it as it limits the
// model's bandwidth and the simulation's flows; on the measured shape itself the measurement
// stands. `stepsim collective` and `calibrate check` predict alike.
collectives::Choice on_fabric(const calibration::CalibratedChoice& c, const ClusterSpec& cluster,
                              const collectives::Request& request);

// nccl-tests' bus bandwidth of a row in GB/s: algbw times the op's bus factor.
double busbw_gbps(const CollectiveRow& row, CollOp op, int gpus);
double relative_error(double predicted, double measured);

// The rows as `stepsim collective --json` writes them.
boost::json::value collective_json(const CollectivePrediction& prediction);

}  // namespace stepsim
