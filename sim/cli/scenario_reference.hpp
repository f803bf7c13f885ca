// The scenario reference: every key of the schema with its unit, meaning and the framework
// option it stands for, written as Markdown (docs/scenario-reference.md is this output).
#pragma once

#include <boost/json/value.hpp>
#include <iosfwd>
#include <string>
#include <vector>

namespace stepsim::cli {

// "0.8", "6000000000", "\"h100-sxm5-80gb\"", "[]": a value as a scenario file writes it
// (never 8E-1).
std::string value_text(const boost::json::value& v);

// Every leaf key of `scenario` ("parallel.tp") with its value, in schema order.
std::vector<std::pair<std::string, boost::json::value>> leaf_keys(const boost::json::value& scenario);

// The keys that have no entry in the reference table (a test keeps this empty).
std::vector<std::string> undocumented_keys(const boost::json::value& scenario);

// The whole reference as Markdown, with the default scenario's value of each key.
void write_scenario_reference(const boost::json::value& default_scenario, std::ostream& out);

}  // namespace stepsim::cli
