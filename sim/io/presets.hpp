// The embedded presets of configs/: GPUs, clusters, models and example scenarios, found by
// folder ("gpus", "clusters", "models", "examples") and name (the file name without .json).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "io/embedded_files.hpp"
#include "io/reader.hpp"

namespace stepsim::io {

// The preset, or nullptr.
const EmbeddedFile* lookup_preset(std::string_view folder, std::string_view name);
// The preset, or an InputError at `r` listing the presets of that folder.
const EmbeddedFile& find_preset(std::string_view folder, std::string_view name, const Reader& r);
// Names in the folder, in build order.
std::vector<std::string_view> preset_names(std::string_view folder);

std::string_view preset_folder(const EmbeddedFile& file);  // "gpus"
std::string_view preset_name(const EmbeddedFile& file);    // "h100-sxm5-80gb"

}  // namespace stepsim::io
