// Thread stress: 16 threads allocating and freeing through one pool for millions of operations, with frees
// on other threads than the allocation (blocks are handed to the next thread through a mailbox), several
// streams, deferred frees, and empty_cache and stats from another thread. Run under TSan in CI
// (scripts/ci-sanitizers.sh). At the end every invariant is checked, and freeing everything then empty_cache
// leaves nothing reserved.
//
// Every block carries a stamp (its own address and a serial number) in its first bytes, written by the thread
// that allocated it and checked by the thread that frees it: two blocks handed out over each other would show.
// GMLAKE_STRESS_OPS (environment) sets the operations per run (default kDefaultOps); the line "thread-stress:"
// on stdout gives what ran, for docs/reliability.md.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/gmlake.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/synchronized_allocator.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

constexpr int kThreads = 16;
constexpr std::uint64_t kDefaultOps = 2'000'000;
constexpr StreamId kStreams = 4;

std::uint64_t ops_per_run() {
  const char* text = std::getenv("GMLAKE_STRESS_OPS");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : kDefaultOps;
}

// What one allocated block carries, so that the thread freeing it can check it was not handed out twice.
struct Stamp {
  std::uintptr_t self;
  std::uint64_t serial;
};

struct Block {
  void* ptr;
  std::uint64_t serial;
};

// Blocks sent to thread t, freed by t.
struct Mailbox {
  std::mutex mutex;
  std::vector<Block> blocks;
};

// The pool under test, behind one interface: a SynchronizedAllocator, or the C API's device pools.
class Pool {
 public:
  virtual ~Pool() = default;
  virtual void* allocate(std::uint64_t size_bytes, StreamId stream) = 0;  // nullptr when out of memory
  virtual void deallocate(void* p) = 0;
  virtual void deferred_free(void* p) = 0;  // begin ... end, where supported
  virtual void empty_cache() = 0;
  virtual void read_stats() = 0;
  virtual bool writable() const = 0;
};

class SynchronizedPool final : public Pool {
 public:
  explicit SynchronizedPool(Allocator& a) : a_(a) {}
  void* allocate(std::uint64_t size_bytes, StreamId stream) override { return a_.allocate(size_bytes, stream); }
  void deallocate(void* p) override { a_.deallocate(p); }
  void deferred_free(void* p) override {
    a_.begin_deferred_free(p);
    a_.end_deferred_free(p);
  }
  void empty_cache() override { a_.empty_cache(); }
  void read_stats() override { (void)a_.stats(); }
  bool writable() const override { return a_.backend().host_accessible(); }

 private:
  Allocator& a_;
};

class CApiPool final : public Pool {
 public:
  explicit CApiPool(int device) : device_(device) {}
  void* allocate(std::uint64_t size_bytes, StreamId stream) override {
    void* p = gmlake_malloc(size_bytes, device_, stream);
    if (p == nullptr) ADD_FAILURE() << gmlake_last_error();
    return p;
  }
  void deallocate(void* p) override {
    gmlake_free(p, 0, device_, 0);
    if (gmlake_last_error_code() != GMLAKE_OK) ADD_FAILURE() << gmlake_last_error();
  }
  void deferred_free(void* p) override { deallocate(p); }
  void empty_cache() override { EXPECT_EQ(gmlake_empty_cache(device_), GMLAKE_OK) << gmlake_last_error(); }
  void read_stats() override {
    gmlake_stats s{};
    EXPECT_EQ(gmlake_get_stats(device_, &s), GMLAKE_OK);
  }
  bool writable() const override { return true; }

 private:
  int device_;
};

std::uint64_t random_size(std::mt19937_64& rng) {
  const std::uint64_t pick = rng() % 100;
  if (pick < 70) return 1 + rng() % (64 * kKiB);
  if (pick < 90) return 1 + rng() % kMiB;
  return kMiB + rng() % (8 * kMiB);
}

struct Totals {
  std::atomic<std::uint64_t> ops{0};
  std::atomic<std::uint64_t> cross_thread_frees{0};
  std::atomic<std::uint64_t> empty_caches{0};
};

class Stress {
 public:
  Stress(Pool& pool, std::uint64_t ops) : pool_(pool), ops_per_thread_(ops / kThreads) {}

  void run() {
    std::atomic<bool> stop{false};
    std::thread cleaner([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        pool_.empty_cache();
        pool_.read_stats();
        totals_.empty_caches.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t) workers.emplace_back([this, t] { work(t); });
    for (std::thread& w : workers) w.join();
    stop = true;
    cleaner.join();
    for (Mailbox& box : boxes_) {
      for (const Block& b : box.blocks) release(b);
      box.blocks.clear();
    }
  }

  const Totals& totals() const { return totals_; }

 private:
  void stamp(const Block& b) {
    if (!pool_.writable()) return;
    const Stamp s{reinterpret_cast<std::uintptr_t>(b.ptr), b.serial};
    std::memcpy(b.ptr, &s, sizeof s);
  }
  void release(const Block& b) {
    if (pool_.writable()) {
      Stamp s;
      std::memcpy(&s, b.ptr, sizeof s);
      EXPECT_EQ(s.self, reinterpret_cast<std::uintptr_t>(b.ptr)) << "a block was handed out twice";
      EXPECT_EQ(s.serial, b.serial) << "a block was handed out twice";
    }
    pool_.deallocate(b.ptr);
  }

  void work(int t) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
    std::vector<Block> mine;
    Mailbox& inbox = boxes_[static_cast<std::size_t>(t)];
    Mailbox& next = boxes_[static_cast<std::size_t>((t + 1) % kThreads)];
    std::vector<Block> received;
    for (std::uint64_t i = 0; i < ops_per_thread_; ++i) {
      const std::uint64_t roll = rng() % 100;
      if (roll < 45 || mine.empty()) {
        const StreamId stream = rng() % kStreams;
        void* p = pool_.allocate(std::max<std::uint64_t>(random_size(rng), sizeof(Stamp)), stream);
        if (p == nullptr) continue;
        const Block b{p, (static_cast<std::uint64_t>(t) << 48) | i};
        stamp(b);
        if (rng() % 2 == 0) {
          mine.push_back(b);
        } else {
          std::lock_guard lock(next.mutex);
          next.blocks.push_back(b);
        }
      } else if (roll < 85) {
        const std::size_t k = rng() % mine.size();
        if (rng() % 8 == 0) {
          pool_.deferred_free(mine[k].ptr);
        } else {
          release(mine[k]);
        }
        mine[k] = mine.back();
        mine.pop_back();
      } else {
        {
          std::lock_guard lock(inbox.mutex);
          received.swap(inbox.blocks);
        }
        for (const Block& b : received) release(b);
        totals_.cross_thread_frees.fetch_add(received.size(), std::memory_order_relaxed);
        received.clear();
      }
      if (mine.size() > 64) {  // keep the working set bounded
        release(mine.back());
        mine.pop_back();
      }
      if (::testing::Test::HasFailure()) break;
    }
    for (const Block& b : mine) release(b);
    totals_.ops.fetch_add(ops_per_thread_, std::memory_order_relaxed);
  }

  Pool& pool_;
  std::uint64_t ops_per_thread_;
  std::array<Mailbox, kThreads> boxes_;
  Totals totals_;
};

void report(const std::string& what, const Totals& totals, double seconds) {
  std::printf("thread-stress: %s threads=%d ops=%llu cross_thread_frees=%llu empty_caches=%llu seconds=%.1f\n",
              what.c_str(), kThreads, static_cast<unsigned long long>(totals.ops.load()),
              static_cast<unsigned long long>(totals.cross_thread_frees.load()),
              static_cast<unsigned long long>(totals.empty_caches.load()), seconds);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class ThreadStressTest : public ::testing::TestWithParam<Policy> {};

TEST_P(ThreadStressTest, SixteenThreadsFreeingEachOthersBlocksLeaveThePoolConsistent) {
  SimBackend backend;
  Config config;
  config.policy = GetParam();
  SynchronizedAllocator allocator(make_allocator(config, backend));
  SynchronizedPool pool(allocator);
  Stress stress(pool, ops_per_run());
  const auto t0 = std::chrono::steady_clock::now();
  stress.run();
  report(to_string(GetParam()), stress.totals(), seconds_since(t0));
  EXPECT_GT(stress.totals().cross_thread_frees.load(), 0u);
  allocator.check_invariants();
  EXPECT_EQ(allocator.stats().allocated_bytes.current, 0);
  EXPECT_EQ(allocator.stats().active_bytes.current, 0);
  allocator.empty_cache();
  allocator.check_invariants();
  EXPECT_EQ(allocator.stats().reserved_bytes.current, 0);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, ThreadStressTest,
                         ::testing::Values(Policy::kGmlake, Policy::kCaching, Policy::kExpandable),
                         [](const ::testing::TestParamInfo<Policy>& info) { return std::string(to_string(info.param)); });

TEST(CApiThreadStressTest, SixteenThreadsOnTheCApiWithRealMemoryAndAShutdownAtTheEnd) {
  gmlake_shutdown();
  ASSERT_EQ(gmlake_init("backend:host"), GMLAKE_OK) << gmlake_last_error();
  CApiPool pool(3);
  Stress stress(pool, ops_per_run());
  const auto t0 = std::chrono::steady_clock::now();
  stress.run();
  report("c_api_host", stress.totals(), seconds_since(t0));
  gmlake_stats s{};
  ASSERT_EQ(gmlake_get_stats(3, &s), GMLAKE_OK);
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.invalid_frees, 0u);
  EXPECT_EQ(gmlake_empty_cache(3), GMLAKE_OK);
  ASSERT_EQ(gmlake_get_stats(3, &s), GMLAKE_OK);
  EXPECT_EQ(s.reserved_bytes.current, 0);
  gmlake_shutdown();
}

}  // namespace
}  // namespace gmlake
