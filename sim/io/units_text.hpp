// Quantities as text: the inverse of the parse_* functions of scenario_loader.hpp, chosen so
// that parsing the text gives back the same value (resolved scenarios round-trip).
#pragma once

#include <string>

#include "stepsim/units.hpp"

namespace stepsim::io {

std::string format_time(Time t);                        // "2.7 us", "600 ns", "0 us"
std::string format_bytes(Bytes b);                      // "80 GB", "25 MiB", "8 B"
std::string format_bandwidth(Bandwidth bw, bool bits);  // "450 GB/s" or "400 Gb/s"
std::string format_flop_rate(FlopRate r);               // "989 TFLOPS"

}  // namespace stepsim::io
