// A compute op run as equal pieces with communication between or after them: the
// context-parallel attention ring and tensor-parallel GEMMs overlapped with their collectives.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "parallelism/step_builder.hpp"
#include "workload/work.hpp"

namespace stepsim::parallelism {

// One of `pieces` equal parts of `cost`: a GEMM split along its rows (m), so each piece is a
// smaller and, by the GPU model's size curve, less efficient GEMM. `work_scale` > 1 charges
// a piece that runs on fewer SMs (its FLOPs and bytes take that much longer).
workload::OpCost op_piece(const workload::OpCost& cost, int pieces, double work_scale = 1.0);

// The interned names of an op's pieces: "L3 flash attention fwd (step 1/4)" and so on; the
// last piece keeps the op's own name, which the trace's memory counter keys on.
class PieceNames {
 public:
  explicit PieceNames(int layers) : layers_(layers) {}
  const std::vector<std::uint32_t>& of(StepBuilder& b, const OpSite& site, int pieces);

 private:
  int layers_;
  std::map<std::tuple<int, const workload::OpCost*, Phase, int>, std::vector<std::uint32_t>> names_;
};

}  // namespace stepsim::parallelism
