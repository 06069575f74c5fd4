// std::pmr::memory_resource adapters over the host classic pools, so that std::pmr containers
// (std::pmr::vector, std::pmr::unordered_map, ...) take their memory from a gmlake pool:
//
//   BlockPoolResource<Pool>   Pool = BlockPool or ConcurrentBlockPool. Requests that fit a block (bytes <=
//                             block_bytes, alignment <= the pool's alignment_bytes) take one; the others go
//                             to an upstream resource (default: std::pmr::get_default_resource()), since
//                             containers also ask for sizes no block serves (hash buckets, vector growth).
//   BumpAllocatorResource<Allocator>
//                             Allocator = BumpAllocator or ConcurrentBumpAllocator. deallocate does nothing
//                             (like std::pmr::monotonic_buffer_resource): the allocator's reset() frees everything.
//   LayoutCacheResource       one device of a LayoutCache: allocate(bytes, alignment) is allocate({bytes,
//                             alignment}, device); deallocate releases the block (it goes into the cache).
//
// Each adapter holds a reference to its pool, which must outlive it and every container using it. A request
// of 0 bytes is served as 1 byte (a memory_resource must return a usable pointer). Errors are the pools'
// own: gmlake::OutOfMemoryError when the pool has no room (it is a std::runtime_error, not a
// std::bad_alloc), gmlake::Error(kInvalidArgument) for an alignment the pool cannot give, and
// gmlake::Error(kInvalidPointer) from deallocate of a pointer the pool does not own (a programming error;
// containers call deallocate from destructors, where it terminates).
//
// Construction throws Error(kInvalidArgument) when the pool's backend is not host-accessible: containers
// touch their memory on the CPU. is_equal: two adapters are equal when they are of the same type over the
// same pool (and device, and an equal upstream), so memory from one may be given back through the other.
//
// Thread safety: that of the pool (the ConcurrentBlockPool, ConcurrentBumpAllocator and LayoutCache adapters may
// be shared by threads; std::pmr containers themselves are not thread-safe).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory_resource>

#include "gmlake/backend.h"
#include "gmlake/classic/layout_cache.h"

namespace gmlake::classic {

// Throws Error(kInvalidArgument) naming `adapter` unless `backend` is host-accessible.
void require_host_memory(const Backend& backend, const char* adapter);

template <typename Pool>
class BlockPoolResource final : public std::pmr::memory_resource {
 public:
  explicit BlockPoolResource(Pool& pool, std::pmr::memory_resource* upstream = std::pmr::get_default_resource())
      : pool_(pool), upstream_(upstream) {
    require_host_memory(pool.backend(), "BlockPoolResource");
  }
  Pool& pool() const { return pool_; }
  std::pmr::memory_resource* upstream() const { return upstream_; }

 private:
  bool fits(std::size_t bytes, std::size_t alignment) const {
    return bytes <= pool_.block_bytes() && alignment <= pool_.alignment_bytes();
  }
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    return fits(bytes, alignment) ? pool_.allocate() : upstream_->allocate(bytes, alignment);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) override {
    if (fits(bytes, alignment)) {
      pool_.deallocate(ptr);
    } else {
      upstream_->deallocate(ptr, bytes, alignment);
    }
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    const auto* o = dynamic_cast<const BlockPoolResource*>(&other);
    return o != nullptr && &o->pool_ == &pool_ && upstream_->is_equal(*o->upstream_);
  }

  Pool& pool_;
  std::pmr::memory_resource* upstream_;
};

template <typename Allocator>
class BumpAllocatorResource final : public std::pmr::memory_resource {
 public:
  explicit BumpAllocatorResource(Allocator& allocator) : allocator_(allocator) {
    require_host_memory(allocator.backend(), "BumpAllocatorResource");
  }
  Allocator& allocator() const { return allocator_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    return allocator_.allocate(std::max<std::size_t>(bytes, 1), alignment);
  }
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    const auto* o = dynamic_cast<const BumpAllocatorResource*>(&other);
    return o != nullptr && &o->allocator_ == &allocator_;
  }

  Allocator& allocator_;
};

class LayoutCacheResource final : public std::pmr::memory_resource {
 public:
  // Throws Error(kInvalidArgument) when `device` is out of range or not host-accessible.
  explicit LayoutCacheResource(LayoutCache& cache, LayoutCache::DeviceIndex device = 0)
      : cache_(cache), device_(device) {
    require_host_memory(cache.backend(device), "LayoutCacheResource");
  }
  LayoutCache& cache() const { return cache_; }
  LayoutCache::DeviceIndex device() const { return device_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    return cache_.allocate({std::max<std::size_t>(bytes, 1), alignment}, device_);
  }
  void do_deallocate(void* ptr, std::size_t, std::size_t) override { cache_.release(ptr, device_); }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    const auto* o = dynamic_cast<const LayoutCacheResource*>(&other);
    return o != nullptr && &o->cache_ == &cache_ && o->device_ == device_;
  }

  LayoutCache& cache_;
  LayoutCache::DeviceIndex device_;
};

}  // namespace gmlake::classic
