// The ops' flat wait lists, and op lists shared by the ranks that issue the same ops.
#include "engine/program.hpp"

namespace stepsim::engine {

OpIndex RankProgram::add_op(Op op, std::span<const OpIndex> op_waits) {
  std::vector<OpIndex>& waits = list->waits;
  op.waits_begin = static_cast<std::uint32_t>(waits.size());
  op.wait_count = static_cast<std::uint32_t>(op_waits.size());
  waits.insert(waits.end(), op_waits.begin(), op_waits.end());
  list->ops.push_back(op);
  return static_cast<OpIndex>(list->ops.size() - 1);
}

std::span<const OpIndex> RankProgram::waits_of(OpIndex o) const {
  const Op& op = list->ops[o];
  return std::span(list->waits).subspan(op.waits_begin, op.wait_count);
}

void RankProgram::share_ops_with(const RankProgram& other) {
  if (list != other.list && *list == *other.list) list = other.list;
}

}  // namespace stepsim::engine
