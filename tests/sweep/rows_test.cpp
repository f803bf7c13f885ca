// Rows of a sweep: RFC 4180 quoting and its reading back, point ids, output names of shards
// and the shard of a Slurm array task.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>

#include "stepsim/error.hpp"
#include "sweep/rows.hpp"
#include "sweep/shard.hpp"

using namespace stepsim::sweep;

TEST_CASE("point ids are FNV-1a 64 printed as 16 hex digits") {
  CHECK(format_id(fnv1a64("")) == "cbf29ce484222325");
  CHECK(format_id(fnv1a64("a")) == "af63dc4c8601ec8c");
}

TEST_CASE("a reason with commas and quotes survives a CSV row and its reading back") {
  SweepSpec spec;
  spec.axes = {{"parallel.tp", {"3"}}};
  spec.points = 12;
  spec.sweep_id = 0xfedcba9876543210ULL;
  PointResult r;
  r.index = 7;
  r.id = 0x0123456789abcdefULL;
  r.values = {"3"};
  r.status = Status::invalid;
  r.reason = "<default>: /parallel/tp: 32 heads, \"3\" does not divide them\nsecond line";
  const std::string line = format_row(spec, r, Format::csv);
  CHECK(line.starts_with(
      "7,0123456789abcdef,fedcba9876543210,12,3,invalid,\"<default>: /parallel/tp: 32 heads, \"\"3\"\" does not "
      "divide them second line\","));
  CHECK(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  const auto fields = parse_csv_line(line.substr(0, line.size() - 1), "f.csv", 2);
  REQUIRE(fields.size() == columns(spec).size());
  CHECK(fields[6] == "<default>: /parallel/tp: 32 heads, \"3\" does not divide them second line");
  const RowHead head = head_of(line.substr(0, line.size() - 1), Format::csv, columns(spec), "f.csv", 2);
  CHECK(head.key == RowKey{7, 0x0123456789abcdefULL});
  CHECK(head.sweep == 0xfedcba9876543210ULL);
  CHECK(head.points == 12);
}

// JSON has no infinity: a varied 1e400, which the scenario loader reads as a string (it is out
// of a double's range), is written as that string, and a figure that is not finite as null.
TEST_CASE("a JSON line writes no number that is not finite") {
  SweepSpec spec;
  spec.axes = {{"data_parallel.bucket_cap_mb", {"1e400"}}};
  spec.points = 1;
  PointResult r;
  r.values = {"1e400"};
  r.report = stepsim::Report{};
  r.report->step_time_s = std::numeric_limits<double>::infinity();
  r.report->throughput.mfu = std::numeric_limits<double>::quiet_NaN();
  const std::string line = format_row(spec, r, Format::jsonl);
  INFO(line);
  CHECK(line.find("\"sweep_points\":1,\"data_parallel.bucket_cap_mb\":\"1e400\",\"status\":\"ok\"") !=
        std::string::npos);
  CHECK(line.find("\"step_time_s\":null,") != std::string::npos);
  CHECK(line.find("\"mfu\":null,") != std::string::npos);
  CHECK(line.find("Infinity") == std::string::npos);
  CHECK(line.find("NaN") == std::string::npos);
  r.values = {"-0"};
  CHECK(format_row(spec, r, Format::jsonl).find("\"data_parallel.bucket_cap_mb\":0,") != std::string::npos);
  r.values = {"1E2"};
  CHECK(format_row(spec, r, Format::jsonl).find("\"data_parallel.bucket_cap_mb\":1E2,") != std::string::npos);
}

TEST_CASE("a JSON line has the columns as keys with numbers as numbers and missing results as null") {
  SweepSpec spec;
  spec.axes = {{"data_parallel.bucket_cap_mb", {"25"}}, {"data_parallel.kind", {"fsdp"}}};
  spec.points = 2;
  PointResult r;
  r.index = 1;
  r.values = {"25", "fsdp"};
  r.status = Status::error;
  r.reason = "internal error";
  const std::string line = format_row(spec, r, Format::jsonl);
  CHECK(
      line.starts_with("{\"point\":1,\"point_id\":\"0000000000000000\",\"sweep_id\":\"0000000000000000\","
                       "\"sweep_points\":2,\"data_parallel.bucket_cap_mb\":25,"
                       "\"data_parallel.kind\":\"fsdp\",\"status\":\"error\",\"reason\":\"internal error\","
                       "\"step_time_s\":null,"));
  CHECK(header_of(line, Format::jsonl, "f.jsonl") == columns(spec));
}

TEST_CASE("an unbalanced quote in a CSV row names the file and line") {
  try {
    parse_csv_line("1,\"abc", "out.csv", 9);
    FAIL("no error");
  } catch (const stepsim::InputError& e) {
    CHECK(std::string(e.what()) == "out.csv: line 9: unbalanced quote in a CSV row");
  }
}

TEST_CASE("the output format follows the file's extension") {
  CHECK(format_of("out.csv", "-o") == Format::csv);
  CHECK(format_of("-", "-o") == Format::csv);
  CHECK(format_of("a/b.jsonl", "-o") == Format::jsonl);
  CHECK_THROWS_WITH(format_of("out.txt", "-o"),
                    "-o: out.txt: expected a file name ending in .csv or .jsonl (or '-', a device or a FIFO for CSV "
                    "written through)");
}

TEST_CASE("each shard writes its own file unless a {shard} pattern names it") {
  CHECK(shard_path("out.csv", {2, 4}) == "out.shard-2-of-4.csv");
  CHECK(shard_path("dir.v1/out.jsonl", {0, 3}) == "dir.v1/out.shard-0-of-3.jsonl");
  CHECK(shard_path("runs/part-{shard}.csv", {3, 8}) == "runs/part-3.csv");
  CHECK(shard_path("out.csv", {0, 1}) == "out.csv");
  CHECK(shard_path("-", {1, 2}) == "-");
}

TEST_CASE("a shard is given as K/N with K below N") {
  const Shard s = parse_shard("3/4");
  CHECK(s.index == 3);
  CHECK(s.count == 4);
  CHECK_THROWS_WITH(parse_shard("4/4"),
                    "--shard: 4/4: expected K/N with 0 <= K < N, e.g. 0/4 for the first of four shards");
  CHECK_THROWS_AS(parse_shard("1"), stepsim::InputError);
  CHECK_THROWS_AS(parse_shard("a/2"), stepsim::InputError);
}

TEST_CASE("a Slurm array task's shard counts from SLURM_ARRAY_TASK_MIN") {
  std::map<std::string, std::string> env = {
      {"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "3"}};
  const auto getenv = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto shard = shard_from_environment(getenv);
  REQUIRE(shard);
  CHECK(shard->index == 2);
  CHECK(shard->count == 4);
  env.erase("SLURM_ARRAY_TASK_MIN");
  env["SLURM_ARRAY_TASK_ID"] = "1";
  CHECK(shard_from_environment(getenv)->index == 1);
  env["SLURM_ARRAY_TASK_ID"] = "4";
  CHECK_THROWS_AS(shard_from_environment(getenv), stepsim::InputError);
  env.clear();
  CHECK_FALSE(shard_from_environment(getenv).has_value());
}

// --array=0-6:2 runs task ids 0, 2, 4, 6 with SLURM_ARRAY_TASK_COUNT 4 and STEP 2: id 2 was
// shard 2 of 4, and ids 4 and 6 were refused, so shards 1 and 3 never ran.
TEST_CASE("a Slurm array with a step numbers its shards by the step") {
  std::map<std::string, std::string> env = {{"SLURM_ARRAY_TASK_COUNT", "4"},
                                            {"SLURM_ARRAY_TASK_MIN", "0"},
                                            {"SLURM_ARRAY_TASK_MAX", "6"},
                                            {"SLURM_ARRAY_TASK_STEP", "2"}};
  const auto getenv = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  for (std::size_t k = 0; k < 4; ++k) {
    env["SLURM_ARRAY_TASK_ID"] = std::to_string(2 * k);
    const auto shard = shard_from_environment(getenv);
    REQUIRE(shard);
    CHECK(shard->index == k);
    CHECK(shard->count == 4);
  }
  // --array=5-17:4: ids 5, 9, 13, 17.
  env = {{"SLURM_ARRAY_TASK_COUNT", "4"},
         {"SLURM_ARRAY_TASK_MIN", "5"},
         {"SLURM_ARRAY_TASK_STEP", "4"},
         {"SLURM_ARRAY_TASK_ID", "13"}};
  CHECK(shard_from_environment(getenv)->index == 2);
  env["SLURM_ARRAY_TASK_ID"] = "7";  // not an id of the array
  CHECK_THROWS_AS(shard_from_environment(getenv), stepsim::InputError);
  env["SLURM_ARRAY_TASK_ID"] = "21";  // past its last
  CHECK_THROWS_AS(shard_from_environment(getenv), stepsim::InputError);
  env["SLURM_ARRAY_TASK_ID"] = "5";
  env["SLURM_ARRAY_TASK_STEP"] = "0";
  CHECK_THROWS_AS(shard_from_environment(getenv), stepsim::InputError);
}

TEST_CASE("every {shard} in a name is replaced, with one shard too") {
  CHECK(shard_path("runs/{shard}/part-{shard}.csv", {3, 8}) == "runs/3/part-3.csv");
  CHECK(shard_path("part-{shard}.csv", {0, 1}) == "part-0.csv");
}

TEST_CASE("Slurm task ids far apart are refused, not wrapped into a shard") {
  std::map<std::string, std::string> env = {{"SLURM_ARRAY_TASK_ID", "-9223372036854775808"},
                                            {"SLURM_ARRAY_TASK_COUNT", "4"},
                                            {"SLURM_ARRAY_TASK_MIN", "9223372036854775807"}};
  const auto getenv = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK_THROWS_AS(shard_from_environment(getenv), stepsim::InputError);
  env["SLURM_ARRAY_TASK_ID"] = "9223372036854775807";
  env["SLURM_ARRAY_TASK_MIN"] = "-2";
  CHECK_THROWS_AS(shard_from_environment(getenv), stepsim::InputError);
}

TEST_CASE("a row's memory columns are those fits compares: in use plus headroom against capacity") {
  SweepSpec spec;
  spec.axes = {{"parallel.tp", {"8"}}};
  spec.points = 1;
  PointResult r;
  r.values = {"8"};
  r.status = Status::oom;
  stepsim::Report rep;
  rep.memory_bytes.modelled = true;
  rep.memory_bytes.peak = 70;
  rep.memory_bytes.device = 78;
  rep.memory_bytes.headroom = 4;
  rep.memory_bytes.capacity = 80;
  rep.memory_bytes.fits = false;
  r.report = rep;
  const std::string line = format_row(spec, r, Format::csv);
  CHECK(line.ends_with(",70,78,4,80,false\n"));
}

namespace {

// The double a JSON line's number under `key` reads as, correctly rounded (std::from_chars).
double number_under(const std::string& line, const std::string& key) {
  const std::string at = "\"" + key + "\":";
  const auto from = line.find(at);
  REQUIRE(from != std::string::npos);
  const char* begin = line.data() + from + at.size();
  double v = 0;
  const auto [end, ec] = std::from_chars(begin, line.data() + line.size(), v);
  REQUIRE(ec == std::errc());
  REQUIRE((*end == ',' || *end == '}'));
  return v;
}

// Doubles whose shortest text (as rows and simulate's JSON write them) Boost.JSON's parser reads
// as another double, found among a deterministic run of figures of a step's magnitudes.
std::vector<double> misread_by_boost() {
  std::vector<double> out{478300.81545073213};  // tokens_per_s of an H100 fp8 sweep point
  std::uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 200000 && out.size() < 20; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const double v = static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53) * 1e6;
    boost::json::error_code ec;
    const boost::json::value read = boost::json::parse(fmt::format("{}", v), ec);
    if (!ec && read.is_double() && read.as_double() != v) out.push_back(v);
  }
  return out;
}

}  // namespace

// A JSON line holds each figure as the double itself, as the CSV row and simulate's JSON do, to
// the last digit: also the figures Boost.JSON's own parser would read a unit in the last place off.
TEST_CASE("a JSON line holds the very double of each figure, also those Boost's parser misreads") {
  const std::vector<double> values = misread_by_boost();
  SweepSpec spec;
  spec.points = 1;
  for (double v : values) {
    INFO(fmt::format("{}", v));
    PointResult r;
    r.report = stepsim::Report{};
    r.report->throughput.tokens_per_s = v;
    r.report->step_time_s = v / 1e5;
    const std::string line = format_row(spec, r, Format::jsonl);
    CHECK(number_under(line, "tokens_per_s") == v);
    CHECK(number_under(line, "step_time_s") == v / 1e5);
    // The CSV row's text reads as the same double.
    CHECK(format_row(spec, r, Format::csv).find("," + fmt::format("{}", v) + ",") != std::string::npos);
  }
}
