// TraceStream: the event array of a Chrome trace, written in chunks as it grows.
#include <ostream>

#include "report/trace_writer.hpp"

namespace stepsim::report {
namespace {

constexpr std::size_t kFlushBytes = 1 << 20;

}  // namespace

std::int64_t ps_to_ns(std::int64_t ps) {
  const std::int64_t half = ps < 0 ? -500 : 500;
  return (ps + half) / 1000;
}

void append_us(fmt::memory_buffer& buf, std::int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const std::uint64_t mag = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  fmt::format_to(std::back_inserter(buf), "{}{}.{:03}", sign, mag / 1000, mag % 1000);
}

TraceStream::TraceStream(std::ostream& out) : out_(out) { buf_.append(std::string_view("{\"traceEvents\":[")); }

// A writer abandoned by an exception leaves its partial text unflushed: the caller's
// write_outputs discards the staged file anyway.
TraceStream::~TraceStream() = default;

fmt::memory_buffer& TraceStream::begin_event() {
  buf_.append(std::string_view(first_ ? "\n{" : ",\n{"));
  first_ = false;
  return buf_;
}

void TraceStream::end_event() {
  buf_.push_back('}');
  if (buf_.size() >= kFlushBytes) flush();
}

void TraceStream::finish(std::string_view members) {
  buf_.append(std::string_view("\n],\n\"displayTimeUnit\":\"ms\""));
  buf_.append(members);
  buf_.append(std::string_view("}\n"));
  flush();
}

void TraceStream::flush() {
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
}

}  // namespace stepsim::report
