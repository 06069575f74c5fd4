// MoveBudget (src/policies/gmlake/move_budget.h) and the gmlake policy's use of it: the per-operation budget and
// the wall-time share turn moves into growth once spent, within the move headroom, and bound the moves charged.
#include "policies/gmlake/move_budget.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gmlake/clock.h"
#include "gmlake/sim_backend.h"
#include "policies/gmlake/stitching_allocator.h"
#include "manual_events.h"
#include "policy_test_support.h"

namespace gmlake::engine {
namespace {

using Limits = MoveBudget::Limits;

// The device's answer to MoveBudget::allows_move: waiting for the host (moves on the critical path) or busy.
constexpr auto kWaits = [] { return true; };

TEST(MoveBudgetTest, ZeroMeansUnboundedAndCountsNothing) {
  MoveBudget b(Limits{});
  EXPECT_FALSE(b.bounded());
  EXPECT_FALSE(b.timed());
  for (int i = 0; i < 10; ++i) b.charge_eviction(true);
  EXPECT_TRUE(b.allows_move(0, kWaits));
  EXPECT_EQ(b.credit_ns(), 0);
  EXPECT_EQ(b.charged_ns(), 0);
}

TEST(MoveBudgetTest, CreditIsEarnedPerAllocationSpentPerMoveAndCappedAtTheBurst) {
  MoveBudget b(Limits{100, 0, 0});
  EXPECT_TRUE(b.bounded());
  EXPECT_TRUE(b.allows_move(0, kWaits)) << "no credit, no debt";
  b.charge_eviction(false);  // the per-operation credit is charged whether the device waits or not
  EXPECT_EQ(b.credit_ns(), -MoveBudget::kEvictionCostNs);
  EXPECT_FALSE(b.allows_move(0, [] { return false; })) << "a busy device does not lift the per-operation bound";
  for (std::int64_t i = 0; i < MoveBudget::kEvictionCostNs / 100; ++i) b.earn();
  EXPECT_EQ(b.credit_ns(), 0);
  EXPECT_TRUE(b.allows_move(0, kWaits));
  for (std::int64_t i = 0; i < 2 * MoveBudget::kBurstOps; ++i) b.earn();
  EXPECT_EQ(b.credit_ns(), 100 * MoveBudget::kBurstOps) << "quiet stretches bank at most kBurstOps allocations";
  b.charge_release(true);
  EXPECT_EQ(b.credit_ns(), 100 * MoveBudget::kBurstOps - MoveBudget::kReleaseCostNs);
}

TEST(MoveBudgetTest, AHugeBudgetDoesNotOverflow) {
  MoveBudget b(Limits{UINT64_MAX, UINT64_MAX, UINT64_MAX});
  for (int i = 0; i < 10000; ++i) b.earn();
  EXPECT_GT(b.credit_ns(), 0);
  EXPECT_TRUE(b.allows_move(INT64_MAX, kWaits));
}

TEST(MoveBudgetTest, TheWallTimeShareAccruesAfterTheBurst) {
  // 5 permille of wall time plus a burst of 100 us.
  MoveBudget b(Limits{0, 5, 100'000});
  EXPECT_TRUE(b.timed());
  EXPECT_TRUE(b.allows_move(1'000'000, kWaits)) << "the first call starts the clock at 1 ms";
  b.charge_eviction(true);
  b.charge_eviction(true);
  EXPECT_EQ(b.charged_ns(), 2 * MoveBudget::kEvictionCostNs);
  EXPECT_TRUE(b.allows_move(1'000'000, kWaits)) << "86 us charged, within the 100 us burst";
  b.charge_eviction(true);
  EXPECT_FALSE(b.allows_move(1'000'000, kWaits)) << "129 us charged, past the burst";
  // 129 us <= 100 us + T x 0.005 once T >= 5.8 ms.
  EXPECT_FALSE(b.allows_move(1'000'000 + 5'700'000, kWaits));
  EXPECT_TRUE(b.allows_move(1'000'000 + 5'800'000, kWaits));
  EXPECT_FALSE(b.allows_move(0, kWaits)) << "a clock read earlier than the start counts as no time passed";
}

TEST(MoveBudgetTest, AMoveHiddenBehindQueuedWorkIsNeitherChargedNorRefused) {
  MoveBudget b(Limits{0, 5, 100'000});
  int asked = 0;
  auto busy = [&] { ++asked; return false; };
  auto waits = [&] { ++asked; return true; };
  EXPECT_TRUE(b.allows_move(1'000'000, waits));
  EXPECT_EQ(asked, 0) << "the device is asked only where the share alone would refuse";
  for (int i = 0; i < 100; ++i) b.charge_eviction(false);
  EXPECT_EQ(b.charged_ns(), 0) << "moves made while the device had queued work cost the user nothing";
  EXPECT_TRUE(b.allows_move(1'000'000, waits));
  for (int i = 0; i < 3; ++i) b.charge_release(true);
  EXPECT_EQ(b.charged_ns(), 3 * MoveBudget::kReleaseCostNs);
  EXPECT_FALSE(b.allows_move(1'000'000, waits)) << "123 us on the critical path, past the 100 us burst";
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(b.allows_move(1'000'000, busy)) << "past the share, a move the device's queue hides is still made";
  EXPECT_EQ(asked, 2);
}

// Random earnings, charges and questions under each kind of bound: the budget's equations hold after every step.
TEST(MoveBudgetTest, InvariantsHoldAfterEveryStep) {
  for (const Limits limits : {Limits{}, Limits{100, 0, 0}, Limits{0, 5, 100'000}, Limits{50, 10, 1'000'000},
                              Limits{UINT64_MAX, UINT64_MAX, UINT64_MAX}}) {
    MoveBudget b(limits);
    std::mt19937_64 rng(11);
    std::int64_t now_ns = 1'000;
    for (int step = 0; step < 5000; ++step) {
      switch (rng() % 4) {
        case 0: b.earn(); break;
        case 1: b.charge_eviction(rng() % 2 == 0); break;
        case 2: b.charge_release(rng() % 2 == 0); break;
        default:
          now_ns += static_cast<std::int64_t>(rng() % 100'000);
          (void)b.allows_move(now_ns, [&] { return rng() % 2 == 0; });
          break;
      }
      ASSERT_NO_THROW(b.check_invariants()) << "limits " << limits.budget_ns_per_op << "/" << limits.share_permille
                                            << ", step " << step;
    }
  }
}

// Shapes that keep changing over a small working set: without a bound the policy keeps moving idle chunks
// (evictions) to stay at its peak; with one, the charged moves stay within what the bound allows.
struct Outcome {
  std::uint64_t allocations = 0;
  std::uint64_t evictions = 0;
  std::uint64_t releases = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0;
};

// `clock_step_ns`: how far the policy's clock moves per operation. With `events`, the policy asks them (a fence and
// the stream's queue, as on a GPU): every event finishes after each operation, so idle chunks are always safe to
// move and only the stream's own answer (ManualEvents::busy_streams) tells whether the device waits.
Outcome run_varying_shapes(const std::string& conf, std::int64_t clock_step_ns = 0, test::ManualEvents* events = nullptr) {
  SimBackend sim;
  ManualClock clock;
  // Each stream keeps its own arenas with stream events (Config::cross_stream_reuse must be off).
  StitchingAllocator a(parse_config(events != nullptr ? conf + ",cross_stream_reuse:false" : conf), sim, events, &clock);
  std::mt19937_64 rng(7);
  std::vector<void*> live;
  Outcome r;
  for (int step = 0; step < 4000; ++step) {
    clock.advance_ns(clock_step_ns);
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
    if (events != nullptr) events->finish_all();
    a.check_invariants();
  }
  const Stats s = a.stats();
  r.evictions = s.evictions;
  r.releases = sim.counters()[BackendCall::kRelease];
  r.peak_reserved_bytes = static_cast<std::uint64_t>(s.reserved_bytes.peak);
  r.peak_allocated_bytes = static_cast<std::uint64_t>(s.allocated_bytes.peak);
  for (void* p : live) a.deallocate(p);
  a.check_invariants();
  return r;
}

constexpr const char* kPageGranular = "max_chunk_bytes:2M,grow_bytes:2M,headroom_permille:0,move_share_permille:0";

TEST(MoveBudgetPolicyTest, ABoundedBudgetMovesLessAndStaysWithinWhatWasEarned) {
  const Outcome unbounded = run_varying_shapes(std::string(kPageGranular) + ",move_budget_ns_per_op:0");
  // Growth for time unbounded in memory, so that every move the budget refuses becomes growth.
  const Outcome bounded =
      run_varying_shapes(std::string(kPageGranular) + ",move_budget_ns_per_op:200,move_headroom_permille:1000");
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

TEST(MoveBudgetPolicyTest, MovesStayWithinTheirShareOfWallTimeAndGrowthWithinTheMoveHeadroom) {
  // 10 us of wall time per operation, 5 permille: 50 ns of moves per operation, no burst; growth for time within
  // 20% of the highest allocated bytes (blocks here are up to 41 MiB, 5% of the peak).
  const Outcome unbounded = run_varying_shapes(kPageGranular, 10'000);
  // No stream to ask (sim): the device is assumed to wait for the host, so every move is on the critical path.
  const std::string bounded_conf = std::string(kPageGranular) +
                                   ",move_share_permille:5,move_burst_ms:0,move_headroom_permille:200,"
                                   "assume_device_waits:true";
  const Outcome bounded = run_varying_shapes(bounded_conf, 10'000);
  ASSERT_GT(unbounded.evictions, 50u) << "the workload must make the unbounded policy move memory";
  EXPECT_LT(bounded.evictions, unbounded.evictions);
  EXPECT_GE(bounded.peak_reserved_bytes, unbounded.peak_reserved_bytes);
  // Within the move headroom of the highest allocated bytes before the block being placed (which counts once
  // placed): at most one block (41 MiB) more.
  EXPECT_LE(bounded.peak_reserved_bytes, bounded.peak_allocated_bytes + bounded.peak_allocated_bytes / 1000 * 200 + 41 * kMiB)
      << "growth for time stays within move_headroom_permille";
}

TEST(MoveBudgetPolicyTest, MovesHiddenBehindQueuedWorkAreNotBoundedByTheShare) {
  // The same bound, the device assumed busy (the default without a stream to ask, as in `gmlake replay`): every
  // move is hidden behind queued work, so none is refused, and none turns into growth.
  const Outcome unbounded = run_varying_shapes(kPageGranular, 10'000);
  const Outcome busy = run_varying_shapes(
      std::string(kPageGranular) + ",move_share_permille:5,move_burst_ms:0,move_headroom_permille:200", 10'000);
  ASSERT_GT(unbounded.evictions, 50u);
  EXPECT_EQ(busy.evictions, unbounded.evictions);
  EXPECT_EQ(busy.peak_reserved_bytes, unbounded.peak_reserved_bytes);
}

TEST(MoveBudgetPolicyTest, TheStreamTellsWhetherAMoveIsOnTheCriticalPath) {
  // With stream events the stream is asked (cuStreamQuery on a GPU): while it has queued work the share refuses
  // nothing; once it waits for the host, the same bound turns moves into growth.
  const std::string bounded = std::string(kPageGranular) + ",move_share_permille:5,move_burst_ms:0,move_headroom_permille:200";
  // Each run gets its own events: a busy stream (ManualEvents::busy_streams) or one that waits for the host.
  test::ManualEvents busy_for_unbounded, busy_for_bounded, waiting_for_unbounded, waiting_for_bounded;
  busy_for_unbounded.busy_streams.insert(0);
  busy_for_bounded.busy_streams.insert(0);
  const Outcome busy_unbounded = run_varying_shapes(kPageGranular, 10'000, &busy_for_unbounded);
  const Outcome busy = run_varying_shapes(bounded, 10'000, &busy_for_bounded);
  ASSERT_GT(busy_unbounded.evictions, 50u);
  EXPECT_EQ(busy.evictions, busy_unbounded.evictions);
  EXPECT_EQ(busy.peak_reserved_bytes, busy_unbounded.peak_reserved_bytes);
  EXPECT_GT(busy_for_bounded.idle_queries, 0) << "the stream was asked";
  const Outcome waiting_unbounded = run_varying_shapes(kPageGranular, 10'000, &waiting_for_unbounded);
  const Outcome waiting = run_varying_shapes(bounded, 10'000, &waiting_for_bounded);
  EXPECT_LT(waiting.evictions, waiting_unbounded.evictions);
  EXPECT_GT(waiting.peak_reserved_bytes, waiting_unbounded.peak_reserved_bytes);
}

TEST(MoveBudgetPolicyTest, ALongBurstAllowsEveryMove) {
  // A burst longer than all the moves the workload makes: the same moves and peak as without a bound.
  const Outcome unbounded = run_varying_shapes(kPageGranular, 10'000);
  const Outcome bursty = run_varying_shapes(std::string(kPageGranular) + ",move_share_permille:1,move_burst_ms:3600000", 10'000);
  EXPECT_EQ(bursty.evictions, unbounded.evictions);
  EXPECT_EQ(bursty.peak_reserved_bytes, unbounded.peak_reserved_bytes);
}

}  // namespace
}  // namespace gmlake::engine
