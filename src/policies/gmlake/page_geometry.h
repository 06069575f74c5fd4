// PageGeometry: the engine's page size (Config::page_bytes, a power of two) and the conversions between bytes and
// pages that every engine part makes. The StitchingAllocator builds one from its config and hands a copy to each
// part (ChunkSource, Stitcher, Placer), so that all of them cut memory at the same page.
//
// Page counts are Pages and page numbers PageNumber (pages.h); offsets and sizes are bytes (std::uint64_t). This is
// the one place that converts between them. Nothing here checks for overflow: callers keep byte counts below 2^64
// (arenas are at most Config::arena_virtual_bytes).
// Thread safety: a value type, immutable.
#pragma once

#include <bit>
#include <cstdint>

#include "pages.h"

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
  constexpr std::uint64_t bytes_of(Pages pages) const { return pages.count() << shift_; }
  // The whole pages in `size_bytes`, rounded down (a cap or budget in bytes as pages it allows).
  constexpr Pages pages_in(std::uint64_t size_bytes) const { return Pages(size_bytes >> shift_); }
  // The offset in bytes of page `page`'s first byte (from the arena's base).
  constexpr std::uint64_t offset_of(PageNumber page) const { return page.value() << shift_; }
  // The page that holds byte `offset`.
  constexpr PageNumber first_page(std::uint64_t offset) const { return PageNumber(offset >> shift_); }
  // The page that holds the last byte of [offset, offset + size_bytes); `size_bytes` at least 1.
  constexpr PageNumber last_page(std::uint64_t offset, std::uint64_t size_bytes) const {
    return PageNumber((offset + size_bytes - 1) >> shift_);
  }

  friend constexpr bool operator==(PageGeometry a, PageGeometry b) { return a.shift_ == b.shift_; }

 private:
  unsigned shift_;
};

}  // namespace gmlake::engine
