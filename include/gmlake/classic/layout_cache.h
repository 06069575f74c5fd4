// LayoutCache: a caching allocator keyed by layout (size + alignment), for one or several devices, with
// reference counting and a bounded LRU cache of freed memory.
//
// allocate(layout, device) returns a block with use count 1: a cached block of exactly that layout on that
// device when there is one (the most recently freed: a cache hit, no backend call), else a new one from the
// device's Backend (a miss: reserve + create + map + set_access of the layout's size rounded up to the
// backend's granularity, so every block is its own region and goes back to the backend whole). retain()
// adds a user; release() drops one, and when the count reaches zero the block goes into the cache (it stays
// mapped). The cache is bounded by max_cached_bytes (region bytes) and max_cached_entries per device; past
// either bound, the least recently cached blocks of that device are given back to the backend (evictions).
// A block larger than max_cached_bytes is given back at once. When the backend is out of memory on a miss,
// the device's whole cache is given back and the allocation retried once (num_alloc_retries), as PyTorch does.
//
// Sizes and alignment: size_bytes >= 1 (allocate of size 0 returns nullptr; retain/release of nullptr do
// nothing); alignment_bytes a power of two up to the backend's granularity (default alignof(max_align_t)).
// Every block starts on a granularity boundary, so any such alignment holds. Because a block is at least
// one granule (2 MiB on CUDA devices), the cache suits tensor-sized layouts; small objects belong in a
// BlockPool (or a host backend with page granularity).
//
// Devices: device i is devices[i], a distinct Backend that must outlive the cache. Pointers are looked up per
// device, so two devices may hand out the same address (sim backends do).
//
// Errors (the cache is unchanged after any of them, except that an out-of-memory error has first given the
// device's cached blocks back):
//   - bad layout or device index, bad device list: Error(kInvalidArgument);
//   - the backend has no memory even after emptying the device's cache: OutOfMemoryError with requested =
//     layout.size_bytes, reserved = the device's reserved bytes (live + cached), allocated = its live region
//     bytes, cap = 0 (the limit is the backend's; its message is in the reason);
//   - retain/release of a pointer that is not a live block's start on that device (never allocated, already
//     released to zero, interior): Error(kInvalidPointer), counted in invalid_frees.
//
// Stats per device (LayoutCacheStats): in `pool` (gmlake::Stats) allocated_bytes = live blocks' region bytes,
// requested_bytes = live blocks' layout sizes, reserved_bytes = live + cached region bytes, num_allocs,
// num_frees (releases that reached zero), num_alloc_retries, num_ooms, invalid_frees, evictions (cached
// blocks given back to honour a bound, by clear() or by an out-of-memory retry), chunks_created,
// chunks_released, backend_calls; beside it hits, misses, cached_bytes, cached_entries, live_blocks.
//
// clear() gives every cached block of every device back to its backend; live blocks stay valid. The
// destructor gives back everything, live blocks included: nothing leaks at exit.
//
// Thread safety: every member may be called from any thread at once (one mutex per device; calls on
// different devices do not contend), except the destructor. Each Backend is called only under its device's
// mutex; it must not be used by anything else meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/stats.h"
#include "gmlake/units.h"

namespace gmlake::classic {

struct Layout {
  std::uint64_t size_bytes = 0;
  std::uint64_t alignment_bytes = alignof(std::max_align_t);
  friend bool operator==(const Layout&, const Layout&) = default;
};

struct LayoutCacheOptions {
  std::uint64_t max_cached_bytes = kGiB;    // per device, in region bytes; 0 disables the cache
  std::uint64_t max_cached_entries = 1024;  // per device; 0 disables the cache
};

struct LayoutCacheStats {
  Stats pool;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t cached_bytes = 0;
  std::uint64_t cached_entries = 0;
  std::uint64_t live_blocks = 0;
};

class LayoutCache {
 public:
  using DeviceIndex = std::size_t;

  // One cache per device in `devices` (non-empty, no nullptr, no Backend twice: else Error(kInvalidArgument)).
  explicit LayoutCache(const std::vector<Backend*>& devices, const LayoutCacheOptions& options = {});
  // One device.
  explicit LayoutCache(Backend& device, const LayoutCacheOptions& options = {});
  LayoutCache(const LayoutCache&) = delete;
  LayoutCache& operator=(const LayoutCache&) = delete;
  ~LayoutCache();

  // A block of layout.size_bytes aligned to layout.alignment_bytes on `device`, with use count 1. O(1) on a
  // hit (two hash lookups under the device's mutex). Throws as described above.
  void* allocate(const Layout& layout, DeviceIndex device = 0);
  // Adds one to the block's use count. Throws Error(kInvalidPointer) unless ptr is a live block on device.
  void retain(void* ptr, DeviceIndex device = 0);
  // Drops one from the use count; at zero the block is cached (or given back when it cannot be cached).
  // Throws Error(kInvalidPointer) unless ptr is a live block on device.
  void release(void* ptr, DeviceIndex device = 0);
  // The block's use count; 0 when ptr is not a live block on device.
  std::uint64_t use_count(const void* ptr, DeviceIndex device = 0) const;
  // Gives every cached block of every device back to its backend.
  void clear();

  std::size_t device_count() const { return shards_.size(); }
  const Backend& backend(DeviceIndex device = 0) const;
  LayoutCacheStats stats(DeviceIndex device = 0) const;
  // Checks every device's lists, indexes and stats against a recount; throws std::logic_error. For tests.
  void check_invariants() const;

 private:
  class Shard;
  Shard& shard(DeviceIndex device) const;

  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace gmlake::classic
