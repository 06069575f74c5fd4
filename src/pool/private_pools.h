// PrivatePools: the private pools of one device (PyTorch's torch.cuda.MemPool and CUDA graph pools), by id. A
// private pool is a Pool of its own, alive while its use count is above 0 or it still holds blocks.
//
// Private pools run the `caching` policy (PyTorch's algorithm: blocks never move, a segment stays mapped until
// the pool goes, as a captured CUDA graph needs), keep their cached memory when memory runs out
// (release_on_oom false) and use no CUDA events (a capture cannot query them).
//
// Thread safety: none; DevicePools uses it under the device's lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "gmlake/config.h"
#include "gmlake/pool.h"

namespace gmlake {

// A pool's id: PyTorch's MempoolId_t. (0, 0) is the device's main pool, never a private one.
using PoolId = std::pair<std::uint64_t, std::uint64_t>;
inline constexpr PoolId kMainPoolId{0, 0};

class PrivatePools {
 public:
  // Adds a user to the private pool `id`, making it first (use count 0 before this call) from `main_config` as
  // above, on `device`, tracing `tracing_max_events` (Pool::set_tracing). Throws what Pool's constructor throws
  // (Error(kConfig), BackendError), nothing made.
  void add_user(PoolId id, const Config& main_config, int device, std::uint64_t tracing_max_events);
  // Removes a user; at 0 users the pool goes as soon as it holds no block. Throws Error(kInvalidArgument) naming
  // `call` and `device` for a pool that does not exist or has no user left, changing nothing.
  void remove_user(PoolId id, int device, const char* call);
  // The pool's number of users; 0 for a pool that does not exist.
  std::int64_t use_count(PoolId id) const;

  // The private pool `id`, or null when it does not exist.
  Pool* find(PoolId id);
  // The private pool `id`. Throws Error(kInvalidArgument) naming `call`, `device` and the id when it does not exist.
  Pool& get(PoolId id, int device, const char* call);
  // The private pool holding the live block at `ptr`, or null. One Pool::find_block per pool: O(pools log blocks).
  Pool* owner_of(const void* ptr);

  // Destroys the pools with no user that hold no block any more (their memory back to the backend).
  void collect_released();
  // Pool::empty_cache of every pool without users (a pool in use keeps its memory: a graph may use it).
  void empty_unused_caches();
  // Destroys every pool, blocks still live included. Never throws (teardown.h).
  void clear() { pools_.clear(); }
  bool empty() const { return pools_.empty(); }

  // f(Pool&, PoolId) for every pool, by id.
  template <typename F>
  void for_each(F&& f) {
    for (auto& [id, entry] : pools_) f(*entry.pool, id);
  }

 private:
  struct Entry {
    std::unique_ptr<Pool> pool;
    std::int64_t use_count = 0;
  };
  std::map<PoolId, Entry> pools_;
};

}  // namespace gmlake
