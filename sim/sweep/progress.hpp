// A one-line progress display on stderr (count, rate, ETA), drawn only when stderr is a
// terminal so that logs and pipes stay clean.
#pragma once

#include <chrono>
#include <cstddef>

namespace stepsim::sweep {

class Progress {
 public:
  Progress(std::size_t total, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void update(std::size_t done);  // redraws at most a few times a second
  void finish();

  // Whether stderr is a terminal: the default for `enabled`.
  static bool stderr_is_terminal();

 private:
  void draw(std::size_t done);
  std::size_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace stepsim::sweep
