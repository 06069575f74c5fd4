// What the sim backend promises beyond the conformance suite (backend_test.cpp): where its fake addresses and
// handles come from.
#include "gmlake/sim_backend.h"

#include "backends/sim/vmm_cost_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

TEST(SimBackendTest, AddressesAreHighIncreasingAndNeverReused) {
  SimBackend b;
  EXPECT_FALSE(b.host_accessible());
  EXPECT_EQ(b.name(), "sim");
  const std::uintptr_t first = b.reserve(2 * kPageBytes);
  EXPECT_GE(first, kSimBaseAddress);
  b.address_free(first, 2 * kPageBytes);
  const std::uintptr_t second = b.reserve(kPageBytes);
  EXPECT_GE(second, first + 2 * kPageBytes);  // the freed range is not handed out again
  const std::uintptr_t third = b.reserve(kPageBytes);
  EXPECT_GE(third, second + kPageBytes);
}

TEST(SimBackendTest, HandlesAreIncreasingAndNeverReused) {
  SimBackend b;
  const ChunkHandle first = b.create(kPageBytes);
  b.release(first);
  const ChunkHandle second = b.create(kPageBytes);
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
  EXPECT_NO_THROW(b.reserve(kPageBytes));  // what is left of the address space is still usable
}

TEST(SimBackendTest, APhysicalLimitCountsLiveChunkBytesOnly) {
  SimBackend b(kPageBytes, 4 * kPageBytes);
  EXPECT_EQ(b.physical_limit_bytes(), 4 * kPageBytes);
  const std::uintptr_t addr = b.reserve(64 * kPageBytes);  // address space does not count
  const ChunkHandle chunk = b.create(4 * kPageBytes);
  EXPECT_THROW(b.create(kPageBytes), OutOfMemoryError);
  b.release(chunk);
  EXPECT_NO_THROW(b.create(4 * kPageBytes));
  b.address_free(addr, 64 * kPageBytes);
}

TEST(SimBackendTest, SeveralDevicesEachEnforceTheirOwnCapacityAndCountTheirOwnBytes) {
  SimBackend b(kPageBytes, {SimDevice{4 * kMiB, kH100HbmBytesPerS}, SimDevice{2 * kMiB, kH100NvlinkBytesPerS}});
  EXPECT_EQ(b.device_count(), 2u);
  EXPECT_EQ(b.device(), 0);
  const ChunkHandle own = b.create(4 * kMiB);
  EXPECT_THROW(b.create(2 * kMiB), OutOfMemoryError) << "device 0 is full";
  const ChunkHandle peer = b.create(2 * kMiB, 1);  // device 1 has its own room
  EXPECT_EQ(b.chunk_device(own), 0);
  EXPECT_EQ(b.chunk_device(peer), 1);
  EXPECT_EQ(b.live_chunk_bytes(0), 4 * kMiB);
  EXPECT_EQ(b.live_chunk_bytes(1), 2 * kMiB);
  EXPECT_EQ(b.live_chunk_bytes(), 6 * kMiB);
  try {
    b.create(2 * kMiB, 1);
    ADD_FAILURE() << "device 1 is full";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("device 1"), std::string::npos) << e.what();
  }
  const std::uintptr_t at = b.reserve(2 * kMiB);
  b.map(at, 2 * kMiB, peer);  // a peer chunk maps and gets access like any other
  b.set_access(at, 2 * kMiB);
  EXPECT_TRUE(b.is_accessible(at, 2 * kMiB));
  b.unmap(at, 2 * kMiB);
  b.address_free(at, 2 * kMiB);
  b.release(peer);
  EXPECT_EQ(b.live_chunk_bytes(1), 0u);
  b.release(own);
}

TEST(SimBackendTest, AccessCostFollowsEachDevicesLinkBandwidth) {
  SimBackend b(kPageBytes, {SimDevice{0, kH100HbmBytesPerS}, SimDevice{0, kH100NvlinkBytesPerS}, SimDevice{}});
  EXPECT_EQ(b.access_ns(0, 3'350'000'000), 1'000'000u) << "3.35 GB at 3.35 TB/s: 1 ms";
  EXPECT_EQ(b.access_ns(1, 450'000'000), 1'000'000u) << "450 MB over NVLink: 1 ms";
  EXPECT_GT(b.access_ns(1, kGiB), 7 * b.access_ns(0, kGiB));
  EXPECT_EQ(b.access_ns(2, kGiB), 0u) << "not modelled";
  EXPECT_THROW(b.access_ns(3, kGiB), Error);
  EXPECT_THROW(SimBackend(kPageBytes, std::vector<SimDevice>{}), Error);
}

// With a cost model and several devices, cuMemSetAccess over a run charges each own chunk its table's time and
// the peer chunks in it one peer call plus a cost per chunk (measured on two H200s: VmmCostModel).
TEST(SimBackendTest, ModelledSetAccessChargesPeerChunksThePeerCallAndOwnChunksTheirTable) {
  const VmmCostModel model = *vmm_cost_model("h100");
  SimBackend b(kPageBytes, {SimDevice{}, SimDevice{}}, model);
  EXPECT_EQ(b.name(), "sim:h100");
  const std::uintptr_t va = b.reserve(3 * kPageBytes);
  b.map(va, kPageBytes, b.create(kPageBytes));
  b.map(va + kPageBytes, kPageBytes, b.create(kPageBytes, 1));
  b.map(va + 2 * kPageBytes, kPageBytes, b.create(kPageBytes, 1));
  const std::uint64_t before = b.counters().time_ns_of(BackendCall::kSetAccess);
  b.set_access(va, 3 * kPageBytes);
  EXPECT_EQ(b.counters().time_ns_of(BackendCall::kSetAccess) - before,
            model.ns(BackendCall::kSetAccess, kPageBytes) + model.peer_set_access_call_ns +
                2 * model.peer_set_access_chunk_ns);
  const std::uint64_t middle = b.counters().time_ns_of(BackendCall::kSetAccess);
  b.set_access(va, kPageBytes);  // the own chunk alone: its table's time only
  EXPECT_EQ(b.counters().time_ns_of(BackendCall::kSetAccess) - middle, model.ns(BackendCall::kSetAccess, kPageBytes));
  EXPECT_GT(model.peer_set_access_call_ns, 10 * model.ns(BackendCall::kSetAccess, kPageBytes));
}

TEST(SimBackendTest, CreateOnADeviceItDoesNotHaveIsRefusedUncounted) {
  SimBackend one(kPageBytes);
  EXPECT_EQ(one.device_count(), 1u);
  EXPECT_THROW(one.create(kPageBytes, 1), Error);
  EXPECT_THROW(one.create(kPageBytes, -1), Error);
  EXPECT_EQ(one.counters()[BackendCall::kCreate], 0u);
  EXPECT_EQ(one.live_chunk_bytes(5), 0u);
}

}  // namespace
}  // namespace gmlake
