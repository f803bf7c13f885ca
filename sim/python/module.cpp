// stepsim._core: the Python module's native half. Each function calls what the command line
// calls and returns the text of the same JSON writer, so that Python reads the numbers that
// `stepsim ... --json` prints; the GIL is released while it works, so that threads simulate
// side by side. Bad input raises ScenarioError with the file, the JSON pointer and the message.
#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>

#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "analysis/analysis_output.hpp"
#include "analysis/job_analysis.hpp"
#include "analysis/job_output.hpp"
#include "analysis/trace_timeline.hpp"
#include "engine/huge_pages.hpp"
#include "io/scenario_loader.hpp"
#include "report/report_io.hpp"
#include "simulation/advice.hpp"
#include "simulation/collective_prediction.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"
#include "sweep/cluster_comparison.hpp"
#include "sweep/plan.hpp"
#include "sweep/plan_rows.hpp"
#include "sweep/point.hpp"
#include "sweep/rows.hpp"
#include "sweep/runner.hpp"
#include "workload/work.hpp"

namespace py = pybind11;

namespace stepsim::python {
namespace {

// A scenario argument read once, as the command line reads it: standard input ("-"), a FIFO or
// a file being edited would otherwise be read again (and differ) for every simulation of it.
io::ScenarioInput scenario_input(const std::string& path, const std::optional<std::string>& text) {
  return text ? io::ScenarioInput{path, text} : io::read_scenario_input(path);
}

// As `stepsim simulate --json -` (with --advise when `asked`): the advice is part of the report.
std::string simulate_json(const std::string& path, const std::optional<std::string>& text,
                          const std::vector<std::string>& sets, const std::vector<std::string>& calibrations,
                          bool asked, const std::vector<std::string>& clusters) {
  const py::gil_scoped_release unlocked;
  // Read once for the scenario, its calibration and every change the advice simulates.
  const io::ScenarioInput input = scenario_input(path, text);
  const std::vector<std::string> all_sets = io::sets_with_calibration(input, sets, calibrations);
  const Scenario scenario = io::load_scenario(input, all_sets);
  sweep::check_comparable(scenario, clusters);
  SimulationResult result = simulate(scenario, SimulateOptions::report_only());
  advise({input, all_sets, asked, {}}, scenario, result);
  const std::vector<sweep::ClusterColumn> columns =
      clusters.empty() ? std::vector<sweep::ClusterColumn>{}
                       : sweep::compare_clusters(input, sets, scenario, result.report, clusters);
  // A bug met in one of the advice's simulations is its row's status; here it is also said on
  // stderr, as the command line says it (which then exits with status 1), the report standing.
  for (const std::string& bug : advice_bugs(result.report)) spdlog::error("{}", bug);
  std::vector<report::ComparedCluster> compared;
  for (const sweep::ClusterColumn& c : columns) compared.push_back({c.cluster, &c.report});
  std::ostringstream out;
  report::write_json(result.report, compared, out);
  return out.str();
}

// `jobs` of sweep() and plan(): 0 (every usable core) to sweep::kMaxJobs simulations at once,
// refused in the words of --jobs.
void check_jobs(long long jobs) {
  if (jobs < 0 || jobs > sweep::kMaxJobs) {
    const InputError e = sweep::jobs_error(std::to_string(jobs));
    throw InputError(e.file(), e.where(), e.message() + " (or 0: every usable core)");
  }
}

// A sweep as `stepsim sweep` makes it from its flags, here Python's arguments.
sweep::SweepSpec sweep_spec(const io::ScenarioInput& scenario, const std::vector<sweep::Axis>& axes,
                            const std::vector<std::string>& sets, int gpus, bool keep_oom) {
  // In the words of --gpus.
  if (gpus < 0)
    throw InputError(
        "--gpus", std::to_string(gpus),
        fmt::format("expected a GPU count of 1 to {} (or 0: parallel.dp as set)", std::numeric_limits<int>::max()));
  if (axes.empty()) throw InputError("stepsim.sweep", "vary", "expected at least one key to vary");
  for (const sweep::Axis& axis : axes)
    if (axis.values.empty())
      throw InputError("stepsim.sweep", "vary",
                       fmt::format("no values given for {} (expected e.g. [1, 2, 4])", axis.key));
  sweep::SweepSpec spec;
  spec.scenario = scenario;
  spec.sets = sets;
  spec.axes = axes;
  spec.gpus = gpus;
  spec.keep_oom = keep_oom;
  sweep::prepare(spec);
  return spec;
}

// Every point of the product as the JSON line `stepsim sweep -o FILE.jsonl` writes for it.
std::vector<std::string> sweep_rows(const std::string& path, const std::optional<std::string>& text,
                                    const std::vector<std::pair<std::string, std::vector<std::string>>>& axes,
                                    const std::vector<std::string>& sets, int gpus, bool keep_oom, long long jobs) {
  const py::gil_scoped_release unlocked;
  check_jobs(jobs);
  std::vector<sweep::Axis> given;
  for (const auto& [key, values] : axes) given.push_back({key, values});
  // Read once for every point.
  const sweep::SweepSpec spec = sweep_spec(scenario_input(path, text), given, sets, gpus, keep_oom);
  std::vector<std::size_t> indices(spec.points);
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  const auto results = sweep::run_points(
      indices, static_cast<unsigned>(jobs), [&](std::size_t i) { return sweep::run_point(spec, i); }, false);
  std::vector<std::string> rows;
  rows.reserve(results.size());
  for (const auto& r : results) rows.push_back(sweep::format_row(spec, r, sweep::Format::jsonl));
  return rows;
}

// The --vary syntax of one axis (a list "a,b" or a range "lo:hi:x2") as its values.
std::vector<std::string> axis_values(const std::string& key, const std::string& values) {
  return sweep::parse_axis(key + "=" + values).values;
}

std::string analyze_json(const std::vector<std::string>& paths, std::optional<int> rank,
                         const std::optional<std::string>& step) {
  const py::gil_scoped_release unlocked;
  if (paths.empty()) throw InputError("stepsim.analyze", "paths", "expected at least one trace file or folder");
  std::vector<std::string> files;
  for (const std::string& p : paths)
    for (std::string& f : analysis::trace_files(p)) files.push_back(std::move(f));
  std::ostringstream out;
  if (analysis::measured_as_job(paths, files.size(), rank.has_value())) {
    const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
    analysis::write_job_json(analysis::analyze_job(files, step, cores), stepsim_version(), out);
    return out.str();
  }
  analysis::Analysis a = analysis::analyze_trace(paths.front(), rank, step);
  a.mean.stepsim_version = stepsim_version();
  analysis::write_analysis_json(a, out);
  return out.str();
}

// As `stepsim plan ... -o rows.json`: every cluster at every GPU count, the rows' JSON array.
// The arguments are the flags' text (None: the flag not given); errors name the flag each stands
// for.
std::string plan_json(const std::string& path, const std::optional<std::string>& text, sweep::PlanRequest request,
                      long long jobs) {
  const py::gil_scoped_release unlocked;
  check_jobs(jobs);
  // A file is read once for every cluster and layout, as the command line reads it.
  request.scenario = scenario_input(path, text);
  const sweep::PlanSpec spec = sweep::make_plan_spec(request);
  std::ostringstream out;
  sweep::write_plan_json(sweep::run_plan(spec, static_cast<unsigned>(jobs), {}), out);
  return out.str();
}

void define_plan(py::module_& m) {
  m.def(
      "plan_json",
      [](const std::string& path, const std::optional<std::string>& text, std::optional<std::string> model,
         std::optional<std::string> tokens, std::optional<std::string> deadline, std::optional<std::string> gpus,
         std::vector<std::string> clusters, std::vector<std::string> precisions, std::vector<std::string> sets,
         long long max_layouts, long long jobs) {
        sweep::PlanRequest request;
        request.model = std::move(model);
        request.tokens = std::move(tokens);
        request.deadline = std::move(deadline);
        request.gpus = std::move(gpus);
        request.clusters = std::move(clusters);
        request.precisions = std::move(precisions);
        request.sets = std::move(sets);
        request.max_layouts = max_layouts;
        return plan_json(path, text, std::move(request), jobs);
      },
      py::arg("path"), py::arg("text"), py::arg("model"), py::arg("tokens"), py::arg("deadline"), py::arg("gpus"),
      py::arg("clusters"), py::arg("precisions"), py::arg("sets"), py::arg("max_layouts"), py::arg("jobs"));
  m.attr("DEFAULT_PLAN_LAYOUTS") = sweep::kDefaultPlanLayouts;
}

std::string collective_json(const CollectiveQuery& query) {
  const py::gil_scoped_release unlocked;
  return boost::json::serialize(stepsim::collective_json(predict_collective(query)));
}

// stepsim.collective()'s keyword arguments: the fields of the query, defaults as the command
// line's (CollectiveQuery's own).
void define_collective(py::module_& m) {
  const CollectiveQuery d;
  m.def(
      "collective_json",
      [](std::string op, std::optional<std::string> size, std::optional<std::string> sweep, double factor, int gpus,
         std::optional<int> ranks_per_node, std::string cluster, std::string algorithm, std::string protocol,
         std::vector<std::string> calibration, std::vector<std::string> sets) {
        return collective_json({std::move(op), std::move(size), std::move(sweep), factor, gpus, ranks_per_node,
                                std::move(cluster), std::move(algorithm), std::move(protocol), false,
                                std::move(calibration), std::move(sets)});
      },
      py::arg("op"), py::kw_only(), py::arg("size") = d.size, py::arg("sweep") = d.sweep, py::arg("factor") = d.factor,
      py::arg("gpus") = d.gpus, py::arg("ranks_per_node") = d.ranks_per_node, py::arg("cluster") = d.cluster,
      py::arg("algorithm") = d.algorithm, py::arg("protocol") = d.protocol, py::arg("calibration") = d.calibrations,
      py::arg("sets") = d.cluster_sets);
}

py::list presets() {
  py::list out;
  for (const io::PresetInfo& p : io::list_presets(workload::model_parameters))
    out.append(py::dict(py::arg("kind") = p.kind, py::arg("name") = p.name, py::arg("summary") = p.summary));
  return out;
}

// InputError as ScenarioError(what) with .file, .pointer and .message.
void translate_input_error(const py::object& error_class, const InputError& e) {
  py::object error = error_class(e.what());
  error.attr("file") = e.file();
  error.attr("pointer") = e.where();
  error.attr("message") = e.message();
  PyErr_SetObject(error_class.ptr(), error.ptr());
}

// The library's warnings on stderr as the command line writes them (once per process).
void quiet_logging() {
  if (spdlog::get("stepsim")) return;
  auto logger = spdlog::stderr_color_mt("stepsim");
  logger->set_pattern("stepsim: %l: %v");
  logger->set_level(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

void define_functions(py::module_& m) {
  m.def("simulate_json", &simulate_json, py::arg("path"), py::arg("text"), py::arg("sets"), py::arg("calibrations"),
        py::arg("advise"), py::arg("clusters"));
  m.def("sweep_rows", &sweep_rows, py::arg("path"), py::arg("text"), py::arg("axes"), py::arg("sets"), py::arg("gpus"),
        py::arg("keep_oom"), py::arg("jobs"));
  m.def("axis_values", &axis_values, py::arg("key"), py::arg("values"));
  m.def("analyze_json", &analyze_json, py::arg("paths"), py::arg("rank"), py::arg("step"));
  define_collective(m);
  define_plan(m);
  m.def("presets", &presets);
  m.def("version", &stepsim_version);
}

}  // namespace

void define_module(py::module_& m) {
  m.doc() = "stepsim's native functions; use the `stepsim` package, which wraps them";
  quiet_logging();
  // A notebook or an autotuner simulates many times, as a sweep does; a simulation's freed
  // buffers then stay mapped for the next, in every thread (page faults of fresh memory in
  // several threads at once queue on the process's memory map).
  engine::keep_freed_memory();
  // The class itself, kept from here: importing it by name when an error is raised would fail
  // where the package is imported under another name (vendored as vendor.stepsim). The
  // reference is held for the life of the process, as the translator is.
  static py::handle scenario_error;
  scenario_error = py::exception<InputError>(m, "ScenarioError", PyExc_ValueError).inc_ref();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      translate_input_error(py::reinterpret_borrow<py::object>(scenario_error), e);
    }
  });
  define_functions(m);
}

}  // namespace stepsim::python

PYBIND11_MODULE(_core, m) { stepsim::python::define_module(m); }
