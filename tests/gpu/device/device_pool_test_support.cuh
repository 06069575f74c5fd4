// What the device pool's GPU tests, benchmark and example share: a skip when no CUDA device is present, a
// device array, a per-allocation pattern written and checked on the device, and the host-side overlap check.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gmlake/device/device_pool.cuh"

namespace gmlake::device::test {

// Why the tests cannot run here, or the empty string.
inline std::string cuda_unavailable() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return std::string("no usable CUDA device, GPU test skipped: ") + cudaGetErrorString(e);
  if (count == 0) return "no CUDA device, GPU test skipped";
  return {};
}

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A device array of T (test bookkeeping, from cudaMalloc: not pool memory), zeroed.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : n_(n) {
    check(cudaMalloc(&p_, n * sizeof(T) + 1), "cudaMalloc");
    check(cudaMemset(p_, 0, n * sizeof(T)), "cudaMemset");
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(p_); }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::vector<T> to_host() const {
    std::vector<T> v(n_);
    check(cudaDeviceSynchronize(), "kernel");
    check(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return v;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

__host__ __device__ inline std::uint32_t mix(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// Writes allocation `key`'s pattern over [p, p + size_bytes): every 32-bit word before the last byte (every
// 64th in allocations over 16 KiB, and the last such word), and the last byte.
__device__ inline void write_pattern(void* p, std::uint64_t size_bytes, std::uint32_t key) {
  auto* w = static_cast<std::uint32_t*>(p);
  const std::uint64_t words = (size_bytes - 1) / 4;
  const std::uint64_t stride = words > 4096 ? 64 : 1;
  for (std::uint64_t j = 0; j < words; j += stride) w[j] = key ^ static_cast<std::uint32_t>(j * 0x9E3779B9u);
  if (words > 0) w[words - 1] = key ^ static_cast<std::uint32_t>((words - 1) * 0x9E3779B9u);
  static_cast<std::uint8_t*>(p)[size_bytes - 1] = static_cast<std::uint8_t>(key ^ 0x5A);
}

// True when [p, p + size_bytes) still holds write_pattern(p, size_bytes, key).
__device__ inline bool pattern_holds(const void* p, std::uint64_t size_bytes, std::uint32_t key) {
  const auto* w = static_cast<const std::uint32_t*>(p);
  const std::uint64_t words = (size_bytes - 1) / 4;
  const std::uint64_t stride = words > 4096 ? 64 : 1;
  for (std::uint64_t j = 0; j < words; j += stride) {
    if (w[j] != (key ^ static_cast<std::uint32_t>(j * 0x9E3779B9u))) return false;
  }
  if (words > 0 && w[words - 1] != (key ^ static_cast<std::uint32_t>((words - 1) * 0x9E3779B9u))) return false;
  return static_cast<const std::uint8_t*>(p)[size_bytes - 1] == static_cast<std::uint8_t>(key ^ 0x5A);
}

// The bytes the pool sets aside for a request of `size_bytes`: its block, or its whole slabs.
inline std::uint64_t extent_bytes(std::uint64_t size_bytes) {
  const unsigned cls = class_of(size_bytes);
  return cls == kLargeClass ? large_slabs(size_bytes) * kSlabBytes : class_bytes(cls);
}

// Checks that the non-null allocations (pointer, requested size) lie inside the pool, are aligned to their
// block (or slab) size, and that no two blocks overlap. Returns the number of non-null ones.
inline std::uint64_t expect_disjoint_inside(const DevicePool& pool, const std::vector<void*>& ptrs,
                                            const std::vector<std::uint64_t>& sizes) {
  std::vector<std::pair<std::uintptr_t, std::uint64_t>> blocks;
  const auto base = reinterpret_cast<std::uintptr_t>(pool.view().data);
  const std::uint64_t cap = pool.capacity_bytes();
  for (std::size_t i = 0; i < ptrs.size(); ++i) {
    if (ptrs[i] == nullptr) continue;
    const auto a = reinterpret_cast<std::uintptr_t>(ptrs[i]);
    const std::uint64_t extent = extent_bytes(sizes[i]);
    EXPECT_GE(a, base) << i;
    EXPECT_LE(a + extent, base + cap) << i;
    EXPECT_EQ((a - base) % std::min<std::uint64_t>(extent, kSlabBytes), 0u) << "allocation " << i << " misaligned";
    blocks.emplace_back(a, extent);
  }
  std::sort(blocks.begin(), blocks.end());
  std::uint64_t overlaps = 0;
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i - 1].first + blocks[i - 1].second > blocks[i].first) ++overlaps;
  }
  EXPECT_EQ(overlaps, 0u);
  return blocks.size();
}

}  // namespace gmlake::device::test
