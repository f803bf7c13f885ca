// Link resources of the flow-level network model and how a flow loads them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepsim/units.hpp"

namespace stepsim::network {

using ResourceId = std::uint32_t;

// One direction of one link as seen by a simulated rank: its NVLink/NVSwitch port, its NIC
// (rail), its PCIe path. Capacity in bytes per second.
struct Resource {
  std::string name;
  Bandwidth capacity;
};

// A flow that progresses at algorithm rate r loads `resource` at r · weight bytes per second.
struct ResourceUse {
  ResourceId resource = 0;
  double weight = 0;
};

}  // namespace stepsim::network
