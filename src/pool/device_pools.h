// DevicePools: the C API's runtime (include/gmlake/gmlake.h describes what each call does for the caller). It
// owns, for devices 0 .. kDevices - 1, each device's pools (a DeviceSlot: the main pool and the private pools),
// the sessions that gmlake_init and gmlake_shutdown start and end (sessions.h), and the IPC imports
// (ipc_import_table.h). The C API is one guarded line per function over it; its errors name the C functions.
//
// Locks. Each device has one lock (its slot's), which serializes every call on that device and guards its pools'
// lives: a pool is only made or torn down under it, never during a call (which is why the pools do not use
// SynchronizedAllocator: its lock would be a second one per call). A call reads the session state and the session
// under its device's lock only: one lock per call. start and shut_down hold the lifecycle lock throughout, and
// shut_down takes each device's lock in turn under it: never more than two locks held at once. IPC imports have
// a lock per device of their own.
//
// Calls before any start: the calls that make a pool (allocate, allocate_private, create_private, set_tracing,
// ipc_import) first start a session from GMLAKE_CONF; the others run on the device's (empty) slot. After
// shut_down, every call but ipc_close throws ShutDownError until start.
//
// Errors (besides each call's own): Error(kInvalidArgument) for a device id outside 0 .. kDevices - 1;
// ShutDownError after shut_down; Error(kConfig) when the first call starts from a bad GMLAKE_CONF; what the pools
// throw (pool.h: OutOfMemoryError, Error(kInvalidPointer), BackendError), each leaving them unchanged.
//
// Thread safety: every function may be called from any thread at any time.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gmlake/gmlake.h"
#include "gmlake/ipc.h"
#include "gmlake/mutex.h"
#include "gmlake/pool.h"
#include "gmlake/stats.h"
#include "pool/device_slot.h"
#include "pool/ipc_import_table.h"
#include "pool/private_pools.h"
#include "pool/sessions.h"

namespace gmlake {

class DevicePools {
 public:
  static constexpr std::size_t kDevices = GMLAKE_MAX_DEVICES;
  // The largest size a call may ask: 2^63 - 1 bytes (a negative size from a signed caller is refused).
  static constexpr std::uint64_t kMaxSizeBytes = static_cast<std::uint64_t>(INT64_MAX);

  DevicePools() = default;
  DevicePools(const DevicePools&) = delete;
  DevicePools& operator=(const DevicePools&) = delete;

  // The process's instance, made on first use and never destroyed, so that calls made while the process exits
  // (after static destructors have begun) still find it.
  static DevicePools& instance();

  // --- Sessions
  // Starts a session with `conf` (GMLAKE_CONF's form); pools are made by the first call that needs one. Throws
  // Error(kConfig), AlreadyInitializedError while a session is ready.
  void start(std::string_view conf);
  // Ends the session: every pool goes, blocks still live included, one device at a time (a call running on a
  // device finishes first). Does nothing without a ready session. Never throws.
  void shut_down();

  // --- The main pool of a device
  // A block of at least size_bytes (Pool::allocate). Throws Error(kInvalidArgument) for size_bytes > kMaxSizeBytes.
  void* allocate(int device, std::uint64_t size_bytes, StreamId stream);
  // Frees the block at `ptr` in the pool that holds it (a private pool's, else the main pool, which reports a
  // pointer nobody holds). ptr null: nothing. After shut_down the ShutDownError is counted in ignored_frees().
  void deallocate(int device, void* ptr);
  // Frees deallocate ignored (ShutDownError) over the life of the process.
  std::uint64_t ignored_frees() const { return ignored_frees_.load(std::memory_order_relaxed); }
  // Pool::record_stream on the pool that holds `ptr`. ptr null: nothing.
  void record_stream(int device, void* ptr, StreamId stream);
  // Pool::empty_cache of the main pool and of every private pool without users.
  void empty_cache(int device);
  // The sum of the device's pools' statistics (DeviceSlot::stats); all zero for a device without pools.
  Stats stats(int device);
  // Pool::reset_peak_stats on every pool of the device.
  void reset_peak_stats(int device);
  // The main pool's cap from now on, kept for a main pool made later, until shut_down (DeviceSlot).
  void set_cap_bytes(int device, std::uint64_t cap_bytes);
  // The main pool's cap (DeviceSlot::cap_bytes), the session started from the environment first if none is.
  std::uint64_t cap_bytes(int device);
  // The main pool's backend calls and the time inside them; zero without a main pool.
  BackendTime backend_time(int device);
  // Tracing for every pool of the device, those made later included (DeviceSlot::set_tracing).
  void set_tracing(int device, std::uint64_t max_events);
  // Up to `max` of the oldest trace entries of the device's pools (main first), moved out.
  std::vector<SnapshotEvent> drain_trace(int device, std::size_t max);
  // Every pool's segments, main pool first, each with its pool's id.
  std::vector<OwnedSegment> segments(int device);
  // The live and pending blocks of the pool `pool` (kMainPoolId: the main pool, none when not made yet; else a
  // private pool, which must exist: Error(kInvalidArgument)).
  std::vector<BlockInfo> blocks(int device, PoolId pool);

  // --- Private pools (private_pools.h)
  // Adds a user to the private pool `pool` (made first: with the main pool, from the session's Config). Throws
  // Error(kInvalidArgument) for kMainPoolId, Error(kConfig) on the sim backend (each sim backend counts addresses
  // from the same base: two pools could hand out the same address).
  void create_private(int device, PoolId pool);
  // Removes a user (PrivatePools::remove_user).
  void release_private(int device, PoolId pool);
  // The private pool's number of users; 0 for one that does not exist.
  std::int64_t private_use_count(int device, PoolId pool);
  // A block from the private pool `pool`, which must exist (Error(kInvalidArgument)); sizes as allocate.
  void* allocate_private(int device, PoolId pool, std::uint64_t size_bytes, StreamId stream);
  // Pool::empty_cache of the private pool; nothing for one that does not exist (any more).
  void empty_private_cache(int device, PoolId pool);
  // Pool::restore of the private pool `pool` with `blocks`, then the pools without users and blocks go. Throws
  // Error(kInvalidArgument) for kMainPoolId or a pool that does not exist, and what Pool::restore throws.
  void restore(int device, PoolId pool, std::vector<BlockInfo> blocks);

  // --- IPC (include/gmlake/ipc.h)
  // ipc_export of the main pool's live block containing `ptr`. Throws Error(kInvalidPointer) when the device has
  // no main pool, and what ipc_export throws.
  IpcExport ipc_export(int device, const void* ptr);
  // Maps another process's block on `device` (IpcImportTable::open, with the session's Config).
  void* ipc_import(int device, std::string_view handle);
  // Unmaps an import (IpcImportTable::close); works after shut_down.
  void ipc_close(int device, void* ptr);

 private:
  enum class BeforeStart { kStartFromEnvironment, kRunOnEmptySlot };

  // Throws Error(kInvalidArgument) unless 0 <= device < kDevices.
  static void check_device(int device);
  // Runs body(slot) on `device`'s slot under its lock once a session is ready (before any start: see BeforeStart).
  // Throws ShutDownError after shut_down.
  template <typename Body>
  auto with_slot(int device, BeforeStart before_start, Body&& body);
  // The main pool of `slot` (for the current session), under its lock with a session ready.
  Pool& main_pool(DeviceSlot& slot, int device);

  Sessions sessions_;
  std::array<DeviceSlot, kDevices> slots_;
  IpcImportTable imports_{kDevices};
  std::atomic<std::uint64_t> ignored_frees_{0};
};

template <typename Body>
auto DevicePools::with_slot(int device, BeforeStart before_start, Body&& body) {
  check_device(device);
  DeviceSlot& slot = slots_[static_cast<std::size_t>(device)];
  for (;;) {
    {
      MutexLock lock(&slot.mutex());
      const SessionState state = sessions_.state();
      if (state == SessionState::kShutDown) {
        throw ShutDownError("gmlake is shut down (gmlake_shutdown was called; gmlake_init reopens)");
      }
      if (state == SessionState::kReady || before_start == BeforeStart::kRunOnEmptySlot) return body(slot);
    }
    sessions_.start_from_environment();
  }
}

}  // namespace gmlake
