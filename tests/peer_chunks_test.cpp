// The lake in the engine (policies/gmlake/peer_chunks.*, stitching_allocator_lake.cpp): large-pool pages backed by
// chunks of a peer device, on a sim backend of two devices. Every test checks the invariants after each step.
#include "policies/gmlake/peer_chunks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "backends/fault/fault_backend.h"
#include "policies/gmlake/stitching_allocator.h"

namespace gmlake::engine {
namespace {

// Page-granular, no headroom: every byte is accounted for by the test.
const std::string kBase = "max_chunk_bytes:2M,grow_bytes:2M,headroom_permille:0";

class PeerChunksTest : public ::testing::Test {
 protected:
  // Device 0 (own): 8 MiB of HBM; device 1 (peer): 64 MiB over NVLink.
  PeerChunksTest()
      : backend_(kPageBytes, {SimDevice{8 * kMiB, kH100HbmBytesPerS}, SimDevice{64 * kMiB, kH100NvlinkBytesPerS}}) {}
  StitchingAllocator& make(const std::string& conf) {
    alloc_ = std::make_unique<StitchingAllocator>(parse_config(kBase + "," + conf), backend_);
    return *alloc_;
  }
  std::uint64_t peer_bytes() const { return static_cast<std::uint64_t>(alloc_->stats().peer_reserved_bytes.current); }
  std::uint64_t reserved() const { return static_cast<std::uint64_t>(alloc_->stats().reserved_bytes.current); }

  SimBackend backend_;
  std::unique_ptr<StitchingAllocator> alloc_;
};

TEST_F(PeerChunksTest, ALargeBlockBorrowsFromThePeerOnlyOnceTheOwnDeviceIsFull) {
  StitchingAllocator& a = make("peer_devices:1");
  void* p = a.allocate(4 * kMiB, 0);
  void* q = a.allocate(4 * kMiB, 0);
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 0u) << "the own device had room";
  EXPECT_EQ(backend_.live_chunk_bytes(0), 8 * kMiB);
  void* r = a.allocate(4 * kMiB, 0);
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 4 * kMiB);
  EXPECT_EQ(backend_.live_chunk_bytes(1), 4 * kMiB);
  EXPECT_EQ(reserved(), 12 * kMiB) << "reserved counts both devices";
  EXPECT_TRUE(backend_.is_accessible(reinterpret_cast<std::uintptr_t>(r), 4 * kMiB));
  a.deallocate(p);
  a.deallocate(q);
  a.deallocate(r);
  a.check_invariants();
}

TEST_F(PeerChunksTest, IdleMemoryOfTheOwnDeviceIsUsedBeforeAnyPeerChunk) {
  StitchingAllocator& a = make("peer_devices:1,move_share_permille:0");  // moves never over budget
  void* p = a.allocate(4 * kMiB, 0);
  void* q = a.allocate(4 * kMiB, 0);
  a.deallocate(p);  // its 4 MiB stay mapped and idle
  void* r = a.allocate(6 * kMiB, 0);  // a range that needs the idle pages moved: evicted, not borrowed
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 2 * kMiB) << "4 MiB came from the idle chunks, only the 2 MiB beyond the device";
  EXPECT_GE(a.stats().evictions + a.stats().stitch_reuses, 1u);
  a.deallocate(q);
  a.deallocate(r);
  a.check_invariants();
}

// Time first with a peer: once a move is over the move budget (MoveBudget: the first move is allowed, then the
// credit is negative for hundreds of allocations), the full own device's idle memory stays where it is and the
// peer serves the run, as a new chunk would with no cap.
TEST_F(PeerChunksTest, AMoveOverTheBudgetIsLeftToThePeer) {
  StitchingAllocator& a = make("peer_devices:1,move_budget_ns_per_op:50");
  void* p = a.allocate(4 * kMiB, 0);
  void* q = a.allocate(4 * kMiB, 0);
  a.deallocate(p);  // two idle pages
  void* r = a.allocate(6 * kMiB, 0);  // three pages to back: one move within the budget, then the peer
  a.check_invariants();
  EXPECT_EQ(a.stats().evictions, 1u) << "only the move the budget allowed";
  EXPECT_EQ(peer_bytes(), 4 * kMiB) << "the two pages past the budget came from the peer";
  EXPECT_EQ(backend_.live_chunk_bytes(0), 8 * kMiB) << "the own device still holds all it can";
  a.deallocate(q);
  a.deallocate(r);
  a.check_invariants();
}

// The same, with a peer that refuses past its budget: the own device serves the rest memory first, moving idle
// memory whatever the moves cost; nothing fails.
TEST_F(PeerChunksTest, WhenThePeerRefusesAMoveOverTheBudgetIsMadeOnTheOwnDevice) {
  StitchingAllocator& a = make("peer_devices:1,peer_budget_bytes:2M");
  void* p = a.allocate(4 * kMiB, 0);
  void* q = a.allocate(4 * kMiB, 0);
  a.deallocate(p);
  void* r = a.allocate(6 * kMiB, 0);
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 2 * kMiB) << "the peer's budget";
  EXPECT_EQ(a.stats().evictions, 2u) << "both idle pages moved: one within the budget, one memory first";
  EXPECT_EQ(backend_.live_chunk_bytes(0), 8 * kMiB);
  a.deallocate(q);
  a.deallocate(r);
  a.check_invariants();
}

TEST_F(PeerChunksTest, WithoutPeerDevicesAFullDeviceIsOutOfMemoryAsBefore) {
  StitchingAllocator& a = make("peer_budget_bytes:0");
  void* p = a.allocate(8 * kMiB, 0);
  test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "no physical memory left");
  a.check_invariants();
  EXPECT_EQ(backend_.live_chunk_bytes(1), 0u);
  a.deallocate(p);
}

TEST_F(PeerChunksTest, ASmallBlockBorrowsTooWhenTheOwnDeviceHasNothingLeft) {
  StitchingAllocator& a = make("peer_devices:1");
  void* big = a.allocate(8 * kMiB, 0);
  void* small = a.allocate(4 * kKiB, 0);  // out of memory without the lake
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 2 * kMiB) << "one page for the small pool";
  a.deallocate(small);
  a.deallocate(big);
  a.empty_cache();
  a.check_invariants();
  EXPECT_EQ(backend_.live_chunks(), 0u);
}

TEST_F(PeerChunksTest, TheBudgetBoundsPeerBytesAndAFailedBorrowLeavesTheAllocatorUsable) {
  StitchingAllocator& a = make("peer_devices:1,peer_budget_bytes:4M");
  void* p = a.allocate(8 * kMiB, 0);
  void* q = a.allocate(4 * kMiB, 0);
  EXPECT_EQ(peer_bytes(), 4 * kMiB);
  test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 4 * kMiB) << "nothing borrowed past the budget";
  a.deallocate(q);
  void* r = a.allocate(4 * kMiB, 0);  // the idle peer pages serve it again
  a.check_invariants();
  a.deallocate(r);
  a.deallocate(p);
  a.check_invariants();
}

TEST_F(PeerChunksTest, APeerChunkThatTurnsFreeGoesBackToItsDeviceAtOnce) {
  // max_idle_mapped_bytes: idle chunks beyond 2 MiB are unmapped at once (trim), oldest first, so they turn free.
  StitchingAllocator& a = make("peer_devices:1,max_idle_mapped_bytes:2M");
  void* p = a.allocate(8 * kMiB, 0);
  void* q1 = a.allocate(2 * kMiB, 0);  // two 2 MiB chunks on the peer (one 4 MiB block would be one loan)
  void* q2 = a.allocate(2 * kMiB, 0);
  ASSERT_EQ(peer_bytes(), 4 * kMiB);
  a.deallocate(q1);  // 2 MiB idle: within the bound
  EXPECT_EQ(peer_bytes(), 4 * kMiB);
  a.deallocate(q2);  // 4 MiB idle: the oldest chunk trimmed
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 2 * kMiB);
  EXPECT_EQ(backend_.live_chunk_bytes(1), 2 * kMiB);
  EXPECT_EQ(a.free_chunks(), 0u) << "the trimmed peer chunk was released, not kept in the free chunks";
  a.deallocate(p);  // the other peer chunk is the oldest idle: trimmed and released too
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 0u);
  EXPECT_EQ(backend_.live_chunk_bytes(0), 8 * kMiB) << "the own device's chunks stay cached";
  EXPECT_GT(a.free_chunks(), 0u) << "own chunks trimmed are kept free";
}

TEST_F(PeerChunksTest, TheCapBoundsTheOwnDeviceOnlySoPeersServeWhatLiesBeyondIt) {
  StitchingAllocator& a = make("peer_devices:1,cap_bytes:4M");
  void* p = a.allocate(4 * kMiB, 0);
  void* q = a.allocate(6 * kMiB, 0);
  a.check_invariants();
  EXPECT_EQ(backend_.live_chunk_bytes(0), 4 * kMiB);
  EXPECT_EQ(peer_bytes(), 6 * kMiB);
  a.deallocate(p);
  a.deallocate(q);
  a.empty_cache();
  a.check_invariants();
  EXPECT_EQ(reserved(), 0u);
}

TEST_F(PeerChunksTest, BothDevicesFullIsOutOfMemoryAndFreeingMakesRoomAgain) {
  StitchingAllocator& a = make("peer_devices:1");
  std::vector<void*> blocks;
  for (int i = 0; i < 9; ++i) blocks.push_back(a.allocate(8 * kMiB, 0));  // 8 MiB own + 64 MiB peer
  test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 64 * kMiB);
  a.deallocate(blocks.back());
  blocks.pop_back();
  blocks.push_back(a.allocate(2 * kMiB, 0));
  a.check_invariants();
  for (void* b : blocks) a.deallocate(b);
  a.empty_cache();
  a.check_invariants();
  EXPECT_EQ(backend_.live_chunks(), 0u);
}

TEST_F(PeerChunksTest, APeerCreateThatFailsLeavesTheAllocatorConsistentAndUsable) {
  FaultBackend faulty(backend_);  // forwards the two devices
  StitchingAllocator a(parse_config(kBase + ",peer_devices:1"), faulty);
  void* p = a.allocate(8 * kMiB, 0);
  // The next creates: the own device's (refused: full), then the peer's, failed as a driver error would.
  faulty.arm(Fault{BackendCall::kCreate, 2, 1, FaultError::kBackendError});
  EXPECT_THROW(a.allocate(2 * kMiB, 0), BackendError);
  a.check_invariants();
  EXPECT_EQ(a.stats().peer_reserved_bytes.current, 0);
  EXPECT_EQ(faulty.injected_faults(), 1u);
  void* q = a.allocate(2 * kMiB, 0);  // the fault is spent: borrowed this time
  a.check_invariants();
  EXPECT_EQ(a.stats().peer_reserved_bytes.current, static_cast<std::int64_t>(2 * kMiB));
  a.deallocate(q);
  a.deallocate(p);
}

TEST_F(PeerChunksTest, APeerChunkWhoseReleaseFailsWithOutOfMemoryStaysFreeAndGoesAtEmptyCache) {
  // Found by allocator_fuzzer with the peer configurations (fuzz/corpus/allocator/finding-peer-release-oom.bin):
  // a failed allocation gives its borrowed chunks back at once; a release failing with OutOfMemoryError (not
  // BackendError) escaped ChunkStore::release_quietly, and the chunk was then in no free index: empty_cache
  // left it reserved until teardown.
  FaultBackend faulty(backend_);
  StitchingAllocator a(parse_config(kBase + ",peer_devices:1,peer_budget_bytes:4M"), faulty);
  faulty.arm(Fault{BackendCall::kRelease, 1, 1, FaultError::kOutOfMemory});
  EXPECT_THROW(a.allocate(14 * kMiB, 0), OutOfMemoryError) << "8 MiB own + 4 MiB of peer budget";
  a.check_invariants();
  EXPECT_EQ(faulty.injected_faults(), 1u);
  a.empty_cache();
  a.check_invariants();
  EXPECT_EQ(a.stats().reserved_bytes.current, 0);
  EXPECT_EQ(a.stats().peer_reserved_bytes.current, 0);
  EXPECT_EQ(backend_.live_chunks(), 0u);
}

TEST_F(PeerChunksTest, PeerDevicesThatAreNotPeersAreRefusedAtConstruction) {
  test::expect_error([&] { make("peer_devices:0"); }, ErrorCode::kConfig, "is the pool's own device");
  test::expect_error([&] { make("peer_devices:2"); }, ErrorCode::kConfig, "not a device of the sim backend");
  test::expect_error([&] { make("peer_devices:1;1"); }, ErrorCode::kConfig, "listed twice");
}

TEST(PeerChunksOnHost, BlocksOnPeerChunksKeepTheirBytesWhileTheEngineMovesMemoryAround) {
  // Two host nodes: 8 MiB own, 64 MiB peer; real memory, so every block's bytes are checked.
  HostBackend backend(kPageBytes, std::vector<std::uint64_t>{8 * kMiB, 64 * kMiB});
  StitchingAllocator a(parse_config(kBase + ",peer_devices:1"), backend);
  std::vector<std::pair<unsigned char*, std::uint64_t>> live;
  auto allocate = [&](std::uint64_t size, unsigned char value) {
    auto* p = static_cast<unsigned char*>(a.allocate(size, 0));
    std::memset(p, value, size);
    live.emplace_back(p, size);
  };
  auto holds = [](const std::pair<unsigned char*, std::uint64_t>& b, unsigned char value) {
    for (std::uint64_t i = 0; i < b.second; i += 4096) {
      if (b.first[i] != value) return false;
    }
    return b.first[b.second - 1] == value;
  };
  for (unsigned char i = 0; i < 6; ++i) allocate((i % 3 + 1) * 2 * kMiB, static_cast<unsigned char>(i + 1));
  a.check_invariants();
  EXPECT_GT(a.stats().peer_reserved_bytes.current, 0) << "24 MiB of blocks on an 8 MiB device";
  a.deallocate(live[1].first);  // frees in the middle: pages go idle, are evicted, reused
  a.deallocate(live[3].first);
  allocate(6 * kMiB, 0x77);
  allocate(kMiB / 2, 0x66);  // a small block
  a.check_invariants();
  for (const std::size_t i : {std::size_t{0}, std::size_t{2}, std::size_t{4}, std::size_t{5}}) {
    EXPECT_TRUE(holds(live[i], static_cast<unsigned char>(i + 1))) << "block " << i;
  }
  EXPECT_TRUE(holds(live[6], 0x77));
  EXPECT_TRUE(holds(live[7], 0x66));
  for (const std::size_t i : {std::size_t{0}, std::size_t{2}, std::size_t{4}, std::size_t{5}, std::size_t{6}, std::size_t{7}}) {
    a.deallocate(live[i].first);
  }
  a.empty_cache();
  a.check_invariants();
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST(PeerChunks, RoomIsTheBudgetLeftOrUnboundedWithoutOne) {
  SimBackend backend(kPageBytes, {SimDevice{}, SimDevice{}});
  EXPECT_EQ(PeerChunks(backend, {1}, 0).room_bytes(123 * kMiB), UINT64_MAX);
  EXPECT_EQ(PeerChunks(backend, {1}, 8 * kMiB).room_bytes(6 * kMiB), 2 * kMiB);
  EXPECT_EQ(PeerChunks(backend, {1}, 8 * kMiB).room_bytes(10 * kMiB), 0u);
  EXPECT_EQ(PeerChunks(backend, {}, 8 * kMiB).room_bytes(0), 0u) << "no peers: nothing to borrow";
}

}  // namespace
}  // namespace gmlake::engine
