// The streaming Chrome Trace Event writer behind write_trace(): one JSON event per line,
// buffered, never a document tree, so that million-interval timelines stay cheap.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace stepsim::report {

// Microseconds with three decimals from picoseconds, rounded to the nearest nanosecond.
std::int64_t ps_to_ns(std::int64_t ps);
void append_us(fmt::memory_buffer& buf, std::int64_t ns);

class TraceStream {
 public:
  explicit TraceStream(std::ostream& out);
  ~TraceStream();
  TraceStream(const TraceStream&) = delete;
  TraceStream& operator=(const TraceStream&) = delete;

  // Starts the next event and returns the buffer to append its members to (no braces).
  fmt::memory_buffer& begin_event();
  void end_event();
  // Closes the event array and the document, with `members` (",\"key\":value..." or empty)
  // after the events; must be called once, last.
  void finish(std::string_view members = {});

 private:
  void flush();
  std::ostream& out_;
  fmt::memory_buffer buf_;
  bool first_ = true;
};

}  // namespace stepsim::report
