// The device pool on the GPU (include/gmlake/device/): a million concurrent allocations of mixed sizes, each
// holding its own pattern, no two overlapping; frees from other blocks and other kernels; double and foreign
// frees counted without harm; exhaustion, recovery and growth; child kernels (CDP2) allocating and freeing
// beside their parents. After each step the pool's invariants (pool_geometry.h) are checked on the host.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "gmlake/backend_factory.h"
#include "gmlake/device/device_pool.cuh"
#include "gmlake/units.h"
#include "gpu/device/device_pool_test_support.cuh"

namespace gmlake::device {
namespace {

using test::check;
using test::DeviceArray;
using test::mix;

class DevicePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = test::cuda_unavailable(); !why.empty()) GTEST_SKIP() << why;
    backend_ = make_backend("cuda", kPageBytes);
  }
  std::unique_ptr<Backend> backend_;
};

// A mixed request size for allocation i: log-uniform 1 B .. 16 KiB, and one in 4096 a large one
// (256 KiB + 1 .. ~3.3 MiB).
__host__ __device__ std::uint64_t mixed_size(std::uint32_t i) {
  const std::uint32_t h = mix(i * 2654435761u + 12345u);
  if (h % 4096 == 0) return kMaxClassBytes + 1 + (h >> 12) % (3 * kMiB);
  const unsigned shift = 4 + (h >> 4) % 11;
  return 1 + (h >> 16) % (std::uint32_t{1} << shift);
}

__global__ void allocate_mixed(DevicePoolView pool, void** ptrs, std::uint64_t* sizes, std::uint32_t n,
                               std::uint32_t first_key) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const std::uint64_t size = mixed_size(i + first_key);
  void* p = pool.allocate(size);
  if (p != nullptr) test::write_pattern(p, size, i + first_key);
  ptrs[i] = p;
  sizes[i] = size;
}

__global__ void allocate_fixed(DevicePoolView pool, void** ptrs, std::uint32_t n, std::uint64_t size) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  void* p = pool.allocate(size);
  if (p != nullptr) test::write_pattern(p, size, i);
  ptrs[i] = p;
}

// Thread t checks allocation (t + shift) % n, which another block (or another kernel) allocated; counts the
// broken patterns; frees it when `free_it`.
__global__ void check_and_free(DevicePoolView pool, void** ptrs, const std::uint64_t* sizes, std::uint64_t fixed_size,
                               std::uint32_t n, std::uint32_t shift, std::uint32_t first_key, bool free_it,
                               unsigned long long* broken) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const std::uint32_t i = (t + shift) % n;
  void* p = ptrs[i];
  if (p == nullptr) return;
  const std::uint64_t size = sizes ? sizes[i] : fixed_size;
  if (!test::pattern_holds(p, size, i + first_key)) atomicAdd(broken, 1ull);
  if (free_it) pool.free(p);
}

__global__ void free_all(DevicePoolView pool, void* const* ptrs, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) pool.free(ptrs[i]);
}

// Thread t frees ptrs[t / 2]: two threads of one warp free each pointer at once.
__global__ void free_twice_at_once(DevicePoolView pool, void* const* ptrs, std::uint32_t n) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < 2 * n) pool.free(ptrs[t / 2]);
}

__global__ void free_pointers(DevicePoolView pool, void* const* ptrs, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) pool.free(ptrs[i]);
}

std::uint32_t blocks_for(std::uint32_t n, std::uint32_t threads) { return (n + threads - 1) / threads; }

template <typename T>
std::vector<T> host(const DeviceArray<T>& a) {
  return a.to_host();
}

TEST_F(DevicePoolTest, AMillionConcurrentMixedAllocationsHoldTheirPatternsAndNeverOverlap) {
  DevicePool pool(*backend_, {.initial_bytes = 6 * kGiB, .max_bytes = 8 * kGiB});
  constexpr std::uint32_t n = 1u << 20;
  DeviceArray<void*> ptrs(n);
  DeviceArray<std::uint64_t> sizes(n);
  DeviceArray<unsigned long long> broken(1);
  allocate_mixed<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), sizes.get(), n, 0);
  check(cudaDeviceSynchronize(), "allocate_mixed");
  const std::vector<void*> p = host(ptrs);
  const std::vector<std::uint64_t> s = host(sizes);
  EXPECT_EQ(test::expect_disjoint_inside(pool, p, s), n);  // every one succeeded, none overlaps
  std::uint64_t large = 0;
  for (std::uint64_t size : s) large += class_of(size) == kLargeClass;
  EXPECT_GT(large, 100u);  // the large path was exercised too

  DevicePoolStats st = pool.stats();
  EXPECT_EQ(st.allocs, n);
  EXPECT_EQ(st.failed_allocs, 0u);
  EXPECT_EQ(st.live_allocations(), n);
  EXPECT_EQ(st.large_runs, large);
  pool.check_invariants();

  // Checked by other blocks in one kernel, freed by other blocks of another kernel of another shape.
  check_and_free<<<blocks_for(n, 512), 512>>>(pool.view(), ptrs.get(), sizes.get(), 0, n, 5 * 256 + 17, 0, false,
                                              broken.get());
  check_and_free<<<blocks_for(n, 128), 128>>>(pool.view(), ptrs.get(), sizes.get(), 0, n, n / 2 + 3, 0, true,
                                              broken.get());
  EXPECT_EQ(host(broken)[0], 0u);
  st = pool.stats();
  EXPECT_EQ(st.frees, n);
  EXPECT_EQ(st.double_frees, 0u);
  EXPECT_EQ(st.foreign_frees, 0u);
  EXPECT_EQ(st.live_allocations(), 0u);
  EXPECT_EQ(st.free_slabs, st.num_slabs);  // every slab went back
  EXPECT_EQ(st.slabs_claimed, st.slabs_released);
  pool.check_invariants();
}

TEST_F(DevicePoolTest, DoubleAndForeignFreesAreCountedAndTheLiveBlocksKeepTheirBytes) {
  DevicePool pool(*backend_, {.initial_bytes = 1 * kGiB, .max_bytes = 1 * kGiB});
  constexpr std::uint32_t n = 1u << 16;
  DeviceArray<void*> ptrs(n);
  DeviceArray<std::uint64_t> sizes(n);
  DeviceArray<unsigned long long> broken(1);
  allocate_mixed<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), sizes.get(), n, 7);
  const std::vector<void*> p = host(ptrs);
  const std::vector<std::uint64_t> s = host(sizes);
  ASSERT_EQ(test::expect_disjoint_inside(pool, p, s), n);

  // Foreign pointers: inside each live block (8 bytes in, or half a slab into a large run), outside the pool
  // (a cudaMalloc buffer), and into slabs no one has claimed (the pool's last slab).
  DeviceArray<char> outside(4096);
  std::vector<void*> foreign;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint64_t into = class_of(s[i]) == kLargeClass ? kSlabBytes / 2 : 8;
    foreign.push_back(static_cast<char*>(p[i]) + into);
  }
  for (int i = 0; i < 1000; ++i) foreign.push_back(outside.get() + i);
  std::vector<unsigned long long> words(pool.capacity_bytes() / kSlabBytes);
  check(cudaMemcpy(words.data(), pool.view().words, words.size() * sizeof(words[0]), cudaMemcpyDeviceToHost), "copy");
  const auto free_slab = std::find(words.begin(), words.end(), 0ull) - words.begin();
  ASSERT_LT(static_cast<std::size_t>(free_slab), words.size());  // a slab no one holds
  for (int i = 0; i < 1000; ++i) foreign.push_back(pool.view().data + free_slab * kSlabBytes + 16 * i);
  DeviceArray<void*> foreign_d(foreign.size());
  check(cudaMemcpy(foreign_d.get(), foreign.data(), foreign.size() * sizeof(void*), cudaMemcpyHostToDevice), "copy");
  free_pointers<<<blocks_for(foreign.size(), 256), 256>>>(pool.view(), foreign_d.get(), foreign.size());
  DevicePoolStats st = pool.stats();
  EXPECT_EQ(st.foreign_frees, foreign.size());
  EXPECT_EQ(st.frees, 0u);
  EXPECT_EQ(st.live_allocations(), n);
  pool.check_invariants();
  check_and_free<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), sizes.get(), 0, n, 0, 7, false, broken.get());
  EXPECT_EQ(host(broken)[0], 0u);

  // Each pointer freed by two threads at once: one free counts, the other is a double (or, when its slab was
  // already given back, a foreign) free.
  free_twice_at_once<<<blocks_for(2 * n, 256), 256>>>(pool.view(), ptrs.get(), n);
  st = pool.stats();
  EXPECT_EQ(st.frees, n);
  EXPECT_EQ(st.double_frees + st.foreign_frees - foreign.size(), n);
  EXPECT_EQ(st.live_allocations(), 0u);
  EXPECT_EQ(st.free_slabs, st.num_slabs);
  pool.check_invariants();

  // Freed a third time, later: counted again, nothing changes.
  free_all<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), n);
  const DevicePoolStats after = pool.stats();
  EXPECT_EQ(after.frees, n);
  EXPECT_EQ(after.double_frees + after.foreign_frees, st.double_frees + st.foreign_frees + n);
  pool.check_invariants();

  // The pool is whole: the same allocations succeed again and hold their bytes.
  allocate_mixed<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), sizes.get(), n, 7);
  EXPECT_EQ(test::expect_disjoint_inside(pool, host(ptrs), host(sizes)), n);
  check_and_free<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), sizes.get(), 0, n, 99, 7, true, broken.get());
  EXPECT_EQ(host(broken)[0], 0u);
  EXPECT_EQ(pool.stats().live_allocations(), 0u);
  pool.check_invariants();
}

TEST_F(DevicePoolTest, ExhaustionGivesNullsThatAreCountedAndThePoolRecoversAndGrows) {
  DevicePool pool(*backend_, {.initial_bytes = 32 * kMiB, .max_bytes = 64 * kMiB});
  ASSERT_EQ(pool.capacity_bytes(), 32 * kMiB);
  constexpr std::uint32_t n = 1u << 20;
  constexpr std::uint64_t size = 256;
  DeviceArray<void*> ptrs(n);
  DeviceArray<unsigned long long> broken(1);
  const std::uint64_t capacity_blocks = pool.capacity_bytes() / size;  // 131072

  allocate_fixed<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), n, size);
  std::vector<std::uint64_t> sizes(n, size);
  std::uint64_t got = test::expect_disjoint_inside(pool, host(ptrs), sizes);
  EXPECT_LE(got, capacity_blocks);
  EXPECT_GE(got, capacity_blocks * 99 / 100);  // null means exhausted (or within 1 % of it)
  DevicePoolStats st = pool.stats();
  EXPECT_EQ(st.allocs, got);
  EXPECT_EQ(st.failed_allocs, n - got);
  pool.check_invariants();
  check_and_free<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), nullptr, size, n, 1, 0, false, broken.get());
  EXPECT_EQ(host(broken)[0], 0u);

  // A request larger than the whole pool is a counted null too.
  DeviceArray<void*> big(1);
  allocate_fixed<<<1, 1>>>(pool.view(), big.get(), 1, 64 * kMiB);
  EXPECT_EQ(host(big)[0], nullptr);
  EXPECT_EQ(pool.stats().failed_allocs, n - got + 1);
  free_all<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), n);
  st = pool.stats();
  EXPECT_EQ(st.live_allocations(), 0u);
  EXPECT_EQ(st.free_slabs, st.num_slabs);
  pool.check_invariants();

  // Recovery: every slab went back, so a large run of 8 MiB and then another class (a quarter of the pool in
  // 4 KiB blocks) get them: all succeed.
  allocate_fixed<<<1, 1>>>(pool.view(), big.get(), 1, 8 * kMiB);
  EXPECT_NE(host(big)[0], nullptr);
  constexpr std::uint32_t m = 2048;
  allocate_fixed<<<blocks_for(m, 256), 256>>>(pool.view(), ptrs.get(), m, 4 * kKiB);
  std::vector<void*> p4 = host(ptrs);
  p4.resize(m);
  p4.push_back(host(big)[0]);
  std::vector<std::uint64_t> s4(m, 4 * kKiB);
  s4.push_back(8 * kMiB);
  EXPECT_EQ(test::expect_disjoint_inside(pool, p4, s4), m + 1);
  free_all<<<1, 1>>>(pool.view(), big.get(), 1);
  free_all<<<blocks_for(m, 256), 256>>>(pool.view(), ptrs.get(), m);
  EXPECT_EQ(pool.stats().live_allocations(), 0u);
  pool.check_invariants();

  // Growth between launches: the same kernel now gets twice the blocks.
  pool.grow(64 * kMiB);
  EXPECT_EQ(pool.capacity_bytes(), 64 * kMiB);
  EXPECT_THROW(pool.grow(128 * kMiB), OutOfMemoryError);
  allocate_fixed<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), n, size);
  got = test::expect_disjoint_inside(pool, host(ptrs), sizes);
  EXPECT_LE(got, 2 * capacity_blocks);
  EXPECT_GE(got, 2 * capacity_blocks * 99 / 100);
  check_and_free<<<blocks_for(n, 256), 256>>>(pool.view(), ptrs.get(), nullptr, size, n, 3, 0, true, broken.get());
  EXPECT_EQ(host(broken)[0], 0u);
  EXPECT_EQ(pool.stats().live_allocations(), 0u);
  pool.check_invariants();
}

// CDP2: each parent block allocates, launches a child grid that checks and frees the parent's blocks and
// allocates its own (some large), while the parent allocates again.
constexpr std::uint32_t kParentBlocks = 128, kParentThreads = 128, kChildBlocks = 2, kChildThreads = 128;
constexpr std::uint32_t kChildPerParent = kChildBlocks * kChildThreads;
constexpr std::uint32_t kChildKeyBase = 1u << 24, kParentKey2Base = 1u << 25;

__global__ void child(DevicePoolView pool, void** parent_ptrs, std::uint32_t parent_first, void** child_ptrs,
                      std::uint64_t* child_sizes, std::uint32_t child_first, unsigned long long* broken) {
  const std::uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < kParentThreads) {
    const std::uint32_t i = parent_first + j;
    void* p = parent_ptrs[j];
    if (p == nullptr || !test::pattern_holds(p, mixed_size(i), i)) atomicAdd(broken, 1ull);
    pool.free(p);
  }
  const std::uint32_t key = kChildKeyBase + child_first + j;
  const std::uint64_t size = (j % 61 == 0) ? kMaxClassBytes + 1 + j * 1000 : mixed_size(key);
  void* q = pool.allocate(size);
  if (q != nullptr) test::write_pattern(q, size, key);
  child_ptrs[j] = q;
  child_sizes[j] = size;
}

__global__ void parent(DevicePoolView pool, void** parent_ptrs, void** parent2_ptrs, std::uint64_t* parent2_sizes,
                       void** child_ptrs, std::uint64_t* child_sizes, unsigned long long* broken,
                       unsigned long long* launch_errors) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint64_t size = mixed_size(i);
  void* p = pool.allocate(size);
  if (p != nullptr) test::write_pattern(p, size, i);
  parent_ptrs[i] = p;
  __threadfence();  // the block's allocations and patterns are visible to the child grid
  __syncthreads();
  if (threadIdx.x == 0) {
    const std::uint32_t first = blockIdx.x * blockDim.x;
    child<<<kChildBlocks, kChildThreads>>>(pool, parent_ptrs + first, first, child_ptrs + blockIdx.x * kChildPerParent,
                                           child_sizes + blockIdx.x * kChildPerParent, blockIdx.x * kChildPerParent,
                                           broken);
    if (cudaGetLastError() != cudaSuccess) atomicAdd(launch_errors, 1ull);
  }
  const std::uint32_t key = kParentKey2Base + i;  // allocating while the children run
  const std::uint64_t size2 = mixed_size(key);
  void* q = pool.allocate(size2);
  if (q != nullptr) test::write_pattern(q, size2, key);
  parent2_ptrs[i] = q;
  parent2_sizes[i] = size2;
}

__global__ void check_keys(void* const* ptrs, const std::uint64_t* sizes, std::uint32_t n, std::uint32_t key_base,
                           unsigned long long* broken) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && (ptrs[i] == nullptr || !test::pattern_holds(ptrs[i], sizes[i], key_base + i))) atomicAdd(broken, 1ull);
}

TEST_F(DevicePoolTest, ChildKernelsAllocateAndFreeBesideTheirParentsWithoutOverlapOrLoss) {
  DevicePool pool(*backend_, {.initial_bytes = 2 * kGiB, .max_bytes = 2 * kGiB});
  constexpr std::uint32_t np = kParentBlocks * kParentThreads, nc = kParentBlocks * kChildPerParent;
  DeviceArray<void*> parent_ptrs(np), parent2_ptrs(np), child_ptrs(nc);
  DeviceArray<std::uint64_t> parent2_sizes(np), child_sizes(nc);
  DeviceArray<unsigned long long> broken(1), launch_errors(1);
  parent<<<kParentBlocks, kParentThreads>>>(pool.view(), parent_ptrs.get(), parent2_ptrs.get(), parent2_sizes.get(),
                                            child_ptrs.get(), child_sizes.get(), broken.get(), launch_errors.get());
  check(cudaGetLastError(), "parent launch");
  check(cudaDeviceSynchronize(), "parent");
  EXPECT_EQ(host(launch_errors)[0], 0u);
  EXPECT_EQ(host(broken)[0], 0u);  // every child saw its parent's bytes

  // What is live now: the parents' second allocations and the children's; none overlaps, none is lost.
  std::vector<void*> live = host(parent2_ptrs);
  std::vector<std::uint64_t> live_sizes = host(parent2_sizes);
  const std::vector<void*> cp = host(child_ptrs);
  const std::vector<std::uint64_t> cs = host(child_sizes);
  live.insert(live.end(), cp.begin(), cp.end());
  live_sizes.insert(live_sizes.end(), cs.begin(), cs.end());
  EXPECT_EQ(test::expect_disjoint_inside(pool, live, live_sizes), np + nc);
  DevicePoolStats st = pool.stats();
  EXPECT_EQ(st.allocs, 2 * np + nc);
  EXPECT_EQ(st.frees, np);  // the children freed every parent's first allocation
  EXPECT_EQ(st.failed_allocs, 0u);
  EXPECT_EQ(st.double_frees + st.foreign_frees, 0u);
  EXPECT_GT(st.large_runs, 0u);
  EXPECT_EQ(st.live_allocations(), np + nc);
  pool.check_invariants();

  check_keys<<<blocks_for(np, 256), 256>>>(parent2_ptrs.get(), parent2_sizes.get(), np, kParentKey2Base, broken.get());
  check_keys<<<blocks_for(nc, 256), 256>>>(child_ptrs.get(), child_sizes.get(), nc, kChildKeyBase, broken.get());
  EXPECT_EQ(host(broken)[0], 0u);
  free_all<<<blocks_for(np, 256), 256>>>(pool.view(), parent2_ptrs.get(), np);
  free_all<<<blocks_for(nc, 256), 256>>>(pool.view(), child_ptrs.get(), nc);
  st = pool.stats();
  EXPECT_EQ(st.live_allocations(), 0u);
  EXPECT_EQ(st.free_slabs, st.num_slabs);
  pool.check_invariants();
}

TEST_F(DevicePoolTest, AHostBackendIsRefused) {
  auto host_backend = make_backend("host", kPageBytes);
  EXPECT_THROW(DevicePool(*host_backend, {.initial_bytes = 2 * kMiB, .max_bytes = 2 * kMiB}), Error);
}

}  // namespace
}  // namespace gmlake::device
