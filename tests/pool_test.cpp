// Pool (pool.h): the stack every front end uses, assembled from one Config.
#include "gmlake/pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/snapshot_writer.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

class PoolTest : public ::testing::TestWithParam<Policy> {
 protected:
  Config config(const std::string& text) const {
    Config c = parse_config(text);
    c.policy = GetParam();
    return c;
  }
};

TEST_P(PoolTest, HostBackendServesRealMemoryAndCountsItInStats) {
  Pool pool(config("backend:host"));
  EXPECT_EQ(pool.backend().name(), "host");
  EXPECT_EQ(pool.policy(), GetParam());
  auto* p = static_cast<unsigned char*>(pool.allocate(3 * kMiB, 0));
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x5A, 3 * kMiB);
  EXPECT_EQ(p[3 * kMiB - 1], 0x5A);
  EXPECT_EQ(pool.stats().allocated_bytes.current, static_cast<std::int64_t>(3 * kMiB));
  EXPECT_GE(pool.stats().reserved_bytes.current, static_cast<std::int64_t>(3 * kMiB));
  ASSERT_TRUE(pool.find_block(p).has_value());
  pool.check_invariants();
  pool.deallocate(p);
  EXPECT_EQ(pool.stats().allocated_bytes.current, 0);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved_bytes.current, 0);
  pool.check_invariants();
}

TEST_P(PoolTest, DebugPutsThePoisoningLayerInTheStack) {
  Pool pool(config("backend:host,debug:1"));
  auto* p = static_cast<unsigned char*>(pool.allocate(4096, 0));
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x11, 4096);
  pool.deallocate(p);  // cached, still mapped: the poisoning layer filled it
  EXPECT_EQ(p[0], 0xDB);
  EXPECT_EQ(p[4095], 0xDB);
}

TEST_P(PoolTest, WithoutDebugFreedMemoryIsLeftAsItWas) {
  Pool pool(config("backend:host"));
  auto* p = static_cast<unsigned char*>(pool.allocate(4096, 0));
  std::memset(p, 0x11, 4096);
  pool.deallocate(p);
  EXPECT_EQ(p[0], 0x11);
}

TEST_P(PoolTest, RecordStreamChecksItsPointerAndTheStackStaysUsable) {
  Pool pool(config("backend:sim"));
  void* p = pool.allocate(kMiB, 1);
  pool.record_stream(p, 2);  // sim runs nothing asynchronously: accepted, nothing to wait for
  try {
    pool.record_stream(static_cast<char*>(p) + 512, 2);
    FAIL() << "an interior pointer was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidPointer);
  }
  pool.record_stream(nullptr, 2);
  pool.deallocate(p);
  EXPECT_THROW(pool.deallocate(p), Error);
  EXPECT_EQ(pool.stats().invalid_frees, 1u);
  EXPECT_NE(pool.allocate(kMiB, 1), nullptr);
  pool.check_invariants();
}

TEST_P(PoolTest, DeferredFreesPassThroughEveryLayer) {
  Pool pool(config("backend:sim"));
  void* p = pool.allocate(kMiB, 0);
  pool.begin_deferred_free(p);
  EXPECT_EQ(pool.stats().allocated_bytes.current, 0);
  EXPECT_GT(pool.stats().active_bytes.current, 0);
  ASSERT_TRUE(pool.find_block(p).has_value());
  EXPECT_TRUE(pool.find_block(p)->pending_free);
  pool.end_deferred_free(p);
  EXPECT_EQ(pool.stats().active_bytes.current, 0);
  pool.check_invariants();
}

TEST_P(PoolTest, SetCapBytesReachesThePolicyAndTheConfig) {
  Pool pool(config("backend:sim"));
  pool.set_cap_bytes(64 * kMiB);
  EXPECT_EQ(pool.config().cap_bytes, 64 * kMiB);
  EXPECT_THROW(pool.allocate(100 * kMiB, 0), OutOfMemoryError);
  EXPECT_EQ(pool.stats().reserved_bytes.current, 0);
  EXPECT_NE(pool.allocate(32 * kMiB, 0), nullptr);
}

TEST_P(PoolTest, ABorrowedBackendGetsEveryChunkBackWhenThePoolGoes) {
  SimBackend backend(kPageBytes);
  {
    Pool pool(config(""), backend);
    EXPECT_EQ(&pool.backend(), &backend);
    ASSERT_NE(pool.allocate(50 * kMiB, 0), nullptr);  // left live on purpose
    ASSERT_NE(pool.allocate(kKiB, 0), nullptr);
  }
  EXPECT_GT(backend.counters()[BackendCall::kCreate], 0u);
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_mappings(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, PoolTest,
                         ::testing::Values(Policy::kGmlake, Policy::kCaching, Policy::kExpandable),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(PoolConfigTest, WithoutReleaseOnOomCachedSegmentsStayAndTheAllocationFails) {
  for (const char* policy : {"caching", "expandable"}) {
    for (const bool release : {true, false}) {
      Pool pool(parse_config(std::string("backend:sim,cap_bytes:64M,policy:") + policy +
                             ",release_on_oom:" + (release ? "true" : "false")));
      pool.deallocate(pool.allocate(40 * kMiB, 0));  // cached: 40 MiB stays reserved
      void* other_stream = nullptr;
      try {
        other_stream = pool.allocate(40 * kMiB, 1);  // another stream: the cached segment does not serve it
      } catch (const OutOfMemoryError&) {
      }
      EXPECT_EQ(other_stream != nullptr, release) << policy;
      EXPECT_EQ(pool.stats().num_alloc_retries, release ? 1u : 0u) << policy;
      pool.check_invariants();
    }
  }
}

TEST(PoolConfigTest, AnUnknownBackendOrABadConfigMakesNoPool) {
  Config bad_backend;
  bad_backend.backend = "gpu";
  EXPECT_THROW(Pool{bad_backend}, Error);
  Config bad;
  bad.page_bytes = 3;  // not a power of two
  try {
    Pool pool(bad);
    FAIL() << "an invalid config made a pool";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConfig);
  }
}

// restore: PyTorch's setCheckpointPoolState on a private pool's stack (caching, no stream events).
class PoolRestoreTest : public ::testing::Test {
 protected:
  static Config caching(const std::string& text = "backend:host") {
    Config c = parse_config(text);
    c.policy = Policy::kCaching;
    c.release_on_oom = false;
    return c;
  }
  static void* at(const BlockInfo& b) { return reinterpret_cast<void*>(b.address); }
};

TEST_F(PoolRestoreTest, FreesTheLiveBlocksAndMakesTheCheckpointsBlocksAgainWithTheirBytes) {
  Pool pool(caching());
  auto* a = static_cast<unsigned char*>(pool.allocate(3 * kMiB, 0));
  void* b = pool.allocate(64 * kKiB, 0);
  auto* c = static_cast<unsigned char*>(pool.allocate(5 * kMiB + 1, 0));
  std::memset(a, 0x3C, 3 * kMiB);
  std::memset(c, 0x7E, 5 * kMiB + 1);
  const std::vector<BlockInfo> checkpoint = pool.blocks();
  pool.deallocate(b);
  void* d = pool.allocate(7 * kMiB, 0);  // after the checkpoint: freed by the restore
  pool.set_tracing(1000);
  pool.check_invariants();

  pool.restore(checkpoint);
  pool.check_invariants();
  const std::vector<BlockInfo> now = pool.blocks();
  ASSERT_EQ(now.size(), checkpoint.size());
  for (std::size_t i = 0; i < now.size(); ++i) {
    EXPECT_EQ(now[i].address, checkpoint[i].address);
    EXPECT_EQ(now[i].size_bytes, checkpoint[i].size_bytes);
    EXPECT_EQ(now[i].requested_bytes, checkpoint[i].requested_bytes);
  }
  EXPECT_FALSE(pool.find_block(d).has_value()) << "d was not in the checkpoint";
  EXPECT_EQ(a[3 * kMiB - 1], 0x3C) << "a block freed and made again keeps its bytes";
  EXPECT_EQ(c[0], 0x7E);
  std::vector<SnapshotEvent> events;
  pool.drain_trace(&events);
  int freed = 0, allocated = 0;
  for (const SnapshotEvent& e : events) {
    freed += e.action == SnapshotAction::kFreeCompleted;
    allocated += e.action == SnapshotAction::kAlloc;
  }
  EXPECT_EQ(freed, 3) << "a, c and d";
  EXPECT_EQ(allocated, 3) << "a, b and c";
  for (const BlockInfo& x : checkpoint) pool.deallocate(at(x));
  pool.check_invariants();
  EXPECT_EQ(pool.stats().allocated_bytes.current, 0);
}

TEST_F(PoolRestoreTest, RefusesWhatItCannotMakeAndChangesNothing) {
  Pool pool(caching());
  void* a = pool.allocate(kMiB, 0);  // a 2 MiB small segment
  void* b = pool.allocate(4 * kMiB, 0);  // a 20 MiB large segment
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(a);
  const std::vector<BlockInfo> cases[] = {
      {{base, 2 * kKiB, 1, 0, false}, {base + kKiB, kKiB, 1, 0, false}},  // overlapping
      {{base + kMiB, 2 * kMiB, 1, 0, false}},                             // past its segment's end
      {{kRoundBytes, kRoundBytes, 1, 0, false}},                          // in no segment
      {{base, 1000, 1, 0, false}},                                        // not a multiple of 512 B
      {{base, kKiB, 2 * kKiB, 0, false}},                                 // asks more than its size
      {{base, kKiB, 1, 0, true}},                                         // pending
  };
  for (const std::vector<BlockInfo>& wanted : cases) {
    try {
      pool.restore(wanted);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    }
    ASSERT_EQ(pool.blocks().size(), 2u) << "nothing freed";
    pool.check_invariants();
  }
  pool.restore({});  // the empty checkpoint: every block freed
  EXPECT_TRUE(pool.blocks().empty());
  EXPECT_FALSE(pool.find_block(b).has_value());
  pool.check_invariants();
}

TEST_F(PoolRestoreTest, OnlyAPrivatePoolsStackRestores) {
  Config gmlake_policy = caching();
  gmlake_policy.policy = Policy::kGmlake;
  const Config refused[] = {gmlake_policy, caching("backend:host,debug:1")};
  for (const Config& config : refused) {
    Pool pool(config);
    void* p = pool.allocate(kMiB, 0);
    try {
      pool.restore({});
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("needs the caching policy"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(pool.find_block(p).has_value());
  }
}

}  // namespace
}  // namespace gmlake
