// The ops' flat wait lists.
#include "engine/program.hpp"

namespace stepsim::engine {

OpIndex RankProgram::add_op(Op op, std::span<const OpIndex> op_waits) {
  op.waits_begin = static_cast<std::uint32_t>(waits.size());
  op.wait_count = static_cast<std::uint32_t>(op_waits.size());
  waits.insert(waits.end(), op_waits.begin(), op_waits.end());
  ops.push_back(op);
  return static_cast<OpIndex>(ops.size() - 1);
}

std::span<const OpIndex> RankProgram::waits_of(OpIndex o) const {
  const Op& op = ops[o];
  return std::span(waits).subspan(op.waits_begin, op.wait_count);
}

}  // namespace stepsim::engine
