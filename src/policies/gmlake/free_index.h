// FreeIndex: the free ranges of one arena's virtual space, for good-fit placement with splitting and
// coalescing. Offsets and sizes are bytes from the arena's base, multiples of 512 B (kRoundBytes).
//
// Structure (a two-level segregated fit, after TLSF: Masmano et al., "TLSF: a New Dynamic Memory Allocator for
// Real-Time Systems", ECRTS 2004): free ranges sit in size-class bins, 8 classes per power of two, each bin a
// doubly linked list (most recently freed first), with a bitmap of non-empty bins. Neighbours are found for
// coalescing through two hash maps keyed by a range's start and end offsets. Every operation is O(1) apart from
// the bounded candidate walk of best_fit.
//
// It knows nothing of physical memory: whether a free range is mapped is the page table's business.
//
// Invariants (check_invariants): every range is non-empty, sits in the bin of its size and in both maps;
// no two ranges overlap or touch (touching ranges are coalesced on give); the bitmap marks exactly the
// non-empty bins; the sizes add up to free_bytes().
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gmlake::engine {

struct FreeRange {
  std::uint64_t offset;
  std::uint64_t size_bytes;
};

struct Fit {
  FreeRange range;  // size_bytes 0: nothing large enough
  bool accepted;    // the visitor accepted it (else it is the first candidate, which the visitor declined)
};

class FreeIndex {
 public:
  // Starts with one free range [0, capacity_bytes).
  explicit FreeIndex(std::uint64_t capacity_bytes);

  // Visits free ranges of size >= size_bytes in good-fit order: first those in the request's own size class
  // (most recently freed first), then the larger classes in increasing order. Stops when visit(range) returns
  // true or `limit` ranges were visited. Returns the accepted range, else the first one visited (not accepted),
  // else a zero-size range when no range is large enough.
  template <typename Visit>
  Fit best_fit(std::uint64_t size_bytes, std::uint64_t limit, Visit&& visit) const {
    Fit fit{{0, 0}, false};
    std::uint64_t visited = 0;
    auto consider = [&](const Node& n) {
      const FreeRange r{n.offset, n.size_bytes};
      if (visited++ == 0) fit.range = r;
      if (visit(r)) {
        fit = {r, true};
        return true;
      }
      return visited >= limit;
    };
    const unsigned own = bin_of(size_bytes);
    std::uint32_t scanned = 0;
    for (std::uint32_t i = heads_[own]; i != kNone && scanned < kOwnBinScan; i = nodes_[i].next, ++scanned) {
      if (nodes_[i].size_bytes >= size_bytes && consider(nodes_[i])) return fit;
    }
    for (unsigned bin = next_nonempty(own + 1); bin < kBins; bin = next_nonempty(bin + 1)) {
      for (std::uint32_t i = heads_[bin]; i != kNone; i = nodes_[i].next) {
        if (consider(nodes_[i])) return fit;
      }
    }
    return fit;
  }

  // Removes [offset, offset+size_bytes) from the free range `from` (which must contain it); what is left on
  // either side stays free.
  void take(const FreeRange& from, std::uint64_t offset, std::uint64_t size_bytes);
  // Returns [offset, offset+size_bytes) (not free now) to the index, coalescing with free neighbours.
  void give(std::uint64_t offset, std::uint64_t size_bytes);

  std::uint64_t free_bytes() const { return free_bytes_; }
  std::uint64_t range_count() const { return by_start_.size(); }
  // Every free range, in address order. O(n log n): for checks and snapshots.
  std::vector<FreeRange> ranges() const;
  void check_invariants() const;

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  static constexpr unsigned kBins = 256;
  static constexpr std::uint32_t kOwnBinScan = 16;  // entries of the request's own bin examined at most

  struct Node {
    std::uint64_t offset;
    std::uint64_t size_bytes;
    std::uint32_t prev, next;  // bin list
    std::uint16_t bin;
  };

  static unsigned bin_of(std::uint64_t size_bytes);
  unsigned next_nonempty(unsigned from) const;
  std::uint32_t add(std::uint64_t offset, std::uint64_t size_bytes);
  void remove(std::uint32_t index);
  void link(std::uint32_t index);
  void unlink(std::uint32_t index);
  void resize(std::uint32_t index, std::uint64_t offset, std::uint64_t size_bytes);

  std::vector<Node> nodes_;
  std::vector<std::uint32_t> spare_;  // indexes of unused nodes
  std::array<std::uint32_t, kBins> heads_;
  std::array<std::uint64_t, kBins / 64> bitmap_{};
  absl::flat_hash_map<std::uint64_t, std::uint32_t> by_start_;  // offset -> node
  absl::flat_hash_map<std::uint64_t, std::uint32_t> by_end_;    // offset + size -> node
  std::uint64_t free_bytes_ = 0;
};

}  // namespace gmlake::engine
