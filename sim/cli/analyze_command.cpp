// `stepsim analyze`: measure a real PyTorch profiler (Kineto) trace step by step with the
// same definitions the simulator reports, and show each collective's size and bandwidth.
#include <spdlog/spdlog.h>

#include <iostream>
#include <optional>

#include "analysis/analysis_output.hpp"
#include "cli/options.hpp"
#include "report/report_io.hpp"
#include "stepsim/error.hpp"
#include "stepsim/report.hpp"

namespace stepsim::cli {
namespace {

constexpr const char* kUsage =
    "usage: stepsim analyze TRACE [--step N] [--rank I] [--json FILE|-] [--trace FILE]\n\n"
    "Measures a PyTorch profiler (Kineto) trace: TRACE is one trace file (.json or .json.gz,\n"
    "read as a stream, so multi-GB files are fine) or a folder holding one file per rank. Prints,\n"
    "per ProfilerStep, the step time, compute, communication busy time, exposed communication,\n"
    "memcpy/memset-only time, idle time and the hidden fraction; exposed communication per\n"
    "collective, process group and kind; and every collective grouped by op, process group and\n"
    "size with nccl-tests' algbw and busbw (DDP's gradient buckets show up as one row each).\n\n"
    "How the trace is read (HolisticTraceAnalysis' classes):\n"
    "  GPU activity     complete events of category kernel, gpu_memcpy, gpu_memset\n"
    "  communication    kernels whose name starts with 'nccl' or contains 'ncclKernel'\n"
    "  memory           Memcpy / Memset; every other kernel is compute\n"
    "  step             a GPU activity belongs to ProfilerStep#N when it was launched during that\n"
    "                   CPU annotation; a step's window runs from the first start of its\n"
    "                   activities to the start of the next one in time (the last step: to its last end)\n"
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
    "  kernel types        time computation, communication and memory run alone or overlapping";

constexpr const char* kExamples =
    "  stepsim analyze rank0.json.gz\n"
    "  stepsim analyze traces/ --rank 3 --step 5\n"
    "  stepsim analyze rank0.json.gz --json - | jq .overlap\n"
    "  stepsim analyze rank0.json.gz --trace measured.json   # re-emit the measured timeline\n";

}  // namespace

int run_analyze(const Args& args) {
  std::string path;
  TraceSelection selection;
  OutputOptions out;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("trace-file", po::value(&path)->value_name("TRACE"),
                                                 "Kineto trace file or folder of rank files");
  add_trace_options(desc, selection);
  add_output_options(desc, out);
  po::positional_options_description positional;
  positional.add("trace-file", 1);
  auto vm = parse_args("analyze", args, desc, positional);
  if (help_requested(vm, kUsage, desc, kExamples)) return 0;
  if (path.empty())
    throw InputError("<command line>", "stepsim analyze", "missing TRACE (see 'stepsim analyze --help')");
  check_outputs(out);

  analysis::Analysis a = analysis::analyze_trace(path, selection.rank, selection.step_name());
  a.mean.stepsim_version = stepsim_version();
  spdlog::debug("read {} bytes of JSON from {}", a.trace.content_bytes, path);
  emit(
      out, [&](std::ostream& os) { analysis::write_analysis_table(a, os); },
      [&](std::ostream& os) { analysis::write_analysis_json(a, os); },
      [&](std::ostream& os) { report::write_trace(a.trace.timeline, os); });
  return 0;
}

}  // namespace stepsim::cli
