// simulate(): the layers in order — workload, hardware, parallelism, engine, report.
#include "stepsim/report.hpp"

#include "engine/engine.hpp"
#include "hardware/gpu_model.hpp"
#include "parallelism/program_builder.hpp"
#include "report/report_io.hpp"
#include "workload/work.hpp"

namespace stepsim {

const char* stepsim_version() { return STEPSIM_VERSION; }

SimulationResult simulate(const Scenario& scenario) {
  const workload::ModelWork work = workload::build_work(scenario);
  const hardware::GpuModel gpu(scenario.cluster.gpu, scenario.training.precision);
  const engine::Program program = parallelism::build_program(scenario, work, gpu);
  SimulationResult result;
  result.timeline = engine::run(program);
  report::ReportInputs inputs;
  inputs.gpus = scenario.parallel.gpus();
  inputs.samples_per_step = static_cast<double>(scenario.training.global_batch);
  inputs.tokens_per_step = inputs.samples_per_step * static_cast<double>(scenario.model.seq_len);
  inputs.model_flops_per_step = work.model_flops_per_step;
  inputs.peak_flops_per_gpu = gpu.peak();
  inputs.config_json = scenario.resolved_json;
  inputs.version = stepsim_version();
  inputs.notes.push_back(parallelism::placement_notes(scenario));
  result.report = report::make_report(result.timeline, inputs);
  return result;
}

}  // namespace stepsim
