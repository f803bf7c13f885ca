// madvise(MADV_HUGEPAGE) on the 2 MiB-aligned part of a buffer; mapping pages in one call
// (MADV_POPULATE_WRITE) and giving them back (MADV_DONTNEED).
#include "engine/huge_pages.hpp"

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace stepsim::engine {
namespace {

#if defined(__linux__)
// madvise over the pages of [data, data + bytes) of size `page`: the whole pages inside it
// (`inward`), or every page it touches. A refusal (no THP in this kernel, an older kernel,
// memory not from mmap) only costs speed.
void advise_pages(void* data, std::size_t bytes, std::uintptr_t page, bool inward, int advice) {
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (inward ? first + page - 1 : first) & ~(page - 1);
  const std::uintptr_t end = (inward ? first + bytes : first + bytes + page - 1) & ~(page - 1);
  if (data != nullptr && end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}
#endif

constexpr std::uintptr_t kPage = 4096;
constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;

}  // namespace

void advise_huge_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  advise_pages(data, bytes, kHugePage, true, MADV_HUGEPAGE);
#else
  (void)data, (void)bytes, (void)kHugePage;
#endif
}

void populate_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  // Zeroing fresh pages is the kernel's work, done on the thread that maps them, and on a
  // virtual machine the host's too: gigabytes map about twice as fast split over two threads.
  constexpr std::size_t kPerThread = std::size_t{64} << 20;
  const std::size_t threads =
      std::min<std::size_t>({bytes / kPerThread, std::max(1U, std::thread::hardware_concurrency()), 4});
  if (threads < 2) {
    advise_pages(data, bytes, kPage, false, MADV_POPULATE_WRITE);
    return;
  }
  char* const first = static_cast<char*>(data);
  const std::size_t part = (bytes / threads + kHugePage - 1) & ~(kHugePage - 1);
  std::vector<std::thread> helpers;
  bool all = false;  // no thread to spare for a part: this one maps the whole buffer
  for (std::size_t t = 1; t < threads && t * part < bytes; ++t) {
    try {
      char* const begin = first + t * part;
      const std::size_t size = std::min(part, bytes - t * part);
      helpers.emplace_back([=] { advise_pages(begin, size, kPage, false, MADV_POPULATE_WRITE); });
    } catch (const std::system_error&) {
      all = true;
      break;
    }
  }
  advise_pages(first, all ? bytes : std::min(part, bytes), kPage, false, MADV_POPULATE_WRITE);
  for (std::thread& h : helpers) h.join();
#else
  (void)data, (void)bytes, (void)kPage;
#endif
}

void release_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_DONTNEED)
  advise_pages(data, bytes, kPage, true, MADV_DONTNEED);
#else
  (void)data, (void)bytes;
#endif
}

void keep_freed_memory() {
#if defined(__GLIBC__)
  // glibc maps blocks above a threshold (128 KiB at start, raised as they are freed) with
  // mmap and unmaps them on free, and trims the heap's top beyond 128 KiB.
  constexpr int kKeep = 32 << 20;
  (void)mallopt(M_MMAP_THRESHOLD, kKeep);
  (void)mallopt(M_TRIM_THRESHOLD, 8 * kKeep);
#endif
}

}  // namespace stepsim::engine
