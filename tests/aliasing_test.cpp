// Aliasing in the gmlake policy (chunk_mappings > 1): an eviction leaves the idle page mapped (stale) and maps
// its chunk at the new page too; a stale page turning used takes its chunk back with no backend call when the
// chunk's owner is idle and fence-safe, else unmaps its stale mapping first. The checks: exact backend calls
// for take-back hits, misses and the bound; empty_cache and teardown unmap every mapping; the stream fence
// refuses a take-back from an owner whose stream work is unfinished; failures injected into the new paths
// leave the allocator consistent and leak nothing; and on the host backend (real memory) random workloads
// never let one live block's bytes be written through another's page.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "policies/gmlake/stitching_allocator.h"
#include "gmlake/error.h"
#include "backends/fault/fault_backend.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "manual_events.h"

namespace gmlake::engine {
namespace {

constexpr std::uint64_t M = kMiB;

class AliasingTest : public ::testing::Test {
 protected:
  StitchingAllocator& make(const std::string& conf = "chunk_mappings:2") {
    alloc_ = std::make_unique<StitchingAllocator>(parse_config(conf), backend_);
    return *alloc_;
  }
  std::uint64_t calls(BackendCall c) const { return backend_.counters()[c]; }
  std::uint64_t all_calls() const {
    std::uint64_t n = 0;
    for (std::uint64_t c : backend_.counters().calls) n += c;
    return n;
  }
  static std::uintptr_t addr(void* p) { return reinterpret_cast<std::uintptr_t>(p); }
  void TearDown() override {
    alloc_.reset();
    EXPECT_EQ(backend_.live_chunks(), 0u);
    EXPECT_EQ(backend_.live_mappings(), 0u);
  }

  // Page 0 idle (chunk c0), page 1 a blocker, pages 2-3 used by a 4 MiB block whose page 2 took c0 from page 0
  // (left stale). Returns the 4 MiB block.
  void* stale_page_zero(StitchingAllocator& a) {
    void* p0 = a.allocate(2 * M, 0);
    blocker_ = a.allocate(2 * M, 0);
    a.deallocate(p0);
    void* big = a.allocate(4 * M, 0);
    EXPECT_EQ(addr(big), addr(p0) + 4 * M);
    EXPECT_EQ(calls(BackendCall::kCreate), 3u);  // c0, blocker, page 3
    EXPECT_EQ(calls(BackendCall::kUnmap), 0u);   // page 0 kept its mapping
    EXPECT_EQ(a.stats().evictions, 1u);
    EXPECT_EQ(a.stale_pages(), 1u);
    a.check_invariants();
    base_ = addr(p0);
    return big;
  }

  SimBackend backend_;
  std::unique_ptr<StitchingAllocator> alloc_;
  void* blocker_ = nullptr;
  std::uintptr_t base_ = 0;
};

TEST_F(AliasingTest, AStalePageTakesItsChunkBackFromAnIdleOwnerWithNoBackendCall) {
  auto& a = make();
  void* big = stale_page_zero(a);
  a.deallocate(big);
  const std::uint64_t before = all_calls();
  void* p = a.allocate(2 * M, 0);  // the exact fit at page 0: stale, its chunk's owner (page 2) idle
  EXPECT_EQ(addr(p), base_);
  EXPECT_EQ(all_calls(), before);
  EXPECT_EQ(a.take_backs(), 1u);
  EXPECT_EQ(a.stale_pages(), 1u);  // page 2 now
  a.check_invariants();
  // And back again: a 4 MiB block at pages 2-3 takes the chunk back from page 0 once that is idle.
  a.deallocate(p);
  void* again = a.allocate(4 * M, 0);
  EXPECT_EQ(addr(again), base_ + 4 * M);
  EXPECT_EQ(all_calls(), before);
  EXPECT_EQ(a.take_backs(), 2u);
  a.check_invariants();
}

TEST_F(AliasingTest, AStalePageWhoseChunkIsInUseIsUnmappedAndBackedAnew) {
  auto& a = make();
  stale_page_zero(a);
  void* p = a.allocate(2 * M, 0);  // page 0 again, while page 2 uses the chunk
  EXPECT_EQ(addr(p), base_);
  EXPECT_EQ(a.take_back_misses(), 1u);
  EXPECT_EQ(calls(BackendCall::kUnmap), 1u);  // the stale mapping
  EXPECT_EQ(calls(BackendCall::kCreate), 4u);
  EXPECT_EQ(a.stale_pages(), 0u);
  a.check_invariants();
}

TEST_F(AliasingTest, AChunkKeepsAtMostChunkMappingsMappingsOldestStaleDroppedFirst) {
  auto& a = make("chunk_mappings:2");
  void* big = stale_page_zero(a);     // c0: owner page 2, stale page 0
  a.allocate(2 * M + 512, 0);         // pages 4-5 block the range after pages 2-3
  a.deallocate(big);                  // pages 2, 3 idle
  void* huge = a.allocate(6 * M, 0);  // pages 5-8: page 6 takes c0 from page 2, page 7 c2 from page 3
  EXPECT_EQ(addr(huge), base_ + 10 * M + 512);
  EXPECT_EQ(calls(BackendCall::kUnmap), 1u);  // page 0's mapping: c0 would have had three
  EXPECT_EQ(a.stale_pages(), 2u);
  EXPECT_LE(backend_.live_mappings(), 2 * backend_.live_chunks());
  a.check_invariants();
}

TEST_F(AliasingTest, AHigherBoundKeepsMoreStaleMappings) {
  auto& a = make("chunk_mappings:3");
  void* big = stale_page_zero(a);
  a.allocate(2 * M + 512, 0);
  a.deallocate(big);
  a.allocate(6 * M, 0);
  EXPECT_EQ(calls(BackendCall::kUnmap), 0u);
  EXPECT_EQ(a.stale_pages(), 3u);  // pages 0 and 2 of c0, page 3 of c1
  a.check_invariants();
}

// chunk_mappings:1 (the default), or a bound on idle mappings: an eviction unmaps, nothing stays stale.
TEST_F(AliasingTest, ChunkMappingsOneOrABoundOnIdleMappingsUnmapsOnEveryEviction) {
  for (const char* conf : {"chunk_mappings:1", "chunk_mappings:2,max_idle_mapped_bytes:64M"}) {
    SCOPED_TRACE(conf);
    auto& a = make(conf);
    const std::uint64_t unmaps_before = calls(BackendCall::kUnmap);
    void* p0 = a.allocate(2 * M, 0);
    a.allocate(2 * M, 0);
    a.deallocate(p0);
    a.allocate(4 * M, 0);
    EXPECT_EQ(calls(BackendCall::kUnmap) - unmaps_before, 1u);
    EXPECT_EQ(a.stale_pages(), 0u);
    a.check_invariants();
  }
}

TEST_F(AliasingTest, EmptyCacheUnmapsEveryStaleMappingAlsoOfChunksInUse) {
  auto& a = make();
  void* big = stale_page_zero(a);
  a.empty_cache();  // page 0's stale mapping goes although page 2 still uses the chunk
  EXPECT_EQ(a.stale_pages(), 0u);
  EXPECT_EQ(backend_.live_mappings(), 3u);  // blocker, pages 2-3
  a.check_invariants();
  a.deallocate(big);
  a.deallocate(blocker_);
  a.empty_cache();
  EXPECT_EQ(backend_.live_mappings(), 0u);
  EXPECT_EQ(backend_.live_chunks(), 0u);
  a.check_invariants();
}

TEST_F(AliasingTest, EvictingToFreeAChunkUnmapsItsStaleMappingsFirst) {
  auto& a = make();
  void* big = stale_page_zero(a);
  a.deallocate(big);
  a.set_cap_bytes(2 * M);  // only the blocker's chunk may stay
  EXPECT_EQ(a.stats().reserved_bytes.current, static_cast<std::int64_t>(2 * M));
  EXPECT_EQ(a.stale_pages(), 0u);
  EXPECT_EQ(backend_.live_mappings(), 1u);
  a.check_invariants();
}

// The stream fence: taking a chunk back from its owner is an eviction of the owner, allowed only once the
// work the owner's stream queued before the owner turned idle has finished.
class AliasingFenceTest : public ::testing::Test {
 protected:
  StitchingAllocator& make() {
    alloc_ = std::make_unique<StitchingAllocator>(parse_config("cross_stream_reuse:false,chunk_mappings:2"), backend_,
                                                  &events_);
    return *alloc_;
  }
  // Stream 1's page 0 went stale when stream 2 took its chunk; stream 2 has freed it again (its mark unfinished).
  void setup(StitchingAllocator& a) {
    void* p = a.allocate(2 * M, 1);
    a.deallocate(p);
    events_.finish_all();
    void* q = a.allocate(2 * M, 2);
    EXPECT_EQ(a.stale_pages(), 1u);
    EXPECT_EQ(backend_.counters()[BackendCall::kCreate], 1u);
    a.deallocate(q);
    a.check_invariants();
  }

  SimBackend backend_;
  test::ManualEvents events_;
  std::unique_ptr<StitchingAllocator> alloc_;
};

TEST_F(AliasingFenceTest, NoTakeBackFromAnOwnerWhoseStreamWorkIsUnfinished) {
  auto& a = make();
  setup(a);
  const int waits = events_.waits;
  a.allocate(2 * M, 1);
  EXPECT_EQ(a.take_backs(), 0u);
  EXPECT_EQ(a.take_back_misses(), 1u);
  // The chunk came the ordinary way: waited for (covered by stream 2's mark) before it moved.
  EXPECT_EQ(events_.waits, waits + 1);
  EXPECT_EQ(backend_.counters()[BackendCall::kCreate], 1u);
  a.check_invariants();
}

TEST_F(AliasingFenceTest, ATakeBackOnceTheOwnersStreamWorkHasFinished) {
  auto& a = make();
  setup(a);
  events_.finish(2);
  const auto maps = backend_.counters()[BackendCall::kMap];
  a.allocate(2 * M, 1);
  EXPECT_EQ(a.take_backs(), 1u);
  EXPECT_EQ(backend_.counters()[BackendCall::kMap], maps);
  a.check_invariants();
}

// Failures in the new paths: the allocator stays consistent, the allocation fails cleanly, nothing leaks.
class AliasingFaultTest : public ::testing::Test {
 protected:
  AliasingFaultTest() : fault_(inner_) {}
  StitchingAllocator& make() {
    alloc_.reset();
    alloc_ = std::make_unique<StitchingAllocator>(parse_config("chunk_mappings:2"), fault_);
    return *alloc_;
  }
  // Page 0 idle and mapped, page 1 in use: a 4 MiB block placed next aliases page 0's chunk. Returns page 0.
  static void* idle_page_zero(StitchingAllocator& a) {
    void* p0 = a.allocate(2 * M, 0);
    a.allocate(2 * M, 0);
    a.deallocate(p0);
    return p0;
  }
  void TearDown() override {
    alloc_.reset();
    EXPECT_EQ(inner_.live_chunks(), 0u);
    EXPECT_EQ(inner_.live_mappings(), 0u);
    EXPECT_EQ(inner_.live_reservations(), 0u);
  }
  SimBackend inner_;
  FaultBackend fault_;
  std::unique_ptr<StitchingAllocator> alloc_;
};

TEST_F(AliasingFaultTest, AFailedUnmapOfAStaleMappingFailsTheAllocationAndChangesNothing) {
  auto& a = make();
  void* p0 = idle_page_zero(a);
  a.allocate(4 * M, 0);  // page 0 stale, its chunk in use
  fault_.arm({BackendCall::kUnmap, 1, 1});
  EXPECT_THROW(a.allocate(2 * M, 0), BackendError);
  EXPECT_EQ(a.stale_pages(), 1u);
  a.check_invariants();
  void* p = a.allocate(2 * M, 0);  // works once the backend does
  EXPECT_EQ(p, p0);
  a.check_invariants();
}

// A failed map (nothing moved yet) or set_access (the undo hands the chunk back to its stale page) while
// aliasing page 0's chunk: page 0 is still an idle mapped page afterwards, reused with no backend call.
TEST_F(AliasingFaultTest, AFailedMapOrSetAccessOfAnAliasLeavesTheIdlePageAsItWas) {
  for (BackendCall call : {BackendCall::kMap, BackendCall::kSetAccess}) {
    SCOPED_TRACE(static_cast<int>(call));
    auto& a = make();
    void* p0 = idle_page_zero(a);
    fault_.arm({call, 1, 1});
    EXPECT_THROW(a.allocate(4 * M, 0), BackendError);
    EXPECT_EQ(a.stale_pages(), 0u);
    a.check_invariants();
    EXPECT_EQ(a.allocate(2 * M, 0), p0);
    a.check_invariants();
  }
}

TEST_F(AliasingFaultTest, RandomFaultsInARandomWorkloadLeaveItConsistent) {
  auto& a = make();
  std::mt19937_64 rng(7);
  std::vector<void*> live;
  for (int i = 0; i < 4000; ++i) {
    if (rng() % 50 == 0) {
      fault_.arm({static_cast<BackendCall>(rng() % 7), 1 + rng() % 3, 1});
    }
    if (live.empty() || rng() % 2 == 0) {
      try {
        live.push_back(a.allocate((1 + rng() % 12) * M / 2 + rng() % 4096, 0));
      } catch (const BackendError&) {
      } catch (const OutOfMemoryError&) {
      }
    } else {
      const std::size_t k = rng() % live.size();
      a.deallocate(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
    if (rng() % 500 == 0) {
      try {
        a.empty_cache();
      } catch (const BackendError&) {
      }
    }
    a.check_invariants();
  }
  fault_.disarm_all();
  EXPECT_GT(a.take_backs(), 0u);
}

// Real memory: every page of every live block carries its block's tag; a stale mapping inside a used page, or a
// chunk reachable from two used pages, would show as a changed tag.
TEST(AliasingHostTest, RandomWorkloadKeepsEveryLiveBlocksBytes) {
  for (const char* conf : {"chunk_mappings:2", "chunk_mappings:4", "chunk_mappings:2,fit_candidates:1"}) {
    SCOPED_TRACE(conf);
    HostBackend backend;
    {
      StitchingAllocator a(parse_config(conf), backend);
      std::mt19937_64 rng(11);
      struct Live {
        std::uint64_t size;
        std::uint8_t tag;
      };
      std::map<std::uint8_t*, Live> live;
      std::uint8_t next_tag = 1;
      auto stamp = [](std::uint8_t* p, std::uint64_t size, std::uint8_t tag) {
        for (std::uint64_t off = 0; off < size; off += 256 * kKiB) p[off] = tag;
        p[size - 1] = tag;
      };
      auto check = [](std::uint8_t* p, std::uint64_t size, std::uint8_t tag) {
        for (std::uint64_t off = 0; off < size; off += 256 * kKiB) ASSERT_EQ(p[off], tag);
        ASSERT_EQ(p[size - 1], tag);
      };
      for (int i = 0; i < 3000; ++i) {
        if (live.size() < 4 || (live.size() < 40 && rng() % 2 == 0)) {
          const std::uint64_t size = (rng() % 3 == 0) ? 512 + rng() % (512 * kKiB) : (1 + rng() % 16) * M / 2 + rng() % 8192;
          auto* p = static_cast<std::uint8_t*>(a.allocate(size, 0));
          const std::uint8_t tag = next_tag++ == 0 ? next_tag++ : static_cast<std::uint8_t>(next_tag - 1);
          stamp(p, size, tag);
          live[p] = {size, tag};
        } else {
          auto it = live.begin();
          std::advance(it, static_cast<long>(rng() % live.size()));
          a.deallocate(it->first);
          live.erase(it);
        }
        if (i % 997 == 0) a.empty_cache();
        for (const auto& [p, b] : live) check(p, b.size, b.tag);
        if (::testing::Test::HasFatalFailure()) return;
        if (i % 25 == 0) a.check_invariants();
      }
      a.check_invariants();
      if (std::string(conf) != "fit_candidates:1") {
        EXPECT_GT(a.take_backs(), 0u);
        EXPECT_GT(a.take_back_misses(), 0u);
      }
    }
    EXPECT_EQ(backend.live_chunks(), 0u);
    EXPECT_EQ(backend.live_mappings(), 0u);
  }
}

}  // namespace
}  // namespace gmlake::engine
