// The --best search and memory: a layout whose live tensors, CUDA context and NCCL buffers fit
// the GPU only when no headroom is asked for is counted as not fitting, and is not ranked; when nothing fits, the
// search says which configuration comes nearest, by its memory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "sweep/best.hpp"

using stepsim::sweep::BestResult;
using stepsim::sweep::search_best;
using stepsim::sweep::SweepSpec;

namespace {

constexpr double MiB = 1048576.0;
constexpr double GiB = 1073741824.0;

// What a layout needs whatever the caching allocator holds: its live tensors, the CUDA context
// and NCCL's buffers. Short of memory the allocator gives back its cached blocks before it
// fails, so this is what decides whether a layout fits.
double needed(const stepsim::MemoryReport& m) { return m.peak + (m.device - m.reserved); }

SweepSpec gpt_1_3b_on_8(const std::string& headroom) {
  SweepSpec spec;
  spec.sets = {"model=gpt-1.3b", "data_parallel.kind=ddp", "training.recompute=none", "training.micro_batch=2",
               "training.memory_headroom=\"" + headroom + "\""};
  spec.gpus = 8;
  return spec;
}

}  // namespace

TEST_CASE("the best-configuration search drops a layout that fits only without the memory headroom", "[slow]") {
  const BestResult without = search_best(gpt_1_3b_on_8("0 GiB"), 2, false);
  REQUIRE_FALSE(without.ranked.empty());
  const auto largest = std::max_element(without.ranked.begin(), without.ranked.end(), [](const auto& a, const auto& b) {
    return needed(a.second.memory_bytes) < needed(b.second.memory_bytes);
  });
  const stepsim::MemoryReport& m = largest->second.memory_bytes;
  // One MiB more than the largest layout leaves free beyond what the allocator cannot give
  // back: it, and only what leaves as little, drop.
  const double headroom = (std::floor((m.capacity - needed(m)) / MiB) + 1) * MiB;
  const auto dropped = std::count_if(without.ranked.begin(), without.ranked.end(), [&](const auto& r) {
    return needed(r.second.memory_bytes) + headroom > r.second.memory_bytes.capacity;
  });
  REQUIRE(dropped >= 1);
  const BestResult with = search_best(gpt_1_3b_on_8(fmt::format("{:.0f} MiB", headroom / MiB)), 2, false);
  CHECK(with.oom >= without.oom + 1);
  for (const auto& [candidate, report] : with.ranked) {
    CHECK(candidate.sets != largest->first.sets);
    CHECK(report.memory_bytes.fits);
    CHECK(report.memory_bytes.device + headroom <= report.memory_bytes.capacity);
  }
}

namespace {

SweepSpec llama_405b_on_8(const std::string& memory) {
  SweepSpec spec;
  spec.sets = {"model=llama3-405b"};
  if (!memory.empty()) spec.sets.push_back("cluster.gpu.memory=\"" + memory + "\"");
  spec.gpus = 8;
  return spec;
}

}  // namespace

// Llama 3 405B's weights, gradients and Adam states alone (16 bytes a parameter) need about
// 755 GiB per GPU on 8 GPUs: nothing fits an 80 GB H100, and the search says by how much for the
// configuration nearest to fitting. Asked another way: with the GPU's memory just above that
// configuration's need, it fits and nothing that fits needs less; just below, nothing fits.
TEST_CASE("when nothing fits, the search names the configuration nearest to fitting and its memory", "[slow]") {
  const BestResult none = search_best(llama_405b_on_8(""), 2, false);
  REQUIRE(none.ranked.empty());
  INFO(none.closest_oom);
  std::ostringstream table;
  stepsim::sweep::write_best(llama_405b_on_8(""), none, 3, table);
  CHECK(table.str().find("\nthe configuration nearest to fitting: " + none.closest_oom + "\n") != std::string::npos);
  const auto at = none.closest_oom.find("does not fit: ");
  REQUIRE(at != std::string::npos);
  double in_use = 0, headroom = 0;
  REQUIRE(std::sscanf(none.closest_oom.c_str() + at, "does not fit: %lf GiB in use at the peak + %lf GiB headroom",
                      &in_use, &headroom) == 2);
  CHECK(in_use >= 405e9 * 16 / 8 / 1073741824.0);
  const BestResult just_above =
      search_best(llama_405b_on_8(fmt::format("{:.1f} GiB", in_use + headroom + 0.2)), 2, false);
  REQUIRE_FALSE(just_above.ranked.empty());
  double least = 1e30;
  for (const auto& ranked : just_above.ranked) least = std::min(least, needed(ranked.second.memory_bytes) / GiB);
  CHECK(least == Approx(in_use).margin(0.05));
  CHECK(search_best(llama_405b_on_8(fmt::format("{:.1f} GiB", in_use + headroom - 0.2)), 2, false).ranked.empty());
}

// The note on the second round names only layouts that were tried: when none fits, none was.
TEST_CASE("when nothing fits, the search's note says no layout was refined instead of the fastest three", "[slow]") {
  const SweepSpec spec = llama_405b_on_8("");
  const BestResult none = search_best(spec, 2, false);
  REQUIRE(none.ranked.empty());
  std::ostringstream table;
  stepsim::sweep::write_best(spec, none, 3, table);
  INFO(table.str());
  CHECK(table.str().find("fastest layouts were then tried") == std::string::npos);
  CHECK(table.str().find("no layout fits, so none was tried with every data-parallel kind") != std::string::npos);
}

namespace {

// Llama 3 70B over an interleaved pipeline of 8 stages on 16 GPUs, in a batch of `batch`.
SweepSpec interleaved_on_16(const std::string& gpu, int batch) {
  SweepSpec spec;
  spec.sets = {"model=llama3-70b",
               "training.global_batch=" + std::to_string(batch),
               "parallel.pp=8",
               "parallel.schedule=interleaved",
               "parallel.virtual_stages=2",
               "data_parallel.kind=zero1"};
  if (!gpu.empty()) spec.sets.push_back("cluster.gpu=" + gpu);
  spec.gpus = 16;
  return spec;
}

long long number_in(const stepsim::sweep::Candidate& c, const std::string& key, long long otherwise) {
  const std::string v = stepsim::sweep::value_of(c, key, "");
  return v.empty() ? otherwise : std::stoll(v);
}

}  // namespace

// A batch of 4 gives no layout a multiple of pp 8 micro-batches per replica (4 at most): the
// search refuses the job with that rule on an H100, where these layouts' memory would not fit,
// as on an H200, where it would; it names no configuration nearest to fitting.
TEST_CASE("a job whose schedule no layout's micro-batches can fill is refused with that rule, whatever the memory") {
  for (const char* gpu : {"", "h200"}) {
    INFO(gpu);
    CHECK_THROWS_WITH(search_best(interleaved_on_16(gpu, 4), 1, false),
                      Catch::Contains("the interleaved schedule needs the micro-batches per replica (4) to be a "
                                      "multiple of pp (8)"));
  }
}

// A batch of 8: the layouts with 8 micro-batches per replica (one replica, micro-batches of one)
// run, those with 4 or fewer do not (8 / (micro-batch times dp) not a multiple of 8, by hand).
// The search tries only the first, and counts none of the others as not fitting on the H100,
// where their memory would not fit.
TEST_CASE("a layout the program refuses is not searched, nor counted as not fitting, whatever its memory") {
  const SweepSpec spec = interleaved_on_16("", 8);
  BestResult enumerated;
  const auto layouts = stepsim::sweep::enumerate_layouts(spec, {}, enumerated);
  REQUIRE_FALSE(layouts.empty());
  for (const auto& c : layouts) {
    INFO(stepsim::sweep::value_of(c, "training.micro_batch", "-")
         << " " << stepsim::sweep::value_of(c, "parallel.dp", "-"));
    CHECK(8 / (number_in(c, "training.micro_batch", 1) * number_in(c, "parallel.dp", 1)) % 8 == 0);
  }
  const BestResult r = search_best(spec, 1, false);
  CHECK(r.invalid == 0);
  CHECK(r.oom <= layouts.size());
}
