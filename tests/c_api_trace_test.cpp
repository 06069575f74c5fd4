// The C API's memory history and segments (gmlake_set_tracing, gmlake_drain_trace, gmlake_get_segments): what
// the PyTorch extension builds torch.cuda.memory._record_memory_history() and _snapshot() on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gmlake/gmlake.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

class CApiTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gmlake_shutdown();
    ASSERT_EQ(gmlake_init("backend:sim"), GMLAKE_OK) << gmlake_last_error();
  }
  void TearDown() override { gmlake_shutdown(); }

  static std::vector<gmlake_trace_event> drain(int device, std::size_t capacity = 64) {
    std::vector<gmlake_trace_event> events(capacity);
    std::size_t count = 99;
    EXPECT_EQ(gmlake_drain_trace(device, events.data(), events.size(), &count), GMLAKE_OK) << gmlake_last_error();
    events.resize(count);
    return events;
  }
};

TEST_F(CApiTraceTest, TracedCallsComeBackInOrderAndDrainedEntriesGoAway) {
  ASSERT_EQ(gmlake_set_tracing(0, 1000), GMLAKE_OK) << gmlake_last_error();
  void* p = gmlake_malloc(3 * kMiB, 0, 5);
  ASSERT_NE(p, nullptr);
  gmlake_free(p, 0, 0, 5);
  const std::vector<gmlake_trace_event> events = drain(0);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front().action, GMLAKE_TRACE_SEGMENT_MAP);
  const gmlake_trace_event& alloc = events[events.size() - 3];
  EXPECT_EQ(alloc.action, GMLAKE_TRACE_ALLOC);
  EXPECT_EQ(alloc.addr, reinterpret_cast<std::uintptr_t>(p));
  EXPECT_EQ(alloc.size_bytes, 3 * kMiB);
  EXPECT_EQ(alloc.stream, 5u);
  EXPECT_EQ(events[events.size() - 2].action, GMLAKE_TRACE_FREE_REQUESTED);
  EXPECT_EQ(events.back().action, GMLAKE_TRACE_FREE_COMPLETED);
  EXPECT_TRUE(drain(0).empty());
  EXPECT_TRUE(drain(3).empty()) << "a device with no pool has no entries";
}

TEST_F(CApiTraceTest, TracingSetBeforeThePoolExistsMakesNoPoolAndAppliesWhenItIsMade) {
  ASSERT_EQ(gmlake_set_tracing(2, 100), GMLAKE_OK) << gmlake_last_error();
  std::size_t n_segments = 7, n_blocks = 7;
  ASSERT_EQ(gmlake_get_segments(2, nullptr, 0, &n_segments, nullptr, 0, &n_blocks), GMLAKE_OK);
  EXPECT_EQ(n_segments, 0u) << "no pool was made";
  void* p = gmlake_malloc(kMiB, 2, 0);
  ASSERT_NE(p, nullptr);
  const std::vector<gmlake_trace_event> events = drain(2);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().action, GMLAKE_TRACE_ALLOC);
  gmlake_free(p, 0, 2, 0);
}

TEST_F(CApiTraceTest, ASmallCapacityTakesTheOldestAndLeavesTheRest) {
  ASSERT_EQ(gmlake_set_tracing(0, 1000), GMLAKE_OK);
  void* p = gmlake_malloc(kMiB, 0, 0);
  void* q = gmlake_malloc(kMiB, 0, 0);
  const std::vector<gmlake_trace_event> first = drain(0, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].action, GMLAKE_TRACE_SEGMENT_MAP);
  const std::vector<gmlake_trace_event> rest = drain(0);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back().addr, reinterpret_cast<std::uintptr_t>(q));
  gmlake_free(p, 0, 0, 0);
  gmlake_free(q, 0, 0, 0);
}

TEST_F(CApiTraceTest, SegmentsCoverTheirBlocksAndTooSmallArraysGetOnlyTheCounts) {
  void* p = gmlake_malloc(3 * kMiB, 0, 0);
  void* q = gmlake_malloc(kKiB, 0, 0);
  std::size_t n_segments = 0, n_blocks = 0;
  ASSERT_EQ(gmlake_get_segments(0, nullptr, 0, &n_segments, nullptr, 0, &n_blocks), GMLAKE_OK);
  ASSERT_GE(n_segments, 1u);
  ASSERT_GE(n_blocks, 2u);
  std::vector<gmlake_segment> segments(n_segments);
  std::vector<gmlake_block> blocks(n_blocks);
  ASSERT_EQ(gmlake_get_segments(0, segments.data(), segments.size(), &n_segments, blocks.data(), blocks.size(),
                                &n_blocks),
            GMLAKE_OK);
  std::uint64_t allocated = 0;
  int live = 0;
  for (const gmlake_segment& s : segments) {
    std::uint64_t covered = 0, at = s.address;
    for (std::uint64_t b = s.first_block; b < s.first_block + s.num_blocks; ++b) {
      EXPECT_EQ(blocks[b].address, at);
      at += blocks[b].size_bytes;
      covered += blocks[b].size_bytes;
      if (blocks[b].state == 0) {
        allocated += blocks[b].size_bytes;
        ++live;
      }
    }
    EXPECT_EQ(covered, s.size_bytes);
    EXPECT_GE(s.num_chunks, 1u);
  }
  EXPECT_EQ(live, 2);
  gmlake_stats stats{};
  ASSERT_EQ(gmlake_get_stats(0, &stats), GMLAKE_OK);
  EXPECT_EQ(allocated, static_cast<std::uint64_t>(stats.allocated_bytes.current));
  gmlake_free(p, 0, 0, 0);
  gmlake_free(q, 0, 0, 0);
}

TEST_F(CApiTraceTest, BadArgumentsAreRefusedWithAMessage) {
  std::size_t count = 0;
  EXPECT_EQ(gmlake_drain_trace(0, nullptr, 4, &count), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_drain_trace(0, nullptr, 0, nullptr), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_set_tracing(GMLAKE_MAX_DEVICES, 10), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_get_segments(0, nullptr, 1, &count, nullptr, 0, &count), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gmlake_last_error()), "");
  EXPECT_NE(gmlake_malloc(kKiB, 0, 0), nullptr) << "the pool stays usable";
}

}  // namespace
}  // namespace gmlake
