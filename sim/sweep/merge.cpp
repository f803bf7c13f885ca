// Merge: read every shard, check the columns agree, sort by point, keep the first row of
// each (point, point_id), write through a temporary file and a rename.
#include "sweep/merge.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "stepsim/error.hpp"
#include "sweep/row_file.hpp"
#include "sweep/rows.hpp"

namespace stepsim::sweep {

MergeSummary merge_files(const std::string& output, const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw InputError("--merge", output, "no shard files given to merge");
  const Format format = format_of(output, "--merge");
  MergeSummary summary;
  std::vector<std::string> header;
  std::map<RowKey, std::string> rows;
  for (const auto& input : inputs) {
    if (format_of(input, "--merge") != format)
      throw InputError(input, "", fmt::format("has another format than the output {}", output));
    const FileLines lines = read_lines(input, format);
    if (lines.torn_bytes > 0) ++summary.torn;
    if (lines.header.empty()) continue;
    if (header.empty()) header = lines.header;
    if (lines.header != header)
      throw InputError(input, "line 1", fmt::format("the columns differ from those of {}", inputs.front()));
    for (std::size_t i = 0; i < lines.rows.size(); ++i) {
      const RowKey key = key_of(lines.rows[i], format, header, input, i + (format == Format::csv ? 2 : 1));
      if (!rows.emplace(key, lines.rows[i]).second) ++summary.duplicates;
    }
  }
  if (header.empty()) throw InputError(inputs.front(), "", "no rows and no header in any of the files to merge");
  const std::string tmp = fmt::format("{}.tmp.{}", output, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw InputError(output, "", fmt::format("cannot open for writing: {}", std::strerror(errno ? errno : EIO)));
    if (format == Format::csv) out << format_header(header, format);
    for (const auto& [key, line] : rows) out << line << '\n';
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw InputError(output, "", "cannot write the merged file");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, output, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw InputError(output, "", fmt::format("cannot replace the file: {}", ec.message()));
  }
  summary.rows = rows.size();
  return summary;
}

}  // namespace stepsim::sweep
