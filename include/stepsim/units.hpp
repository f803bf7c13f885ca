// Unit-safe quantities: integer time, byte counts, and floating-point rates.
// Every conversion between units lives here and rounds exactly once.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace stepsim {

// A quantity left the range its integer representation holds (a duration beyond ±106 days,
// a byte count beyond 8 EiB). Only absurd input gets there; callers that know the input turn
// it into an InputError naming it.
class RangeOverflow : public std::overflow_error {
 public:
  using std::overflow_error::overflow_error;
};

namespace units_detail {

// The rounded integer nearest `v`, or RangeOverflow when it (or NaN) does not fit in int64.
constexpr std::int64_t round_checked(double v, const char* what) {
  // 2^63 is exactly representable; everything strictly inside (-2^63, 2^63) fits.
  constexpr double kLimit = 9223372036854775808.0;
  const double r = v < 0 ? v - 0.5 : v + 0.5;
  if (!(r > -kLimit && r < kLimit)) throw RangeOverflow(what);
  return static_cast<std::int64_t>(r);
}

constexpr std::int64_t add_checked(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) throw RangeOverflow(what);
  return out;
}

constexpr std::int64_t sub_checked(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) throw RangeOverflow(what);
  return out;
}

constexpr std::int64_t mul_checked(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) throw RangeOverflow(what);
  return out;
}

inline constexpr const char* kTimeOverflow = "a duration exceeds the simulator's range of 106 days";
inline constexpr const char* kBytesOverflow = "a size exceeds the simulator's range of 8 EiB";

}  // namespace units_detail

// A duration or an instant, as an integer count of picoseconds (±106 days). Arithmetic that
// would leave that range throws RangeOverflow instead of wrapping.
class Time {
 public:
  constexpr Time() = default;
  static constexpr Time from_ps(std::int64_t ps) { return Time(ps); }
  static constexpr Time from_ns(double ns) { return Time(round_ps(ns * 1e3)); }
  static constexpr Time from_us(double us) { return Time(round_ps(us * 1e6)); }
  static constexpr Time from_ms(double ms) { return Time(round_ps(ms * 1e9)); }
  static constexpr Time from_s(double s) { return Time(round_ps(s * 1e12)); }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t ps() const { return ps_; }
  constexpr double ns() const { return static_cast<double>(ps_) * 1e-3; }
  constexpr double us() const { return static_cast<double>(ps_) * 1e-6; }
  constexpr double ms() const { return static_cast<double>(ps_) * 1e-9; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }

  constexpr Time operator+(Time o) const { return Time(units_detail::add_checked(ps_, o.ps_, kOverflow)); }
  constexpr Time operator-(Time o) const { return Time(units_detail::sub_checked(ps_, o.ps_, kOverflow)); }
  constexpr Time& operator+=(Time o) { return *this = *this + o; }
  constexpr Time& operator-=(Time o) { return *this = *this - o; }
  constexpr Time operator*(std::int64_t k) const { return Time(units_detail::mul_checked(ps_, k, kOverflow)); }
  // Scaling by a real factor (efficiency, slowdown) rounds once to the nearest picosecond.
  constexpr Time scaled(double f) const { return Time(round_ps(static_cast<double>(ps_) * f)); }
  constexpr auto operator<=>(const Time&) const = default;

 private:
  static constexpr const char* kOverflow = units_detail::kTimeOverflow;
  constexpr explicit Time(std::int64_t ps) : ps_(ps) {}
  static constexpr std::int64_t round_ps(double v) { return units_detail::round_checked(v, kOverflow); }
  std::int64_t ps_ = 0;
};

constexpr Time min(Time a, Time b) { return a < b ? a : b; }
constexpr Time max(Time a, Time b) { return a < b ? b : a; }

// A byte count. Signed so that differences are safe; never negative in valid state.
class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(std::int64_t n) : n_(n) {}
  static constexpr Bytes kib(double k) { return Bytes(round_bytes(k * 1024.0)); }
  static constexpr Bytes mib(double m) { return Bytes(round_bytes(m * 1048576.0)); }
  static constexpr Bytes gib(double g) { return Bytes(round_bytes(g * 1073741824.0)); }
  constexpr std::int64_t count() const { return n_; }
  constexpr double as_double() const { return static_cast<double>(n_); }
  constexpr double mib_value() const { return static_cast<double>(n_) / 1048576.0; }
  constexpr Bytes operator+(Bytes o) const { return Bytes(units_detail::add_checked(n_, o.n_, kOverflow)); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(units_detail::sub_checked(n_, o.n_, kOverflow)); }
  constexpr Bytes& operator+=(Bytes o) { return *this = *this + o; }
  constexpr Bytes operator*(std::int64_t k) const { return Bytes(units_detail::mul_checked(n_, k, kOverflow)); }
  constexpr Bytes operator/(std::int64_t k) const { return Bytes(n_ / k); }
  constexpr auto operator<=>(const Bytes&) const = default;

 private:
  static constexpr const char* kOverflow = units_detail::kBytesOverflow;
  // Rounds half away from zero, so that negative sizes (memory releases) are exact too.
  static constexpr std::int64_t round_bytes(double v) { return units_detail::round_checked(v, kOverflow); }
  std::int64_t n_ = 0;
};

// A data rate in bytes per second (link, HBM, algorithm bandwidth).
class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth bytes_per_s(double v) { return Bandwidth(v); }
  static constexpr Bandwidth gbytes_per_s(double gb) { return Bandwidth(gb * 1e9); }
  static constexpr Bandwidth gbits_per_s(double gbit) { return Bandwidth(gbit * 1e9 / 8.0); }
  constexpr double bytes_per_s() const { return v_; }
  constexpr double gbytes_per_s() const { return v_ * 1e-9; }
  constexpr Bandwidth scaled(double f) const { return Bandwidth(v_ * f); }
  constexpr bool positive() const { return v_ > 0; }
  constexpr auto operator<=>(const Bandwidth&) const = default;

 private:
  constexpr explicit Bandwidth(double v) : v_(v) {}
  double v_ = 0;
};

// A compute rate in floating-point operations per second.
class FlopRate {
 public:
  constexpr FlopRate() = default;
  static constexpr FlopRate flops_per_s(double v) { return FlopRate(v); }
  static constexpr FlopRate tflops(double t) { return FlopRate(t * 1e12); }
  constexpr double flops_per_s() const { return v_; }
  constexpr double tflops() const { return v_ * 1e-12; }
  constexpr FlopRate scaled(double f) const { return FlopRate(v_ * f); }
  constexpr bool positive() const { return v_ > 0; }
  constexpr auto operator<=>(const FlopRate&) const = default;

 private:
  constexpr explicit FlopRate(double v) : v_(v) {}
  double v_ = 0;
};

// Time to move `b` at rate `bw`: multiply first, divide once, round once.
inline Time transfer_time(Bytes b, Bandwidth bw) {
  return Time::from_ps(
      units_detail::round_checked(b.as_double() * 1e12 / bw.bytes_per_s(), units_detail::kTimeOverflow));
}

// Time to execute `flops` at rate `r`.
inline Time compute_time(double flops, FlopRate r) {
  return Time::from_ps(units_detail::round_checked(flops * 1e12 / r.flops_per_s(), units_detail::kTimeOverflow));
}

}  // namespace stepsim
