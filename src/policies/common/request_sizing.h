// PyTorch's sizing rules (c10/cuda/CUDACachingAllocator.cpp, default settings: no max_split_size, no
// roundup_power2_divisions), written against gmlake's Config so the constants live in one table:
//
//   round_size           < 512 B -> 512 B, else up to a multiple of 512 B (kMinBlockSize = kRoundBytes)
//   get_pool             rounded <= small_request_max_bytes (kSmallSize, 1 MiB) -> small pool, else large
//   get_allocation_size  small -> small_segment_bytes (kSmallBuffer, 2 MiB); rounded <
//                        large_segment_threshold_bytes (kMinLargeAlloc, 10 MiB) -> large_segment_bytes
//                        (kLargeBuffer, 20 MiB); else rounded up to large_round_bytes (kRoundLarge, 2 MiB)
//   should_split         small pool: remainder >= 512 B; large pool: remainder > small_request_max_bytes;
//                        with expandable segments, remainder >= 512 B in both pools
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "gmlake/config.h"
#include "block.h"

namespace gmlake::policy {

// `size_bytes` (>= 1) rounded as PyTorch places it, or nullopt when that overflows 64 bits.
std::optional<std::uint64_t> round_request_bytes(std::uint64_t size_bytes);

// The pool a rounded request is served from.
PoolKind pool_for(const Config& config, std::uint64_t rounded_bytes);

// The size of the segment `caching` creates for a rounded request that no free block can serve, or nullopt
// when rounding it up overflows.
std::optional<std::uint64_t> caching_segment_bytes(const Config& config, std::uint64_t rounded_bytes);

// True when a free block of `block_bytes` taken for `rounded_bytes` is split, its remainder staying free.
bool caching_should_split(const Config& config, PoolKind pool, std::uint64_t block_bytes,
                          std::uint64_t rounded_bytes);
bool expandable_should_split(std::uint64_t block_bytes, std::uint64_t rounded_bytes);

}  // namespace gmlake::policy
