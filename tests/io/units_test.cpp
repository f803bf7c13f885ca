// Quantities with units: every accepted spelling, bits against bytes, and the errors that
// name the accepted units.
#include <catch2/catch.hpp>

#include <functional>

#include "io/scenario_loader.hpp"
#include "io/units_text.hpp"
#include "stepsim/error.hpp"

using namespace stepsim;

namespace {

std::string error_from(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("durations accept ps, ns, us, µs, ms and s") {
  CHECK(io::parse_time("1 ps", "f", "/x").ps() == 1);
  CHECK(io::parse_time("2.5 ns", "f", "/x").ps() == 2500);
  CHECK(io::parse_time("2.7 us", "f", "/x").ps() == 2'700'000);
  CHECK(io::parse_time("2.7us", "f", "/x").ps() == 2'700'000);
  CHECK(io::parse_time("3 \u00b5s", "f", "/x").ps() == 3'000'000);
  CHECK(io::parse_time("10 ms", "f", "/x").ps() == 10'000'000'000);
  CHECK(io::parse_time(" 1.5 s ", "f", "/x").ps() == 1'500'000'000'000);
  CHECK(io::parse_time("0 us", "f", "/x") == Time::zero());
}

TEST_CASE("sizes distinguish decimal and binary prefixes") {
  CHECK(io::parse_bytes("8B", "f", "/x").count() == 8);
  CHECK(io::parse_bytes("1 KB", "f", "/x").count() == 1000);
  CHECK(io::parse_bytes("1 KiB", "f", "/x").count() == 1024);
  CHECK(io::parse_bytes("25 MB", "f", "/x").count() == 25'000'000);
  CHECK(io::parse_bytes("25 MiB", "f", "/x").count() == 25 * 1048576);
  CHECK(io::parse_bytes("80 GB", "f", "/x").count() == 80'000'000'000);
  CHECK(io::parse_bytes("4GiB", "f", "/x").count() == 4LL * 1073741824);
  CHECK(io::parse_bytes("1.5 KB", "f", "/x").count() == 1500);
  CHECK(io::parse_bytes("2 TiB", "f", "/x").count() == 2LL * 1099511627776);
}

TEST_CASE("bandwidths in bits per second are an eighth of the same number in bytes") {
  CHECK(io::parse_bandwidth("400 Gb/s", "f", "/x").bytes_per_s() == 50e9);
  CHECK(io::parse_bandwidth("400 Gbps", "f", "/x").bytes_per_s() == 50e9);
  CHECK(io::parse_bandwidth("50 GB/s", "f", "/x").bytes_per_s() == 50e9);
  CHECK(io::parse_bandwidth("200 Gb/s", "f", "/x").bytes_per_s() == 25e9);
  CHECK(io::parse_bandwidth("100 Mb/s", "f", "/x").bytes_per_s() == 12.5e6);
  CHECK(io::parse_bandwidth("1 GiB/s", "f", "/x").bytes_per_s() == 1073741824.0);
  CHECK(io::parse_bandwidth("2.04 TB/s", "f", "/x").bytes_per_s() == Approx(2.04e12));
}

TEST_CASE("compute rates accept GFLOPS, TFLOPS and PFLOPS") {
  CHECK(io::parse_flop_rate("989 TFLOPS", "f", "/x").tflops() == Approx(989));
  CHECK(io::parse_flop_rate("19.5 TFLOPS", "f", "/x").flops_per_s() == 19.5e12);
  CHECK(io::parse_flop_rate("2.25 PFLOPS", "f", "/x").tflops() == Approx(2250));
  CHECK(io::parse_flop_rate("500 GFLOPS", "f", "/x").flops_per_s() == 500e9);
  CHECK(io::parse_flop_rate("1 TFLOP/s", "f", "/x").flops_per_s() == 1e12);
}

TEST_CASE("one byte takes one nanosecond at 1 GB/s and at 8 Gb/s") {
  const Bytes one = io::parse_bytes("1 B", "f", "/x");
  CHECK(transfer_time(one, io::parse_bandwidth("1 GB/s", "f", "/x")).ps() == 1000);
  CHECK(transfer_time(one, io::parse_bandwidth("8 Gb/s", "f", "/x")).ps() == 1000);
  CHECK(transfer_time(io::parse_bytes("1 GB", "f", "/x"), io::parse_bandwidth("400 Gb/s", "f", "/x")).ps() ==
        20'000'000'000);
}

TEST_CASE("a bare number where a unit is needed lists the accepted units") {
  CHECK(
      error_from([] { io::parse_bandwidth("400", "scenario.json", "/cluster/inter_node/nic_bandwidth"); }) ==
      R"(scenario.json: /cluster/inter_node/nic_bandwidth: '400' has no unit (expected e.g. "400 Gb/s" or "50 GB/s"))");
  CHECK(error_from([] { io::parse_time("5", "s.json", "/cluster/gpu/kernel_launch"); }) ==
        R"(s.json: /cluster/gpu/kernel_launch: '5' has no unit (expected e.g. "2.5 us" or "10 ms"))");
  CHECK(error_from([] { io::parse_bytes("80", "s.json", "/cluster/gpu/memory"); }) ==
        R"(s.json: /cluster/gpu/memory: '80' has no unit (expected e.g. "80 GiB" or "25 MB"))");
}

// A GPU given less memory than the default 2 GiB headroom: the message names the key the user
// set as well as the default it collides with.
TEST_CASE("a GPU smaller than the memory headroom names both keys") {
  CHECK(error_from([] { io::load_scenario("", {"cluster.gpu.memory=1 GiB"}); }) ==
        "<default>: /training/memory_headroom: 2 GiB is more than the GPU's whole memory (cluster.gpu.memory, "
        "1 GiB): lower training.memory_headroom or give the GPU more memory");
  CHECK(error_from([] {
          io::load_scenario("", {"training.memory_headroom=81 GiB"});
        }).find("81 GiB is more than the GPU's whole memory (cluster.gpu.memory, 81559 MiB)") != std::string::npos);
}

TEST_CASE("a --set number without its unit is shown as it was typed") {
  // JSON reads 2e9 as a number; the message shows the text given, not 2000000000.
  CHECK(error_from([] { io::load_scenario("", {"training.memory_headroom=2e9"}); }) ==
        R"(--set: training.memory_headroom: '2e9' has no unit (expected e.g. "80 GiB" or "25 MB"))");
  CHECK(error_from([] { io::load_scenario("", {"cluster.inter_node.nic_bandwidth= 400 "}); }) ==
        R"(--set: cluster.inter_node.nic_bandwidth: '400' has no unit (expected e.g. "400 Gb/s" or "50 GB/s"))");
}

TEST_CASE("unknown units, fractions of a byte and words are errors") {
  CHECK(error_from([] { io::parse_bytes("8 Gb", "--sweep", ""); }) ==
        "--sweep: '8 Gb' has an unknown unit 'Gb' (expected one of B, KB, kB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  CHECK(error_from([] { io::parse_bytes("0.5 B", "f", "/x"); }) == "f: /x: '0.5 B' is not a whole number of bytes");
  CHECK(error_from([] { io::parse_time("fast", "f", "/x"); }) ==
        R"(f: /x: 'fast' is not a duration (expected e.g. "2.5 us" or "10 ms"))");
  CHECK(error_from([] { io::parse_time("-1 us", "f", "/x"); }) == "f: /x: '-1 us' is negative");
}

TEST_CASE("written quantities parse back to the same value") {
  for (const char* text : {"2.7 us", "600 ns", "5 us", "1 s", "13.75 ms", "7 ps"})
    CHECK(io::parse_time(io::format_time(io::parse_time(text, "", "")), "", "") == io::parse_time(text, "", ""));
  CHECK(io::format_time(Time::from_us(2.7)) == "2.7 us");
  CHECK(io::format_bytes(Bytes(80'000'000'000)) == "80 GB");
  CHECK(io::format_bytes(Bytes::mib(25)) == "25 MiB");
  CHECK(io::format_bytes(Bytes(1001)) == "1001 B");
  CHECK(io::format_bandwidth(Bandwidth::gbits_per_s(400), true) == "400 Gb/s");
  CHECK(io::format_bandwidth(Bandwidth::gbytes_per_s(450), false) == "450 GB/s");
  for (const char* text : {"2.04 TB/s", "3.35 TB/s", "4.8 TB/s", "1 GiB/s", "12.5 Mb/s"}) {
    const Bandwidth bw = io::parse_bandwidth(text, "", "");
    CHECK(io::parse_bandwidth(io::format_bandwidth(bw, false), "", "") == bw);
    CHECK(io::parse_bandwidth(io::format_bandwidth(bw, true), "", "") == bw);
  }
  CHECK(io::format_flop_rate(FlopRate::tflops(989)) == "989 TFLOPS");
  CHECK(io::format_flop_rate(FlopRate::tflops(19.5)) == "19.5 TFLOPS");
}
