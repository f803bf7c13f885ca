// --trace-ranks: which simulated ranks the Perfetto trace carries ("0,5,100-120").
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace stepsim::cli {

class RankSelection {
 public:
  RankSelection() = default;  // every rank
  // Parses "0,5,100-120" for a job of `gpus` GPUs; InputError naming --trace-ranks otherwise.
  RankSelection(const std::string& text, int gpus);
  bool contains(int rank) const;
  bool all() const { return ranges_.empty(); }

 private:
  std::vector<std::pair<int, int>> ranges_;  // inclusive; empty: every rank
};

}  // namespace stepsim::cli
