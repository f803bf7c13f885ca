// The scenario schema as code: read a scenario (or one of its sections) from JSON onto a
// typed value, and write it back as canonical JSON. Keys are declared in scenario_schema.cpp.
#pragma once

#include <boost/json/value.hpp>
#include <string_view>

#include "io/reader.hpp"
#include "stepsim/scenario.hpp"

namespace stepsim::io {

// Applies `v` (a scenario object, or an example preset name) onto `out`: keys present
// override, preset names replace. Unknown keys and bad values throw InputError at `r`.
void read_scenario(Scenario& out, const boost::json::value& v, const Reader& r);
void read_cluster(ClusterSpec& out, const boost::json::value& v, const Reader& r);
void read_gpu(GpuSpec& out, const boost::json::value& v, const Reader& r);
void read_model(ModelSpec& out, const boost::json::value& v, const Reader& r);

// Whether assigning `key` ("a.b", as --set writes it) may set `other` too: `other` lies below it
// (a section, a preset's object). training.framework covers none: it sets only the kernel keys
// that no layer gives itself (read_value of TrainingSpec), in whatever order.
bool assignment_covers(std::string_view key, std::string_view other);

// Every key of the schema with its value, in schema order.
boost::json::value write_scenario(const Scenario& s);
boost::json::value write_cluster(const ClusterSpec& c);
boost::json::value write_gpu(const GpuSpec& g);

}  // namespace stepsim::io
