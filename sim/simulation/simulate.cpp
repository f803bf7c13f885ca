// simulate(): the layers in order — workload, hardware, parallelism, engine, report.
#include "stepsim/report.hpp"

#include <fmt/format.h>

#include "engine/engine.hpp"
#include "hardware/gpu_model.hpp"
#include "parallelism/memory_model.hpp"
#include "parallelism/program_builder.hpp"
#include "report/report_io.hpp"
#include "simulation/calibrated_costs.hpp"
#include "stepsim/error.hpp"
#include "workload/work.hpp"

namespace stepsim {

namespace {

// The memory model's breakdown for the report, and a note when the peak exceeds capacity
// (the simulate command also logs it; the library itself stays silent).
void add_memory(const Scenario& scenario, const workload::ModelWork& work, report::ReportInputs& inputs) {
  const parallelism::MemoryEstimate estimate = parallelism::estimate_memory(scenario, work);
  inputs.memory = parallelism::memory_report(estimate);
  const std::string note = parallelism::memory_note(estimate);
  if (!note.empty()) inputs.notes.push_back(note);
}

SimulationResult run_layers(const Scenario& given) {
  // Calibration files replace GPU figures (fitted efficiencies, launch overhead, slowdown)
  // and, through CalibratedCosts, the costs they measured.
  const calibration::MeasuredTables tables = load_calibration(given);
  Scenario calibrated;
  if (!tables.empty()) {
    calibrated = given;
    calibrated.cluster.gpu = calibration::calibrated_gpu(tables, given.cluster.gpu);
  }
  const Scenario& scenario = tables.empty() ? given : calibrated;
  const workload::ModelWork work = workload::build_work(scenario);
  const hardware::GpuModel gpu(scenario.cluster.gpu, scenario.training.precision);
  const CalibratedCosts costs(scenario, gpu, tables);
  const engine::Program program = tables.empty() ? parallelism::build_program(scenario, work, gpu)
                                                 : parallelism::build_program(scenario, work, costs);
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
  add_memory(scenario, work, inputs);
  result.report = report::make_report(result.timeline, inputs);
  if (!tables.empty()) costs.summarise(result.timeline, result.report);
  return result;
}

}  // namespace

const char* stepsim_version() { return STEPSIM_VERSION; }

MemoryReport estimate_memory(const Scenario& scenario) {
  try {
    return parallelism::memory_report(parallelism::estimate_memory(scenario, workload::build_work(scenario)));
  } catch (const InputError& e) {
    if (!e.file().empty()) throw;
    throw InputError(scenario.source, e.where(), e.message());
  }
}

SimulationResult simulate(const Scenario& scenario) {
  try {
    return run_layers(scenario);
  } catch (const RangeOverflow& e) {
    throw InputError(scenario.source, "",
                     fmt::format("{} while simulating the step: the scenario's rates are too slow or its sizes too "
                                 "large for one training step",
                                 e.what()));
  } catch (const InputError& e) {
    // The model layers name the key at fault; the scenario knows which file it came from.
    if (!e.file().empty()) throw;
    throw InputError(scenario.source, e.where(), e.message());
  }
}

}  // namespace stepsim
