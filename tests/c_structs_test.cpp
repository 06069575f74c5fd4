// The C API's structs (src/frontends/c_api/c_structs.h): every stat field copied, arrays written only when they
// fit, and the checks of what callers pass.
#include "frontends/c_api/c_structs.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "expect_error.h"

namespace gmlake::capi {
namespace {

TEST(CStructsTest, EveryStatOfTheTableIsCopied) {
  Stats s;
  std::int64_t v = 1;
#define GMLAKE_TEST_SET_GAUGE(name, torch_key) \
  s.name.current = v++;                        \
  s.name.peak = v++;
#define GMLAKE_TEST_SET_COUNTER(name, torch_key) s.name = static_cast<std::uint64_t>(v++);
  GMLAKE_GAUGE_FIELDS(GMLAKE_TEST_SET_GAUGE)
  GMLAKE_COUNTER_FIELDS(GMLAKE_TEST_SET_COUNTER)
  const gmlake_stats c = c_stats_of(s);
#define GMLAKE_TEST_CHECK_GAUGE(name, torch_key) \
  EXPECT_EQ(c.name.current, s.name.current);     \
  EXPECT_EQ(c.name.peak, s.name.peak);
#define GMLAKE_TEST_CHECK_COUNTER(name, torch_key) EXPECT_EQ(c.name, s.name);
  GMLAKE_GAUGE_FIELDS(GMLAKE_TEST_CHECK_GAUGE)
  GMLAKE_COUNTER_FIELDS(GMLAKE_TEST_CHECK_COUNTER)
}

TEST(CStructsTest, BlocksAreWrittenOnlyWhenTheyFit) {
  const std::vector<BlockInfo> live{{0x1000, 512, 100, 0, false}, {0x2000, 1024, 1024, 0, true}};
  std::size_t count = 0;
  gmlake_block out[2]{};
  write_blocks(live, out, 1, &count);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(out[0].address, 0u) << "too small: nothing written";
  write_blocks(live, out, 2, &count);
  EXPECT_EQ(out[1].address, 0x2000u);
  EXPECT_EQ(out[1].state, 1) << "pending free";
  EXPECT_EQ(out[0].requested_bytes, 100u);
}

TEST(CStructsTest, RestoredBlocksMustBeAllocated) {
  const gmlake_block blocks[] = {{0x1000, 512, 10, 0}, {0x2000, 512, 10, 2}};
  test::expect_error([&] { blocks_from_c(blocks, 2); }, ErrorCode::kInvalidArgument, "block 1 has state 2");
  test::expect_error([&] { blocks_from_c(nullptr, 1); }, ErrorCode::kInvalidArgument, "blocks is NULL");
  const std::vector<BlockInfo> one = blocks_from_c(blocks, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].address, 0x1000u);
  EXPECT_FALSE(one[0].pending_free);
  EXPECT_TRUE(blocks_from_c(nullptr, 0).empty());
}

TEST(CStructsTest, SegmentsNameTheirPoolAndIndexTheirBlocks) {
  SegmentInfo a{};
  a.address = 0x10000;
  a.size_bytes = 2048;
  a.blocks = {SegmentBlock{0x10000, 1024, 1000, SegmentBlockState::kActiveAllocated},
              SegmentBlock{0x10400, 1024, 0, SegmentBlockState::kInactive}};
  SegmentInfo b = a;
  b.address = 0x20000;
  const std::vector<OwnedSegment> found{{kMainPoolId, a}, {PoolId{4, 5}, b}};
  gmlake_segment segments[2]{};
  gmlake_block blocks[4]{};
  std::size_t n_segments = 0, n_blocks = 0;
  write_segments(found, segments, 2, &n_segments, blocks, 3, &n_blocks);
  EXPECT_EQ(n_blocks, 4u);
  EXPECT_EQ(segments[0].address, 0u) << "the blocks do not fit: nothing written";
  write_segments(found, segments, 2, &n_segments, blocks, 4, &n_blocks);
  EXPECT_EQ(segments[1].first_block, 2u);
  EXPECT_EQ(segments[1].pool.first, 4u);
  EXPECT_EQ(segments[1].pool.second, 5u);
  EXPECT_EQ(blocks[3].state, 2);
}

TEST(CStructsTest, AnIpcHandleIsCopiedOnlyIntoABufferLargeEnough) {
  const IpcExport exported{"0123456789", 7};
  std::size_t bytes = 4, offset = 0;
  char buffer[16]{};
  test::expect_error([&] { write_ipc_export(exported, buffer, &bytes, &offset); }, ErrorCode::kInvalidArgument,
                     "needs 10 bytes, the buffer has 4");
  EXPECT_EQ(bytes, 10u) << "*handle_bytes says how many";
  EXPECT_EQ(offset, 7u);
  write_ipc_export(exported, buffer, &bytes, &offset);
  EXPECT_EQ(std::string(buffer, bytes), "0123456789");
  bytes = 0;
  write_ipc_export(exported, nullptr, &bytes, &offset);
  EXPECT_EQ(bytes, 10u) << "a NULL buffer asks for the size";
}

TEST(CStructsTest, TraceEventsKeepTheirActions) {
  const std::vector<SnapshotEvent> events{SnapshotEvent{SnapshotAction::kSegmentMap, 0x4000, 4096, 3, 99}};
  gmlake_trace_event out[1]{};
  std::size_t count = 0;
  write_trace(events, out, &count);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(out[0].action, GMLAKE_TRACE_SEGMENT_MAP);
  EXPECT_EQ(out[0].size_bytes, 4096u);
  EXPECT_EQ(out[0].time_us, 99);
  test::expect_error([] { require(false, "gmlake_x: out is NULL"); }, ErrorCode::kInvalidArgument, "out is NULL");
}

}  // namespace
}  // namespace gmlake::capi
