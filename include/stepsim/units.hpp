// Unit-safe quantities: integer time, byte counts, and floating-point rates.
// Every conversion between units lives here and rounds exactly once.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace stepsim {

// A duration or an instant, as an integer count of picoseconds (±106 days).
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

  constexpr Time operator+(Time o) const { return Time(ps_ + o.ps_); }
  constexpr Time operator-(Time o) const { return Time(ps_ - o.ps_); }
  constexpr Time& operator+=(Time o) {
    ps_ += o.ps_;
    return *this;
  }
  constexpr Time& operator-=(Time o) {
    ps_ -= o.ps_;
    return *this;
  }
  constexpr Time operator*(std::int64_t k) const { return Time(ps_ * k); }
  // Scaling by a real factor (efficiency, slowdown) rounds once to the nearest picosecond.
  constexpr Time scaled(double f) const { return Time(round_ps(static_cast<double>(ps_) * f)); }
  constexpr auto operator<=>(const Time&) const = default;

 private:
  constexpr explicit Time(std::int64_t ps) : ps_(ps) {}
  static constexpr std::int64_t round_ps(double v) { return static_cast<std::int64_t>(v < 0 ? v - 0.5 : v + 0.5); }
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
  constexpr Bytes operator+(Bytes o) const { return Bytes(n_ + o.n_); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(n_ - o.n_); }
  constexpr Bytes& operator+=(Bytes o) {
    n_ += o.n_;
    return *this;
  }
  constexpr Bytes operator*(std::int64_t k) const { return Bytes(n_ * k); }
  constexpr Bytes operator/(std::int64_t k) const { return Bytes(n_ / k); }
  constexpr auto operator<=>(const Bytes&) const = default;

 private:
  // Rounds half away from zero, so that negative sizes (memory releases) are exact too.
  static constexpr std::int64_t round_bytes(double v) { return static_cast<std::int64_t>(v < 0 ? v - 0.5 : v + 0.5); }
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
  return Time::from_ps(static_cast<std::int64_t>(std::llround(b.as_double() * 1e12 / bw.bytes_per_s())));
}

// Time to execute `flops` at rate `r`.
inline Time compute_time(double flops, FlopRate r) {
  return Time::from_ps(static_cast<std::int64_t>(std::llround(flops * 1e12 / r.flops_per_s())));
}

}  // namespace stepsim
