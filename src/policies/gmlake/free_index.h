// FreeIndex: the free ranges of one arena's virtual space, for good-fit placement with splitting and
// coalescing. Offsets and sizes are bytes from the arena's base, multiples of 512 B (kRoundBytes).
//
// Structure: the arena is tiled by pieces, each free or used (one per live or pending block), linked in address
// order as PyTorch's allocator links the blocks of a segment (Block::prev / next in CUDACachingAllocator.cpp),
// so a freed piece finds its neighbours through its links, with no lookup. The free pieces also sit in size-class
// bins (a two-level segregated fit, after TLSF: Masmano et al., "TLSF: a New Dynamic Memory Allocator for
// Real-Time Systems", ECRTS 2004): 8 classes per power of two, each bin a doubly linked list (most recently freed
// first), with a bitmap of non-empty bins. Every operation is O(1) apart from the bounded candidate walk of
// best_fit; none hashes.
//
// It knows nothing of physical memory: whether a free range is mapped is the page table's business.
//
// Invariants (check_invariants): the pieces, in address order from offset 0, tile [0, capacity) exactly, each
// non-empty and linked both ways; no two free pieces are neighbours (coalesced on give); the bins hold exactly
// the free pieces, each in the bin of its size; the bitmap marks exactly the non-empty bins;
//   free_bytes() = sum of the free pieces' sizes;  range_count() = their number.
// Thread safety: none (the owning allocator is serialized by its caller).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <vector>


namespace gmlake::engine {

// A free range as best_fit visits it; `piece` names it for take().
struct FreeRange {
  std::uint64_t offset;
  std::uint64_t size_bytes;
  std::uint32_t piece = 0;
};

// A used piece: what take() returns and give() takes back.
using PieceId = std::uint32_t;

struct Fit {
  FreeRange range;  // size_bytes 0: nothing large enough
  bool accepted;    // the visitor accepted it (else it is the first candidate, which the visitor declined)
};

class FreeIndex {
 public:
  static constexpr unsigned kRoundShift = 9;  // sizes are counted in units of 512 B (kRoundBytes)

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
    auto consider = [&](const Node& n, std::uint32_t index) {
      const FreeRange r{n.offset, n.size_bytes, index};
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
      if (nodes_[i].size_bytes >= size_bytes && consider(nodes_[i], i)) return fit;
    }
    for (unsigned bin = next_nonempty(own + 1); bin < kBins; bin = next_nonempty(bin + 1)) {
      for (std::uint32_t i = heads_[bin]; i != kNone; i = nodes_[i].next) {
        if (consider(nodes_[i], i)) return fit;
      }
    }
    return fit;
  }

  // The range best_fit(size_bytes, ...) visits first, or a zero-size range when none is large enough: the most
  // recently freed range of the request's own size class that is large enough (among its first kOwnBinScan),
  // else the most recently freed range of the next non-empty larger class. O(1), as best_fit's first step.
  FreeRange first_candidate(std::uint64_t size_bytes) const {
    const unsigned own = bin_of(size_bytes);
    std::uint32_t scanned = 0;
    for (std::uint32_t i = heads_[own]; i != kNone && scanned < kOwnBinScan; i = nodes_[i].next, ++scanned) {
      if (nodes_[i].size_bytes >= size_bytes) return {nodes_[i].offset, nodes_[i].size_bytes, i};
    }
    const unsigned bin = next_nonempty(own + 1);
    if (bin == kBins) return {0, 0};
    const Node& n = nodes_[heads_[bin]];
    return {n.offset, n.size_bytes, heads_[bin]};
  }

  // Removes [offset, offset+size_bytes) from free range `from` (as best_fit visited it, unchanged since); what
  // is left on either side stays free. Returns the used piece, for give(). Throws std::logic_error when `from` is
  // not a free range of this index or does not contain the range (nothing changes).
  PieceId take(const FreeRange& from, std::uint64_t offset, std::uint64_t size_bytes);
  // Frees used piece `piece` (from take), coalescing it with free neighbours. Throws std::logic_error when it is
  // not a used piece of this index (nothing changes).
  void give(PieceId piece);
  // True when `piece` is a used piece of this index (checks); extent() is then its range.
  bool used(PieceId piece) const;
  FreeRange extent(PieceId piece) const { return {nodes_[piece].offset, nodes_[piece].size_bytes, piece}; }

  std::uint64_t free_bytes() const { return free_bytes_; }
  std::uint64_t range_count() const { return free_count_; }
  // Every free range, in address order. O(pieces): for checks and snapshots.
  std::vector<FreeRange> ranges() const;
  void check_invariants() const;

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  static constexpr unsigned kBins = 256;
  static constexpr unsigned kSubBinShift = 3;  // 8 classes per power of two
  static constexpr std::uint32_t kOwnBinScan = 16;  // entries of the request's own bin examined at most

  struct Node {
    std::uint64_t offset;
    std::uint64_t size_bytes;
    std::uint32_t prev, next;            // bin list (free pieces only)
    std::uint32_t addr_prev, addr_next;  // neighbours in address order (kNone at the ends)
    std::uint16_t bin;
    bool free;
    bool live;                           // false: a spare node
  };

  // The bin of a free piece of `size_bytes`. Inline: every link, resize and search computes one.
  static unsigned bin_of(std::uint64_t size_bytes) {
    const std::uint64_t units = size_bytes >> kRoundShift;
    if (units < (1u << kSubBinShift)) return static_cast<unsigned>(units);
    const unsigned log2 = 63u - static_cast<unsigned>(std::countl_zero(units));
    const unsigned sub = static_cast<unsigned>(units >> (log2 - kSubBinShift)) & ((1u << kSubBinShift) - 1);
    return std::min<unsigned>(kBins - 1, ((log2 - kSubBinShift + 1) << kSubBinShift) + sub);
  }
  // The first non-empty bin at or past `from`, or kBins. Inline: best_fit looks for one per larger bin it visits.
  unsigned next_nonempty(unsigned from) const {
    for (unsigned word = from / 64; word < bitmap_.size(); ++word) {
      std::uint64_t bits = bitmap_[word];
      if (word == from / 64) bits &= ~std::uint64_t{0} << (from % 64);
      if (bits) return word * 64 + static_cast<unsigned>(std::countr_zero(bits));
    }
    return kBins;
  }
  // The steps of take() and give(), inline (defined in free_index.cpp, their only user): each take or give makes
  // two to four of them, and the calls cost about what the steps do.
  // A new node (spare or appended) for [offset, offset + size_bytes), free or used, linked after `after` in
  // address order (kNone: first); free ones go first in their bin.
  inline std::uint32_t add(std::uint64_t offset, std::uint64_t size_bytes, bool free, std::uint32_t after);
  // Unlinks node `index` from the address list (and its bin when free) and makes it spare.
  inline void remove(std::uint32_t index);
  // Free node `index` goes first in bin `bin` (bin_of its size, which the caller has at hand), or leaves its bin.
  inline void link(std::uint32_t index, unsigned bin);
  inline void unlink(std::uint32_t index);
  // Free node `index` gets a new extent, moving bins when its size class changes (else it keeps its place).
  inline void resize_free(std::uint32_t index, std::uint64_t offset, std::uint64_t size_bytes);

  std::vector<Node> nodes_;
  std::vector<std::uint32_t> spare_;  // indexes of unused nodes
  std::array<std::uint32_t, kBins> heads_;
  std::array<std::uint64_t, kBins / 64> bitmap_{};
  std::uint32_t first_ = kNone;  // the piece at offset 0
  std::uint64_t capacity_bytes_;
  std::uint64_t free_bytes_ = 0;
  std::uint64_t free_count_ = 0;
};

}  // namespace gmlake::engine
