// Transparent huge pages for the engine's largest buffers, which the event loop reads in
// no particular order: 2 MiB pages need 512 times fewer page faults and TLB entries.
#pragma once

#include <cstddef>
#include <vector>

namespace stepsim::engine {

// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes) with huge pages
// when they are first touched. Only a hint: where the kernel declines, or outside Linux,
// nothing changes.
void advise_huge_pages(void* data, std::size_t bytes);

// Asks the kernel to map the pages of [data, data + bytes) now, in one call, as a first write
// would: one system call instead of a page fault per page (costly on virtual machines), split
// over up to four threads for buffers of hundreds of megabytes. The contents do not change.
// Only a hint, like advise_huge_pages.
void populate_pages(void* data, std::size_t bytes);

// Gives the whole pages inside [data, data + bytes) back to the kernel: the memory stays
// valid but reads as zeros afterwards, so only for a buffer that is not read again.
void release_pages(void* data, std::size_t bytes);

// For a process that simulates many times (a sweep, advice, the benchmarks): buffers of up to
// 32 MiB that a simulation frees stay with the allocator for the next one instead of going
// back to the kernel, whose fresh pages each cost a page fault on first touch. Call once, at
// start. glibc only; elsewhere nothing changes.
void keep_freed_memory();

// `v` with room for `n` elements, its buffer advised and, when large, mapped in one call
// before any is written: on virtual machines a page fault can cost milliseconds, so that
// touching gigabytes page by page took seconds where one call takes a tenth of that.
template <typename T>
void reserve_on_huge_pages(std::vector<T>& v, std::size_t n) {
  v.reserve(n);
  advise_huge_pages(v.data(), n * sizeof(T));
  constexpr std::size_t kLarge = std::size_t{2} << 20;
  if (n * sizeof(T) >= kLarge) populate_pages(v.data(), n * sizeof(T));
}

// `v` resized to `n` value-initialized elements on a buffer prepared as above.
template <typename T>
void resize_on_huge_pages(std::vector<T>& v, std::size_t n) {
  v.clear();
  reserve_on_huge_pages(v, n);
  v.resize(n);
}

}  // namespace stepsim::engine
