#include "engine/free_index.h"

#include <stdexcept>
#include <string>

namespace gmlake::engine {

FreeIndex::FreeIndex(std::uint64_t capacity_bytes) { insert(0, capacity_bytes); }

void FreeIndex::insert(std::uint64_t offset, std::uint64_t size_bytes) {
  by_addr_.emplace(offset, size_bytes);
  by_size_.emplace(size_bytes, offset);
  free_bytes_ += size_bytes;
}

void FreeIndex::erase(std::map<std::uint64_t, std::uint64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  free_bytes_ -= it->second;
  by_addr_.erase(it);
}

void FreeIndex::take(const FreeRange& from, std::uint64_t offset, std::uint64_t size_bytes) {
  auto it = by_addr_.find(from.offset);
  if (it == by_addr_.end() || it->second != from.size_bytes || offset < from.offset ||
      offset + size_bytes > from.offset + from.size_bytes) {
    throw std::logic_error("FreeIndex::take: range is not inside the given free range");
  }
  erase(it);
  if (offset > from.offset) insert(from.offset, offset - from.offset);
  const std::uint64_t end = offset + size_bytes;
  const std::uint64_t from_end = from.offset + from.size_bytes;
  if (end < from_end) insert(end, from_end - end);
}

void FreeIndex::give(std::uint64_t offset, std::uint64_t size_bytes) {
  std::uint64_t start = offset;
  std::uint64_t end = offset + size_bytes;
  auto next = by_addr_.lower_bound(offset);
  if (next != by_addr_.end() && next->first < end) throw std::logic_error("FreeIndex::give: range overlaps a free range");
  if (next != by_addr_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > start) throw std::logic_error("FreeIndex::give: range overlaps a free range");
    if (prev->first + prev->second == start) {
      start = prev->first;
      erase(prev);
    }
  }
  if (next != by_addr_.end() && next->first == end) {
    end += next->second;
    erase(next);
  }
  insert(start, end - start);
}

FreeRange FreeIndex::find(std::uint64_t offset) const {
  auto it = by_addr_.upper_bound(offset);
  if (it == by_addr_.begin()) return {0, 0};
  --it;
  if (offset < it->first + it->second) return {it->first, it->second};
  return {0, 0};
}

void FreeIndex::check_invariants() const {
  if (by_addr_.size() != by_size_.size()) throw std::logic_error("FreeIndex: index sizes differ");
  std::uint64_t sum = 0;
  std::uint64_t prev_end = 0;
  bool first = true;
  for (const auto& [offset, size] : by_addr_) {
    if (size == 0) throw std::logic_error("FreeIndex: empty range");
    if (!first && offset <= prev_end) {
      throw std::logic_error("FreeIndex: ranges overlap or touch at " + std::to_string(offset));
    }
    if (!by_size_.count({size, offset})) throw std::logic_error("FreeIndex: range missing from size index");
    sum += size;
    prev_end = offset + size;
    first = false;
  }
  if (sum != free_bytes_) throw std::logic_error("FreeIndex: free_bytes differs from recount");
}

}  // namespace gmlake::engine
