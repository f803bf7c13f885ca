// Threads for setup work, and how many cores this process may really use.
#include "engine/parallel.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace stepsim::engine {
namespace {

// Whether the calling thread is inside a SingleThreaded scope. Per thread, so that
// simulations on other threads (another sweep, a test) are not affected.
thread_local bool single_threaded = false;

// The cores a cgroup v2 cpu.max ("QUOTA PERIOD" or "max PERIOD") allows, rounded up.
double quota_cores(const std::filesystem::path& cpu_max) {
  std::ifstream in(cpu_max);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || !(period > 0)) return std::numeric_limits<double>::infinity();
  try {
    return std::ceil(std::stod(quota) / period);
  } catch (const std::exception&) {
    return std::numeric_limits<double>::infinity();
  }
}

// The smallest quota of this process's cgroup and the cgroups above it.
double cgroup_cores() {
  std::ifstream in("/proc/self/cgroup");
  double cores = std::numeric_limits<double>::infinity();
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("0::/")) continue;  // cgroup v2's single hierarchy
    std::filesystem::path group = std::filesystem::path("/sys/fs/cgroup") / line.substr(4);
    for (; group.string().size() > std::string("/sys/fs/cgroup").size(); group = group.parent_path())
      cores = std::min(cores, quota_cores(group / "cpu.max"));
  }
  return cores;
}

}  // namespace

unsigned usable_cores() {
  unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) cores = std::max(1, CPU_COUNT(&set));
  const double quota = cgroup_cores();
  if (quota < cores) cores = std::max(1U, static_cast<unsigned>(quota));
  return cores;
}

std::size_t setup_threads() { return single_threaded ? 1 : std::min<std::size_t>(usable_cores(), 4); }

SingleThreaded::SingleThreaded() : previous_(single_threaded) { single_threaded = true; }
SingleThreaded::~SingleThreaded() { single_threaded = previous_; }

void run_parts(std::size_t parts, const std::function<void(std::size_t part)>& work) {
  std::vector<std::thread> helpers;
  std::size_t started = 1;  // parts [1, started) have a thread of their own
  for (; started < parts; ++started) {
    try {
      helpers.emplace_back(work, started);
    } catch (const std::system_error&) {
      break;
    }
  }
  if (parts > 0) work(0);
  for (std::size_t part = started; part < parts; ++part) work(part);
  for (std::thread& h : helpers) h.join();
}

}  // namespace stepsim::engine
