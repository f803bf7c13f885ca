// `stepsim analyze`: measure a real PyTorch profiler (Kineto) trace step by step with the
// same definitions the simulator reports, and show each collective's size and bandwidth.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include "analysis/analysis_output.hpp"
#include "analysis/job_output.hpp"
#include "analysis/trace_timeline.hpp"
#include "cli/options.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kAnalyzeUsage =
    "usage: stepsim analyze TRACE... [--step N] [--rank R] [--json FILE|-] [--trace FILE]\n\n"
    "Measures a PyTorch profiler (Kineto) trace: TRACE is one trace file (.json or .json.gz,\n"
    "read as a stream, so multi-GB files are fine; '-': standard input) or a folder holding one\n"
    "file per rank of one job (one world size in their distributedInfo, each rank once).\n\n"
    "Several ranks (a folder of several files, or several TRACE arguments) without --rank: the\n"
    "files are read in parallel, one per core at a time, each rank measured over its own steps\n"
    "and kept only as a summary, so memory stays that of one trace per core. Prints per rank and\n"
    "across ranks the step time, exposed communication per kind, hidden fraction and HTA's\n"
    "overlap; HTA's idle breakdown per rank and stream (each rank's as analyze of its file alone\n"
    "prints it) and its mean across ranks, with the rank whose GPU waits longest for its host;\n"
    "and the stragglers: collective calls are matched across ranks (the k-th call of\n"
    "each step, process group and op); the member whose NCCL kernel starts last holds the call\n"
    "back, its lead is its start minus the next-latest member's, and every other member waits\n"
    "its start minus theirs (a real NCCL kernel runs, and counts as communication, meanwhile).\n\n"
    "--rank R picks rank R: the global rank as the trace's distributedInfo gives it (a file\n"
    "without distributedInfo counts as the rank of its place among the folder's files, sorted by\n"
    "name with numbers by value (rank2 before rank10), from 0; a trace stepsim wrote, its\n"
    "process). Without --rank, one TRACE is measured at its lowest rank. A rank the trace does\n"
    "not hold is refused, naming the ranks it holds.\n\n"
    "One rank (one file, or --rank R of a folder) prints,\n"
    "per ProfilerStep, the step time, compute, communication busy time, exposed communication,\n"
    "memcpy/memset-only time, idle time and the hidden fraction; exposed communication per\n"
    "collective, process group and kind; and every collective grouped by op, process group and\n"
    "size with nccl-tests' algbw and busbw (DDP's gradient buckets show up as one row each; '-'\n"
    "where the trace does not give the size or the group's size; kernels of 0 us left out of the\n"
    "bandwidths, a line says how many).\n\n"
    "How the trace is read (HolisticTraceAnalysis' classes):\n"
    "  GPU activity     complete events of category kernel, gpu_memcpy, gpu_memset with a whole\n"
    "                   args.stream of 0 or more, as Kineto writes them (one with another phase,\n"
    "                   no stream or args of the wrong type is refused: the hidden fraction would\n"
    "                   count it and HTA's overlap not, or the reverse)\n"
    "  communication    kernels whose name starts with 'nccl' or contains 'ncclKernel'\n"
    "  memory           Memcpy / Memset; every other kernel is compute\n"
    "  step             a GPU activity belongs to ProfilerStep#N when it was launched during that\n"
    "                   CPU annotation; a step's window runs from the first start of the measured\n"
    "                   rank's own activities in it to the start of its next one in time; the last\n"
    "                   step's runs until the work of every step ends (a collective of an earlier\n"
    "                   step still running is measured in it, as the whole-trace figure and the\n"
    "                   collectives count it)\n"
    "  exposed comm     communication running and no compute running\n"
    "  hidden fraction  communication and compute at once / union of communication time, per\n"
    "                   step window and over the whole trace (every step, every activity)\n\n"
    "HolisticTraceAnalysis' figures, by its own rules (they differ from the hidden fraction above):\n"
    "  comm-comp overlap   with two or more ProfilerSteps, the last step is left out: a GPU activity\n"
    "                      counts only when its launch (the CPU event with its correlation id)\n"
    "                      starts before the last ProfilerStep starts, so work still running from\n"
    "                      before the profile began is dropped too; intervals are not clipped;\n"
    "                      fractional timestamps are rounded inward (ceil(ts), floor(ts + dur));\n"
    "                      communication (nccl*, hip*, hccl*, *ncclKernel*) and computation (other\n"
    "                      kernels except Memcpy/Memset/dma/Sync names) are merged across streams;\n"
    "                      overlap = both at once / communication, in % to 2 decimals\n"
    "  temporal breakdown  idle, compute and non-compute time over the span of those activities\n"
    "  kernel types        time computation, communication and memory run alone or overlapping\n"
    "  idle breakdown      per CUDA stream and summed over them, ms per step (the window's time over\n"
    "                      the ProfilerSteps it covers) and share of idle: the gap before each\n"
    "                      kernel, memcpy or memset on its stream is host wait when its launch\n"
    "                      (the CPU event with its correlation id: cudaLaunchKernel, one\n"
    "                      cudaGraphLaunch for a graph's kernels) began after the previous one\n"
    "                      ended, else kernel wait under 30 us, else other (another stream, an\n"
    "                      event); where timestamps are rounded, also on the exact ones; n/a\n"
    "                      when no kernel is tied to a launch";

constexpr const char* kAnalyzeExamples =
    "  stepsim analyze rank0.json.gz\n"
    "  stepsim analyze traces/                    # every rank, stragglers\n"
    "  stepsim analyze rank*.json.gz --json - | jq .stragglers\n"
    "  stepsim analyze traces/ --rank 3 --step 5\n"
    "  stepsim analyze rank0.json.gz --json - | jq .overlap\n"
    "  stepsim analyze rank0.json.gz --trace measured.json   # re-emit the measured timeline\n";

// Several ranks are a job unless --rank picks one of a single folder's.
bool job_mode(const std::vector<std::string>& paths, const std::vector<std::string>& files, const po::variables_map& vm,
              const OutputOptions& out) {
  if (!analysis::measured_as_job(paths, files.size(), vm.count("rank") > 0)) return false;
  if (out.trace)
    throw InputError("<command line>", "--trace",
                     "several ranks are summarised one at a time, so there is no timeline to write; give --rank R");
  return true;
}

int run_job(const std::vector<std::string>& files, const TraceSelection& selection, const OutputOptions& out) {
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  const analysis::JobAnalysis job = analysis::analyze_job(files, selection.step_name(), cores);
  spdlog::debug("read {} bytes of JSON from {} files with {} workers", job.content_bytes, files.size(), job.workers);
  emit(
      out, [&](std::ostream& os) { analysis::write_job_table(job, os); },
      [&](std::ostream& os) { analysis::write_job_json(job, stepsim_version(), os); }, [](std::ostream&) {});
  return 0;
}

}  // namespace

int run_analyze(const Args& args) {
  // The paths as one positional list (see add_trace_options on GCC 12's warning).
  std::vector<std::string> paths;
  TraceSelection selection;
  OutputOptions out;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("trace-file", po::value(&paths)->value_name("TRACE..."),
                                                 "Kineto trace files or folders of rank files");
  add_trace_options(desc, selection);
  add_output_options(desc, out);
  po::positional_options_description positional;
  positional.add("trace-file", -1);
  auto vm = parse_args("analyze", args, desc, positional);
  if (help_requested(vm, kAnalyzeUsage, desc, kAnalyzeExamples)) return 0;
  if (paths.empty())
    throw InputError("<command line>", "stepsim analyze", "missing TRACE (see 'stepsim analyze --help')");
  require_trace_names(paths);
  require_stdin_once("analyze", paths);
  check_outputs(out);

  std::vector<std::string> files;
  for (const std::string& p : paths)
    for (std::string& f : analysis::trace_files(p)) files.push_back(std::move(f));
  if (job_mode(paths, files, vm, out)) return run_job(files, selection, out);

  const std::string& path = paths.front();
  analysis::Analysis a = analysis::analyze_trace(path, selection.rank, selection.step_name());
  a.mean.stepsim_version = stepsim_version();
  spdlog::debug("read {} bytes of JSON from {}", a.trace.content_bytes, path);
  emit(
      out, [&](std::ostream& os) { analysis::write_analysis_table(a, os); },
      [&](std::ostream& os) { analysis::write_analysis_json(a, os); },
      [&](std::ostream& os) {
        report::write_trace(a.trace.timeline, os, a.trace.dist[a.metrics.rank_index].world_size);
      });
  return 0;
}

}  // namespace stepsim::cli
