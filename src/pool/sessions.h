// Sessions: the life cycle of DevicePools (device_pools.h), which the C API's gmlake_init and gmlake_shutdown
// drive. A session is the Config one start parsed; it is published immutable and stays allocated until the next
// session starts, so that a pool made for it can tell (by its address) that it belongs to an older session.
//
// States: uninitialized (nothing started yet) -> ready (start, or the first call: start_from_environment) -> shut
// down (end) -> ready (start) -> ... Both start and end hold the lifecycle lock throughout, so a new session never
// starts before end's teardown of the old one is done.
//
// Thread safety: every function may be called from any thread. state() and current() read atomics (acquire);
// start, start_from_environment and end serialize on the lifecycle lock.
#pragma once

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "gmlake/config.h"
#include "gmlake/mutex.h"

namespace gmlake {

// A call after the session ended (gmlake_shutdown), until a new one starts.
class ShutDownError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// start while a session is ready.
class AlreadyInitializedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The settings one start parsed; immutable once published.
struct Session {
  Config config;
};

enum class SessionState { kUninitialized, kReady, kShutDown };

// `text` (GMLAKE_CONF's form) as a session's Config: parse_config, with the backend checked against this build's
// (backend_names()), so that a start refuses what the first pool could not make. Throws Error(kConfig) naming
// the key.
Config parse_session_config(std::string_view text);

class Sessions {
 public:
  Sessions() = default;
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  // Parses `conf` and starts a session with it (after an end: afresh). Throws Error(kConfig), nothing started;
  // AlreadyInitializedError while a session is ready.
  void start(std::string_view conf);
  // Starts a session from GMLAKE_CONF (environment_conf()) when none was ever started; otherwise does nothing.
  // Throws Error(kConfig), nothing started.
  void start_from_environment();
  // Ends the ready session: the state becomes shut down, then `tear_down()` runs, under the lifecycle lock. Does
  // nothing (tear_down not called) when no session is ready. tear_down must not throw.
  template <typename TearDown>
  void end(TearDown&& tear_down) {
    MutexLock lifecycle(&lifecycle_mutex_);
    if (state_.load(std::memory_order_acquire) != SessionState::kReady) return;
    state_.store(SessionState::kShutDown, std::memory_order_release);
    tear_down();
  }

  SessionState state() const { return state_.load(std::memory_order_acquire); }
  // The ready session; null before the first start. Valid until the next start (which needs an end first).
  const Session* current() const { return session_.load(std::memory_order_acquire); }

 private:
  // Publishes `config` as the session. Call with the state not ready.
  void publish(Config config) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mutex_);

  absl::Mutex lifecycle_mutex_;
  std::atomic<SessionState> state_{SessionState::kUninitialized};  // changed under lifecycle_mutex_
  std::atomic<const Session*> session_{nullptr};  // set before state_ becomes ready, under lifecycle_mutex_
  std::unique_ptr<Session> owned_ ABSL_GUARDED_BY(lifecycle_mutex_);
};

}  // namespace gmlake
