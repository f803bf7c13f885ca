// HolisticTraceAnalysis' idle time breakdown as `analyze` prints it; see idle_output.hpp.
#include "analysis/idle_output.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <boost/json.hpp>

#include <algorithm>
#include <ostream>

namespace stepsim::analysis {
namespace {

namespace json = boost::json;

double ms_per_step(Time t, std::size_t steps) { return t.seconds() * 1e3 / static_cast<double>(steps); }

// A stream's idle time and its three classes, ms per step and shares of its idle time.
std::string idle_columns(const HtaStreamIdle& s, std::size_t steps) {
  const Time idle = s.idle();
  return fmt::format("{:>9.3f} {:>10.3f} {:>5.1f}% {:>10.3f} {:>5.1f}% {:>10.3f} {:>5.1f}%", ms_per_step(idle, steps),
                     ms_per_step(s.host_wait, steps), percent_of(s.host_wait, idle), ms_per_step(s.kernel_wait, steps),
                     percent_of(s.kernel_wait, idle), ms_per_step(s.other, steps), percent_of(s.other, idle));
}

void write_idle_row(const std::string& label, const HtaStreamIdle& s, std::size_t steps, std::ostream& out) {
  fmt::print(out, "    {:<10} {}\n", label, idle_columns(s, steps));
}

void write_rank_idle_rows(const RankIdle& r, std::ostream& out) {
  const HtaIdleBreakdown& b = r.hta->idle_breakdown;
  if (const std::string missing = idle_breakdown_missing(b); !missing.empty()) {
    fmt::print(out, "  {:>6}  n/a ({})\n", r.rank, missing);
    return;
  }
  for (const HtaStreamIdle& st : b.streams)
    fmt::print(out, "  {:>6} {:>9} {}\n", r.rank, st.stream, idle_columns(st, r.hta->steps));
  if (b.streams.size() > 1)
    fmt::print(out, "  {:>6} {:>9} {}\n", r.rank, "all (sum)", idle_columns(b.total, r.hta->steps));
}

json::value ratio_json(Time part, Time whole) {
  return whole != Time::zero() ? json::value(static_cast<double>(part.ps()) / static_cast<double>(whole.ps()))
                               : json::value(nullptr);
}

json::object stream_idle_json(const HtaStreamIdle& s, std::size_t steps) {
  json::object o;
  if (s.stream >= 0) o["stream"] = s.stream;
  o["kernels"] = s.kernels;
  o["launched_kernels"] = s.launched;
  const auto per_step = [steps](Time t) { return t.seconds() / static_cast<double>(steps); };
  o["idle_s"] = per_step(s.idle());
  o["host_wait_s"] = per_step(s.host_wait);
  o["kernel_wait_s"] = per_step(s.kernel_wait);
  o["other_s"] = per_step(s.other);
  o["host_wait_ratio"] = ratio_json(s.host_wait, s.idle());
  o["kernel_wait_ratio"] = ratio_json(s.kernel_wait, s.idle());
  o["other_ratio"] = ratio_json(s.other, s.idle());
  o["idle_time_us"] = s.idle().seconds() * 1e6;
  o["host_wait_us"] = s.host_wait.seconds() * 1e6;
  o["kernel_wait_us"] = s.kernel_wait.seconds() * 1e6;
  o["other_us"] = s.other.seconds() * 1e6;
  return o;
}

json::object streams_json(const HtaIdleBreakdown& b, std::size_t steps) {
  json::object o;
  json::array streams;
  for (const HtaStreamIdle& s : b.streams) streams.push_back(stream_idle_json(s, steps));
  o["streams"] = std::move(streams);
  o["all_streams"] = stream_idle_json(b.total, steps);
  return o;
}

}  // namespace

double percent_of(Time part, Time whole) {
  return whole > Time::zero() ? 100.0 * static_cast<double>(part.ps()) / static_cast<double>(whole.ps()) : 0.0;
}

// Why the idle breakdown has no split; "" when it has one.
std::string idle_breakdown_missing(const HtaIdleBreakdown& b) {
  if (b.total.kernels == 0) return "no GPU kernel, memcpy or memset in HTA's window";
  if (b.launched() == 0)
    return "no kernel is tied by its correlation id to a launch on the CPU (cudaLaunchKernel, cudaGraphLaunch, "
           "...), so host wait cannot be told from the rest";
  return "";
}

// HTA's idle time breakdown: one row per stream and the streams summed, ms per step and the
// share of the stream's idle time.
void write_idle_breakdown(const HtaMetrics& h, std::ostream& out) {
  const HtaIdleBreakdown& b = h.idle_breakdown;
  if (const std::string missing = idle_breakdown_missing(b); !missing.empty()) {
    fmt::print(out, "  idle time breakdown: n/a ({})\n", missing);
    return;
  }
  fmt::print(out,
             "  idle time breakdown, ms per step over {} step{} (gaps between a stream's consecutive kernels; "
             "kernel wait: under {:.0f} us)\n",
             h.steps, h.steps == 1 ? "" : "s", kHtaConsecutiveKernelDelay.seconds() * 1e6);
  fmt::print(out, "    {:<10} {:>9} {:>17} {:>17} {:>17}\n", "stream", "idle", "host wait", "kernel wait", "other");
  for (const HtaStreamIdle& s : b.streams) write_idle_row(fmt::format("{}", s.stream), s, h.steps, out);
  if (b.streams.size() > 1) write_idle_row("all (sum)", b.total, h.steps, out);
  if (b.total.launched < b.total.kernels)
    fmt::print(out, "    {} of {} kernels without a launch in the trace (never host wait)\n",
               b.total.kernels - b.total.launched, b.total.kernels);
  if (h.idle_breakdown_exact) {
    const HtaStreamIdle& e = h.idle_breakdown_exact->total;
    fmt::print(out,
               "    on the exact timestamps (HTA_DISABLE_NS_ROUNDING=1), all streams: host wait {:.3f} ms ({:.1f}%), "
               "kernel wait {:.3f} ms ({:.1f}%), other {:.3f} ms ({:.1f}%)\n",
               ms_per_step(e.host_wait, h.steps), percent_of(e.host_wait, e.idle()),
               ms_per_step(e.kernel_wait, h.steps), percent_of(e.kernel_wait, e.idle()), ms_per_step(e.other, h.steps),
               percent_of(e.other, e.idle()));
  }
}

boost::json::value idle_breakdown_json(const HtaMetrics& h) {
  json::object o;
  const std::string missing = idle_breakdown_missing(h.idle_breakdown);
  o["available"] = missing.empty();
  o["note"] = missing.empty() ? json::value(nullptr) : json::value(missing);
  o["steps"] = h.steps;
  o["consecutive_kernel_delay_us"] = kHtaConsecutiveKernelDelay.seconds() * 1e6;
  if (!missing.empty()) return o;
  const json::object rounded = streams_json(h.idle_breakdown, h.steps);
  for (const auto& kv : rounded) o[kv.key()] = kv.value();
  o["exact_timestamps"] =
      h.idle_breakdown_exact ? json::value(streams_json(*h.idle_breakdown_exact, h.steps)) : json::value(nullptr);
  return o;
}

std::optional<IdleAcrossRanks> idle_across_ranks(const std::vector<RankIdle>& ranks) {
  IdleAcrossRanks a;
  for (const RankIdle& r : ranks) {
    if (!r.hta->available || !idle_breakdown_missing(r.hta->idle_breakdown).empty()) continue;
    const HtaStreamIdle& t = r.hta->idle_breakdown.total;
    const double steps = static_cast<double>(r.hta->steps);
    a.idle_s += t.idle().seconds() / steps;
    a.host_wait_s += t.host_wait.seconds() / steps;
    a.kernel_wait_s += t.kernel_wait.seconds() / steps;
    a.other_s += t.other.seconds() / steps;
    if (a.ranks == 0 || t.host_wait.seconds() / steps > a.host_wait_max_s) {
      a.host_wait_max_s = t.host_wait.seconds() / steps;
      a.host_wait_max_rank = r.rank;
    }
    ++a.ranks;
  }
  if (a.ranks == 0) return std::nullopt;
  const double n = static_cast<double>(a.ranks);
  a.idle_s /= n;
  a.host_wait_s /= n;
  a.kernel_wait_s /= n;
  a.other_s /= n;
  return a;
}

void write_ranks_idle_breakdown(const std::vector<RankIdle>& ranks, std::ostream& out) {
  const bool any = std::any_of(ranks.begin(), ranks.end(), [](const RankIdle& r) { return r.hta->available; });
  if (!any) {
    fmt::print(out,
               "\nidle time breakdown: n/a (traces in stepsim's own format, which HolisticTraceAnalysis does not "
               "read)\n");
    return;
  }
  fmt::print(out,
             "\nidle time breakdown (HolisticTraceAnalysis' get_idle_time_breakdown per rank and stream), ms per step "
             "over each rank's HTA window (kernel wait: under {:.0f} us)\n",
             kHtaConsecutiveKernelDelay.seconds() * 1e6);
  fmt::print(out, "  {:>6} {:>9} {:>9} {:>17} {:>17} {:>17}\n", "rank", "stream", "idle", "host wait", "kernel wait",
             "other");
  for (const RankIdle& r : ranks) {
    if (r.hta->available) {
      write_rank_idle_rows(r, out);
    } else {
      fmt::print(out, "  {:>6}  n/a (a trace in stepsim's own format)\n", r.rank);
    }
  }
  const std::optional<IdleAcrossRanks> a = idle_across_ranks(ranks);
  if (!a) return;
  const auto share = [&a](double part) { return a->idle_s > 0 ? 100.0 * part / a->idle_s : 0.0; };
  fmt::print(out,
             "  across {} rank(s), mean of each rank's streams summed: idle {:.3f} ms, host wait {:.3f} ms ({:.1f}%), "
             "kernel wait {:.3f} ms ({:.1f}%), other {:.3f} ms ({:.1f}%); most host wait: rank {} {:.3f} ms\n",
             a->ranks, a->idle_s * 1e3, a->host_wait_s * 1e3, share(a->host_wait_s), a->kernel_wait_s * 1e3,
             share(a->kernel_wait_s), a->other_s * 1e3, share(a->other_s), a->host_wait_max_rank,
             a->host_wait_max_s * 1e3);
}

}  // namespace stepsim::analysis
