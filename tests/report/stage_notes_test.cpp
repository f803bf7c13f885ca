// The pipeline bubble note: its even-pipeline reference (the stages' mean compute, the
// optimizer step left out) and its reason, taken from what the stages hold.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "report/report_io.hpp"

using stepsim::Report;
using stepsim::StageReport;
using stepsim::report::PipelineFacts;
using stepsim::report::StageWork;

namespace {

StageReport stage(int index, double compute_s, double bubble_s, double optimizer_s = 0.012) {
  StageReport st;
  st.stage = index;
  st.breakdown_s.compute = compute_s;
  st.breakdown_s.bubble = bubble_s;
  st.breakdown_s.optimizer = optimizer_s;
  return st;
}

PipelineFacts facts(int pp, long long m, std::vector<StageWork> stages) {
  PipelineFacts p;
  p.pp = pp;
  p.micro_batches = m;
  p.stages = std::move(stages);
  return p;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// Four stages of 16 ms of compute each and a once-a-step optimizer of 12 ms: an even pipeline of
// 4 micro-batches leaves 3/4 · 16 = 12.0 ms, not 3/4 · 28 = 21.0 ms.
TEST_CASE("the even pipeline's bubble leaves the optimizer step out") {
  Report r;
  for (int i = 0; i < 4; ++i) r.stages.push_back(stage(i, 0.016, i == 2 ? 0.01225 : 0.012));
  const StageWork layers{4, false, false, 0.016, 0, 0};
  const std::string note = stepsim::report::bubble_note(r, facts(4, 4, {layers, layers, layers, layers}));
  INFO(note);
  CHECK(has(note, "stage 2 has the largest bubble, 12.2 ms (1.0x the 12.0 ms of an even pipeline"));
  CHECK_FALSE(has(note, "computes"));  // even stages: no stage to blame
}

// Stage 0 holds 6 layers and the embedding (of a 256-token vocabulary: next to nothing), stage 2
// three layers: the difference is the layers'. The reference is the stages' mean compute.
TEST_CASE("a stage that computes more is blamed on what it holds more of") {
  Report r;
  r.stages = {stage(0, 0.448, 0.039), stage(1, 0.298, 0.195), stage(2, 0.224, 0.273), stage(3, 0.225, 0.272)};
  const PipelineFacts p = facts(4, 8,
                                {{6, true, false, 0.447, 0.0004, 0},
                                 {4, false, false, 0.298, 0, 0},
                                 {3, false, false, 0.2235, 0, 0},
                                 {3, false, true, 0.2235, 0, 0.0011}});
  const std::string note = stepsim::report::bubble_note(r, p);
  INFO(note);
  // (0.448 + 0.298 + 0.224 + 0.225) / 4 = 0.29875 s; 3/8 of it is 112.0 ms.
  CHECK(has(note, "(2.4x the 112.0 ms of an even pipeline"));
  CHECK(has(note, "stage 0 computes 224.0 ms more than stage 2 because it holds 6 layers against 3 (223.5 ms),"));
  CHECK_FALSE(has(note, "embedding"));
}

// The last stage holds five layers and the head, the first one layer and the embedding: five
// layers against one, not the head; with every layer on stage 0 the others are empty, and the
// reference stays the mean, never an empty stage's zero.
TEST_CASE("the bubble note blames layers where the stages hold different numbers of them") {
  Report r;
  r.stages = {stage(0, 0.0758, 0.406), stage(1, 0.3727, 0.097), stage(2, 0.3727, 0.097), stage(3, 0.3738, 0.096)};
  const PipelineFacts five = facts(4, 8,
                                   {{1, true, false, 0.0745, 0.001, 0},
                                    {5, false, false, 0.3727, 0, 0},
                                    {5, false, false, 0.3727, 0, 0},
                                    {5, false, true, 0.3727, 0, 0.0011}});
  const std::string note = stepsim::report::bubble_note(r, five);
  INFO(note);
  CHECK(has(note, "stage 3 computes 298.0 ms more than stage 0 because it holds 5 layers against 1 (298.2 ms)"));
  CHECK_FALSE(has(note, "LM head"));

  Report all;
  all.stages = {stage(0, 1.1937, 0), stage(1, 0, 1.2413), stage(2, 0, 1.2413), stage(3, 0.0011, 1.2403)};
  const PipelineFacts sixteen = facts(4, 8,
                                      {{16, true, false, 1.1924, 0.0013, 0},
                                       {0, false, false, 0, 0, 0},
                                       {0, false, false, 0, 0, 0},
                                       {0, false, true, 0, 0, 0.0011}});
  const std::string lopsided = stepsim::report::bubble_note(all, sixteen);
  INFO(lopsided);
  // (1.1937 + 0.0011) / 4 = 0.2987 s; 3/8 of it is 112.0 ms.
  CHECK(has(lopsided, "1241.3 ms (11.1x the 112.0 ms of an even pipeline"));
  CHECK(has(lopsided, "stage 0 computes 1193.7 ms more than stage 1 because it holds 16 layers against none"));
}

// Equal layers: the head's time is the reason, with the embedding's where it counts too.
TEST_CASE("the bubble note names the LM head and the embedding by their times") {
  Report r;
  r.stages = {stage(0, 0.30, 0.10), stage(1, 0.25, 0.20), stage(2, 0.25, 0.20), stage(3, 0.40, 0.05)};
  const PipelineFacts p = facts(4, 8,
                                {{4, true, false, 0.25, 0.05, 0},
                                 {4, false, false, 0.25, 0, 0},
                                 {4, false, false, 0.25, 0, 0},
                                 {4, false, true, 0.25, 0, 0.15}});
  const std::string note = stepsim::report::bubble_note(r, p);
  INFO(note);
  CHECK(has(note,
            "stage 3 computes 150.0 ms more than stage 1 because it also runs the LM head and the loss over "
            "the whole vocabulary (150.0 ms),"));
  PipelineFacts both = p;
  both.stages[3].embedding = true;  // DualPipe-like: one stage holds both ends
  both.stages[3].embedding_s = 0.05;
  r.stages[3].breakdown_s.compute = 0.45;
  const std::string two = stepsim::report::bubble_note(r, both);
  INFO(two);
  CHECK(has(two,
            "because it also runs the LM head and the loss over the whole vocabulary (150.0 ms) and also runs "
            "the embedding (50.0 ms)"));
}
