// Merge: read every shard, check that the columns and the sweep agree, sort by point, keep
// the first row of each (point, point_id), and write the result as any other output.
#include "sweep/merge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <ostream>

#include "report/output_target.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "sweep/row_file.hpp"
#include "sweep/rows.hpp"

namespace stepsim::sweep {
namespace {

// The rows read so far, and the sweep (and the file that named it first) they belong to.
struct Merged {
  std::vector<std::string> header;
  std::map<RowKey, std::string> rows;
  std::optional<std::uint64_t> sweep;
  std::string sweep_file;
  std::size_t points = 0;
};

void take_rows(Merged& m, const FileLines& lines, Format format, const std::string& input, MergeSummary& summary) {
  const std::size_t first = format == Format::csv ? 2 : 1;
  for (std::size_t i = 0; i < lines.rows.size(); ++i) {
    const RowHead head = head_of(lines.rows[i], format, m.header, input, first + i);
    if (!m.sweep) {
      m.sweep = head.sweep;
      m.sweep_file = input;
      m.points = head.points;
    } else if (head.sweep != *m.sweep) {
      throw other_sweep(input, first + i, head.sweep, *m.sweep, m.sweep_file + "'s");
    }
    if (!m.rows.emplace(head.key, lines.rows[i]).second) summary.duplicates.push_back(head.key.point);
  }
}

void read_input(Merged& m, const std::string& input, Format format, const std::string& first, MergeSummary& summary) {
  if (format_of(input, "--merge") != format)
    throw InputError(input, "", "has another format than the output (.csv and .jsonl do not mix)");
  if (report::is_being_written(input))
    throw InputError(input, "", "a running sweep is still writing it; merge once it has finished");
  const FileLines lines = read_lines(input, format);
  if (lines.torn_bytes > 0) summary.torn.push_back(input);
  if (lines.header.empty()) return;
  check_header(lines.header, input);
  if (m.header.empty()) m.header = lines.header;
  if (lines.header != m.header)
    throw InputError(input, "line 1", fmt::format("the columns differ from those of {}", first));
  take_rows(m, lines, format, input, summary);
}

}  // namespace

std::string point_list(const std::vector<std::size_t>& points, std::size_t most) {
  std::vector<std::string> ranges;
  std::size_t shown = 0;
  for (std::size_t i = 0; i < points.size();) {
    std::size_t j = i;
    while (j + 1 < points.size() && points[j + 1] == points[j] + 1) ++j;
    if (ranges.size() == most) break;
    ranges.push_back(j == i ? std::to_string(points[i]) : fmt::format("{}-{}", points[i], points[j]));
    shown = j + 1;
    i = j + 1;
  }
  std::string text = fmt::format("{}", fmt::join(ranges, ", "));
  if (shown < points.size()) text += fmt::format(" and {} more", points.size() - shown);
  return text;
}

MergeSummary merge_files(const std::string& output, const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw InputError("--merge", output, "no shard files given to merge");
  const Format format = format_of(output, "--merge");
  if (output != "-" && report::is_being_written(output))
    throw InputError(output, "--merge", "a running sweep is writing it; merge into another file");
  MergeSummary summary;
  Merged m;
  for (const auto& input : inputs) read_input(m, input, format, inputs.front(), summary);
  if (m.header.empty()) throw InputError(inputs.front(), "", "no rows and no header in any of the files to merge");
  report::write_output({"--merge", output, [&](std::ostream& out) {
                          if (format == Format::csv) out << format_header(m.header, format);
                          for (const auto& [key, line] : m.rows) out << line << '\n';
                        }});
  summary.rows = m.rows.size();
  summary.points = m.points;
  std::sort(summary.duplicates.begin(), summary.duplicates.end());
  auto row = m.rows.begin();
  for (std::size_t p = 0; p < m.points; ++p) {
    while (row != m.rows.end() && row->first.point < p) ++row;
    if (row == m.rows.end() || row->first.point != p) summary.missing.push_back(p);
  }
  return summary;
}

}  // namespace stepsim::sweep
