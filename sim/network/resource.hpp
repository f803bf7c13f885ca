// Link resources of the flow-level network model and how a flow loads them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepsim/units.hpp"

namespace stepsim::network {

using ResourceId = std::uint32_t;

// One direction of one link: a GPU's NVLink/NVSwitch port, a NIC, a leaf switch's uplinks
// (the parallelism layer names and creates them, parallelism/fabric). Capacity in bytes
// per second.
struct Resource {
  std::string name;
  Bandwidth capacity;
};

// A flow that progresses at algorithm rate r loads `resource` at r · weight bytes per second.
struct ResourceUse {
  ResourceId resource = 0;
  double weight = 0;

  bool operator==(const ResourceUse&) const = default;
};

}  // namespace stepsim::network
