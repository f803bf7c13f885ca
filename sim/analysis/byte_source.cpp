// Plain or gzip file contents in chunks; zlib's inflate with automatic header detection
// also reads concatenated gzip members (as written by `cat a.gz b.gz`).
#include "analysis/byte_source.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "stepsim/error.hpp"
#include "stepsim/input_files.hpp"

namespace stepsim::analysis {
namespace {

constexpr std::size_t kInputChunk = 1 << 20;

}  // namespace

ByteSource::ByteSource(std::string path) : path_(std::move(path)) {
  errno = 0;
  file_.open(path_, std::ios::binary);
  if (!file_) {
    const int error = errno != 0 ? errno : EIO;
    throw InputError(path_, "", fmt::format("cannot open the file for reading: {}", std::strerror(error)));
  }
  note_input_file(path_);
  in_.resize(kInputChunk);
  file_.read(reinterpret_cast<char*>(in_.data()), 2);
  const auto got = static_cast<std::size_t>(file_.gcount());
  file_bytes_ = got;
  gzip_ = got == 2 && in_[0] == 0x1f && in_[1] == 0x8b;
  zs_.next_in = in_.data();
  zs_.avail_in = static_cast<uInt>(got);
  if (!gzip_) return;
  // 15 + 32: the largest window, with gzip/zlib header detection.
  if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw InputError(path_, "", "cannot start gzip decompression");
  zs_open_ = true;
}

ByteSource::~ByteSource() {
  if (zs_open_) inflateEnd(&zs_);
}

bool ByteSource::refill() {
  if (zs_.avail_in > 0) return true;
  file_.read(reinterpret_cast<char*>(in_.data()), static_cast<std::streamsize>(in_.size()));
  const auto got = static_cast<std::size_t>(file_.gcount());
  file_bytes_ += got;
  zs_.next_in = in_.data();
  zs_.avail_in = static_cast<uInt>(got);
  return got > 0;
}

std::size_t ByteSource::read_raw(char* out, std::size_t capacity) {
  // The first bytes (read to sniff the gzip magic) are still in the input buffer.
  std::size_t n = 0;
  if (zs_.avail_in > 0) {
    n = std::min<std::size_t>(zs_.avail_in, capacity);
    std::memcpy(out, zs_.next_in, n);
    zs_.next_in += n;
    zs_.avail_in -= static_cast<uInt>(n);
  }
  if (n == capacity) return n;
  file_.read(out + n, static_cast<std::streamsize>(capacity - n));
  const auto got = static_cast<std::size_t>(file_.gcount());
  file_bytes_ += got;
  return n + got;
}

std::size_t ByteSource::inflate_some(char* out, std::size_t capacity) {
  zs_.next_out = reinterpret_cast<unsigned char*>(out);
  zs_.avail_out = static_cast<uInt>(capacity);
  while (zs_.avail_out == capacity) {
    if (!refill()) {
      throw InputError(path_, fmt::format("compressed byte {}", file_bytes_), "gzip data ends early (truncated file?)");
    }
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow; trailing bytes that are not one are an error below.
      if (!refill()) {
        finished_ = true;
        break;
      }
      inflateReset(&zs_);
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      throw InputError(path_, fmt::format("compressed byte {}", file_bytes_ - zs_.avail_in),
                       fmt::format("corrupt gzip data: {}", zs_.msg != nullptr ? zs_.msg : "inflate failed"));
    }
  }
  return capacity - zs_.avail_out;
}

std::size_t ByteSource::read(char* out, std::size_t capacity) {
  if (finished_ || capacity == 0) return 0;
  if (!gzip_) return read_raw(out, capacity);
  return inflate_some(out, capacity);
}

}  // namespace stepsim::analysis
