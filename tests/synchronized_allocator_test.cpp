// SynchronizedAllocator: many threads allocating and freeing through one pool (frees on other threads than
// the allocation, several streams, empty_cache from another thread) leave every policy consistent.
#include "gmlake/synchronized_allocator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gmlake/sim_backend.h"

namespace gmlake {
namespace {

class SynchronizedAllocatorTest : public ::testing::TestWithParam<Policy> {};

TEST_P(SynchronizedAllocatorTest, ThreadsFreeingEachOthersBlocksLeaveThePoolConsistent) {
  SimBackend backend;
  Config config;
  config.policy = GetParam();
  SynchronizedAllocator pool(make_allocator(config, backend));

  constexpr int kThreads = 8;
  constexpr int kOpsPerThread = 20000;
  std::mutex shared_mutex;
  std::vector<void*> shared;  // blocks any thread may free
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<bool> stop_cleaner{false};

  std::thread cleaner([&] {
    while (!stop_cleaner.load()) {
      pool.empty_cache();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 100);
      for (int i = 0; i < kOpsPerThread; ++i) {
        if (rng() % 2 == 0) {
          void* p = pool.allocate(1 + rng() % (8 * kMiB), /*stream=*/static_cast<StreamId>(t % 3));
          allocations.fetch_add(1);
          std::lock_guard lock(shared_mutex);
          shared.push_back(p);
        } else {
          void* p = nullptr;
          {
            std::lock_guard lock(shared_mutex);
            if (shared.empty()) continue;
            const std::size_t k = rng() % shared.size();
            p = shared[k];
            shared[k] = shared.back();
            shared.pop_back();
          }
          pool.deallocate(p);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  stop_cleaner = true;
  cleaner.join();

  pool.check_invariants();
  EXPECT_EQ(pool.blocks().size(), shared.size());
  EXPECT_EQ(pool.stats().num_allocs, allocations.load());
  for (void* p : shared) pool.deallocate(p);
  pool.empty_cache();
  pool.check_invariants();
  EXPECT_EQ(pool.stats().allocated_bytes.current, 0);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, SynchronizedAllocatorTest,
                         ::testing::Values(Policy::kGmlake, Policy::kCaching, Policy::kExpandable),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace gmlake
