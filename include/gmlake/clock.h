// Clock: where the allocator reads the time from. The engine takes it from outside, as it takes its backend, so
// that tests and benchmarks drive time by hand (ManualClock) and a pool reads the steady clock (SteadyClock).
// Used off the hot path: the gmlake policy reads it only when it weighs a move (Config::move_share_permille),
// never per allocation.
// Thread safety: SteadyClock is; ManualClock is not (one thread, or the caller's lock).
#pragma once

#include <chrono>
#include <cstdint>

namespace gmlake {

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since an arbitrary fixed point; never decreases.
  virtual std::int64_t now_ns() = 0;
};

// std::chrono::steady_clock (CLOCK_MONOTONIC on Linux).
class SteadyClock final : public Clock {
 public:
  std::int64_t now_ns() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// Time that moves only when told to (tests).
class ManualClock final : public Clock {
 public:
  std::int64_t now_ns() override { return now_ns_; }
  // Moves the time `ns` (>= 0) forward.
  void advance_ns(std::int64_t ns) { now_ns_ += ns; }

 private:
  std::int64_t now_ns_ = 0;
};

// The process's one SteadyClock (what a pool uses unless given another clock).
inline Clock& steady_clock() {
  static SteadyClock clock;
  return clock;
}

}  // namespace gmlake
