// Workers take the next point from a shared counter; the calling thread writes each finished
// row as soon as every earlier one is written. A sweep on several threads runs each
// simulation on its worker alone (engine::SingleThreaded): the cores are taken already.
#include "sweep/runner.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "engine/parallel.hpp"
#include "stepsim/error.hpp"
#include "sweep/progress.hpp"
#include "sweep/row_file.hpp"

namespace stepsim::sweep {

InputError jobs_error(const std::string& text) {
  return InputError("--jobs", text,
                    fmt::format("expected a whole number of simulations at once from 1 to {}", kMaxJobs));
}
namespace {

unsigned job_count(unsigned jobs, std::size_t work) {
  if (jobs == 0) jobs = engine::usable_cores();
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(jobs, work)));
}

// Starts up to `wanted` threads running `body`, fewer when the system refuses more (an
// address-space or process limit): the sweep then runs on those it got, and says so.
std::vector<std::thread> start_workers(unsigned wanted, const std::function<void()>& body) {
  std::vector<std::thread> workers;
  workers.reserve(wanted);
  for (unsigned j = 0; j < wanted; ++j) {
    try {
      workers.emplace_back(body);
    } catch (const std::system_error& e) {
      spdlog::warn("could start only {} of the {} threads asked for ({}); running on {}", workers.size(), wanted,
                   e.code().message(), workers.empty() ? std::string("this one") : std::to_string(workers.size()));
      break;
    }
  }
  return workers;
}

// " (this process's address space is limited to N MiB: ulimit -v)" where a limit is set.
std::string memory_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return "";
  return fmt::format(" (this process's address space is limited to {} MiB: ulimit -v)", limit.rlim_cur >> 20);
}

// A point that ran out of memory while others ran at once failed for their sake, not its own:
// its row would say so of the point. `what` names it; `jobs` is --jobs (0: not given).
InputError out_of_memory(const std::string& what, unsigned jobs, unsigned threads, const std::string& then) {
  return InputError(
      "--jobs", jobs == 0 ? std::string() : std::to_string(jobs),
      fmt::format("{} ran out of memory with {} simulations at once{}: {}", what, threads, memory_limit(), then));
}

// Runs `run(i)` for i in [0, n) on `jobs` threads and hands the results to `deliver` in
// order of i; `threads` receives the number of threads that run them (0: this one alone)
// before the first is delivered. `run` must not throw (a point's failure is its result).
template <typename Result>
void ordered_parallel(std::size_t n, unsigned jobs, const std::function<Result(std::size_t)>& run,
                      const std::function<void(std::size_t, Result&&)>& deliver, unsigned& threads) {
  threads = 0;
  if (n == 0) return;
  const unsigned wanted = job_count(jobs, n);
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::condition_variable ready;
  std::map<std::size_t, Result> done;
  std::vector<std::thread> workers = start_workers(wanted, [&] {
    std::optional<engine::SingleThreaded> alone;
    if (wanted > 1) alone.emplace();
    for (std::size_t i = next++; i < n; i = next++) {
      Result result = run(i);
      {
        const std::lock_guard lock(mutex);
        done.emplace(i, std::move(result));
      }
      ready.notify_one();
    }
  });
  threads = static_cast<unsigned>(workers.size());
  const auto stop = [&] {
    next = n;  // the workers stop after their current point
    for (std::thread& w : workers) w.join();
  };
  try {
    for (std::size_t i = 0; i < n; ++i) {
      if (workers.empty()) {
        deliver(i, run(i));
        continue;
      }
      std::unique_lock lock(mutex);
      ready.wait(lock, [&] { return done.contains(i); });
      Result result = std::move(done.at(i));
      done.erase(i);
      lock.unlock();
      deliver(i, std::move(result));
    }
  } catch (...) {
    stop();
    throw;
  }
  stop();
}

}  // namespace

RunSummary run_sweep(const SweepSpec& spec, const RunOptions& options) {
  const Format format = format_of(options.output, "-o");
  // Each row a resumed file has must be its point's (the point_id this sweep gives that
  // point) and, with --shard K/N, one of this shard's points: another shard's row is a file
  // mixed up with another shard's (a merge would keep whichever row of a point it meets
  // first). Checked before the file is changed.
  const Shard& shard = options.shard;
  const RowFile::RowCheck check = [&spec, &options, &shard](const RowFile::ExistingRow& row) {
    const std::string& path = options.output;
    if (row.key.point % shard.count != shard.index)
      throw InputError(
          path, fmt::format("line {}", row.line),
          fmt::format("point {} is shard {}/{}'s (its index mod {}), not this run's shard {}/{}: "
                      "expected only this shard's rows (a merge of the shards resumes without --shard)",
                      row.key.point, row.key.point % shard.count, shard.count, shard.count, shard.index, shard.count));
    const std::uint64_t id = resolve_point(spec, row.key.point).id;
    if (id != row.key.id)
      throw InputError(path, fmt::format("line {}", row.line),
                       fmt::format("point {} has point_id {}, but this sweep's point {} is {}: expected this sweep's "
                                   "rows (--resume takes only the rows a sweep writes)",
                                   row.key.point, format_id(row.key.id), row.key.point, format_id(id)));
  };
  RowFile file(options.output, format, columns(spec), spec.sweep_id, options.resume, check);
  std::vector<std::size_t> indices;
  for (std::size_t i = shard.index; i < point_count(spec.axes); i += shard.count) indices.push_back(i);
  RunSummary summary;
  summary.points = indices.size();
  Progress progress(indices.size(), options.progress);
  // Rows on the terminal the progress line is drawn on: the line is erased before each row, and
  // drawn again after it, below the rows.
  const bool rows_under_progress = options.progress && file.is_terminal();
  const bool resuming = !file.existing().empty();
  unsigned threads = 0;
  ordered_parallel<std::optional<PointResult>>(
      indices.size(), options.jobs,
      [&](std::size_t k) -> std::optional<PointResult> {
        if (resuming) {
          try {
            const PointResult resolved = resolve_point(spec, indices[k]);
            if (file.existing().contains(RowKey{resolved.index, resolved.id})) return std::nullopt;
          } catch (...) {
            // run_point records whatever went wrong
          }
        }
        return run_point(spec, indices[k]);
      },
      [&](std::size_t k, std::optional<PointResult>&& r) {
        if (!r) {
          ++summary.skipped;
        } else {
          if (r->out_of_memory && threads > 1)
            throw out_of_memory(fmt::format("point {}", r->index), options.jobs, threads,
                                file.is_file()
                                    ? "the rows before it are written; run fewer at once, with --resume for the rest"
                                    : "the rows before it are written; run fewer at once");
          if (rows_under_progress) progress.hide();
          file.append(format_row(spec, *r, format));
          ++(r->status == Status::ok        ? summary.ok
             : r->status == Status::invalid ? summary.invalid
             : r->status == Status::oom     ? summary.oom
                                            : summary.error);
        }
        progress.update(k + 1, summary.skipped);
      },
      threads);
  progress.finish();
  if (resuming) file.put_in_point_order(format, columns(spec));
  file.sync();
  return summary;
}

std::vector<PointResult> run_points(const std::vector<std::size_t>& indices, unsigned jobs,
                                    const std::function<PointResult(std::size_t)>& run, bool show_progress) {
  std::vector<PointResult> results;
  results.reserve(indices.size());
  Progress progress(indices.size(), show_progress);
  unsigned threads = 0;
  ordered_parallel<PointResult>(
      indices.size(), jobs, [&](std::size_t k) { return run(indices[k]); },
      [&](std::size_t k, PointResult&& r) {
        if (r.out_of_memory && threads > 1) throw out_of_memory("a simulation", jobs, threads, "run fewer at once");
        results.push_back(std::move(r));
        progress.update(k + 1);
      },
      threads);
  progress.finish();
  return results;
}

}  // namespace stepsim::sweep
