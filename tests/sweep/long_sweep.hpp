// A sweep of 1,000 points of the default scenario (bucket sizes 1 to 1,000 MiB) on one
// thread: a few seconds, long enough to be killed, or written beside, part-way.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

namespace stepsim::testing {

inline const std::string kLongSweep = "--vary data_parallel.bucket_cap_mb=1:1000:+1 --jobs 1";

inline std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Starts `stepsim sweep` of kLongSweep writing `out`, without a shell, so that the pid is
// stepsim's own.
inline pid_t start_long_sweep(const std::filesystem::path& out) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen("/dev/null", "w", stderr);
    ::execl(STEPSIM_BINARY, STEPSIM_BINARY, "sweep", "--vary", "data_parallel.bucket_cap_mb=1:1000:+1", "--jobs", "1",
            "-o", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

}  // namespace stepsim::testing
