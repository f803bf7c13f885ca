// Transparent huge pages for the engine's largest buffers, which the event loop reads in
// no particular order: 2 MiB pages need 512 times fewer page faults and TLB entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
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

// An allocator for the engine's mid-sized arrays that the event loop reads at random (every
// rank's state, stream heads, the event queue): from a megabyte on, a buffer starts on a 2 MiB
// boundary and is advised onto huge pages, so that thousands of ranks' entries take a few TLB
// entries rather than hundreds (a TLB miss costs a nested page walk on a virtual machine).
// Smaller buffers come from the standard allocator.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  explicit HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(std::size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    if (!large(n)) return std::allocator<T>{}.allocate(n);
    const std::size_t bytes = (n * sizeof(T) + kHugePage - 1) & ~(kHugePage - 1);
    void* p = std::aligned_alloc(kHugePage, bytes);
    if (p == nullptr) throw std::bad_alloc();
    advise_huge_pages(p, bytes);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) {
    if (!large(n)) {
      std::allocator<T>{}.deallocate(p, n);
      return;
    }
    std::free(p);
  }
  bool operator==(const HugePageAllocator&) const = default;

 private:
  static bool large(std::size_t n) { return n * sizeof(T) >= kHugePage / 2; }
};

// Memory whose bytes read as zero, for ZeroedArray: from 64 MiB on, mapped from the kernel,
// which zero-fills each page when it is first touched, by whichever thread touches it;
// smaller, from the allocator and cleared. Throws std::bad_alloc.
class ZeroedMemory {
 public:
  ZeroedMemory() = default;
  explicit ZeroedMemory(std::size_t bytes);
  ZeroedMemory(ZeroedMemory&& other) noexcept { swap(other); }
  ZeroedMemory& operator=(ZeroedMemory&& other) noexcept {
    ZeroedMemory(std::move(other)).swap(*this);
    return *this;
  }
  ~ZeroedMemory();
  void* data() const { return data_; }

 private:
  void swap(ZeroedMemory& other) noexcept {
    std::swap(base_, other.base_);
    std::swap(length_, other.length_);
    std::swap(data_, other.data_);
    std::swap(mapped_, other.mapped_);
  }
  void* base_ = nullptr;  // what was mapped or allocated
  std::size_t length_ = 0;
  void* data_ = nullptr;  // base_ rounded up to a huge page when mapped
  bool mapped_ = false;
};

// A fixed number of T, for a type whose all-zero bytes are its initial value: no pass writes
// it at allocation, so a large one costs nothing until its pages are used, and the thread that
// first writes a page (one that prepares the array while another starts using its front) takes
// that page's fault.
template <typename T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  ZeroedArray() = default;
  explicit ZeroedArray(std::size_t n) : memory_(checked_bytes(n)), size_(n) {}
  T* data() const { return static_cast<T*>(memory_.data()); }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) const { return data()[i]; }

 private:
  static std::size_t checked_bytes(std::size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    return n * sizeof(T);
  }
  ZeroedMemory memory_;
  std::size_t size_ = 0;
};

template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

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
