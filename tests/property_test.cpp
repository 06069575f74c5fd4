// The property suite, run for every policy on every CPU backend (as RMM runs one conformance suite over
// every resource): seeded random alloc/free sequences, and after each step the checks that matter:
//   - every live block is 512 B aligned, lies in memory the backend has mapped with access, and overlaps
//     no other live block;
//   - on the host backend the bytes of every live block keep what was written into them;
//   - the allocator's stats equal a recount from our own model of the live blocks, and its own
//     check_invariants() (structure + stats recount) holds, and segments() agrees with the stats;
//   - freeing everything then empty_cache() leaves no physical chunk and no mapping.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>

#include "gmlake/allocator.h"
#include "gmlake/error.h"
#include "gmlake/backend_factory.h"
#include "policies/gmlake/stitching_allocator.h"
#include "policy_test_support.h"

namespace gmlake {
namespace {

struct Combo {
  Policy policy;
  std::string backend;
};

std::string combo_name(const ::testing::TestParamInfo<Combo>& info) {
  return std::string(to_string(info.param.policy)) + "_on_" + info.param.backend;
}

struct LiveBlock {
  std::uint64_t size_bytes;
  std::uint64_t requested_bytes;
  std::uint8_t tag;
  bool pending;
};

class PropertyTest : public ::testing::TestWithParam<Combo> {
 protected:
  void SetUp() override {
    backend_ = make_backend(GetParam().backend, kPageBytes);
    Config config;
    config.policy = GetParam().policy;
    allocator_ = make_allocator(config, *backend_);
  }
  void TearDown() override {
    allocator_.reset();
    EXPECT_EQ(backend_->live_chunks(), 0u);
    EXPECT_EQ(backend_->live_mappings(), 0u);
    EXPECT_EQ(backend_->live_reservations(), 0u);
  }

  bool host() const { return backend_->host_accessible(); }

  // Writes a tag at both ends and in the middle of a block (host backend only: touching every byte of a
  // 4 GiB block would take real memory).
  void stamp(void* p, std::uint64_t size, std::uint8_t tag) {
    if (!host()) return;
    auto* bytes = static_cast<std::uint8_t*>(p);
    bytes[0] = tag;
    bytes[size / 2] = tag;
    bytes[size - 1] = tag;
  }
  void expect_stamp(void* p, std::uint64_t size, std::uint8_t tag) {
    if (!host()) return;
    const auto* bytes = static_cast<const std::uint8_t*>(p);
    ASSERT_EQ(bytes[0], tag);
    ASSERT_EQ(bytes[size / 2], tag);
    ASSERT_EQ(bytes[size - 1], tag);
  }

  void check_new_block(void* p, std::uint64_t size) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    ASSERT_EQ(a % kRoundBytes, 0u);
    ASSERT_TRUE(backend_->is_accessible(a, size)) << "block not mapped with access";
    auto next = live_.lower_bound(a);
    if (next != live_.end()) {
      ASSERT_GE(next->first, a + size) << "overlaps the next live block";
    }
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      ASSERT_LE(prev->first + prev->second.size_bytes, a) << "overlaps the previous live block";
    }
  }

  void check_stats() {
    std::int64_t requested = 0, active_min = 0;
    for (const auto& [a, b] : live_) {
      if (!b.pending) requested += static_cast<std::int64_t>(b.requested_bytes);
      active_min += static_cast<std::int64_t>(b.requested_bytes);
    }
    const Stats s = allocator_->stats();
    ASSERT_EQ(s.requested_bytes.current, requested);
    ASSERT_GE(s.active_bytes.current, active_min);
    ASSERT_GE(s.reserved_bytes.current, s.active_bytes.current);
    ASSERT_EQ(static_cast<std::uint64_t>(s.reserved_bytes.current), backend_->live_chunk_bytes());
    allocator_->check_invariants();
    const auto* engine = dynamic_cast<const engine::StitchingAllocator*>(allocator_.get());
    testing::expect_segments_consistent(*allocator_, engine != nullptr ? engine->free_chunk_bytes() : 0);
    if (HasFatalFailure()) return;
    // Every live block, the pending ones too, is still mapped with access and keeps its bytes.
    for (const auto& [a, b] : live_) {
      ASSERT_TRUE(backend_->is_accessible(a, b.size_bytes));
      expect_stamp(reinterpret_cast<void*>(a), b.requested_bytes, b.tag);
    }
  }

  // Runs `ops` seeded random operations with sizes log-uniform in [1, 2^max_log2], at most `max_live` blocks.
  void run(std::uint64_t seed, int ops, unsigned max_log2, std::size_t max_live, int full_check_every) {
    std::mt19937_64 rng(seed);
    std::vector<std::uintptr_t> order;  // live addresses, for random picks
    int allocations = 0;
    for (int step = 0; step < ops; ++step) {
      const unsigned roll = static_cast<unsigned>(rng() % 100);
      if (order.empty() || (roll < 50 && order.size() < max_live)) {
        const std::uint64_t size = 1 + rng() % (std::uint64_t{1} << (rng() % (max_log2 + 1)));
        const StreamId stream = rng() % 3;
        void* p = nullptr;
        try {
          p = allocator_->allocate(size, stream);
        } catch (const OutOfMemoryError&) {
          continue;  // possible only on the host backend when the machine is short of address space
        }
        ASSERT_NE(p, nullptr);
        ++allocations;
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        ASSERT_NO_FATAL_FAILURE(check_new_block(p, size));
        const auto tag = static_cast<std::uint8_t>(1 + step % 255);
        stamp(p, size, tag);
        live_[a] = {round_up(size, kRoundBytes), size, tag, false};
        order.push_back(a);
      } else if (roll < 97) {
        const std::size_t i = rng() % order.size();
        const std::uintptr_t a = order[i];
        LiveBlock& b = live_.at(a);
        ASSERT_NO_FATAL_FAILURE(expect_stamp(reinterpret_cast<void*>(a), b.requested_bytes, b.tag));
        if (b.pending) {
          allocator_->end_deferred_free(reinterpret_cast<void*>(a));
        } else if (rng() % 8 == 0) {
          allocator_->begin_deferred_free(reinterpret_cast<void*>(a));
          b.pending = true;
          continue;  // stays in `order` until its free completes
        } else {
          allocator_->deallocate(reinterpret_cast<void*>(a));
        }
        live_.erase(a);
        order[i] = order.back();
        order.pop_back();
      } else {
        allocator_->empty_cache();
      }
      if (step % full_check_every == 0) {
        ASSERT_NO_FATAL_FAILURE(check_stats());
      }
    }
    ASSERT_NO_FATAL_FAILURE(check_stats());
    EXPECT_GT(allocations, ops / 4) << "too few allocations succeeded for the run to mean anything";
    for (const auto& [a, b] : live_) {
      if (b.pending) allocator_->end_deferred_free(reinterpret_cast<void*>(a));
      else allocator_->deallocate(reinterpret_cast<void*>(a));
    }
    live_.clear();
    allocator_->empty_cache();
    allocator_->check_invariants();
    EXPECT_EQ(allocator_->stats().reserved_bytes.current, 0);
    EXPECT_EQ(backend_->live_chunks(), 0u) << "physical chunks left after freeing everything and empty_cache";
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Allocator> allocator_;
  std::map<std::uintptr_t, LiveBlock> live_;
};

TEST_P(PropertyTest, SmallAndMediumBlocksKeepEveryInvariantAfterEveryStep) {
  run(/*seed=*/1, /*ops=*/60000, /*max_log2=*/26, /*max_live=*/200, /*full_check_every=*/1);
}

TEST_P(PropertyTest, ManyOperationsKeepEveryInvariant) {
  run(/*seed=*/2, /*ops=*/250000, /*max_log2=*/24, /*max_live=*/400, /*full_check_every=*/500);
}

TEST_P(PropertyTest, BlocksUpToFourGibibytesKeepEveryInvariant) {
  run(/*seed=*/3, /*ops=*/6000, /*max_log2=*/32, /*max_live=*/24, /*full_check_every=*/1);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicyOnEveryCpuBackend, PropertyTest,
                         ::testing::Values(Combo{Policy::kGmlake, "sim"}, Combo{Policy::kGmlake, "host"},
                                           Combo{Policy::kCaching, "sim"}, Combo{Policy::kCaching, "host"},
                                           Combo{Policy::kExpandable, "sim"}, Combo{Policy::kExpandable, "host"}),
                         combo_name);

}  // namespace
}  // namespace gmlake
