// The flows that load one link resource, in the order they started. Nearly every link carries
// at most a few flows at a time, so up to three are kept inline: starting or ending a flow then
// reads one small entry per link it loads instead of a vector and its separate buffer, which at
// thousands of ranks are two cache misses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>

namespace stepsim::engine {

class FlowSet {
 public:
  FlowSet() = default;
  FlowSet(FlowSet&& other) noexcept : size_(other.size_) {
    std::copy_n(other.words_, kInline, words_);  // the items, or the buffer and its capacity
    other.size_ = 0;
  }
  FlowSet(const FlowSet&) = delete;
  FlowSet& operator=(const FlowSet&) = delete;
  FlowSet& operator=(FlowSet&&) = delete;
  ~FlowSet() {
    if (spilled()) delete[] heap();
  }

  bool empty() const { return count() == 0; }
  std::uint32_t back() const { return data()[count() - 1]; }
  std::span<const std::uint32_t> items() const { return {data(), count()}; }

  void push_back(std::uint32_t f) {
    if (count() == capacity()) grow();
    data()[count()] = f;
    ++size_;
  }

  // Removes every entry equal to `f`, keeping the others in order.
  void erase(std::uint32_t f) {
    std::uint32_t* first = data();
    const auto kept = static_cast<std::uint32_t>(std::remove(first, first + count(), f) - first);
    size_ = (size_ & kSpilled) | kept;
  }

 private:
  static constexpr std::uint32_t kInline = 3;
  static constexpr std::uint32_t kSpilled = 0x80000000U;  // in size_: the items are in a buffer of their own

  bool spilled() const { return (size_ & kSpilled) != 0; }
  std::uint32_t count() const { return size_ & ~kSpilled; }
  std::uint32_t capacity() const { return spilled() ? words_[2] : kInline; }
  std::uint32_t* heap() const {
    std::uint32_t* p = nullptr;
    std::memcpy(&p, words_, sizeof p);
    return p;
  }
  std::uint32_t* data() { return spilled() ? heap() : words_; }
  const std::uint32_t* data() const { return spilled() ? heap() : words_; }

  [[gnu::noinline]] void grow() {  // rare: kept out of the callers' code
    if (capacity() > kSpilled / 4) throw std::length_error("too many flows on one link");
    const std::uint32_t bigger_capacity = 2 * capacity();
    auto* bigger = new std::uint32_t[bigger_capacity];
    std::copy_n(data(), count(), bigger);
    if (spilled()) delete[] heap();
    std::memcpy(words_, &bigger, sizeof bigger);
    words_[2] = bigger_capacity;
    size_ |= kSpilled;
  }

  // Inline, up to three items; spilled, the buffer's address in the first two words and its
  // capacity in the third.
  alignas(8) std::uint32_t words_[kInline] = {};
  std::uint32_t size_ = 0;  // items, and kSpilled
};
static_assert(sizeof(FlowSet) == 16, "four links' flows to a cache line");

}  // namespace stepsim::engine
