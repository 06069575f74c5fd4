// Pages and PageNumber: the engine's page counts and page numbers as types, so that the compiler rejects a byte
// count where pages are meant, a page count where a page number is meant, and the other way round.
//
// The engine counts memory in pages (Config::page_bytes, a power of two; PageGeometry converts): a chunk is some
// Pages, a block covers the pages numbered first..last of its arena. Byte sizes and offsets stay std::uint64_t
// with `_bytes` in their names; only PageGeometry turns one into the other (bytes_of, pages_in, first_page,
// last_page, offset_of).
//   Pages       a number of pages (a chunk's size, a run, a budget): Pages + Pages, Pages - Pages, a count times
//               or divided by a plain number, compared with Pages.
//   PageNumber  the number of one page in an arena's virtual space, from 0 at its base (a chunk's first page, a
//               block's first and last): PageNumber + Pages and PageNumber - Pages are page numbers, and
//               PageNumber - PageNumber is the Pages between them; a range [first, last] holds
//               last - first + Pages{1} pages.
// Both are made from a std::uint64_t only explicitly (Pages{3}, PageNumber{0}) and give it back only by name
// (count(), value()): no implicit conversion either way. They are trivially copyable wrappers of one
// std::uint64_t, passed in a register like it, every operation constexpr and inline. The engine's per-chunk walks
// (ChunkUse, the Placer's cost) still add up raw integers in locals and wrap the total once: GCC 12 kept a Pages
// sum there with one more instruction per step (docs/benchmarks.md, the third session of 2026-11-26).
// Arithmetic wraps as on std::uint64_t and nothing checks for overflow, as before; max() is the sentinel the
// engine used UINT64_MAX for (no bound, no page).
// Thread safety: value types; only the compound assignments and ++ change one.
#pragma once

#include <compare>
#include <cstdint>

namespace gmlake::engine {

class Pages {
 public:
  constexpr Pages() = default;  // no pages
  constexpr explicit Pages(std::uint64_t count) : count_(count) {}
  // The largest count: "no bound" (Placer's unmapped bound, a place that cannot be chosen).
  static constexpr Pages max() { return Pages(UINT64_MAX); }

  constexpr std::uint64_t count() const { return count_; }

  constexpr Pages& operator+=(Pages o) {
    count_ += o.count_;
    return *this;
  }
  constexpr Pages& operator-=(Pages o) {
    count_ -= o.count_;
    return *this;
  }
  constexpr Pages& operator++() {
    ++count_;
    return *this;
  }
  friend constexpr Pages operator+(Pages a, Pages b) { return Pages(a.count_ + b.count_); }
  friend constexpr Pages operator-(Pages a, Pages b) { return Pages(a.count_ - b.count_); }
  // A count scaled by a plain number (twice a chunk, a share of a block).
  friend constexpr Pages operator*(Pages a, std::uint64_t k) { return Pages(a.count_ * k); }
  friend constexpr Pages operator/(Pages a, std::uint64_t k) { return Pages(a.count_ / k); }
  friend constexpr bool operator==(Pages, Pages) = default;
  friend constexpr std::strong_ordering operator<=>(Pages, Pages) = default;
  // For test messages (gtest) and logs: "3 pages". A template so that this header needs no <ostream>.
  template <typename Out>
  friend auto& operator<<(Out& out, Pages p) {
    return out << p.count_ << " pages";
  }

 private:
  std::uint64_t count_ = 0;
};

class PageNumber {
 public:
  constexpr PageNumber() = default;  // page 0, the arena's first
  constexpr explicit PageNumber(std::uint64_t value) : value_(value) {}
  // The highest number: "no page" (PageMap::next_span_start, first_idle, next_mapped_after).
  static constexpr PageNumber max() { return PageNumber(UINT64_MAX); }

  constexpr std::uint64_t value() const { return value_; }

  constexpr PageNumber& operator+=(Pages n) {
    value_ += n.count();
    return *this;
  }
  constexpr PageNumber& operator++() {
    ++value_;
    return *this;
  }
  friend constexpr PageNumber operator+(PageNumber p, Pages n) { return PageNumber(p.value_ + n.count()); }
  friend constexpr PageNumber operator-(PageNumber p, Pages n) { return PageNumber(p.value_ - n.count()); }
  // The pages from `b` up to `a` (a >= b): [b, a) holds a - b pages.
  friend constexpr Pages operator-(PageNumber a, PageNumber b) { return Pages(a.value_ - b.value_); }
  friend constexpr bool operator==(PageNumber, PageNumber) = default;
  friend constexpr std::strong_ordering operator<=>(PageNumber, PageNumber) = default;
  // For test messages (gtest) and logs: "page 3".
  template <typename Out>
  friend auto& operator<<(Out& out, PageNumber p) {
    return out << "page " << p.value_;
  }

 private:
  std::uint64_t value_ = 0;
};

}  // namespace gmlake::engine
