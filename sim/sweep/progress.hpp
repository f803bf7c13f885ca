// A one-line progress display on stderr (count, rate, ETA), drawn only when stderr is a
// terminal so that logs and pipes stay clean.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>

namespace stepsim::sweep {

class Progress {
 public:
  // Draws on `out` (stderr unless a test gives another stream).
  Progress(std::size_t total, bool enabled, std::FILE* out = stderr);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // `done` points of `total` are through, `skipped` of them without being run (--resume found
  // their rows): the rate and the ETA count only those run. Redraws at most a few times a second.
  void update(std::size_t done, std::size_t skipped = 0);
  // Erases the line, before other text goes to the same terminal (rows on stdout); the next
  // update draws it again at once.
  void hide();
  void finish();

  // Whether stderr is a terminal: the default for `enabled`.
  static bool stderr_is_terminal();

 private:
  void draw(std::size_t done, std::size_t skipped);
  std::size_t total_;
  bool enabled_;
  std::FILE* out_;
  bool drawn_ = false;
  std::size_t width_ = 0;  // of the line drawn
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace stepsim::sweep
