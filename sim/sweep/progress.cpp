// The progress line: "\r" redraws in place; the rate and ETA count only this run's points.
#include "sweep/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace stepsim::sweep {
namespace {

std::string duration_text(double seconds) {
  if (seconds < 60) return fmt::format("{:.0f} s", seconds);
  if (seconds < 3600) return fmt::format("{:.0f} min {:02.0f} s", std::floor(seconds / 60), std::fmod(seconds, 60));
  return fmt::format("{:.0f} h {:02.0f} min", std::floor(seconds / 3600), std::fmod(seconds / 60, 60));
}

}  // namespace

Progress::Progress(std::size_t total, bool enabled)
    : total_(total), enabled_(enabled), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() { finish(); }

bool Progress::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

void Progress::update(std::size_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(200) && done < total_) return;
  last_draw_ = now;
  draw(done);
}

void Progress::draw(std::size_t done) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  const std::string eta = rate > 0 ? duration_text(static_cast<double>(total_ - done) / rate) : "?";
  const std::string line =
      fmt::format("\rsweep: {}/{} points ({:.0f} %), {:.1f} points/s, ETA {}  ", done, total_,
                  total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, rate, eta);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (!enabled_ || !drawn_) return;
  std::fputs("\n", stderr);
  drawn_ = false;
  enabled_ = false;
}

}  // namespace stepsim::sweep
