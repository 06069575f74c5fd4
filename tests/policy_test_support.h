// Test helpers shared by the reference-policy tests (caching, expandable): pointer arithmetic, a check that
// an allocator's state is unchanged across a failed call, and a seeded random workload that checks every
// invariant after every step.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <random>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/backend.h"
#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake::testing {

inline std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
inline void* offset(void* p, std::uint64_t bytes) { return static_cast<char*>(p) + bytes; }

// What a failed call must leave as it was: the blocks and every gauge.
struct Snapshot {
  std::vector<BlockInfo> blocks;
  Stats stats;

  static Snapshot of(const Allocator& a) { return {a.blocks(), a.stats()}; }
};

inline bool same_blocks(const std::vector<BlockInfo>& x, const std::vector<BlockInfo>& y) {
  return std::equal(x.begin(), x.end(), y.begin(), y.end(), [](const BlockInfo& a, const BlockInfo& b) {
    return a.address == b.address && a.size_bytes == b.size_bytes && a.requested_bytes == b.requested_bytes &&
           a.stream == b.stream && a.pending_free == b.pending_free;
  });
}

inline void expect_unchanged(const Snapshot& before, const Allocator& a) {
  const Snapshot after = Snapshot::of(a);
  EXPECT_TRUE(same_blocks(before.blocks, after.blocks));
  EXPECT_EQ(before.stats.allocated_bytes.current, after.stats.allocated_bytes.current);
  EXPECT_EQ(before.stats.active_bytes.current, after.stats.active_bytes.current);
  EXPECT_EQ(before.stats.requested_bytes.current, after.stats.requested_bytes.current);
  EXPECT_EQ(before.stats.reserved_bytes.current, after.stats.reserved_bytes.current);
  EXPECT_EQ(before.stats.inactive_split_bytes.current, after.stats.inactive_split_bytes.current);
  EXPECT_EQ(before.stats.num_allocs, after.stats.num_allocs);
  EXPECT_EQ(before.stats.num_frees, after.stats.num_frees);
}

// Expects `call` to throw Error(kInvalidPointer), count one invalid free and change nothing else.
template <class Call>
void expect_invalid_pointer(Allocator& a, Call call) {
  const Snapshot before = Snapshot::of(a);
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidPointer) << e.what();
  }
  expect_unchanged(before, a);
  EXPECT_EQ(a.stats().invalid_frees, before.stats.invalid_frees + 1);
  a.check_invariants();
}

// Checks that the allocator's live blocks are exactly `live` (address -> pending) and do not overlap.
struct LiveBlock {
  void* ptr;
  std::uint64_t requested_bytes;
  StreamId stream;
  bool pending;
};

inline void expect_blocks_match(const Allocator& a, const std::vector<LiveBlock>& live) {
  std::vector<BlockInfo> blocks = a.blocks();
  ASSERT_EQ(blocks.size(), live.size());
  std::vector<LiveBlock> sorted = live;
  std::sort(sorted.begin(), sorted.end(), [](const LiveBlock& x, const LiveBlock& y) { return x.ptr < y.ptr; });
  std::int64_t allocated_bytes = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const BlockInfo& b = blocks[i];
    ASSERT_EQ(b.address, addr(sorted[i].ptr));
    ASSERT_EQ(b.requested_bytes, sorted[i].requested_bytes);
    ASSERT_EQ(b.stream, sorted[i].stream);
    ASSERT_EQ(b.pending_free, sorted[i].pending);
    ASSERT_GE(b.size_bytes, b.requested_bytes);
    ASSERT_EQ(b.address % kRoundBytes, 0u);
    if (i + 1 < blocks.size()) {
      ASSERT_LE(b.address + b.size_bytes, blocks[i + 1].address) << "blocks overlap";
    }
    if (!b.pending_free) allocated_bytes += static_cast<std::int64_t>(b.size_bytes);
  }
  ASSERT_EQ(a.stats().allocated_bytes.current, allocated_bytes);
}

// Checks Allocator::segments() against the allocator's own figures: segments in address order, apart; each
// one's blocks cover it exactly, in order, in valid states (requested bytes within the size for active blocks,
// 0 for inactive ones); its chunks cover it exactly; the active_allocated blocks add up to allocated_bytes and
// their requested bytes to requested_bytes, the active ones to active_bytes, the segments to reserved_bytes
// less `unmapped_reserved_bytes` (gmlake's free chunks; 0 for the other policies); the segments hold exactly
// blocks(). Stops at the first failure.
inline void expect_segments_consistent(const Allocator& a, std::uint64_t unmapped_reserved_bytes = 0) {
  const std::vector<SegmentInfo> segments = a.segments();
  const Stats stats = a.stats();
  std::uint64_t reserved = 0, allocated = 0, active = 0, requested = 0;
  std::uintptr_t previous_end = 0;
  std::vector<BlockInfo> live;
  for (const SegmentInfo& s : segments) {
    ASSERT_GT(s.size_bytes, 0u);
    ASSERT_GE(s.address, previous_end) << "segments overlap or are out of order at " << s.address;
    previous_end = s.address + s.size_bytes;
    reserved += s.size_bytes;
    std::uintptr_t cursor = s.address;
    ASSERT_FALSE(s.blocks.empty());
    for (const SegmentBlock& b : s.blocks) {
      ASSERT_EQ(b.address, cursor) << "segment " << s.address << ": blocks are not contiguous";
      ASSERT_GT(b.size_bytes, 0u);
      cursor += b.size_bytes;
      switch (b.state) {
        case SegmentBlockState::kActiveAllocated:
          allocated += b.size_bytes;
          requested += b.requested_bytes;
          [[fallthrough]];
        case SegmentBlockState::kActivePendingFree:
          ASSERT_GT(b.requested_bytes, 0u);
          ASSERT_LE(b.requested_bytes, b.size_bytes);
          active += b.size_bytes;
          live.push_back({b.address, b.size_bytes, b.requested_bytes, s.stream,
                          b.state == SegmentBlockState::kActivePendingFree});
          break;
        case SegmentBlockState::kInactive:
          ASSERT_EQ(b.requested_bytes, 0u);
          break;
        default:
          FAIL() << "a block in no valid state";
      }
    }
    ASSERT_EQ(cursor, s.address + s.size_bytes) << "segment " << s.address << ": blocks do not add up to its size";
    std::uint64_t chunk_offset = 0;
    for (const SegmentChunk& c : s.chunks) {
      ASSERT_EQ(c.offset_bytes, chunk_offset) << "segment " << s.address << ": chunks are not contiguous";
      ASSERT_NE(c.handle, 0u);
      chunk_offset += c.size_bytes;
    }
    ASSERT_EQ(chunk_offset, s.size_bytes) << "segment " << s.address << ": chunks do not cover it";
  }
  ASSERT_EQ(static_cast<std::int64_t>(allocated), stats.allocated_bytes.current);
  ASSERT_EQ(static_cast<std::int64_t>(requested), stats.requested_bytes.current);
  ASSERT_EQ(static_cast<std::int64_t>(active), stats.active_bytes.current);
  ASSERT_EQ(static_cast<std::int64_t>(reserved + unmapped_reserved_bytes), stats.reserved_bytes.current);
  std::vector<BlockInfo> blocks = a.blocks();
  ASSERT_EQ(live.size(), blocks.size()) << "segments() and blocks() disagree";
  for (std::size_t i = 0; i < live.size(); ++i) {
    ASSERT_EQ(live[i].address, blocks[i].address);
    ASSERT_EQ(live[i].size_bytes, blocks[i].size_bytes);
    ASSERT_EQ(live[i].pending_free, blocks[i].pending_free);
    ASSERT_EQ(live[i].requested_bytes, blocks[i].requested_bytes);
    // A segment's stream is its blocks' (0: a gmlake arena that every stream shares).
    if (live[i].stream != 0) {
      ASSERT_EQ(live[i].stream, blocks[i].stream);
    }
  }
}

// A request size: mostly small-pool sizes, some large ones up to 48 MiB, with exact pool and segment edges.
inline std::uint64_t random_request_bytes(std::mt19937_64& rng) {
  static constexpr std::uint64_t kEdges[] = {1, kRoundBytes, kRoundBytes + 1, kMiB, kMiB + 1, 2 * kMiB,
                                             10 * kMiB - 1, 10 * kMiB, 20 * kMiB, 20 * kMiB + 1};
  const std::uint64_t pick = rng() % 100;
  if (pick < 5) return kEdges[rng() % std::size(kEdges)];
  if (pick < 55) return 1 + rng() % (64 * kKiB);
  if (pick < 70) return 1 + rng() % kMiB;
  if (pick < 95) return kMiB + rng() % (16 * kMiB);
  return 16 * kMiB + rng() % (32 * kMiB);
}

// Runs `steps` seeded random operations (allocate on one of three streams, free, deferred frees, empty_cache,
// cap changes that provoke OutOfMemoryError), checking every invariant after every step; then frees
// everything and empties the cache, and expects the backend to hold no chunk.
inline void run_random_workload(Allocator& a, const Backend& backend, std::uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  std::vector<LiveBlock> live;
  int ooms = 0;
  for (int step = 0; step < steps; ++step) {
    const std::uint64_t op = rng() % 100;
    const std::uint64_t alloc_percent = live.size() < 300 ? 50 : 35;  // keep a few hundred blocks live
    if (op < alloc_percent || live.empty()) {
      const std::uint64_t size = random_request_bytes(rng);
      const StreamId stream = rng() % 4 == 0 ? 1 + rng() % 2 : 0;
      const Snapshot before = Snapshot::of(a);
      try {
        live.push_back({a.allocate(size, stream), size, stream, false});
      } catch (const OutOfMemoryError& e) {
        ++ooms;
        EXPECT_EQ(e.requested_bytes(), size);
        ASSERT_EQ(a.stats().num_ooms, before.stats.num_ooms + 1);
        // Cached memory may have been released; the blocks stay as they were.
        ASSERT_TRUE(same_blocks(before.blocks, a.blocks()));
        ASSERT_EQ(a.stats().allocated_bytes.current, before.stats.allocated_bytes.current);
      }
    } else if (op < 88) {
      const std::size_t i = rng() % live.size();
      if (live[i].pending) {
        a.end_deferred_free(live[i].ptr);
      } else if (rng() % 8 == 0) {
        a.begin_deferred_free(live[i].ptr);
        live[i].pending = true;
        continue;
      } else {
        a.deallocate(live[i].ptr);
      }
      live[i] = live.back();
      live.pop_back();
    } else if (op < 90) {
      a.empty_cache();
    } else if (op < 91) {
      // Alternate between no cap and a cap a little above what is reserved now.
      const auto reserved = static_cast<std::uint64_t>(a.stats().reserved_bytes.current);
      a.set_cap_bytes(rng() % 2 == 0 ? 0 : reserved + (rng() % 64) * kMiB);
    }
    a.check_invariants();
    expect_blocks_match(a, live);
    expect_segments_consistent(a);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(a.stats().num_allocs, static_cast<std::uint64_t>(steps / 4));
  for (const LiveBlock& b : live) {
    if (b.pending) a.end_deferred_free(b.ptr);
    else a.deallocate(b.ptr);
  }
  a.check_invariants();
  EXPECT_EQ(a.stats().allocated_bytes.current, 0);
  EXPECT_EQ(a.stats().active_bytes.current, 0);
  EXPECT_EQ(a.stats().inactive_split_bytes.current, 0);
  a.empty_cache();
  a.check_invariants();
  EXPECT_EQ(a.stats().reserved_bytes.current, 0);
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_mappings(), 0u);
  EXPECT_GT(ooms, 0) << "the workload never hit the cap";
}

// On a backend whose memory the CPU can touch: fills every block with its own byte, frees some, allocates
// more, and expects every live block to still hold its byte (blocks are real, disjoint, accessible memory).
inline void expect_blocks_are_disjoint_writable_memory(Allocator& a) {
  const std::uint64_t sizes[] = {1, 4 * kKiB, kMiB, 3 * kMiB, 12 * kMiB, 25 * kMiB, 700 * kKiB, 5 * kMiB};
  struct Filled {
    void* ptr;
    std::uint64_t size_bytes;
    unsigned char byte;
  };
  std::vector<Filled> live;
  unsigned char next_byte = 1;
  auto fill = [&](std::uint64_t size) {
    void* p = a.allocate(size, 0);
    std::memset(p, next_byte, size);
    live.push_back({p, size, next_byte++});
  };
  for (std::uint64_t size : sizes) fill(size);
  for (std::size_t i = 0; i < live.size(); i += 2) a.deallocate(live[i].ptr);
  std::erase_if(live, [&](const Filled& f) { return (f.byte - 1) % 2 == 0; });
  for (std::uint64_t size : sizes) fill(size / 2 + 1);
  for (const Filled& f : live) {
    const auto* bytes = static_cast<const unsigned char*>(f.ptr);
    for (std::uint64_t i = 0; i < f.size_bytes; i += 4093) ASSERT_EQ(bytes[i], f.byte) << f.ptr << " + " << i;
    ASSERT_EQ(bytes[f.size_bytes - 1], f.byte);
  }
  a.check_invariants();
  for (const Filled& f : live) a.deallocate(f.ptr);
  a.empty_cache();
  EXPECT_EQ(a.backend().live_chunks(), 0u);
}

}  // namespace gmlake::testing
