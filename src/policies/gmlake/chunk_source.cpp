#include "chunk_source.h"

#include <algorithm>

#include "gmlake/error.h"

namespace gmlake::engine {

ChunkSource::ChunkSource(const Config& config, unsigned page_shift, Parts parts)
    : backend_(parts.backend),
      pool_(parts.pool),
      use_(parts.use),
      fence_(parts.fence),
      arenas_(parts.arenas),
      stitcher_(parts.stitcher),
      stats_(parts.stats),
      page_shift_(page_shift),
      max_chunk_pages_(config.max_chunk_bytes >> page_shift),
      headroom_permille_(config.headroom_permille),
      lag_grow_chunks_(config.lag_grow_chunks),
      memory_first_under_cap_(config.memory_first_under_cap),
      cap_bytes_(config.cap_bytes),
      moves_(config.move_budget_ns_per_op) {}

ChunkId ChunkSource::obtain(std::uint64_t pages, std::uint64_t requested, OverBudget over_budget) {
  // Near the cap memory comes first: page-sized chunks, which move one page at a time and strand nothing; unless
  // a peer takes what the own device cannot hold (OverBudget::kPeer).
  const bool peer_takes_over = over_budget == OverBudget::kPeer;
  const std::uint64_t want = !peer_takes_over && near_cap(pages) ? 1 : std::min(pages, max_chunk_pages_);
  // Past the headroom, reserved bytes do not grow beyond what they are now while idle or free memory is left.
  const std::uint64_t reserved_at_start = reserved_now();
  for (;;) {
    // 1. A free chunk that backs at least half of what is wanted: one more map, no new memory.
    const ChunkId free = pool_.largest_free_at_most(pages);
    if (free != kNoChunk && pool_[free].pages * 2 >= want) {
      pool_.take_free(free);
      return free;
    }
    // 2. A new chunk of the run's size: within headroom (memory spent on fewer calls: a repeating step keeps its
    //    chunks mapped), where free memory released below made room for it (a trade: one chunk for many), or
    //    once the move budget is spent (MoveBudget: time first) while memory is not what limits: no cap, and the
    //    device not yet found full (then, as under a cap, memory comes first whatever the moves cost).
    const std::uint64_t reserved = reserved_now();
    const bool headroom = within_headroom(want);
    const bool out_of_budget = !moves_.allows_move() && cap_bytes_ == 0 && !headroom_exhausted_ &&
                               (use_.idle_chunks() != 0 || pool_.free_chunks() != 0);
    if (headroom || out_of_budget || (reserved + (want << page_shift_) <= reserved_at_start && cap_allows(want))) {
      try {
        return pool_.create(want);
      } catch (const OutOfMemoryError&) {
        // The device is full: use idle memory below, as PyTorch retries a failed cudaMalloc from its cache
        // (counted as num_alloc_retries), and spend neither headroom nor growth for time until empty_cache.
        ++stats_.num_alloc_retries;
        if (headroom || out_of_budget) headroom_exhausted_ = true;
      }
    }
    // 2b. Out of credit for moves while the own device cannot grow: with a peer that may lend, the peer serves
    //     the run instead (obtain_or_borrow), as a new chunk would with no cap.
    if (peer_takes_over && !moves_.allows_move() && (headroom_exhausted_ || !cap_allows(want)) &&
        (use_.idle_chunks() != 0 || pool_.free_chunks() != 0)) {
      return kNoChunk;
    }
    // 3. Free chunks that do not suit the run (too small to be worth a map each, or too large) are released once
    //    enough memory is free, or nothing idle is left, or the cap leaves no room: their memory comes back as
    //    one chunk of the run's size (step 2).
    if (pool_.free_chunks() != 0 &&
        (use_.idle_chunks() == 0 || pool_.free_pages() >= want || !cap_allows(want))) {
      const ChunkId largest = pool_.largest_free();
      pool_.take_free(largest);
      try {
        pool_.release(largest);
      } catch (...) {
        pool_.add_free(largest);
        throw;
      }
      moves_.charge_release();
      continue;
    }
    // 4. The memory of the chunk idle the longest, once no queued work can touch it.
    const ChunkId oldest = use_.idle_chunks() != 0 ? use_.oldest_idle() : kNoChunk;
    if (oldest != kNoChunk) {
      const StreamId stream = arenas_[pool_[oldest].arena].stream;
      const std::uint64_t since = pool_[oldest].idle_since;
      const StreamFence::Readiness readiness = fence_.readiness(stream, since);
      if (readiness != StreamFence::Readiness::kSafe) {
        // Uncovered: only draining the stream would tell, so grow if allowed, up to lag_grow_chunks x chunk_bytes
        // in a row (the device's lag raises the peak by a bounded amount). Covered: waiting for the mark is
        // cheap, since the work queued after it keeps the device busy.
        if (readiness == StreamFence::Readiness::kUncovered && lag_grown_pages_ + want <= lag_grow_chunks_ &&
            cap_allows(want)) {
          try {
            const ChunkId created = pool_.create(want);
            lag_grown_pages_ += want;
            return created;
          } catch (const OutOfMemoryError&) {
            ++stats_.num_alloc_retries;
          }
        }
        fence_.wait_safe(stream, since, use_.next_tick());
        ++stats_.fence_waits;
      }
      lag_grown_pages_ = 0;  // the oldest idle chunk is safe now: the device caught up
      evict(oldest);
      moves_.charge_eviction();
      continue;
    }
    // 5. Nothing idle, nothing free: new memory, as much of the run as the cap and the device allow.
    std::uint64_t n = want;
    if (cap_bytes_ != 0) {  // `reserved` is still current: steps 3 and 4 continue the loop when they act
      n = std::min(n, reserved >= cap_bytes_ ? 0 : (cap_bytes_ - reserved) >> page_shift_);
    }
    if (n == 0) throw_oom(requested, "the cap would be exceeded");
    for (;;) {
      try {
        return pool_.create(n);
      } catch (const OutOfMemoryError&) {
        if (n == 1) throw_oom(requested, std::string(backend_.name()) + " backend has no physical memory left");
        ++stats_.num_alloc_retries;  // retried smaller, as PyTorch retries a failed cudaMalloc
        n /= 2;
      }
    }
  }
}

void ChunkSource::evict(ChunkId id) {
  Chunk& c = pool_[id];
  const std::uint64_t pages = c.pages;
  stitcher_.unmap(arenas_[c.arena], id);  // throws: nothing changed, still idle and queued
  use_.unmapped(pages, /*was_used=*/false);
  pool_.add_free(id);
  ++stats_.evictions;
}

void ChunkSource::set_cap_bytes(std::uint64_t cap_bytes) {
  cap_bytes_ = cap_bytes;
  if (cap_bytes_ == 0) return;
  pool_.release_all_free();
  if (reserved_now() > cap_bytes_ && use_.idle_chunks() != 0) {
    fence_.wait_all(use_.next_tick());
  }
  while (reserved_now() > cap_bytes_ && use_.idle_chunks() != 0) {
    evict(use_.oldest_idle());
    pool_.release_all_free();
  }
}

bool ChunkSource::near_cap(std::uint64_t pages) const {
  if (cap_bytes_ == 0) return false;
  if (memory_first_under_cap_) return true;
  return reserved_now() + (pages << page_shift_) > cap_bytes_ / 10 * 9;
}

bool ChunkSource::cap_allows(std::uint64_t pages) const {
  return cap_bytes_ == 0 || reserved_now() + (pages << page_shift_) <= cap_bytes_;
}

bool ChunkSource::within_headroom(std::uint64_t pages) const {
  if (headroom_permille_ == 0 || headroom_exhausted_ || !cap_allows(pages)) return false;
  const std::uint64_t target_bytes = allocated_high_bytes_ + allocated_high_bytes_ / 1000 * headroom_permille_;
  return reserved_now() + (pages << page_shift_) <= target_bytes;
}

void ChunkSource::throw_oom(std::uint64_t requested, const std::string& reason) const {
  throw OutOfMemoryError(requested, static_cast<std::uint64_t>(stats_.reserved_bytes.current),
                         static_cast<std::uint64_t>(stats_.allocated_bytes.current), cap_bytes_, reason);
}

}  // namespace gmlake::engine
