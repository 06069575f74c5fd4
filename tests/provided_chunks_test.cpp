// ProvidedChunks (policies/gmlake/provided_chunks.*): the engine borrowing through a ChunkProvider it was given
// (include/gmlake/chunk_provider.h), here a FakeChunkProvider in this process (no socket): sizes halved on out of
// memory, the budget, chunks given back through the provider, recalls served by the engine, a provider gone.
// The lake's own provider over a socket is lake_peers_test.cpp's.
#include "policies/gmlake/provided_chunks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "expect_error.h"
#include "fake_chunk_provider.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "policies/gmlake/stitching_allocator.h"

namespace gmlake::engine {
namespace {

using test::FakeChunkProvider;

TEST(ProvidedChunksTest, ASizeTheProviderHasNoRoomForIsHalvedAndTheChunkGoesBackThroughIt) {
  HostBackend host(kPageBytes);
  FakeChunkProvider provider(host, 4 * kMiB);
  Stats stats;
  ChunkStore store(host, PageGeometry(kPageBytes), stats);
  ProvidedChunks source(provider, 0);
  store.set_peer_source(&source);
  EXPECT_TRUE(source.enabled());
  std::uint64_t retries = 0;
  const ChunkId id = source.borrow(store, Pages{4}, retries);  // 8 MiB refused, 4 MiB lent
  ASSERT_NE(id, kNoChunk);
  EXPECT_EQ(provider.asked(), (std::vector<std::uint64_t>{8 * kMiB, 4 * kMiB}));
  EXPECT_EQ(retries, 1u);
  EXPECT_EQ(store[id].pages, Pages{2});
  EXPECT_TRUE(store[id].on_peer);
  EXPECT_EQ(store.peer_bytes(), 4 * kMiB);
  EXPECT_EQ(source.imported_bytes(), 4 * kMiB);
  EXPECT_EQ(host.live_imported_bytes(), 4 * kMiB);
  EXPECT_EQ(source.borrow(store, Pages{1}, retries), kNoChunk) << "the provider's memory is spent";
  store.check_invariants();
  store.release(id);  // through the provider
  EXPECT_TRUE(provider.lent().empty());
  EXPECT_EQ(provider.lender().live_chunks(), 0u);
  EXPECT_EQ(host.live_chunks(), 0u);
  store.check_invariants();
}

TEST(ProvidedChunksTest, TheBudgetBoundsWhatIsAskedAndAProviderGoneIsNotAsked) {
  HostBackend host(kPageBytes);
  FakeChunkProvider provider(host, 0);
  Stats stats;
  ChunkStore store(host, PageGeometry(kPageBytes), stats);
  ProvidedChunks source(provider, 2 * kMiB);
  store.set_peer_source(&source);
  std::uint64_t retries = 0;
  const ChunkId id = source.borrow(store, Pages{4}, retries);
  ASSERT_NE(id, kNoChunk);
  EXPECT_EQ(store[id].pages, Pages{1}) << "the budget holds one page";
  EXPECT_EQ(source.borrow(store, Pages{1}, retries), kNoChunk) << "the budget is spent";
  EXPECT_EQ(provider.asked().size(), 1u) << "nothing asked past the budget";
  provider.go();
  EXPECT_FALSE(source.enabled());
  EXPECT_EQ(source.room_bytes(0), 0u);
  EXPECT_TRUE(source.may_recall());
  const std::vector<ChunkHandle> recalled = source.take_recalls();
  ASSERT_EQ(recalled.size(), 1u) << "a provider gone recalls every chunk";
  EXPECT_EQ(store.find(recalled[0]), id);
  store.release(id);
  EXPECT_EQ(source.borrow(store, Pages{1}, retries), kNoChunk);
  EXPECT_EQ(provider.asked().size(), 1u) << "a provider gone is not asked";
  test::expect_error([&] { source.give_back(host, ChunkHandle{12345}); }, ErrorCode::kInvalidArgument, "not lent");
  EXPECT_EQ(host.live_chunks(), 0u);
}

// The engine given the provider: past its own device it borrows; a recalled chunk under a live block takes no
// new block and goes back at the first serve_recalls after the free of that block.
TEST(ProvidedChunksTest, TheEngineBorrowsPastItsDeviceAndGivesARecalledChunkBackOnceNoBlockUsesIt) {
  HostBackend host(kPageBytes, 8 * kMiB);
  FakeChunkProvider provider(host, 0);
  {
    StitchingAllocator a(parse_config("max_chunk_bytes:2M,grow_bytes:2M,headroom_permille:0"), host, nullptr, nullptr,
                         &provider);
    void* own = a.allocate(8 * kMiB, 0);
    void* lent = a.allocate(4 * kMiB, 0);  // the own device is full: from the provider
    a.check_invariants();
    EXPECT_EQ(a.stats().peer_reserved_bytes.current, static_cast<std::int64_t>(4 * kMiB));
    std::memset(lent, 0x5A, 4 * kMiB);
    ASSERT_EQ(provider.lent().size(), 1u) << "one loan for the block";
    provider.recall(provider.lent()[0]);
    a.serve_recalls();  // the chunk is marked recalled (the Pool calls it around every allocation and free)
    a.check_invariants();
    EXPECT_EQ(provider.lent().size(), 1u) << "a live block uses it";
    a.deallocate(lent);
    a.check_invariants();
    EXPECT_EQ(provider.lent().size(), 1u) << "the engine never serves recalls by itself";
    a.serve_recalls();  // its last block went: it goes back now
    a.check_invariants();
    EXPECT_TRUE(provider.lent().empty());
    EXPECT_EQ(a.stats().peer_reserved_bytes.current, 0);
    a.deallocate(own);
    a.check_invariants();
  }
  EXPECT_EQ(host.live_chunks(), 0u);
  EXPECT_EQ(provider.lender().live_chunks(), 0u);
}

TEST(ProvidedChunksTest, ALakeBesidePeerDevicesOrALakeSocketWithNoLakeIsAConfigError) {
  HostBackend host(kPageBytes, {4 * kMiB, 4 * kMiB});
  FakeChunkProvider provider(host, 0);
  test::expect_error([&] { StitchingAllocator(parse_config("peer_devices:1"), host, nullptr, nullptr, &provider); },
                     ErrorCode::kConfig, "peer_devices: cannot be combined with a lake");
  test::expect_error([&] { StitchingAllocator(parse_config("lake_socket:@nobody"), host); }, ErrorCode::kConfig,
                     "lake_socket: set, but the engine was given no lake");
  EXPECT_EQ(host.live_chunks(), 0u);
}

}  // namespace
}  // namespace gmlake::engine
