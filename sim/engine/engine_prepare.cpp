// The op states: where each rank's lie, and preparing them (each compute op's work drawn,
// each collective op's collective written), on a thread of their own in a large run.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

#include "engine/engine.hpp"
#include "engine/parallel.hpp"
#include "stepsim/error.hpp"

namespace stepsim::engine {

// One region per distinct op list, in the order of the lists' first ranks; in each, the
// ranks' blocks interleaved (see OpStates).
void Engine::place_op_states() {
  std::unordered_map<const OpList*, std::uint32_t> region_of_list;
  region_of_.resize(ranks_.size());
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const auto [it, added] =
        region_of_list.try_emplace(program_.ranks[r].list.get(), static_cast<std::uint32_t>(regions_.size()));
    if (added) {
      regions_.emplace_back();
      region_ranks_.emplace_back();
    }
    region_of_[r] = it->second;
    ++regions_[it->second].ranks_left;
    region_ranks_[it->second].push_back(static_cast<std::uint32_t>(r));
  }
  std::size_t total = 0;
  for (std::size_t g = 0; g < regions_.size(); ++g) {
    StateRegion& region = regions_[g];
    const std::size_t blocks = (ranks_[region_ranks_[g].front()].list->ops.size() + kOpBlock - 1) / kOpBlock;
    STEPSIM_CHECK(region.ranks_left * kOpBlock <= UINT32_MAX, "too many ranks share an op list");
    region.list = ranks_[region_ranks_[g].front()].list;
    region.first = total;
    total += region.ranks_left * blocks * kOpBlock;
    region.end = total;
    rows_ = std::max(rows_, blocks);
  }
  op_states_ = ZeroedArray<OpState>(total);
  op_flags_ = ZeroedArray<OpFlags>(total);
  op_base_.resize(ranks_.size());
  for (std::size_t g = 0; g < regions_.size(); ++g) {
    const auto stride = static_cast<std::uint32_t>(regions_[g].ranks_left * kOpBlock);
    for (std::size_t i = 0; i < region_ranks_[g].size(); ++i) {
      const std::uint32_t r = region_ranks_[g][i];
      STEPSIM_CHECK(ranks_[r].list->ops.size() <= UINT32_MAX, "too many ops on one rank");
      ranks_[r].ops = OpStates(op_states_.data() + regions_[g].first + i * kOpBlock, stride,
                               static_cast<std::uint32_t>(ranks_[r].list->ops.size()));
      op_base_[r] = ranks_[r].ops;
    }
  }
}

// With a second thread (a large run on more than one core) the rows are prepared on it;
// otherwise they are drawn here and their collectives written once those are indexed (collectives_indexed).
void Engine::start_preparing(std::chrono::steady_clock::time_point setup_start) {
  row_state_ = std::make_unique<std::atomic<RowState>[]>(rows_);
  if (second_thread_) {
    try {
      preparer_ = std::jthread([this, setup_start](const std::stop_token& stop) { prepare(stop, setup_start); });
      return;
    } catch (const std::system_error&) {
      // No thread to be had: prepare here.
    }
  }
  prepare_all(true, false);
}

// Draws rows until the collectives are indexed, then goes over every row from the front,
// writing its collectives (and drawing it, if not done yet), unless the loop has claimed it.
// An error (a duration that overflows) stops it and is thrown again on the loop's thread.
void Engine::prepare(const std::stop_token& stop, std::chrono::steady_clock::time_point setup_start) {
  try {
    // The flags are only zeros until the loop writes them: mapped here in one go, so that the
    // loop takes none of their page faults.
    if (op_flags_.size() * sizeof(OpFlags) >= kLargeRun)
      populate_pages(op_flags_.data(), op_flags_.size() * sizeof(OpFlags));
    prepare_rows(stop);
    prepared_at_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
    keep_slabs_ready(stop);
  } catch (...) {
    prepare_error_ = std::current_exception();
    prepare_failed_.store(true, std::memory_order_release);
  }
}

// Once the rows are prepared, the thread keeps kReadySlabs bubble slabs ready until the loop
// is over (finish_preparing).
void Engine::keep_slabs_ready(const std::stop_token& stop) {
  for (;;) {
    {
      std::unique_lock lock(slab_mutex_);
      if (!slab_taken_.wait(lock, stop, [this] { return loop_done_ || ready_slabs_.size() < kReadySlabs; })) return;
      if (loop_done_) return;
    }
    add_ready_slab();
  }
}

// A slab is allocated and its pages mapped outside the lock.
void Engine::add_ready_slab() {
  HugePageVector<BubbleChunk> slab(kLargestSlab);
  const std::scoped_lock lock(slab_mutex_);
  ready_slabs_.push_back(std::move(slab));
  ready_count_.store(ready_slabs_.size(), std::memory_order_relaxed);
}

void Engine::prepare_rows(const std::stop_token& stop) {
  RowState seen{};
  for (std::size_t row = 0; row < rows_ && !collectives_indexed_.load(std::memory_order_acquire); ++row) {
    if (stop.stop_requested()) return;
    if (!claim_row(row, RowState::untouched, seen)) continue;
    prepare_row(row, true, false);
    row_state_[row].store(RowState::drawn, std::memory_order_release);
    if (ready_count_.load(std::memory_order_relaxed) < kReadySlabs) add_ready_slab();
  }
  while (!collectives_indexed_.load(std::memory_order_acquire)) {
    if (stop.stop_requested()) return;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (std::size_t row = 0; row < rows_; ++row) {
    if (stop.stop_requested()) return;
    complete_row(row);
    if (ready_count_.load(std::memory_order_relaxed) < kReadySlabs) add_ready_slab();
  }
}

// Takes a row in state `from` or earlier for this thread; `seen` is the state it had.
bool Engine::claim_row(std::size_t row, RowState from, RowState& seen) {
  seen = row_state_[row].load(std::memory_order_acquire);
  while (seen <= from) {
    if (row_state_[row].compare_exchange_weak(seen, RowState::claimed, std::memory_order_acq_rel)) return true;
  }
  return false;
}

// Prepares the rest of a row, if no thread has claimed it yet.
void Engine::complete_row(std::size_t row) {
  RowState seen{};
  if (!claim_row(row, RowState::drawn, seen)) return;
  prepare_row(row, seen == RowState::untouched, true);
  row_state_[row].store(RowState::ready, std::memory_order_release);
}

// The loop needs an op whose row is not ready: it prepares the row itself, or waits for the
// preparing thread to finish it. A row that thread was still drawing when the collectives were
// indexed is then only drawn, and the loop completes it rather than wait for the thread to come
// back to it.
void Engine::prepare_now(std::size_t row) {
  for (;;) {
    complete_row(row);
    if (row_state_[row].load(std::memory_order_acquire) == RowState::ready) return;
    if (prepare_failed_.load(std::memory_order_acquire)) finish_preparing();  // throws
    std::this_thread::yield();
  }
}

// Row `row` of every region: its ops' work drawn, its collective ops' collectives written.
// What this reads is written before the preparing thread starts and not changed while it runs
// (op_base_, not ranks_, whose lines the loop writes).
void Engine::prepare_row(std::size_t row, bool draw, bool note_collectives) {
  const std::size_t first = row * kOpBlock;
  for (std::size_t g = 0; g < regions_.size(); ++g) {
    const ListIndex& list = *regions_[g].list;
    if (first >= list.ops.size()) continue;
    const std::size_t end = std::min(first + kOpBlock, list.ops.size());
    // The row's collective ops, as places in the list's collectives.
    std::size_t from = 0;
    std::size_t to = 0;
    if (note_collectives) {
      from = static_cast<std::size_t>(std::ranges::lower_bound(list.collectives, first) - list.collectives.begin());
      to = static_cast<std::size_t>(std::ranges::lower_bound(list.collectives, end) - list.collectives.begin());
    }
    for (const std::uint32_t r : region_ranks_[g]) {
      if (draw) draw_work(r, list, first, end);
      if (note_collectives) note_collectives_of(r, list, from, to);
    }
  }
}

// The one place an op's full-speed duration becomes this run's work: the rank's speed and its
// kernel jitter (simulation.variation) scale it here, and nowhere else. Each draw is a pure
// function of (seed, rank, op), so they need not wait for the run.
void Engine::draw_work(std::uint32_t r, const ListIndex& list, std::size_t first, std::size_t end) const {
  const OpStates ops = op_base_[r];
  const int rank = program_.ranks[r].rank;
  for (std::size_t o = first; o < end; ++o) {
    const Op& op = list.ops[o];
    if (op.kind == OpKind::compute)
      ops[o].work = program_.variation.scale(r, rank, static_cast<OpIndex>(o), op.duration).ps();
    if (op.kind == OpKind::copy) ops[o].work = op.duration.ps();
  }
}

// The list's collective ops from..to - 1 (places in its collectives) of rank r.
void Engine::note_collectives_of(std::uint32_t r, const ListIndex& list, std::size_t from, std::size_t to) const {
  const OpStates ops = op_base_[r];
  const std::uint32_t* mine = op_collective_.data() + op_collective_begin_[r];
  for (std::size_t k = from; k < to; ++k) ops[list.collectives[k]].collective = mine[k];
}

// Without a second thread: rank after rank, each one's ops front to back.
void Engine::prepare_all(bool draw, bool note_collectives) {
  for (std::size_t g = 0; g < regions_.size(); ++g) {
    const ListIndex& list = *regions_[g].list;
    for (const std::uint32_t r : region_ranks_[g]) {
      if (draw) draw_work(r, list, 0, list.ops.size());
      if (note_collectives) note_collectives_of(r, list, 0, list.collectives.size());
    }
  }
}

void Engine::collectives_indexed() {
  if (preparer_.joinable()) {
    if (prepare_failed_.load(std::memory_order_acquire)) finish_preparing();  // throws
    collectives_indexed_.store(true, std::memory_order_release);
    return;
  }
  prepare_all(false, true);
  finish_preparing();
}

// Every row prepared and the thread, if any, joined; the collectives' copy is no longer needed.
void Engine::finish_preparing() {
  if (preparer_.joinable()) {
    {
      const std::scoped_lock lock(slab_mutex_);
      loop_done_ = true;
    }
    slab_taken_.notify_all();
    preparer_.join();
    ready_slabs_.clear();
    if (prepare_error_) std::rethrow_exception(prepare_error_);
    stats_.prepare_s = prepared_at_s_;
  }
  all_prepared_ = true;
  op_collective_ = {};
  op_collective_begin_ = {};
  row_state_.reset();
}

}  // namespace stepsim::engine
