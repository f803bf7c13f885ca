// The compute side of calibration end to end: measured tables looked up in each op's own
// precision, efficiencies fitted back from stepsim's own traces, and what the report says
// after a calibration.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include "cli/run_stepsim.hpp"

namespace stepsim {
namespace {

using testing::Scratch;

boost::json::value json_of(const std::string& text) { return boost::json::parse(text); }

double number(const boost::json::value& v, const char* key) { return v.at(key).to_number<double>(); }

bool contains(const boost::json::array& a, const std::string& s) {
  for (const auto& v : a)
    if (v.is_string() && v.as_string() == s) return true;
  return false;
}

// BF16 GEMM and attention tables reaching from a tiny kernel to far beyond any op of the
// default scenario (8 KFLOP to 5.6e14 FLOPs; attention 2e6 to 2e16), and nothing in FP8.
constexpr const char* kBf16Tables = R"({"stepsim_calibration": 1, "provenance": {"gpu": ""},
  "compute": {
    "gemm": [{"m": 16, "n": 16, "k": 16, "dtype": "bf16", "time_us": 5},
             {"m": 65536, "n": 65536, "k": 65536, "dtype": "bf16", "time_us": 1000000}],
    "attention": [
      {"pass": "forward", "batch": 1, "heads": 1, "kv_heads": 1, "seq": 128, "head_dim": 64, "dtype": "bf16",
       "time_us": 5},
      {"pass": "forward", "batch": 64, "heads": 128, "kv_heads": 128, "seq": 65536, "head_dim": 256,
       "dtype": "bf16", "time_us": 10000000},
      {"pass": "backward", "batch": 1, "heads": 1, "kv_heads": 1, "seq": 128, "head_dim": 64, "dtype": "bf16",
       "time_us": 5},
      {"pass": "backward", "batch": 64, "heads": 128, "kv_heads": 128, "seq": 65536, "head_dim": 256,
       "dtype": "bf16", "time_us": 10000000}]}})";

}  // namespace

// Under FP8 training the Linear layers' GEMMs run in FP8, but the LM head and attention stay
// BF16 (Transformer Engine): BF16 tables are theirs, FP8 tables none of theirs.
TEST_CASE("an FP8 run's BF16 ops use BF16 tables") {
  Scratch s("calib-fp8-dtype");
  s.write("bf16.json", kBf16Tables);
  const auto run = s.run("simulate --set training.precision=fp8 --calibration bf16.json --json -");
  REQUIRE(run.status == 0);
  const auto report = json_of(run.out);
  const auto& c = report.at("calibration");
  CHECK(contains(c.at("measured").as_array(), "gemm"));
  CHECK(contains(c.at("measured").as_array(), "attention"));
  CHECK(number(c, "compute_fraction") > 0);
  // The BF16 run uses them for every GEMM and attention kernel, so for more of its compute.
  const auto bf16 = s.run("simulate --calibration bf16.json --json -");
  REQUIRE(bf16.status == 0);
  CHECK(number(json_of(bf16.out).at("calibration"), "compute_fraction") > number(c, "compute_fraction"));
}

}  // namespace stepsim
