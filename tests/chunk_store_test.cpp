// ChunkStore (src/policies/gmlake/chunk_store.h) on the sim backend.
#include "policies/gmlake/chunk_store.h"

#include <gtest/gtest.h>

#include <vector>

#include "backends/fault/fault_backend.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"

namespace gmlake::engine {
namespace {

TEST(ChunkStoreTest, CreateAndReleaseKeepReservedBytesAndTheBackendInStep) {
  SimBackend sim;
  Stats stats;
  ChunkStore store(sim, PageGeometry(kPageBytes), stats);
  const ChunkId a = store.create(Pages{3});
  const ChunkId b = store.create(Pages{1});
  EXPECT_EQ(stats.reserved_bytes.current, static_cast<std::int64_t>(4 * kPageBytes));
  EXPECT_EQ(sim.live_chunk_bytes(), 4 * kPageBytes);
  EXPECT_EQ(store.live_chunks(), 2u);
  store.release(a);
  EXPECT_EQ(stats.reserved_bytes.current, static_cast<std::int64_t>(kPageBytes));
  EXPECT_EQ(stats.chunks_created, 2u);
  EXPECT_EQ(stats.chunks_released, 1u);
  const ChunkId c = store.create(Pages{2});  // reuses a's record
  EXPECT_EQ(c, a);
  EXPECT_EQ(store[c].pages, Pages{2});
  store.release(b);
  store.release(c);
  EXPECT_EQ(sim.live_chunks(), 0u);
}

TEST(ChunkStoreTest, AnAdoptedChunkIsAPeerChunkAndARecalledOneIsListedUntilReleased) {
  SimBackend sim;
  Stats stats;
  ChunkStore store(sim, PageGeometry(kPageBytes), stats);
  const ChunkId own = store.create(Pages{1});
  const ChunkId lent = store.adopt(sim.create(2 * kPageBytes), Pages{2});  // as a PeerSource records a loan
  EXPECT_TRUE(store[lent].on_peer);
  EXPECT_EQ(store.peer_bytes(), 2 * kPageBytes);
  EXPECT_EQ(stats.reserved_bytes.current, static_cast<std::int64_t>(3 * kPageBytes));
  EXPECT_EQ(store.find(store[lent].handle), lent);
  EXPECT_EQ(store.find(ChunkHandle{12345}), kNoChunk);
  store.recall(own);  // not a peer chunk: nobody can recall it
  store.recall(lent);
  store.recall(lent);  // once
  EXPECT_FALSE(store[own].recalled);
  EXPECT_EQ(store.recalled(), std::vector<ChunkId>{lent});
  store.check_invariants();
  store.add_free(lent);  // a peer chunk that turns free goes back at once
  EXPECT_TRUE(store.recalled().empty());
  EXPECT_EQ(store.peer_bytes(), 0u);
  EXPECT_EQ(store.free_chunks(), 0u);
  store.check_invariants();
  store.release(own);
  EXPECT_EQ(sim.live_chunks(), 0u);
}

TEST(ChunkStoreTest, ARecalledChunkNeverEntersTheFreeIndexEvenWhenItsReleaseFails) {
  SimBackend sim;
  FaultBackend faulty(sim);
  Stats stats;
  ChunkStore store(faulty, PageGeometry(kPageBytes), stats);
  const ChunkId kept = store.adopt(faulty.create(kPageBytes), Pages{1});
  const ChunkId lent = store.adopt(faulty.create(kPageBytes), Pages{1});
  faulty.arm({BackendCall::kRelease, 1, 2});
  store.add_free(kept);  // its release fails: indexed, as any free chunk
  EXPECT_EQ(store.free_chunks(), 1u);
  store.recall(kept);    // recalled while free: out of the index
  EXPECT_EQ(store.free_chunks(), 0u);
  store.recall(lent);
  store.add_free(lent);  // its release fails too: it stays out of the index
  EXPECT_EQ(store.free_chunks(), 0u);
  EXPECT_EQ(store.largest_free(), kNoChunk) << "no recalled chunk may serve a new block";
  EXPECT_EQ(store.recalled().size(), 2u);
  store.check_invariants();
  store.release(kept);
  store.release(lent);
  EXPECT_TRUE(store.recalled().empty());
  EXPECT_EQ(sim.live_chunks(), 0u);
  store.check_invariants();
}

TEST(ChunkStoreTest, TheFreeIndexFindsTheLargestFreeChunkOfAtMostNPages) {
  SimBackend sim;
  Stats stats;
  ChunkStore store(sim, PageGeometry(kPageBytes), stats);
  for (std::uint64_t pages : {1, 4, 8}) store.add_free(store.create(Pages{pages}));
  EXPECT_EQ(store.free_pages(), Pages{13});
  EXPECT_EQ(store[store.largest_free_at_most(Pages{5})].pages, Pages{4});
  EXPECT_EQ(store[store.largest_free_at_most(Pages{100})].pages, Pages{8});
  EXPECT_EQ(store[store.largest_free()].pages, Pages{8});
  const ChunkId four = store.largest_free_at_most(Pages{4});
  store.take_free(four);
  EXPECT_EQ(store.largest_free_at_most(Pages{7}), store.largest_free_at_most(Pages{1}));
  EXPECT_EQ(store.free_pages(), Pages{9});
  store.check_invariants();
  store.release_all_free();
  EXPECT_EQ(store.free_chunks(), 0u);
  EXPECT_EQ(store.live_chunks(), 1u);  // the one taken out
  store.release(four);
}

// Among free chunks of one size, the one entered last is found first, and any of them can be taken out by its
// own key (not by a scan of its size: a fuzz input with thousands of one-page chunks took seconds per free).
TEST(ChunkStoreTest, AmongChunksOfOneSizeTheLastEnteredIsFoundFirstAndAnyCanBeTakenOut) {
  SimBackend sim;
  Stats stats;
  ChunkStore store(sim, PageGeometry(kPageBytes), stats);
  std::vector<ChunkId> ones;
  for (int i = 0; i < 1000; ++i) ones.push_back(store.create(Pages{1}));
  for (const ChunkId id : ones) store.add_free(id);
  const ChunkId two = store.create(Pages{2});
  store.add_free(two);
  store.check_invariants();
  EXPECT_EQ(store.largest_free_at_most(Pages{1}), ones.back());
  EXPECT_EQ(store.largest_free_at_most(Pages{5}), two);
  store.take_free(ones[500]);  // from the middle of its size
  store.take_free(ones.back());
  EXPECT_EQ(store.largest_free_at_most(Pages{1}), ones[998]);
  EXPECT_EQ(store.free_chunks(), 999u);
  EXPECT_EQ(store.free_pages(), Pages{1000});
  store.check_invariants();
  EXPECT_THROW(store.take_free(ones[500]), std::logic_error) << "taken already";
  store.add_free(ones[500]);  // back in: now the last entered of its size
  EXPECT_EQ(store.largest_free_at_most(Pages{1}), ones[500]);
  store.check_invariants();
  store.release_all_free();
  store.release(ones.back());
  EXPECT_EQ(store.live_chunks(), 0u);
}

TEST(ChunkStoreTest, ACreateTheBackendRefusesChangesNothing) {
  SimBackend sim(kPageBytes, 4 * kPageBytes);
  Stats stats;
  ChunkStore store(sim, PageGeometry(kPageBytes), stats);
  EXPECT_THROW(store.create(Pages{5}), OutOfMemoryError);
  EXPECT_EQ(store.live_chunks(), 0u);
  EXPECT_EQ(stats.reserved_bytes.current, 0);
  store.release(store.create(Pages{4}));
}

}  // namespace
}  // namespace gmlake::engine
