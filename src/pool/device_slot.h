// DeviceSlot: one device's place in DevicePools (device_pools.h): the lock that serializes every call on the
// device, its main pool, its private pools (private_pools.h), and the settings that apply to pools made later
// (tracing, the cap). The pools belong to one session (sessions.h): the first call of a new session makes them
// anew.
//
// Thread safety: every function but mutex() is called with mutex() held (DevicePools::with_slot takes it), and
// asserts so (absl::Mutex::AssertHeld: the lock requirement is checked at run time, and tells clang's analysis
// that the members it guards may be read; the bodies DevicePools runs on a slot are lambdas, which the
// analysis cannot see called under the lock).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gmlake/mutex.h"
#include "gmlake/pool.h"
#include "gmlake/snapshot_writer.h"
#include "gmlake/stats.h"
#include "pool/private_pools.h"
#include "pool/sessions.h"

namespace gmlake {

// The backend calls of a device's main pool since it was made: their number and the wall time inside them.
struct BackendTime {
  std::uint64_t calls = 0;
  std::uint64_t time_ns = 0;
};

// A segment and the pool it belongs to (kMainPoolId or a private pool's id).
struct OwnedSegment {
  PoolId pool;
  SegmentInfo segment;
};

class DeviceSlot {
 public:
  absl::Mutex& mutex() ABSL_LOCK_RETURNED(mutex_) { return mutex_; }

  // The main pool, made with `session`'s Config on `device` (and the slot's tracing and cap) on first use, or
  // made anew when it belongs to an older session (the old session's private pools go first, then the old main
  // pool, before the new one takes memory). Throws what Pool's constructor throws (Error(kConfig),
  // Error(kInvalidArgument), BackendError), no pool left.
  Pool& main_pool(const Session& session, int device);
  // The main pool, which must exist: throws Error(kInvalidPointer) naming `call` and `device` when the device
  // never allocated anything (a call about a pointer it must have returned).
  Pool& existing_main_pool(int device, const char* call);
  // The main pool if made, else null.
  Pool* main_pool_if_made() {
    mutex_.AssertHeld();
    return main_.get();
  }
  // The private pools. Make the main pool first (main_pool) before adding one: they belong to its session.
  PrivatePools& private_pools() {
    mutex_.AssertHeld();
    return privates_;
  }

  // The pool holding the live block at `ptr`: a private pool's, else the main pool (which also answers for
  // pointers nobody holds: it reports them). Only a find_block per pool when private pools exist. Throws
  // Error(kInvalidPointer) naming `call` and `device` when the device has no main pool.
  Pool& owner_of(const void* ptr, int device, const char* call);

  // The sum over the device's pools (peaks: the sum of each pool's peak, an upper bound); all zero with none.
  Stats stats();
  // f(Pool&, PoolId) for the main pool (if made), then each private pool by id.
  template <typename F>
  void for_each_pool(F&& f) {
    mutex_.AssertHeld();
    if (main_) f(*main_, kMainPoolId);
    privates_.for_each(f);
  }
  // Every pool's segments, main pool first, each with its pool's id.
  std::vector<OwnedSegment> segments();
  // Moves up to `max` of the oldest trace entries into *out, pool by pool (main first).
  void drain_trace(std::vector<SnapshotEvent>* out, std::size_t max);
  BackendTime backend_time() const;

  // max_events for every pool, those made later included (Pool::set_tracing).
  void set_tracing(std::uint64_t max_events);
  // What set_tracing last set (0: not tracing): a private pool made now starts with it.
  std::uint64_t tracing_max_events() const {
    mutex_.AssertHeld();
    return tracing_max_events_;
  }
  // The main pool's cap, now and for a main pool made later (Pool::set_cap_bytes); private pools are not capped.
  void set_cap_bytes(std::uint64_t cap_bytes);
  // The main pool's cap: what set_cap_bytes set, else the cap of the main pool made, else `configured` (the
  // session's cap_bytes, which a main pool made now gets).
  std::uint64_t cap_bytes(std::uint64_t configured) {
    mutex_.AssertHeld();
    if (cap_bytes_) return *cap_bytes_;
    return main_ ? main_->config().cap_bytes : configured;
  }

  // Destroys every pool (blocks still live included) and forgets the settings. Never throws (teardown.h).
  void tear_down();

 private:
  absl::Mutex mutex_;
  const Session* session_ ABSL_GUARDED_BY(mutex_) = nullptr;  // the session the pools were made for
  std::unique_ptr<Pool> main_ ABSL_GUARDED_BY(mutex_);
  PrivatePools privates_ ABSL_GUARDED_BY(mutex_);
  std::uint64_t tracing_max_events_ ABSL_GUARDED_BY(mutex_) = 0;  // applied to every pool, also those made later
  std::optional<std::uint64_t> cap_bytes_ ABSL_GUARDED_BY(mutex_);  // set_cap_bytes', for the main pool
};

}  // namespace gmlake
