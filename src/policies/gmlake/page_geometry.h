// PageGeometry: the engine's page size (Config::page_bytes, a power of two) and the conversions between bytes and
// pages that every engine part makes. The StitchingAllocator builds one from its config and hands a copy to each
// part (ChunkSource, Stitcher, Placer), so that all of them cut memory at the same page.
//
// Pages and page numbers are std::uint64_t counts; offsets and sizes are bytes. Nothing here checks for overflow:
// callers keep byte counts below 2^64 (arenas are at most Config::arena_virtual_bytes).
// Thread safety: a value type, immutable.
#pragma once

#include <bit>
#include <cstdint>

namespace gmlake::engine {

class PageGeometry {
 public:
  // The geometry of pages of `page_bytes`, a power of two (Config::validate checks it for the config's value).
  constexpr explicit PageGeometry(std::uint64_t page_bytes) : shift_(static_cast<unsigned>(std::countr_zero(page_bytes))) {}

  // The geometry of pages of 2^`shift` bytes.
  static constexpr PageGeometry from_shift(unsigned shift) { return PageGeometry(std::uint64_t{1} << shift); }

  // log2 of the page size.
  constexpr unsigned shift() const { return shift_; }
  // The page size in bytes.
  constexpr std::uint64_t bytes() const { return std::uint64_t{1} << shift_; }
  // The bytes of `pages` pages.
  constexpr std::uint64_t bytes_of(std::uint64_t pages) const { return pages << shift_; }
  // The whole pages in `size_bytes`, rounded down (a cap or budget in bytes as pages it allows).
  constexpr std::uint64_t pages_in(std::uint64_t size_bytes) const { return size_bytes >> shift_; }
  // The page that holds byte `offset`.
  constexpr std::uint64_t first_page(std::uint64_t offset) const { return offset >> shift_; }
  // The page that holds the last byte of [offset, offset + size_bytes); `size_bytes` at least 1.
  constexpr std::uint64_t last_page(std::uint64_t offset, std::uint64_t size_bytes) const {
    return (offset + size_bytes - 1) >> shift_;
  }

  friend constexpr bool operator==(PageGeometry a, PageGeometry b) { return a.shift_ == b.shift_; }

 private:
  unsigned shift_;
};

}  // namespace gmlake::engine
