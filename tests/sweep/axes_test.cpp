// Sweep axes: value lists, geometric and arithmetic ranges, the product's point order, and
// the messages for axes that make no sense.
#include <catch2/catch.hpp>

#include "stepsim/error.hpp"
#include "sweep/axes.hpp"

using stepsim::InputError;
using stepsim::sweep::Axis;
using stepsim::sweep::parse_axis;

namespace {

std::string message_of(const std::string& text) {
  try {
    parse_axis(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a list axis keeps its values in the order given") {
  const Axis a = parse_axis("data_parallel.bucket_cap_mb=1,5,25");
  CHECK(a.key == "data_parallel.bucket_cap_mb");
  CHECK(a.values == std::vector<std::string>{"1", "5", "25"});
}

TEST_CASE("a JSON list, object or string value keeps its own commas and colons") {
  CHECK(parse_axis(R"(training.cuda_graph_scope=["attn"],["attn","mlp"],[])").values ==
        std::vector<std::string>{R"(["attn"])", R"(["attn","mlp"])", "[]"});
  CHECK(parse_axis(R"(simulation.variation.node_speed=[{"node":0,"factor":0.9}],[])").values ==
        std::vector<std::string>{R"([{"node":0,"factor":0.9}])", "[]"});
  CHECK(parse_axis(R"(x="a,b","c:d",e)").values == std::vector<std::string>{R"("a,b")", R"("c:d")", "e"});
  CHECK(parse_axis(R"(x="a\",b",c)").values == std::vector<std::string>{R"("a\",b")", "c"});
  CHECK(message_of(R"(training.cuda_graph_scope=["attn","mlp")") ==
        R"(--vary: training.cuda_graph_scope: '[' is not closed in '["attn","mlp"')");
  CHECK(message_of("x=[1}],2") == "--vary: x: unbalanced '}' at character 3 of '[1}],2'");
  CHECK(message_of(R"(x="a,b)") == R"(--vary: x: a '"' is not closed in '"a,b')");
  CHECK(message_of(R"(x=["a"],,["b"])") == R"(--vary: x: empty value in '["a"],,["b"]')");
}

TEST_CASE("a geometric range runs from its lower bound by its factor up to its upper bound") {
  CHECK(parse_axis("data_parallel.bucket_cap_mb=1:256:x2").values ==
        std::vector<std::string>{"1", "2", "4", "8", "16", "32", "64", "128", "256"});
  CHECK(parse_axis("parallel.tp=1:8:x2").values == std::vector<std::string>{"1", "2", "4", "8"});
  CHECK(parse_axis("parallel.tp=1:10:x3").values == std::vector<std::string>{"1", "3", "9"});
}

TEST_CASE("an arithmetic range includes its upper bound despite rounding") {
  CHECK(parse_axis("training.micro_batch=1:4:+1").values == std::vector<std::string>{"1", "2", "3", "4"});
  CHECK(parse_axis("data_parallel.bucket_cap_mb=0.1:0.5:+0.1").values ==
        std::vector<std::string>{"0.1", "0.2", "0.30000000000000004", "0.4", "0.5"});
}

// The last value is at most hi: a step below hi's rounding tolerance (a billionth of hi) does not
// let one more step in: 1e6 + 2 x 0.001 = 1000000.002 > 1000000.001, 1 + 101 x 1e-9 > 1 + 1e-7, and
// 0.5 x 1.0000000001^11 > 0.5000000005 (0.5 x 1.0000000001^10 is it, to rounding).
TEST_CASE("a range whose step is tiny beside its values stops at its upper bound") {
  CHECK(parse_axis("x=1000000:1000000.001:+0.001").values == std::vector<std::string>{"1000000", "1000000.001"});
  const auto values = parse_axis("x=1:1.0000001:+1e-9").values;
  CHECK(values.size() == 101);
  CHECK(std::stod(values.back()) <= 1.0000001 + 1e-15);
  CHECK(parse_axis("x=0.5:0.5000000005:x1.0000000001").values.size() == 11);
}

TEST_CASE("axes that make no sense are refused with a message naming --vary") {
  CHECK(message_of("parallel.tp=") == "--vary: parallel.tp: no values given (expected e.g. parallel.tp=1,2,4)");
  CHECK(message_of("parallel.tp") == "--vary: parallel.tp: expected KEY=V1,V2,... or KEY=LO:HI:xF or KEY=LO:HI:+S");
  CHECK(message_of("parallel.tp=1:8:x1") == "--vary: parallel.tp: the range's factor must be greater than 1, got 1");
  CHECK(message_of("parallel.tp=1:8:x0.5") ==
        "--vary: parallel.tp: the range's factor must be greater than 1, got 0.5");
  CHECK(message_of("parallel.tp=1:8:+0") == "--vary: parallel.tp: the range's step must be greater than 0, got 0");
  CHECK(message_of("parallel.tp=8:1:x2") ==
        "--vary: parallel.tp: the range's upper bound 1 is below its lower bound 8");
  CHECK(message_of("parallel.tp=1:8") ==
        "--vary: parallel.tp: expected a range lo:hi:xF (geometric) or lo:hi:+S (arithmetic), got '1:8'");
  CHECK(message_of("parallel.tp=1,,2") == "--vary: parallel.tp: empty value in '1,,2'");
  CHECK(message_of("parallel.tp=0:1e300:+1") == "--vary: parallel.tp: the range has more than 1000000 values");
}

TEST_CASE("the first axis varies slowest as in nested loops") {
  const std::vector<Axis> axes = {parse_axis("a=1,2"), parse_axis("b=x,y,z")};
  REQUIRE(stepsim::sweep::point_count(axes) == 6);
  CHECK(stepsim::sweep::point_values(axes, 0) == std::vector<std::string>{"1", "x"});
  CHECK(stepsim::sweep::point_values(axes, 2) == std::vector<std::string>{"1", "z"});
  CHECK(stepsim::sweep::point_values(axes, 3) == std::vector<std::string>{"2", "x"});
}

TEST_CASE("a product of more than a million points is refused") {
  const std::vector<Axis> axes = {parse_axis("a=1:1000:+1"), parse_axis("b=1:1000:+1"), parse_axis("c=1,2")};
  try {
    stepsim::sweep::point_count(axes);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "--vary: c: the sweep would have more than 1000000 points; narrow the ranges");
  }
}

// Beyond 2^53 = 9007199254740992 a double has no odd integers: whole numbers are counted in
// integers instead, and a range whose step the values cannot resolve is refused as such.
TEST_CASE("a range beyond a double's precision is counted exactly or refused for its step") {
  CHECK(parse_axis("training.global_batch=9007199254740992:9007199254740994:+1").values ==
        std::vector<std::string>{"9007199254740992", "9007199254740993", "9007199254740994"});
  CHECK(parse_axis("x=-3:3:+3").values == std::vector<std::string>{"-3", "0", "3"});
  CHECK(parse_axis("x=9223372036854775800:9223372036854775807:+5").values ==
        std::vector<std::string>{"9223372036854775800", "9223372036854775805"});
  CHECK(message_of("training.global_batch=9007199254740992.0:9007199254740994:+1") ==
        "--vary: training.global_batch: the range's step 1 is below the precision of its values near "
        "9007199254740992: two values would be the same number");
  CHECK(message_of("x=1e12:1.000000000001e12:+1e-4") ==
        "--vary: x: the range's step 1e-4 is below the precision of its values near 1000000000000: two values would "
        "be the same number");
  CHECK(message_of("x=-9223372036854775807:9223372036854775807:+1") ==
        "--vary: x: the range has more than 1000000 values");
}

TEST_CASE("a range of integers whose doubles are equal still needs its upper bound above its lower") {
  CHECK(message_of("x=9007199254740993:9007199254740992:+1") ==
        "--vary: x: the range's upper bound 9007199254740992 is below its lower bound 9007199254740993");
}

// --vary 'KEY = V1, V2' is the spec file's line: the key and each value without the blanks
// around them, so that both give one sweep and one sweep_id (a value " 1" wrote " 1").
TEST_CASE("a --vary axis drops the blanks around its key and values, as a spec line does") {
  const Axis spaced = parse_axis("training.micro_batch = 1, 2 ");
  CHECK(spaced.key == "training.micro_batch");
  CHECK(spaced.values == std::vector<std::string>{"1", "2"});
  CHECK(parse_axis("data_parallel.bucket_cap_mb= 1:4:x2").values == std::vector<std::string>{"1", "2", "4"});
  // Blanks inside a JSON string are the value's own.
  CHECK(parse_axis(R"(model.name= "a b" , c)").values == std::vector<std::string>{R"("a b")", "c"});
  CHECK_THROWS_AS(parse_axis(" =1,2"), InputError);
}
