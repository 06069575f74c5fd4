#include "stitching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "gmlake/error.h"
#include "gmlake/units.h"
#include "../common/teardown.h"

namespace gmlake::engine {
namespace {

// Checked before any member is computed from it (Error(kConfig) when invalid).
const Config& validated(const Config& config) {
  config.validate();
  return config;
}

// The clock the parts read: the one given, else the process's steady clock.
Clock& given_or_steady(Clock* clock) { return clock != nullptr ? *clock : steady_clock(); }

}  // namespace

StitchingAllocator::StitchingAllocator(const Config& config, Backend& backend, StreamEvents* events, Clock* clock,
                                       ChunkProvider* lake)
    : config_(validated(config)),
      backend_(backend),
      page_(config.page_bytes),
      grow_pages_(std::max(Pages{1}, page_.pages_in(std::min(config.grow_bytes, config.max_chunk_bytes)))),
      store_(backend, PageGeometry(config.page_bytes), stats_),
      peers_(make_peer_source(config_, backend, store_, lake)),
      stitcher_(backend, store_, page_),
      placer_(store_, use_, page_, config_.fit_candidates),
      use_(store_, arenas_),
      fence_(events),
      arenas_(backend, config.arena_virtual_bytes, !config.cross_stream_reuse,
              [this](Arena& arena) { return unmap_arena(arena); },
              [this] { fence_.wait_all(use_.next_tick()); },
              config.arena_handover ? ArenaSet::Handover([this](const Arena& a) { return handover_tick(a); })
                                    : ArenaSet::Handover(),
              &given_or_steady(clock),
              static_cast<std::int64_t>(config.handover_quiet_ms) * 1'000'000, &stats_.num_alloc_retries),
      source_(config_, page_,
              {backend, store_, use_, fence_, arenas_, stitcher_, stats_, given_or_steady(clock)}),
      blocks_(policy::InvalidFreeWords::engine(), stats_) {
  if (events != nullptr && config_.cross_stream_reuse) {
    throw Error(ErrorCode::kConfig,
                "gmlake config: cross_stream_reuse: must be false with asynchronous streams (each stream keeps its "
                "own arenas; chunks move between streams once the freeing stream's work has finished)");
  }
  if (config_.page_bytes % backend.granularity_bytes() != 0) {
    throw Error(ErrorCode::kConfig, "gmlake config: page_bytes: " + std::to_string(config_.page_bytes) +
                                        " is not a multiple of the backend granularity " +
                                        std::to_string(backend.granularity_bytes()));
  }
}

StitchingAllocator::~StitchingAllocator() {
  // Teardown must not throw: every backend call is tried twice (teardown.h); what fails twice stays with the
  // backend (a chunk whose unmap failed is not released).
  try {
    fence_.wait_all(use_.next_tick());  // no queued work may still touch what is unmapped below
  } catch (...) {
  }
  std::vector<ChunkId> live;
  store_.for_each([&](ChunkId id, const Chunk&) { live.push_back(id); });
  for (const ChunkId id : live) {
    Chunk& c = store_[id];
    bool unmapped = true;
    for (const ChunkPlace& place : c.standby) {
      const std::uintptr_t address = stitcher_.address(arenas_[place.arena], place.first_page);
      unmapped = attempt_twice([&] { stitcher_.unmap_unobserved(address, page_.bytes_of(c.pages)); }) && unmapped;
    }
    if (c.mapped()) {
      Arena& arena = arenas_[c.arena];
      const std::uintptr_t address = stitcher_.address(arena, c.first_page);
      unmapped = attempt_twice([&] { backend_.unmap(address, page_.bytes_of(c.pages)); }) && unmapped;
    }
    if (!unmapped) continue;
    attempt_twice([&] { store_.release(id); });  // a peer chunk goes back through its source
  }
  // ArenaSet's destructor frees the arenas' address space.
}

void* StitchingAllocator::allocate(std::uint64_t size_bytes, StreamId stream) {
  if (size_bytes == 0) return nullptr;
  if (size_bytes > config_.arena_virtual_bytes || size_bytes > kMaxRequestBytes) {
    ++stats_.num_ooms;
    source_.throw_oom(size_bytes, "larger than the arena's virtual space (arena_virtual_bytes) or 256 TiB");
  }
  const std::uint64_t rounded = round_up(size_bytes, kRoundBytes);
  source_.earn();
  source_.begin(stream);
  Arena* arena_ptr = nullptr;
  try {
    arena_ptr = &arenas_.get(rounded <= config_.small_request_max_bytes, stream);
  } catch (const OutOfMemoryError& e) {
    ++stats_.num_ooms;
    source_.throw_oom(size_bytes, std::string("no address space for a new arena: ") + e.what());
  }
  Arena& arena = *arena_ptr;
  Placer::Placement at = placer_.choose(arena, rounded);
  if (at.range.size_bytes == 0) {
    ++stats_.num_ooms;
    source_.throw_oom(size_bytes, "no free virtual range large enough in the arena");
  }
  // A request the cap can never hold (its new pages plus the pages blocks use now exceed it) fails before any
  // memory is created or moved for it, so it leaves nothing behind.
  if (source_.cap_bytes() != 0 &&
      at.cost.unmapped + use_.used_pages() > page_.pages_in(source_.cap_bytes()) + peer_room_pages()) {
    ++stats_.num_ooms;
    source_.throw_oom(size_bytes, "the cap would be exceeded");
  }
  const PageNumber first = first_page(at.offset), last = last_page(at.offset, rounded);
  // A block that would strand much of an idle chunk gets the chunk re-cut (a move, within the move budget).
  if (at.cost.pinned_waste != Pages{0} && source_.recut(arena, first, last, at.cost.pinned_waste) != 0) {
    at.cost = placer_.cost_of(arena, first, last);
  }
  const PieceId piece = arena.free.take(at.range, at.offset, rounded);
  std::uint64_t dropped = 0;  // standby mappings unmapped in the range: their pages are stitched anew
  if (at.cost.standby != 0) {  // the Placer's walk counted them: no second walk where there are none
    try {
      dropped = take_standby(arena, first, last);
    } catch (...) {
      use_.restore_taken(arena);  // idle chunks moved here stay here, idle as they were
      arena.free.give(piece);
      throw;
    }
  }
  use_.use(arena, first, last);  // first, so that no chunk of the range is evicted to back the rest
  if (at.cost.unmapped == Pages{0} && dropped == 0) {
    ++stats_.stitch_reuses;
  } else {
    try {
      stats_.stitched_chunks += stitch(arena, first, last, size_bytes);
      ++stats_.stitches;
    } catch (const OutOfMemoryError&) {
      noted(arena, use_.unuse_partly_mapped(arena, first, last));
      arena.free.give(piece);
      ++stats_.num_ooms;
      update_inactive_split();
      throw;
    } catch (...) {
      noted(arena, use_.unuse_partly_mapped(arena, first, last));
      arena.free.give(piece);
      update_inactive_split();
      throw;
    }
  }
  return place(arena, piece, at.offset, rounded, size_bytes, stream);
}

void* StitchingAllocator::place(Arena& arena, PieceId piece, std::uint64_t offset, std::uint64_t rounded,
                                std::uint64_t requested, StreamId stream) {
  const std::uintptr_t address = arena.base + offset;
  blocks_.insert(address, rounded, requested, stream, BlockPlace{arena.id, piece, offset, arena.generation});
  ++arena.blocks;
  source_.note_allocated(static_cast<std::uint64_t>(stats_.allocated_bytes.current));
  update_inactive_split();
  return reinterpret_cast<void*>(address);
}

std::uint64_t StitchingAllocator::stitch(Arena& arena, PageNumber first, PageNumber last, std::uint64_t requested) {
  runs_.clear();
  arena.pages.for_each_gap(first, last, [&](PageNumber p, Pages n) { runs_.emplace_back(p, n); });
  // Grow-ahead: a run that ends the block's range, followed by unmapped pages, is backed up to grow_pages at
  // once (PyTorch's allocator likewise gives requests under 10 MiB a 20 MiB segment): the next blocks placed
  // after this one find their pages mapped, and the pool grows by a few large chunks, not many small ones.
  // Within the cap and away from it; a grown run the device cannot back is stitched again at the block's size.
  const Pages grow_pages = arena.small ? Pages{1} : grow_pages_;
  const auto [run_first, run_pages] = runs_.back();
  Pages grown_pages = run_pages;
  if (run_first + run_pages - Pages{1} == last && run_pages < grow_pages) {
    const PageNumber arena_end = PageNumber{0} + page_.pages_in(arena.virtual_bytes);  // past its last page
    const PageNumber limit = std::min(arena.pages.next_mapped_after(last, run_first + grow_pages), arena_end);
    const Pages candidate = std::min(grow_pages, limit - run_first);
    if (source_.cap_allows(candidate) && !source_.near_cap(candidate) && store_.peer_bytes() == 0) {
      grown_pages = candidate;
    }
  }
  // Chunks of at most 1/chunks_per_block of the block (at least a page) and of max_chunk_bytes: what a smaller
  // block later covers in part strands little; a block past max_chunk_bytes x kMaxChunksPerBlock gets larger
  // chunks, so that it maps in a bounded number of chunks (ChunkSource::chunk_limit).
  const Pages limit = source_.chunk_limit(last - first + Pages{1});
  std::uint64_t chunks = 0;
  for (std::size_t i = 0; i + 1 < runs_.size(); ++i) {
    chunks += stitch_run(arena, runs_[i].first, runs_[i].second, first, last, limit, requested);
  }
  if (grown_pages == run_pages) return chunks + stitch_run(arena, run_first, run_pages, first, last, limit, requested);
  try {
    return chunks + stitch_run(arena, run_first, grown_pages, first, last, limit, requested);
  } catch (const OutOfMemoryError&) {
    ++stats_.num_alloc_retries;
    return chunks + stitch_run(arena, run_first, run_pages, first, last, limit, requested);
  }
}

std::uint64_t StitchingAllocator::stitch_run(Arena& arena, PageNumber first, Pages pages, PageNumber block_first,
                                             PageNumber block_last, Pages chunk_limit, std::uint64_t requested) {
  Pages done;
  std::uint64_t chunks = 0;
  try {
    while (done < pages) {
      const PageNumber at = first + done;  // pages past block_last are grown ahead: never borrowed
      const Pages block_pages = at <= block_last ? block_last - at + Pages{1} : Pages{0};
      const ChunkId id = obtain_or_borrow(pages - done, chunk_limit, block_pages, requested);
      try {
        stitcher_.map(arena, first + done, id);
      } catch (...) {
        store_.add_free(id);
        throw;
      }
      // Used by the block being placed; grown-ahead chunks too until the run is whole (else the next obtain()
      // could evict one and leave a hole under the run's set_access).
      use_.mapped_for_block(id, block_first, block_last);
      done += store_[id].pages;
      ++chunks;
    }
    stitcher_.grant(arena, first, pages);
    // Chunks grown ahead, wholly past the block, are idle from the start.
    const PageNumber run_last = first + pages - Pages{1};
    if (run_last > block_last) noted(arena, use_.idle_past(arena, block_last, run_last));
  } catch (...) {
    // This run's chunks have no access yet: unmap them back into the free chunks. One that cannot be unmapped
    // gets access instead, so that it is an ordinary chunk once the caller unuses the range (the first failure
    // may have been no backend call at all, the cap, so this can be the only one); should that fail too, a
    // second backend failure in one call, it stays without access.
    std::vector<ChunkId> mapped;
    if (done != Pages{0}) {
      arena.pages.for_each(first, first + done - Pages{1},
                           [&](PageNumber, const PageMap::Entry& e) { mapped.push_back(e.chunk); });
    }
    for (const ChunkId id : mapped) {
      const bool used = use_.used(id);
      const Pages n = store_[id].pages;
      try {
        stitcher_.unmap(arena, id);
      } catch (...) {
        try {
          stitcher_.grant(arena, store_[id].first_page, store_[id].pages);
        } catch (...) {
        }
        continue;
      }
      use_.unmapped(n, used);
      store_.add_free(id);
    }
    // Grown chunks left mapped past the block: the caller unuses only the block's pages.
    if (done != Pages{0} && first + done - Pages{1} > block_last) {
      noted(arena, use_.idle_past(arena, block_last, first + done - Pages{1}));
    }
    throw;
  }
  return chunks;
}

std::uint64_t StitchingAllocator::take_standby(Arena& arena, PageNumber first, PageNumber last) {
  standby_.clear();
  arena.pages.for_each(first, last, [&](PageNumber p, const PageMap::Entry& e) {
    if (!store_[e.chunk].active_at(arena.id, p)) standby_.emplace_back(p, e.chunk);
  });
  std::uint64_t dropped = 0;
  for (const auto& [page, id] : standby_) {
    const Chunk& c = store_[id];
    // The chunk cannot come here while a block uses it, while it is active in this very range (a second standby
    // mapping of it in the range), or while another stream's queued work may still touch it at its active place.
    const bool in_range = c.mapped() && c.arena == arena.id && c.first_page <= last && c.first_page + c.pages > first;
    const bool lagging = c.mapped() && arenas_[c.arena].stream != arena.stream && !source_.safe_to_evict(id);
    if (use_.used(id) || in_range || lagging) {
      source_.unmap_standby(id, arena.id, page);  // throws: what was taken stays taken (ChunkUse::restore_taken)
      ++dropped;
    } else if (c.mapped()) {
      Arena& from = arenas_[c.arena];
      // Its idle tick is the old place's left_tick, which only a fence with stream events reads.
      const std::uint64_t left_tick = fence_.asynchronous() ? use_.idle_since(id) : 0;
      use_.take_idle(from, id);  // the block's from here on
      stitcher_.activate(arena, page, id, &from, left_tick);
    } else {
      store_.take_free(id);
      stitcher_.activate(arena, page, id, nullptr, 0);
      use_.mapped_idle(arena, id);
    }
  }
  return dropped;
}

std::uint64_t StitchingAllocator::handover_tick(const Arena& arena) {
  // Without stream events nothing runs asynchronously: every tick is safe at once. With them, the newest idle
  // tick safe covers every page (standby mappings left at ticks no newer); else the stream must have drained.
  if (fence_.asynchronous() && arena.last_idle_tick != 0 && !source_.tick_safe(arena, arena.last_idle_tick) &&
      !fence_.stream_idle(arena.stream)) {
    return 0;
  }
  ++stats_.arena_handovers;  // ArenaSet takes the first arena that may pass
  return use_.next_tick();
}

bool StitchingAllocator::unmap_arena(Arena& arena) {
  std::vector<std::pair<PageNumber, ChunkId>> entries;
  bool safe = true;
  arena.pages.for_all([&](PageNumber p, const PageMap::Entry& e) {
    entries.emplace_back(p, e.chunk);
    safe = safe && (store_[e.chunk].active_at(arena.id, p) ? source_.safe_to_evict(e.chunk)
                                                          : source_.standby_safe(e.chunk, arena.id, p));
  });
  if (!safe) return false;
  // Throws Error: the arena is kept, what was evicted is free memory, what was unmapped is gone.
  for (const auto& [page, c] : entries) {
    if (store_[c].active_at(arena.id, page)) {
      source_.evict(c);
    } else {
      source_.unmap_standby(c, arena.id, page);  // safe: checked above
    }
  }
  return true;
}

void StitchingAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  blocks_.release(ptr, policy::FreeCall::kDeallocate, [this](std::uintptr_t, const Block& b) { give_back(b); });
}

void StitchingAllocator::begin_deferred_free(void* ptr) {
  if (ptr == nullptr) return;
  blocks_.begin_deferred_free(ptr);
}

void StitchingAllocator::end_deferred_free(void* ptr) {
  if (ptr == nullptr) return;
  blocks_.release(ptr, policy::FreeCall::kEndDeferredFree, [this](std::uintptr_t, const Block& b) { give_back(b); });
}

void StitchingAllocator::give_back(const Block& b) {
  Arena& arena = arenas_[b.arena];
  // A kept block (its arena passed to another stream with it: ArenaSet): its range and pages are about to serve
  // the arena's new stream, whose order says nothing of the block's own stream's queued work.
  if (b.stream != arena.stream && fence_.asynchronous()) wait_for_kept_stream(b.stream);
  --arena.blocks;
  if (b.generation != arena.generation) --arena.kept_blocks;
  noted(arena, use_.unuse(arena, first_page(b.offset), last_page(b.offset, b.size_bytes)));
  arena.free.give(b.piece);
  if (config_.max_idle_mapped_bytes != 0) trim_idle(config_.max_idle_mapped_bytes);
  update_inactive_split();
}

void StitchingAllocator::wait_for_kept_stream(StreamId stream) {
  try {
    if (fence_.stream_idle(stream)) return;  // the usual case: a finished stream's workspace, freed much later
    source_.wait_for_stream(stream, use_.next_tick());
  } catch (const BackendError&) {
    // The stream may be gone (destroyed): wait for every stream's work. When even that fails, the context has a
    // sticky error and runs no queued work any more: nothing can touch the range, and a free must not throw.
    try {
      fence_.wait_all(use_.next_tick());
    } catch (const BackendError&) {
    }
  }
}

void StitchingAllocator::trim_idle(std::uint64_t max_idle_bytes) {
  // Best effort, since a free must not fail once its block is released: a chunk whose unmap fails stays idle
  // and queued, and the next free trims again. Only chunks no queued work can touch are evicted.
  try {
    while (use_.idle_chunks() != 0 && page_.bytes_of(use_.idle_pages()) > max_idle_bytes) {
      const ChunkId oldest = use_.oldest_idle();
      if (!source_.safe_to_evict(oldest)) break;
      source_.evict(oldest);
    }
  } catch (const BackendError&) {
  } catch (const OutOfMemoryError&) {
  }
}

void StitchingAllocator::empty_cache() {
  if (use_.idle_chunks() != 0) fence_.wait_all(use_.next_tick());
  while (use_.idle_chunks() != 0) {
    const ChunkId oldest = use_.oldest_idle();
    source_.evict(oldest);  // throws: the rest stays cached, consistent
  }
  arenas_.retire_empty(false);  // every chunk is safe now (waited for above)
  source_.release_all_free();
  source_.device_has_room();
  update_inactive_split();
}

void StitchingAllocator::set_cap_bytes(std::uint64_t cap_bytes) { source_.set_cap_bytes(cap_bytes); }

void StitchingAllocator::update_inactive_split() {
  Gauge& g = stats_.inactive_split_bytes;
  g.current = static_cast<std::int64_t>(page_.bytes_of(use_.used_pages())) - stats_.active_bytes.current;
  g.peak = std::max(g.peak, g.current);
}

Stats StitchingAllocator::stats() const {
  Stats s = stats_;
  s.backend_calls = backend_.counters();
  s.lake_refusals = peers_->refusals();
  s.stream_event_calls = fence_.driver_calls();
  return s;
}

std::vector<BlockInfo> StitchingAllocator::blocks() const {
  std::vector<BlockInfo> out;
  out.reserve(blocks_.size());
  for (const auto& [address, b] : blocks_) {
    out.push_back({address, b.size_bytes, b.requested_bytes, b.stream, b.pending_free});
  }
  std::sort(out.begin(), out.end(), [](const BlockInfo& a, const BlockInfo& b) { return a.address < b.address; });
  return out;
}

std::optional<BlockInfo> StitchingAllocator::find_block(const void* ptr) const {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const Block* b = blocks_.find(address);
  if (b == nullptr) return std::nullopt;
  return BlockInfo{address, b->size_bytes, b->requested_bytes, b->stream, b->pending_free};
}


}  // namespace gmlake::engine
