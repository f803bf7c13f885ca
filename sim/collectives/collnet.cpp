// CollNet: in-network reduction in SHARP-capable switches. NCCL leaves it off unless the
// network plugin enables it; stepsim keeps the row so that forcing it gives a clear error.
#include "collectives/algorithm.hpp"

namespace stepsim::collectives::collnet {

std::optional<std::string> unsupported(const Context&) {
  return "CollNet (in-network SHARP reduction) is off by default in NCCL and not modelled";
}

Estimate estimate(const Context&, Protocol) { return {}; }

LinkLoad load(const Context&) { return {}; }

}  // namespace stepsim::collectives::collnet
