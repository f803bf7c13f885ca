// The progress line: "\r" redraws in place; the rate and ETA count only the points this run
// simulates.
#include "sweep/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace stepsim::sweep {
namespace {

std::string duration_text(double seconds) {
  if (seconds < 60) return fmt::format("{:.0f} s", seconds);
  if (seconds < 3600) return fmt::format("{:.0f} min {:02.0f} s", std::floor(seconds / 60), std::fmod(seconds, 60));
  return fmt::format("{:.0f} h {:02.0f} min", std::floor(seconds / 3600), std::fmod(seconds / 60, 60));
}

}  // namespace

Progress::Progress(std::size_t total, bool enabled, std::FILE* out)
    : total_(total), enabled_(enabled), out_(out), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() { finish(); }

bool Progress::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

void Progress::update(std::size_t done, std::size_t skipped) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(200) && done < total_) return;
  last_draw_ = now;
  draw(done, skipped);
}

void Progress::draw(std::size_t done, std::size_t skipped) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // Points whose rows were there already took no simulation: counted, they would make the rate
  // that of reading the file and the ETA far too short.
  const std::size_t run = done - std::min(skipped, done);
  const double rate = elapsed > 0 ? static_cast<double>(run) / elapsed : 0;
  const std::string eta = done >= total_ ? duration_text(0)
                          : rate > 0     ? duration_text(static_cast<double>(total_ - done) / rate)
                                         : "?";
  const std::string line =
      fmt::format("sweep: {}/{} points ({:.0f} %), {:.1f} points/s, ETA {}  ", done, total_,
                  total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, rate, eta);
  std::fputs(("\r" + line).c_str(), out_);
  std::fflush(out_);
  width_ = std::max(width_, line.size());
  drawn_ = true;
}

void Progress::hide() {
  if (!enabled_ || !drawn_) return;
  std::fputs(("\r" + std::string(width_, ' ') + "\r").c_str(), out_);
  std::fflush(out_);
  drawn_ = false;
}

void Progress::finish() {
  if (!enabled_ || !drawn_) return;
  std::fputs("\n", out_);
  drawn_ = false;
  enabled_ = false;
}

}  // namespace stepsim::sweep
