// The flows that load one link resource, in the order they started. Nearly every link carries
// at most a few flows at a time, so up to four are kept inline: starting or ending a flow then
// reads one small entry per link it loads instead of a vector and its separate buffer, which at
// thousands of ranks are two cache misses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>

namespace stepsim::engine {

class FlowSet {
 public:
  FlowSet() = default;
  FlowSet(FlowSet&& other) noexcept : size_(other.size_), capacity_(other.capacity_) {
    if (spilled()) {
      heap_ = other.heap_;
    } else {
      std::copy_n(other.local_, kInline, local_);
    }
    other.size_ = 0;
    other.capacity_ = kInline;
  }
  FlowSet(const FlowSet&) = delete;
  FlowSet& operator=(const FlowSet&) = delete;
  FlowSet& operator=(FlowSet&&) = delete;
  ~FlowSet() {
    if (spilled()) delete[] heap_;
  }

  bool empty() const { return size_ == 0; }
  std::uint32_t back() const { return data()[size_ - 1]; }
  std::span<const std::uint32_t> items() const { return {data(), size_}; }

  void push_back(std::uint32_t f) {
    if (size_ == capacity_) grow();
    data()[size_++] = f;
  }

  // Removes every entry equal to `f`, keeping the others in order.
  void erase(std::uint32_t f) {
    std::uint32_t* first = data();
    size_ = static_cast<std::uint32_t>(std::remove(first, first + size_, f) - first);
  }

 private:
  static constexpr std::uint32_t kInline = 4;

  bool spilled() const { return capacity_ > kInline; }
  std::uint32_t* data() { return spilled() ? heap_ : local_; }
  const std::uint32_t* data() const { return spilled() ? heap_ : local_; }

  [[gnu::noinline]] void grow() {  // rare: kept out of the callers' code
    auto* bigger = new std::uint32_t[2 * std::size_t{capacity_}];
    std::copy_n(data(), size_, bigger);
    if (spilled()) delete[] heap_;
    heap_ = bigger;
    capacity_ *= 2;
  }

  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInline;
  union {
    std::uint32_t local_[kInline];
    std::uint32_t* heap_;
  };
};

}  // namespace stepsim::engine
