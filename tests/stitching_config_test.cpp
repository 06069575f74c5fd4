// The gmlake policy refuses a config it cannot work with before it computes anything from it.
#include <gtest/gtest.h>

#include "gmlake/error.h"
#include "gmlake/sim_backend.h"
#include "policies/gmlake/stitching_allocator.h"

namespace gmlake::engine {
namespace {

TEST(StitchingConfigTest, AnInvalidConfigIsRefusedByTheConstructor) {
  SimBackend sim;
  Config zero_chunk;
  zero_chunk.page_bytes = 0;
  EXPECT_THROW(StitchingAllocator(zero_chunk, sim), Error);
  Config odd_max;
  odd_max.max_chunk_bytes = 3 * kMiB;  // not a multiple of chunk_bytes
  EXPECT_THROW(StitchingAllocator(odd_max, sim), Error);
  EXPECT_EQ(sim.live_reservations(), 0u);
}

}  // namespace
}  // namespace gmlake::engine
