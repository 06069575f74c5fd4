// StitchingAllocator::segments: the arenas' mapped memory in PyTorch's snapshot terms. A segment is a maximal
// run of mapped pages of one arena (chunks mapped side by side join into one run); its blocks are the live and
// pending blocks placed in it and, between them, the free bytes as inactive blocks; its chunks are the chunks
// mapped there, so a stitched range shows as a segment of several chunks. Standby mappings are left out: each
// chunk shows once, at its active place, so the segments' sizes and the free chunks add up to reserved bytes.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "stitching_allocator.h"

namespace gmlake::engine {

std::vector<SegmentInfo> StitchingAllocator::segments() const {
  // The blocks of each arena, by offset.
  std::vector<std::vector<std::pair<std::uint64_t, std::uintptr_t>>> placed(arenas_.size());
  for (const auto& [address, b] : blocks_) placed[b.arena].emplace_back(b.offset, address);
  std::vector<SegmentInfo> out;
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    const Arena& arena = arenas_[a];
    if (arena.retired) continue;
    auto& in_arena = placed[a];
    std::sort(in_arena.begin(), in_arena.end());
    std::size_t next_block = 0;
    constexpr std::size_t kNone = SIZE_MAX;
    std::size_t open_index = kNone;  // out[open_index]: the segment of the run being read
    PageNumber run_end_page;
    // Closes the open segment: its blocks from the arena's blocks, gaps as inactive blocks.
    auto close = [&] {
      if (open_index == kNone) return;
      SegmentInfo* open = &out[open_index];
      const std::uint64_t first_offset = open->address - arena.base;
      const std::uint64_t end_offset = first_offset + open->size_bytes;
      std::uint64_t cursor = first_offset;
      while (next_block < in_arena.size() && in_arena[next_block].first < end_offset) {
        const Block& b = blocks_.at(in_arena[next_block].second);
        if (b.offset > cursor) {
          open->blocks.push_back({arena.base + cursor, b.offset - cursor, 0, SegmentBlockState::kInactive});
        }
        open->blocks.push_back({arena.base + b.offset, b.size_bytes, b.requested_bytes,
                                b.pending_free ? SegmentBlockState::kActivePendingFree
                                               : SegmentBlockState::kActiveAllocated});
        cursor = b.offset + b.size_bytes;
        ++next_block;
      }
      if (cursor < end_offset) {
        open->blocks.push_back({arena.base + cursor, end_offset - cursor, 0, SegmentBlockState::kInactive});
      }
      open_index = kNone;
    };
    arena.pages.for_all([&](PageNumber first_page, const PageMap::Entry& e) {
      if (!store_[e.chunk].active_at(arena.id, first_page)) return;  // standby: no memory of its own to show
      if (open_index == kNone || first_page != run_end_page) {
        close();
        out.push_back(SegmentInfo{arena.base + page_.offset_of(first_page), 0, arena.stream,
                                  arena.small ? SegmentType::kSmall : SegmentType::kLarge,
                                  /*is_expandable=*/true, {}, {}});
        open_index = out.size() - 1;
      }
      SegmentInfo* open = &out[open_index];
      open->chunks.push_back({store_[e.chunk].handle.value, open->size_bytes, page_.bytes_of(e.pages)});
      open->size_bytes += page_.bytes_of(e.pages);
      run_end_page = first_page + e.pages;
    });
    close();
  }
  std::sort(out.begin(), out.end(), [](const SegmentInfo& x, const SegmentInfo& y) { return x.address < y.address; });
  return out;
}

}  // namespace gmlake::engine
