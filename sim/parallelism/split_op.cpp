// Pieces of a compute op and their names.
#include "parallelism/split_op.hpp"

#include <cmath>

#include <fmt/format.h>

#include "stepsim/error.hpp"

namespace stepsim::parallelism {

workload::OpCost op_piece(const workload::OpCost& cost, int pieces, double work_scale) {
  STEPSIM_CHECK(pieces >= 1 && work_scale >= 1.0, "an op split into no pieces or sped up by its split");
  workload::OpCost piece = cost;
  piece.flops = cost.flops / pieces * work_scale;
  piece.bytes = Bytes(std::llround(cost.bytes.as_double() / pieces * work_scale));
  piece.m = std::max(cost.m / pieces, 1LL);
  return piece;
}

const std::vector<std::uint32_t>& PieceNames::of(StepBuilder& b, const OpSite& site, int pieces) {
  const auto [it, inserted] = names_.try_emplace({site.block, site.cost, site.phase, pieces});
  if (!inserted) return it->second;
  const std::string name = op_name(site, layers_);
  for (int i = 0; i + 1 < pieces; ++i)
    it->second.push_back(b.state().name(fmt::format("{} (step {}/{})", name, i + 1, pieces)));
  it->second.push_back(b.state().name(name));
  return it->second;
}

}  // namespace stepsim::parallelism
