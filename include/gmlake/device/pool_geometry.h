// The device pool's geometry: slabs, size classes, the slab state word and the metadata layout, shared by the
// device code (pool.cuh), the host side (device_pool.cuh) and the CPU tests. Plain C++ (constexpr), usable from
// any compiler; every function is also a CUDA __host__ __device__ function when compiled by nvcc.
//
// Memory: the pool's data is an array of slabs of kSlabBytes (1 MiB) each, in a gmlake GrowableBuffer (virtual
// memory that grows without moving). A slab is, at any time, in one of four states (kept in its 64-bit state
// word, below):
//   free             no block; its bitmap is all zero;
//   small class c    cut into blocks_per_slab(c) blocks of class_bytes(c) bytes; block i starts at
//                    slab + i * class_bytes(c), so a block is aligned to its own size (16 B .. 256 KiB); bit i
//                    of the slab's bitmap says whether block i is handed out;
//   large head       the first slab of a run of n >= 1 slabs handed out as one allocation (> kMaxClassBytes);
//                    word 0 of its bitmap holds n, the rest of its bitmap is zero;
//   large body       the other n - 1 slabs of that run; bitmap zero.
//
// The state word: (state << 32) | count. count is, for a small class, the blocks handed out or reserved plus
// the threads visiting the slab at that moment (a visit pins the slab's state, see pool.cuh); for the other
// states, only visitors. A slab changes between free and a small class only by a compare-and-swap that needs
// count == 0, so nothing that holds a block or pins the slab ever sees its state change under it.
//
// Invariants, when no kernel uses the pool (checked by DevicePool::check_invariants, tests/gpu/device/):
//   free slab:        word == 0 and popcount(bitmap) == 0
//   small class c:    count(word) == popcount(bitmap) <= blocks_per_slab(c), bits >= blocks_per_slab(c) zero
//   large head:       count(word) == 0, bitmap word 0 == n >= 1, slabs head+1 .. head+n-1 are large bodies
//   large body:       count(word) == 0, bitmap zero, and some large head's run covers it
//   allocations - frees == sum over small slabs of count + number of large heads      (live allocations)
//
// Sizes (bytes): a request of s bytes, 1 <= s <= kMaxClassBytes, gets a block of class_bytes(class_of(s)), the
// smallest power of two >= max(s, 16); a larger request gets ceil(s / kSlabBytes) whole slabs, aligned to
// kSlabBytes. Size classes over power-of-two blocks in slabs follow the "superblock" idea of Hoard (Berger et
// al., ASPLOS 2000) and, on the GPU, ScatterAlloc (Steinberger et al., InPar 2012: bitfields per page, hashed
// starting points) and Ouroboros (Winter et al., ICS 2020: pages of one size class taken from shared chunks);
// the code here is our own.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GMLAKE_HD __host__ __device__
#else
#define GMLAKE_HD
#endif

namespace gmlake::device {

inline constexpr unsigned kSlabShift = 20;
inline constexpr std::uint64_t kSlabBytes = std::uint64_t{1} << kSlabShift;  // 1 MiB
inline constexpr unsigned kMinClassShift = 4;                                  // 16 B: the smallest block
inline constexpr unsigned kMaxClassShift = 18;                                 // 256 KiB: the largest block
inline constexpr std::uint64_t kMinClassBytes = std::uint64_t{1} << kMinClassShift;
inline constexpr std::uint64_t kMaxClassBytes = std::uint64_t{1} << kMaxClassShift;
inline constexpr unsigned kNumClasses = kMaxClassShift - kMinClassShift + 1;  // 15
// A slab's bitmap: one bit per block of the smallest class, in 32-bit words (8 KiB per slab).
inline constexpr std::uint32_t kBitmapWords = static_cast<std::uint32_t>(kSlabBytes >> kMinClassShift) / 32;
inline constexpr std::uint64_t kBitmapBytes = kBitmapWords * sizeof(std::uint32_t);
// Per size class, kHintLanes "current slab" hints (by SM id), and kCounterStripes copies of the counters, so
// that threads on different SMs seldom touch the same word.
inline constexpr unsigned kHintLanes = 32;
inline constexpr unsigned kCounterStripes = 32;

// The class index used for requests larger than kMaxClassBytes.
inline constexpr unsigned kLargeClass = kNumClasses;

// Slab states (high 32 bits of the state word). Small class c is stored as c + 1.
inline constexpr std::uint32_t kStateFree = 0;
inline constexpr std::uint32_t kStateLargeHead = 0x80000000u;
inline constexpr std::uint32_t kStateLargeBody = 0x40000000u;

// The state word's halves: word = (state << 32) | count.
GMLAKE_HD constexpr std::uint32_t state_of(std::uint64_t word) { return static_cast<std::uint32_t>(word >> 32); }
GMLAKE_HD constexpr std::uint32_t count_of(std::uint64_t word) { return static_cast<std::uint32_t>(word); }
GMLAKE_HD constexpr std::uint64_t make_word(std::uint32_t state, std::uint32_t count) {
  return (std::uint64_t{state} << 32) | count;
}
// The state of a slab cut into blocks of class `cls` (< kNumClasses).
GMLAKE_HD constexpr std::uint32_t small_state(unsigned cls) { return cls + 1; }
// True when `state` is a small class's state (1 .. kNumClasses); then its class is state - 1.
GMLAKE_HD constexpr bool is_small_state(std::uint32_t state) { return state >= 1 && state <= kNumClasses; }

// The block size of class `cls` (< kNumClasses), in bytes: 16 << cls.
GMLAKE_HD constexpr std::uint64_t class_bytes(unsigned cls) { return kMinClassBytes << cls; }
GMLAKE_HD constexpr unsigned class_shift(unsigned cls) { return kMinClassShift + cls; }
// Blocks per slab of class `cls`: kSlabBytes / class_bytes(cls) (65536 for 16 B .. 4 for 256 KiB).
GMLAKE_HD constexpr std::uint32_t blocks_per_slab(unsigned cls) {
  return static_cast<std::uint32_t>(kSlabBytes >> class_shift(cls));
}
// Bitmap words class `cls` uses: ceil(blocks_per_slab / 32).
GMLAKE_HD constexpr std::uint32_t bitmap_words(unsigned cls) { return (blocks_per_slab(cls) + 31) / 32; }
// The bits of bitmap word `w` that stand for blocks of class `cls` (all ones but in a last, partial word).
GMLAKE_HD constexpr std::uint32_t valid_bits(unsigned cls, std::uint32_t w) {
  const std::uint32_t blocks = blocks_per_slab(cls);
  const std::uint32_t first = w * 32;
  if (first + 32 <= blocks) return 0xFFFFFFFFu;
  return blocks > first ? (std::uint32_t{1} << (blocks - first)) - 1 : 0;
}

// The class of a request of `size_bytes` (>= 1): the smallest c with class_bytes(c) >= size_bytes, or
// kLargeClass when size_bytes > kMaxClassBytes.
GMLAKE_HD constexpr unsigned class_of(std::uint64_t size_bytes) {
  if (size_bytes > kMaxClassBytes) return kLargeClass;
  unsigned shift = kMinClassShift;
  while ((std::uint64_t{1} << shift) < size_bytes) ++shift;
  return shift - kMinClassShift;
}
// Slabs a large request of `size_bytes` takes: ceil(size_bytes / kSlabBytes).
GMLAKE_HD constexpr std::uint64_t large_slabs(std::uint64_t size_bytes) {
  return (size_bytes + kSlabBytes - 1) >> kSlabShift;
}

// The counters, each striped kCounterStripes times (DevicePoolHeader::counters); the host sums the stripes.
enum Counter : unsigned {
  kAllocs = 0,        // allocations that returned memory
  kFrees,             // frees that gave a live allocation back
  kFailedAllocs,      // allocations that returned null: pool exhausted, or larger than the pool
  kDoubleFrees,       // frees of a block or run that its slab still shows as already free
  kForeignFrees,      // frees of pointers the pool never returned: outside the pool, inside a block, into a
                      // free slab (also a double free whose slab was given back meanwhile)
  kSlabsClaimed,      // free slabs taken by a size class or a large run
  kSlabsReleased,     // slabs given back to the free state
  kNumCounters
};
inline constexpr unsigned kCounterSlots = 8;  // per stripe: kNumCounters rounded up to 64 bytes
static_assert(kNumCounters <= kCounterSlots);

// The pool's device-resident header, at the start of its metadata buffer. Written by the host between
// launches (num_slabs) and by kernels (hints, counters).
struct DevicePoolHeader {
  std::uint32_t num_slabs;  // slabs usable now (mapped data and metadata); grows between launches
  std::uint32_t max_slabs;  // the most slabs the reservation holds
  std::uint32_t rover;      // where the next search for free slabs starts (atomicAdd by the kernels)
  std::uint32_t reserved[29];
  std::uint32_t hints[kNumClasses][kHintLanes];  // slab index + 1 of a slab of that class, 0 for none; the top
                                                  // bit is set while a warp claims a new slab for the hint
  unsigned long long counters[kCounterStripes][kCounterSlots];
};

// The metadata buffer's layout, in bytes from its start: the header, the state words (8 B per slab, for
// max_slabs slabs, mapped at creation), then the bitmaps (kBitmapBytes per slab, mapped as the pool grows).
inline constexpr std::uint64_t kWordsOffsetBytes = (sizeof(DevicePoolHeader) + 255) / 256 * 256;
GMLAKE_HD constexpr std::uint64_t bitmaps_offset_bytes(std::uint64_t max_slabs) {
  return (kWordsOffsetBytes + max_slabs * sizeof(std::uint64_t) + kBitmapBytes - 1) / kBitmapBytes * kBitmapBytes;
}
// Metadata bytes needed for `num_slabs` usable slabs of a pool of at most `max_slabs`.
GMLAKE_HD constexpr std::uint64_t metadata_bytes(std::uint64_t max_slabs, std::uint64_t num_slabs) {
  return bitmaps_offset_bytes(max_slabs) + num_slabs * kBitmapBytes;
}

}  // namespace gmlake::device
