// Reads a file in chunks, inflating it on the fly when it is gzip (detected by its magic
// bytes, not its name), so that traces of many GB are parsed with bounded memory.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace stepsim::analysis {

class ByteSource {
 public:
  // Throws InputError when the file cannot be opened.
  explicit ByteSource(std::string path);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Fills `out` with up to `capacity` bytes of content; 0 at the end. Throws InputError on
  // corrupt or truncated gzip data.
  std::size_t read(char* out, std::size_t capacity);

  bool gzip() const { return gzip_; }
  const std::string& path() const { return path_; }
  std::uint64_t file_bytes_read() const { return file_bytes_; }

 private:
  std::size_t read_raw(char* out, std::size_t capacity);
  std::size_t inflate_some(char* out, std::size_t capacity);
  bool refill();

  std::string path_;
  std::ifstream file_;
  bool gzip_ = false;
  bool finished_ = false;
  std::uint64_t file_bytes_ = 0;
  std::vector<unsigned char> in_;
  z_stream zs_{};
  bool zs_open_ = false;
};

}  // namespace stepsim::analysis
