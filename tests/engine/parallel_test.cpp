// How many threads the engine may take: no more cores than this thread may run on, and none
// of its own inside a SingleThreaded scope (a sweep's workers, which hold every core already).
#include <sched.h>

#include <catch2/catch.hpp>

#include "engine/parallel.hpp"

using stepsim::engine::setup_threads;
using stepsim::engine::SingleThreaded;
using stepsim::engine::usable_cores;

TEST_CASE("a thread allowed on one CPU counts one usable core") {
  cpu_set_t before;
  REQUIRE(::sched_getaffinity(0, sizeof before, &before) == 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &before)) continue;
    CPU_SET(cpu, &one);
    break;
  }
  REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
  const unsigned cores = usable_cores();
  const std::size_t threads = setup_threads();
  REQUIRE(::sched_setaffinity(0, sizeof before, &before) == 0);
  CHECK(cores == 1);
  CHECK(threads == 1);
  CHECK(usable_cores() <= static_cast<unsigned>(CPU_COUNT(&before)));
}

TEST_CASE("inside a SingleThreaded scope setup work stays on the calling thread") {
  const std::size_t outside = setup_threads();
  {
    const SingleThreaded alone;
    CHECK(setup_threads() == 1);
    {
      const SingleThreaded nested;
      CHECK(setup_threads() == 1);
    }
    CHECK(setup_threads() == 1);
  }
  CHECK(setup_threads() == outside);
}
