// Setup work of a large run split over a few threads: mapping fresh memory and drawing every
// kernel's duration. The event loop itself runs on one thread.
#pragma once

#include <cstddef>
#include <functional>

namespace stepsim::engine {

// How many threads setup work is split over: the machine's cores, at most four.
std::size_t setup_threads();

// Runs work(0), ..., work(parts - 1) at once, each on a thread of its own, work(0) on the
// caller's, and returns when all are done. A part whose thread cannot be started runs on the
// caller's thread too.
void run_parts(std::size_t parts, const std::function<void(std::size_t part)>& work);

}  // namespace stepsim::engine
