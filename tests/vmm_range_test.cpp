// VmmRange: the reserve-once, map-at-the-tail layer under every classic pool, on the host and sim backends.
#include "gmlake/classic/vmm_range.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake::classic {
namespace {

TEST(VmmRangeTest, ReservationIsRoundedToTheGranularityAndNothingIsMappedAtFirst) {
  SimBackend backend;
  VmmRange range(backend, kPageBytes + 1);
  EXPECT_EQ(range.reserved_bytes(), 2 * kPageBytes);
  EXPECT_EQ(range.mapped_bytes(), 0u);
  EXPECT_EQ(range.base() % kPageBytes, 0u);
  EXPECT_EQ(backend.live_reservations(), 1u);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST(VmmRangeTest, MappedChunksFollowEachOtherAndTheRunGetsOneSetAccess) {
  SimBackend backend;
  VmmRange range(backend, 8 * kPageBytes);
  range.map_chunks(kPageBytes, 3);
  range.map_chunks(2 * kPageBytes);
  EXPECT_EQ(range.mapped_bytes(), 5 * kPageBytes);
  EXPECT_EQ(range.chunk_count(), 4u);
  EXPECT_EQ(range.last_chunk_bytes(), 2 * kPageBytes);
  EXPECT_TRUE(backend.is_accessible(range.base(), 5 * kPageBytes));
  EXPECT_FALSE(backend.is_accessible(range.base() + 5 * kPageBytes, kPageBytes));
  EXPECT_EQ(backend.counters()[BackendCall::kSetAccess], 2u);
  EXPECT_EQ(backend.counters()[BackendCall::kMap], 4u);
}

TEST(VmmRangeTest, HostBytesWrittenInOneChunkAndReadAcrossTheChunkBoundaryAreKept) {
  HostBackend backend;
  VmmRange range(backend, 4 * kPageBytes);
  range.map_chunks(kPageBytes, 2);
  char* bytes = static_cast<char*>(range.data());
  std::memset(bytes + kPageBytes - 8, 'x', 16);
  EXPECT_EQ(bytes[kPageBytes - 8], 'x');
  EXPECT_EQ(bytes[kPageBytes + 7], 'x');
}

TEST(VmmRangeTest, UnmappingTheLastChunkGivesItBackToTheBackend) {
  SimBackend backend;
  VmmRange range(backend, 4 * kPageBytes);
  range.map_chunks(kPageBytes, 2);
  range.unmap_last_chunk();
  EXPECT_EQ(range.mapped_bytes(), kPageBytes);
  EXPECT_EQ(backend.live_chunks(), 1u);
  EXPECT_FALSE(backend.is_accessible(range.base() + kPageBytes, kPageBytes));
}

TEST(VmmRangeTest, ABackendOutOfMemoryPartWayThroughARunLeavesTheRangeAsItWas) {
  SimBackend backend(kPageBytes, 3 * kPageBytes);
  VmmRange range(backend, 8 * kPageBytes);
  range.map_chunks(kPageBytes);
  EXPECT_THROW(range.map_chunks(kPageBytes, 3), OutOfMemoryError);
  EXPECT_EQ(range.mapped_bytes(), kPageBytes);
  EXPECT_EQ(range.chunk_count(), 1u);
  EXPECT_EQ(backend.live_chunks(), 1u);
  EXPECT_EQ(backend.live_mappings(), 1u);
  range.map_chunks(kPageBytes, 2);  // still usable up to the limit
  EXPECT_EQ(range.mapped_bytes(), 3 * kPageBytes);
}

TEST(VmmRangeTest, BadSizesAreInvalidArgumentsAndChangeNothing) {
  SimBackend backend;
  EXPECT_THROW(VmmRange(backend, 0), Error);
  VmmRange range(backend, 2 * kPageBytes);
  EXPECT_THROW(range.map_chunks(kPageBytes / 2), Error);
  EXPECT_THROW(range.map_chunks(kPageBytes, 3), Error);
  EXPECT_THROW(range.map_chunks(kPageBytes, 0), Error);
  EXPECT_THROW(range.unmap_last_chunk(), Error);
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(range.mapped_bytes(), 0u);
}

TEST(VmmRangeTest, DestructionAndMoveLeaveNothingBehind) {
  SimBackend backend;
  {
    VmmRange a(backend, 4 * kPageBytes);
    a.map_chunks(kPageBytes, 2);
    VmmRange b(std::move(a));
    EXPECT_EQ(a.base(), 0u);
    EXPECT_EQ(b.mapped_bytes(), 2 * kPageBytes);
    VmmRange c(backend, kPageBytes);
    c = std::move(b);  // c's own reservation is freed
    EXPECT_EQ(backend.live_reservations(), 1u);
  }
  EXPECT_EQ(backend.live_reservations(), 0u);
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_mappings(), 0u);
}

}  // namespace
}  // namespace gmlake::classic
