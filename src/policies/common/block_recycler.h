// BlockRecycler: storage for Block objects that recycles them, so that splitting and merging on the hot path
// allocate no memory once the recycler has grown to the working set. Blocks never move (a deque keeps them in
// place).
//
// Thread safety: none (the owning policy is used under one lock).
#pragma once

#include <deque>
#include <vector>

#include "block.h"

namespace gmlake::policy {

class BlockRecycler {
 public:
  // A block in its default state (kFree, no neighbours, no segment). Valid until recycle().
  Block* acquire() {
    if (spare_.empty()) return &storage_.emplace_back();
    Block* b = spare_.back();
    spare_.pop_back();
    *b = Block{};
    return b;
  }
  // Returns `b` for reuse; the caller holds no pointer to it any more.
  void recycle(Block* b) { spare_.push_back(b); }
  // Blocks handed out and not recycled.
  std::size_t in_use() const { return storage_.size() - spare_.size(); }

 private:
  std::deque<Block> storage_;
  std::vector<Block*> spare_;
};

}  // namespace gmlake::policy
