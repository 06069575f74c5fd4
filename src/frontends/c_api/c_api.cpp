// The C API (gmlake.h): a thin shim over gmlake::Pool (pool.h). Every function converts every exception into a
// status and this thread's last error, so that nothing is thrown across the C boundary.
//
// State. One Runtime, created on first use and never destroyed (so that calls made while the process exits,
// after static destructors have begun, still find it). It holds one DevicePool per device: a mutex and the
// gmlake::Pool made by the first gmlake_malloc on that device. The mutex serializes every call on that device
// and also guards the pool's life: a pool is only created or torn down under it, so never during a call. (That
// is why the pools do not use SynchronizedAllocator: its lock would be a second one per call.)
//
// Sessions. gmlake_init (or the first call) publishes an immutable Session (the parsed Config) and sets the
// state to ready; gmlake_shutdown sets it to shut down, then tears the pools down one at a time under each
// pool's mutex. Both hold lifecycle_mutex throughout, so a new session never starts before the old one's pools
// are gone. A call reads the state and the session under its pool's mutex only: one lock per call, and never
// more than two locks held at once anywhere.
#include "gmlake/gmlake.h"

#include <array>
#include <map>
#include <utility>
#include <vector>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <new>
#include <stdexcept>
#include <string>

#include "gmlake/backend.h"
#include "gmlake/backend_factory.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/ipc.h"
#include "gmlake/pool.h"
#include "gmlake/snapshot_writer.h"
#include "gmlake/stats.h"

namespace gmlake::capi {
namespace {

constexpr std::size_t kDevices = GMLAKE_MAX_DEVICES;
constexpr std::size_t kMaxSizeBytes = static_cast<std::size_t>(INT64_MAX);  // 2^63 - 1

// --- this thread's last error: trivially destructible, so it stays usable while threads and the process exit.
constexpr std::size_t kMessageBytes = 512;
struct LastError {
  int code;
  char message[kMessageBytes];
};
thread_local LastError t_last_error{};

void clear_last_error() {
  t_last_error.code = GMLAKE_OK;
  t_last_error.message[0] = '\0';
}

void set_last_error(int code, const char* message) {
  t_last_error.code = code;
  std::snprintf(t_last_error.message, kMessageBytes, "%s", message);
}

// Errors of this API's own, besides gmlake::Error.
class ShutDownError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class AlreadyInitializedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

int status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOutOfMemory: return GMLAKE_ERROR_OUT_OF_MEMORY;
    case ErrorCode::kInvalidPointer: return GMLAKE_ERROR_INVALID_POINTER;
    case ErrorCode::kInvalidArgument: return GMLAKE_ERROR_INVALID_ARGUMENT;
    case ErrorCode::kConfig: return GMLAKE_ERROR_CONFIG;
    case ErrorCode::kBackend: return GMLAKE_ERROR_BACKEND;
    case ErrorCode::kTrace: break;
  }
  return GMLAKE_ERROR_INTERNAL;
}

// Records the exception being handled as this thread's last error. Call only inside a catch handler.
void record_current_exception() noexcept {
  try {
    throw;
  } catch (const ShutDownError& e) {
    set_last_error(GMLAKE_ERROR_SHUT_DOWN, e.what());
  } catch (const AlreadyInitializedError& e) {
    set_last_error(GMLAKE_ERROR_ALREADY_INITIALIZED, e.what());
  } catch (const Error& e) {
    set_last_error(status_of(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    set_last_error(GMLAKE_ERROR_OUT_OF_MEMORY, "gmlake: the host is out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    set_last_error(GMLAKE_ERROR_INTERNAL, e.what());
  } catch (...) {
    set_last_error(GMLAKE_ERROR_INTERNAL, "gmlake: unknown exception");
  }
}

// Runs `body` with this thread's last error cleared; returns what it returns, or `on_error` after recording
// the exception it threw.
template <typename T, typename Body>
T guarded(T on_error, Body&& body) noexcept {
  clear_last_error();
  try {
    return body();
  } catch (...) {
    record_current_exception();
    return on_error;
  }
}

// The same for a call that returns a status: GMLAKE_OK, or the status of the exception `body` threw.
template <typename Body>
int guarded_status(Body&& body) noexcept {
  clear_last_error();
  try {
    body();
    return GMLAKE_OK;
  } catch (...) {
    record_current_exception();
    return t_last_error.code;
  }
}

// --- the configuration

// GMLAKE_CONF's text as a Config (config.h: one table, backend and debug included), with the backend checked
// against this build's, so that gmlake_init refuses what the first gmlake_malloc could not make. Throws
// Error(kConfig) naming the key.
Config parse_c_api_config(std::string_view text) {
  Config config = parse_config(text);
  for (std::string_view name : backend_names()) {
    if (backend_base_name(config.backend) == name) return config;
  }
  std::string expected;
  for (std::string_view name : backend_names()) expected += (expected.empty() ? "" : ", ") + std::string(name);
  throw Error(ErrorCode::kConfig, "gmlake config: backend: unknown backend '" + config.backend +
                                      "': expected one of this build's: " + expected);
}

// --- the runtime

enum class State { kUninitialized, kReady, kShutDown };

// The settings one gmlake_init (or the first call) parsed; immutable once published.
struct Session {
  Config config;
};

// A private pool (PyTorch's MemPool, a CUDA graph's pool): its own Pool, alive while its use count is above 0
// or it still holds blocks.
struct PrivatePool {
  std::unique_ptr<Pool> pool;
  std::int64_t use_count = 0;
};
using PoolKey = std::pair<std::uint64_t, std::uint64_t>;  // PyTorch's MempoolId_t

struct DevicePool {
  std::mutex mutex;
  const Session* session = nullptr;          // guarded by mutex: the session the pools were made for
  std::unique_ptr<Pool> pool;                // guarded by mutex: the device's main pool
  std::map<PoolKey, PrivatePool> privates;   // guarded by mutex
  std::uint64_t tracing_max_events = 0;      // guarded by mutex: applied to every pool, also those made later
  std::optional<std::uint64_t> cap_bytes;    // guarded by mutex: gmlake_set_cap_bytes, for the main pool
};

struct Runtime {
  std::mutex lifecycle_mutex;  // held by gmlake_init, lazy initialization and gmlake_shutdown throughout
  std::atomic<State> state{State::kUninitialized};
  std::atomic<const Session*> session{nullptr};  // set before state becomes kReady
  std::unique_ptr<Session> owned_session;        // guarded by lifecycle_mutex
  std::array<DevicePool, kDevices> pools;
  std::atomic<std::uint64_t> ignored_frees{0};
};

Runtime& runtime() {
  static Runtime* const instance = new Runtime();  // never destroyed, on purpose (see the file comment)
  return *instance;
}

// Starts a session with `settings`. Call with lifecycle_mutex held and the state not kReady: no pool holds an
// allocator of the previous session any more (gmlake_shutdown tore them down), so it can be freed.
void start_session(Runtime& r, Config config) {
  r.owned_session = std::make_unique<Session>(Session{std::move(config)});
  r.session.store(r.owned_session.get(), std::memory_order_release);
  r.state.store(State::kReady, std::memory_order_release);
}

// The configuration from GMLAKE_CONF, when nothing initialized gmlake yet. Throws Error(kConfig).
void initialize_from_environment(Runtime& r) {
  std::lock_guard lifecycle(r.lifecycle_mutex);
  if (r.state.load(std::memory_order_acquire) != State::kUninitialized) return;
  start_session(r, parse_c_api_config(environment_conf()));
}

void check_device(int device) {
  if (device < 0 || static_cast<std::size_t>(device) >= kDevices) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake: invalid device id " + std::to_string(device) +
                                                 ": expected 0.." + std::to_string(kDevices - 1));
  }
}

// A malloc's size: below 2^63, so that a negative ssize_t from a signed caller is refused, not taken as huge.
void check_size(std::size_t size_bytes, const char* call) {
  if (size_bytes > kMaxSizeBytes) {
    throw Error(ErrorCode::kInvalidArgument, std::string(call) + ": size " + std::to_string(size_bytes) +
                                                 " bytes is >= 2^63 (a negative size from a signed caller?)");
  }
}

enum class OnUninitialized { kInitialize, kProceed };

// Runs body(pool) on `device`'s pool under its mutex once gmlake is ready (initializing it from GMLAKE_CONF
// first when asked), or, for kProceed, also while nothing initialized it yet. Throws ShutDownError after
// gmlake_shutdown.
template <typename Body>
auto with_pool(int device, OnUninitialized when_uninitialized, const char* shut_down_message, Body&& body) {
  check_device(device);
  Runtime& r = runtime();
  DevicePool& pool = r.pools[static_cast<std::size_t>(device)];
  for (;;) {
    std::unique_lock lock(pool.mutex);
    const State state = r.state.load(std::memory_order_acquire);
    if (state == State::kShutDown) throw ShutDownError(shut_down_message);
    if (state == State::kReady || when_uninitialized == OnUninitialized::kProceed) return body(pool);
    lock.unlock();
    initialize_from_environment(r);
  }
}

// The device's Pool, made with the current session's configuration on first use. Call with the device pool's
// mutex held and gmlake ready.
Pool& pool_of(DevicePool& device_pool, int device) {
  const Session* session = runtime().session.load(std::memory_order_acquire);
  if (!device_pool.pool || device_pool.session != session) {
    device_pool.privates.clear();  // the old session's pools, before their replacement takes memory
    device_pool.pool.reset();
    device_pool.pool = std::make_unique<Pool>(session->config, device);
    device_pool.pool->set_tracing(device_pool.tracing_max_events);
    if (device_pool.cap_bytes) device_pool.pool->set_cap_bytes(*device_pool.cap_bytes);
    device_pool.session = session;
  }
  return *device_pool.pool;
}

// The private pool `key` (made on first use, with use count 0), after making the main pool. Private pools run
// the `caching` policy (PyTorch's algorithm: blocks never move, a segment stays mapped until the pool goes, as
// a captured CUDA graph needs), keep their cached memory when memory runs out (release_on_oom false) and use
// no CUDA events (a capture cannot query them). Call with the device pool's mutex held and gmlake ready.
PrivatePool& private_of(DevicePool& device_pool, int device, PoolKey key) {
  pool_of(device_pool, device);
  PrivatePool& p = device_pool.privates[key];
  if (!p.pool) {
    Config config = device_pool.session->config;
    config.policy = Policy::kCaching;
    config.release_on_oom = false;
    try {
      p.pool = std::make_unique<Pool>(config, device, /*stream_events=*/false);
    } catch (...) {
      device_pool.privates.erase(key);
      throw;
    }
    p.pool->set_tracing(device_pool.tracing_max_events);
  }
  return p;
}

// Destroys the private pools released by every user (use count 0) that hold no block any more.
void collect_released(DevicePool& device_pool) {
  for (auto it = device_pool.privates.begin(); it != device_pool.privates.end();) {
    if (it->second.use_count <= 0 && it->second.pool->stats().active_bytes.current == 0) {
      it = device_pool.privates.erase(it);
    } else {
      ++it;
    }
  }
}

// The private pool `id` of a device, which must exist (`call` names the caller in the error).
PrivatePool& existing_private(DevicePool& pool, gmlake_pool_id id, int device, const char* call) {
  const auto it = pool.privates.find({id.first, id.second});
  if (it == pool.privates.end()) {
    throw Error(ErrorCode::kInvalidArgument, std::string(call) + ": device " + std::to_string(device) +
                                                 " has no private pool (" + std::to_string(id.first) + ", " +
                                                 std::to_string(id.second) + ")");
  }
  return it->second;
}

// The pool holding the live block at `ptr`: a private pool's, else the main pool (which also answers for
// pointers nobody holds: it reports them). Only a find_block per pool when private pools exist.
Pool& owner_of(DevicePool& device_pool, const void* ptr, int device, const char* call) {
  if (!device_pool.privates.empty() && !(device_pool.pool && device_pool.pool->find_block(ptr))) {
    for (auto& [key, p] : device_pool.privates) {
      if (p.pool->find_block(ptr)) return *p.pool;
    }
  }
  if (!device_pool.pool) {
    throw Error(ErrorCode::kInvalidPointer,
                std::string(call) + ": no block was ever allocated on device " + std::to_string(device));
  }
  return *device_pool.pool;
}

// Every pool of the device: the main pool first, then the private pools by id.
template <typename F>
void for_each_pool(DevicePool& device_pool, F&& f) {
  if (device_pool.pool) f(*device_pool.pool, PoolKey{0, 0});
  for (auto& [key, p] : device_pool.privates) f(*p.pool, key);
}

// The device's statistics: the sum over its pools (peaks: the sum of each pool's peak, an upper bound).
Stats device_stats(DevicePool& device_pool) {
  Stats total{};
  for_each_pool(device_pool, [&](Pool& pool, PoolKey) {
    const Stats s = pool.stats();
#define GMLAKE_C_ADD_GAUGE(name)          \
  total.name.current += s.name.current; \
  total.name.peak += s.name.peak;
#define GMLAKE_C_ADD_COUNTER(name) total.name += s.name;
    GMLAKE_GAUGE_FIELDS(GMLAKE_C_ADD_GAUGE)
    GMLAKE_COUNTER_FIELDS(GMLAKE_C_ADD_COUNTER)
#undef GMLAKE_C_ADD_GAUGE
#undef GMLAKE_C_ADD_COUNTER
    total.backend_calls = s.backend_calls;  // the main pool's (used by no C field)
  });
  return total;
}

// The device's Pool for a call about a pointer it must have returned (`call` names it in the error): throws
// Error(kInvalidPointer) when the device never allocated anything. Call with the device pool's mutex held.
Pool& existing_pool(DevicePool& device_pool, int device, const char* call) {
  if (!device_pool.pool) {
    throw Error(ErrorCode::kInvalidPointer,
                std::string(call) + ": no block was ever allocated on device " + std::to_string(device));
  }
  return *device_pool.pool;
}

void fill(const Stats& s, gmlake_stats* out) {
#define GMLAKE_C_GAUGE(name) out->name = gmlake_gauge{s.name.current, s.name.peak};
#define GMLAKE_C_COUNTER(name) out->name = s.name;
  GMLAKE_GAUGE_FIELDS(GMLAKE_C_GAUGE)
  GMLAKE_COUNTER_FIELDS(GMLAKE_C_COUNTER)
#undef GMLAKE_C_GAUGE
#undef GMLAKE_C_COUNTER
}

// gmlake_stats has exactly the fields of the stats table (fill() fails to compile when one is missing).
#define GMLAKE_C_COUNT(name) +1
constexpr std::size_t kGaugeFields = 0 GMLAKE_GAUGE_FIELDS(GMLAKE_C_COUNT);
constexpr std::size_t kCounterFields = 0 GMLAKE_COUNTER_FIELDS(GMLAKE_C_COUNT);
#undef GMLAKE_C_COUNT
static_assert(sizeof(gmlake_stats) == kGaugeFields * sizeof(gmlake_gauge) + kCounterFields * sizeof(std::uint64_t));

// The C API's numbers for trace actions and block states are the C++ enums' values.
static_assert(GMLAKE_TRACE_ALLOC == static_cast<int>(SnapshotAction::kAlloc) &&
              GMLAKE_TRACE_FREE_REQUESTED == static_cast<int>(SnapshotAction::kFreeRequested) &&
              GMLAKE_TRACE_FREE_COMPLETED == static_cast<int>(SnapshotAction::kFreeCompleted) &&
              GMLAKE_TRACE_SEGMENT_ALLOC == static_cast<int>(SnapshotAction::kSegmentAlloc) &&
              GMLAKE_TRACE_SEGMENT_FREE == static_cast<int>(SnapshotAction::kSegmentFree) &&
              GMLAKE_TRACE_SEGMENT_MAP == static_cast<int>(SnapshotAction::kSegmentMap) &&
              GMLAKE_TRACE_SEGMENT_UNMAP == static_cast<int>(SnapshotAction::kSegmentUnmap) &&
              GMLAKE_TRACE_OOM == static_cast<int>(SnapshotAction::kOom));
static_assert(static_cast<int>(SegmentBlockState::kActiveAllocated) == 0 &&
              static_cast<int>(SegmentBlockState::kActivePendingFree) == 1 &&
              static_cast<int>(SegmentBlockState::kInactive) == 2);

constexpr const char* kShutDownMessage = "gmlake is shut down (gmlake_shutdown was called; gmlake_init reopens)";

}  // namespace
}  // namespace gmlake::capi

using namespace gmlake;
using namespace gmlake::capi;

namespace {

int init_with(const std::string& conf) {
  return guarded_status([&] {
    Config config = parse_c_api_config(conf);
    Runtime& r = runtime();
    std::lock_guard lifecycle(r.lifecycle_mutex);
    if (r.state.load(std::memory_order_acquire) == State::kReady) {
      throw AlreadyInitializedError("gmlake is already initialized (gmlake_shutdown first to start afresh)");
    }
    start_session(r, std::move(config));
  });
}

}  // namespace

extern "C" {

int gmlake_init(const char* conf) { return init_with(conf != nullptr ? std::string(conf) : environment_conf()); }

int gmlake_init_defaults(const char* defaults) {
  const std::string first = defaults != nullptr ? defaults : "";
  const std::string env = environment_conf();
  return init_with(first.empty() ? env : env.empty() ? first : first + "," + env);
}

void* gmlake_malloc(size_t size_bytes, int device, uint64_t stream) {
  return guarded(static_cast<void*>(nullptr), [&]() -> void* {
    check_size(size_bytes, "gmlake_malloc");
    return with_pool(device, OnUninitialized::kInitialize, kShutDownMessage,
                     [&](DevicePool& pool) { return pool_of(pool, device).allocate(size_bytes, stream); });
  });
}

void gmlake_free(void* ptr, size_t /*size_bytes*/, int device, uint64_t /*stream*/) {
  guarded(0, [&] {
    if (ptr == nullptr) return 0;
    try {
      with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
        Pool& owner = owner_of(pool, ptr, device, "gmlake_free");
        owner.deallocate(ptr);
        if (&owner != pool.pool.get()) collect_released(pool);
        return 0;
      });
    } catch (const ShutDownError&) {
      runtime().ignored_frees.fetch_add(1, std::memory_order_relaxed);
      throw;
    }
    return 0;
  });
}

int gmlake_record_stream(void* ptr, int device, uint64_t stream) {
  return guarded_status([&] {
    if (ptr == nullptr) return;
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      owner_of(pool, ptr, device, "gmlake_record_stream").record_stream(ptr, stream);
      return 0;
    });
  });
}

int gmlake_empty_cache(int device) {
  return guarded_status([&] {
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      if (pool.pool) pool.pool->empty_cache();
      for (auto& [key, p] : pool.privates) {  // a private pool in use keeps its memory (a graph may use it)
        if (p.use_count <= 0) p.pool->empty_cache();
      }
      return 0;
    });
  });
}

int gmlake_get_stats(int device, gmlake_stats* out) {
  return guarded_status([&] {
    if (out == nullptr) throw Error(ErrorCode::kInvalidArgument, "gmlake_get_stats: out is NULL");
    const Stats stats = with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      return device_stats(pool);
    });
    fill(stats, out);
  });
}

int gmlake_reset_peak_stats(int device) {
  return guarded_status([&] {
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      for_each_pool(pool, [](Pool& p, PoolKey) { p.reset_peak_stats(); });
      return 0;
    });
  });
}

int gmlake_set_cap_bytes(int device, uint64_t cap_bytes) {
  return guarded_status([&] {
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      pool.cap_bytes = cap_bytes;
      if (pool.pool) pool.pool->set_cap_bytes(cap_bytes);
      return 0;
    });
  });
}

int gmlake_get_backend_time(int device, uint64_t* calls, uint64_t* time_ns) {
  return guarded_status([&] {
    if (calls == nullptr || time_ns == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_get_backend_time: calls or time_ns is NULL");
    }
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      *calls = 0;
      *time_ns = 0;
      if (!pool.pool) return 0;
      const BackendCounters& c = pool.pool->backend().counters();
      for (std::uint64_t n : c.calls) *calls += n;
      *time_ns = c.total_time_ns();
      return 0;
    });
  });
}

void gmlake_shutdown(void) {
  guarded_status([] {
    Runtime& r = runtime();
    std::lock_guard lifecycle(r.lifecycle_mutex);
    if (r.state.load(std::memory_order_acquire) != State::kReady) return;
    r.state.store(State::kShutDown, std::memory_order_release);
    for (DevicePool& pool : r.pools) {  // one at a time: a call running on a pool finishes first
      std::lock_guard lock(pool.mutex);
      pool.privates.clear();  // never throws: teardown retries and gives up quietly (teardown.h)
      pool.pool.reset();
      pool.tracing_max_events = 0;
      pool.cap_bytes.reset();
      pool.session = nullptr;
    }
  });
}

int gmlake_set_tracing(int device, uint64_t max_events) {
  return guarded_status([&] {
    with_pool(device, OnUninitialized::kInitialize, kShutDownMessage, [&](DevicePool& pool) {
      pool.tracing_max_events = max_events;  // a pool made later starts with it
      for_each_pool(pool, [&](Pool& p, PoolKey) { p.set_tracing(max_events); });
      return 0;
    });
  });
}

int gmlake_drain_trace(int device, gmlake_trace_event* out, size_t capacity, size_t* count) {
  return guarded_status([&] {
    if (count == nullptr || (out == nullptr && capacity > 0)) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_drain_trace: count is NULL, or out is NULL with a capacity");
    }
    std::vector<SnapshotEvent> events;
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      for_each_pool(pool, [&](Pool& p, PoolKey) { p.drain_trace(&events, capacity - events.size()); });
      return 0;
    });
    for (std::size_t i = 0; i < events.size(); ++i) {
      const SnapshotEvent& e = events[i];
      out[i] = gmlake_trace_event{static_cast<int32_t>(e.action), e.addr, e.size_bytes, e.stream, e.time_us};
    }
    *count = events.size();
  });
}

int gmlake_get_segments(int device, gmlake_segment* segments, size_t segment_capacity, size_t* segment_count,
                        gmlake_block* blocks, size_t block_capacity, size_t* block_count) {
  return guarded_status([&] {
    if (segment_count == nullptr || block_count == nullptr || (segments == nullptr && segment_capacity > 0) ||
        (blocks == nullptr && block_capacity > 0)) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_get_segments: a NULL count, or a NULL array with a capacity");
    }
    std::vector<SegmentInfo> found;
    std::vector<PoolKey> owners;  // found[i]'s pool
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      for_each_pool(pool, [&](Pool& p, PoolKey key) {
        std::vector<SegmentInfo> segments = p.segments();
        owners.insert(owners.end(), segments.size(), key);
        found.insert(found.end(), std::make_move_iterator(segments.begin()), std::make_move_iterator(segments.end()));
      });
      return 0;
    });
    std::size_t total_blocks = 0;
    for (const SegmentInfo& segment : found) total_blocks += segment.blocks.size();
    *segment_count = found.size();
    *block_count = total_blocks;
    if (found.size() > segment_capacity || total_blocks > block_capacity) return;
    std::size_t b = 0;
    for (std::size_t i = 0; i < found.size(); ++i) {
      const SegmentInfo& s = found[i];
      segments[i] = gmlake_segment{s.address,   s.size_bytes,          s.stream,
                                   s.type == SegmentType::kLarge ? 1 : 0, s.is_expandable ? 1 : 0,
                                   b,           s.blocks.size(),       s.chunks.size(),
                                   gmlake_pool_id{owners[i].first, owners[i].second}};
      for (const SegmentBlock& block : s.blocks) {
        blocks[b++] = gmlake_block{block.address, block.size_bytes, block.requested_bytes,
                                   static_cast<int32_t>(block.state)};
      }
    }
  });
}

int gmlake_pool_create(int device, gmlake_pool_id pool_id) {
  return guarded_status([&] {
    if (pool_id.first == 0 && pool_id.second == 0) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_create: pool id (0, 0) is the main pool's");
    }
    with_pool(device, OnUninitialized::kInitialize, kShutDownMessage, [&](DevicePool& pool) {
      if (backend_base_name(pool_of(pool, device).config().backend) == "sim") {
        // Each sim backend counts addresses from the same base: two pools could hand out the same address.
        throw Error(ErrorCode::kConfig, "gmlake_pool_create: private pools need a backend with real addresses "
                                        "(host or cuda), not sim");
      }
      ++private_of(pool, device, {pool_id.first, pool_id.second}).use_count;
      return 0;
    });
  });
}

int gmlake_pool_release(int device, gmlake_pool_id pool_id) {
  return guarded_status([&] {
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      PrivatePool& p = existing_private(pool, pool_id, device, "gmlake_pool_release");
      if (p.use_count <= 0) throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_release: released more than made");
      --p.use_count;
      collect_released(pool);
      return 0;
    });
  });
}

int gmlake_pool_use_count(int device, gmlake_pool_id pool_id, int64_t* count) {
  return guarded_status([&] {
    if (count == nullptr) throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_use_count: count is NULL");
    *count = with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) -> std::int64_t {
      const auto it = pool.privates.find({pool_id.first, pool_id.second});
      return it == pool.privates.end() ? 0 : it->second.use_count;
    });
  });
}

void* gmlake_pool_malloc(size_t size_bytes, int device, uint64_t stream, gmlake_pool_id pool_id) {
  return guarded(static_cast<void*>(nullptr), [&]() -> void* {
    check_size(size_bytes, "gmlake_pool_malloc");
    return with_pool(device, OnUninitialized::kInitialize, kShutDownMessage, [&](DevicePool& pool) {
      return existing_private(pool, pool_id, device, "gmlake_pool_malloc").pool->allocate(size_bytes, stream);
    });
  });
}

int gmlake_pool_empty_cache(int device, gmlake_pool_id pool_id) {
  return guarded_status([&] {
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      const auto it = pool.privates.find({pool_id.first, pool_id.second});
      if (it != pool.privates.end()) it->second.pool->empty_cache();  // a pool gone has nothing cached
      return 0;
    });
  });
}

int gmlake_pool_blocks(int device, gmlake_pool_id pool_id, gmlake_block* blocks, size_t capacity, size_t* count) {
  return guarded_status([&] {
    if (count == nullptr || (blocks == nullptr && capacity > 0)) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_blocks: count is NULL, or blocks is NULL with a capacity");
    }
    const std::vector<BlockInfo> live = with_pool(device, OnUninitialized::kProceed, kShutDownMessage,
        [&](DevicePool& pool) {
          if (pool_id.first == 0 && pool_id.second == 0) {
            return pool.pool ? pool.pool->blocks() : std::vector<BlockInfo>{};
          }
          return existing_private(pool, pool_id, device, "gmlake_pool_blocks").pool->blocks();
        });
    *count = live.size();
    if (live.size() > capacity) return;
    for (std::size_t i = 0; i < live.size(); ++i) {
      blocks[i] = gmlake_block{live[i].address, live[i].size_bytes, live[i].requested_bytes,
                               live[i].pending_free ? 1 : 0};
    }
  });
}

int gmlake_pool_restore(int device, gmlake_pool_id pool_id, const gmlake_block* blocks, size_t count) {
  return guarded_status([&] {
    if (blocks == nullptr && count > 0) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_restore: blocks is NULL with a count");
    }
    std::vector<BlockInfo> wanted;
    wanted.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      if (blocks[i].state != 0) {
        throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_restore: block " + std::to_string(i) + " has state " +
                                                     std::to_string(blocks[i].state) + ": only allocated blocks (0)");
      }
      wanted.push_back(BlockInfo{blocks[i].address, blocks[i].size_bytes, blocks[i].requested_bytes, 0, false});
    }
    with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      if (pool_id.first == 0 && pool_id.second == 0) {
        throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_restore: pool id (0, 0) is the main pool's: only "
                                                 "private pools are restored");
      }
      existing_private(pool, pool_id, device, "gmlake_pool_restore").pool->restore(std::move(wanted));
      collect_released(pool);
      return 0;
    });
  });
}

const char* gmlake_stat_names(void) {
  static const std::string names = [] {
    std::string text;
#define GMLAKE_C_NAME(kind) [&](const char* name) { text += (text.empty() ? "" : ",") + std::string(name) + ":" kind; }
#define GMLAKE_C_GAUGE_NAME(name) GMLAKE_C_NAME("gauge")(#name);
#define GMLAKE_C_COUNTER_NAME(name) GMLAKE_C_NAME("counter")(#name);
    GMLAKE_GAUGE_FIELDS(GMLAKE_C_GAUGE_NAME)
    GMLAKE_COUNTER_FIELDS(GMLAKE_C_COUNTER_NAME)
#undef GMLAKE_C_GAUGE_NAME
#undef GMLAKE_C_COUNTER_NAME
#undef GMLAKE_C_NAME
    return text;
  }();
  return names.c_str();
}

const char* gmlake_config_table(void) {
  static const std::string table = [] {
    std::string text;
    for (const ConfigFieldInfo& f : config_fields()) {
      text += std::string(f.name) + "\t" + f.type + "\t" + f.default_value + "\t" + f.unit + "\t" + f.description + "\n";
    }
    return text;
  }();
  return table.c_str();
}

uint64_t gmlake_ignored_frees(void) { return runtime().ignored_frees.load(std::memory_order_relaxed); }

int gmlake_last_error_code(void) { return t_last_error.code; }

const char* gmlake_last_error(void) { return t_last_error.message; }

}  // extern "C"

// --- IPC (gmlake.h: gmlake_ipc_export / gmlake_ipc_import / gmlake_ipc_close; include/gmlake/ipc.h). Exports go
// through the device's pool under its mutex. Imports live apart from the pools, each device's behind a mutex of
// its own, through a backend of their own (made like the pool's from the session's backend and chunk_bytes), and
// outlive gmlake_shutdown: an import stays mapped until gmlake_ipc_close.
namespace gmlake::capi {
namespace {

struct DeviceImports {
  std::mutex mutex;
  std::string backend_name;           // guarded by mutex: what backend and imports were made for
  std::uint64_t granularity_bytes = 0;
  std::unique_ptr<Backend> backend;   // guarded by mutex
  std::unique_ptr<IpcImports> imports;
};

std::array<DeviceImports, kDevices>& device_imports() {
  static auto* const table = new std::array<DeviceImports, kDevices>();  // never destroyed (see the file comment)
  return *table;
}

}  // namespace
}  // namespace gmlake::capi

extern "C" {

int gmlake_ipc_export(void* ptr, int device, char* handle_out, size_t* handle_bytes, size_t* offset_bytes) {
  return guarded_status([&] {
    if (handle_bytes == nullptr || offset_bytes == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_ipc_export: handle_bytes or offset_bytes is NULL");
    }
    const IpcExport exported = with_pool(device, OnUninitialized::kProceed, kShutDownMessage, [&](DevicePool& pool) {
      return ipc_export(existing_pool(pool, device, "gmlake_ipc_export"), ptr);
    });
    const std::size_t capacity = *handle_bytes;
    *handle_bytes = exported.handle.size();
    *offset_bytes = exported.offset_bytes;
    if (handle_out == nullptr) return;  // the size asked for
    if (capacity < exported.handle.size()) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_ipc_export: the handle needs " +
                                                   std::to_string(exported.handle.size()) + " bytes, the buffer has " +
                                                   std::to_string(capacity) + " (*handle_bytes now says how many)");
    }
    std::memcpy(handle_out, exported.handle.data(), exported.handle.size());
  });
}

int gmlake_ipc_import(const char* handle, size_t handle_bytes, int device, void** ptr_out) {
  return guarded_status([&] {
    if (handle == nullptr || ptr_out == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_ipc_import: handle or ptr_out is NULL");
    }
    *ptr_out = nullptr;
    const Config config = with_pool(device, OnUninitialized::kInitialize, kShutDownMessage, [&](DevicePool&) {
      return runtime().session.load(std::memory_order_acquire)->config;
    });
    const std::string name = config.backend == "cuda" ? "cuda:" + std::to_string(device) : config.backend;
    DeviceImports& entry = device_imports()[static_cast<std::size_t>(device)];
    std::lock_guard lock(entry.mutex);
    if (!entry.imports || (entry.imports->open_count() == 0 &&
                           (entry.backend_name != name || entry.granularity_bytes != config.chunk_bytes))) {
      entry.imports.reset();
      entry.backend = make_backend(name, config.chunk_bytes);
      entry.imports = std::make_unique<IpcImports>(*entry.backend);
      entry.backend_name = name;
      entry.granularity_bytes = config.chunk_bytes;
    }
    *ptr_out = entry.imports->open(std::string_view(handle, handle_bytes));
  });
}

int gmlake_ipc_close(void* ptr, int device) {
  return guarded_status([&] {
    check_device(device);
    DeviceImports& entry = device_imports()[static_cast<std::size_t>(device)];
    std::lock_guard lock(entry.mutex);
    if (!entry.imports) {
      throw Error(ErrorCode::kInvalidPointer, "gmlake_ipc_close: nothing was ever imported on device " +
                                                  std::to_string(device));
    }
    entry.imports->close(ptr);
  });
}

}  // extern "C"
