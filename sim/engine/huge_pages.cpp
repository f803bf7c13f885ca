// madvise(MADV_HUGEPAGE) on the 2 MiB-aligned part of a buffer; mapping pages in one call
// (MADV_POPULATE_WRITE) and giving them back (MADV_DONTNEED).
#include "engine/huge_pages.hpp"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace stepsim::engine {

void advise_huge_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (first + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t end = (first + bytes) & ~(kHugePage - 1);
  // A refusal (no THP in this kernel, memory not from mmap) only leaves small pages.
  if (data != nullptr && end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

void populate_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  constexpr std::uintptr_t kPage = 4096;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = first & ~(kPage - 1);
  const std::uintptr_t end = (first + bytes + kPage - 1) & ~(kPage - 1);
  if (data != nullptr && end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)bytes;
#endif
}

void release_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_DONTNEED)
  constexpr std::uintptr_t kPage = 4096;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (first + kPage - 1) & ~(kPage - 1);
  const std::uintptr_t end = (first + bytes) & ~(kPage - 1);
  if (data != nullptr && end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace stepsim::engine
