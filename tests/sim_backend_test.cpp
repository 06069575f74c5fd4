// What the sim backend promises beyond the conformance suite (backend_test.cpp): where its fake addresses and
// handles come from.
#include "gmlake/sim_backend.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

TEST(SimBackendTest, AddressesAreHighIncreasingAndNeverReused) {
  SimBackend b;
  EXPECT_FALSE(b.host_accessible());
  EXPECT_EQ(b.name(), "sim");
  const std::uintptr_t first = b.reserve(2 * kChunkBytes);
  EXPECT_GE(first, kSimBaseAddress);
  b.address_free(first, 2 * kChunkBytes);
  const std::uintptr_t second = b.reserve(kChunkBytes);
  EXPECT_GE(second, first + 2 * kChunkBytes);  // the freed range is not handed out again
  const std::uintptr_t third = b.reserve(kChunkBytes);
  EXPECT_GE(third, second + kChunkBytes);
}

TEST(SimBackendTest, HandlesAreIncreasingAndNeverReused) {
  SimBackend b;
  const ChunkHandle first = b.create(kChunkBytes);
  b.release(first);
  const ChunkHandle second = b.create(kChunkBytes);
  EXPECT_GT(second.value, first.value);
}

TEST(SimBackendTest, AddressesFollowASmallerGranularity) {
  SimBackend b(64 * kKiB);
  const std::uintptr_t first = b.reserve(64 * kKiB);
  const std::uintptr_t second = b.reserve(128 * kKiB);
  EXPECT_EQ(first % (64 * kKiB), 0u);
  EXPECT_EQ(second, first + 64 * kKiB);
}

TEST(SimBackendTest, ReservingPastTheEndOfTheAddressSpaceThrowsBackendErrorAndChangesNothing) {
  SimBackend b;
  const std::uint64_t half_bytes = std::uint64_t{1} << 63;
  const std::uintptr_t addr = b.reserve(half_bytes);
  EXPECT_THROW(b.reserve(half_bytes), BackendError);
  EXPECT_EQ(b.live_reservations(), 1u);
  b.address_free(addr, half_bytes);
  EXPECT_NO_THROW(b.reserve(kChunkBytes));  // what is left of the address space is still usable
}

TEST(SimBackendTest, APhysicalLimitCountsLiveChunkBytesOnly) {
  SimBackend b(kChunkBytes, 4 * kChunkBytes);
  EXPECT_EQ(b.physical_limit_bytes(), 4 * kChunkBytes);
  const std::uintptr_t addr = b.reserve(64 * kChunkBytes);  // address space does not count
  const ChunkHandle chunk = b.create(4 * kChunkBytes);
  EXPECT_THROW(b.create(kChunkBytes), OutOfMemoryError);
  b.release(chunk);
  EXPECT_NO_THROW(b.create(4 * kChunkBytes));
  b.address_free(addr, 64 * kChunkBytes);
}

}  // namespace
}  // namespace gmlake
