// Scenarios built in code for the workload and hardware tests: the GPT models of Korthikanti
// et al. 2022 and Llama 3, on A100 (Selene) or H100.
#pragma once

#include "stepsim/scenario.hpp"

namespace stepsim::testing {

ModelSpec gpt(int layers, long long hidden, int heads);
ModelSpec llama3_8b();
ModelSpec llama3_70b();
ModelSpec llama3_405b();
GpuSpec a100();
GpuSpec h100();

// `model` at TP `tp` with micro-batch `micro_batch`, global batch `global_batch`, bf16.
Scenario scenario(const ModelSpec& model, int tp, long long micro_batch, long long global_batch = 1);

}  // namespace stepsim::testing
