// The `async` policy (src/policies/async/async_allocator.h) on the CPU: its bookkeeping over a modelled
// stream-ordered pool (what it asks the pool, on which stream, and what it counts), and its refusal on the
// backends that have no stream-ordered pool (sim, host), in make_allocator, the Pool and the replay. The real
// pool (cudaMallocAsync) is tested on the GPU: tests/gpu/cuda_mem_pool_test.cpp.
#include "policies/async/async_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/pool.h"
#include "gmlake/replay.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

// A stream-ordered pool modelled on the CPU, as the driver keeps one with the release threshold at its maximum:
// it grows by whole 2 MiB granules when its free bytes cannot hold a request, never shrinks but by trim_to, and
// fails past max_size_bytes. Every call is logged with its stream.
class ModelledPool final : public StreamOrderedPool {
 public:
  struct Call {
    std::string what;  // "alloc" or "free"
    std::uintptr_t address;
    StreamId stream;
  };
  explicit ModelledPool(std::uint64_t max_size_bytes, std::vector<Call>* log) : max_(max_size_bytes), log_(log) {}

  std::uintptr_t allocate_async(std::uint64_t size_bytes, StreamId stream) override {
    const std::uint64_t need = used_ + size_bytes;
    if (need > reserved_) {
      const std::uint64_t grown = round_up(need, 2 * kMiB);
      if (max_ != 0 && grown > max_) throw OutOfMemoryError(size_bytes, reserved_, used_, max_, "modelled pool full");
      reserved_ = grown;
      high_ = std::max(high_, reserved_);
    }
    used_ += size_bytes;
    const std::uintptr_t address = next_;
    next_ += round_up(size_bytes, 256);
    sizes_[address] = size_bytes;
    streams_seen_.insert({stream, true});
    log_->push_back({"alloc", address, stream});
    return address;
  }
  void free_async(std::uintptr_t address, StreamId stream) override {
    if (fail_frees > 0) {
      --fail_frees;
      throw BackendError("cuMemFreeAsync", "scripted failure");
    }
    used_ -= sizes_.at(address);
    sizes_.erase(address);
    log_->push_back({"free", address, stream});
  }
  void synchronize() override { ++synchronizations; }
  void trim_to(std::uint64_t keep_bytes) override { reserved_ = std::max(round_up(used_, 2 * kMiB), std::min(reserved_, keep_bytes)); }
  std::uint64_t reserved_bytes() const override { return reserved_; }
  std::uint64_t reserved_high_bytes() const override { return high_; }
  std::uint64_t used_bytes() const override { return used_; }
  std::uint64_t used_high_bytes() const override { return used_; }
  void reset_high_marks() override { high_ = reserved_; }
  std::uint64_t max_size_bytes() const override { return max_; }
  std::uint64_t streams() const override { return streams_seen_.size(); }

  int synchronizations = 0;
  int fail_frees = 0;  // the next this many free_async calls throw BackendError, freeing nothing

 private:
  std::uint64_t max_;
  std::vector<Call>* log_;
  std::uint64_t reserved_ = 0, high_ = 0, used_ = 0;
  std::uintptr_t next_ = 0x10000;
  std::map<std::uintptr_t, std::uint64_t> sizes_;
  std::map<StreamId, bool> streams_seen_;
};

class AsyncAllocatorTest : public ::testing::Test {
 protected:
  // An allocator over a fresh modelled pool of at most `max_size_bytes` (0: unbounded).
  std::unique_ptr<AsyncAllocator> make(std::uint64_t max_size_bytes = 0, const std::string& conf = "") {
    auto pool = std::make_unique<ModelledPool>(max_size_bytes, &log_);
    pool_ = pool.get();
    return std::make_unique<AsyncAllocator>(parse_config(conf), backend_, std::move(pool));
  }

  SimBackend backend_;
  std::vector<ModelledPool::Call> log_;
  ModelledPool* pool_ = nullptr;
};

TEST_F(AsyncAllocatorTest, EachAllocationAndFreeIsOnePoolCallOnTheBlocksStream) {
  auto a = make();
  void* p = a->allocate(1000, 7);
  void* q = a->allocate(3 * kMiB, 9);
  a->deallocate(p);
  a->deallocate(q);
  ASSERT_EQ(log_.size(), 4u);
  EXPECT_EQ(log_[0].what, "alloc");
  EXPECT_EQ(log_[0].stream, 7u);
  EXPECT_EQ(log_[1].stream, 9u);
  EXPECT_EQ(log_[2].what, "free");
  EXPECT_EQ(log_[2].address, reinterpret_cast<std::uintptr_t>(p));
  EXPECT_EQ(log_[2].stream, 7u) << "a block is freed on the stream it was allocated on";
  EXPECT_EQ(log_[3].stream, 9u);
  EXPECT_EQ(pool_->streams(), 2u);
  a->check_invariants();
}

TEST_F(AsyncAllocatorTest, StatsCountRequestsRoundedTo512AndTakeReservedFromThePoolsHighMark) {
  auto a = make();
  void* p = a->allocate(1000, 0);
  void* q = a->allocate(3 * kMiB + 1, 0);
  Stats s = a->stats();
  EXPECT_EQ(s.allocated_bytes.current, static_cast<std::int64_t>(1024 + 3 * kMiB + 512));
  EXPECT_EQ(s.requested_bytes.current, static_cast<std::int64_t>(1000 + 3 * kMiB + 1));
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(4 * kMiB));  // the model's two granules
  EXPECT_EQ(s.num_allocs, 2u);
  a->deallocate(q);
  s = a->stats();
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(4 * kMiB)) << "the pool keeps freed memory";
  EXPECT_EQ(s.reserved_bytes.peak, static_cast<std::int64_t>(4 * kMiB));
  EXPECT_EQ(s.allocated_bytes.peak, static_cast<std::int64_t>(1024 + 3 * kMiB + 512));
  a->empty_cache();
  EXPECT_EQ(pool_->synchronizations, 1) << "empty_cache waits for the streams before trimming";
  s = a->stats();
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(2 * kMiB));
  a->reset_peak_stats();
  EXPECT_EQ(a->stats().reserved_bytes.peak, static_cast<std::int64_t>(2 * kMiB));
  EXPECT_EQ(a->stats().allocated_bytes.peak, static_cast<std::int64_t>(1024));
  a->deallocate(p);
  EXPECT_EQ(a->stats().num_frees, 2u);
  a->check_invariants();
}

TEST_F(AsyncAllocatorTest, ADeferredFreeReachesThePoolOnlyWhenItEnds) {
  auto a = make();
  void* p = a->allocate(4096, 3);
  a->begin_deferred_free(p);
  EXPECT_EQ(std::count_if(log_.begin(), log_.end(), [](const auto& c) { return c.what == "free"; }), 0);
  Stats s = a->stats();
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.active_bytes.current, 4096);
  ASSERT_TRUE(a->find_block(p).has_value());
  EXPECT_TRUE(a->find_block(p)->pending_free);
  a->check_invariants();
  a->end_deferred_free(p);
  ASSERT_EQ(log_.back().what, "free");
  EXPECT_EQ(log_.back().stream, 3u);
  EXPECT_EQ(a->stats().active_bytes.current, 0);
  EXPECT_FALSE(a->find_block(p).has_value());
  a->check_invariants();
}

TEST_F(AsyncAllocatorTest, BadFreesAreRejectedAndCountedLeavingTheAllocatorUnchanged) {
  auto a = make();
  void* p = a->allocate(512, 0);
  char* interior = static_cast<char*>(p) + 256;
  test::expect_error([&] { a->deallocate(interior); }, ErrorCode::kInvalidPointer, "gmlake async");
  test::expect_error([&] { a->end_deferred_free(p); }, ErrorCode::kInvalidPointer, "gmlake async");
  a->begin_deferred_free(p);
  test::expect_error([&] { a->deallocate(p); }, ErrorCode::kInvalidPointer, "gmlake async");
  test::expect_error([&] { a->begin_deferred_free(p); }, ErrorCode::kInvalidPointer, "gmlake async");
  EXPECT_EQ(a->stats().invalid_frees, 4u);
  a->check_invariants();
  a->end_deferred_free(p);
  test::expect_error([&] { a->deallocate(p); }, ErrorCode::kInvalidPointer, "gmlake async");
  a->deallocate(nullptr);  // nothing, as free(nullptr)
  EXPECT_EQ(a->allocate(0, 0), nullptr);
  EXPECT_EQ(a->stats().num_allocs, 1u);
  a->check_invariants();
}

// The one rule for a failed release (block_table.h), as in every policy: the free is committed, then the driver is
// asked; a refusal propagates with the block freed, never half-freed, and the allocator goes on.
TEST_F(AsyncAllocatorTest, AFreeTheDriverRefusesIsCommittedAndTheErrorPropagates) {
  auto a = make();
  void* p = a->allocate(1000, 3);
  void* q = a->allocate(2000, 4);
  pool_->fail_frees = 1;
  test::expect_error([&] { a->deallocate(p); }, ErrorCode::kBackend, "cuMemFreeAsync");
  EXPECT_FALSE(a->find_block(p).has_value()) << "the free was committed before the driver was asked";
  Stats s = a->stats();
  EXPECT_EQ(s.allocated_bytes.current, 2048);
  EXPECT_EQ(s.active_bytes.current, 2048);
  EXPECT_EQ(s.num_frees, 1u);
  a->check_invariants();
  test::expect_error([&] { a->deallocate(p); }, ErrorCode::kInvalidPointer, "not the start of a live block");

  a->begin_deferred_free(q);
  pool_->fail_frees = 1;
  test::expect_error([&] { a->end_deferred_free(q); }, ErrorCode::kBackend, "cuMemFreeAsync");
  EXPECT_FALSE(a->find_block(q).has_value());
  EXPECT_EQ(a->stats().active_bytes.current, 0);
  a->check_invariants();
  void* r = a->allocate(512, 0);
  EXPECT_NE(r, nullptr) << "the allocator goes on after a refused free";
  a->deallocate(r);
  a->check_invariants();
}

TEST_F(AsyncAllocatorTest, OutOfMemoryFromThePoolOrTheCapIsCountedAndTheAllocatorGoesOn) {
  auto a = make(/*max_size_bytes=*/4 * kMiB);
  void* p = a->allocate(3 * kMiB, 0);
  EXPECT_THROW(a->allocate(2 * kMiB, 0), OutOfMemoryError);  // the pool would pass its maximum size
  EXPECT_EQ(a->stats().num_ooms, 1u);
  a->check_invariants();
  a->deallocate(p);
  EXPECT_NE(a->allocate(2 * kMiB, 0), nullptr) << "freed memory serves the next request";

  auto capped = make(0, "cap_bytes:1M");
  void* q = capped->allocate(768 * kKiB, 0);
  EXPECT_THROW(capped->allocate(512 * kKiB, 0), OutOfMemoryError);  // 768 KiB active + 512 KiB > 1 MiB
  EXPECT_EQ(capped->stats().num_ooms, 1u);
  capped->begin_deferred_free(q);
  EXPECT_THROW(capped->allocate(512 * kKiB, 0), OutOfMemoryError) << "a pending free still holds its memory";
  capped->end_deferred_free(q);
  EXPECT_NE(capped->allocate(512 * kKiB, 0), nullptr);
  capped->set_cap_bytes(0);
  EXPECT_NE(capped->allocate(64 * kMiB, 0), nullptr);
  capped->check_invariants();
}

TEST_F(AsyncAllocatorTest, TeardownFreesTheBlocksStillLiveOnTheirStreams) {
  {
    auto a = make();
    a->allocate(1000, 1);
    void* pending = a->allocate(2000, 2);
    a->begin_deferred_free(pending);
  }
  ASSERT_EQ(log_.size(), 4u);
  std::vector<StreamId> freed;
  for (const auto& c : log_) {
    if (c.what == "free") freed.push_back(c.stream);
  }
  std::sort(freed.begin(), freed.end());
  EXPECT_EQ(freed, (std::vector<StreamId>{1, 2}));
}

TEST_F(AsyncAllocatorTest, BlocksAreListedInAddressOrderAndSegmentsAreNotShown) {
  auto a = make();
  void* p = a->allocate(1000, 0);
  void* q = a->allocate(5000, 4);
  const std::vector<BlockInfo> blocks = a->blocks();
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].address, reinterpret_cast<std::uintptr_t>(p));
  EXPECT_EQ(blocks[0].size_bytes, 1024u);
  EXPECT_EQ(blocks[0].requested_bytes, 1000u);
  EXPECT_EQ(blocks[1].address, reinterpret_cast<std::uintptr_t>(q));
  EXPECT_EQ(blocks[1].stream, 4u);
  EXPECT_TRUE(a->segments().empty());
  EXPECT_EQ(a->policy(), Policy::kAsync);
  EXPECT_EQ(&a->backend(), &backend_);
}

// A backend whose only capability is a modelled stream-ordered pool bounded by its device limit, as CudaBackend
// makes a CudaMemPool whose maxSize is the device limit: the replay's path to `async` on the CPU. Its VMM calls are
// never made by `async`.
class PoolOnlyBackend final : public Backend {
 public:
  explicit PoolOnlyBackend(std::vector<ModelledPool::Call>* log) : Backend(kPageBytes), log_(log) {}
  std::string_view name() const override { return "pool-only"; }
  bool host_accessible() const override { return false; }
  std::unique_ptr<StreamOrderedPool> make_stream_ordered_pool() override {
    return std::make_unique<ModelledPool>(device_limit_bytes(), log_);
  }

 protected:
  [[noreturn]] static void unused() { throw std::logic_error("async made a VMM call"); }
  std::uintptr_t do_reserve(std::uint64_t) override { unused(); }
  void do_address_free(std::uintptr_t, std::uint64_t) override { unused(); }
  ChunkHandle do_create(std::uint64_t) override { unused(); }
  void do_release(ChunkHandle, std::uint64_t) override { unused(); }
  void do_map(std::uintptr_t, std::uint64_t, ChunkHandle) override { unused(); }
  void do_unmap(std::uintptr_t, std::uint64_t) override { unused(); }
  void do_set_access(std::uintptr_t, std::uint64_t) override { unused(); }

 private:
  std::vector<ModelledPool::Call>* log_;
};

// Two streams, a deferred free (record_stream) and a block still live at the end.
Trace two_stream_trace() {
  Trace t;
  t.name = "two_streams";
  DeviceTrace d;
  std::int64_t time_us = 0;
  auto ev = [&](TraceAction a, std::uint64_t addr, std::uint64_t size, std::uint64_t stream) {
    d.events.push_back({a, addr, size, stream, time_us += 5});
  };
  ev(TraceAction::kAlloc, 0xA000, 3 * kMiB, 0);
  ev(TraceAction::kAlloc, 0xB000, 1000, 7);
  ev(TraceAction::kFreeRequested, 0xA000, 3 * kMiB, 0);  // completes after the next allocation: deferred
  ev(TraceAction::kAlloc, 0xC000, 5 * kMiB, 0);
  ev(TraceAction::kFreeCompleted, 0xA000, 3 * kMiB, 0);
  ev(TraceAction::kFreeRequested, 0xB000, 1000, 7);
  ev(TraceAction::kFreeCompleted, 0xB000, 1000, 7);
  ev(TraceAction::kAlloc, 0xD000, 1 * kMiB, 7);
  t.devices.push_back(d);
  return t;
}

TEST(AsyncReplayTest, TheReplayDrivesAsyncThroughTheBackendsPoolWithEveryOpDoneAndThePoolsPeak) {
  const Trace trace = two_stream_trace();
  std::vector<ModelledPool::Call> log;
  PoolOnlyBackend backend(&log);
  ReplayOptions options;
  options.config.policy = Policy::kAsync;
  options.check_every_ops = 1;
  ReplaySeries series;
  options.series = &series;
  const ReplayResult r = replay(trace, trace.devices[0], options, backend);
  EXPECT_EQ(r.policy, Policy::kAsync);
  EXPECT_EQ(r.backend, "pool-only");
  EXPECT_EQ(r.ops, 7u) << "4 allocations, 1 free at once, 1 deferred free (2 ops)";
  EXPECT_EQ(r.ooms, 0u);
  EXPECT_EQ(r.lower_bound_bytes, 6 * kMiB) << "5 MiB and 1 MiB live at the end";
  EXPECT_EQ(r.lower_bound_held_bytes, 3 * kMiB + 1000 + 5 * kMiB) << "the deferred free held until it ended";
  // The model: 3 MiB + 1000 B -> 4 MiB; + 5 MiB while the deferred free still holds its 3 MiB -> 10 MiB.
  EXPECT_EQ(r.peak_reserved_bytes, 10 * kMiB);
  EXPECT_GE(r.peak_reserved_bytes, r.lower_bound_bytes);
  EXPECT_EQ(*std::max_element(series.reserved_bytes.begin(), series.reserved_bytes.end()), r.peak_reserved_bytes)
      << "the --plot curve reaches the reported peak";
  ASSERT_EQ(log.size(), 4u + 2u + 2u) << "4 allocations, 2 frees in the trace, 2 blocks freed at teardown";
  EXPECT_EQ(log[3].what, "free");
  EXPECT_EQ(log[3].address, log[0].address) << "the deferred free reaches the pool after the next allocation";
  EXPECT_EQ(log[4].what, "free");
  EXPECT_EQ(log[4].stream, 7u);
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(r.stats.backend_calls[BackendCall::kCreate], 0u);
}

TEST(AsyncReplayTest, UnderADeviceLimitThePoolsMaximumSizeFailsAllocationsThatAreCountedAndTheReplayGoesOn) {
  const Trace trace = two_stream_trace();
  std::vector<ModelledPool::Call> log;
  PoolOnlyBackend backend(&log);
  ReplayOptions options;
  options.config.policy = Policy::kAsync;
  options.device_bytes = 6 * kMiB;  // the 5 MiB block cannot join the 4 MiB already reserved
  const ReplayResult r = replay(trace, trace.devices[0], options, backend);
  EXPECT_EQ(r.ooms, 1u);
  EXPECT_EQ(r.stats.num_ooms, 1u);
  EXPECT_EQ(r.ops, 7u);
  EXPECT_LE(r.peak_reserved_bytes, 6 * kMiB);
  EXPECT_EQ(r.lower_bound_bytes, 3 * kMiB + 1000) << "the failed allocation is left out of the lower bound";
}

// A real trace (record_stream frees included) through async over the modelled pool: the same ops as caching
// replays, none failed, the invariants after every op, and the pool's peak at least the bytes held live.
TEST(AsyncReplayTest, AShippedTraceReplaysThroughAsyncWithTheSameOpsAsCachingAndEveryInvariantKept) {
  const Trace trace = read_trace(std::string(GMLAKE_TRACES_DIR) + "/llm_offload_streams.snapshot.pickle.xz");
  std::vector<ModelledPool::Call> log;
  PoolOnlyBackend backend(&log);
  ReplayOptions options;
  options.config.policy = Policy::kAsync;
  options.check_every_ops = 1000;
  const ReplayResult r = replay(trace, trace.devices.at(0), options, backend);
  ReplayOptions caching;
  caching.config.policy = Policy::kCaching;
  const ReplayResult c = replay(trace, trace.devices.at(0), caching);
  EXPECT_EQ(r.ops, c.ops);
  EXPECT_EQ(r.ooms, 0u);
  EXPECT_EQ(r.unknown_frees, c.unknown_frees);
  EXPECT_EQ(r.lower_bound_held_bytes, c.lower_bound_held_bytes);
  EXPECT_GE(r.peak_reserved_bytes, r.lower_bound_held_bytes);
  EXPECT_EQ(r.stats.num_allocs, c.stats.num_allocs);
}

// Where no stream-ordered pool exists, the policy is refused with one line that says why and what to use.
TEST(AsyncPolicyRefusalTest, SimAndHostBackendsHaveNoStreamOrderedPoolSoAsyncIsRefused) {
  SimBackend sim;
  HostBackend host;
  EXPECT_EQ(sim.make_stream_ordered_pool(), nullptr);
  EXPECT_EQ(host.make_stream_ordered_pool(), nullptr);
  const Config config = parse_config("policy:async");
  for (Backend* backend : {static_cast<Backend*>(&sim), static_cast<Backend*>(&host)}) {
    try {
      make_allocator(config, *backend);
      ADD_FAILURE() << "async made over " << backend->name();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kConfig);
      const std::string what = e.what();
      EXPECT_NE(what.find("backend " + std::string(backend->name())), std::string::npos) << what;
      EXPECT_NE(what.find("--backend cuda"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(AsyncPolicyRefusalTest, APoolThatMakesItsOwnBackendRefusesAsyncWhoseStreamsAreNames) {
  Config config = parse_config("policy:async,backend:host");
  try {
    Pool pool(config);
    ADD_FAILURE() << "a Pool made its own backend for async";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConfig);
    EXPECT_NE(std::string(e.what()).find("backend:cudaMallocAsync"), std::string::npos) << e.what();
  }
}

TEST(AsyncPolicyRefusalTest, TheReplayOnTheSimBackendRefusesAsyncBeforeReplayingAnything) {
  Trace trace;
  trace.name = "two_allocs";
  DeviceTrace d;
  d.events.push_back({TraceAction::kAlloc, 0x1000, 4096, 0, 0});
  d.events.push_back({TraceAction::kFreeRequested, 0x1000, 4096, 0, 1});
  d.events.push_back({TraceAction::kFreeCompleted, 0x1000, 4096, 0, 1});
  trace.devices.push_back(d);
  ReplayOptions options;
  options.config.policy = Policy::kAsync;
  options.backend = "sim";
  test::expect_error([&] { replay(trace, trace.devices[0], options); }, ErrorCode::kConfig, "--backend cuda");
}

}  // namespace
}  // namespace gmlake
