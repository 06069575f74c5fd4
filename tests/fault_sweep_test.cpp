// The fault-injection sweep: a whole replay of a shipped trace (traces/resnet50) through every policy, over a
// FaultBackend that fails the k-th call of one kind, for k sampled over every call of that kind the fault-free
// replay makes (teardown included). Each run must show:
//   - the fault was injected, and it surfaced: as OutOfMemoryError or BackendError from that allocation (or
//     as a retry the policy made after an out-of-memory, or, in teardown, as a call retried once);
//   - every later allocation and free worked: exactly one allocation failed (none for a fault a retry absorbed),
//     no free was rejected, and num_ooms equals the out-of-memory errors the replay saw;
//   - check_invariants() (structure and stats against a recount) held right after the failure and at the end;
//   - nothing leaked: after teardown the inner backend holds no chunk, mapping or reservation.
//
// Sampling of k, per (policy, kind, error): every call for the first kFirstCalls, then kStridedCalls more spread
// evenly over the rest, plus the last call. The lines "fault-sweep: ..." on stdout give the figures that
// docs/reliability.md tabulates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "gmlake/error.h"
#include "backends/fault/fault_backend.h"
#include "gmlake/replay.h"
#include "gmlake/sim_backend.h"
#include "gmlake/trace.h"

namespace gmlake {
namespace {

constexpr std::uint64_t kFirstCalls = 40;
constexpr std::uint64_t kStridedCalls = 40;
constexpr std::uint64_t kCheckOnlyAtTheEnd = std::uint64_t{1} << 62;

constexpr std::uint64_t kEmptyCacheEveryOps = 4000;  // so that the release paths run during the replay too

struct Variant {
  const char* name;
  const char* conf;
  bool trims_on_free;  // frees unmap idle pages, and absorb a failure there (the bound is applied later)
  std::uint64_t device_lag_us = 0;  // ReplayOptions::device_lag_us: the fence's waits, lag growth and moves
};

// gmlake four times: as is; with a bound on idle mapped memory, so that frees unmap (evict) too; and on a device
// 2 ms behind the host, with the fence as at the default (lag growth, waits) and with moves in stream order.
const Variant kVariants[] = {
    {"gmlake", "policy:gmlake", false},
    {"gmlake_idle_bound", "policy:gmlake,max_idle_mapped_bytes:2G", true},
    {"gmlake_lagging", "policy:gmlake", false, 2000},
    {"gmlake_lagging_in_order", "policy:gmlake,in_order_moves:true,lag_grow_pages:0", false, 2000},
    {"caching", "policy:caching", false},
    {"expandable", "policy:expandable", false},
};

const BackendCall kKinds[] = {BackendCall::kCreate,  BackendCall::kMap,     BackendCall::kUnmap,
                              BackendCall::kSetAccess, BackendCall::kReserve, BackendCall::kRelease,
                              BackendCall::kAddressFree};

const Trace& shipped_trace() {
  static const Trace trace = read_trace(std::string(GMLAKE_TRACES_DIR) + "/resnet50.snapshot.pickle.xz");
  return trace;
}

ReplayOptions options_for(const Variant& variant) {
  ReplayOptions options;
  options.config = parse_config(variant.conf);
  options.tolerate_backend_errors = true;
  options.empty_cache_every_ops = kEmptyCacheEveryOps;
  options.check_every_ops = kCheckOnlyAtTheEnd;  // one check at the end, besides those after each failure
  options.device_lag_us = variant.device_lag_us;
  return options;
}

std::vector<std::uint64_t> sampled_calls(std::uint64_t total) {
  std::set<std::uint64_t> ks;
  for (std::uint64_t k = 1; k <= std::min(total, kFirstCalls); ++k) ks.insert(k);
  if (total > kFirstCalls) {
    const std::uint64_t rest = total - kFirstCalls;
    for (std::uint64_t i = 1; i <= kStridedCalls; ++i) ks.insert(kFirstCalls + rest * i / kStridedCalls);
  }
  return {ks.begin(), ks.end()};
}

struct Baseline {
  ReplayResult result;
  std::uint64_t replay_calls = 0;  // calls of the kind during the replay
  std::uint64_t total_calls = 0;   // ... and during teardown too
};

Baseline fault_free_run(const Variant& variant, BackendCall kind) {
  SimBackend sim;
  FaultBackend fault(sim);
  Baseline b;
  b.result = replay(shipped_trace(), shipped_trace().devices.at(0), options_for(variant), fault);
  b.replay_calls = b.result.stats.backend_calls[kind];
  b.total_calls = fault.calls_seen(kind);
  return b;
}

struct SweepTotals {
  std::uint64_t runs = 0;
  std::uint64_t injected = 0;
  std::uint64_t surfaced = 0;     // as an error from the failing allocation
  std::uint64_t absorbed = 0;     // by a retry inside the allocation (out-of-memory) or in teardown
  std::uint64_t leaked = 0;       // chunks, mappings and reservations left in the backend after teardown
};

// One replay with the k-th call of `kind` failing; checks everything the file comment lists.
void run_with_fault(const Variant& variant, BackendCall kind, FaultError error, const Baseline& base,
                    std::uint64_t k, SweepTotals* totals) {
  SCOPED_TRACE(std::string(variant.name) + " " + std::string(to_string(kind)) + " k=" + std::to_string(k));
  SimBackend sim;
  ReplayResult r;
  std::uint64_t injected = 0;
  {
    FaultBackend fault(sim);
    fault.arm({kind, k, 1, error});
    r = replay(shipped_trace(), shipped_trace().devices.at(0), options_for(variant), fault);
    injected = fault.injected_faults();
    EXPECT_EQ(fault.live_chunks() + fault.live_mappings() + fault.live_reservations(), 0u);
  }
  ++totals->runs;
  totals->injected += injected;
  totals->leaked += sim.live_chunks() + sim.live_mappings() + sim.live_reservations();
  ASSERT_EQ(injected, 1u) << "the fault was never reached";
  EXPECT_EQ(sim.live_chunks(), 0u) << "chunks leaked";
  EXPECT_EQ(sim.live_mappings(), 0u) << "mappings leaked";
  EXPECT_EQ(sim.live_reservations(), 0u) << "reservations leaked";
  EXPECT_EQ(r.stats.invalid_frees, 0u) << "a later free was rejected";
  EXPECT_EQ(r.stats.num_ooms, r.ooms) << "num_ooms differs from the out-of-memory errors raised";
  const std::uint64_t failed_allocations = r.backend_errors + r.ooms;
  const std::uint64_t failures = failed_allocations + r.empty_cache_errors;
  EXPECT_EQ(r.stats.num_allocs + failed_allocations, base.result.stats.num_allocs) << "a later allocation failed";
  EXPECT_LE(failures, 1u) << "one injected fault made several calls fail";
  const bool in_replay = k <= base.replay_calls;
  const bool retried = r.stats.num_alloc_retries > base.result.stats.num_alloc_retries;
  if (!in_replay) {
    EXPECT_EQ(failures, 0u) << "a fault in teardown made a call fail";
    ++totals->absorbed;
  } else if (failures == 1) {
    const std::uint64_t expected_ooms = error == FaultError::kOutOfMemory ? 1 : 0;
    EXPECT_EQ(r.ooms, expected_ooms) << "the fault surfaced as another error than the one injected";
    ++totals->surfaced;
  } else {
    const bool absorbable = (error == FaultError::kOutOfMemory && retried) ||
                            (variant.trims_on_free && kind == BackendCall::kUnmap);
    EXPECT_TRUE(absorbable) << "the fault surfaced nowhere";
    ++totals->absorbed;
  }
}

struct SweepCase {
  Variant variant;
  BackendCall kind;
};

std::string case_name(const ::testing::TestParamInfo<SweepCase>& info) {
  return std::string(info.param.variant.name) + "_" + std::string(to_string(info.param.kind));
}

class FaultSweepTest : public ::testing::TestWithParam<SweepCase> {};

TEST_P(FaultSweepTest, EveryInjectedFailureSurfacesLeavesTheAllocatorUsableAndLeaksNothing) {
  const SweepCase& c = GetParam();
  const Baseline base = fault_free_run(c.variant, c.kind);
  ASSERT_EQ(base.result.ooms + base.result.backend_errors, 0u);
  if (c.variant.device_lag_us != 0) {
    EXPECT_GT(base.result.stats.fence_waits, 0u) << "the lagging device made the fence wait nowhere";
    if (std::string(c.variant.conf).find("in_order_moves:true") != std::string::npos) {
      EXPECT_GT(base.result.stats.in_order_evictions, 0u) << "no chunk moved in stream order";
    }
  }
  std::vector<FaultError> errors = {FaultError::kBackendError};
  if (c.kind == BackendCall::kCreate || c.kind == BackendCall::kReserve) errors.push_back(FaultError::kOutOfMemory);
  for (FaultError error : errors) {
    SweepTotals totals;
    for (std::uint64_t k : sampled_calls(base.total_calls)) {
      run_with_fault(c.variant, c.kind, error, base, k, &totals);
      if (HasFatalFailure()) return;
    }
    std::printf("fault-sweep: policy=%s call=%s error=%s calls=%llu runs=%llu injected=%llu surfaced=%llu "
                "absorbed=%llu leaked=%llu\n",
                c.variant.name, std::string(to_string(c.kind)).c_str(),
                error == FaultError::kBackendError ? "backend" : "oom",
                static_cast<unsigned long long>(base.total_calls), static_cast<unsigned long long>(totals.runs),
                static_cast<unsigned long long>(totals.injected), static_cast<unsigned long long>(totals.surfaced),
                static_cast<unsigned long long>(totals.absorbed), static_cast<unsigned long long>(totals.leaked));
  }
}

std::vector<SweepCase> all_cases() {
  std::vector<SweepCase> cases;
  for (const Variant& v : kVariants) {
    for (BackendCall kind : kKinds) cases.push_back({v, kind});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryPolicyAndCallKind, FaultSweepTest, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace gmlake
