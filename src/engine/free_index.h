// FreeIndex: the free ranges of one arena's virtual space, for best-fit placement with splitting and
// coalescing. Offsets and sizes are bytes from the arena's base, multiples of 512 B (kRoundBytes).
//
// It knows nothing of physical memory: whether a free range is mapped is the page table's business.
//
// Invariants (check_invariants):
//   - by_addr_ and by_size_ hold the same ranges; ranges are non-empty and never overlap or touch
//     (touching ranges are always coalesced on insert).
//   - sum of sizes == free_bytes().
// Complexity: O(log n) per take / give; candidates() walks the best-fit order.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace gmlake::engine {

struct FreeRange {
  std::uint64_t offset;
  std::uint64_t size_bytes;
};

class FreeIndex {
 public:
  // Starts with one free range [0, capacity_bytes).
  explicit FreeIndex(std::uint64_t capacity_bytes);

  // Calls visit(range) for free ranges of size >= size_bytes in best-fit order (smallest size first, then
  // lowest offset) until visit returns true or `limit` ranges were visited. Returns the accepted range, or
  // the first visited one when none was accepted, or {0, 0} when no range is large enough.
  template <typename Visit>
  FreeRange best_fit(std::uint64_t size_bytes, std::uint64_t limit, Visit&& visit) const {
    auto it = by_size_.lower_bound({size_bytes, 0});
    if (it == by_size_.end()) return {0, 0};
    const FreeRange first{it->second, it->first};
    for (std::uint64_t n = 0; n < limit && it != by_size_.end(); ++n, ++it) {
      const FreeRange r{it->second, it->first};
      if (visit(r)) return r;
    }
    return first;
  }

  // Removes [offset, offset+size_bytes) from the free range `from` (which must contain it); what is left on
  // either side stays free.
  void take(const FreeRange& from, std::uint64_t offset, std::uint64_t size_bytes);
  // Returns [offset, offset+size_bytes) (not free now) to the index, coalescing with free neighbours.
  void give(std::uint64_t offset, std::uint64_t size_bytes);

  std::uint64_t free_bytes() const { return free_bytes_; }
  std::uint64_t range_count() const { return by_addr_.size(); }
  // The free range containing `offset`, or {0, 0}.
  FreeRange find(std::uint64_t offset) const;
  const std::map<std::uint64_t, std::uint64_t>& ranges() const { return by_addr_; }  // offset -> size
  void check_invariants() const;

 private:
  void insert(std::uint64_t offset, std::uint64_t size_bytes);
  void erase(std::map<std::uint64_t, std::uint64_t>::iterator it);

  std::map<std::uint64_t, std::uint64_t> by_addr_;           // offset -> size
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_size_;  // (size, offset)
  std::uint64_t free_bytes_ = 0;
};

}  // namespace gmlake::engine
