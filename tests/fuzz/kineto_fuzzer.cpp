// Fuzz target: a PyTorch profiler (Kineto) trace, plain JSON or gzip, through what
// `stepsim analyze` does: read, build the timeline, measure the steps, write table and JSON.
// A trace it accepts must give a mean step of positive length made of finite, non-negative
// parts that sum to it.
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "analysis/analysis_output.hpp"
#include "fuzz/fuzz_outcome.hpp"

namespace {

// The reader takes a path; an in-memory file made once per process gives it one without
// touching the disk. Its name ends in .json as a real trace's does.
class MemoryFile {
 public:
  MemoryFile() : fd_(memfd_create("trace.json", 0)) {
    if (fd_ < 0) stepsim::fuzz::finding("memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  const std::string& hold(const std::uint8_t* data, std::size_t size) {
    if (ftruncate(fd_, 0) != 0) stepsim::fuzz::finding("ftruncate failed");
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) stepsim::fuzz::finding("pwrite failed");
      done += static_cast<std::size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

void check_mean_step(const stepsim::Report& r) {
  using stepsim::fuzz::finding;
  const stepsim::Breakdown& b = r.breakdown_s;
  const double parts[] = {b.compute, b.exposed_total(), b.bubble, b.optimizer, b.other, r.overlap.hidden_fraction};
  for (double part : parts)
    if (!std::isfinite(part) || part < 0) finding("the mean step has a part that is negative or not finite");
  if (!std::isfinite(r.step_time_s) || r.step_time_s <= 0)
    finding("the mean step is not a positive time: " + std::to_string(r.step_time_s) + " s");
  const double sum = b.compute + b.exposed_total() + b.bubble + b.optimizer + b.other;
  if (std::abs(sum - r.step_time_s) > 1e-9 * r.step_time_s + 1e-12)
    finding("the breakdown sums to " + std::to_string(sum) + " s, the step is " + std::to_string(r.step_time_s));
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static MemoryFile file;
  const std::string& path = file.hold(data, size);
  return stepsim::fuzz::run_one([&] {
    const stepsim::analysis::Analysis a = stepsim::analysis::analyze_trace(path, std::nullopt, std::nullopt);
    check_mean_step(a.mean);
    std::ostringstream sink;
    stepsim::analysis::write_analysis_table(a, sink);
    stepsim::analysis::write_analysis_json(a, sink);
  });
}
