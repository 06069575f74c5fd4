#include "gmlake/backend.h"

#include <gtest/gtest.h>

#include "gmlake/error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

TEST(SimBackendTest, RoundTripCountsEveryCallAndLeavesNothingLive) {
  SimBackend backend;
  const std::uintptr_t addr = backend.reserve(4 * kChunkBytes);
  EXPECT_GE(addr, kSimBaseAddress);
  const ChunkHandle chunk = backend.create(kChunkBytes);
  backend.map(addr, kChunkBytes, chunk);
  EXPECT_FALSE(backend.is_accessible(addr, kChunkBytes));
  backend.set_access(addr, kChunkBytes);
  EXPECT_TRUE(backend.is_accessible(addr, kChunkBytes));
  EXPECT_THROW(backend.release(chunk), Error);
  backend.unmap(addr, kChunkBytes);
  backend.release(chunk);
  backend.address_free(addr, 4 * kChunkBytes);
  for (std::size_t i = 0; i < kBackendCallKinds; ++i) EXPECT_EQ(backend.counters().calls[i], 1u) << i;
  EXPECT_EQ(backend.live_chunks() + backend.live_mappings() + backend.live_reservations(), 0u);
}

TEST(SimBackendTest, CreateBeyondThePhysicalLimitThrowsOutOfMemory) {
  SimBackend backend(kChunkBytes, 2 * kChunkBytes);
  const ChunkHandle a = backend.create(2 * kChunkBytes);
  EXPECT_THROW(backend.create(kChunkBytes), OutOfMemoryError);
  backend.release(a);
  EXPECT_NO_THROW(backend.create(kChunkBytes));
}

}  // namespace
}  // namespace gmlake
