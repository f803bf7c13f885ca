// madvise(MADV_HUGEPAGE) on the 2 MiB-aligned part of a buffer; mapping pages in one call
// (MADV_POPULATE_WRITE) and giving them back (MADV_DONTNEED).
#include "engine/huge_pages.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/parallel.hpp"

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
  const std::size_t threads = std::min(bytes / kPerThread, setup_threads());
  if (threads < 2) {
    advise_pages(data, bytes, kPage, false, MADV_POPULATE_WRITE);
    return;
  }
  char* const first = static_cast<char*>(data);
  const std::size_t part = (bytes / threads + kHugePage - 1) & ~(kHugePage - 1);  // whole huge pages
  run_parts(threads, [=](std::size_t p) {
    if (p * part < bytes)
      advise_pages(first + p * part, std::min(part, bytes - p * part), kPage, false, MADV_POPULATE_WRITE);
  });
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

ZeroedMemory::ZeroedMemory(std::size_t bytes) {
  if (bytes == 0) return;
#if defined(__linux__)
  // Only a large buffer is worth its own mapping: a smaller one comes from the allocator, which
  // hands out memory a previous simulation freed, already mapped (see keep_freed_memory).
  constexpr std::size_t kMapped = std::size_t{64} << 20;
  if (bytes >= kMapped) {
    // Anonymous mappings read as zero; one huge page more leaves room to start on a boundary.
    if (bytes > SIZE_MAX - kHugePage) throw std::bad_alloc();
    length_ = bytes + kHugePage;
    base_ = mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) {
      base_ = nullptr;
      throw std::bad_alloc();
    }
    mapped_ = true;
    data_ = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(base_) + kHugePage - 1) & ~(kHugePage - 1));
    advise_huge_pages(data_, bytes);
    return;
  }
#endif
  constexpr std::size_t kLine = 64;
  if (bytes > SIZE_MAX - kLine) throw std::bad_alloc();
  length_ = (bytes + kLine - 1) & ~(kLine - 1);
  base_ = std::aligned_alloc(kLine, length_);
  if (base_ == nullptr) throw std::bad_alloc();
  std::memset(base_, 0, length_);
  data_ = base_;
}

ZeroedMemory::~ZeroedMemory() {
#if defined(__linux__)
  if (mapped_) {
    (void)munmap(base_, length_);
    return;
  }
#endif
  std::free(base_);
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
