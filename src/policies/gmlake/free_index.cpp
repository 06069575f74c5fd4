#include "free_index.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include "gmlake/units.h"

namespace gmlake::engine {
static_assert(kRoundBytes == std::uint64_t{1} << FreeIndex::kRoundShift);

FreeIndex::FreeIndex(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {
  heads_.fill(kNone);
  add(0, capacity_bytes, /*free=*/true, kNone);
}

void FreeIndex::link(std::uint32_t index, unsigned bin) {
  Node& n = nodes_[index];
  n.bin = static_cast<std::uint16_t>(bin);
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

std::uint32_t FreeIndex::add(std::uint64_t offset, std::uint64_t size_bytes, bool free, std::uint32_t after) {
  std::uint32_t index;
  if (!spare_.empty()) {
    index = spare_.back();
    spare_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& n = nodes_[index];
  n.offset = offset;
  n.size_bytes = size_bytes;
  n.free = free;
  n.live = true;
  n.addr_prev = after;
  n.addr_next = after == kNone ? first_ : nodes_[after].addr_next;
  if (after != kNone) nodes_[after].addr_next = index; else first_ = index;
  if (n.addr_next != kNone) nodes_[n.addr_next].addr_prev = index;
  if (free) {
    link(index, bin_of(size_bytes));
    free_bytes_ += size_bytes;
    ++free_count_;
  }
  return index;
}

void FreeIndex::remove(std::uint32_t index) {
  Node& n = nodes_[index];
  if (n.free) {
    unlink(index);
    free_bytes_ -= n.size_bytes;
    --free_count_;
  }
  if (n.addr_prev != kNone) nodes_[n.addr_prev].addr_next = n.addr_next; else first_ = n.addr_next;
  if (n.addr_next != kNone) nodes_[n.addr_next].addr_prev = n.addr_prev;
  n.live = false;
  spare_.push_back(index);
}

void FreeIndex::resize_free(std::uint32_t index, std::uint64_t offset, std::uint64_t size_bytes) {
  Node& n = nodes_[index];
  free_bytes_ = free_bytes_ - n.size_bytes + size_bytes;
  const unsigned bin = bin_of(size_bytes);
  const bool rebin = bin != n.bin;
  if (rebin) unlink(index);
  n.offset = offset;
  n.size_bytes = size_bytes;
  if (rebin) link(index, bin);
}

PieceId FreeIndex::take(const FreeRange& from, std::uint64_t offset, std::uint64_t size_bytes) {
  const std::uint32_t index = from.piece;
  if (index >= nodes_.size() || !nodes_[index].live || !nodes_[index].free || nodes_[index].offset != from.offset ||
      nodes_[index].size_bytes != from.size_bytes || offset < from.offset ||
      offset + size_bytes > from.offset + from.size_bytes || size_bytes == 0) {
    throw std::logic_error("FreeIndex::take: range is not inside the given free range");
  }
  const std::uint64_t end = offset + size_bytes;
  const std::uint64_t from_end = from.offset + from.size_bytes;
  if (offset == from.offset && end == from_end) {  // all of it: the node itself becomes the used piece
    Node& n = nodes_[index];
    unlink(index);
    n.free = false;
    free_bytes_ -= n.size_bytes;
    --free_count_;
    return index;
  }
  if (offset == from.offset) {  // its start: the node keeps the rest (and its place in its bin, if its class stays)
    resize_free(index, end, from_end - end);
    return add(offset, size_bytes, /*free=*/false, nodes_[index].addr_prev);
  }
  resize_free(index, from.offset, offset - from.offset);
  const std::uint32_t used = add(offset, size_bytes, /*free=*/false, index);
  if (end < from_end) add(end, from_end - end, /*free=*/true, used);
  return used;
}

void FreeIndex::give(PieceId piece) {
  if (piece >= nodes_.size() || !nodes_[piece].live || nodes_[piece].free) {
    throw std::logic_error("FreeIndex::give: not a used piece");
  }
  const Node& n = nodes_[piece];
  const std::uint32_t prev = n.addr_prev != kNone && nodes_[n.addr_prev].free ? n.addr_prev : kNone;
  const std::uint32_t next = n.addr_next != kNone && nodes_[n.addr_next].free ? n.addr_next : kNone;
  const std::uint64_t offset = n.offset, end = n.offset + n.size_bytes;
  // A free neighbour absorbs the piece (keeping its place in its bin unless its class changes), the lower one
  // when both are free; with none free, the piece itself turns free, first in its bin.
  if (prev != kNone) {
    const std::uint64_t merged_end = next != kNone ? nodes_[next].offset + nodes_[next].size_bytes : end;
    remove(piece);
    if (next != kNone) remove(next);
    resize_free(prev, nodes_[prev].offset, merged_end - nodes_[prev].offset);
  } else if (next != kNone) {
    const std::uint64_t merged_end = nodes_[next].offset + nodes_[next].size_bytes;
    remove(piece);
    resize_free(next, offset, merged_end - offset);
  } else {
    Node& m = nodes_[piece];
    m.free = true;
    link(piece, bin_of(m.size_bytes));
    free_bytes_ += m.size_bytes;
    ++free_count_;
  }
}

bool FreeIndex::used(PieceId piece) const {
  return piece < nodes_.size() && nodes_[piece].live && !nodes_[piece].free;
}

std::vector<FreeRange> FreeIndex::ranges() const {
  std::vector<FreeRange> out;
  out.reserve(free_count_);
  for (std::uint32_t i = first_; i != kNone; i = nodes_[i].addr_next) {
    if (nodes_[i].free) out.push_back({nodes_[i].offset, nodes_[i].size_bytes, i});
  }
  return out;
}

void FreeIndex::check_invariants() const {
  auto broken = [](const std::string& what) { throw std::logic_error("FreeIndex invariant broken: " + what); };
  // The pieces tile [0, capacity) in address order, linked both ways, no two free neighbours.
  std::uint64_t expect = 0, sum = 0, free_pieces = 0, pieces = 0;
  std::uint32_t prev = kNone;
  for (std::uint32_t i = first_; i != kNone; prev = i, i = nodes_[i].addr_next) {
    const Node& n = nodes_[i];
    if (!n.live) broken("a spare node in the address list");
    if (n.addr_prev != prev) broken("address list back link");
    if (n.offset != expect) broken("gap or overlap at offset " + std::to_string(n.offset));
    if (n.size_bytes == 0) broken("empty piece");
    if (n.free && prev != kNone && nodes_[prev].free) broken("two free neighbours not coalesced");
    expect = n.offset + n.size_bytes;
    if (n.free) {
      sum += n.size_bytes;
      ++free_pieces;
    }
    if (++pieces > nodes_.size()) broken("the address list loops");
  }
  if (expect != capacity_bytes_) broken("the pieces do not reach the capacity");
  if (pieces + spare_.size() != nodes_.size()) broken("nodes neither in the list nor spare");
  std::uint64_t linked = 0;
  for (unsigned bin = 0; bin < kBins; ++bin) {
    const bool marked = (bitmap_[bin / 64] >> (bin % 64)) & 1;
    if (marked != (heads_[bin] != kNone)) broken("bitmap differs from bin " + std::to_string(bin));
    std::uint32_t bprev = kNone;
    for (std::uint32_t i = heads_[bin]; i != kNone; bprev = i, i = nodes_[i].next) {
      const Node& n = nodes_[i];
      if (n.prev != bprev) broken("bin list back link");
      if (!n.live || !n.free) broken("a used or spare piece in a bin");
      if (n.bin != bin || bin_of(n.size_bytes) != bin) broken("range in the wrong bin");
      if (++linked > nodes_.size()) broken("a bin list loops");
    }
  }
  if (linked != free_pieces || free_pieces != free_count_) broken("bins, free pieces and range_count differ");
  if (sum != free_bytes_) broken("free_bytes differs from the recount");
}

}  // namespace gmlake::engine
