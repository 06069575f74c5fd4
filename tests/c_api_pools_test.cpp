// Private pools through the C API (gmlake_pool_*): what torch.cuda.MemPool and CUDA graph pools use.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gmlake/gmlake.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

constexpr gmlake_pool_id kPool{0, 7};

class CApiPoolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gmlake_shutdown();
    ASSERT_EQ(gmlake_init("backend:host"), GMLAKE_OK) << gmlake_last_error();
  }
  void TearDown() override { gmlake_shutdown(); }

  static std::int64_t use_count(gmlake_pool_id id) {
    std::int64_t n = -1;
    EXPECT_EQ(gmlake_pool_use_count(0, id, &n), GMLAKE_OK) << gmlake_last_error();
    return n;
  }
  static gmlake_stats stats() {
    gmlake_stats s{};
    EXPECT_EQ(gmlake_get_stats(0, &s), GMLAKE_OK);
    return s;
  }
  static std::vector<gmlake_block> pool_blocks(gmlake_pool_id id) {
    std::size_t n = 0;
    EXPECT_EQ(gmlake_pool_blocks(0, id, nullptr, 0, &n), GMLAKE_OK) << gmlake_last_error();
    std::vector<gmlake_block> out(n);
    EXPECT_EQ(gmlake_pool_blocks(0, id, out.data(), out.size(), &n), GMLAKE_OK);
    return out;
  }
};

TEST_F(CApiPoolsTest, APrivatePoolServesItsOwnBlocksAndTheDeviceFreesThemWhereTheyBelong) {
  ASSERT_EQ(gmlake_pool_create(0, kPool), GMLAKE_OK) << gmlake_last_error();
  EXPECT_EQ(use_count(kPool), 1);
  void* main_block = gmlake_malloc(3 * kMiB, 0, 0);
  void* private_block = gmlake_pool_malloc(5 * kMiB, 0, 0, kPool);
  ASSERT_NE(main_block, nullptr);
  ASSERT_NE(private_block, nullptr) << gmlake_last_error();
  EXPECT_EQ(stats().allocated_bytes.current, static_cast<std::int64_t>(8 * kMiB)) << "the device sums its pools";
  const std::vector<gmlake_block> in_pool = pool_blocks(kPool);
  ASSERT_EQ(in_pool.size(), 1u);
  EXPECT_EQ(in_pool[0].address, reinterpret_cast<std::uintptr_t>(private_block));
  ASSERT_EQ(pool_blocks({0, 0}).size(), 1u);

  std::size_t n_segments = 0, n_blocks = 0;
  ASSERT_EQ(gmlake_get_segments(0, nullptr, 0, &n_segments, nullptr, 0, &n_blocks), GMLAKE_OK);
  std::vector<gmlake_segment> segments(n_segments);
  std::vector<gmlake_block> blocks(n_blocks);
  ASSERT_EQ(gmlake_get_segments(0, segments.data(), n_segments, &n_segments, blocks.data(), n_blocks, &n_blocks),
            GMLAKE_OK);
  int private_segments = 0;
  for (const gmlake_segment& s : segments) private_segments += s.pool.first == kPool.first && s.pool.second == kPool.second;
  EXPECT_GE(private_segments, 1);

  gmlake_free(private_block, 0, 0, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK) << gmlake_last_error();
  EXPECT_TRUE(pool_blocks(kPool).empty());
  gmlake_free(main_block, 0, 0, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK) << gmlake_last_error();
  gmlake_free(main_block, 0, 0, 0);  // a double free is still caught, with private pools about
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_INVALID_POINTER);
}

TEST_F(CApiPoolsTest, APoolInUseKeepsItsMemoryThroughEmptyCacheAndGoesWhenReleasedAndEmpty) {
  ASSERT_EQ(gmlake_pool_create(0, kPool), GMLAKE_OK);
  ASSERT_EQ(gmlake_pool_create(0, kPool), GMLAKE_OK);
  EXPECT_EQ(use_count(kPool), 2);
  void* p = gmlake_pool_malloc(4 * kMiB, 0, 0, kPool);
  ASSERT_NE(p, nullptr);
  gmlake_free(p, 0, 0, 0);
  const std::int64_t cached = stats().reserved_bytes.current;
  EXPECT_GT(cached, 0);
  ASSERT_EQ(gmlake_empty_cache(0), GMLAKE_OK);
  EXPECT_EQ(stats().reserved_bytes.current, cached) << "a captured graph may still use a pool in use";
  void* live = gmlake_pool_malloc(kMiB, 0, 0, kPool);
  ASSERT_EQ(gmlake_pool_release(0, kPool), GMLAKE_OK);
  ASSERT_EQ(gmlake_pool_release(0, kPool), GMLAKE_OK);
  EXPECT_EQ(use_count(kPool), 0);
  EXPECT_GT(stats().allocated_bytes.current, 0) << "released, but a block still lives: the pool stays";
  gmlake_free(live, 0, 0, 0);
  EXPECT_EQ(stats().reserved_bytes.current, 0) << "released and empty: the pool and its memory are gone";
  EXPECT_EQ(gmlake_pool_malloc(kMiB, 0, 0, kPool), nullptr);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_INVALID_ARGUMENT);
}

TEST_F(CApiPoolsTest, BadPoolCallsAreRefusedAndChangeNothing) {
  EXPECT_EQ(gmlake_pool_create(0, gmlake_pool_id{0, 0}), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_pool_release(0, kPool), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gmlake_last_error()).find("no private pool"), std::string::npos) << gmlake_last_error();
  ASSERT_EQ(gmlake_pool_create(0, kPool), GMLAKE_OK);
  ASSERT_EQ(gmlake_pool_release(0, kPool), GMLAKE_OK);
  EXPECT_EQ(gmlake_pool_malloc(kMiB, 0, 0, kPool), nullptr) << "released and empty: gone";
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_pool_empty_cache(0, kPool), GMLAKE_OK) << "a pool gone has nothing cached";
  EXPECT_EQ(gmlake_pool_use_count(0, kPool, nullptr), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(gmlake_malloc(kMiB, 0, 0), nullptr) << "the device stays usable";
}

TEST_F(CApiPoolsTest, TheSimBackendRefusesPrivatePools) {
  gmlake_shutdown();
  ASSERT_EQ(gmlake_init("backend:sim"), GMLAKE_OK);
  EXPECT_EQ(gmlake_pool_create(0, kPool), GMLAKE_ERROR_CONFIG);
  EXPECT_NE(std::string(gmlake_last_error()).find("real addresses"), std::string::npos) << gmlake_last_error();
}

TEST_F(CApiPoolsTest, TracingCoversPrivatePools) {
  ASSERT_EQ(gmlake_set_tracing(0, 100), GMLAKE_OK);
  ASSERT_EQ(gmlake_pool_create(0, kPool), GMLAKE_OK);
  void* p = gmlake_pool_malloc(kMiB, 0, 3, kPool);
  ASSERT_NE(p, nullptr);
  std::vector<gmlake_trace_event> events(64);
  std::size_t n = 0;
  ASSERT_EQ(gmlake_drain_trace(0, events.data(), events.size(), &n), GMLAKE_OK);
  ASSERT_GE(n, 1u);
  EXPECT_EQ(events[n - 1].action, GMLAKE_TRACE_ALLOC);
  EXPECT_EQ(events[n - 1].addr, reinterpret_cast<std::uintptr_t>(p));
  gmlake_free(p, 0, 0, 0);
}

// What the PyTorch extension's setCheckpointPoolState does: checkpoint = gmlake_pool_blocks, later
// gmlake_pool_restore(checkpoint), then each block made again is freed with gmlake_free.
TEST_F(CApiPoolsTest, RestoreFreesThePoolsBlocksAndMakesTheCheckpointsBlocksAgainAtTheirAddresses) {
  ASSERT_EQ(gmlake_pool_create(0, kPool), GMLAKE_OK);
  std::vector<void*> first;
  for (std::uint64_t size : {3 * kMiB, 64 * kKiB, 5 * kMiB + 1, kKiB}) {
    first.push_back(gmlake_pool_malloc(size, 0, 0, kPool));
  }
  gmlake_free(first[1], 0, 0, 0);
  const std::vector<gmlake_block> checkpoint = pool_blocks(kPool);
  ASSERT_EQ(checkpoint.size(), 3u);
  gmlake_free(first[0], 0, 0, 0);  // died after the checkpoint: made again by the restore
  void* later = gmlake_pool_malloc(7 * kMiB, 0, 0, kPool);  // made after it: freed by the restore
  void* main_block = gmlake_malloc(kMiB, 0, 0);
  const gmlake_stats before = stats();

  ASSERT_EQ(gmlake_pool_restore(0, kPool, checkpoint.data(), checkpoint.size()), GMLAKE_OK) << gmlake_last_error();
  const std::vector<gmlake_block> now = pool_blocks(kPool);
  ASSERT_EQ(now.size(), checkpoint.size());
  for (std::size_t i = 0; i < now.size(); ++i) {
    EXPECT_EQ(now[i].address, checkpoint[i].address);
    EXPECT_EQ(now[i].size_bytes, checkpoint[i].size_bytes);
    EXPECT_EQ(now[i].requested_bytes, checkpoint[i].requested_bytes);
  }
  EXPECT_EQ(stats().reserved_bytes.current, before.reserved_bytes.current) << "no memory made or given back";
  ASSERT_EQ(pool_blocks({0, 0}).size(), 1u) << "the main pool is not touched";
  gmlake_free(later, 0, 0, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_INVALID_POINTER) << "later was freed by the restore";
  for (const gmlake_block& b : checkpoint) {
    gmlake_free(reinterpret_cast<void*>(b.address), 0, 0, 0);
    EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK) << gmlake_last_error();
  }
  EXPECT_TRUE(pool_blocks(kPool).empty());
  gmlake_free(main_block, 0, 0, 0);
  ASSERT_EQ(gmlake_pool_release(0, kPool), GMLAKE_OK);
}

TEST_F(CApiPoolsTest, BadRestoresAreRefusedAndChangeNothing) {
  ASSERT_EQ(gmlake_pool_create(0, kPool), GMLAKE_OK);
  void* p = gmlake_pool_malloc(kMiB, 0, 0, kPool);
  ASSERT_NE(p, nullptr);
  const std::uint64_t a = reinterpret_cast<std::uintptr_t>(p);
  const gmlake_block pending{a, kMiB, kMiB, 1};
  const gmlake_block overlapping[] = {{a, kMiB, kMiB, 0}, {a + kKiB, kKiB, kKiB, 0}};
  const gmlake_block outside{a + kMiB, 4 * kMiB, kMiB, 0};  // past the 2 MiB segment
  const gmlake_block unaligned{a, 1000, 1000, 0};
  EXPECT_EQ(gmlake_pool_restore(0, kPool, &pending, 1), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gmlake_last_error()).find("only allocated blocks"), std::string::npos) << gmlake_last_error();
  EXPECT_EQ(gmlake_pool_restore(0, kPool, overlapping, 2), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gmlake_last_error()).find("overlaps"), std::string::npos) << gmlake_last_error();
  EXPECT_EQ(gmlake_pool_restore(0, kPool, &outside, 1), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gmlake_last_error()).find("not inside one segment"), std::string::npos) << gmlake_last_error();
  EXPECT_EQ(gmlake_pool_restore(0, kPool, &unaligned, 1), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_pool_restore(0, kPool, nullptr, 1), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_pool_restore(0, gmlake_pool_id{0, 0}, nullptr, 0), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_pool_restore(0, gmlake_pool_id{0, 8}, nullptr, 0), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_pool_restore(-1, kPool, nullptr, 0), GMLAKE_ERROR_INVALID_ARGUMENT);
  const std::vector<gmlake_block> live = pool_blocks(kPool);
  ASSERT_EQ(live.size(), 1u) << "nothing freed";
  EXPECT_EQ(live[0].address, a);
  ASSERT_EQ(gmlake_pool_restore(0, kPool, nullptr, 0), GMLAKE_OK) << "the empty checkpoint frees every block";
  EXPECT_TRUE(pool_blocks(kPool).empty());
  ASSERT_EQ(gmlake_pool_release(0, kPool), GMLAKE_OK);
}

}  // namespace
}  // namespace gmlake
