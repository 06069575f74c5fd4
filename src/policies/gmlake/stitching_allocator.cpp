#include "stitching_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <stdexcept>
#include <set>
#include <span>
#include <string>
#include <tuple>

#include "gmlake/error.h"
#include "gmlake/units.h"
#include "../common/teardown.h"

namespace gmlake::engine {
namespace {

std::string hex(std::uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

[[noreturn]] void broken(const std::string& what) { throw std::logic_error("gmlake invariant broken: " + what); }

}  // namespace

StitchingAllocator::StitchingAllocator(const Config& config, Backend& backend, StreamEvents* events)
    : config_(config),
      backend_(backend),
      chunk_shift_(static_cast<unsigned>(std::countr_zero(config.chunk_bytes))),
      cap_bytes_(config.cap_bytes),
      fence_(events) {
  config_.validate();
  if (events != nullptr && config_.cross_stream_reuse) {
    throw Error(ErrorCode::kConfig,
                "gmlake config: cross_stream_reuse: must be false with asynchronous streams (each stream keeps its "
                "own arenas; chunks move between streams once the freeing stream's work has finished)");
  }
  if (config_.chunk_bytes % backend.granularity_bytes() != 0) {
    throw Error(ErrorCode::kConfig, "gmlake config: chunk_bytes: " + std::to_string(config_.chunk_bytes) +
                                        " is not a multiple of the backend granularity " +
                                        std::to_string(backend.granularity_bytes()));
  }
}

StitchingAllocator::~StitchingAllocator() {
  // Teardown must not throw: every backend call is tried twice (teardown.h); what fails twice stays with the
  // backend.
  try {
    fence_.wait_all(idle_.next_tick());  // no queued work may still touch what is unmapped below
  } catch (...) {
  }
  // Every mapping of a chunk (its page's and stale ones) is unmapped before the chunk is released; a chunk
  // with a mapping that could not be unmapped stays with the backend.
  absl::flat_hash_map<std::uint64_t, bool> still_mapped;  // chunk -> some mapping of it failed to unmap
  for (auto& arena : arenas_) {
    for (std::uint64_t p = 0; p < arena->pages.size(); ++p) {
      Page& page = arena->pages.at(p);
      if (!page.chunk.value) continue;
      const bool unmapped = attempt_twice([&] { backend_.unmap(page_address(*arena, p), config_.chunk_bytes); });
      still_mapped[page.chunk.value] |= !unmapped;
      page.chunk = {};
    }
  }
  for (const auto& [handle, mapped] : still_mapped) {
    if (!mapped) free_chunks_.push_back(ChunkHandle{handle});
  }
  for (ChunkHandle h : free_chunks_) attempt_twice([&] { backend_.release(h); });
  for (auto& arena : arenas_) attempt_twice([&] { backend_.address_free(arena->base, arena->virtual_bytes); });
}

Arena& StitchingAllocator::arena_for(bool small, StreamId stream) {
  std::uint32_t* slot;
  if (config_.cross_stream_reuse) {
    slot = &shared_arena_[small];
  } else {
    auto [it, inserted] = stream_arena_.try_emplace({stream, small}, UINT32_MAX);
    slot = &it->second;
  }
  if (*slot == UINT32_MAX) {
    const std::uintptr_t base = backend_.reserve(config_.arena_virtual_bytes);
    const auto id = static_cast<std::uint32_t>(arenas_.size());
    const StreamId arena_stream = config_.cross_stream_reuse ? 0 : stream;
    arenas_.push_back(std::make_unique<Arena>(id, arena_stream, base, config_.arena_virtual_bytes));
    *slot = id;
  }
  return *arenas_[*slot];
}

bool StitchingAllocator::fully_mapped(const Arena& arena, std::uint64_t offset, std::uint64_t size_bytes) {
  const std::uint64_t first = offset >> chunk_shift_;
  const std::uint64_t last = (offset + size_bytes - 1) >> chunk_shift_;
  // Pages past the table's end are unmapped; they come after every existing page of the range, so checking
  // the existing ones first, in order, asks can_take_back exactly what a page-by-page walk would.
  const std::span<const Page> pages = arena.pages.existing(first, last);
  for (const Page& page : pages) {
    if (!page.chunk.value) return false;
    if (page.stale && !can_take_back(page)) return false;
  }
  return pages.size() == last - first + 1;
}

bool StitchingAllocator::can_take_back(const Page& page) {
  const PageRef owner_ref = chunk_states_.at(page.chunk.value).owner;
  const Page& owner = page_of(owner_ref);
  if (owner.users != 0) return false;
  return !fence_.asynchronous() || fence_.safe(arenas_[owner_ref.arena]->stream, owner.idle_since);
}

void StitchingAllocator::take_back_or_drop(Arena& arena, std::uint64_t p) {
  Page& page = arena.pages.at(p);
  const PageRef ref{arena.id, static_cast<std::uint32_t>(p)};
  if (!can_take_back(page)) {
    drop_stale(ref);
    ++take_back_misses_;
    return;
  }
  // The owner is idle and its queued work has finished, exactly what evicting it would need: it turns stale
  // (its idle-queue entry goes stale with it) and this page owns the chunk again, with no backend call.
  ChunkState& state = chunk_states_.at(page.chunk.value);
  Page& owner = page_of(state.owner);
  owner.stale = true;
  --idle_pages_;
  auto& stale = state.stale;
  stale.erase(std::find(stale.begin(), stale.end(), ref));
  stale.push_back(state.owner);  // the former owner is now the newest stale mapping
  state.owner = ref;
  page.stale = false;
  ++take_backs_;
}

void StitchingAllocator::drop_stale(PageRef ref) {
  Page& page = page_of(ref);
  backend_.unmap(page_address(*arenas_[ref.arena], ref.page), config_.chunk_bytes);  // on failure: unchanged
  auto& stale = chunk_states_.at(page.chunk.value).stale;
  stale.erase(std::find(stale.begin(), stale.end(), ref));
  page.chunk = {};
  page.stale = false;
  --stale_pages_;
}

void StitchingAllocator::drop_all_stale(ChunkHandle chunk) {
  const auto& stale = chunk_states_.at(chunk.value).stale;
  while (!stale.empty()) drop_stale(stale.front());
}

void StitchingAllocator::orphan(ChunkHandle chunk) {
  const auto it = chunk_states_.find(chunk.value);
  if (it->second.stale.empty()) {
    chunk_states_.erase(it);
    free_chunks_.push_back(chunk);
    return;
  }
  // Its newest stale page owns it again, as an idle page. It was safe when the chunk left it and nothing used it
  // since; a new tick only makes the fence more careful.
  const PageRef ref = it->second.stale.back();
  it->second.stale.pop_back();
  it->second.owner = ref;
  Page& page = page_of(ref);
  page.stale = false;
  --stale_pages_;
  ++idle_pages_;
  page.idle_since = idle_.next_tick();
  idle_.push(ref.arena, ref.page, 1, page.idle_since);
  fence_.note_idle(arenas_[ref.arena]->stream, page.idle_since);
}

std::uint64_t StitchingAllocator::unmapped_pages(const Arena& arena, std::uint64_t offset,
                                                std::uint64_t size_bytes) const {
  std::uint64_t n = 0;
  const std::uint64_t last = (offset + size_bytes - 1) >> chunk_shift_;
  for (std::uint64_t p = offset >> chunk_shift_; p <= last; ++p) {
    const Page* page = arena.pages.find(p);
    n += page == nullptr || !page->chunk.value;
  }
  return n;
}

void* StitchingAllocator::allocate(std::uint64_t size_bytes, StreamId stream) {
  if (size_bytes == 0) return nullptr;
  if (size_bytes > config_.arena_virtual_bytes || size_bytes > kMaxRequestBytes) {
    ++stats_.num_ooms;
    throw_oom(size_bytes, "larger than the arena's virtual space (arena_virtual_bytes) or 256 TiB");
  }
  const std::uint64_t rounded = round_up(size_bytes, kRoundBytes);
  Arena* arena_ptr = nullptr;
  try {
    arena_ptr = &arena_for(rounded <= config_.small_request_max_bytes, stream);
  } catch (const OutOfMemoryError& e) {
    ++stats_.num_ooms;
    throw_oom(size_bytes, std::string("no address space for a new arena: ") + e.what());
  }
  Arena& arena = *arena_ptr;
  auto mapped_fit = [&](const FreeRange& r) { return fully_mapped(arena, r.offset, rounded); };
  const FreeRange range = arena.free.best_fit(rounded, config_.fit_candidates, mapped_fit).range;
  if (range.size_bytes == 0) {
    ++stats_.num_ooms;
    throw_oom(size_bytes, "no free virtual range large enough in the arena");
  }
  arena.free.take(range, range.offset, rounded);
  std::uint64_t mapped = 0;
  try {
    mapped = back_pages(arena, range.offset, rounded, size_bytes);
  } catch (const OutOfMemoryError&) {
    arena.free.give(range.offset, rounded);
    ++stats_.num_ooms;
    update_inactive_split();
    throw;
  } catch (...) {
    arena.free.give(range.offset, rounded);
    update_inactive_split();
    throw;
  }
  if (mapped) {
    ++stats_.stitches;
    stats_.stitched_chunks += mapped;
  } else {
    ++stats_.stitch_reuses;
  }
  return place(arena, range.offset, rounded, size_bytes, stream);
}

void* StitchingAllocator::place(Arena& arena, std::uint64_t offset, std::uint64_t rounded, std::uint64_t requested,
                                StreamId stream) {
  const std::uintptr_t address = arena.base + offset;
  blocks_.emplace(address, Block{arena.id, false, offset, rounded, requested, stream});
  stats_.allocated_bytes.increase(static_cast<std::int64_t>(rounded));
  allocated_high_bytes_ = std::max(allocated_high_bytes_, static_cast<std::uint64_t>(stats_.allocated_bytes.current));
  stats_.active_bytes.increase(static_cast<std::int64_t>(rounded));
  stats_.requested_bytes.increase(static_cast<std::int64_t>(requested));
  ++stats_.num_allocs;
  update_inactive_split();
  return reinterpret_cast<void*>(address);
}

std::uint64_t StitchingAllocator::back_pages(Arena& arena, std::uint64_t offset, std::uint64_t size_bytes,
                                             std::uint64_t requested) {
  const std::uint64_t first = offset >> chunk_shift_;
  const std::uint64_t last = (offset + size_bytes - 1) >> chunk_shift_;
  // Counted in locals, added once: the compiler must otherwise assume a page write may change the members.
  std::uint64_t empty = 0, stale = 0, newly_used = 0, idle_taken = 0;
  Page* pages = arena.pages.span(first, last);
  for (std::uint64_t i = 0; i <= last - first; ++i) {
    Page& page = pages[i];
    empty += page.chunk.value == 0;
    stale += page.stale;
    if (page.users++ != 0) continue;
    ++newly_used;
    idle_taken += page.chunk.value != 0 && !page.stale;  // its idle-queue entry goes stale
  }
  used_pages_ += newly_used;
  idle_pages_ -= idle_taken;
  if (empty == 0 && stale == 0) return 0;
  std::uint64_t mapped = 0;
  try {
    // Stale pages first, once every page of the range is used (so none takes its chunk from another).
    for (std::uint64_t p = first; stale != 0 && p <= last; ++p) {
      if (arena.pages.at(p).stale) {
        take_back_or_drop(arena, p);
        --stale;
      }
    }
    for (std::uint64_t p = first; p <= last;) {
      if (arena.pages.at(p).chunk.value) {
        ++p;
        continue;
      }
      const std::uint64_t run_start = p;
      while (p <= last && !arena.pages.at(p).chunk.value) ++p;
      map_run(arena, run_start, p - run_start, requested);
      mapped += p - run_start;
    }
  } catch (...) {
    unuse_pages(arena, first, last);
    throw;
  }
  return mapped;
}

void StitchingAllocator::map_run(Arena& arena, std::uint64_t first_page, std::uint64_t count, std::uint64_t requested) {
  std::uint64_t done = 0;
  auto undo = [&] {
    for (std::uint64_t i = 0; i < done; ++i) {
      Page& page = arena.pages.at(first_page + i);
      const std::uintptr_t address = page_address(arena, first_page + i);
      try {
        backend_.unmap(address, config_.chunk_bytes);
      } catch (...) {
        // Still mapped: give it access, so that it is an ordinary idle page once back_pages unuses it. (The
        // first failure may have been no backend call at all, the cap, so this can be the only one.) Should
        // that fail too, a second backend failure in one call, the page stays without access.
        try {
          backend_.set_access(address, config_.chunk_bytes);
        } catch (...) {
        }
        continue;
      }
      const ChunkHandle chunk = page.chunk;
      page.chunk = {};
      orphan(chunk);
    }
  };
  try {
    for (; done < count; ++done) {
      const PageRef to{arena.id, static_cast<std::uint32_t>(first_page + done)};
      const Source source = obtain_chunk(requested);
      if (source.from.valid()) {
        // Aliasing: the oldest idle page keeps its mapping, stale, and the chunk is mapped here too. Room is
        // made first (the chunk's oldest stale mappings are unmapped); nothing moves unless the map succeeds.
        ChunkState& state = chunk_states_.at(source.chunk.value);
        while (state.stale.size() + 1 >= config_.chunk_mappings) drop_stale(state.stale.front());
        backend_.map(page_address(arena, to.page), config_.chunk_bytes, source.chunk);
        idle_.pop_oldest();
        Page& from = page_of(source.from);
        from.stale = true;
        --idle_pages_;
        ++stale_pages_;
        state.stale.push_back(source.from);
        state.owner = to;
        ++stats_.evictions;
      } else {
        try {
          backend_.map(page_address(arena, to.page), config_.chunk_bytes, source.chunk);
          chunk_states_[source.chunk.value].owner = to;
        } catch (...) {
          free_chunks_.push_back(source.chunk);
          throw;
        }
      }
      arena.pages.at(to.page).chunk = source.chunk;
    }
    backend_.set_access(page_address(arena, first_page), count << chunk_shift_);
  } catch (...) {
    undo();
    throw;
  }
}

StitchingAllocator::Source StitchingAllocator::obtain_chunk(std::uint64_t requested) {
  if (free_chunks_.empty() && idle_pages_ != 0) {
    if (within_headroom()) {
      ChunkHandle created;
      if (try_create_chunk(&created)) return {created, {}};
      // The device is full (within_headroom checked the cap): evict below instead, as PyTorch retries a failed
      // cudaMalloc from its cache (counted as num_alloc_retries), and ask no more until empty_cache.
      ++stats_.num_alloc_retries;
      headroom_exhausted_ = true;
    }
    const IdlePage oldest = oldest_idle();
    const StreamFence::Readiness readiness = fence_.readiness(oldest.stream, oldest.idle_since);
    if (readiness != StreamFence::Readiness::kSafe) {
      // Uncovered: only draining the stream would tell, so grow if allowed, up to lag_grow_chunks chunks in a
      // row (so the device's lag raises the peak by a bounded amount, not by whatever the lag is). Covered:
      // waiting for the mark is cheap, since the work queued after it keeps the device busy.
      ChunkHandle created;
      if (readiness == StreamFence::Readiness::kUncovered && lag_grown_chunks_ < config_.lag_grow_chunks &&
          try_create_chunk(&created)) {
        ++lag_grown_chunks_;
        return {created, {}};
      }
      fence_.wait_safe(oldest.stream, oldest.idle_since, idle_.next_tick());
      ++stats_.fence_waits;
    }
    lag_grown_chunks_ = 0;  // the oldest idle page is safe now: the device caught up
    if (aliasing()) {
      return {arenas_[oldest.ref.arena]->pages.at(oldest.ref.page).chunk, oldest.ref};
    }
    evict_oldest_idle();
  }
  if (!free_chunks_.empty()) {
    const ChunkHandle h = free_chunks_.back();
    free_chunks_.pop_back();
    return {h, {}};
  }
  ChunkHandle h;
  if (!cap_allows_chunk()) throw_oom(requested, "the cap would be exceeded");
  if (!try_create_chunk(&h)) throw_oom(requested, std::string(backend_.name()) + " backend has no physical memory left");
  return {h, {}};
}

bool StitchingAllocator::cap_allows_chunk() const {
  return cap_bytes_ == 0 ||
         static_cast<std::uint64_t>(stats_.reserved_bytes.current) + config_.chunk_bytes <= cap_bytes_;
}

bool StitchingAllocator::within_headroom() const {
  if (config_.headroom_permille == 0 || headroom_exhausted_ || !cap_allows_chunk()) return false;
  const std::uint64_t target_bytes = allocated_high_bytes_ + allocated_high_bytes_ / 1000 * config_.headroom_permille;
  return static_cast<std::uint64_t>(stats_.reserved_bytes.current) + config_.chunk_bytes <= target_bytes;
}

bool StitchingAllocator::try_create_chunk(ChunkHandle* out) {
  if (!cap_allows_chunk()) return false;
  try {
    *out = backend_.create(config_.chunk_bytes);
  } catch (const OutOfMemoryError&) {
    return false;
  }
  stats_.reserved_bytes.increase(static_cast<std::int64_t>(config_.chunk_bytes));
  ++stats_.chunks_created;
  return true;
}

StitchingAllocator::IdlePage StitchingAllocator::oldest_idle() {
  const PageRef ref = idle_.oldest(page_tables());
  if (!ref.valid()) broken("idle page count is positive but the idle queue has no current entry");
  const Arena& arena = *arenas_[ref.arena];
  return {ref, arena.stream, arena.pages.find(ref.page)->idle_since};
}

bool StitchingAllocator::oldest_idle_is_safe() {
  if (!fence_.asynchronous()) return true;
  const IdlePage oldest = oldest_idle();
  return fence_.safe(oldest.stream, oldest.idle_since);
}

void StitchingAllocator::evict_oldest_idle() {
  const PageRef ref = oldest_idle().ref;
  Arena& arena = *arenas_[ref.arena];
  Page& page = arena.pages.at(ref.page);
  drop_all_stale(page.chunk);  // a free chunk is mapped nowhere; on failure the page is still queued, unchanged
  backend_.unmap(page_address(arena, ref.page), config_.chunk_bytes);  // on failure: still queued, unchanged
  idle_.pop_oldest();
  chunk_states_.erase(page.chunk.value);
  free_chunks_.push_back(page.chunk);
  page.chunk = {};
  --idle_pages_;
  ++stats_.evictions;
}

void StitchingAllocator::unuse_pages(Arena& arena, std::uint64_t first_page, std::uint64_t last_page) {
  Page* pages = arena.pages.span(first_page, last_page);
  const std::uint64_t tick = idle_.next_tick();
  std::uint64_t run_start = 0, run_count = 0;  // the run of pages turning idle, queued as one entry
  std::uint64_t unused = 0, turned_idle = 0;    // added to the members once, as in back_pages
  for (std::uint64_t i = 0; i <= last_page - first_page; ++i) {
    Page& page = pages[i];
    if (--page.users != 0) continue;
    ++unused;
    if (page.chunk.value == 0 || page.stale) continue;  // stale: only while back_pages fails
    ++turned_idle;
    page.idle_since = tick;
    if (run_count != 0 && run_start + run_count == first_page + i) {
      ++run_count;
    } else {
      if (run_count != 0) idle_.push(arena.id, run_start, run_count, tick);
      run_start = first_page + i;
      run_count = 1;
    }
  }
  used_pages_ -= unused;
  idle_pages_ += turned_idle;
  if (run_count != 0) {
    idle_.push(arena.id, run_start, run_count, tick);
    fence_.note_idle(arena.stream, tick);
  }
  idle_.compact_if_stale(idle_pages_, page_tables());
}

StitchingAllocator::BlockMap::iterator StitchingAllocator::find_live(void* ptr, const char* call) {
  auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == blocks_.end() || it->second.pending_free) {
    ++stats_.invalid_frees;
    throw Error(ErrorCode::kInvalidPointer,
                std::string("gmlake: ") + call + "(" + hex(reinterpret_cast<std::uintptr_t>(ptr)) +
                    "): not a live block (never allocated here, already freed, or an interior pointer)");
  }
  return it;
}

void StitchingAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  release_block(find_live(ptr, "deallocate"));
}

void StitchingAllocator::begin_deferred_free(void* ptr) {
  if (ptr == nullptr) return;
  Block& b = find_live(ptr, "begin_deferred_free")->second;
  b.pending_free = true;
  stats_.allocated_bytes.decrease(static_cast<std::int64_t>(b.size_bytes));
  stats_.requested_bytes.decrease(static_cast<std::int64_t>(b.requested_bytes));
  ++stats_.num_frees;
}

void StitchingAllocator::end_deferred_free(void* ptr) {
  if (ptr == nullptr) return;
  auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == blocks_.end() || !it->second.pending_free) {
    ++stats_.invalid_frees;
    throw Error(ErrorCode::kInvalidPointer, "gmlake: end_deferred_free(" + hex(reinterpret_cast<std::uintptr_t>(ptr)) +
                                                "): no deferred free is pending for this pointer");
  }
  release_block(it);
}

void StitchingAllocator::release_block(BlockMap::iterator it) {
  const Block b = it->second;
  blocks_.erase(it);
  return_range(b.arena, b.offset, b.size_bytes);
  const auto size = static_cast<std::int64_t>(b.size_bytes);
  stats_.active_bytes.decrease(size);
  if (!b.pending_free) {
    stats_.allocated_bytes.decrease(size);
    stats_.requested_bytes.decrease(static_cast<std::int64_t>(b.requested_bytes));
    ++stats_.num_frees;
  }
  update_inactive_split();
}

void StitchingAllocator::return_range(std::uint32_t arena_id, std::uint64_t offset, std::uint64_t size_bytes) {
  Arena& arena = *arenas_[arena_id];
  unuse_pages(arena, offset >> chunk_shift_, (offset + size_bytes - 1) >> chunk_shift_);
  arena.free.give(offset, size_bytes);
  if (config_.max_idle_mapped_bytes != 0) trim_idle(config_.max_idle_mapped_bytes);
}

void StitchingAllocator::trim_idle(std::uint64_t max_idle_bytes) {
  // Best effort, since a free must not fail once its block is released: a page whose unmap fails stays idle
  // and queued, and the next free trims again. Only pages no queued work can touch are evicted.
  try {
    while (idle_pages_ != 0 && (idle_pages_ << chunk_shift_) > max_idle_bytes && oldest_idle_is_safe()) {
      evict_oldest_idle();
    }
  } catch (const BackendError&) {
  } catch (const OutOfMemoryError&) {
  }
}

void StitchingAllocator::release_free_chunks() {
  while (!free_chunks_.empty()) {
    backend_.release(free_chunks_.back());
    free_chunks_.pop_back();
    stats_.reserved_bytes.decrease(static_cast<std::int64_t>(config_.chunk_bytes));
    ++stats_.chunks_released;
  }
}

void StitchingAllocator::empty_cache() {
  if (idle_pages_ != 0) fence_.wait_all(idle_.next_tick());
  while (idle_pages_ != 0) evict_oldest_idle();
  // The stale mappings of chunks in use too: nothing is cached after empty_cache.
  for (const auto& [handle, state] : chunk_states_) drop_all_stale(ChunkHandle{handle});
  release_free_chunks();
  headroom_exhausted_ = false;  // the device has room again
  update_inactive_split();
}

void StitchingAllocator::set_cap_bytes(std::uint64_t cap_bytes) {
  cap_bytes_ = cap_bytes;
  if (cap_bytes_ == 0) return;
  release_free_chunks();
  if (static_cast<std::uint64_t>(stats_.reserved_bytes.current) > cap_bytes_ && idle_pages_ != 0) {
    fence_.wait_all(idle_.next_tick());
  }
  while (static_cast<std::uint64_t>(stats_.reserved_bytes.current) > cap_bytes_ && idle_pages_ != 0) {
    evict_oldest_idle();
    release_free_chunks();
  }
}

void StitchingAllocator::update_inactive_split() {
  Gauge& g = stats_.inactive_split_bytes;
  g.current = static_cast<std::int64_t>(used_pages_ << chunk_shift_) - stats_.active_bytes.current;
  g.peak = std::max(g.peak, g.current);
}

void StitchingAllocator::throw_oom(std::uint64_t requested, const std::string& reason) {
  throw OutOfMemoryError(requested, static_cast<std::uint64_t>(stats_.reserved_bytes.current),
                         static_cast<std::uint64_t>(stats_.allocated_bytes.current), cap_bytes_, reason);
}

Stats StitchingAllocator::stats() const {
  Stats s = stats_;
  s.backend_calls = backend_.counters();
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
  const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == blocks_.end()) return std::nullopt;
  const Block& b = it->second;
  return BlockInfo{it->first, b.size_bytes, b.requested_bytes, b.stream, b.pending_free};
}

void StitchingAllocator::check_invariants() const {
  // Each arena is tiled exactly by its free ranges and its live and pending blocks.
  std::vector<std::vector<FreeRange>> tiles(arenas_.size());
  std::vector<std::vector<std::uint32_t>> users(arenas_.size());
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    arenas_[a]->free.check_invariants();
    tiles[a] = arenas_[a]->free.ranges();
    users[a].assign(arenas_[a]->pages.size(), 0);
  }
  auto use = [&](std::uint32_t a, std::uint64_t offset, std::uint64_t size, const char* what) {
    tiles.at(a).push_back({offset, size});
    for (std::uint64_t p = offset >> chunk_shift_; p <= (offset + size - 1) >> chunk_shift_; ++p) {
      if (p >= users[a].size()) broken(std::string(what) + " lies beyond its arena's page table");
      ++users[a][p];
    }
  };
  std::int64_t allocated = 0, active = 0, requested = 0;
  for (const auto& [address, b] : blocks_) {
    const Arena& arena = *arenas_.at(b.arena);
    if (address != arena.base + b.offset) broken("block address differs from its arena offset");
    if (b.offset % kRoundBytes || b.size_bytes % kRoundBytes || b.size_bytes < b.requested_bytes)
      broken("block " + hex(address) + " is not 512 B aligned or smaller than requested");
    use(b.arena, b.offset, b.size_bytes, "a block");
    active += static_cast<std::int64_t>(b.size_bytes);
    if (!b.pending_free) {
      allocated += static_cast<std::int64_t>(b.size_bytes);
      requested += static_cast<std::int64_t>(b.requested_bytes);
    }
  }
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    auto& t = tiles[a];
    std::sort(t.begin(), t.end(), [](const FreeRange& x, const FreeRange& y) { return x.offset < y.offset; });
    std::uint64_t expect = 0;
    for (const FreeRange& r : t) {
      if (r.offset != expect) broken("arena " + std::to_string(a) + ": overlap or gap at offset " + std::to_string(r.offset));
      expect = r.offset + r.size_bytes;
    }
    if (expect != arenas_[a]->virtual_bytes) broken("arena " + std::to_string(a) + " is not tiled to its end");
  }
  // Pages: users recount, used pages mapped with access, idle queue membership.
  std::set<std::pair<std::size_t, std::uint64_t>> queued;
  idle_.for_each_current(page_tables(),
                         [&](std::uint32_t a, std::uint64_t p) { queued.insert({a, p}); });
  std::uint64_t used = 0, idle = 0, mapped = 0, owners = 0, stale = 0;
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    const Arena& arena = *arenas_[a];
    for (std::uint64_t p = 0; p < arena.pages.size(); ++p) {
      const Page& page = *arena.pages.find(p);
      if (page.users != users[a][p]) broken("page users differ from the recount at page " + std::to_string(p));
      if (page.chunk.value) ++mapped;
      // Aliasing: a mapped page owns its chunk (the chunk's state names it) or is stale: unused, and mapped to
      // a chunk that another page owns, with this page among the chunk's stale mappings.
      const PageRef ref{static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(p)};
      const auto state = page.chunk.value ? chunk_states_.find(page.chunk.value) : chunk_states_.end();
      if (page.chunk.value && state == chunk_states_.end()) broken("a mapped page's chunk has no owner");
      if (page.stale) {
        ++stale;
        if (!page.chunk.value) broken("a stale page is not mapped");
        if (page.users) broken("a stale page is used at " + hex(page_address(arena, p)));
        if (state->second.owner == ref) broken("a stale page owns its chunk");
        const auto& list = state->second.stale;
        if (std::count(list.begin(), list.end(), ref) != 1) broken("a stale page is not listed once by its chunk");
      } else if (page.chunk.value) {
        ++owners;
        if (!(state->second.owner == ref)) broken("a mapped page does not own its chunk at " + hex(page_address(arena, p)));
      }
      if (page.users) {
        ++used;
        if (!page.chunk.value) broken("a used page is not mapped");
        if (!backend_.is_accessible(page_address(arena, p), config_.chunk_bytes))
          broken("a used page has no access at " + hex(page_address(arena, p)));
      }
      if (page.idle()) {
        ++idle;
        if (!queued.count({a, p})) broken("idle page " + std::to_string(p) + " is not queued");
      }
    }
  }
  if (used != used_pages_) broken("used page count differs from the recount");
  if (stale != stale_pages_) broken("stale page count differs from the recount");
  if (owners != chunk_states_.size()) broken("owned chunks differ from the pages that own one");
  for (const auto& [handle, state] : chunk_states_) {
    const Page* owner = state.owner.valid() ? arenas_.at(state.owner.arena)->pages.find(state.owner.page) : nullptr;
    if (owner == nullptr || owner->chunk.value != handle || owner->stale) broken("a chunk's owner does not map it");
    if (state.stale.size() + 1 > std::max<std::uint64_t>(config_.chunk_mappings, 1))
      broken("a chunk has more mappings than chunk_mappings");
    if (!aliasing() && !state.stale.empty()) broken("a stale mapping while aliasing is off");
    for (const PageRef r : state.stale) {
      const Page* sp = arenas_.at(r.arena)->pages.find(r.page);
      if (sp == nullptr || !sp->stale || sp->chunk.value != handle) broken("a chunk lists a page that is not its stale mapping");
    }
  }
  for (const ChunkHandle h : free_chunks_) {
    if (chunk_states_.count(h.value)) broken("a free chunk is owned by a page");
  }
  if (backend_.live_mappings() != mapped) broken("backend live mappings differ from the mapped pages");
  if (idle != idle_pages_) broken("idle page count differs from the recount");
  const auto chunk = static_cast<std::int64_t>(config_.chunk_bytes);
  const std::int64_t reserved = static_cast<std::int64_t>(owners + free_chunks_.size()) * chunk;
  if (stats_.reserved_bytes.current != reserved) broken("reserved_bytes differs from the recount");
  if (backend_.live_chunk_bytes() != static_cast<std::uint64_t>(reserved))
    broken("backend live chunk bytes differ from reserved_bytes");
  if (stats_.allocated_bytes.current != allocated) broken("allocated_bytes differs from the recount");
  if (stats_.active_bytes.current != active) broken("active_bytes differs from the recount");
  if (stats_.requested_bytes.current != requested) broken("requested_bytes differs from the recount");
  if (stats_.inactive_split_bytes.current != static_cast<std::int64_t>(used) * chunk - active)
    broken("inactive_split_bytes differs from the recount");
  for (const auto* g : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                        &stats_.requested_bytes, &stats_.inactive_split_bytes}) {
    if (g->peak < g->current) broken("a peak is below its current value");
  }
}

}  // namespace gmlake::engine
