#include "free_index.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include "gmlake/units.h"

namespace gmlake::engine {
namespace {

constexpr unsigned kRoundShift = 9;  // 512 B units
static_assert(kRoundBytes == std::uint64_t{1} << kRoundShift);
constexpr unsigned kSubBinShift = 3;  // 8 classes per power of two

}  // namespace

FreeIndex::FreeIndex(std::uint64_t capacity_bytes) {
  heads_.fill(kNone);
  add(0, capacity_bytes);
}

unsigned FreeIndex::bin_of(std::uint64_t size_bytes) {
  const std::uint64_t units = size_bytes >> kRoundShift;
  if (units < (1u << kSubBinShift)) return static_cast<unsigned>(units);
  const unsigned log2 = 63u - static_cast<unsigned>(std::countl_zero(units));
  const unsigned sub = static_cast<unsigned>(units >> (log2 - kSubBinShift)) & ((1u << kSubBinShift) - 1);
  return std::min<unsigned>(kBins - 1, ((log2 - kSubBinShift + 1) << kSubBinShift) + sub);
}

unsigned FreeIndex::next_nonempty(unsigned from) const {
  for (unsigned word = from / 64; word < bitmap_.size(); ++word) {
    std::uint64_t bits = bitmap_[word];
    if (word == from / 64) bits &= ~std::uint64_t{0} << (from % 64);
    if (bits) return word * 64 + static_cast<unsigned>(std::countr_zero(bits));
  }
  return kBins;
}

void FreeIndex::link(std::uint32_t index) {
  Node& n = nodes_[index];
  n.bin = static_cast<std::uint16_t>(bin_of(n.size_bytes));
  n.prev = kNone;
  n.next = heads_[n.bin];
  if (n.next != kNone) nodes_[n.next].prev = index;
  heads_[n.bin] = index;
  bitmap_[n.bin / 64] |= std::uint64_t{1} << (n.bin % 64);
}

void FreeIndex::unlink(std::uint32_t index) {
  const Node& n = nodes_[index];
  if (n.prev != kNone) nodes_[n.prev].next = n.next; else heads_[n.bin] = n.next;
  if (n.next != kNone) nodes_[n.next].prev = n.prev;
  if (heads_[n.bin] == kNone) bitmap_[n.bin / 64] &= ~(std::uint64_t{1} << (n.bin % 64));
}

std::uint32_t FreeIndex::add(std::uint64_t offset, std::uint64_t size_bytes) {
  std::uint32_t index;
  if (!spare_.empty()) {
    index = spare_.back();
    spare_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[index].offset = offset;
  nodes_[index].size_bytes = size_bytes;
  link(index);
  by_start_[offset] = index;
  by_end_[offset + size_bytes] = index;
  free_bytes_ += size_bytes;
  return index;
}

void FreeIndex::remove(std::uint32_t index) {
  const Node& n = nodes_[index];
  unlink(index);
  by_start_.erase(n.offset);
  by_end_.erase(n.offset + n.size_bytes);
  free_bytes_ -= n.size_bytes;
  spare_.push_back(index);
}

// Gives node `index` a new extent, touching only the maps and bin whose keys change.
void FreeIndex::resize(std::uint32_t index, std::uint64_t offset, std::uint64_t size_bytes) {
  Node& n = nodes_[index];
  if (offset != n.offset) {
    by_start_.erase(n.offset);
    by_start_[offset] = index;
  }
  if (offset + size_bytes != n.offset + n.size_bytes) {
    by_end_.erase(n.offset + n.size_bytes);
    by_end_[offset + size_bytes] = index;
  }
  free_bytes_ = free_bytes_ - n.size_bytes + size_bytes;
  const bool rebin = bin_of(size_bytes) != n.bin;
  if (rebin) unlink(index);
  n.offset = offset;
  n.size_bytes = size_bytes;
  if (rebin) link(index);
}

void FreeIndex::take(const FreeRange& from, std::uint64_t offset, std::uint64_t size_bytes) {
  auto it = by_start_.find(from.offset);
  if (it == by_start_.end() || nodes_[it->second].size_bytes != from.size_bytes || offset < from.offset ||
      offset + size_bytes > from.offset + from.size_bytes || size_bytes == 0) {
    throw std::logic_error("FreeIndex::take: range is not inside the given free range");
  }
  const std::uint32_t index = it->second;
  const std::uint64_t end = offset + size_bytes;
  const std::uint64_t from_end = from.offset + from.size_bytes;
  if (offset == from.offset && end == from_end) {
    remove(index);
  } else if (offset == from.offset) {
    resize(index, end, from_end - end);
  } else {
    resize(index, from.offset, offset - from.offset);
    if (end < from_end) add(end, from_end - end);
  }
}

void FreeIndex::give(std::uint64_t offset, std::uint64_t size_bytes) {
  const std::uint64_t end = offset + size_bytes;
  if (size_bytes == 0 || by_start_.count(offset) || by_end_.count(end)) {
    throw std::logic_error("FreeIndex::give: range is empty or overlaps a free range");
  }
  auto prev = by_end_.find(offset);
  auto next = by_start_.find(end);
  const std::uint32_t prev_index = prev == by_end_.end() ? kNone : prev->second;
  const std::uint32_t next_index = next == by_start_.end() ? kNone : next->second;
  if (prev_index != kNone && next_index != kNone) {
    const std::uint64_t next_end = end + nodes_[next_index].size_bytes;
    remove(next_index);
    resize(prev_index, nodes_[prev_index].offset, next_end - nodes_[prev_index].offset);
  } else if (prev_index != kNone) {
    resize(prev_index, nodes_[prev_index].offset, end - nodes_[prev_index].offset);
  } else if (next_index != kNone) {
    resize(next_index, offset, nodes_[next_index].offset + nodes_[next_index].size_bytes - offset);
  } else {
    add(offset, size_bytes);
  }
}

std::vector<FreeRange> FreeIndex::ranges() const {
  std::vector<FreeRange> out;
  out.reserve(by_start_.size());
  for (const auto& [offset, index] : by_start_) out.push_back({offset, nodes_[index].size_bytes});
  std::sort(out.begin(), out.end(), [](const FreeRange& a, const FreeRange& b) { return a.offset < b.offset; });
  return out;
}

void FreeIndex::check_invariants() const {
  auto broken = [](const std::string& what) { throw std::logic_error("FreeIndex invariant broken: " + what); };
  if (by_start_.size() != by_end_.size()) broken("start and end maps differ in size");
  std::uint64_t sum = 0, linked = 0;
  for (unsigned bin = 0; bin < kBins; ++bin) {
    const bool marked = (bitmap_[bin / 64] >> (bin % 64)) & 1;
    if (marked != (heads_[bin] != kNone)) broken("bitmap differs from bin " + std::to_string(bin));
    std::uint32_t prev = kNone;
    for (std::uint32_t i = heads_[bin]; i != kNone; prev = i, i = nodes_[i].next) {
      const Node& n = nodes_[i];
      if (n.prev != prev) broken("bin list back link");
      if (n.bin != bin || bin_of(n.size_bytes) != bin) broken("range in the wrong bin");
      if (n.size_bytes == 0) broken("empty range");
      auto s = by_start_.find(n.offset);
      auto e = by_end_.find(n.offset + n.size_bytes);
      if (s == by_start_.end() || s->second != i || e == by_end_.end() || e->second != i) broken("range not mapped");
      sum += n.size_bytes;
      ++linked;
    }
  }
  if (linked != by_start_.size()) broken("maps hold ranges that no bin holds");
  if (sum != free_bytes_) broken("free_bytes differs from the recount");
  const std::vector<FreeRange> sorted = ranges();
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i - 1].offset + sorted[i - 1].size_bytes >= sorted[i].offset) broken("ranges overlap or touch");
  }
}

}  // namespace gmlake::engine
