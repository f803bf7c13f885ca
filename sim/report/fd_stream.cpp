// FdStreambuf: buffered write(2) with EINTR and short writes handled.
#include "report/fd_stream.hpp"

#include <unistd.h>

#include <cerrno>

namespace stepsim::report {

FdStreambuf::FdStreambuf(int fd) : fd_(fd) { setp(buffer_.data(), buffer_.data() + buffer_.size()); }

bool FdStreambuf::write_all(const char* s, std::size_t n) {
  if (error_ != 0) return false;
  while (n > 0) {
    const ssize_t w = ::write(fd_, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      error_ = w < 0 ? errno : EIO;
      return false;
    }
    s += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool FdStreambuf::drain() {
  const auto n = static_cast<std::size_t>(pptr() - pbase());
  setp(buffer_.data(), buffer_.data() + buffer_.size());
  return write_all(buffer_.data(), n);
}

FdStreambuf::int_type FdStreambuf::overflow(int_type ch) {
  if (!drain()) return traits_type::eof();
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  *pptr() = traits_type::to_char_type(ch);
  pbump(1);
  return ch;
}

std::streamsize FdStreambuf::xsputn(const char* s, std::streamsize n) {
  if (n <= epptr() - pptr()) {
    traits_type::copy(pptr(), s, static_cast<std::size_t>(n));
    pbump(static_cast<int>(n));
    return n;
  }
  // Larger than what is left of the buffer: flush it and write the block directly.
  if (!drain() || !write_all(s, static_cast<std::size_t>(n))) return 0;
  return n;
}

int FdStreambuf::sync() { return drain() ? 0 : -1; }

}  // namespace stepsim::report
