// MoveBudget (src/policies/gmlake/move_budget.h) and the gmlake policy's use of it: a bounded budget turns moves
// into growth once spent, and the moves charged over a run never exceed what its allocations earned.
#include "policies/gmlake/move_budget.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gmlake/sim_backend.h"
#include "policies/gmlake/stitching_allocator.h"
#include "policy_test_support.h"

namespace gmlake::engine {
namespace {

TEST(MoveBudgetTest, ZeroMeansUnboundedAndCountsNothing) {
  MoveBudget b(0);
  EXPECT_FALSE(b.bounded());
  for (int i = 0; i < 10; ++i) b.charge_eviction();
  EXPECT_TRUE(b.allows_move());
  EXPECT_EQ(b.credit_ns(), 0);
}

TEST(MoveBudgetTest, CreditIsEarnedPerAllocationSpentPerMoveAndCappedAtTheBurst) {
  MoveBudget b(100);
  EXPECT_TRUE(b.allows_move()) << "no credit, no debt";
  b.charge_eviction();
  EXPECT_EQ(b.credit_ns(), -MoveBudget::kEvictionCostNs);
  EXPECT_FALSE(b.allows_move());
  for (std::int64_t i = 0; i < MoveBudget::kEvictionCostNs / 100; ++i) b.earn();
  EXPECT_EQ(b.credit_ns(), 0);
  EXPECT_TRUE(b.allows_move());
  for (std::int64_t i = 0; i < 2 * MoveBudget::kBurstOps; ++i) b.earn();
  EXPECT_EQ(b.credit_ns(), 100 * MoveBudget::kBurstOps) << "quiet stretches bank at most kBurstOps allocations";
  b.charge_release();
  EXPECT_EQ(b.credit_ns(), 100 * MoveBudget::kBurstOps - MoveBudget::kReleaseCostNs);
}

TEST(MoveBudgetTest, AHugeBudgetDoesNotOverflow) {
  MoveBudget b(UINT64_MAX);
  for (int i = 0; i < 10000; ++i) b.earn();
  EXPECT_GT(b.credit_ns(), 0);
  EXPECT_TRUE(b.allows_move());
}

// Shapes that keep changing over a small working set: without a bound the policy keeps moving idle chunks
// (evictions) to stay at its peak; with one, the charged moves stay within what the allocations earned.
struct Outcome {
  std::uint64_t allocations = 0;
  std::uint64_t evictions = 0;
  std::uint64_t releases = 0;
  std::uint64_t peak_reserved_bytes = 0;
};

Outcome run_varying_shapes(const std::string& conf) {
  SimBackend sim;
  StitchingAllocator a(parse_config(conf), sim);
  std::mt19937_64 rng(7);
  std::vector<void*> live;
  Outcome r;
  for (int step = 0; step < 4000; ++step) {
    if (live.size() < 12 || rng() % 2 == 0) {
      const std::uint64_t size = (1 + rng() % 40) * kMiB + rng() % kMiB;
      live.push_back(a.allocate(size, 0));
      ++r.allocations;
    } else {
      const std::size_t i = rng() % live.size();
      a.deallocate(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    if (live.size() > 24) {
      a.deallocate(live.front());
      live.erase(live.begin());
    }
    a.check_invariants();
  }
  const Stats s = a.stats();
  r.evictions = s.evictions;
  r.releases = sim.counters()[BackendCall::kRelease];
  r.peak_reserved_bytes = static_cast<std::uint64_t>(s.reserved_bytes.peak);
  for (void* p : live) a.deallocate(p);
  a.check_invariants();
  return r;
}

TEST(MoveBudgetPolicyTest, ABoundedBudgetMovesLessAndStaysWithinWhatWasEarned) {
  const Outcome unbounded = run_varying_shapes("max_chunk_bytes:2M,grow_bytes:2M,headroom_permille:0,move_budget_ns_per_op:0");
  const Outcome bounded = run_varying_shapes("max_chunk_bytes:2M,grow_bytes:2M,headroom_permille:0,move_budget_ns_per_op:200");
  ASSERT_GT(unbounded.evictions, 50u) << "the workload must make the unbounded policy move memory";
  EXPECT_LT(bounded.evictions, unbounded.evictions);
  EXPECT_GE(bounded.peak_reserved_bytes, unbounded.peak_reserved_bytes / 2);
  // Every release the policy makes outside teardown is a charged remake (step 3): bound both together.
  const std::int64_t charged = static_cast<std::int64_t>(bounded.evictions) * MoveBudget::kEvictionCostNs +
                               static_cast<std::int64_t>(bounded.releases) * MoveBudget::kReleaseCostNs;
  const std::int64_t earned = static_cast<std::int64_t>(bounded.allocations) * 200;
  EXPECT_LE(charged, earned + MoveBudget::kEvictionCostNs + MoveBudget::kReleaseCostNs)
      << "evictions " << bounded.evictions << ", releases " << bounded.releases;
}

TEST(MoveBudgetPolicyTest, UnderACapMemoryComesFirstWhateverTheBudget) {
  // Under a cap the budget does not apply: the same moves as without it, the same peak.
  const Outcome plain = run_varying_shapes("cap_bytes:2G,headroom_permille:0");
  const Outcome budgeted = run_varying_shapes("cap_bytes:2G,max_chunk_bytes:2M,grow_bytes:2M,headroom_permille:0,move_budget_ns_per_op:1");
  EXPECT_EQ(budgeted.evictions, plain.evictions);
  EXPECT_EQ(budgeted.peak_reserved_bytes, plain.peak_reserved_bytes);
}

}  // namespace
}  // namespace gmlake::engine
