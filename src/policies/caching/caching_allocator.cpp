#include "caching_allocator.h"

#include <fmt/format.h>

#include <iterator>
#include <optional>

#include "gmlake/error.h"
#include "gmlake/units.h"
#include "../common/request_sizing.h"

namespace gmlake {

using policy::Block;
using policy::BlockState;
using policy::PoolKind;
using policy::Segment;

CachingAllocator::CachingAllocator(const Config& config, Backend& backend)
    : BlockAllocator(Policy::kCaching, config, backend) {
  require_granularity_multiple(this->config().large_round_bytes, "large_round_bytes");
}

void* CachingAllocator::allocate(std::uint64_t size_bytes, StreamId stream) {
  if (size_bytes == 0) return nullptr;
  const std::uint64_t rounded_bytes = rounded_or_throw(size_bytes);
  const PoolKind pool = policy::pool_for(config(), rounded_bytes);
  Block* b = take_best_fit(pool, stream, rounded_bytes);
  if (b == nullptr) {
    const std::optional<std::uint64_t> segment_bytes = policy::caching_segment_bytes(config(), rounded_bytes);
    if (!segment_bytes) throw_oom(size_bytes, "the request is too large for a segment");
    b = new_segment(pool, stream, *segment_bytes);
    if (b == nullptr && config().release_on_oom) {
      release_free_segments();
      ++counters().num_alloc_retries;
      b = new_segment(pool, stream, *segment_bytes);
    }
    if (b == nullptr) {
      throw_oom(size_bytes, fmt::format("no segment of {} bytes within the cap or the backend's memory",
                                        *segment_bytes));
    }
  }
  const bool split = policy::caching_should_split(config(), pool, b->size_bytes, rounded_bytes);
  return hand_out(b, rounded_bytes, size_bytes, split);
}

void* CachingAllocator::allocate_at(std::uintptr_t address, std::uint64_t size_bytes,
                                    std::uint64_t requested_bytes) {
  auto refuse = [&](const char* why) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("gmlake caching: allocate_at({:#x}, {} bytes, {} requested): {}", address, size_bytes,
                            requested_bytes, why));
  };
  if (size_bytes == 0 || size_bytes % kRoundBytes != 0) refuse("the size is not a positive multiple of 512 B");
  if (requested_bytes == 0 || requested_bytes > size_bytes) refuse("the requested size is not 1 .. size");
  Block* b = free_block_holding(address, size_bytes);
  if (b == nullptr) refuse("the range is not wholly inside one free block of a segment");
  erase_free(b);
  if (b->address < address) {
    Block* head = b;
    b = split_block(head, address - head->address);
    insert_free(head);
  }
  return hand_out(b, size_bytes, requested_bytes, /*split=*/b->size_bytes > size_bytes);
}

// The kFree block that holds [address, address + size_bytes) whole, or nullptr.
Block* CachingAllocator::free_block_holding(std::uintptr_t address, std::uint64_t size_bytes) const {
  auto it = segment_map().upper_bound(address);
  if (it == segment_map().begin()) return nullptr;
  const Segment& segment = *std::prev(it)->second;
  if (address >= segment.end() || size_bytes > segment.end() - address) return nullptr;
  for (Block* b = segment.first; b != nullptr; b = b->next) {
    if (b->end() <= address) continue;
    const bool holds = b->state == BlockState::kFree && b->address <= address && address + size_bytes <= b->end();
    return holds ? b : nullptr;
  }
  return nullptr;
}

void CachingAllocator::empty_cache() {
  release_free_segments();
  throw_parked_failure();
}

// PyTorch's get_free_block with default settings: lower_bound on (stream, size).
Block* CachingAllocator::take_best_fit(PoolKind pool, StreamId stream, std::uint64_t rounded_bytes) {
  policy::FreeBlockSet& set = free_set(pool);
  const auto it = set.lower_bound(policy::SizeKey{stream, rounded_bytes});
  if (it == set.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  erase_free(it);
  return b;
}

// A new segment as one free block in no set, or nullptr when the cap or the backend leaves no room.
Block* CachingAllocator::new_segment(PoolKind pool, StreamId stream, std::uint64_t segment_bytes) {
  if (!fits_cap(segment_bytes)) return nullptr;
  Segment* segment = reserve_segment(segment_bytes, segment_bytes, stream, pool);
  if (segment == nullptr) return nullptr;
  bool mapped = false;
  try {
    mapped = map_pages(*segment, 0, 1);
  } catch (...) {
    free_segment(segment);
    throw;
  }
  if (!mapped) {
    free_segment(segment);
    return nullptr;
  }
  segment->first->state = BlockState::kFree;
  return segment->first;
}

// Unmaps first: when that fails nothing has changed; after it, nothing throws (failed releases are parked).
void CachingAllocator::release_segment(Segment* segment) {
  unmap_pages(*segment, 0, 1);
  erase_free(segment->first);
  free_segment(segment);
}

// PyTorch's release_cached_blocks: every segment that is one whole free block, of every stream and pool.
void CachingAllocator::release_free_segments() {
  retry_parked();
  for (auto it = segment_map().begin(); it != segment_map().end();) {
    Segment* segment = it->second.get();
    ++it;
    const Block* first = segment->first;
    if (first->state == BlockState::kFree && first->next == nullptr) release_segment(segment);
  }
}

std::uint64_t CachingAllocator::inactive_split_share(const Block& free_block) const {
  return free_block.is_split() ? free_block.size_bytes : 0;
}

policy::BlockAllocator::SegmentTally CachingAllocator::check_segment(const Segment& segment) const {
  auto at = [&segment] { return fmt::format("segment {:#x}", segment.address); };  // only on failure
  if (segment.page_bytes != segment.size_bytes || segment.pages.size() != 1 || segment.pages[0].value == 0) {
    fail(at() + ": not one mapped chunk");
  }
  if (segment.pool == PoolKind::kSmall && segment.size_bytes != config().small_segment_bytes) {
    fail(at() + ": a small-pool segment of another size than small_segment_bytes");
  }
  if (!backend().is_accessible(segment.address, segment.size_bytes)) fail(at() + ": not mapped with access");
  SegmentTally tally;
  tally.reserved_bytes = segment.size_bytes;
  for (const Block* b = segment.first; b != nullptr; b = b->next) {
    if (b->state == BlockState::kUnmapped) fail(at() + ": holds an unmapped block");
    if (b->state == BlockState::kFree && (b->prev != nullptr || b->next != nullptr)) {
      tally.inactive_split_bytes += b->size_bytes;
    }
  }
  return tally;
}

}  // namespace gmlake
