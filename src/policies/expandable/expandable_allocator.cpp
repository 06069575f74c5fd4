#include "expandable_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <utility>

#include "gmlake/error.h"
#include "../common/request_sizing.h"

namespace gmlake {

using policy::Block;
using policy::BlockState;
using policy::PoolKind;
using policy::Segment;

namespace {

std::uint64_t round_up_to(std::uint64_t v, std::uint64_t unit) { return (v + unit - 1) / unit * unit; }

bool usable_for_growth(const Block* b) {
  return b != nullptr && (b->state == BlockState::kFree || b->state == BlockState::kUnmapped);
}

// PyTorch's has_available_address_space: free and unmapped blocks from `b` on hold `rounded_bytes`.
bool has_room(const Block* b, std::uint64_t rounded_bytes) {
  std::uint64_t bytes = 0;
  for (; bytes < rounded_bytes && usable_for_growth(b); b = b->next) bytes += b->size_bytes;
  return bytes >= rounded_bytes;
}

// A free block's size for best fit under expandable segments: what it could grow to.
std::uint64_t growable_bytes(const Block* b) {
  const bool grows = b->next != nullptr && b->next->state == BlockState::kUnmapped;
  return b->size_bytes + (grows ? b->next->size_bytes : 0);
}

std::size_t page_of(const Segment& segment, std::uintptr_t address) {
  return static_cast<std::size_t>((address - segment.address) / segment.page_bytes);
}

}  // namespace

ExpandableAllocator::ExpandableAllocator(const Config& config, Backend& backend)
    : BlockAllocator(Policy::kExpandable, config, backend),
      unmapped_{policy::UnmappedBlockSet(node_pool()), policy::UnmappedBlockSet(node_pool())} {
  for (PoolKind pool : {PoolKind::kSmall, PoolKind::kLarge}) {
    if (segment_bytes(pool) == 0) {
      throw Error(ErrorCode::kConfig, fmt::format("gmlake config: expandable_virtual_bytes: {} holds no page of {}",
                                                  this->config().expandable_virtual_bytes, page_bytes(pool)));
    }
  }
}

std::uint64_t ExpandableAllocator::page_bytes(PoolKind pool) const {
  return pool == PoolKind::kSmall ? config().small_segment_bytes : config().large_segment_bytes;
}

std::uint64_t ExpandableAllocator::segment_bytes(PoolKind pool) const {
  return config().expandable_virtual_bytes / page_bytes(pool) * page_bytes(pool);
}

void* ExpandableAllocator::allocate(std::uint64_t size_bytes, StreamId stream) {
  if (size_bytes == 0) return nullptr;
  const std::uint64_t rounded_bytes = rounded_or_throw(size_bytes);
  const PoolKind pool = policy::pool_for(config(), rounded_bytes);
  Block* b = take_best_fit(pool, stream, rounded_bytes);
  if (b == nullptr) {
    b = grow(pool, stream, rounded_bytes);
    if (b == nullptr && config().release_on_oom) {
      release_free_pages();
      ++counters().num_alloc_retries;
      b = grow(pool, stream, rounded_bytes);
    }
    if (b == nullptr) throw_oom(size_bytes, "no pages within the cap or the backend's memory");
  }
  return hand_out(b, rounded_bytes, size_bytes, policy::expandable_should_split(b->size_bytes, rounded_bytes));
}

void ExpandableAllocator::empty_cache() {
  release_free_pages();
  throw_parked_failure();
}

// PyTorch's get_free_block under expandable segments: from the best fit, step to the next larger block while
// that one could grow to less (so the segment's growing end is taken last).
Block* ExpandableAllocator::take_best_fit(PoolKind pool, StreamId stream, std::uint64_t rounded_bytes) {
  policy::FreeBlockSet& set = free_set(pool);
  auto it = set.lower_bound(policy::SizeKey{stream, rounded_bytes});
  if (it == set.end() || (*it)->stream != stream) return nullptr;
  for (auto next = std::next(it);
       next != set.end() && (*next)->stream == stream && growable_bytes(*next) < growable_bytes(*it); ++next) {
    it = next;
  }
  Block* b = *it;
  erase_free(it);
  return b;
}

// Maps pages so that a free block of at least `rounded_bytes` exists, and returns it out of the free set; or
// nullptr, changing nothing, when the cap or the backend leaves no room.
Block* ExpandableAllocator::grow(PoolKind pool, StreamId stream, std::uint64_t rounded_bytes) {
  Block* start = find_growth_start(pool, stream, rounded_bytes);
  Segment* fresh = nullptr;
  if (start == nullptr) {
    if (rounded_bytes > segment_bytes(pool) || !fits_cap(round_up_to(rounded_bytes, page_bytes(pool)))) {
      return nullptr;
    }
    fresh = reserve_segment(segment_bytes(pool), page_bytes(pool), stream, pool);
    if (fresh == nullptr) return nullptr;
    unmapped_set(pool).insert(fresh->first);
    start = fresh->first;
  }
  bool grown = false;
  try {
    grown = map_growth(start, rounded_bytes);
  } catch (...) {
    if (fresh != nullptr) drop_unused_segment(fresh);
    throw;
  }
  if (!grown) {
    if (fresh != nullptr) drop_unused_segment(fresh);
    return nullptr;
  }
  erase_free(start);  // merging keeps the lowest block object, so `start` now holds the grown range
  return start;
}

// PyTorch's find_expandable_block: the stream's unmapped ranges in address order, each with the free block
// just before it, until one has room; nullptr when none has (a new segment is needed).
Block* ExpandableAllocator::find_growth_start(PoolKind pool, StreamId stream, std::uint64_t rounded_bytes) {
  const policy::UnmappedBlockSet& set = unmapped_set(pool);
  for (auto it = set.lower_bound(policy::AddressKey{stream}); it != set.end() && (*it)->stream == stream; ++it) {
    Block* candidate = *it;
    if (candidate->prev != nullptr && candidate->prev->state == BlockState::kFree) candidate = candidate->prev;
    if (has_room(candidate, rounded_bytes)) return candidate;
  }
  return nullptr;
}

// Plans the pages to map from `start` on (PyTorch's try_allocate_expandable_block), maps them all or none,
// then turns the planned ranges into free blocks merged with `start`.
bool ExpandableAllocator::map_growth(Block* start, std::uint64_t rounded_bytes) {
  growth_.clear();
  std::uint64_t have_bytes = 0;
  std::uint64_t new_bytes = 0;
  for (Block* b = start; have_bytes < rounded_bytes; b = b->next) {
    if (!usable_for_growth(b)) return false;  // has_room() rules this out
    if (b->state == BlockState::kFree) {
      have_bytes += b->size_bytes;
      continue;
    }
    const std::uint64_t bytes = std::min(round_up_to(rounded_bytes - have_bytes, b->segment->page_bytes),
                                         b->size_bytes);
    growth_.push_back({b, bytes});
    have_bytes += bytes;
    new_bytes += bytes;
  }
  if (!fits_cap(new_bytes)) return false;
  for (std::size_t done = 0; done < growth_.size(); ++done) {
    const Growth& g = growth_[done];
    Segment& segment = *g.unmapped->segment;
    bool mapped = false;
    try {
      mapped = map_pages(segment, page_of(segment, g.unmapped->address), g.bytes / segment.page_bytes);
    } catch (...) {
      unmap_growth(done);
      throw;
    }
    if (!mapped) {
      unmap_growth(done);
      return false;
    }
  }
  for (const Growth& g : growth_) mark_mapped(g);
  return true;
}

// Undoes the first `count` page mappings of growth_ (their blocks were not changed yet).
void ExpandableAllocator::unmap_growth(std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    Segment& segment = *growth_[i].unmapped->segment;
    unmap_pages(segment, page_of(segment, growth_[i].unmapped->address), growth_[i].bytes / segment.page_bytes);
  }
}

void ExpandableAllocator::mark_mapped(const Growth& growth) {
  Block* b = growth.unmapped;
  policy::UnmappedBlockSet& set = unmapped_set(b->segment->pool);
  set.erase(b);
  if (growth.bytes < b->size_bytes) set.insert(split_block(b, growth.bytes));
  b->state = BlockState::kFree;
  release_to_free(b);
}

void ExpandableAllocator::drop_unused_segment(Segment* segment) {
  unmapped_set(segment->pool).erase(segment->first);
  free_segment(segment);
}

// PyTorch's release_cached_blocks under expandable segments (unmap_block on every free block).
void ExpandableAllocator::release_free_pages() {
  retry_parked();
  blocks_.clear();
  for (PoolKind pool : {PoolKind::kSmall, PoolKind::kLarge}) {
    for (Block* b : free_set(pool)) blocks_.push_back(b);
  }
  for (Block* b : blocks_) unmap_whole_pages(b);
  for (auto it = segment_map().begin(); it != segment_map().end();) {
    Segment* segment = it->second.get();
    ++it;
    if (segment->first->state == BlockState::kUnmapped && segment->first->next == nullptr) {
      drop_unused_segment(segment);
    }
  }
}

// Unmaps the pages lying wholly inside free block `b`: b becomes [free head][unmapped][free tail], each part
// present when non-empty, the unmapped part merged with unmapped neighbours.
void ExpandableAllocator::unmap_whole_pages(Block* b) {
  Segment& segment = *b->segment;
  const std::size_t first_page = static_cast<std::size_t>(
      round_up_to(b->address - segment.address, segment.page_bytes) / segment.page_bytes);
  const std::size_t end_page = page_of(segment, b->end());
  if (first_page >= end_page) return;
  unmap_pages(segment, first_page, end_page - first_page);  // when it throws, nothing has changed
  erase_free(b);
  const std::uintptr_t low = segment.address + first_page * segment.page_bytes;
  const std::uintptr_t high = segment.address + end_page * segment.page_bytes;
  Block* middle = b;
  if (low > b->address) {
    middle = split_block(b, low - b->address);
    insert_free(b);
  }
  if (high < middle->end()) insert_free(split_block(middle, high - middle->address));
  middle->state = BlockState::kUnmapped;
  insert_unmapped(middle);
}

void ExpandableAllocator::insert_unmapped(Block* b) {
  policy::UnmappedBlockSet& set = unmapped_set(b->segment->pool);
  if (b->prev != nullptr && b->prev->state == BlockState::kUnmapped) {
    Block* prev = b->prev;
    set.erase(prev);
    absorb_next(prev);
    b = prev;
  }
  if (b->next != nullptr && b->next->state == BlockState::kUnmapped) {
    set.erase(b->next);
    absorb_next(b);
  }
  set.insert(b);
}

// The free bytes of `free_block` in its first and last page when those pages are shared: a free block's
// neighbours are active or unmapped, and unmapped ranges end on page boundaries, so a page edge inside the
// block's first or last page means an active block shares that page.
std::uint64_t ExpandableAllocator::inactive_split_share(const Block& free_block) const {
  const std::uint64_t page = free_block.segment->page_bytes;
  const std::uint64_t low = free_block.address - free_block.segment->address;
  const std::uint64_t high = low + free_block.size_bytes;
  const std::uint64_t head_end = low % page == 0 ? low : std::min(high, (low / page + 1) * page);
  const std::uint64_t tail_start = high % page == 0 ? high : std::max(low, high / page * page);
  std::uint64_t bytes = (head_end - low) + (high - tail_start);
  if (head_end > tail_start) bytes -= head_end - tail_start;  // one page holds both edges
  return bytes;
}

// Checks page mapping against block states and recounts reserved and inactive split bytes page by page.
policy::BlockAllocator::SegmentTally ExpandableAllocator::check_segment(const Segment& segment) const {
  auto at = [&segment] { return fmt::format("segment {:#x}", segment.address); };  // only on failure
  const std::uint64_t page = segment.page_bytes;
  if (page != page_bytes(segment.pool) || segment.size_bytes != segment_bytes(segment.pool)) {
    fail(at() + ": page or segment size differs from the pool's");
  }
  SegmentTally tally;
  // Only a block's first and last page can be shared with another block.
  std::map<std::size_t, std::pair<std::uint64_t, std::uint64_t>> edge_pages;  // page -> (free, active) bytes
  for (const Block* b = segment.first; b != nullptr; b = b->next) {
    const std::size_t first = page_of(segment, b->address);
    const std::size_t last = page_of(segment, b->end() - 1);
    if (b->state == BlockState::kUnmapped) {
      if ((b->address - segment.address) % page != 0 || b->size_bytes % page != 0) {
        fail(fmt::format("{}: unmapped block {:#x} does not start and end on pages", at(), b->address));
      }
      if (!policy::holds(unmapped_[policy::index(segment.pool)], b)) {
        fail(fmt::format("{}: unmapped block {:#x} missing from the unmapped set", at(), b->address));
      }
      for (std::size_t p = first; p <= last && p < segment.pages.size(); ++p) {
        if (segment.page_mapped(p)) fail(fmt::format("{}: page {} is mapped under an unmapped block", at(), p));
      }
      continue;
    }
    for (std::size_t p = first; p <= last; ++p) {
      if (!segment.page_mapped(p)) fail(fmt::format("{}: page {} under block {:#x} is unmapped", at(), p, b->address));
    }
    const bool is_free = b->state == BlockState::kFree;
    const std::uintptr_t first_page_end = segment.address + (first + 1) * page;
    const std::uint64_t head_bytes = std::min<std::uint64_t>(b->end(), first_page_end) - b->address;
    auto& head = edge_pages[first];
    (is_free ? head.first : head.second) += head_bytes;
    if (last != first) {
      auto& tail = edge_pages[last];
      (is_free ? tail.first : tail.second) += b->end() - (segment.address + last * page);
    }
  }
  for (const auto& [p, bytes] : edge_pages) {
    if (bytes.second != 0) tally.inactive_split_bytes += bytes.first;
  }
  for (std::size_t p = 0; p < segment.pages.size(); ++p) {
    if (!segment.page_mapped(p)) continue;
    tally.reserved_bytes += page;
    if (!backend().is_accessible(segment.address + p * page, page)) {
      fail(fmt::format("{}: page {} is not mapped with access", at(), p));
    }
  }
  return tally;
}

void ExpandableAllocator::check_invariants() const {
  BlockAllocator::check_invariants();
  std::size_t unmapped_blocks = 0;
  for (const auto& [address, segment] : segment_map()) {
    for (const Block* b = segment->first; b != nullptr; b = b->next) {
      if (b->state == BlockState::kUnmapped) ++unmapped_blocks;
    }
  }
  if (unmapped_[0].size() + unmapped_[1].size() != unmapped_blocks) {
    fail("an unmapped set holds a block that is not an unmapped block of a segment");
  }
}

}  // namespace gmlake
