// A Boost.JSON SAX handler over Kineto traces: one pass, fed in chunks, that keeps only the
// few fields stepsim measures, so memory grows with the kept events and not with the file.
#include <fmt/format.h>
#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "analysis/byte_source.hpp"
#include "analysis/kineto_trace.hpp"
#include "analysis/nccl_kernels.hpp"
#include "stepsim/error.hpp"
#include "stepsim/scenario.hpp"
#include "stepsim/text.hpp"

namespace stepsim::analysis {

namespace {

namespace json = boost::json;

enum class Ctx : std::uint8_t { top, events, event, args, dist, devices, device, skip };

enum class Field : std::uint8_t {
  none,
  trace_events,
  dist_info,
  device_properties,
  name,
  ph,
  cat,
  ts,
  dur,
  pid,
  tid,
  args,
  stream,
  correlation,
  bytes,
  collective,
  in_nelems,
  out_nelems,
  group_size,
  dtype,
  pg_name,
  pg_desc,
  pg_ranks,
  kind,
  op,
  phase,
  wait,
  flops,
  hbm_bytes,
  rank,
  world_size,
  backend,
  nccl_version
};

// The last five are the categories of stepsim's own traces.
enum class Cat : std::uint8_t {
  other,
  kernel,
  memcpy,
  memset,
  runtime,
  user_annotation,
  gpu_user_annotation,
  cpu_op,
  compute,
  comm,
  memory,
  bubble,
  step
};

struct KeyName {
  std::string_view key;
  Field field;
};

constexpr std::array kEventKeys{KeyName{"ph", Field::ph},   KeyName{"cat", Field::cat},  KeyName{"name", Field::name},
                                KeyName{"ts", Field::ts},   KeyName{"dur", Field::dur},  KeyName{"pid", Field::pid},
                                KeyName{"tid", Field::tid}, KeyName{"args", Field::args}};
constexpr std::array kArgKeys{KeyName{"stream", Field::stream},
                              KeyName{"correlation", Field::correlation},
                              KeyName{"bytes", Field::bytes},
                              KeyName{"Collective name", Field::collective},
                              KeyName{"In msg nelems", Field::in_nelems},
                              KeyName{"Out msg nelems", Field::out_nelems},
                              KeyName{"Group size", Field::group_size},
                              KeyName{"dtype", Field::dtype},
                              KeyName{"Process Group Name", Field::pg_name},
                              KeyName{"Process Group Description", Field::pg_desc},
                              KeyName{"Process Group Ranks", Field::pg_ranks},
                              KeyName{"kind", Field::kind},
                              KeyName{"op", Field::op},
                              KeyName{"phase", Field::phase},
                              KeyName{"group", Field::pg_name},
                              KeyName{"group_size", Field::group_size},
                              KeyName{"group_ranks", Field::pg_ranks},
                              KeyName{"wait_us", Field::wait},
                              KeyName{"flops", Field::flops},
                              KeyName{"hbm_bytes", Field::hbm_bytes}};
constexpr std::array kTopKeys{KeyName{"traceEvents", Field::trace_events}, KeyName{"distributedInfo", Field::dist_info},
                              KeyName{"deviceProperties", Field::device_properties}};
constexpr std::array kDeviceKeys{KeyName{"name", Field::name}};
constexpr std::array kDistKeys{KeyName{"rank", Field::rank}, KeyName{"world_size", Field::world_size},
                               KeyName{"backend", Field::backend}, KeyName{"nccl_version", Field::nccl_version}};

template <std::size_t N>
Field lookup(const std::array<KeyName, N>& table, std::string_view key) {
  for (const KeyName& k : table)
    if (k.key == key) return k.field;
  return Field::none;
}

// Old Kineto (PyTorch 1.8) wrote "Operator"/"Kernel"/"Memcpy"/"Memset"/"Runtime"; current
// Kineto the lower-case forms.
Cat category_of(std::string_view c) {
  if (c == "kernel" || c == "Kernel") return Cat::kernel;
  if (c == "gpu_memcpy" || c == "Memcpy") return Cat::memcpy;
  if (c == "gpu_memset" || c == "Memset") return Cat::memset;
  if (c == "cuda_runtime" || c == "Runtime" || c == "cuda_driver") return Cat::runtime;
  if (c == "user_annotation") return Cat::user_annotation;
  if (c == "gpu_user_annotation") return Cat::gpu_user_annotation;
  if (c == "cpu_op" || c == "Operator") return Cat::cpu_op;
  if (c == "compute") return Cat::compute;
  if (c == "comm") return Cat::comm;
  if (c == "memory") return Cat::memory;
  if (c == "bubble") return Cat::bubble;
  if (c == "step") return Cat::step;
  return Cat::other;
}

// Times are kept as picoseconds in an int64 (±106 days): a kept event's ts must lie within
// kMaxSpanUs of the trace's first timestamp and its dur within [0, kMaxSpanUs], so that
// ts + dur in picoseconds cannot overflow. 10^12 us is 11.6 days, longer than any profile.
constexpr std::int64_t kMaxSpanUs = 1'000'000'000'000;
// Epoch timestamps have 16 digits; beyond 10^17 the digits would overflow while parsed.
constexpr std::int64_t kMaxAbsUs = 100'000'000'000'000'000;

// A timestamp as whole microseconds plus picoseconds, read from the number's text so that
// epoch timestamps (16 digits and more) keep their nanoseconds.
struct Micros {
  std::int64_t whole = 0;
  std::int64_t frac_ps = 0;
  bool in_range = true;  // false: beyond ±kMaxAbsUs, infinite or not a number
};

bool parse_plain_decimal(std::string_view text, Micros& out) {
  bool neg = !text.empty() && text.front() == '-';
  if (neg) text.remove_prefix(1);
  std::int64_t whole = 0, frac = 0, scale = 1000000;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (whole > kMaxAbsUs) continue;  // out of range already: stop before int64 overflows
    whole = whole * 10 + (text[i] - '0');
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (scale == 1) continue;  // beyond picoseconds: truncated
      scale /= 10;
      frac += (text[i] - '0') * scale;
    }
  }
  if (i != text.size()) return false;  // exponent form
  out = neg ? Micros{-whole - (frac > 0 ? 1 : 0), frac > 0 ? 1000000 - frac : 0} : Micros{whole, frac};
  out.in_range = whole <= kMaxAbsUs;
  return true;
}

Micros micros_of(std::string_view text, double value) {
  Micros m;
  if (parse_plain_decimal(text, m)) return m;
  if (!std::isfinite(value) || std::fabs(value) > static_cast<double>(kMaxAbsUs)) return {0, 0, false};
  const double whole = std::floor(value);
  return {static_cast<std::int64_t>(whole), static_cast<std::int64_t>(std::llround((value - whole) * 1e6))};
}

// A JSON number where an integer id or count is expected; beyond int64 (1e300): -1, unknown.
std::int64_t integer_of(double v) {
  constexpr double kLimit = 9.2e18;
  return std::isfinite(v) && std::fabs(v) < kLimit ? static_cast<std::int64_t>(v) : -1;
}

// A JSON number as the parser gives it, and the integer it is when it is a whole number
// within int64 (written 7 or 7.0; not 0.5, 1e30 or 2^63).
struct Number {
  double value = 0;
  std::optional<std::int64_t> whole;

  static Number of(std::int64_t i) { return {static_cast<double>(i), i}; }
  static Number of(std::uint64_t u) {
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return {static_cast<double>(u), {}};
    return of(static_cast<std::int64_t>(u));
  }
  static Number of(double v) {
    constexpr double kLimit = 9.2e18;
    if (!std::isfinite(v) || std::fabs(v) >= kLimit || v != std::floor(v)) return {v, {}};
    return {v, static_cast<std::int64_t>(v)};
  }
  bool within(std::int64_t lo, std::int64_t hi) const { return whole && *whole >= lo && *whole <= hi; }
  std::string text() const { return whole ? fmt::format("{}", *whole) : fmt::format("{}", value); }
};

bool fractional_text(std::string_view text) {
  for (char c : text)
    if (c == '.' || c == 'e' || c == 'E') return true;
  return false;
}

// HTA's ProfilerStepGroupingPattern: ^ProfilerStep#(\d+)
bool is_profiler_step(std::string_view name) {
  constexpr std::string_view kStep = "ProfilerStep#";
  return name.size() > kStep.size() && name.starts_with(kStep) && name[kStep.size()] >= '0' &&
         name[kStep.size()] <= '9';
}

// The CUDA runtime and driver calls that launch a kernel.
bool is_kernel_launch(std::string_view name) {
  return name == "cudaLaunchKernel" || name == "cuLaunchKernel" || name == "cudaLaunchKernelExC" ||
         name == "cuLaunchKernelEx";
}

// A field of an event's args whose value cannot be what it names ("stream": "7"): it
// matters only on a GPU activity, which is known once the whole event is read.
struct BadArg {
  std::string key;
  std::string message;
};

// How many ranks a "Process Group Ranks" text lists ("[0, 1, 2, 3]"), and whether it is
// abbreviated with "...", which stands for one rank or more (PyTorch cuts lists beyond 30
// ranks, "[0, ..., 29, ...]"; stepsim's beyond 8, "[0, ..., 6, ..., 63]"). Nothing for an
// empty list or text of another shape, which says nothing to check against.
struct ListedRanks {
  int count = 0;
  bool abbreviated = false;
};

std::optional<ListedRanks> listed_ranks(std::string_view text) {
  auto trim = [](std::string_view t) {
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    return t;
  };
  text = trim(text);
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  text = text.substr(1, text.size() - 2);
  if (trim(text).empty()) return std::nullopt;
  ListedRanks out;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = trim(text.substr(at, comma - at));
    if (item == "...") {
      out.abbreviated = true;
    } else {
      if (item.empty() || item.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
      ++out.count;
    }
    at = comma + 1;
  }
  return out;
}

// The fields of the event being read.
struct RawEvent {
  std::string name;
  std::string ph;
  Cat cat = Cat::other;
  bool has_ts = false, has_dur = false, has_stream = false, has_ph = false;
  bool has_args = false;           // an args object
  const char* args_got = nullptr;  // what "args" was instead of an object
  std::vector<BadArg> bad_args;
  std::string group_size_key;               // "Group size" (Kineto) or "group_size" (stepsim), as read
  std::string_view group_ranks_key = "Process Group Ranks";  // or stepsim's "group_ranks", as read
  bool has_cat = false, cat_trace = false;  // a string "cat"; whether it is "Trace"
  Micros ts, dur;
  double ts_value = 0, dur_value = 0;  // as written, for messages
  std::int64_t wait_ns = 0;            // stepsim traces: a collective's wait at its rendezvous
  double flops = -1, hbm_bytes = -1;   // stepsim traces: a compute kernel's work, when given
  std::int64_t pid = -1, tid = -1, stream = -1, correlation = -1, bytes = 0;
  NcclArgs nccl;
  CommKind kind = CommKind::other;
  CollOp op = CollOp::other;
  Phase phase = Phase::other;
};

CommKind kind_named(std::string_view s) {
  for (std::size_t k = 0; k < kCommKinds; ++k)
    if (s == to_string(static_cast<CommKind>(k))) return static_cast<CommKind>(k);
  return CommKind::other;
}

Phase phase_named(std::string_view s) {
  for (Phase p : {Phase::forward, Phase::backward, Phase::recompute, Phase::optimizer})
    if (s == to_string(p)) return p;
  return Phase::other;
}

class Handler {
 public:
  static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

  Handler(KinetoTrace& trace, TimeOrigin& origin) : trace_(trace), origin_(origin) {}

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code& ec) {
    if (saw_events_) return check_groups_in_world(ec);
    return fail(ec, "", "no \"traceEvents\" array at the top level (is this a PyTorch profiler trace?)");
  }
  bool on_object_begin(json::error_code& ec) { return open(ec, false); }
  bool on_array_begin(json::error_code& ec) { return open(ec, true); }
  bool on_object_end(std::size_t, json::error_code& ec) { return close(ec); }
  bool on_array_end(std::size_t, json::error_code& ec) { return close(ec); }

  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    if (ctx() != Ctx::skip) key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code&) {
    if (ctx() == Ctx::skip) return true;
    key_.append(s.data(), s.size());
    field_ = field_of(key_);
    if (ctx() == Ctx::args && field_ != Field::none) arg_key_ = key_;
    key_.clear();
    return true;
  }

  bool on_string_part(json::string_view s, std::size_t, json::error_code&) {
    if (wants_string()) text_.append(s.data(), s.size());
    return true;
  }
  bool on_string(json::string_view s, std::size_t, json::error_code& ec) {
    if (!check_scalar(ec, "a string")) return false;
    if (!wants_string()) return wrong_type(ec, ctx(), field_, "a string");
    text_.append(s.data(), s.size());
    const bool ok = take_string(ec);
    text_.clear();
    return ok;
  }

  bool on_number_part(json::string_view s, json::error_code&) {
    if (wants_time()) text_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t v, json::string_view s, json::error_code& ec) {
    return on_number(Number::of(v), v, s, ec);
  }
  bool on_uint64(std::uint64_t v, json::string_view s, json::error_code& ec) {
    return on_number(Number::of(v), static_cast<std::int64_t>(v), s, ec);
  }
  bool on_double(double v, json::string_view s, json::error_code& ec) {
    return on_number(Number::of(v), integer_of(v), s, ec);
  }
  bool on_bool(bool, json::error_code& ec) { return not_a_number(ec, "true/false"); }
  bool on_null(json::error_code& ec) { return not_a_number(ec, "null"); }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

  const std::string& error_where() const { return error_where_; }
  const std::string& error_message() const { return error_message_; }

 private:
  Ctx ctx() const { return stack_.empty() ? Ctx::top : stack_.back(); }

  Field field_of(std::string_view key) const {
    switch (ctx()) {
      case Ctx::top:
        return lookup(kTopKeys, key);
      case Ctx::event:
        return lookup(kEventKeys, key);
      case Ctx::args:
        return lookup(kArgKeys, key);
      case Ctx::dist:
        return lookup(kDistKeys, key);
      case Ctx::device:
        return lookup(kDeviceKeys, key);
      default:
        return Field::none;
    }
  }

  std::string pointer(std::string_view field) const {
    return fmt::format("/traceEvents/{}{}{}", event_index_, field.empty() ? "" : "/", field);
  }

  bool fail(json::error_code& ec, std::string where, std::string message) {
    error_where_ = std::move(where);
    error_message_ = std::move(message);
    ec = json::error::syntax;  // stops the parser; the message above replaces it
    return false;
  }

  bool open(json::error_code& ec, bool array) {
    if (stack_.empty()) {
      // The JSON Array Format of Chrome traces: a bare array of events.
      saw_events_ = array;
      stack_.push_back(array ? Ctx::events : Ctx::top);
      return true;
    }
    const Ctx parent = ctx();
    const Field field = field_;
    field_ = Field::none;
    if (parent == Ctx::top && field == Field::trace_events) {
      if (!array) return fail(ec, "/traceEvents", "expected an array of events, got an object");
      saw_events_ = true;
      stack_.push_back(Ctx::events);
      return true;
    }
    if (parent == Ctx::events) {
      ++event_index_;
      if (array) return fail(ec, pointer(""), "expected an event object, got an array");
      event_ = RawEvent{};
      stack_.push_back(Ctx::event);
      return true;
    }
    if (!array && parent == Ctx::top && field == Field::dist_info) return push(Ctx::dist);
    if (array && parent == Ctx::top && field == Field::device_properties) return push(Ctx::devices);
    if (!array && parent == Ctx::devices) return push(Ctx::device);
    if (!array && parent == Ctx::event && field == Field::args) {
      event_.has_args = true;
      return push(Ctx::args);
    }
    if (field == Field::ts || field == Field::dur) return not_a_number(ec, array ? "an array" : "an object", field);
    if (!wrong_type(ec, parent, field, array ? "an array" : "an object")) return false;
    return push(Ctx::skip);
  }

  bool push(Ctx c) {
    stack_.push_back(c);
    return true;
  }

  bool close(json::error_code& ec) {
    const Ctx c = ctx();
    stack_.pop_back();
    field_ = Field::none;
    if (c == Ctx::dist) return check_rank_of_world(ec);
    return c != Ctx::event || finish_event(ec);
  }

  bool wants_string() const {
    if (ctx() == Ctx::skip) return false;
    switch (field_) {
      case Field::name:
      case Field::ph:
      case Field::cat:
      case Field::collective:
      case Field::dtype:
      case Field::kind:
      case Field::op:
      case Field::phase:
      case Field::pg_name:
      case Field::pg_desc:
      case Field::pg_ranks:
      case Field::backend:
      case Field::nccl_version:
      case Field::ts:
      case Field::dur:
      case Field::in_nelems:
      case Field::out_nelems:
        return true;
      default:
        return false;
    }
  }

  bool wants_time() const { return ctx() == Ctx::event && (field_ == Field::ts || field_ == Field::dur); }

  // Scalars where an array or an object must be.
  bool check_scalar(json::error_code& ec, const char* got) {
    if (stack_.empty()) return fail(ec, "", fmt::format("expected a JSON object with \"traceEvents\", got {}", got));
    if (ctx() == Ctx::top && field_ == Field::trace_events)
      return fail(ec, "/traceEvents", fmt::format("expected an array of events, got {}", got));
    if (ctx() == Ctx::events) {
      ++event_index_;
      return fail(ec, pointer(""), fmt::format("expected an event object, got {}", got));
    }
    return true;
  }

  bool not_a_number(json::error_code& ec, const char* got, Field field) {
    return fail(ec, pointer(field == Field::ts ? "ts" : "dur"),
                fmt::format("expected a number of microseconds, got {}", got));
  }

  bool not_a_number(json::error_code& ec, const char* got) {
    if (!check_scalar(ec, got)) return false;
    if (wants_time()) return not_a_number(ec, got, field_);
    if (!wrong_type(ec, ctx(), field_, got)) return false;
    field_ = Field::none;
    return true;
  }

  // A value of a JSON type that the field `f` of `c` never holds (a string rank, an object
  // world_size). Fields stepsim does not read may hold anything.
  bool wrong_type(json::error_code& ec, Ctx c, Field f, const char* got) {
    if (c == Ctx::dist && (f == Field::rank || f == Field::world_size)) return bad_dist(ec, f, got);
    if (c == Ctx::event && (f == Field::name || f == Field::ph || f == Field::cat)) return bad_event_field(ec, f, got);
    if (c == Ctx::event && f == Field::args) event_.args_got = got;
    if (c == Ctx::args) bad_arg(f, got);
    return true;
  }

  // Every event's name, ph and cat are strings in the Trace Event Format: an event whose
  // category is a number could be a kernel that no figure would count.
  bool bad_event_field(json::error_code& ec, Field f, const char* got) {
    const char* key = f == Field::name ? "name" : f == Field::ph ? "ph" : "cat";
    const char* what = f == Field::name ? "the event's name"
                       : f == Field::ph ? "the event's phase"
                                        : "the event's category";
    return fail(ec, pointer(key), fmt::format("expected a string ({}), got {}", what, got));
  }

  // An args field whose value is not one it can hold (`got`: what it was instead).
  void bad_arg(Field f, const std::string& got) {
    switch (f) {
      case Field::stream:
        event_.bad_args.push_back(
            {arg_key_, fmt::format("expected the CUDA stream, a whole number of 0 or more, got {}", got)});
        return;
      case Field::correlation:
        event_.bad_args.push_back({arg_key_, fmt::format("expected the correlation id, a whole number, got {}", got)});
        return;
      case Field::in_nelems:
      case Field::out_nelems:
        event_.bad_args.push_back(
            {arg_key_, fmt::format("expected the message's elements, a whole number from 0 to {}, got {}",
                                   kMaxMessageElements, got)});
        return;
      case Field::group_size:
        event_.bad_args.push_back(
            {arg_key_, fmt::format("expected the ranks of the process group, a whole number from 1 to {}, got {}",
                                   kMaxGpus, got)});
        return;
      default:
        return;
    }
  }

  // distributedInfo says which process of how large a job the trace is: a rank or world size
  // that no job has would be shown as read ("rank 5 of 2") or taken for another.
  bool bad_dist(json::error_code& ec, Field f, const std::string& got) {
    if (f == Field::rank)
      return fail(ec, "/distributedInfo/rank",
                  fmt::format("expected a whole number from 0 to {} (the process's rank in its job), got {}",
                              kMaxGpus - 1, got));
    return fail(ec, "/distributedInfo/world_size",
                fmt::format("expected a whole number from 1 to {} (the job's processes; stepsim's GPU limit), got {}",
                            kMaxGpus, got));
  }

  // Each of rank and world_size is checked as it is read; the two together once both are.
  bool check_rank_of_world(json::error_code& ec) {
    const DistributedInfo& d = trace_.dist;
    if (d.rank < 0 || d.world_size <= 0 || d.rank < d.world_size) return true;
    return fail(
        ec, "/distributedInfo/rank",
        fmt::format("expected a rank from 0 to {} (world_size is {}), got {}", d.world_size - 1, d.world_size, d.rank));
  }

  bool take_string(json::error_code& ec) {
    const std::string_view s = text_;
    switch (ctx()) {
      case Ctx::event:
        return take_event_string(ec, s);
      case Ctx::args:
        take_arg_string(s);
        return true;
      case Ctx::dist:
        take_dist_string(s);
        return true;
      case Ctx::device:
        // The first device's: a job's GPUs are one model.
        if (field_ == Field::name && trace_.gpu_name.empty()) trace_.gpu_name.assign(s);
        return true;
      default:
        return true;
    }
  }

  bool take_event_string(json::error_code& ec, std::string_view s) {
    switch (field_) {
      case Field::name:
        event_.name.assign(s);
        break;
      case Field::ph:
        event_.ph.assign(s);
        event_.has_ph = true;
        break;
      case Field::cat:
        event_.cat = category_of(s);
        event_.has_cat = true;
        event_.cat_trace = s == "Trace";
        break;
      case Field::ts:
      case Field::dur:
        return not_a_number(ec, "a string", field_);
      default:
        break;  // pid/tid as strings ("Spans"): not a GPU
    }
    return true;
  }

  void take_arg_string(std::string_view s) {
    NcclArgs& n = event_.nccl;
    switch (field_) {
      case Field::collective:
        n.collective = trace_.intern(s);
        break;
      case Field::dtype:
        n.dtype = trace_.intern(s);
        break;
      case Field::pg_name:
        n.group_name = trace_.intern(s);
        break;
      case Field::pg_desc:
        n.group_desc = trace_.intern(s);
        break;
      case Field::pg_ranks:
        n.group_ranks = trace_.intern(s);
        event_.group_ranks_key = arg_key_ == "group_ranks" ? "group_ranks" : "Process Group Ranks";
        break;
      case Field::kind:
        event_.kind = kind_named(s);
        break;
      case Field::op:
        event_.op = coll_op_of(s, "");
        break;
      case Field::phase:
        event_.phase = phase_named(s);
        break;
      case Field::in_nelems:
      case Field::out_nelems:
        take_elements_text(s);
        break;
      default:
        break;
    }
  }

  // A count of elements written as a string of digits ("1000") is read as the number.
  void take_elements_text(std::string_view s) {
    constexpr std::size_t kShown = 40;
    const bool digits = !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string_view::npos;
    const std::int64_t v = digits ? std::atoll(std::string(s).c_str()) : -1;
    if (!digits || v > kMaxMessageElements)
      return bad_arg(field_, fmt::format("\"{}{}\"", s.substr(0, kShown), s.size() > kShown ? "..." : ""));
    (field_ == Field::in_nelems ? event_.nccl.in_nelems : event_.nccl.out_nelems) = v;
  }

  void take_dist_string(std::string_view s) {
    if (field_ == Field::backend) trace_.dist.backend.assign(s);
    if (field_ == Field::nccl_version) trace_.dist.nccl_version.assign(s);
  }

  bool on_number(const Number& n, std::int64_t i, json::string_view last, json::error_code& ec) {
    if (!check_scalar(ec, "a number")) return false;
    if (wants_time()) {
      text_.append(last.data(), last.size());
      take_time(micros_of(text_, n.value), n.value);
      text_.clear();
      return true;
    }
    if (ctx() == Ctx::event && (field_ == Field::name || field_ == Field::ph || field_ == Field::cat))
      return bad_event_field(ec, field_, "a number");
    if (ctx() == Ctx::event) take_event_number(i);
    if (ctx() == Ctx::args && field_ == Field::wait) return take_wait(n.value, ec);
    if (ctx() == Ctx::args && (field_ == Field::flops || field_ == Field::hbm_bytes)) return take_work(n.value, ec);
    if (ctx() == Ctx::args) take_arg_number(n, i);
    if (ctx() == Ctx::dist) return take_dist_number(n, ec);
    return true;
  }

  bool take_wait(double us, json::error_code& ec) {
    if (!(us >= 0 && us < static_cast<double>(kMaxSpanUs)))
      return fail(ec, pointer("args/wait_us"),
                  fmt::format("{}: expected a wait from 0 to {} us, got {}", event_label(), kMaxSpanUs, us));
    event_.wait_ns = std::llround(us * 1e3);
    return true;
  }

  bool take_work(double v, json::error_code& ec) {
    const bool flops = field_ == Field::flops;
    if (!(v >= 0 && v < 1e21))
      return fail(ec, pointer(flops ? "args/flops" : "args/hbm_bytes"),
                  fmt::format("{}: expected {} from 0 to 1e21, got {}", event_label(), flops ? "FLOPs" : "bytes", v));
    (flops ? event_.flops : event_.hbm_bytes) = v;
    return true;
  }

  void take_time(Micros m, double value) {
    if (field_ == Field::dur) {
      event_.dur = m;
      event_.dur_value = value;
      event_.has_dur = true;
      return;
    }
    event_.ts = m;
    event_.ts_value = value;
    event_.has_ts = true;
    if (!trace_.hta.fractional_ts && fractional_text(text_)) trace_.hta.fractional_ts = true;
  }

  void take_event_number(std::int64_t i) {
    if (field_ == Field::pid) event_.pid = i;
    if (field_ == Field::tid) event_.tid = i;
  }

  void take_arg_number(const Number& n, std::int64_t i) {
    switch (field_) {
      case Field::stream:
        if (!n.within(0, std::numeric_limits<std::int64_t>::max())) return bad_arg(field_, n.text());
        event_.stream = *n.whole;
        event_.has_stream = true;
        break;
      case Field::correlation:
        event_.correlation = i;  // a CPU event's, as before: only a GPU activity's is checked
        if (!n.whole) bad_arg(field_, n.text());
        break;
      case Field::bytes:
        event_.bytes = i;
        break;
      case Field::in_nelems:
      case Field::out_nelems:
        if (!n.within(0, kMaxMessageElements)) return bad_arg(field_, n.text());
        (field_ == Field::in_nelems ? event_.nccl.in_nelems : event_.nccl.out_nelems) = *n.whole;
        break;
      case Field::group_size:
        if (!n.within(1, kMaxGpus)) return bad_arg(field_, n.text());
        event_.nccl.group_size = static_cast<int>(*n.whole);
        event_.group_size_key = arg_key_;
        break;
      default:
        break;
    }
  }

  bool take_dist_number(const Number& n, json::error_code& ec) {
    if (field_ == Field::rank) {
      if (!n.within(0, kMaxGpus - 1)) return bad_dist(ec, field_, n.text());
      trace_.dist.rank = static_cast<int>(*n.whole);
    }
    if (field_ == Field::world_size) {
      if (!n.within(1, kMaxGpus)) return bad_dist(ec, field_, n.text());
      trace_.dist.world_size = static_cast<int>(*n.whole);
    }
    return true;
  }

  Time relative(Micros m) const { return Time::from_ps((m.whole - origin_.us) * 1000000 + m.frac_ps); }

  // The events stepsim keeps; the others' times are never read.
  bool kept() const {
    if (event_.cat == Cat::other) return false;
    const bool annotation = event_.cat == Cat::user_annotation || event_.cat == Cat::gpu_user_annotation;
    return !annotation || event_.name.starts_with("ProfilerStep#");
  }

  std::string event_label() const {
    constexpr std::size_t kShown = 80;
    const std::string_view name(event_.name);
    return fmt::format("event '{}{}'", name.substr(0, kShown), name.size() > kShown ? "..." : "");
  }

  bool check_times(json::error_code& ec) {
    const Micros& ts = event_.ts;
    if (!ts.in_range || ts.whole - origin_.us > kMaxSpanUs || origin_.us - ts.whole > kMaxSpanUs)
      return fail(ec, pointer("ts"),
                  fmt::format("{}: ts {} is more than {} us away from the trace's first timestamp {}", event_label(),
                              event_.ts_value, kMaxSpanUs, origin_.us));
    const Micros& dur = event_.dur;
    if (event_.has_dur && (!dur.in_range || dur.whole < 0 || dur.whole >= kMaxSpanUs))
      return fail(
          ec, pointer("dur"),
          fmt::format("{}: expected a duration from 0 to {} us, got {}", event_label(), kMaxSpanUs, event_.dur_value));
    return true;
  }

  // A CPU operator is read only for the CPU's cost per operator (host_costs.cpp): one whose
  // times are out of range is left out, as are all the events stepsim does not keep.
  bool note_cpu_op() {
    const Micros& ts = event_.ts;
    const Micros& dur = event_.dur;
    const bool timed = event_.ph == "X" && event_.has_ts && event_.has_dur && ts.in_range &&
                       ts.whole - origin_.us <= kMaxSpanUs && origin_.us - ts.whole <= kMaxSpanUs && dur.in_range &&
                       dur.whole >= 0 && dur.whole < kMaxSpanUs;
    if (!timed) {
      ++trace_.cpu_ops_left_out;
      return true;
    }
    const Time start = relative(ts);
    trace_.cpu_ops.push_back({event_.tid, start, start + Time::from_ps(dur.whole * 1000000 + dur.frac_ps)});
    return true;
  }

  bool finish_event(json::error_code& ec) {
    // HTA reads the events into one table: an event without ts makes its ts column float.
    if (!event_.has_ts) trace_.hta.fractional_ts = true;
    // The first timestamp sets the origin; a metadata event's (ph M: a process or thread
    // name, whose ts Kineto may write as 0) is no time of the trace and is not checked.
    const bool metadata = event_.ph == "M";
    if (!origin_.set && !metadata && event_.has_ts && event_.ts.in_range) origin_ = {true, event_.ts.whole};
    if (!check_gpu_activity(ec)) return false;
    if (metadata) return true;
    if (!take_hta_row(ec)) return false;
    // A ProfilerStep#N is a step in either category (old Kineto wrote it as an "Operator").
    if (event_.cat == Cat::cpu_op && !is_profiler_step(event_.name)) return note_cpu_op();
    if (event_.ph != "X" || !event_.has_ts || !kept()) return true;
    if (!check_times(ec)) return false;
    finish_kept_event();
    return true;
  }

  // A GPU activity (category kernel, gpu_memcpy or gpu_memset, with a dur) is read twice: the
  // step table keeps the complete events (ph X) and HTA's figures the events with an
  // args.stream of 0 or more, whatever their phase. Kineto writes every GPU activity as a
  // complete event with ts, dur and args.stream, so one without them would be counted by one
  // reading and not by the other: it is refused, as are its args of the wrong type.
  bool check_gpu_activity(json::error_code& ec) {
    const bool gpu = event_.cat == Cat::kernel || event_.cat == Cat::memcpy || event_.cat == Cat::memset;
    const bool tagged =
        event_.cat == Cat::compute || event_.cat == Cat::comm || event_.cat == Cat::memory || event_.cat == Cat::bubble;
    if (tagged && event_.has_dur) return check_args(ec);  // stepsim's own trace: its tid is the stream
    if (!gpu || !event_.has_dur) return true;  // an instant (no dur) occupies nothing in either
    const std::string label = event_label();
    if (event_.ph != "X")
      return fail(ec, pointer("ph"),
                  fmt::format("{}: a GPU activity must be a complete event, \"ph\": \"X\"; got {}", label,
                              event_.has_ph ? fmt::format("\"{}\"", event_.ph) : std::string("none")));
    if (!event_.has_ts) return fail(ec, pointer("ts"), fmt::format("{}: missing: a GPU activity has a ts", label));
    if (event_.args_got != nullptr)
      return fail(ec, pointer("args"),
                  fmt::format("{}: expected an object (the GPU activity's stream and correlation id), got {}", label,
                              event_.args_got));
    if (!event_.has_args)
      return fail(ec, pointer("args"),
                  fmt::format("{}: missing: a GPU activity's args give its CUDA stream (args.stream)", label));
    if (!check_args(ec)) return false;
    if (!event_.has_stream)
      return fail(ec, pointer("args/stream"),
                  fmt::format("{}: missing: expected the CUDA stream, a whole number of 0 or more", label));
    return true;
  }

  // A GPU activity's args: each of the right type and range, and a group size that its own
  // rank list does not contradict (busbw is scaled by it). The job's world size bounds it too,
  // once distributedInfo is read (on_document_end).
  bool check_args(json::error_code& ec) {
    if (!event_.bad_args.empty())
      return fail(ec, pointer("args/" + event_.bad_args.front().key),
                  fmt::format("{}: {}", event_label(), event_.bad_args.front().message));
    const NcclArgs& n = event_.nccl;
    if (n.group_size == 0) return true;
    const std::string& ranks = trace_.strings[n.group_ranks];
    if (const std::optional<ListedRanks> listed = listed_ranks(ranks)) {
      if (listed->abbreviated ? n.group_size <= listed->count : n.group_size != listed->count)
        return fail(ec, pointer("args/" + event_.group_size_key),
                    fmt::format("{}: {} is {}, but {} \"{}\" lists {}{} rank{}", event_label(), event_.group_size_key,
                                n.group_size, event_.group_ranks_key, ranks, listed->abbreviated ? "more than " : "",
                                listed->count, listed->count == 1 ? "" : "s"));
    }
    if (n.group_size > largest_group_.size)
      largest_group_ = {n.group_size, event_index_, event_.group_size_key, event_label()};
    return true;
  }

  // No process group is larger than its job.
  bool check_groups_in_world(json::error_code& ec) {
    const int world = trace_.dist.world_size;
    if (world <= 0 || largest_group_.size <= world) return true;
    event_index_ = largest_group_.event;
    return fail(ec, pointer("args/" + largest_group_.key),
                fmt::format("{}: {} is {}, more than the job's world_size {} (distributedInfo)", largest_group_.label,
                            largest_group_.key, largest_group_.size, world));
  }

  // HTA keeps every event with "cat" (not "Trace") and "dur", whatever its phase; stepsim
  // keeps of them what its overlap and breakdowns read (hta_metrics.cpp).
  bool take_hta_row(json::error_code& ec) {
    if (!event_.has_cat || event_.cat_trace || !event_.has_dur || !event_.has_ts) return true;
    HtaView& h = trace_.hta;
    const std::string_view name = event_.name;
    const bool step = is_profiler_step(name);
    const bool gpu = (event_.stream >= 0 && event_.correlation >= 0) || name == "Event Sync" || name == "Context Sync";
    if (!gpu) ++h.cpu_rows;
    const bool launch = !gpu && event_.correlation >= 0;
    if (!step && !launch && event_.stream == -1) return true;
    if (!check_times(ec)) return false;
    const Time start = relative(event_.ts);
    const Time end = start + Time::from_ps(event_.dur.whole * 1000000 + event_.dur.frac_ps);
    h.origin_us = origin_.us;
    if (step) note_hta_step(gpu, start);
    if (launch) trace_.launches.push_back({event_.correlation, start});
    if (event_.stream != -1)
      h.activities.push_back({start, end, event_.correlation, event_.stream, hta_kernel_type(event_.name), gpu,
                              event_.cat == Cat::kernel || event_.cat == Cat::memcpy || event_.cat == Cat::memset});
    return true;
  }

  void note_hta_step(bool gpu, Time start) {
    HtaView& h = trace_.hta;
    const std::uint32_t name = trace_.intern(event_.name);
    if (std::find(h.step_names.begin(), h.step_names.end(), name) == h.step_names.end()) h.step_names.push_back(name);
    if (gpu) return;
    h.last_step = h.cpu_step ? max(h.last_step, start) : start;
    h.cpu_step = true;
  }

  void finish_kept_event() {
    const Time start = relative(event_.ts);
    const Time dur = Time::from_ps(event_.dur.whole * 1000000 + event_.dur.frac_ps);
    switch (event_.cat) {
      case Cat::kernel:
      case Cat::memcpy:
      case Cat::memset:
        keep_gpu(start, dur);
        return;
      case Cat::runtime:
        // With a dur it is already a launch (take_hta_row).
        if (event_.correlation >= 0 && !event_.has_dur) trace_.launches.push_back({event_.correlation, start, false});
        if (event_.has_dur && is_kernel_launch(event_.name))
          trace_.kernel_launches.push_back({event_.tid, start, start + dur});
        return;
      case Cat::cpu_op:  // a ProfilerStep#N (the other operators: note_cpu_op)
      case Cat::user_annotation:
        if (event_.has_dur && event_.name.starts_with("ProfilerStep#"))
          trace_.steps.push_back({trace_.intern(event_.name), start, start + dur});
        return;
      case Cat::gpu_user_annotation:  // a ProfilerStep#N's GPU side
        if (event_.has_dur) trace_.gpu_steps.push_back({trace_.intern(event_.name), start, start + dur});
        return;
      case Cat::compute:
        keep_tagged(start, dur, Activity::compute);
        return;
      case Cat::comm:
        keep_tagged(start, dur, Activity::comm);
        return;
      case Cat::memory:
        keep_tagged(start, dur, Activity::memory);
        return;
      case Cat::bubble:
        keep_tagged(start, dur, Activity::bubble);
        return;
      case Cat::step:
        trace_.stepsim_format = true;
        if (event_.has_dur) trace_.windows.push_back({trace_.intern(event_.name), start, start + dur});
        return;
      case Cat::other:
        return;
    }
  }

  void keep_tagged(Time start, Time dur, Activity activity) {
    trace_.stepsim_format = true;
    keep_gpu(start, dur);
    if (!event_.has_dur) return;
    GpuEvent& g = trace_.gpu.back();
    g.tagged = true;
    g.activity = activity;
    g.phase = event_.phase;
    g.kind = event_.kind;
    g.op = event_.op;
    g.wait = Time::from_ps(event_.wait_ns * 1000);
  }

  void keep_gpu(Time start, Time dur) {
    if (!event_.has_dur) return;  // an instant on a GPU stream occupies nothing
    GpuEvent g;
    g.start = start;
    g.end = start + dur;
    g.name = trace_.intern(event_.name);
    g.category = event_.cat == Cat::kernel   ? GpuCategory::kernel
                 : event_.cat == Cat::memcpy ? GpuCategory::memcpy
                                             : GpuCategory::memset;
    g.device = event_.pid;
    g.stream = event_.has_stream ? event_.stream : event_.tid;
    g.correlation = event_.correlation;
    g.bytes = event_.bytes;
    g.nccl = event_.nccl;
    if (event_.flops >= 0 && event_.hbm_bytes >= 0)
      trace_.work[g.name] = KernelWork{event_.flops, Bytes(std::llround(event_.hbm_bytes))};
    trace_.gpu.push_back(g);
  }

  KinetoTrace& trace_;
  TimeOrigin& origin_;
  std::vector<Ctx> stack_;
  Field field_ = Field::none;
  std::string key_, text_;
  RawEvent event_;
  std::string arg_key_;  // the args key being read, as written, for messages
  // The largest process group of a GPU activity, and where it was read.
  struct Group {
    int size = 0;
    std::int64_t event = -1;
    std::string key, label;
  } largest_group_;
  std::int64_t event_index_ = -1;
  bool saw_events_ = false;
  std::string error_where_, error_message_;
};

// Line and column of the byte where parsing stopped, counted as the text streams by.
struct Position {
  std::uint64_t offset = 0;
  std::uint64_t line = 1;
  std::uint64_t column = 1;

  void advance(const char* p, std::size_t n) {
    const char* end = p + n;
    const char* last_newline = nullptr;
    for (const char* q = p;
         (q = static_cast<const char*>(std::memchr(q, '\n', static_cast<std::size_t>(end - q)))) != nullptr; ++q) {
      ++line;
      last_newline = q;
    }
    column = last_newline != nullptr ? static_cast<std::uint64_t>(end - last_newline) : column + n;
    offset += n;
  }
  std::string where() const { return fmt::format("line {}, column {} (byte {})", line, column, offset); }
};

[[noreturn]] void throw_parse_error(const std::string& path, const Handler& h, const Position& at,
                                    const json::error_code& ec) {
  if (!h.error_message().empty()) throw InputError(path, h.error_where(), h.error_message());
  if (ec == json::error::incomplete) throw InputError(path, at.where(), "the JSON ends early (truncated file?)");
  throw InputError(path, at.where(), fmt::format("invalid JSON: {}", ec.message()));
}

// A second document, or anything but whitespace, after the trace's JSON (two traces
// concatenated, a log line appended): the trace itself is complete, so not "truncated".
[[noreturn]] void throw_data_after(const std::string& path, const Position& at) {
  throw InputError(path, at.where(), "unexpected data after the end of the JSON document (two documents in one file?)");
}

}  // namespace

KinetoTrace read_kineto(const std::string& path, TimeOrigin& origin) {
  KinetoTrace trace;
  trace.path = path;
  ByteSource source(path);
  json::parse_options options;
  options.allow_comments = true;
  options.allow_trailing_commas = true;
  options.max_depth = 1024;
  json::basic_parser<Handler> parser(options, trace, origin);
  std::vector<char> chunk(std::size_t{1} << 20);
  Position at;
  json::error_code ec;
  // A leading UTF-8 byte order mark is skipped, as every text input skips it: the first chunk
  // is read until it holds the mark's length (inflate may give fewer bytes at a time), and the
  // mark counts in the byte offsets of messages but not in the columns or the JSON read.
  std::size_t first = 0;
  while (first < kUtf8Bom.size()) {
    const std::size_t got = source.read(chunk.data() + first, chunk.size() - first);
    if (got == 0) break;
    first += got;
  }
  std::size_t skip = without_bom(std::string_view(chunk.data(), first)).size() < first ? kUtf8Bom.size() : 0;
  const std::uint64_t bom = skip;
  at.offset = bom;
  for (bool first_chunk = true;; first_chunk = false) {
    std::size_t n = first_chunk ? first : source.read(chunk.data(), chunk.size());
    if (skip > 0) {
      std::memmove(chunk.data(), chunk.data() + skip, n - skip);
      n -= skip;
      skip = 0;
    }
    if (n == 0 && at.offset == bom) throw InputError(path, "", "the file is empty (expected a JSON trace)");
    const std::size_t used = parser.write_some(n > 0, chunk.data(), n, ec);
    if (ec == json::error::extra_data || (!ec && used < n)) {
      // The document ended inside the chunk; the parser stops at what follows it.
      at.advance(chunk.data(), std::min(used, n));
      throw_data_after(path, at);
    }
    if (ec) {
      // Boost.JSON 1.81 can report a consumed count beyond the chunk when a handler stops the
      // parser (a fuzzed trace showed it): never count past what was read.
      at.advance(chunk.data(), std::min(used, n));
      throw_parse_error(path, parser.handler(), at, ec);
    }
    at.advance(chunk.data(), n);
    if (n == 0) break;
  }
  trace.content_bytes = at.offset - bom;
  return trace;
}

}  // namespace stepsim::analysis
