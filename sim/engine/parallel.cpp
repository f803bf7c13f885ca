#include "engine/parallel.hpp"

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

namespace stepsim::engine {

std::size_t setup_threads() { return std::min<std::size_t>(std::max(1U, std::thread::hardware_concurrency()), 4); }

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
