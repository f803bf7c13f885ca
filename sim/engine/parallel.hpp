// Setup work of a large run split over a few threads: mapping fresh memory and drawing every
// kernel's duration. The event loop itself runs on one thread.
#pragma once

#include <cstddef>
#include <functional>

namespace stepsim::engine {

// The cores this process may run on: its CPU affinity mask, and fewer when its cgroup's CPU
// quota (cgroup v2 cpu.max, on the way up to the root) allows less; at least 1.
unsigned usable_cores();

// How many threads setup work is split over: the usable cores, at most four; one inside a
// SingleThreaded scope.
std::size_t setup_threads();

// While one lives, simulations on the thread that made it start no threads of their own:
// for callers that already run a simulation per core (the workers of a sweep).
class SingleThreaded {
 public:
  SingleThreaded();
  ~SingleThreaded();
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;

 private:
  bool previous_;
};

// Runs work(0), ..., work(parts - 1) at once, each on a thread of its own, work(0) on the
// caller's, and returns when all are done. A part whose thread cannot be started runs on the
// caller's thread too.
void run_parts(std::size_t parts, const std::function<void(std::size_t part)>& work);

}  // namespace stepsim::engine
