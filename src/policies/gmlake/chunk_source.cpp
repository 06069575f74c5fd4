#include "chunk_source.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "engine_checks.h"
#include "gmlake/error.h"

namespace gmlake::engine {

ChunkSource::ChunkSource(const Config& config, PageGeometry page, Parts parts)
    : backend_(parts.backend),
      store_(parts.store),
      use_(parts.use),
      fence_(parts.fence),
      arenas_(parts.arenas),
      stitcher_(parts.stitcher),
      stats_(parts.stats),
      page_(page),
      sizes_(config, page),
      headroom_({config.headroom_permille, config.waiting_headroom_permille, config.move_headroom_permille,
                 config.lag_headroom_permille}),
      lag_grow_pages_(Pages{config.lag_grow_pages}),
      lag_grow_covered_(config.lag_grow_covered),
      memory_first_under_cap_(config.memory_first_under_cap),
      cap_bytes_(config.cap_bytes),
      clock_(parts.clock),
      max_strand_pages_(page.pages_in(config.max_strand_bytes)),
      standby_limit_(config.max_idle_mapped_bytes != 0 ? 0 : config.standby_mappings),
      in_order_moves_(config.in_order_moves),
      moves_({config.move_budget_ns_per_op, config.move_share_permille, config.move_burst_ms * 1'000'000}),
      waits_(parts.fence, config.assume_device_waits) {}

ChunkId ChunkSource::obtain(Pages pages, std::uint64_t requested, OverBudget over_budget, Pages run_pages) {
  // Near the cap or the device's end memory comes first: page-sized chunks, which move one page at a time and
  // strand nothing; unless a peer takes what the own device cannot hold (OverBudget::kPeer).
  const bool peer_takes_over = over_budget == OverBudget::kPeer;
  const bool memory_first = !peer_takes_over && near_cap(pages);
  const Pages want = memory_first ? Pages{1} : pages;
  // Where the pool grows (nothing idle or free to move), the chunk may cover more of the run: fewer creates,
  // maps and access grants in the steps that grow the pool (growth_limit()). The stream is asked whether the
  // device waits only here, where growth is made.
  const Pages run = std::max(run_pages, pages);
  auto growth_want = [&] {
    if (memory_first || peer_takes_over) return want;
    const bool waits = sizes_.growth_on() && device_waits();
    const Pages n = std::max(want, std::min(run, growth_limit(waits)));
    if (waits) ++stats_.waiting_growths;
    return n;
  };
  const std::uint64_t reserved_at_start = reserved_now();
  ObtainState s;
  s.want_pages = want;
  s.has_cap = cap_bytes_ != 0;
  s.peer_takes_over = peer_takes_over;
  s.lag_grows_covered = lag_grow_covered_;
  // A free chunk that fits in the run is mapped whole, fully covered, stranding nothing: up to the growth size,
  // so that a growth chunk evicted elsewhere backs a run again instead of being released and made anew.
  const Pages fit =
      memory_first || peer_takes_over ? pages : std::min(run, std::max(pages, sizes_.growth_chunk_pages()));
  for (;;) {
    const ChunkId free = store_.largest_free_at_most(fit);
    s.best_free_pages = free == kNoChunk ? Pages{0} : store_[free].pages;
    s.free_chunks = store_.free_chunks();
    s.free_pages = store_.free_pages();
    s.idle_chunks = use_.idle_chunks();
    s.within_headroom = within_headroom(want) || within_waiting_headroom(want, s);
    s.within_move_headroom = within_move_headroom(want);
    s.below_allocated_high = headroom_.within(reserved_now(), page_.bytes_of(want), 0);  // no allowance above H
    s.cap_allows_want = cap_allows(want);
    s.room_made = reserved_now() + page_.bytes_of(want) <= reserved_at_start && s.cap_allows_want;
    s.device_found_full = headroom_.device_full();
    // Asked only where it matters (a fence query or a clock read): with nothing to move, no move is weighed.
    s.moves_allowed = (s.free_chunks == 0 && s.idle_chunks == 0) || moves_allowed();
    const ChunkId oldest = s.idle_chunks != 0 ? use_.oldest_idle() : kNoChunk;
    if (oldest != kNoChunk) {
      if (fence_.asynchronous()) {
        s.oldest_idle = readiness(arenas_[store_[oldest].arena], use_.idle_since(oldest));
        s.oldest_idle_in_order = s.oldest_idle != StreamFence::Readiness::kSafe && moves_in_order(oldest);
      }
      s.lag_allows = lag_grown_pages_ + want <= lag_grow_pages_ && s.cap_allows_want &&
                     headroom_.lag_allows(reserved_now(), page_.bytes_of(want));
    }
    const ObtainStep step = decide(s);
    switch (step.action) {
      case ObtainAction::kTakeFree:
        store_.take_free(free);
        return free;
      case ObtainAction::kCreate:
        try {
          return store_.create(step.growth ? growth_want() : want);
        } catch (const OutOfMemoryError&) {
          // The device is full: use idle memory, as PyTorch retries a failed cudaMalloc from its cache (counted
          // as num_alloc_retries), and spend neither headroom nor growth for time until empty_cache.
          ++stats_.num_alloc_retries;
          if (step.for_time) headroom_.device_found_full();
          s.create_refused = true;
        }
        break;
      case ObtainAction::kLeaveToPeer:
        return kNoChunk;
      case ObtainAction::kReleaseFree:
        release_free(store_.largest_free());
        charge_release();
        s.create_refused = false;
        break;
      case ObtainAction::kCreateForLag:
        // The oldest idle chunk's work has not finished: waiting would block the host until the device gets there
        // (a drain of its stream where no mark covers it), so grow instead, up to lag_grow_pages x page_bytes in a
        // row (the device's lag raises the peak by a bounded amount).
        try {
          const ChunkId created = store_.create(want);
          lag_grown_pages_ += want;
          return created;
        } catch (const OutOfMemoryError&) {
          ++stats_.num_alloc_retries;
          s.lag_refused = true;
        }
        break;
      case ObtainAction::kWaitAndEvict:
      case ObtainAction::kEvict:
        if (step.action == ObtainAction::kWaitAndEvict) {
          // Lag growth spent or refused (or off for covered chunks): block until the device passes the chunk's
          // work, on a mark that covers it, else on one recorded now (a drain of its stream).
          wait_for_stream(arenas_[store_[oldest].arena].stream, use_.idle_since(oldest));
        }
        // The oldest idle chunk is safe now: the device caught up (not so for a move in stream order, which
        // decide() takes only as kEvict).
        if (!s.oldest_idle_in_order) lag_grown_pages_ = Pages{0};
        evict(oldest, EvictTo::kStandby);
        if (s.oldest_idle_in_order) ++stats_.in_order_evictions;
        charge_eviction();
        s.create_refused = false;
        break;
      case ObtainAction::kCreateWhatFits: {
        // Nothing idle, nothing free: new memory, as much of the run as the cap and the device allow.
        Pages n = step.growth ? growth_want() : want;
        if (cap_bytes_ != 0) {
          const std::uint64_t reserved = reserved_now();
          n = std::min(n, reserved >= cap_bytes_ ? Pages{0} : page_.pages_in(cap_bytes_ - reserved));
        }
        if (n == Pages{0}) throw_oom(requested, "the cap would be exceeded");
        for (;;) {
          try {
            return store_.create(n);
          } catch (const OutOfMemoryError&) {
            if (n == Pages{1}) {
              throw_oom(requested, std::string(backend_.name()) + " backend has no physical memory left");
            }
            ++stats_.num_alloc_retries;  // retried smaller, as PyTorch retries a failed cudaMalloc
            n = n / 2;
          }
        }
      }
    }
  }
}

std::uint64_t ChunkSource::recut(Arena& arena, PageNumber first, PageNumber last, Pages stranded_pages) {
  if (stranded_pages <= max_strand_pages_ || !moves_allowed()) return 0;
  // Idle chunks mapped (active or standby) at the pages, and free chunks with a standby mapping there.
  std::vector<ChunkId> stranding;
  arena.pages.for_each(first, last, [&](PageNumber p, const PageMap::Entry& e) {
    const Chunk& c = store_[e.chunk];
    if (!use_.used(e.chunk) && !c.on_peer && (p < first || p + e.pages - Pages{1} > last)) stranding.push_back(e.chunk);
  });
  std::uint64_t recut_chunks = 0;
  for (const ChunkId id : stranding) {
    if (store_[id].pages == Pages{0} || use_.used(id)) continue;  // released or taken by an earlier step
    if (store_[id].mapped()) {
      if (!safe_to_evict(id)) continue;  // queued work may still touch it: it strands, as it would have
      evict(id);  // throws: nothing changed for this chunk
    }
    release_free(id);
    charge_eviction();
    charge_release();
    ++recut_chunks;
  }
  return recut_chunks;
}

void ChunkSource::release_free(ChunkId id) {
  drop_standby(id);  // throws: still free, with the standby mappings not yet unmapped
  store_.take_free(id);
  try {
    store_.release(id);
  } catch (...) {
    store_.add_free(id);
    throw;
  }
}

void ChunkSource::wait_for_stream(StreamId stream, std::uint64_t tick) {
  const std::int64_t start_ns = clock_.now_ns();
  const bool drains = fence_.wait_safe(stream, tick, use_.next_tick());  // throws: nothing counted
  stats_.fence_wait_ns += static_cast<std::uint64_t>(clock_.now_ns() - start_ns);
  ++stats_.fence_waits;
  if (drains) ++stats_.fence_drains;
}

void ChunkSource::evict(ChunkId id, EvictTo to) {
  Chunk& c = store_[id];
  const Pages pages = c.pages;
  Arena& from = arenas_[c.arena];
  if (to == EvictTo::kStandby && standby_limit_ != 0 && !c.on_peer) {
    if (c.standby.size() >= standby_limit_) {
      const ChunkPlace oldest = c.standby.front();
      unmap_standby(id, oldest.arena, oldest.first_page);  // throws: nothing changed
    }
    // no backend call; its idle tick is the left_tick, which only a fence with stream events reads
    stitcher_.to_standby(from, id, fence_.asynchronous() ? use_.idle_since(id) : 0);
  } else {
    stitcher_.unmap(from, id);  // throws: nothing changed, still idle and queued
  }
  use_.unmapped(pages, /*was_used=*/false);
  store_.add_free(id);
  ++stats_.evictions;
}

const ChunkPlace& ChunkSource::standby_place(ChunkId id, std::uint32_t arena, PageNumber first_page) const {
  const Chunk& c = store_[id];
  const auto it = c.standby_at(arena, first_page);
  if (it == c.standby.end()) throw std::logic_error("gmlake invariant broken: a chunk lacks a standby mapping");
  return *it;
}

bool ChunkSource::moves_in_order(ChunkId id) {
  const Chunk& c = store_[id];
  if (!in_order_moves_ || c.on_peer || arenas_[c.arena].stream != stream_ || standby_limit_ == 0) return false;
  // At the standby limit the chunk's oldest standby mapping is unmapped first (evict): only once it is safe.
  return c.standby.size() < standby_limit_ || standby_safe(id, c.standby.front().arena, c.standby.front().first_page);
}

bool ChunkSource::standby_safe(ChunkId id, std::uint32_t arena, PageNumber first_page) {
  const std::uint64_t left_tick = standby_place(id, arena, first_page).left_tick;
  return !fence_.asynchronous() || tick_safe(arenas_[arena], left_tick);
}

void ChunkSource::unmap_standby(ChunkId id, std::uint32_t arena, PageNumber first_page) {
  const std::uint64_t left_tick = standby_place(id, arena, first_page).left_tick;
  if (fence_.asynchronous() && !tick_safe(arenas_[arena], left_tick)) {
    wait_for_stream(arenas_[arena].stream, left_tick);
  }
  stitcher_.unmap_standby(arenas_[arena], first_page, id);  // throws: nothing changed
}

void ChunkSource::drop_standby(ChunkId id) {
  Chunk& c = store_[id];
  while (!c.standby.empty()) {
    const ChunkPlace last = c.standby.back();
    unmap_standby(id, last.arena, last.first_page);  // throws: the rest stay
  }
}

void ChunkSource::release_all_free() {
  std::vector<ChunkId> standing;
  store_.for_each([&](ChunkId id, const Chunk& c) {
    if (!c.mapped() && !c.standby.empty()) standing.push_back(id);
  });
  for (const ChunkId id : standing) drop_standby(id);
  store_.release_all_free();
}

void ChunkSource::set_cap_bytes(std::uint64_t cap_bytes) {
  cap_bytes_ = cap_bytes;
  if (cap_bytes_ == 0) return;
  release_all_free();
  if (reserved_now() > cap_bytes_ && use_.idle_chunks() != 0) {
    fence_.wait_all(use_.next_tick());
  }
  while (reserved_now() > cap_bytes_ && use_.idle_chunks() != 0) {
    evict(use_.oldest_idle());
    release_all_free();
  }
}

std::uint64_t ChunkSource::device_free_bytes() {
  if (!device_free_known_) {
    device_free_ = backend_.device_free_bytes();
    device_free_known_ = true;
  }
  return device_free_;
}

bool ChunkSource::near_cap(Pages pages) {
  const std::uint64_t reserved = reserved_now();
  const std::uint64_t bytes = page_.bytes_of(pages);
  if (cap_bytes_ != 0 && (memory_first_under_cap_ || reserved + bytes > cap_bytes_ / 10 * 9)) return true;
  const std::uint64_t free_bytes = device_free_bytes();
  if (free_bytes == UINT64_MAX) return false;
  const std::uint64_t capacity = reserved + free_bytes;
  return reserved + bytes > capacity / 10 * 9;
}

bool ChunkSource::cap_allows(Pages pages) const {
  return cap_bytes_ == 0 || reserved_now() + page_.bytes_of(pages) <= cap_bytes_;
}

bool ChunkSource::within_headroom(Pages pages) const {
  return cap_allows(pages) && headroom_.plain_allows(reserved_now(), page_.bytes_of(pages));
}

bool ChunkSource::within_waiting_headroom(Pages pages, const ObtainState& s) {
  // Asked of the stream last: only where the plain headroom would move idle or free memory instead (not where a
  // free chunk backs the run: decide() takes it first).
  return headroom_.waiting_applies() && (s.idle_chunks != 0 || s.free_chunks != 0) && !takes_free(s) &&
         cap_allows(pages) && headroom_.waiting_allows(reserved_now(), page_.bytes_of(pages)) && device_waits();
}

void ChunkSource::throw_oom(std::uint64_t requested, const std::string& reason) const {
  throw OutOfMemoryError(requested, static_cast<std::uint64_t>(stats_.reserved_bytes.current),
                         static_cast<std::uint64_t>(stats_.allocated_bytes.current), cap_bytes_, reason);
}

void ChunkSource::check_invariants() const {
  moves_.check_invariants();
  if (stats_.allocated_bytes.current > 0) {
    headroom_.check_invariants(static_cast<std::uint64_t>(stats_.allocated_bytes.current));
  }
}

}  // namespace gmlake::engine
