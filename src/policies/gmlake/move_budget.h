// MoveBudget: how much driver time the gmlake policy may spend moving memory, earned per allocation.
//
// Moving memory (unmapping an idle chunk to back another range, releasing a free chunk to make one of another
// size) saves bytes and costs driver calls; growing (a new chunk) costs bytes and one create. Without a bound,
// a workload whose shapes keep changing moves memory on a large share of its allocations and spends many times
// PyTorch's allocator time (issue 10: calib_layerwise 6.5x caching's modelled VMM time). With the budget, each
// allocation earns `budget_ns_per_op` of credit (up to kBurstOps allocations' worth, so a burst of moves after a
// quiet stretch is allowed); each move is charged a fixed modelled cost; while the credit is negative the
// policy grows instead of moving, as long as memory is not what limits (no cap, the device not full: the
// caller checks that); where it does limit and a peer may lend (the lake), the policy borrows instead of moving.
// So, over any run of n allocations:
//     moves_charged_ns <= n x budget_ns_per_op + kBurstOps x budget_ns_per_op + one move's cost
// (a move is refused only when the credit is already negative, and it can go below zero by one move).
// The costs are fixed so that decisions are the same on every backend (sim, host, cuda): reproducible replays.
// Source of the costs: bench/cuda/vmm_costs_h100.json (H100, driver 580.159.04, CUDA 13.0; medians per call):
// an eviction is cuMemUnmap (17 us) plus the cuMemMap (2 us) and cuMemSetAccess (24 us) of the chunk mapped
// in its place; a release to remake a chunk of another size is cuMemRelease (12-100 us by size; 30 us taken)
// plus the cuMemCreate (11 us) that follows.
// What a charge stands for: measured later (bench/cuda/vmm_async_probe.cpp, bench/cuda/vmm_async_h100.json), an
// eviction's own calls cost only about 6 us more than the growth they replace (mapping a chunk still mapped
// elsewhere 33-35 us, a new chunk 47-51 us, the unmap 20-25 us). The full charge stays: a moved range tends to
// be stitched again later, and evictions of long-idle chunks let through free of charge made more calls for no
// memory on the shipped traces (docs/benchmarks.md, "How far the bar is reachable").
// Thread safety: none (the policy's lock).
#pragma once

#include <algorithm>
#include <cstdint>

namespace gmlake::engine {

class MoveBudget {
 public:
  static constexpr std::int64_t kEvictionCostNs = 43'000;
  static constexpr std::int64_t kReleaseCostNs = 41'000;
  static constexpr std::int64_t kBurstOps = 4096;

  // budget_ns_per_op 0: unbounded (every move allowed, nothing counted).
  explicit MoveBudget(std::uint64_t budget_ns_per_op)
      : budget_ns_(static_cast<std::int64_t>(std::min<std::uint64_t>(budget_ns_per_op, kMaxBudgetNs))) {}

  bool bounded() const { return budget_ns_ != 0; }
  // One allocation earned its share.
  void earn() {
    if (budget_ns_ != 0) credit_ns_ = std::min(credit_ns_ + budget_ns_, budget_ns_ * kBurstOps);
  }
  // True when a move may be made now (unbounded, or credit left).
  bool allows_move() const { return budget_ns_ == 0 || credit_ns_ >= 0; }
  void charge_eviction() { charge(kEvictionCostNs); }
  void charge_release() { charge(kReleaseCostNs); }
  std::int64_t credit_ns() const { return credit_ns_; }

 private:
  static constexpr std::uint64_t kMaxBudgetNs = 1'000'000'000;  // keeps budget x kBurstOps within int64
  void charge(std::int64_t ns) {
    if (budget_ns_ != 0) credit_ns_ -= ns;
  }
  std::int64_t budget_ns_;
  std::int64_t credit_ns_ = 0;
};

}  // namespace gmlake::engine
