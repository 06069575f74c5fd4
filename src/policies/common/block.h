// Blocks and segments of the two PyTorch reference policies (caching, expandable).
//
// A segment is one virtual address range taken from the backend: for `caching` a cudaMalloc-like segment
// backed by a single chunk, for `expandable` a large reservation whose pages are mapped on demand. Blocks cut
// a segment into pieces that cover it exactly, in address order, linked by prev/next:
//
//   segment.first->address == segment.address,  b->next->address == b->end(),  last->end() == segment.end()
//
// Every block is in exactly one state:
//   kFree         mapped and unused; in its pool's free set; never next to another kFree block (coalesced)
//   kAllocated    handed out; in the live table
//   kPendingFree  freed by begin_deferred_free, not reusable until end_deferred_free; in the live table;
//                 never merged with a neighbour
//   kUnmapped     expandable only: address space with no memory behind it, starting and ending on page
//                 boundaries; in its pool's unmapped set; never next to another kUnmapped block
// All blocks of a segment carry the segment's stream and pool. Block and segment objects never move: the sets
// and the live table hold pointers to them.
//
// Merging keeps the lower block object: when two blocks merge, the one at the higher address is recycled.
// So segment.first, once set, is the same object for the segment's whole life.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/backend.h"

namespace gmlake::policy {

// PyTorch's two block pools: small requests (<= Config::small_request_max_bytes) and large ones.
enum class PoolKind : std::uint8_t { kSmall = 0, kLarge = 1 };
inline constexpr std::size_t kPoolKinds = 2;
inline std::size_t index(PoolKind pool) { return static_cast<std::size_t>(pool); }

enum class BlockState : std::uint8_t { kFree, kAllocated, kPendingFree, kUnmapped };

struct Segment;

struct Block {
  std::uintptr_t address = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t requested_bytes = 0;       // as asked; kAllocated and kPendingFree blocks only
  std::uint64_t inactive_split_bytes = 0;  // kFree blocks only: this block's share of that gauge
  StreamId stream = 0;
  Block* prev = nullptr;  // the neighbours in the same segment, by address
  Block* next = nullptr;
  Segment* segment = nullptr;
  BlockState state = BlockState::kFree;

  std::uintptr_t end() const { return address + size_bytes; }
  // PyTorch's Block::is_split(): the block is not its segment's only block.
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

struct Segment {
  std::uintptr_t address = 0;
  std::uint64_t size_bytes = 0;    // the reservation's size
  std::uint64_t page_bytes = 0;    // the unit of mapping: the whole segment for `caching`, a page for `expandable`
  std::vector<ChunkHandle> pages;  // the chunk behind page i, or a 0 handle when unmapped; pages past the end
                                   // of the vector are unmapped
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
  Block* first = nullptr;

  std::uintptr_t end() const { return address + size_bytes; }
  bool page_mapped(std::size_t page) const { return page < pages.size() && pages[page].value != 0; }
};

}  // namespace gmlake::policy
