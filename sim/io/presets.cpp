// Finding embedded presets by folder and name.
#include "io/presets.hpp"

#include <fmt/format.h>

namespace stepsim::io {
namespace {

// "gpus" → "gpu preset": how errors name a folder's presets.
std::string preset_noun(std::string_view folder) {
  const std::string_view singular = folder.ends_with('s') ? folder.substr(0, folder.size() - 1) : folder;
  return fmt::format("{} preset", singular);
}

}  // namespace

std::string_view preset_folder(const EmbeddedFile& file) { return file.path.substr(0, file.path.find('/')); }

std::string_view preset_name(const EmbeddedFile& file) {
  std::string_view name = file.path.substr(file.path.find('/') + 1);
  return name.substr(0, name.size() - std::string_view(".json").size());
}

const EmbeddedFile* lookup_preset(std::string_view folder, std::string_view name) {
  for (const auto& file : embedded_files())
    if (preset_folder(file) == folder && preset_name(file) == name) return &file;
  return nullptr;
}

const EmbeddedFile& find_preset(std::string_view folder, std::string_view name, const Reader& r) {
  if (const EmbeddedFile* file = lookup_preset(folder, name)) return *file;
  const auto names = preset_names(folder);
  if (names.empty()) r.fail(fmt::format("there are no {}s; expected an object", preset_noun(folder)));
  r.fail(unknown_name_message(preset_noun(folder), name, names));
}

std::vector<std::string_view> preset_names(std::string_view folder) {
  std::vector<std::string_view> names;
  for (const auto& file : embedded_files())
    if (preset_folder(file) == folder) names.push_back(preset_name(file));
  return names;
}

}  // namespace stepsim::io
