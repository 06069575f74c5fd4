// DevicePool: the host side of allocation inside kernels. It makes a device pool out of gmlake-managed memory
// (two GrowableBuffers over a Backend that gives device memory, e.g. make_backend("cuda", kPageBytes): one
// for the data slabs, one for the metadata), grows it between launches without moving a byte, and reads its
// statistics. Kernels allocate from it through view() (pool.cuh). Include from CUDA sources (nvcc); link the
// CUDA runtime and gmlake_classic, and for dynamic parallelism build with -rdc=true and link cudadevrt.
//
//   auto backend = gmlake::make_backend("cuda", gmlake::kPageBytes);
//   gmlake::device::DevicePool pool(*backend, {.initial_bytes = 256 * gmlake::kMiB, .max_bytes = 4 * gmlake::kGiB});
//   my_kernel<<<blocks, threads>>>(pool.view());
//   cudaDeviceSynchronize();
//   pool.grow(512 * gmlake::kMiB);                       // between launches only
//   gmlake::device::DevicePoolStats s = pool.stats();   // counters and slab census
//
// Sizes are bytes. Capacity is a whole number of slabs (kSlabBytes, 1 MiB), rounded up to the backend's
// granularity (2 MiB for CUDA). Metadata costs kBitmapBytes (8 KiB) + 8 B per slab (0.8 %), plus the header.
//
// Layout, algorithm, invariants: pool_geometry.h and pool.cuh; docs/design.md ("The device pool").
//
// Thread safety: the host functions are not synchronized with one another (one host thread at a time), and
// grow() must not run while a kernel uses the pool. stats() and check_invariants() wait for the device
// (cudaDeviceSynchronize) and read a consistent picture only when no kernel is using the pool.
//
// Errors: a CUDA runtime call that fails throws BackendError(call, message); a backend whose memory is not
// device memory throws Error(kInvalidArgument); growing past max_bytes, or past the device's memory, throws
// OutOfMemoryError (from GrowableBuffer), and the pool is then unchanged.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/device/pool.cuh"
#include "gmlake/device/pool_geometry.h"
#include "gmlake/error.h"
#include "gmlake/classic/growable_buffer.h"
#include "gmlake/units.h"

namespace gmlake::device {

struct DevicePoolOptions {
  std::uint64_t initial_bytes = 64 * kMiB;  // data bytes mapped at creation (0 allowed: an empty pool)
  std::uint64_t max_bytes = 16 * kGiB;      // the most data bytes grow() can reach: virtual address space only
};

// Counters since creation (summed over their stripes), and a census of the slabs. The census is exact when no
// kernel uses the pool; then live_allocations() == allocs - frees (checked by check_invariants()).
struct DevicePoolStats {
  std::uint64_t allocs = 0;          // allocations that returned memory
  std::uint64_t frees = 0;           // frees of live allocations
  std::uint64_t failed_allocs = 0;   // allocations that returned null
  std::uint64_t double_frees = 0;    // frees of blocks already free (pool.cuh: Errors)
  std::uint64_t foreign_frees = 0;   // frees of pointers the pool never returned
  std::uint64_t slabs_claimed = 0;   // free slabs taken by a class or a large run
  std::uint64_t slabs_released = 0;  // slabs given back to the free state
  std::uint32_t num_slabs = 0;       // usable slabs; capacity_bytes = num_slabs * kSlabBytes
  std::uint32_t free_slabs = 0;
  std::uint32_t large_slabs = 0;     // heads and bodies
  std::uint32_t large_runs = 0;      // live large allocations
  std::uint32_t small_slabs[kNumClasses] = {};
  std::uint64_t live_blocks[kNumClasses] = {};  // count of the class's slabs' words

  std::uint64_t capacity_bytes() const { return std::uint64_t{num_slabs} * kSlabBytes; }
  std::uint64_t live_allocations() const {
    std::uint64_t n = large_runs;
    for (std::uint64_t b : live_blocks) n += b;
    return n;
  }
  // Bytes in live allocations as the pool sees them (block sizes, whole slabs for large runs).
  std::uint64_t live_block_bytes() const;
};

class DevicePool {
 public:
  // Reserves address space for max_bytes of data (and its metadata) on `backend`, maps initial_bytes, and
  // zeroes the metadata. `backend` must give device memory and outlive the pool. Throws as above.
  DevicePool(Backend& backend, const DevicePoolOptions& options = {});
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;
  // Unmaps and releases the pool's memory. No kernel may use the pool any more (synchronize first): every
  // pointer it handed out becomes invalid.
  ~DevicePool() = default;

  // What kernels take (by value). The same for the pool's whole life, also across grow().
  DevicePoolView view() const { return view_; }
  std::uint64_t capacity_bytes() const { return std::uint64_t{num_slabs_} * kSlabBytes; }
  std::uint64_t max_bytes() const { return std::uint64_t{max_slabs_} * kSlabBytes; }

  // Maps data and metadata until capacity_bytes() >= capacity_bytes (rounded up to the backend's granularity),
  // zeroes the new metadata and publishes the new slabs to kernels launched afterwards. Waits for the device
  // first; no kernel may use the pool meanwhile. Never shrinks.
  void grow(std::uint64_t capacity_bytes);

  DevicePoolStats stats() const;
  // Reads every state word and bitmap and checks the invariants of pool_geometry.h; throws std::logic_error
  // naming the first one broken. Only while no kernel uses the pool.
  void check_invariants() const;

 private:
  void publish();

  Backend& backend_;
  std::uint32_t max_slabs_ = 0;
  std::uint32_t num_slabs_ = 0;
  classic::GrowableBuffer data_;
  classic::GrowableBuffer meta_;
  DevicePoolView view_;
};

// ---- implementation (header-only: included by CUDA sources) ----

namespace detail {
inline void cuda_check(const char* call, cudaError_t e) {
  if (e != cudaSuccess) throw BackendError(call, std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")");
}
inline std::uint32_t slabs_for(const Backend& backend, std::uint64_t bytes) {
  const std::uint64_t slabs = round_up(bytes, std::max<std::uint64_t>(backend.granularity_bytes(), kSlabBytes)) / kSlabBytes;
  if (slabs >= 0xFFFFFFF0u) throw Error(ErrorCode::kInvalidArgument, "DevicePool: more than 2^32 slabs");
  return static_cast<std::uint32_t>(slabs);
}
}  // namespace detail

inline std::uint64_t DevicePoolStats::live_block_bytes() const {
  std::uint64_t bytes = 0;
  for (unsigned c = 0; c < kNumClasses; ++c) bytes += live_blocks[c] * class_bytes(c);
  return bytes + std::uint64_t{large_slabs} * kSlabBytes;
}

inline DevicePool::DevicePool(Backend& backend, const DevicePoolOptions& options)
    : backend_(backend),
      max_slabs_(detail::slabs_for(backend, std::max(options.max_bytes, options.initial_bytes))),
      data_(backend, {.max_bytes = std::uint64_t{max_slabs_} * kSlabBytes}),
      meta_(backend, {.max_bytes = metadata_bytes(max_slabs_, max_slabs_)}) {
  const std::uint64_t prefix = bitmaps_offset_bytes(max_slabs_);
  meta_.resize(prefix);
  char* meta = static_cast<char*>(meta_.data());
  cudaPointerAttributes attributes{};
  const cudaError_t e = cudaPointerGetAttributes(&attributes, meta);
  if (e != cudaSuccess || attributes.type != cudaMemoryTypeDevice) {
    (void)cudaGetLastError();
    throw Error(ErrorCode::kInvalidArgument, "DevicePool: the backend's memory is not device memory (use a cuda backend)");
  }
  detail::cuda_check("cudaMemset", cudaMemset(meta, 0, prefix));
  view_.header = reinterpret_cast<DevicePoolHeader*>(meta);
  view_.words = reinterpret_cast<unsigned long long*>(meta + kWordsOffsetBytes);
  view_.bitmaps = reinterpret_cast<std::uint32_t*>(meta + prefix);
  view_.data = static_cast<char*>(data_.data());
  publish();
  grow(options.initial_bytes);
}

inline void DevicePool::publish() {
  const std::uint32_t sizes[2] = {num_slabs_, max_slabs_};
  detail::cuda_check("cudaMemcpy", cudaMemcpy(view_.header, sizes, sizeof(sizes), cudaMemcpyHostToDevice));
  detail::cuda_check("cudaDeviceSynchronize", cudaDeviceSynchronize());
}

inline void DevicePool::grow(std::uint64_t capacity_bytes) {
  const std::uint32_t wanted = detail::slabs_for(backend_, capacity_bytes);
  if (wanted <= num_slabs_) return;
  detail::cuda_check("cudaDeviceSynchronize", cudaDeviceSynchronize());
  if (wanted > max_slabs_) {
    throw OutOfMemoryError(std::uint64_t{wanted} * kSlabBytes, this->capacity_bytes(), 0, max_bytes(),
                           "device pool: past its max_bytes");
  }
  const std::uint64_t meta_before = meta_.size_bytes();
  data_.resize(std::uint64_t{wanted} * kSlabBytes);
  try {
    meta_.resize(metadata_bytes(max_slabs_, wanted));
  } catch (...) {
    data_.resize(std::uint64_t{num_slabs_} * kSlabBytes);
    data_.shrink_to_fit();
    throw;
  }
  char* meta = static_cast<char*>(meta_.data());
  detail::cuda_check("cudaMemset", cudaMemset(meta + meta_before, 0, meta_.size_bytes() - meta_before));
  num_slabs_ = wanted;
  publish();
}

inline DevicePoolStats DevicePool::stats() const {
  detail::cuda_check("cudaDeviceSynchronize", cudaDeviceSynchronize());
  DevicePoolHeader header;
  detail::cuda_check("cudaMemcpy", cudaMemcpy(&header, view_.header, sizeof(header), cudaMemcpyDeviceToHost));
  std::vector<unsigned long long> words(num_slabs_);
  if (num_slabs_ != 0) {
    detail::cuda_check("cudaMemcpy", cudaMemcpy(words.data(), view_.words, words.size() * sizeof(words[0]),
                                                cudaMemcpyDeviceToHost));
  }
  DevicePoolStats s;
  std::uint64_t* counters[kNumCounters] = {&s.allocs, &s.frees, &s.failed_allocs, &s.double_frees,
                                            &s.foreign_frees, &s.slabs_claimed, &s.slabs_released};
  for (unsigned stripe = 0; stripe < kCounterStripes; ++stripe) {
    for (unsigned c = 0; c < kNumCounters; ++c) *counters[c] += header.counters[stripe][c];
  }
  s.num_slabs = num_slabs_;
  for (unsigned long long w : words) {
    const std::uint32_t state = state_of(w);
    if (state == kStateFree) {
      ++s.free_slabs;
    } else if (is_small_state(state)) {
      ++s.small_slabs[state - 1];
      s.live_blocks[state - 1] += count_of(w);
    } else {
      ++s.large_slabs;
      if (state == kStateLargeHead) ++s.large_runs;
    }
  }
  return s;
}

inline void DevicePool::check_invariants() const {
  const DevicePoolStats s = stats();
  std::vector<unsigned long long> words(num_slabs_);
  std::vector<std::uint32_t> bitmaps(std::uint64_t{num_slabs_} * kBitmapWords);
  if (num_slabs_ != 0) {
    detail::cuda_check("cudaMemcpy", cudaMemcpy(words.data(), view_.words, words.size() * sizeof(words[0]),
                                                cudaMemcpyDeviceToHost));
    detail::cuda_check("cudaMemcpy", cudaMemcpy(bitmaps.data(), view_.bitmaps, bitmaps.size() * sizeof(bitmaps[0]),
                                                cudaMemcpyDeviceToHost));
  }
  auto fail = [](std::uint32_t slab, const std::string& what) {
    throw std::logic_error("DevicePool invariant, slab " + std::to_string(slab) + ": " + what);
  };
  std::uint32_t body_left = 0;  // slabs still owed to the last large head's run
  for (std::uint32_t slab = 0; slab < num_slabs_; ++slab) {
    const unsigned long long w = words[slab];
    const std::uint32_t* bm = &bitmaps[std::uint64_t{slab} * kBitmapWords];
    std::uint64_t bits = 0;
    for (std::uint32_t i = 0; i < kBitmapWords; ++i) bits += static_cast<std::uint64_t>(__builtin_popcount(bm[i]));
    const std::uint32_t state = state_of(w);
    if (body_left != 0 && state != kStateLargeBody) fail(slab, "a large run is cut short");
    if (state == kStateFree) {
      if (w != 0) fail(slab, "free slab with count " + std::to_string(count_of(w)));
      if (bits != 0) fail(slab, "free slab with " + std::to_string(bits) + " bits set");
    } else if (is_small_state(state)) {
      const unsigned cls = state - 1;
      if (count_of(w) != bits) {
        fail(slab, "count " + std::to_string(count_of(w)) + " != bits " + std::to_string(bits));
      }
      if (bits > blocks_per_slab(cls)) fail(slab, "more bits than blocks");
      for (std::uint32_t i = 0; i < kBitmapWords; ++i) {
        if ((bm[i] & ~valid_bits(cls, i)) != 0) fail(slab, "a bit past the class's blocks");
      }
    } else if (state == kStateLargeHead) {
      if (count_of(w) != 0) fail(slab, "large head with visitors");
      if (bm[0] == 0 || bits != static_cast<std::uint64_t>(__builtin_popcount(bm[0]))) fail(slab, "large head's bitmap");
      if (std::uint64_t{slab} + bm[0] > num_slabs_) fail(slab, "large run past the pool");
      body_left = bm[0] - 1;
    } else if (state == kStateLargeBody) {
      if (body_left == 0) fail(slab, "large body outside a run");
      if (w != make_word(kStateLargeBody, 0) || bits != 0) fail(slab, "large body with count or bits");
      --body_left;
    } else {
      fail(slab, "unknown state " + std::to_string(state));
    }
  }
  if (body_left != 0) fail(num_slabs_, "a large run is cut short at the end");
  if (s.allocs - s.frees != s.live_allocations()) {
    throw std::logic_error("DevicePool invariant: allocs - frees = " + std::to_string(s.allocs - s.frees) +
                           " but live allocations = " + std::to_string(s.live_allocations()));
  }
}

}  // namespace gmlake::device
