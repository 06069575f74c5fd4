#include "block_allocator.h"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include "gmlake/error.h"
#include "gmlake/units.h"
#include "request_sizing.h"
#include "teardown.h"

namespace gmlake::policy {
namespace {

std::int64_t as_gauge(std::uint64_t bytes) { return static_cast<std::int64_t>(bytes); }

std::uintptr_t page_address(const Segment& segment, std::size_t page) {
  return segment.address + page * segment.page_bytes;
}

// Drops unmapped pages from the end of the table, so that it only spans the mapped prefix.
void trim_pages(Segment& segment) {
  while (!segment.pages.empty() && segment.pages.back().value == 0) segment.pages.pop_back();
}

}  // namespace

BlockAllocator::BlockAllocator(Policy policy, const Config& config, Backend& backend)
    : config_(config),
      backend_(backend),
      cap_bytes_(config.cap_bytes),
      free_{FreeBlockSet(&node_pool_), FreeBlockSet(&node_pool_)},
      live_(InvalidFreeWords::reference(to_string(policy)), stats_) {
  config_.validate();
  require_granularity_multiple(config_.small_segment_bytes, "small_segment_bytes");
  require_granularity_multiple(config_.large_segment_bytes, "large_segment_bytes");
}

void BlockAllocator::require_granularity_multiple(std::uint64_t value_bytes, const char* key) const {
  const std::uint64_t granularity_bytes = backend_.granularity_bytes();
  if (value_bytes % granularity_bytes != 0) {
    throw Error(ErrorCode::kConfig, fmt::format("gmlake config: {}: {} is not a multiple of the {} backend's "
                                                "granularity {}",
                                                key, value_bytes, backend_.name(), granularity_bytes));
  }
}

BlockAllocator::~BlockAllocator() {
  // A destructor must not throw: every backend call is tried twice (teardown.h); what fails twice stays with
  // the backend (live_chunks, live_reservations show it).
  for (auto& entry : segments_) {
    const Segment& segment = *entry.second;
    std::size_t page = 0;
    while (page < segment.pages.size()) {
      std::size_t run = 0;
      while (segment.page_mapped(page + run)) ++run;
      const std::uintptr_t run_address = page_address(segment, page);
      if (run != 0 && attempt_twice([&] { backend_.unmap(run_address, run * segment.page_bytes); })) {
        for (std::size_t i = page; i < page + run; ++i) attempt_twice([&] { backend_.release(segment.pages[i]); });
      }
      page += run + 1;
    }
    attempt_twice([&] { backend_.address_free(segment.address, segment.size_bytes); });
  }
  for (const Parked& c : parked_chunks_) attempt_twice([&] { backend_.release(ChunkHandle{c.start}); });
  for (const Parked& r : parked_ranges_) attempt_twice([&] { backend_.address_free(r.start, r.size_bytes); });
}

// ---------------------------------------------------------------------------------------------------------
// Frees.

void BlockAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  live_.release(ptr, FreeCall::kDeallocate,
                [this](std::uintptr_t, const LiveTable::Block& held) { give_back(held.block); });
}

void BlockAllocator::begin_deferred_free(void* ptr) {
  live_.begin_deferred_free(ptr).block->state = BlockState::kPendingFree;
}

void BlockAllocator::end_deferred_free(void* ptr) {
  live_.release(ptr, FreeCall::kEndDeferredFree,
                [this](std::uintptr_t, const LiveTable::Block& held) { give_back(held.block); });
}

void BlockAllocator::give_back(Block* b) {
  b->requested_bytes = 0;
  b->state = BlockState::kFree;
  release_to_free(b);
}

// ---------------------------------------------------------------------------------------------------------
// Requests.

std::uint64_t BlockAllocator::rounded_or_throw(std::uint64_t size_bytes) {
  const std::optional<std::uint64_t> rounded = round_request_bytes(size_bytes);
  if (!rounded || *rounded > kMaxRequestBytes) throw_oom(size_bytes, "larger than any request served (256 TiB)");
  return *rounded;
}

void BlockAllocator::throw_oom(std::uint64_t requested_bytes, const std::string& reason) {
  ++stats_.num_ooms;
  throw OutOfMemoryError(requested_bytes, static_cast<std::uint64_t>(stats_.reserved_bytes.current),
                         static_cast<std::uint64_t>(stats_.allocated_bytes.current), cap_bytes_, reason);
}

void* BlockAllocator::hand_out(Block* b, std::uint64_t rounded_bytes, std::uint64_t requested_bytes, bool split) {
  if (split) insert_free(split_block(b, rounded_bytes));
  live_.insert(b->address, b->size_bytes, requested_bytes, b->stream, HeldBlock{b});
  b->state = BlockState::kAllocated;
  b->requested_bytes = requested_bytes;
  return reinterpret_cast<void*>(b->address);
}

// ---------------------------------------------------------------------------------------------------------
// Free blocks and block surgery.

void BlockAllocator::insert_free(Block* b) {
  b->state = BlockState::kFree;
  b->inactive_split_bytes = inactive_split_share(*b);
  stats_.inactive_split_bytes.increase(as_gauge(b->inactive_split_bytes));
  free_set(b->segment->pool).insert(b);
}

void BlockAllocator::erase_free(Block* b) {
  free_set(b->segment->pool).erase(b);
  stats_.inactive_split_bytes.decrease(as_gauge(b->inactive_split_bytes));
}

FreeBlockSet::iterator BlockAllocator::erase_free(FreeBlockSet::iterator it) {
  Block* b = *it;
  stats_.inactive_split_bytes.decrease(as_gauge(b->inactive_split_bytes));
  return free_set(b->segment->pool).erase(it);
}

void BlockAllocator::release_to_free(Block* b) {
  if (b->prev != nullptr && b->prev->state == BlockState::kFree) {
    Block* prev = b->prev;
    erase_free(prev);
    absorb_next(prev);
    b = prev;
  }
  if (b->next != nullptr && b->next->state == BlockState::kFree) {
    erase_free(b->next);
    absorb_next(b);
  }
  insert_free(b);
}

Block* BlockAllocator::split_block(Block* b, std::uint64_t head_bytes) {
  Block* tail = recycler_.acquire();
  tail->address = b->address + head_bytes;
  tail->size_bytes = b->size_bytes - head_bytes;
  tail->stream = b->stream;
  tail->segment = b->segment;
  tail->state = b->state;
  tail->prev = b;
  tail->next = b->next;
  if (b->next != nullptr) b->next->prev = tail;
  b->next = tail;
  b->size_bytes = head_bytes;
  return tail;
}

void BlockAllocator::absorb_next(Block* b) {
  Block* gone = b->next;
  b->size_bytes += gone->size_bytes;
  b->next = gone->next;
  if (gone->next != nullptr) gone->next->prev = b;
  recycler_.recycle(gone);
}

// ---------------------------------------------------------------------------------------------------------
// Segments and pages.

bool BlockAllocator::fits_cap(std::uint64_t extra_bytes) const {
  if (cap_bytes_ == 0) return true;
  const auto reserved_bytes = static_cast<std::uint64_t>(stats_.reserved_bytes.current);
  return reserved_bytes <= cap_bytes_ && extra_bytes <= cap_bytes_ - reserved_bytes;
}

Segment* BlockAllocator::reserve_segment(std::uint64_t size_bytes, std::uint64_t page_bytes, StreamId stream,
                                         PoolKind pool) {
  std::uintptr_t address = 0;
  try {
    address = backend_.reserve(size_bytes);
  } catch (const OutOfMemoryError&) {
    return nullptr;
  }
  auto segment = std::make_unique<Segment>();
  segment->address = address;
  segment->size_bytes = size_bytes;
  segment->page_bytes = page_bytes;
  segment->stream = stream;
  segment->pool = pool;
  Block* whole = recycler_.acquire();
  whole->address = address;
  whole->size_bytes = size_bytes;
  whole->stream = stream;
  whole->segment = segment.get();
  whole->state = BlockState::kUnmapped;
  segment->first = whole;
  Segment* raw = segment.get();
  segments_.emplace(address, std::move(segment));
  return raw;
}

void BlockAllocator::free_segment(Segment* segment) {
  park_range(segment->address, segment->size_bytes);  // first, so that a bad_alloc leaves the segment alone
  try {
    backend_.address_free(segment->address, segment->size_bytes);
    parked_ranges_.pop_back();
  } catch (const Error&) {
    if (!parked_failure_) parked_failure_ = std::current_exception();
  }
  recycler_.recycle(segment->first);
  segments_.erase(segment->address);
}

bool BlockAllocator::map_pages(Segment& segment, std::size_t first_page, std::size_t count) {
  const std::uint64_t bytes = count * segment.page_bytes;
  if (!fits_cap(bytes)) return false;
  if (segment.pages.size() < first_page + count) segment.pages.resize(first_page + count);
  std::size_t created = 0;
  try {
    for (; created < count; ++created) segment.pages[first_page + created] = backend_.create(segment.page_bytes);
  } catch (const OutOfMemoryError&) {
    drop_new_chunks(segment, first_page, created);
    return false;
  } catch (...) {
    drop_new_chunks(segment, first_page, created);
    throw;
  }
  std::size_t mapped = 0;
  try {
    for (; mapped < count; ++mapped) {
      const std::size_t page = first_page + mapped;
      backend_.map(page_address(segment, page), segment.page_bytes, segment.pages[page]);
    }
    backend_.set_access(page_address(segment, first_page), bytes);
  } catch (...) {
    if (mapped != 0) backend_.unmap(page_address(segment, first_page), mapped * segment.page_bytes);
    drop_new_chunks(segment, first_page, count);
    try {
      throw;
    } catch (const OutOfMemoryError&) {
      return false;
    }
  }
  stats_.reserved_bytes.increase(as_gauge(bytes));
  stats_.chunks_created += count;
  return true;
}

void BlockAllocator::drop_new_chunks(Segment& segment, std::size_t first_page, std::size_t count) {
  for (std::size_t page = first_page; page < first_page + count; ++page) {
    release_chunk(std::exchange(segment.pages[page], ChunkHandle{}), segment.page_bytes, /*counted=*/false);
  }
  trim_pages(segment);
}

void BlockAllocator::unmap_pages(Segment& segment, std::size_t first_page, std::size_t count) {
  backend_.unmap(page_address(segment, first_page), count * segment.page_bytes);
  for (std::size_t page = first_page; page < first_page + count; ++page) {
    release_chunk(std::exchange(segment.pages[page], ChunkHandle{}), segment.page_bytes, /*counted=*/true);
  }
  trim_pages(segment);
}

void BlockAllocator::release_chunk(ChunkHandle chunk, std::uint64_t size_bytes, bool counted) {
  parked_chunks_.push_back({chunk.value, size_bytes});  // first, so that a bad_alloc cannot lose the chunk
  try {
    backend_.release(chunk);
  } catch (const Error&) {
    if (!counted) stats_.reserved_bytes.increase(as_gauge(size_bytes));
    if (!parked_failure_) parked_failure_ = std::current_exception();
    return;
  }
  parked_chunks_.pop_back();
  if (!counted) return;
  stats_.reserved_bytes.decrease(as_gauge(size_bytes));
  ++stats_.chunks_released;
}

void BlockAllocator::park_range(std::uintptr_t address, std::uint64_t size_bytes) {
  parked_ranges_.push_back({address, size_bytes});
}

void BlockAllocator::retry_parked() {
  parked_failure_ = nullptr;
  std::vector<Parked> chunks;
  std::vector<Parked> ranges;
  chunks.swap(parked_chunks_);
  ranges.swap(parked_ranges_);
  for (const Parked& c : chunks) release_chunk(ChunkHandle{c.start}, c.size_bytes, /*counted=*/true);
  for (const Parked& r : ranges) {
    park_range(r.start, r.size_bytes);
    try {
      backend_.address_free(r.start, r.size_bytes);
      parked_ranges_.pop_back();
    } catch (const Error&) {
      if (!parked_failure_) parked_failure_ = std::current_exception();
    }
  }
}

void BlockAllocator::throw_parked_failure() const {
  if (parked_failure_) std::rethrow_exception(parked_failure_);
}

// ---------------------------------------------------------------------------------------------------------
// Reports and checks.

Stats BlockAllocator::stats() const {
  Stats out = stats_;
  out.backend_calls = backend_.counters();
  return out;
}

std::vector<BlockInfo> BlockAllocator::blocks() const {
  std::vector<BlockInfo> out;
  out.reserve(live_.size());
  for (const auto& [address, segment] : segments_) {
    for (const Block* b = segment->first; b != nullptr; b = b->next) {
      if (b->state != BlockState::kAllocated && b->state != BlockState::kPendingFree) continue;
      out.push_back({b->address, b->size_bytes, b->requested_bytes, b->stream,
                     b->state == BlockState::kPendingFree});
    }
  }
  return out;
}

std::vector<SegmentInfo> BlockAllocator::segments() const {
  std::vector<SegmentInfo> out;
  for (const auto& [address, segment] : segments_) {
    const Block* b = segment->first;
    while (b != nullptr) {
      if (b->state == BlockState::kUnmapped) {
        b = b->next;
        continue;
      }
      SegmentInfo info{b->address, 0, segment->stream,
                       segment->pool == PoolKind::kSmall ? SegmentType::kSmall : SegmentType::kLarge,
                       policy() == Policy::kExpandable, {}, {}};
      for (; b != nullptr && b->state != BlockState::kUnmapped; b = b->next) {
        const SegmentBlockState state = b->state == BlockState::kAllocated     ? SegmentBlockState::kActiveAllocated
                                        : b->state == BlockState::kPendingFree ? SegmentBlockState::kActivePendingFree
                                                                               : SegmentBlockState::kInactive;
        info.blocks.push_back({b->address, b->size_bytes,
                               state == SegmentBlockState::kInactive ? 0 : b->requested_bytes, state});
        info.size_bytes += b->size_bytes;
      }
      // A mapped run starts and ends on page boundaries (unmapped blocks do).
      const std::size_t first_page = static_cast<std::size_t>((info.address - segment->address) / segment->page_bytes);
      const std::size_t end_page = first_page + static_cast<std::size_t>(info.size_bytes / segment->page_bytes);
      for (std::size_t page = first_page; page < end_page && page < segment->pages.size(); ++page) {
        info.chunks.push_back({segment->pages[page].value, (page - first_page) * segment->page_bytes,
                               segment->page_bytes});
      }
      out.push_back(std::move(info));
    }
  }
  return out;
}

std::optional<BlockInfo> BlockAllocator::find_block(const void* ptr) const {
  const LiveTable::Block* b = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (b == nullptr) return std::nullopt;
  return BlockInfo{b->block->address, b->size_bytes, b->requested_bytes, b->stream, b->pending_free};
}

void BlockAllocator::fail(const std::string& what) const {
  throw std::logic_error(fmt::format("gmlake {} invariant broken: {}", to_string(policy()), what));
}

void BlockAllocator::check_invariants() const {
  Stats recount;
  std::size_t free_blocks = 0;
  std::size_t live_blocks = 0;
  std::uintptr_t previous_end = 0;
  for (const auto& [address, segment] : segments_) {
    if (address != segment->address) fail("a segment is filed under another address");
    if (segment->address < previous_end) fail(fmt::format("segment {:#x} overlaps the one before", address));
    if (segment->page_bytes == 0 || segment->size_bytes == 0 || segment->size_bytes % segment->page_bytes != 0) {
      fail(fmt::format("segment {:#x} is not a whole number of pages", address));
    }
    if (segment->pages.size() * segment->page_bytes > segment->size_bytes) {
      fail(fmt::format("segment {:#x} has pages past its end", address));
    }
    previous_end = segment->end();
    check_segment_blocks(*segment, &free_blocks, &live_blocks);
    const SegmentTally tally = check_segment(*segment);
    recount.reserved_bytes.current += as_gauge(tally.reserved_bytes);
    recount.inactive_split_bytes.current += as_gauge(tally.inactive_split_bytes);
  }
  if (free_[0].size() + free_[1].size() != free_blocks) {
    fail("a free set holds a block that is not a free block of a segment");
  }
  if (live_.size() != live_blocks) fail("the live table holds an address that is not a live block");
  live_.check_invariants();
  for (const Parked& c : parked_chunks_) recount.reserved_bytes.current += as_gauge(c.size_bytes);
  check_gauges(recount);
}

void BlockAllocator::check_segment_blocks(const Segment& segment, std::size_t* free_blocks,
                                          std::size_t* live_blocks) const {
  const Block* prev = nullptr;
  std::uintptr_t cursor = segment.address;
  for (const Block* b = segment.first; b != nullptr; prev = b, b = b->next) {
    auto at = [b] { return fmt::format("block {:#x}", b->address); };  // formatted only on failure
    if (b->prev != prev) fail(at() + ": prev link does not point to the block before");
    if (b->segment != &segment) fail(at() + ": points to another segment");
    if (b->address != cursor) fail(at() + ": blocks do not tile their segment");
    if (b->size_bytes == 0 || b->size_bytes % kRoundBytes != 0 || b->address % kRoundBytes != 0) {
      fail(at() + ": size or address is not a non-zero multiple of 512 B");
    }
    if (b->size_bytes > segment.end() - b->address) fail(at() + ": runs past its segment");
    if (b->stream != segment.stream) fail(at() + ": stream differs from its segment's");
    cursor = b->end();
    switch (b->state) {
      case BlockState::kFree:
        if (prev != nullptr && prev->state == BlockState::kFree) fail(at() + ": free next to a free block");
        if (!holds(free_[index(segment.pool)], b)) fail(at() + ": free but not in its pool's free set");
        if (b->inactive_split_bytes != inactive_split_share(*b)) fail(at() + ": stale inactive split share");
        ++*free_blocks;
        break;
      case BlockState::kAllocated:
      case BlockState::kPendingFree: {
        const LiveTable::Block* held = live_.find(b->address);
        if (held == nullptr || held->block != b) fail(at() + ": live but not in the live table");
        if (held->size_bytes != b->size_bytes || held->requested_bytes != b->requested_bytes ||
            held->stream != b->stream || held->pending_free != (b->state == BlockState::kPendingFree)) {
          fail(at() + ": differs from its entry in the live table");
        }
        ++*live_blocks;
        break;
      }
      case BlockState::kUnmapped:
        if (prev != nullptr && prev->state == BlockState::kUnmapped) fail(at() + ": unmapped next to unmapped");
        break;
    }
  }
  if (cursor != segment.end()) fail(fmt::format("segment {:#x}: blocks do not cover it", segment.address));
}

void BlockAllocator::check_gauges(const Stats& recount) const {
  auto same = [&](const Gauge& kept, const Gauge& counted, const char* name) {
    if (kept.current != counted.current) {
      fail(fmt::format("{} is {} but the blocks add up to {}", name, kept.current, counted.current));
    }
    if (kept.current < 0 || kept.peak < kept.current) fail(fmt::format("{} has a bad current or peak", name));
  };
  same(stats_.reserved_bytes, recount.reserved_bytes, "reserved_bytes");
  same(stats_.inactive_split_bytes, recount.inactive_split_bytes, "inactive_split_bytes");
}

}  // namespace gmlake::policy
