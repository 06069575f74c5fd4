// The ordered sets of blocks the reference policies search, with PyTorch's orders:
//
//   FreeBlockSet      (stream, size, address): BlockComparatorSize. lower_bound({stream, size}) is best fit:
//                     the smallest free block of that stream that holds `size`, the lowest address among equals.
//   UnmappedBlockSet  (stream, address): BlockComparatorAddress. lower_bound({stream}) is the stream's
//                     lowest-address unmapped range.
//
// Both hold Block pointers; a block's key fields must not change while it is in a set (take it out, change
// it, put it back). Nodes come from a pool resource the owner passes in, so the hot path does not call malloc
// once the pool has warmed up.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <set>
#include <tuple>

#include "block.h"

namespace gmlake::policy {

struct SizeKey {
  StreamId stream;
  std::uint64_t size_bytes;
  std::uintptr_t address = 0;
};

struct BySize {
  using is_transparent = void;
  static std::tuple<StreamId, std::uint64_t, std::uintptr_t> key(const Block* b) {
    return {b->stream, b->size_bytes, b->address};
  }
  static std::tuple<StreamId, std::uint64_t, std::uintptr_t> key(const SizeKey& k) {
    return {k.stream, k.size_bytes, k.address};
  }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return key(a) < key(b);
  }
};

struct AddressKey {
  StreamId stream;
  std::uintptr_t address = 0;
};

struct ByAddress {
  using is_transparent = void;
  static std::tuple<StreamId, std::uintptr_t> key(const Block* b) { return {b->stream, b->address}; }
  static std::tuple<StreamId, std::uintptr_t> key(const AddressKey& k) { return {k.stream, k.address}; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return key(a) < key(b);
  }
};

using FreeBlockSet = std::pmr::set<Block*, BySize>;
using UnmappedBlockSet = std::pmr::set<Block*, ByAddress>;

// True when `b` itself (not only an equal key) is in `set`.
template <class Set>
bool holds(const Set& set, const Block* b) {
  const auto it = set.find(b);
  return it != set.end() && *it == b;
}

}  // namespace gmlake::policy
