// Stitcher (src/policies/gmlake/stitcher.h): maps chunks end to end and grants access over the run at once.
#include "policies/gmlake/stitcher.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "backends/fault/fault_backend.h"
#include "gmlake/backend_factory.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"

namespace gmlake::engine {
namespace {

TEST(StitcherTest, ARunOfTwoChunksTakesTwoMapsAndOneSetAccess) {
  SimBackend sim;
  Stats stats;
  ChunkStore store(sim, PageGeometry(kPageBytes), stats);
  Stitcher stitcher(sim, store, PageGeometry::from_shift(21));
  Arena arena(0, 0, sim.reserve(64 * kPageBytes), 64 * kPageBytes);
  const ChunkId a = store.create(Pages{3}), b = store.create(Pages{2});
  stitcher.map(arena, PageNumber{4}, a);
  stitcher.map(arena, PageNumber{7}, b);
  stitcher.grant(arena, PageNumber{4}, Pages{5});
  EXPECT_EQ(sim.counters()[BackendCall::kMap], 2u);
  EXPECT_EQ(sim.counters()[BackendCall::kSetAccess], 1u);
  EXPECT_TRUE(sim.is_accessible(stitcher.address(arena, PageNumber{4}), 5 * kPageBytes));
  EXPECT_EQ(arena.pages.unmapped_pages(PageNumber{4}, PageNumber{8}), Pages{0});
  EXPECT_EQ(store[b].first_page, PageNumber{7});
  stitcher.unmap(arena, a);
  EXPECT_FALSE(store[a].mapped());
  EXPECT_EQ(arena.pages.unmapped_pages(PageNumber{4}, PageNumber{8}), Pages{3});
  stitcher.unmap(arena, b);
  store.release(a);
  store.release(b);
  sim.address_free(arena.base, arena.virtual_bytes);
  EXPECT_EQ(sim.live_chunks() + sim.live_mappings() + sim.live_reservations(), 0u);
}

TEST(StitcherTest, AFailedMapOrUnmapChangesNothing) {
  SimBackend sim;
  FaultBackend fault(sim);
  Stats stats;
  ChunkStore store(fault, PageGeometry(kPageBytes), stats);
  Stitcher stitcher(fault, store, PageGeometry::from_shift(21));
  Arena arena(0, 0, fault.reserve(16 * kPageBytes), 16 * kPageBytes);
  const ChunkId a = store.create(Pages{2});
  fault.arm({BackendCall::kMap, 1, 1, FaultError::kBackendError});
  EXPECT_THROW(stitcher.map(arena, PageNumber{0}, a), BackendError);
  EXPECT_FALSE(store[a].mapped());
  EXPECT_EQ(arena.pages.mapped_chunks(), 0u);
  stitcher.map(arena, PageNumber{0}, a);
  fault.arm({BackendCall::kUnmap, 1, 1, FaultError::kBackendError});
  EXPECT_THROW(stitcher.unmap(arena, a), BackendError);
  EXPECT_TRUE(store[a].mapped());
  EXPECT_EQ(arena.pages.mapped_chunks(), 1u);
  fault.disarm_all();
  stitcher.unmap(arena, a);
  store.release(a);
  fault.address_free(arena.base, arena.virtual_bytes);
}

TEST(SimCostModelTest, ModelledBackendsChargeEachCallItsMeasuredCostAndSumOverMappings) {
  const std::unique_ptr<Backend> plain = make_backend("sim", kPageBytes);
  EXPECT_FALSE(plain->time_is_modelled());
  const std::unique_ptr<Backend> h100 = make_backend("sim:h100", kPageBytes);
  ASSERT_TRUE(h100->time_is_modelled());
  EXPECT_EQ(h100->name(), "sim:h100");
  const std::uintptr_t base = h100->reserve(64 * kPageBytes);
  const ChunkHandle small = h100->create(kPageBytes);
  const ChunkHandle big = h100->create(32 * kPageBytes);
  const std::uint64_t create_small = h100->counters().time_ns_of(BackendCall::kCreate);
  EXPECT_GT(create_small, 0u);
  h100->map(base, kPageBytes, small);
  h100->map(base + kPageBytes, 32 * kPageBytes, big);
  const std::uint64_t before = h100->counters().time_ns_of(BackendCall::kSetAccess);
  h100->set_access(base, kPageBytes);
  const std::uint64_t one = h100->counters().time_ns_of(BackendCall::kSetAccess) - before;
  h100->set_access(base, 33 * kPageBytes);  // both mappings: charged for each
  const std::uint64_t both = h100->counters().time_ns_of(BackendCall::kSetAccess) - before - one;
  EXPECT_GT(both, one);
  EXPECT_LT(both, 33 * one) << "a large chunk costs less than its size in small ones";
  h100->unmap(base, 33 * kPageBytes);
  h100->release(small);
  h100->release(big);
  h100->address_free(base, 64 * kPageBytes);
  EXPECT_THROW(make_backend("sim:h999", kPageBytes), Error);
}


// Whether the page map calls the mapping at `page` its chunk's active place.
bool active_in_map(const Arena& arena, std::uint64_t page) {
  bool active = false;
  arena.pages.for_each(PageNumber{page}, PageNumber{page},
                       [&](PageNumber, const PageMap::Entry& e) { active = e.active; });
  return active;
}

TEST(StitcherTest, AChunkMovedToStandbyStaysMappedAndCanBeActivatedAgainWithNoBackendCall) {
  SimBackend sim;
  Stats stats;
  ChunkStore store(sim, PageGeometry(kPageBytes), stats);
  Stitcher stitcher(sim, store, PageGeometry::from_shift(21));
  Arena arena(0, 0, sim.reserve(64 * kPageBytes), 64 * kPageBytes);
  const ChunkId a = store.create(Pages{2});
  stitcher.map(arena, PageNumber{4}, a);
  stitcher.grant(arena, PageNumber{4}, Pages{2});
  stitcher.to_standby(arena, a, 7);
  EXPECT_FALSE(store[a].mapped()) << "no active place: free";
  ASSERT_EQ(store[a].standby.size(), 1u);
  EXPECT_EQ(store[a].standby[0].left_tick, 7u) << "left at the tick to_standby was given";
  EXPECT_EQ(arena.pages.mapped_chunks(), 1u) << "the standby mapping is still a page map entry";
  EXPECT_FALSE(active_in_map(arena, 5)) << "the page map knows it as a standby mapping";
  // Mapped a second time elsewhere: two mappings of one chunk (aliasing), both in the page map.
  stitcher.map(arena, PageNumber{10}, a);
  stitcher.grant(arena, PageNumber{10}, Pages{2});
  EXPECT_EQ(sim.live_mappings(), 2u);
  EXPECT_TRUE(store[a].active_at(0, PageNumber{10}));
  EXPECT_FALSE(store[a].active_at(0, PageNumber{4}));
  EXPECT_TRUE(active_in_map(arena, 10));
  const BackendCounters before = sim.counters();
  stitcher.activate(arena, PageNumber{4}, a, &arena, 9);
  EXPECT_EQ(sim.counters().calls, before.calls) << "activation is bookkeeping only";
  EXPECT_TRUE(store[a].active_at(0, PageNumber{4}));
  ASSERT_EQ(store[a].standby.size(), 1u);
  EXPECT_EQ(store[a].standby[0].first_page, PageNumber{10}) << "the old active place became the standby one";
  EXPECT_EQ(store[a].standby[0].left_tick, 9u) << "left at the tick activate was given (the chunk's idle tick)";
  EXPECT_TRUE(active_in_map(arena, 4));
  EXPECT_FALSE(active_in_map(arena, 11)) << "and the page map says so on all its pages";
  EXPECT_TRUE(sim.is_accessible(stitcher.address(arena, PageNumber{4}), 2 * kPageBytes))
      << "access stays with the mapping";
  EXPECT_THROW(stitcher.activate(arena, PageNumber{20}, a, &arena, 9), std::logic_error) << "no mapping there";
  stitcher.unmap_standby(arena, PageNumber{10}, a);
  EXPECT_TRUE(store[a].standby.empty());
  EXPECT_EQ(sim.live_mappings(), 1u);
  stitcher.unmap(arena, a);
  store.release(a);
  sim.address_free(arena.base, arena.virtual_bytes);
  EXPECT_EQ(sim.live_chunks() + sim.live_mappings() + sim.live_reservations(), 0u);
}

TEST(StitcherTest, AFailedUnmapOfAStandbyMappingChangesNothing) {
  SimBackend sim;
  FaultBackend fault(sim);
  Stats stats;
  ChunkStore store(fault, PageGeometry(kPageBytes), stats);
  Stitcher stitcher(fault, store, PageGeometry::from_shift(21));
  Arena arena(0, 0, fault.reserve(16 * kPageBytes), 16 * kPageBytes);
  const ChunkId a = store.create(Pages{1});
  stitcher.map(arena, PageNumber{3}, a);
  stitcher.to_standby(arena, a, 7);
  fault.arm({BackendCall::kUnmap, 1, 1, FaultError::kBackendError});
  EXPECT_THROW(stitcher.unmap_standby(arena, PageNumber{3}, a), BackendError);
  EXPECT_EQ(store[a].standby.size(), 1u);
  EXPECT_EQ(arena.pages.mapped_chunks(), 1u);
  stitcher.unmap_standby(arena, PageNumber{3}, a);
  EXPECT_EQ(arena.pages.mapped_chunks(), 0u);
  store.release(a);
  fault.address_free(arena.base, arena.virtual_bytes);
}


// PyTorch's segment_map / segment_unmap trace events come from the backend's observer: it must see the active
// places only, so that a trace never shows more mapped than the pool holds.
TEST(StitcherTest, TheObserverSeesActivePlacesOnlyNotStandbyMappings) {
  struct Recorder final : BackendObserver {
    std::vector<std::pair<char, std::uintptr_t>> events;
    void on_map(std::uintptr_t addr, std::uint64_t) noexcept override { events.emplace_back('m', addr); }
    void on_unmap(std::uintptr_t addr, std::uint64_t) noexcept override { events.emplace_back('u', addr); }
  } recorder;
  SimBackend sim;
  sim.set_observer(&recorder);
  Stats stats;
  ChunkStore store(sim, PageGeometry(kPageBytes), stats);
  Stitcher stitcher(sim, store, PageGeometry::from_shift(21));
  Arena arena(0, 0, sim.reserve(64 * kPageBytes), 64 * kPageBytes);
  const std::uintptr_t at4 = stitcher.address(arena, PageNumber{4}), at10 = stitcher.address(arena, PageNumber{10});
  const ChunkId a = store.create(Pages{1});
  stitcher.map(arena, PageNumber{4}, a);
  stitcher.to_standby(arena, a, 7);  // no backend call, but the memory left page 4
  stitcher.map(arena, PageNumber{10}, a);
  stitcher.activate(arena, PageNumber{4}, a, &arena, 9);  // back at page 4, no backend call
  stitcher.unmap_standby(arena, PageNumber{10}, a);    // page 10 held no memory of its own: no event
  const std::vector<std::pair<char, std::uintptr_t>> expected{{'m', at4}, {'u', at4}, {'m', at10}, {'u', at10}, {'m', at4}};
  EXPECT_EQ(recorder.events, expected);
  stitcher.unmap(arena, a);
  EXPECT_EQ(recorder.events.back(), std::make_pair('u', at4));
  sim.set_observer(nullptr);
  store.release(a);
  sim.address_free(arena.base, arena.virtual_bytes);
}

}  // namespace
}  // namespace gmlake::engine
