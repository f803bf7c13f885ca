// The keys of a scenario that follow other keys unless given (cluster.nodes, model.kv_heads,
// training.framework's kernel keys, the DDP bucket sizes, ...): the resolved scenario lists
// those it did not give under "derived", and loading it derives them again, so that the
// resolved file behaves as the scenario it came from under any further --set.
#pragma once

#include <boost/json/value.hpp>
#include <string>
#include <vector>

#include "stepsim/scenario.hpp"

namespace stepsim::io {

// What a scenario gave of the keys whose 0 means "derive it" (model.kv_heads, ...), taken
// before complete_and_validate fills them in.
struct ZeroKeys {
  bool kv_heads = false, ffn_hidden = false, expert_ffn_hidden = false, nodes = false;
};
ZeroKeys given_zero_keys(const Scenario& s);

// The keys of the completed scenario `s` that no layer gave (`given` as taken before it was
// completed), in the order the resolved scenario writes them: "cluster.nodes", ...
std::vector<std::string> derived_keys(const Scenario& s, const ZeroKeys& given);

// A scenario document's top-level "derived" list taken out of it: the keys it lists are removed
// from the document, so that reading it derives them again. A list that is not one of the
// derivable keys, or a value there that the other keys of the document would not derive (an
// edited file: the value would be silently replaced), is an InputError naming `source`.
void take_derived(boost::json::value& document, const std::string& source);

}  // namespace stepsim::io
