// ChunkPool (src/policies/gmlake/chunk_pool.h) on the sim backend.
#include "policies/gmlake/chunk_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "backends/fault/fault_backend.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"

namespace gmlake::engine {
namespace {

TEST(ChunkPoolTest, CreateAndReleaseKeepReservedBytesAndTheBackendInStep) {
  SimBackend sim;
  Stats stats;
  ChunkPool pool(sim, kPageBytes, stats);
  const ChunkId a = pool.create(3);
  const ChunkId b = pool.create(1);
  EXPECT_EQ(stats.reserved_bytes.current, static_cast<std::int64_t>(4 * kPageBytes));
  EXPECT_EQ(sim.live_chunk_bytes(), 4 * kPageBytes);
  EXPECT_EQ(pool.live_chunks(), 2u);
  pool.release(a);
  EXPECT_EQ(stats.reserved_bytes.current, static_cast<std::int64_t>(kPageBytes));
  EXPECT_EQ(stats.chunks_created, 2u);
  EXPECT_EQ(stats.chunks_released, 1u);
  const ChunkId c = pool.create(2);  // reuses a's record
  EXPECT_EQ(c, a);
  EXPECT_EQ(pool[c].pages, 2u);
  pool.release(b);
  pool.release(c);
  EXPECT_EQ(sim.live_chunks(), 0u);
}

TEST(ChunkPoolTest, AnAdoptedChunkIsAPeerChunkAndARecalledOneIsListedUntilReleased) {
  SimBackend sim;
  Stats stats;
  ChunkPool pool(sim, kPageBytes, stats);
  const ChunkId own = pool.create(1);
  const ChunkId lent = pool.adopt(sim.create(2 * kPageBytes), 2);  // as a PeerSource records a loan
  EXPECT_TRUE(pool[lent].on_peer);
  EXPECT_EQ(pool.peer_bytes(), 2 * kPageBytes);
  EXPECT_EQ(stats.reserved_bytes.current, static_cast<std::int64_t>(3 * kPageBytes));
  EXPECT_EQ(pool.find(pool[lent].handle), lent);
  EXPECT_EQ(pool.find(ChunkHandle{12345}), kNoChunk);
  pool.recall(own);  // not a peer chunk: nobody can recall it
  pool.recall(lent);
  pool.recall(lent);  // once
  EXPECT_FALSE(pool[own].recalled);
  EXPECT_EQ(pool.recalled(), std::vector<ChunkId>{lent});
  pool.check_invariants();
  pool.add_free(lent);  // a peer chunk that turns free goes back at once
  EXPECT_TRUE(pool.recalled().empty());
  EXPECT_EQ(pool.peer_bytes(), 0u);
  EXPECT_EQ(pool.free_chunks(), 0u);
  pool.check_invariants();
  pool.release(own);
  EXPECT_EQ(sim.live_chunks(), 0u);
}

TEST(ChunkPoolTest, ARecalledChunkNeverEntersTheFreeIndexEvenWhenItsReleaseFails) {
  SimBackend sim;
  FaultBackend faulty(sim);
  Stats stats;
  ChunkPool pool(faulty, kPageBytes, stats);
  const ChunkId kept = pool.adopt(faulty.create(kPageBytes), 1);
  const ChunkId lent = pool.adopt(faulty.create(kPageBytes), 1);
  faulty.arm({BackendCall::kRelease, 1, 2});
  pool.add_free(kept);  // its release fails: indexed, as any free chunk
  EXPECT_EQ(pool.free_chunks(), 1u);
  pool.recall(kept);    // recalled while free: out of the index
  EXPECT_EQ(pool.free_chunks(), 0u);
  pool.recall(lent);
  pool.add_free(lent);  // its release fails too: it stays out of the index
  EXPECT_EQ(pool.free_chunks(), 0u);
  EXPECT_EQ(pool.largest_free(), kNoChunk) << "no recalled chunk may serve a new block";
  EXPECT_EQ(pool.recalled().size(), 2u);
  pool.check_invariants();
  pool.release(kept);
  pool.release(lent);
  EXPECT_TRUE(pool.recalled().empty());
  EXPECT_EQ(sim.live_chunks(), 0u);
  pool.check_invariants();
}

TEST(ChunkPoolTest, TheFreeIndexFindsTheLargestFreeChunkOfAtMostNPages) {
  SimBackend sim;
  Stats stats;
  ChunkPool pool(sim, kPageBytes, stats);
  for (std::uint64_t pages : {1, 4, 8}) pool.add_free(pool.create(pages));
  EXPECT_EQ(pool.free_pages(), 13u);
  EXPECT_EQ(pool[pool.largest_free_at_most(5)].pages, 4u);
  EXPECT_EQ(pool[pool.largest_free_at_most(100)].pages, 8u);
  EXPECT_EQ(pool[pool.largest_free()].pages, 8u);
  const ChunkId four = pool.largest_free_at_most(4);
  pool.take_free(four);
  EXPECT_EQ(pool.largest_free_at_most(7), pool.largest_free_at_most(1));
  EXPECT_EQ(pool.free_pages(), 9u);
  pool.check_invariants();
  pool.release_all_free();
  EXPECT_EQ(pool.free_chunks(), 0u);
  EXPECT_EQ(pool.live_chunks(), 1u);  // the one taken out
  pool.release(four);
}

// Among free chunks of one size, the one entered last is found first, and any of them can be taken out by its
// own key (not by a scan of its size: a fuzz input with thousands of one-page chunks took seconds per free).
TEST(ChunkPoolTest, AmongChunksOfOneSizeTheLastEnteredIsFoundFirstAndAnyCanBeTakenOut) {
  SimBackend sim;
  Stats stats;
  ChunkPool pool(sim, kPageBytes, stats);
  std::vector<ChunkId> ones;
  for (int i = 0; i < 1000; ++i) ones.push_back(pool.create(1));
  for (const ChunkId id : ones) pool.add_free(id);
  const ChunkId two = pool.create(2);
  pool.add_free(two);
  pool.check_invariants();
  EXPECT_EQ(pool.largest_free_at_most(1), ones.back());
  EXPECT_EQ(pool.largest_free_at_most(5), two);
  pool.take_free(ones[500]);  // from the middle of its size
  pool.take_free(ones.back());
  EXPECT_EQ(pool.largest_free_at_most(1), ones[998]);
  EXPECT_EQ(pool.free_chunks(), 999u);
  EXPECT_EQ(pool.free_pages(), 1000u);
  pool.check_invariants();
  EXPECT_THROW(pool.take_free(ones[500]), std::logic_error) << "taken already";
  pool.add_free(ones[500]);  // back in: now the last entered of its size
  EXPECT_EQ(pool.largest_free_at_most(1), ones[500]);
  pool.check_invariants();
  pool.release_all_free();
  pool.release(ones.back());
  EXPECT_EQ(pool.live_chunks(), 0u);
}

TEST(ChunkPoolTest, ACreateTheBackendRefusesChangesNothing) {
  SimBackend sim(kPageBytes, 4 * kPageBytes);
  Stats stats;
  ChunkPool pool(sim, kPageBytes, stats);
  EXPECT_THROW(pool.create(5), OutOfMemoryError);
  EXPECT_EQ(pool.live_chunks(), 0u);
  EXPECT_EQ(stats.reserved_bytes.current, 0);
  pool.release(pool.create(4));
}

}  // namespace
}  // namespace gmlake::engine
