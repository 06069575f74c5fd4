// PyTorch's private pools with gmlake: torch.cuda.MemPool / use_mem_pool, torch.cuda.graph(pool=...) and the
// pools of CUDA graph captures (c10's createOrIncrefPool, beginAllocateToPool, endAllocateToPool, releasePool,
// getPoolUseCount, checkPoolLiveAllocations, emptyCache(pool), getCheckpointState, setCheckpointPoolState), served
// by the library's private pools (gmlake_pool_*: each its own pool on the device, running the `caching` policy so
// that no block moves and no segment is unmapped while the pool lives, as a captured graph replays into the
// addresses it captured; gmlake_pool_restore puts one back to a checkpoint).
//
// Routing: between beginAllocateToPool(device, pool, filter) and endAllocateToPool(device, pool), an allocation
// on `device` whose stream passes `filter` comes from `pool` (the latest such route first, as PyTorch's
// captures_underway). No route, no cost: one relaxed atomic load per allocation.
//
// Capture: an allocation into a private pool may create and map memory while a stream captures a graph; the
// driver's VMM calls are not stream work, and the call runs under cudaStreamCaptureModeRelaxed (as PyTorch's
// cudaMalloc during capture) so that a global-mode capture elsewhere does not refuse it.
//
// Thread safety: every member may be called from any thread; one mutex guards the routes.
// Part of the extension's one translation unit (torch_allocator.cpp includes it).
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <vector>

#include "c_api_errors.h"

namespace gmlake_torch {

using MempoolId = c10::cuda::MempoolId_t;

inline gmlake_pool_id pool_id_of(MempoolId id) { return gmlake_pool_id{id.first, id.second}; }

class PrivatePools {
 public:
  static PrivatePools& instance() {
    static auto* pools = new PrivatePools();  // never destroyed: frees may come at exit
    return *pools;
  }

  void create_or_incref(c10::DeviceIndex device, MempoolId id) {
    check(g_api.gmlake_pool_create(device, pool_id_of(id)), "pool_create");
  }
  void release(c10::DeviceIndex device, MempoolId id) {
    check(g_api.gmlake_pool_release(device, pool_id_of(id)), "pool_release");
  }
  int use_count(c10::DeviceIndex device, MempoolId id) {
    std::int64_t count = 0;
    check(g_api.gmlake_pool_use_count(device, pool_id_of(id), &count), "pool_use_count");
    return static_cast<int>(count);
  }
  void empty_cache(c10::DeviceIndex device, MempoolId id) {
    check(g_api.gmlake_pool_empty_cache(device, pool_id_of(id)), "pool_empty_cache");
  }

  // As PyTorch's, a route counts as a use of the pool (made here if new); releasePool ends that use.
  void begin_allocate_to(c10::DeviceIndex device, MempoolId id, std::function<bool(cudaStream_t)> filter) {
    create_or_incref(device, id);
    std::lock_guard lock(mutex_);
    routes_.push_back(Route{device, id, std::move(filter)});
    active_.store(static_cast<int>(routes_.size()), std::memory_order_release);
  }

  void end_allocate_to(c10::DeviceIndex device, MempoolId id) {
    std::lock_guard lock(mutex_);
    routes_.erase(std::remove_if(routes_.begin(), routes_.end(),
                                 [&](const Route& r) { return r.device == device && r.pool == id; }),
                  routes_.end());
    active_.store(static_cast<int>(routes_.size()), std::memory_order_release);
  }

  // The private pool an allocation on `device` and `stream` goes to now; nullopt for the device's main pool.
  std::optional<MempoolId> route(c10::DeviceIndex device, cudaStream_t stream) {
    if (active_.load(std::memory_order_acquire) == 0) return std::nullopt;
    std::lock_guard lock(mutex_);
    for (auto it = routes_.rbegin(); it != routes_.rend(); ++it) {
      if (it->device == device && (!it->filter || it->filter(stream))) return it->pool;
    }
    return std::nullopt;
  }

  // A block of `pool` (see the file comment on capture).
  void* allocate(std::size_t size_bytes, c10::DeviceIndex device, cudaStream_t stream, MempoolId pool) {
    void* ptr = try_allocate(size_bytes, device, stream, pool);
    if (ptr == nullptr && size_bytes != 0) raise_last_error("malloc in a private pool");
    return ptr;
  }

  // The pool's allocated blocks (gmlake_pool_blocks' state 0), in address order.
  std::vector<gmlake_block> allocated_blocks(c10::DeviceIndex device, MempoolId id) {
    std::vector<gmlake_block> blocks;
    std::size_t count = 0;
    for (;;) {
      check(g_api.gmlake_pool_blocks(device, pool_id_of(id), blocks.data(), blocks.size(), &count), "pool_blocks");
      if (count <= blocks.size()) break;
      blocks.resize(count + 16);
    }
    blocks.resize(count);
    blocks.erase(std::remove_if(blocks.begin(), blocks.end(), [](const gmlake_block& b) { return b.state != 0; }),
                 blocks.end());
    return blocks;
  }

  // MemPool(use_on_oom=...): whether `id` serves, as a last resort, allocations of the device's main pool that
  // ran out of memory (PyTorch: "used as a last resort if a memory allocation outside of the pool fails due to
  // Out Of Memory"). MemPool's destructor sets it back to false.
  void set_use_on_oom(c10::DeviceIndex device, MempoolId id, bool use_on_oom) {
    std::lock_guard lock(mutex_);
    oom_pools_.erase(std::remove_if(oom_pools_.begin(), oom_pools_.end(),
                                    [&](const std::pair<c10::DeviceIndex, MempoolId>& p) {
                                      return p.first == device && p.second == id;
                                    }),
                     oom_pools_.end());
    if (use_on_oom) oom_pools_.emplace_back(device, id);
    oom_count_.store(static_cast<int>(oom_pools_.size()), std::memory_order_release);
  }

  // A block from the first use_on_oom pool of `device` that has room (its cached blocks first, then new memory
  // if the device has any), or null when there is none. No pool, no cost: one atomic load.
  void* allocate_on_oom(std::size_t size_bytes, c10::DeviceIndex device, cudaStream_t stream) {
    if (oom_count_.load(std::memory_order_acquire) == 0) return nullptr;
    std::vector<MempoolId> pools;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [d, id] : oom_pools_) {
        if (d == device) pools.push_back(id);
      }
    }
    for (const MempoolId id : pools) {
      if (void* ptr = try_allocate(size_bytes, device, stream, id)) return ptr;
    }
    return nullptr;
  }

  // True when the pool's allocated blocks are exactly `expected` (cudagraph trees' check).
  bool live_allocations_are(c10::DeviceIndex device, MempoolId id, const std::unordered_set<void*>& expected) {
    const std::vector<gmlake_block> blocks = allocated_blocks(device, id);
    for (const gmlake_block& b : blocks) {
      if (expected.count(reinterpret_cast<void*>(b.address)) == 0) return false;
    }
    return blocks.size() == expected.size();
  }

  // setCheckpointPoolState: frees the pool's allocated blocks and makes `checkpoint`'s again at their addresses
  // (gmlake_pool_restore, all or nothing). Returns the blocks freed. The pool's other users are CUDA graph trees'
  // recordings on this thread: nothing allocates into it between the two calls.
  std::vector<gmlake_block> restore(c10::DeviceIndex device, MempoolId id,
                                    const std::vector<gmlake_block>& checkpoint) {
    std::vector<gmlake_block> freed = allocated_blocks(device, id);
    check(g_api.gmlake_pool_restore(device, pool_id_of(id), checkpoint.data(), checkpoint.size()),
          "setCheckpointPoolState");
    return freed;
  }

 private:
  // gmlake_pool_malloc under relaxed capture mode (file comment); null when it failed (gmlake_last_error says why).
  static void* try_allocate(std::size_t size_bytes, c10::DeviceIndex device, cudaStream_t stream, MempoolId pool) {
    c10::cuda::CUDAStreamCaptureModeGuard relaxed{cudaStreamCaptureModeRelaxed};
    return g_api.gmlake_pool_malloc(size_bytes, device, reinterpret_cast<std::uintptr_t>(stream), pool_id_of(pool));
  }

  std::vector<std::pair<c10::DeviceIndex, MempoolId>> oom_pools_;  // guarded by mutex_: use_on_oom pools
  std::atomic<int> oom_count_{0};                                   // oom_pools_.size()
  struct Route {
    c10::DeviceIndex device;
    MempoolId pool;
    std::function<bool(cudaStream_t)> filter;
  };
  std::mutex mutex_;
  std::vector<Route> routes_;
  std::atomic<int> active_{0};
};

// What getCheckpointState returns: the pool's allocated blocks when the state was taken (address, size as placed,
// size requested); cudagraph trees keep it and hand it back to setCheckpointPoolState.
struct GmlakePoolState final : c10::cuda::CUDACachingAllocator::AllocatorState {
  c10::DeviceIndex device = 0;
  MempoolId pool{0, 0};
  std::vector<gmlake_block> blocks;
};

}  // namespace gmlake_torch
