// The thread pool is Boost.Asio's: workers take the next point from a shared counter; the
// calling thread writes each finished row as soon as every earlier one is written.
#include "sweep/runner.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "sweep/progress.hpp"
#include "sweep/row_file.hpp"

namespace stepsim::sweep {
namespace {

unsigned job_count(unsigned jobs, std::size_t work) {
  if (jobs == 0) jobs = std::max(1U, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(jobs, work)));
}

// Runs `run(i)` for i in [0, n) on a pool and hands the results to `deliver` in order of i.
// `run` must not throw (a point's failure is its result).
template <typename Result>
void ordered_parallel(std::size_t n, unsigned jobs, const std::function<Result(std::size_t)>& run,
                      const std::function<void(std::size_t, Result&&)>& deliver) {
  if (n == 0) return;
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::condition_variable ready;
  std::map<std::size_t, Result> done;
  boost::asio::thread_pool pool(job_count(jobs, n));
  for (unsigned j = 0; j < job_count(jobs, n); ++j) {
    boost::asio::post(pool, [&] {
      for (std::size_t i = next++; i < n; i = next++) {
        Result result = run(i);
        {
          const std::lock_guard lock(mutex);
          done.emplace(i, std::move(result));
        }
        ready.notify_one();
      }
    });
  }
  try {
    for (std::size_t i = 0; i < n; ++i) {
      std::unique_lock lock(mutex);
      ready.wait(lock, [&] { return done.contains(i); });
      Result result = std::move(done.at(i));
      done.erase(i);
      lock.unlock();
      deliver(i, std::move(result));
    }
  } catch (...) {
    next = n;  // the workers stop after their current point
    pool.join();
    throw;
  }
  pool.join();
}

}  // namespace

RunSummary run_sweep(const SweepSpec& spec, const RunOptions& options) {
  const Format format = format_of(options.output, "-o");
  RowFile file(options.output, format, columns(spec), options.resume);
  std::vector<std::size_t> indices;
  for (std::size_t i = options.shard.index; i < point_count(spec.axes); i += options.shard.count) indices.push_back(i);
  RunSummary summary;
  summary.points = indices.size();
  Progress progress(indices.size(), options.progress);
  const bool resuming = !file.existing().empty();
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
          file.append(format_row(spec, *r, format));
          ++(r->status == Status::ok        ? summary.ok
             : r->status == Status::invalid ? summary.invalid
             : r->status == Status::oom     ? summary.oom
                                            : summary.error);
        }
        progress.update(k + 1);
      });
  progress.finish();
  file.sync();
  return summary;
}

std::vector<PointResult> run_points(const std::vector<std::size_t>& indices, unsigned jobs,
                                    const std::function<PointResult(std::size_t)>& run, bool show_progress) {
  std::vector<PointResult> results;
  results.reserve(indices.size());
  Progress progress(indices.size(), show_progress);
  ordered_parallel<PointResult>(
      indices.size(), jobs, [&](std::size_t k) { return run(indices[k]); },
      [&](std::size_t k, PointResult&& r) {
        results.push_back(std::move(r));
        progress.update(k + 1);
      });
  progress.finish();
  return results;
}

}  // namespace stepsim::sweep
