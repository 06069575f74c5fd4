// Allocation inside kernels: the device side of gmlake's device pool. A kernel receives a DevicePoolView (by
// value, from DevicePool::view(), device_pool.cuh) and calls view.allocate(size_bytes) / view.free(p) from any
// thread, warp, block or child kernel (dynamic parallelism), concurrently with every other thread.
//
//   __global__ void k(gmlake::device::DevicePoolView pool) {
//     int* p = static_cast<int*>(pool.allocate(100 * sizeof(int)));   // null when the pool is exhausted
//     if (p) { p[0] = 1; pool.free(p); }
//   }
//
// Layout and invariants: pool_geometry.h. Sizes are bytes; a small block (<= 256 KiB) is aligned to its power-
// of-two size (at least 16 B), a large allocation to 1 MiB.
//
// The algorithm (every step is one atomic on one word; no thread holds anything another must wait for, except
// that warps of one SM may wait a bounded time, kHintWaits looks, for another warp's slab claim, and then claim
// on their own, so no thread is ever blocked indefinitely):
//   allocate, small (<= kMaxClassBytes): the lanes of a warp that ask for the same class at the same time are
//     grouped (__match_any_sync) and their leader reserves blocks for the whole group with one atomicAdd on a
//     slab's state word (warp aggregation, as in the warp-aggregated atomics of CUDA's programming guide and in
//     Gallatin, Hunt & Owens, PPoPP 2024). The slab comes from, in order: the class's hint for this SM
//     (kHintLanes hints per class, by SM id); the class's other hints; a free slab, claimed by
//     compareAndSwap(word, 0 -> class) from a rotating start and installed as the hint (one claimer per hint
//     at a time, see reserve()); any slab of the class with room (a scan of every slab, the last resort
//     before returning null). A reservation only counts; each
//     lane then claims its own bit in the slab's bitmap with atomicOr, starting at a hashed word (ScatterAlloc,
//     Steinberger et al., InPar 2012), and finds one because count(word) >= set bits always.
//   allocate, large (> kMaxClassBytes): a run of ceil(size / 1 MiB) free slabs, claimed one by one by
//     compareAndSwap(word, 0 -> large body) from a rotating start, undone when a slab of the run is taken; the
//     run's length goes to the head's bitmap word 0, then the head's state becomes large head.
//   free: the lanes freeing into the same slab are grouped; the leader pins the slab (atomicAdd of the group's
//     size to count(word): a slab whose count is not 0 never changes between free and a class), each lane
//     checks its pointer against the slab's state and clears its bit with atomicAnd (the bit's old value tells
//     a double free), and the leader takes the pins and the freed blocks off the count in one atomic. Whoever
//     brings a small slab's count to 0 gives the slab back (compareAndSwap(word, class,0 -> 0)), so memory moves
//     between classes and large runs. A large run is freed by atomicExch(head's bitmap word 0, 0): only the
//     thread that reads the length back frees the run.
//
// Errors: allocate returns null (and counts kFailedAllocs) when no slab has room, or the request is larger
// than the pool; 0 bytes returns null and counts nothing. Under heavy contention an allocation may also return
// null when a few blocks are still free but every slab with room is momentarily pinned by other threads
// (count(word) overstates the blocks in use while threads visit), so "null" means "exhausted or nearly so".
// free(nullptr) does nothing. free of a pointer the pool did not return, or not at a block's start, counts
// kForeignFrees and changes nothing; free of a block whose bit is already clear, or of a large run already
// freed, counts kDoubleFrees and changes nothing. A double free after the block was handed out again is
// indistinguishable from a valid free (as in every allocator without tags); a double free after its slab went
// back to the free state counts as foreign.
//
// Thread safety: every function may be called by any number of threads of any kernels at once, including
// child kernels of CDP2 (dynamic parallelism: -rdc=true, cudadevrt). The host must not grow the pool while a
// kernel uses it. Memory order: a block's contents are the caller's; the pool orders its own bit clears before
// a slab is given back (__threadfence), so a slab's next owner never sees a stale bit.
#pragma once

#include <cstdint>

#include "gmlake/device/pool_geometry.h"

namespace gmlake::device {

// What a kernel needs to allocate from a pool: plain pointers into the pool's device memory, copied into each
// kernel by value. Valid for the pool's whole life (growth publishes new slabs through header->num_slabs;
// nothing here moves).
struct DevicePoolView {
  DevicePoolHeader* header = nullptr;    // counters, hints, num_slabs
  unsigned long long* words = nullptr;   // one state word per slab (pool_geometry.h)
  std::uint32_t* bitmaps = nullptr;      // kBitmapWords per slab
  char* data = nullptr;                  // slab s is [data + s * kSlabBytes, data + (s + 1) * kSlabBytes)

#if defined(__CUDACC__)
  // A block of at least `size_bytes` bytes (alignment above), or null: exhausted, or size_bytes 0 or larger
  // than the pool. Any thread, any time; lock-free.
  __device__ void* allocate(std::uint64_t size_bytes) const;
  // Gives back what allocate returned; null does nothing; foreign and double frees are counted and ignored.
  // Any thread of any kernel, not only the one that allocated; lock-free.
  __device__ void free(void* p) const;
#endif
};

#if defined(__CUDACC__)
namespace detail {

inline constexpr std::uint32_t kNoSlab = 0xFFFFFFFFu;

__device__ inline unsigned sm_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}
__device__ inline unsigned lanemask_lt() {
  unsigned r;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(r));
  return r;
}
// A 32-bit mix (the finalizer of MurmurHash3): spreads nearby thread ids over the bitmap.
__device__ inline std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}
__device__ inline unsigned long long load_word(const unsigned long long* w) {
  return *reinterpret_cast<const volatile unsigned long long*>(w);
}
__device__ inline std::uint32_t load_u32(const std::uint32_t* p) {
  return *reinterpret_cast<const volatile std::uint32_t*>(p);
}
__device__ inline std::uint32_t num_slabs(const DevicePoolView& v) { return load_u32(&v.header->num_slabs); }
__device__ inline void count(const DevicePoolView& v, Counter c, unsigned long long n) {
  if (n != 0) atomicAdd(&v.header->counters[sm_id() % kCounterStripes][c], n);
}
__device__ inline void add_state(const DevicePoolView& v, std::uint32_t s, std::uint32_t from, std::uint32_t to) {
  // Changes the state bits of slab s from `from` to `to` by addition, keeping the count (visitors) as it is.
  atomicAdd(&v.words[s], (std::uint64_t{to} << 32) - (std::uint64_t{from} << 32));
}

// Takes `n` (pins and blocks) off slab s's count. Whoever brings a small slab's count to 0 tries to give the
// slab back to the free state; when a visitor arrives meanwhile the swap fails, and that visitor tries in turn
// when it leaves.
__device__ inline void leave(const DevicePoolView& v, std::uint32_t s, std::uint32_t n) {
  if (n == 0) return;
  const unsigned long long now = atomicAdd(&v.words[s], 0ull - n) - n;
  if (is_small_state(state_of(now)) && count_of(now) == 0) {
    if (atomicCAS(&v.words[s], now, 0ull) == now) count(v, kSlabsReleased, 1);
  }
}

// Reserves up to `want` blocks of class `cls` on slab s: the blocks granted (0 when s is not of that class or
// is full). The count keeps exactly the granted blocks.
__device__ inline std::uint32_t try_reserve(const DevicePoolView& v, std::uint32_t s, unsigned cls,
                                            std::uint32_t want) {
  const unsigned long long old = atomicAdd(&v.words[s], static_cast<unsigned long long>(want));
  std::uint32_t granted = 0;
  const std::uint32_t cap = blocks_per_slab(cls);
  if (state_of(old) == small_state(cls) && count_of(old) < cap) granted = min(want, cap - count_of(old));
  leave(v, s, want - granted);
  return granted;
}

__device__ inline bool has_room(unsigned long long word, unsigned cls) {
  return state_of(word) == small_state(cls) && count_of(word) < blocks_per_slab(cls);
}

// Claims a free slab for class `cls`, reserving min(want, blocks_per_slab) blocks on it; 0 when none is free.
__device__ inline std::uint32_t claim_small(const DevicePoolView& v, unsigned cls, std::uint32_t want,
                                            std::uint32_t* slab) {
  const std::uint32_t n = num_slabs(v);
  if (n == 0) return 0;
  const std::uint32_t granted = min(want, blocks_per_slab(cls));
  std::uint32_t s = atomicAdd(&v.header->rover, 1u) % n;
  for (std::uint32_t i = 0; i < n; ++i, s = (s + 1 == n ? 0 : s + 1)) {
    if (load_word(&v.words[s]) != 0) continue;
    if (atomicCAS(&v.words[s], 0ull, make_word(small_state(cls), granted)) == 0ull) {
      __threadfence();  // the previous owner's bit clears come before our bit sets
      count(v, kSlabsClaimed, 1);
      *slab = s;
      return granted;
    }
  }
  return 0;
}

// A hint's value: slab index + 1 (0: none), with kHintBusy set while one warp claims a new slab for it.
inline constexpr std::uint32_t kHintBusy = 0x80000000u;
inline constexpr unsigned kHintWaits = 256;  // how often a warp looks again at a busy hint before claiming itself

// The leader's part of a small allocation: reserves up to `want` blocks of class `cls` on one slab; returns
// the blocks granted (0: none anywhere) and the slab.
__device__ inline std::uint32_t reserve(const DevicePoolView& v, unsigned cls, std::uint32_t want,
                                        std::uint32_t* slab) {
  const unsigned lane = sm_id() % kHintLanes;
  std::uint32_t* hints = v.header->hints[cls];
  std::uint32_t own = load_u32(&hints[lane]) & ~kHintBusy;
  if (own != 0) {
    if (const std::uint32_t g = try_reserve(v, own - 1, cls, want)) {
      *slab = own - 1;
      return g;
    }
  }
  for (unsigned i = 1; i < kHintLanes; ++i) {  // the other SMs' slabs of this class
    const std::uint32_t h = load_u32(&hints[(lane + i) % kHintLanes]) & ~kHintBusy;
    if (h == 0 || h == own || !has_room(load_word(&v.words[h - 1]), cls)) continue;
    if (const std::uint32_t g = try_reserve(v, h - 1, cls, want)) {
      *slab = h - 1;
      return g;
    }
  }
  // A new slab for this SM's hint. When a slab holds more than twice what the group wants, one warp claims it
  // while the others wait for it (a short wait, bounded: after kHintWaits looks a warp claims a slab of its
  // own), so that the warps of an SM that all find the hint full at once (every warp does at a kernel's
  // start) take one slab, not one each. For big blocks (a slab of 16 KiB blocks holds 64, of 64 KiB ones 16)
  // a full warp needs a slab of its own anyway: it claims one at once and installs it if the hint is unchanged.
  const bool wait_for_claim = blocks_per_slab(cls) > 2 * want;
  if (!wait_for_claim) {
    const std::uint32_t seen = load_u32(&hints[lane]);
    if (const std::uint32_t g = claim_small(v, cls, want, slab)) {
      if ((seen & kHintBusy) == 0) atomicCAS(&hints[lane], seen, *slab + 1);
      return g;
    }
  }
  for (unsigned wait = 0; wait_for_claim && wait < kHintWaits; ++wait) {
    const std::uint32_t seen = load_u32(&hints[lane]);
    if (seen & kHintBusy) {
      __nanosleep(wait < 8 ? 32 : 256);
      continue;
    }
    if (seen != own && seen != 0) {  // installed meanwhile
      if (const std::uint32_t g = try_reserve(v, seen - 1, cls, want)) {
        *slab = seen - 1;
        return g;
      }
      own = seen;
    }
    if (atomicCAS(&hints[lane], seen, seen | kHintBusy) != seen) continue;
    const std::uint32_t g = claim_small(v, cls, want, slab);
    atomicExch(&hints[lane], g != 0 ? *slab + 1 : seen);
    if (g != 0) return g;
    break;  // no free slab
  }
  if (const std::uint32_t g = claim_small(v, cls, want, slab)) return g;  // waited too long (or none free)
  const std::uint32_t n = num_slabs(v);  // last resort: any slab of this class with room
  for (std::uint32_t s = 0; s < n; ++s) {
    if (!has_room(load_word(&v.words[s]), cls)) continue;
    if (const std::uint32_t g = try_reserve(v, s, cls, want)) {
      *slab = s;
      return g;
    }
  }
  return 0;
}

// Claims one free bit of slab s (class `cls`), which the caller has reserved: the block's address.
__device__ inline void* take_block(const DevicePoolView& v, std::uint32_t s, unsigned cls, std::uint32_t seed) {
  std::uint32_t* bitmap = v.bitmaps + std::uint64_t{s} * kBitmapWords;
  const std::uint32_t words = bitmap_words(cls);  // a power of two
  std::uint32_t w = seed & (words - 1);
  const unsigned rot = (seed >> 16) & 31;
  for (;;) {
    const std::uint32_t valid = valid_bits(cls, w);
    std::uint32_t bits = load_u32(&bitmap[w]);
    while (std::uint32_t free_bits = ~bits & valid) {
      // The first free bit at or after `rot` (wrapping), so that lanes on one word pick different bits.
      const std::uint32_t rotated = __funnelshift_r(free_bits, free_bits, rot);
      const unsigned b = (__ffs(rotated) - 1 + rot) & 31;
      const std::uint32_t bit = 1u << b;
      const std::uint32_t old = atomicOr(&bitmap[w], bit);
      if ((old & bit) == 0) {
        const std::uint64_t index = std::uint64_t{w} * 32 + b;
        return v.data + std::uint64_t{s} * kSlabBytes + (index << class_shift(cls));
      }
      bits = old;
    }
    w = (w + 1) & (words - 1);
  }
}

__device__ inline void* allocate_large(const DevicePoolView& v, std::uint64_t size_bytes) {
  const std::uint32_t n = num_slabs(v);
  const std::uint64_t need64 = large_slabs(size_bytes);
  if (need64 > n) {
    count(v, kFailedAllocs, 1);
    return nullptr;
  }
  const auto need = static_cast<std::uint32_t>(need64);
  const std::uint32_t start = atomicAdd(&v.header->rover, need) % n;
  std::uint32_t tried = 0;
  std::uint32_t s = start;
  while (tried < n) {
    if (s + need > n) {  // a run does not wrap: go on from slab 0
      tried += n - s;
      s = 0;
      continue;
    }
    std::uint32_t got = 0;
    while (got < need && load_word(&v.words[s + got]) == 0 &&
           atomicCAS(&v.words[s + got], 0ull, make_word(kStateLargeBody, 0)) == 0ull) {
      ++got;
    }
    if (got == need) {
      __threadfence();
      v.bitmaps[std::uint64_t{s} * kBitmapWords] = need;
      __threadfence();  // the length is there before anyone can see a head
      add_state(v, s, kStateLargeBody, kStateLargeHead);
      count(v, kSlabsClaimed, need);
      count(v, kAllocs, 1);
      return v.data + std::uint64_t{s} * kSlabBytes;
    }
    for (std::uint32_t j = 0; j < got; ++j) add_state(v, s + j, kStateLargeBody, kStateFree);  // undo
    tried += got + 1;
    s += got + 1;
    if (s >= n) s = 0;
  }
  count(v, kFailedAllocs, 1);
  return nullptr;
}

// Frees the large run headed by slab s, which the calling thread has pinned: true when it was live.
__device__ inline bool free_large(const DevicePoolView& v, std::uint32_t s) {
  const std::uint32_t need = atomicExch(&v.bitmaps[std::uint64_t{s} * kBitmapWords], 0u);
  if (need == 0) return false;
  for (std::uint32_t j = 1; j < need; ++j) add_state(v, s + j, kStateLargeBody, kStateFree);
  __threadfence();
  add_state(v, s, kStateLargeHead, kStateFree);  // our pin keeps the head unclaimable until we leave
  count(v, kSlabsReleased, need);
  return true;
}

}  // namespace detail

__device__ inline void* DevicePoolView::allocate(std::uint64_t size_bytes) const {
  if (size_bytes == 0) return nullptr;
  const unsigned cls = class_of(size_bytes);
  if (cls == kLargeClass) return detail::allocate_large(*this, size_bytes);
  const unsigned active = __activemask();
  const unsigned peers = __match_any_sync(active, cls);
  const unsigned leader = __ffs(peers) - 1;
  const unsigned group = __popc(peers);
  const unsigned rank = __popc(peers & detail::lanemask_lt());
  const std::uint32_t seed =
      detail::mix32((blockIdx.x * blockDim.x + threadIdx.x) * 0x9E3779B9u + static_cast<std::uint32_t>(clock()));
  void* result = nullptr;
  unsigned served = 0;
  while (served < group) {
    std::uint32_t slab = 0, granted = 0;
    if (rank == 0) granted = detail::reserve(*this, cls, group - served, &slab);
    granted = __shfl_sync(peers, granted, leader);
    slab = __shfl_sync(peers, slab, leader);
    if (granted == 0) break;  // exhausted: the lanes not served get null
    if (rank >= served && rank < served + granted) result = detail::take_block(*this, slab, cls, seed);
    served += granted;
  }
  if (rank == 0) {
    detail::count(*this, kAllocs, served);
    detail::count(*this, kFailedAllocs, group - served);
  }
  return result;
}

__device__ inline void DevicePoolView::free(void* p) const {
  if (p == nullptr) return;
  const std::uint64_t offset = static_cast<std::uint64_t>(static_cast<char*>(p) - data);  // huge when below
  const std::uint32_t n = detail::num_slabs(*this);
  const std::uint32_t slab =
      offset < (std::uint64_t{n} << kSlabShift) ? static_cast<std::uint32_t>(offset >> kSlabShift) : detail::kNoSlab;
  const unsigned active = __activemask();
  const unsigned peers = __match_any_sync(active, slab);
  const unsigned leader = __ffs(peers) - 1;
  const unsigned group = __popc(peers);
  const unsigned rank = __popc(peers & detail::lanemask_lt());
  if (slab == detail::kNoSlab) {
    if (rank == 0) detail::count(*this, kForeignFrees, group);
    return;
  }
  unsigned long long before = 0;
  if (rank == 0) before = atomicAdd(&words[slab], static_cast<unsigned long long>(group));  // pin the state
  before = __shfl_sync(peers, before, leader);
  const std::uint32_t state = state_of(before);
  const std::uint64_t in_slab = offset & (kSlabBytes - 1);
  enum : unsigned { kForeign, kFreedSmall, kFreedLarge, kDouble } outcome = kForeign;
  if (is_small_state(state)) {
    const unsigned cls = state - 1;
    if ((in_slab & (class_bytes(cls) - 1)) == 0) {
      const std::uint64_t index = in_slab >> class_shift(cls);
      const std::uint32_t bit = 1u << (index & 31);
      const std::uint32_t old = atomicAnd(&bitmaps[std::uint64_t{slab} * kBitmapWords + index / 32], ~bit);
      outcome = (old & bit) ? kFreedSmall : kDouble;
    }
  } else if (state == kStateLargeHead && in_slab == 0) {
    outcome = detail::free_large(*this, slab) ? kFreedLarge : kDouble;
  }
  const unsigned freed_small = __popc(__ballot_sync(peers, outcome == kFreedSmall));
  const unsigned freed_large = __popc(__ballot_sync(peers, outcome == kFreedLarge));
  const unsigned doubles = __popc(__ballot_sync(peers, outcome == kDouble));
  __syncwarp(peers);  // orders every lane's bit clear before the leader's fence
  if (rank == 0) {
    if (freed_small != 0 && is_small_state(state) && count_of(before) >= blocks_per_slab(state - 1)) {
      // The slab was full and has room again: make it this SM's hint for its class (unless a claim is on).
      std::uint32_t* hint = &header->hints[state - 1][detail::sm_id() % kHintLanes];
      const std::uint32_t current = detail::load_u32(hint);
      if ((current & detail::kHintBusy) == 0) atomicCAS(hint, current, slab + 1);
    }
    __threadfence();  // every lane's bit clear before the count that may give the slab back
    detail::leave(*this, slab, group + freed_small);
    detail::count(*this, kFrees, freed_small + freed_large);
    detail::count(*this, kDoubleFrees, doubles);
    detail::count(*this, kForeignFrees, group - freed_small - freed_large - doubles);
  }
}
#endif  // __CUDACC__

}  // namespace gmlake::device
