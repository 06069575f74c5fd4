// make_peer_source (src/policies/gmlake/peer_source.*): which source a config and a lake give the engine, and how
// each answers when nothing is borrowed yet.
#include "policies/gmlake/peer_source.h"

#include <gtest/gtest.h>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "fake_chunk_provider.h"
#include "gmlake/sim_backend.h"
#include "policies/gmlake/peer_chunks.h"
#include "policies/gmlake/provided_chunks.h"

namespace gmlake::engine {
namespace {

TEST(PeerSourceTest, WithoutPeersOrLenderTheSourceIsNeverEnabled) {
  SimBackend sim;
  Stats stats;
  ChunkStore store(sim, PageGeometry(kPageBytes), stats);
  const auto source = make_peer_source(Config{}, sim, store);
  EXPECT_FALSE(source->enabled());
  EXPECT_EQ(source->room_bytes(0), 0u);
  EXPECT_FALSE(source->may_recall());
  EXPECT_TRUE(source->take_recalls().empty());
  std::uint64_t retries = 0;
  EXPECT_EQ(source->borrow(store, Pages{1}, retries), kNoChunk);
}

TEST(PeerSourceTest, PeerDevicesGiveTheDirectSourceWhosePoolReleasesPeerChunksThroughIt) {
  HostBackend host(kPageBytes, {4 * kMiB, 4 * kMiB});
  Stats stats;
  ChunkStore store(host, PageGeometry(kPageBytes), stats);
  const auto source = make_peer_source(parse_config("peer_devices:1,peer_budget_bytes:2M"), host, store);
  ASSERT_NE(dynamic_cast<PeerChunks*>(source.get()), nullptr);
  EXPECT_TRUE(source->enabled());
  EXPECT_EQ(source->room_bytes(0), 2 * kMiB);
  std::uint64_t retries = 0;
  const ChunkId id = source->borrow(store, Pages{4}, retries);  // the budget allows one page
  ASSERT_NE(id, kNoChunk);
  EXPECT_EQ(store[id].pages, Pages{1});
  EXPECT_EQ(host.live_chunk_bytes(1), 2 * kMiB);
  EXPECT_EQ(source->borrow(store, Pages{1}, retries), kNoChunk) << "the budget is spent";
  store.release(id);
  EXPECT_EQ(host.live_chunks(), 0u);
  store.check_invariants();
}

TEST(PeerSourceTest, AGivenLakeGivesTheProvidedSourceOverIt) {
  HostBackend host(kPageBytes);
  test::FakeChunkProvider lake(host, 0);
  Stats stats;
  ChunkStore store(host, PageGeometry(kPageBytes), stats);
  const auto source = make_peer_source(parse_config("peer_budget_bytes:8M"), host, store, &lake);
  ASSERT_NE(dynamic_cast<ProvidedChunks*>(source.get()), nullptr);
  EXPECT_TRUE(source->enabled());
  EXPECT_EQ(source->room_bytes(6 * kMiB), 2 * kMiB);
  EXPECT_FALSE(source->may_recall()) << "nothing lent";
  EXPECT_EQ(source->imported_bytes(), 0u);
  std::uint64_t retries = 0;
  const ChunkId id = source->borrow(store, Pages{1}, retries);
  ASSERT_NE(id, kNoChunk);
  EXPECT_EQ(source->imported_bytes(), kPageBytes);
  store.release(id);  // through the lake
  EXPECT_TRUE(lake.lent().empty());
  EXPECT_EQ(host.live_chunks(), 0u);
}

TEST(PeerSourceTest, ALakeSocketWithNoLakeGivenOrALakeBesidePeerDevicesIsAConfigError) {
  HostBackend host(kPageBytes, {4 * kMiB, 4 * kMiB});
  test::FakeChunkProvider lake(host, 0);
  Stats stats;
  ChunkStore store(host, PageGeometry(kPageBytes), stats);
  test::expect_error([&] { make_peer_source(parse_config("lake_socket:@nobody"), host, store); }, ErrorCode::kConfig,
                     "lake_socket: set, but the engine was given no lake");
  test::expect_error([&] { make_peer_source(parse_config("peer_devices:1"), host, store, &lake); }, ErrorCode::kConfig,
                     "peer_devices: cannot be combined with a lake");
}

}  // namespace
}  // namespace gmlake::engine
