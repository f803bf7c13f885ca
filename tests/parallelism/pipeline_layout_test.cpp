// Layer-to-stage assignment: even splits, explicit per-stage lists (BLOOM, Llama 3 405B),
// interleaved chunks in model order, and each stage's share of the gradients.
#include <numeric>

#include <catch2/catch.hpp>

#include "parallelism/grad_buckets.hpp"
#include "parallelism/stage_layout.hpp"
#include "support.hpp"

namespace sp = stepsim::parallelism;
using stepsim::ParallelSpec;
using stepsim::Schedule;

TEST_CASE("layers split evenly, the embedding first and the head last") {
  ParallelSpec p;
  p.pp = 4;
  const auto chunks = sp::chunk_layers(p, 16);
  REQUIRE(chunks.size() == 4);
  for (int s = 0; s < 4; ++s) {
    CHECK(chunks[static_cast<std::size_t>(s)].first_layer == 4 * s);
    CHECK(chunks[static_cast<std::size_t>(s)].layers == 4);
    CHECK(chunks[static_cast<std::size_t>(s)].pre == (s == 0));
    CHECK(chunks[static_cast<std::size_t>(s)].post == (s == 3));
  }
}

TEST_CASE("BLOOM's layout gives the outer stages one layer less") {
  ParallelSpec p;
  p.pp = 12;
  p.stage_layers = {5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5};
  const auto chunks = sp::chunk_layers(p, 70);
  CHECK(sp::chunk_of(chunks, p, 0, 0).layers == 5);
  CHECK(sp::chunk_of(chunks, p, 1, 0).first_layer == 5);
  CHECK(sp::chunk_of(chunks, p, 11, 0).first_layer == 65);
  CHECK(sp::chunk_of(chunks, p, 11, 0).layers == 5);
  CHECK(sp::stage_holds_block(p, 70, 0, 0));
  CHECK(sp::stage_holds_block(p, 70, 11, 71));
  CHECK_FALSE(sp::stage_holds_block(p, 70, 5, 0));
}

TEST_CASE("interleaved chunk c of stage s is virtual stage c·p + s") {
  ParallelSpec p;
  p.pp = 4;
  p.schedule = Schedule::interleaved;
  p.virtual_stages = 2;
  const auto chunks = sp::chunk_layers(p, 16);
  REQUIRE(chunks.size() == 8);
  CHECK(sp::chunk_of(chunks, p, 1, 0).first_layer == 2);
  CHECK(sp::chunk_of(chunks, p, 1, 1).first_layer == 10);
  CHECK(sp::chunk_of(chunks, p, 3, 1).post);
  CHECK_FALSE(sp::chunk_of(chunks, p, 3, 0).post);
  CHECK(sp::stage_holds_block(p, 16, 1, 3));   // layer 2
  CHECK(sp::stage_holds_block(p, 16, 1, 11));  // layer 10
  CHECK_FALSE(sp::stage_holds_block(p, 16, 1, 5));
}

TEST_CASE("Llama 3 405B over 16 stages has 7, 8 x 14, 7 layers") {
  ParallelSpec p;
  p.pp = 16;
  p.stage_layers = {7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7};
  const auto chunks = sp::chunk_layers(p, 126);
  CHECK(chunks.back().first_layer + chunks.back().layers == 126);
}

TEST_CASE("a stage's gradients are those of its own layers, the last keeping a tied copy") {
  auto s = sp::test::small_scenario(1, 2, 1);
  s.model.layers = 4;
  s.model.tied_embeddings = true;
  s.parallel.pp = 2;
  s.parallel.stage = 0;
  const auto first = sp::gradient_tensors(s.model, s.parallel);
  s.parallel.stage = 1;
  const auto last = sp::gradient_tensors(s.model, s.parallel);
  s.parallel.stage = -1;
  const auto all = sp::gradient_tensors(s.model, s.parallel);
  CHECK(first.front().name == "embedding word.weight");
  CHECK(first.back().block == 2);
  CHECK(last.front().block == 3);
  CHECK(last.back().name == "head lm_head.weight");
  CHECK(first.size() + last.size() == all.size());
}
