// Headroom: how many bytes the gmlake policy may hold above the highest allocated bytes it has seen, and for
// what. ChunkSource asks it before it creates memory where idle or free memory could be moved instead.
//
// Four allowances, each a number of thousandths of the highest allocated bytes H (Config keys):
//   - plain (headroom_permille, 7): a new chunk rather than a move while reserved bytes stay within
//         reserved + more <= H + H / 1000 x plain
//     so a repeating step keeps its pages mapped instead of moving them every step (0: off, every idle page moves);
//   - waiting (waiting_headroom_permille, 0 = off): the same bound, larger, while the device waits for the host
//     (a move would be on the critical path); it applies only where it is larger than plain and plain is on;
//   - move (move_headroom_permille, 50): while a move budget refuses (move_budget.h), the pool grows within this
//     bound instead; past it, memory first;
//   - lag (lag_headroom_permille, 1000000 = no bound): growth where the device lags (a chunk created rather than a
//     wait for its stream's mark: stream_fence.h, ChunkSource) only within this bound; within() saturates, so a
//     permille whose H / 1000 x permille overflows is no bound.
// H follows the allocated bytes (note_allocated) and never falls: a peak reset leaves it (PyTorch's
// reset_peak_memory_stats resets what users read, not what the pool has learnt the job needs).
// Once a create for time (within an allowance) finds the device full, the allowances are spent until the device
// has room again (empty_cache: device_has_room): plain_allows and waiting_applies say no; move_allows and
// lag_allows do not look (decide() reads device_found_full for growth for time itself, obtain_decision.h; a refused
// lag create is remembered for the call, ObtainState::lag_refused).
// The cap (cap_bytes) is ChunkSource's: these bounds are checked with it, not instead of it.
// Invariant (check_invariants): allocated_high_bytes >= the allocated bytes now (it follows their maximum).
// Thread safety: none (the policy's lock).
#pragma once

#include <cstdint>

#include "engine_checks.h"

namespace gmlake::engine {

class Headroom {
 public:
  struct Permille {
    std::uint64_t plain = 0;    // Config::headroom_permille
    std::uint64_t waiting = 0;  // Config::waiting_headroom_permille
    std::uint64_t move = 0;     // Config::move_headroom_permille
    std::uint64_t lag = 0;      // Config::lag_headroom_permille
  };

  explicit Headroom(Permille permille) : permille_(permille) {}

  // Allocated bytes now: raises the highest allocated bytes the allowances follow.
  void note_allocated(std::uint64_t allocated_bytes) {
    if (allocated_bytes > allocated_high_bytes_) allocated_high_bytes_ = allocated_bytes;
  }
  std::uint64_t allocated_high_bytes() const { return allocated_high_bytes_; }

  // A create for time found the device full: the plain and waiting allowances are spent until device_has_room().
  void device_found_full() { device_full_ = true; }
  // empty_cache gave memory back: the allowances may be spent again.
  void device_has_room() { device_full_ = false; }
  bool device_full() const { return device_full_; }

  // True when `more_bytes` more than `reserved_bytes` stay within `permille` thousandths above the highest
  // allocated bytes: reserved + more <= H + H / 1000 x permille.
  bool within(std::uint64_t reserved_bytes, std::uint64_t more_bytes, std::uint64_t permille) const {
    // Saturating: a permille of millions (no bound) must not wrap around.
    std::uint64_t above = 0;
    std::uint64_t bound = 0;
    if (__builtin_mul_overflow(allocated_high_bytes_ / 1000, permille, &above) ||
        __builtin_add_overflow(allocated_high_bytes_, above, &bound)) {
      return true;
    }
    return reserved_bytes + more_bytes <= bound;
  }
  // The plain allowance: on, the device not found full, and within it.
  bool plain_allows(std::uint64_t reserved_bytes, std::uint64_t more_bytes) const {
    return permille_.plain != 0 && !device_full_ && within(reserved_bytes, more_bytes, permille_.plain);
  }
  // True when the waiting allowance is in use at all: larger than the plain one, the plain one on, and the device
  // not found full. The caller asks the stream whether the device waits only then (a query per allocation).
  bool waiting_applies() const { return permille_.waiting > permille_.plain && permille_.plain != 0 && !device_full_; }
  // The waiting allowance's bound (the caller has checked waiting_applies() and that the device waits).
  bool waiting_allows(std::uint64_t reserved_bytes, std::uint64_t more_bytes) const {
    return within(reserved_bytes, more_bytes, permille_.waiting);
  }
  // The move allowance's bound: growth while a move budget refuses.
  bool move_allows(std::uint64_t reserved_bytes, std::uint64_t more_bytes) const {
    return within(reserved_bytes, more_bytes, permille_.move);
  }

  // The lag allowance's bound: growth where the device lags rather than a wait. Not spent by device_found_full:
  // a lag create the device refuses is not asked for again in that call (ObtainState::lag_refused).
  bool lag_allows(std::uint64_t reserved_bytes, std::uint64_t more_bytes) const {
    return within(reserved_bytes, more_bytes, permille_.lag);
  }

  // Checks the invariant above against the allocated bytes now. Throws std::logic_error (engine_checks.h). O(1).
  void check_invariants(std::uint64_t allocated_bytes) const {
    if (allocated_bytes > allocated_high_bytes_) {
      broken("the highest allocated bytes the headroom follows are below the allocated bytes");
    }
  }

 private:
  Permille permille_;
  std::uint64_t allocated_high_bytes_ = 0;  // highest allocated bytes ever (reset_peak_stats leaves it)
  bool device_full_ = false;                // a create for time found the device full; reset by device_has_room
};

}  // namespace gmlake::engine
