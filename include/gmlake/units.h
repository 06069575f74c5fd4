// Size units and alignment helpers shared by every gmlake layer.
//
// Every size in gmlake is a count of bytes held in std::size_t / std::uint64_t and named with a `_bytes`
// suffix; times are nanoseconds named `_ns`. No other file spells a byte literal: it names one of these.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gmlake {

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;
inline constexpr std::uint64_t kTiB = 1024 * kGiB;

// 2 MiB: the allocation granularity (minimum and recommended) that cuMemGetAllocationGranularity reports on
// H100 and H200 (measured: docs/benchmarks.md, "Reference: CUDA VMM call costs") and the page size of PyTorch's
// expandable segments' small pool.
inline constexpr unsigned kPageShift = 21;
inline constexpr std::uint64_t kPageBytes = std::uint64_t{1} << kPageShift;

// 512 B: PyTorch's kMinBlockSize; every request is rounded up to a multiple of it (CUDACachingAllocator).
inline constexpr std::uint64_t kRoundBytes = 512;

// 256 TiB: the largest request any policy serves (larger ones fail with OutOfMemoryError). Beyond any device's
// memory, and far inside the int64 range of the stats gauges (stats.h), which a single request of 2^63 bytes
// would overflow on a backend with no physical limit (sim).
inline constexpr std::uint64_t kMaxRequestBytes = std::uint64_t{1} << 48;

// True when `v` is a power of two (0 is not).
constexpr bool is_pow2(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// `v` rounded up to a multiple of `align`; `align` must be a power of two. Wraps on overflow: callers bound
// `v` first (see checked_round_up).
constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t align) { return (v + align - 1) & ~(align - 1); }
constexpr std::uint64_t round_down(std::uint64_t v, std::uint64_t align) { return v & ~(align - 1); }

// `v` rounded up to a multiple of `align` (any non-zero value), or false when that overflows 64 bits.
constexpr bool checked_round_up(std::uint64_t v, std::uint64_t align, std::uint64_t* out) {
  const std::uint64_t rem = v % align;
  if (rem == 0) { *out = v; return true; }
  const std::uint64_t add = align - rem;
  if (v > UINT64_MAX - add) return false;
  *out = v + add;
  return true;
}

}  // namespace gmlake
