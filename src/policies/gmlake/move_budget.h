// MoveBudget: how much driver time the gmlake policy may spend moving memory.
//
// Moving memory (evicting an idle chunk to back another range, re-cutting an idle chunk a block would strand,
// releasing a free chunk to remake one of another size) saves bytes and costs driver calls on the allocating
// thread; growing (a new chunk) costs bytes and one create, and a range grown stays mapped, so a repeating step
// that would move the same memory every time stops moving. Two bounds, each off at 0:
//   - wall-time share (Config::move_share_permille, move_burst_ms): over the wall time T since the first move
//     was weighed (Clock), a move made while the device waits for the host is allowed while
//         charged_ns <= burst_ns + T x share_permille / 1000
//     so that, once the burst (the moves that form the layout in the first steps) is spent, moves on the
//     critical path take at most that share of the time. Only those are charged, and only those refused: a move
//     made while the allocating stream has queued work is hidden behind it (VMM calls cost the allocating
//     thread's time and do not stall the GPU: ../shared/REFERENCE.md), so it costs the user nothing, while the
//     growth a refusal makes instead costs memory (the lever of issue 23: price a move by what it delays).
//     Whether the device waits is the caller's answer (DeviceWaits: the stream's, or Config::assume_device_waits
//     where no stream can be asked, as in `gmlake replay`);
//   - per operation (Config::move_budget_ns_per_op): each allocation earns budget_ns_per_op (up to kBurstOps
//     allocations' worth); a move is allowed while the credit is >= 0, so over n allocations
//         charged_ns <= n x budget_ns_per_op + kBurstOps x budget_ns_per_op + one move's cost.
// While a bound refuses, the policy grows instead, within move_headroom_permille of the highest allocated bytes
// and while no cap is set and the device has room (the caller checks that: decide() in obtain_decision.h);
// past that it moves anyway (memory first). Where a peer may lend (the lake), it borrows instead.
// The costs are fixed so that decisions do not depend on the backend's timing (reproducible replays): an
// eviction is charged one cuMemUnmap plus the cuMemMap and cuMemSetAccess of the chunk mapped in its place; a
// release to remake a chunk one cuMemRelease plus the cuMemCreate that follows. The figures are the H100's
// medians per call in bench/cuda/vmm_costs_h100.json; docs/design.md ("Move budget") derives them.
// Invariants (check_invariants):
//   budget_ns_per_op = 0  =>  credit_ns = 0;   credit_ns <= budget_ns_per_op x kBurstOps
//   share_permille = 0    =>  charged_ns = 0;  charged_ns >= 0
//   the wall time has not started  =>  start_ns = 0
// Thread safety: none (the policy's lock).
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine_checks.h"

namespace gmlake::engine {

class MoveBudget {
 public:
  static constexpr std::int64_t kEvictionCostNs = 43'000;
  static constexpr std::int64_t kReleaseCostNs = 41'000;
  static constexpr std::int64_t kBurstOps = 4096;

  struct Limits {
    std::uint64_t budget_ns_per_op = 0;  // 0: no per-operation bound
    std::uint64_t share_permille = 0;    // 0: no wall-time bound
    std::uint64_t burst_ns = 0;          // moves allowed at once before the share has accrued
  };

  explicit MoveBudget(Limits limits)
      : budget_ns_(static_cast<std::int64_t>(std::min<std::uint64_t>(limits.budget_ns_per_op, kMaxBudgetNs))),
        share_permille_(static_cast<std::int64_t>(std::min<std::uint64_t>(limits.share_permille, 1000))),
        burst_ns_(static_cast<std::int64_t>(std::min<std::uint64_t>(limits.burst_ns, kMaxBurstNs))) {}

  // True when some bound is set (else every move is allowed and nothing is counted).
  bool bounded() const { return budget_ns_ != 0 || share_permille_ != 0; }
  // True when the wall-time share is bounded (the caller then passes the clock's time to allows_move).
  bool timed() const { return share_permille_ != 0; }
  // One allocation earned its share (per-operation budget).
  void earn() {
    if (budget_ns_ != 0) credit_ns_ = std::min(credit_ns_ + budget_ns_, budget_ns_ * kBurstOps);
  }
  // True when a move may be made now; `now_ns`: the clock's time (read only when timed()); `device_waits()`:
  // whether the device waits for the host, asked at most once and only where the wall-time share alone would
  // refuse (a move hidden behind queued work is allowed). The wall time starts at the first call. Throws what
  // `device_waits` throws (then the wall time may have started; nothing else changed).
  template <class DeviceWaitsFn>
  bool allows_move(std::int64_t now_ns, DeviceWaitsFn&& device_waits) {
    if (budget_ns_ != 0 && credit_ns_ < 0) return false;
    if (share_permille_ == 0) return true;
    if (!started_) {
      started_ = true;
      start_ns_ = now_ns;
    }
    const std::int64_t elapsed_ns = std::max<std::int64_t>(0, now_ns - start_ns_);
    return charged_ns_ <= burst_ns_ + elapsed_ns / 1000 * share_permille_ || !device_waits();
  }
  // A move was made; `on_critical_path`: the device waited for the host meanwhile (only then is the wall-time
  // share charged; the per-operation credit is charged in any case).
  void charge_eviction(bool on_critical_path) { charge(kEvictionCostNs, on_critical_path); }
  void charge_release(bool on_critical_path) { charge(kReleaseCostNs, on_critical_path); }
  std::int64_t credit_ns() const { return credit_ns_; }
  // Move time charged against the wall-time share so far (moves made while the device waited).
  std::int64_t charged_ns() const { return charged_ns_; }
  // Checks the invariants above; throws std::logic_error (engine_checks.h). O(1).
  void check_invariants() const {
    if (budget_ns_ == 0 ? credit_ns_ != 0 : credit_ns_ > budget_ns_ * kBurstOps) {
      broken("the move credit is past its bound");
    }
    if (share_permille_ == 0 ? charged_ns_ != 0 : charged_ns_ < 0) broken("the move time charged is off");
    if (!started_ && start_ns_ != 0) broken("the move budget's wall time has a start but never started");
  }

 private:
  static constexpr std::uint64_t kMaxBudgetNs = 1'000'000'000;  // keeps budget x kBurstOps within int64
  static constexpr std::uint64_t kMaxBurstNs = std::uint64_t{1} << 62;
  void charge(std::int64_t ns, bool on_critical_path) {
    if (budget_ns_ != 0) credit_ns_ -= ns;
    if (share_permille_ != 0 && on_critical_path) charged_ns_ += ns;
  }
  std::int64_t budget_ns_;
  std::int64_t share_permille_;
  std::int64_t burst_ns_;
  std::int64_t credit_ns_ = 0;
  std::int64_t charged_ns_ = 0;
  bool started_ = false;
  std::int64_t start_ns_ = 0;
};

}  // namespace gmlake::engine
