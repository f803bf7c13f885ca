// An std::ostream over a file descriptor that remembers why a write failed (errno), so
// that output errors can say "No space left on device" rather than "write failed".
#pragma once

#include <array>
#include <ostream>
#include <streambuf>

namespace stepsim::report {

class FdStreambuf : public std::streambuf {
 public:
  explicit FdStreambuf(int fd);
  // The errno of the first failed write; 0 while every write succeeded.
  int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  bool drain();
  bool write_all(const char* s, std::size_t n);

  int fd_;
  int error_ = 0;
  std::array<char, 1 << 16> buffer_{};
};

}  // namespace stepsim::report
