// BlockTable: the live blocks of one allocator, by address, and everything a free touches before the policy
// gets the memory back: the pending (deferred) frees, the gauges of live memory, and the rejection of a free
// of anything but a live block. Every policy keeps one (the reference policies in BlockAllocator, the engine in
// StitchingAllocator, async in AsyncAllocator) and composes it; the policy's own record of a block (where it
// lies, how to give it back) rides along as `Record`.
//
// It does not place, split, merge, map or cache anything, and it never calls the backend: once the table has
// let go of a block, what happens to its memory is the policy's (give_back, below).
//
// A block's life: insert (allocated) -> begin_deferred_free (pending) -> release(kEndDeferredFree), or
// insert -> release(kDeallocate). Released blocks leave the table.
//
// The gauges and counters it updates, in the allocator's Stats (PyTorch's meanings; no one else writes them):
//   allocated_bytes  = sum of size_bytes      over blocks with !pending_free
//   active_bytes     = sum of size_bytes      over all blocks
//   requested_bytes  = sum of requested_bytes over blocks with !pending_free
//   num_allocs - num_frees = #{ blocks with !pending_free }   (a free counts once: at deallocate, or at
//                                                              begin_deferred_free)
//   invalid_frees    = the frees rejected with Error(kInvalidPointer)
// and for every block b:  0 < b.requested_bytes <= b.size_bytes.
// check_invariants() recounts them.
//
// Invalid frees (Error(kInvalidPointer), counted in invalid_frees; the table and the gauges are unchanged):
//   kUnknown         the address is no live block's start: never allocated, already freed (a double free
//                    once the first has completed), or an interior pointer
//   kAlreadyPending  deallocate or begin_deferred_free of a block whose free is pending (a double free)
//   kNotPending      end_deferred_free of a block with no pending free
// The message is "<prefix>: <call>(<pointer>): <reason>", in the words (InvalidFreeWords) the policy names.
//
// The rule for a failed release (release(), one place for every policy): the table commits the free first (the
// block leaves the table, the gauges drop, num_frees counts it), then the policy gives the memory back. A free
// is never undone: memory the policy cannot give back stays with the policy (cached, still reserved), and if
// give_back throws all the same, the exception propagates with the block freed.
//
// Thread safety: none, like every Allocator (its caller serializes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "gmlake/dcheck.h"
#include "gmlake/stats.h"
#include "gmlake/stream_events.h"

namespace gmlake::policy {

// The free call a pointer came in: it names the call in a rejection and decides which states are valid.
enum class FreeCall : std::uint8_t { kDeallocate, kBeginDeferredFree, kEndDeferredFree };
// "deallocate", "begin_deferred_free", "end_deferred_free".
const char* to_string(FreeCall call);

// Why a free was rejected (the header comment has each case).
enum class InvalidFree : std::uint8_t { kUnknown, kAlreadyPending, kNotPending };

// The words of a rejection: "<prefix>: <call>(<pointer>): <reason>". Each family of policies keeps its own
// (users and tests read them), so both are here.
struct InvalidFreeWords {
  std::string prefix;
  const char* unknown;         // kUnknown at deallocate or begin_deferred_free
  const char* unknown_at_end;  // kUnknown at end_deferred_free
  const char* already_pending;
  const char* not_pending;

  // The reference policies' words ("gmlake caching: ...", "gmlake expandable: ..."), `policy_name` as
  // to_string(Policy) spells it.
  static InvalidFreeWords reference(const char* policy_name);
  // The stitching engine's words ("gmlake: ...").
  static InvalidFreeWords engine();
  // The reason for `why` at `call`.
  const char* reason(FreeCall call, InvalidFree why) const;
};

// What the table keeps of a live block: the policy's Record (its fields are the block's fields) and these.
template <typename Record>
struct LiveBlock : Record {
  std::uint64_t size_bytes = 0;       // as placed (rounded); the gauges count this
  std::uint64_t requested_bytes = 0;  // as asked
  StreamId stream = 0;
  bool pending_free = false;  // between begin_deferred_free and end_deferred_free
};

namespace detail {
// Counts invalid_frees and throws Error(kInvalidPointer) worded by `words`.
[[noreturn]] void reject_free(Stats& stats, const InvalidFreeWords& words, const void* ptr, FreeCall call,
                              InvalidFree why);
// Throws std::logic_error("<prefix> block table invariant broken: <what>").
[[noreturn]] void table_broken(const InvalidFreeWords& words, const std::string& what);
}  // namespace detail

template <typename Record>
class BlockTable {
 public:
  using Block = LiveBlock<Record>;
  using Map = absl::flat_hash_map<std::uintptr_t, Block>;

  // `stats` is the allocator's (it must outlive the table); the table is the only writer of the gauges and
  // counters listed in the header comment. `words` word its rejections.
  BlockTable(InvalidFreeWords words, Stats& stats) : words_(std::move(words)), stats_(stats) {}
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  // A block handed out: `address` (not in the table) holds `size_bytes` (as placed) for a request of
  // `requested_bytes` (0 < requested_bytes <= size_bytes). allocated, active and requested bytes rise by
  // them; num_allocs counts it. Returns the new entry (valid until the next insert or release). Throws
  // std::bad_alloc only, changing nothing.
  Block& insert(std::uintptr_t address, std::uint64_t size_bytes, std::uint64_t requested_bytes, StreamId stream,
                const Record& record) {
    GMLAKE_DCHECK(requested_bytes != 0 && requested_bytes <= size_bytes, "a block smaller than its request");
    Block block;
    static_cast<Record&>(block) = record;
    block.size_bytes = size_bytes;
    block.requested_bytes = requested_bytes;
    block.stream = stream;
    const auto [it, inserted] = blocks_.try_emplace(address, block);
    GMLAKE_DCHECK(inserted, "a block placed at a live block's address");
    stats_.allocated_bytes.increase(static_cast<std::int64_t>(size_bytes));
    stats_.active_bytes.increase(static_cast<std::int64_t>(size_bytes));
    stats_.requested_bytes.increase(static_cast<std::int64_t>(requested_bytes));
    ++stats_.num_allocs;
    return it->second;
  }

  // begin_deferred_free(ptr): the block at `ptr` (allocated) turns pending: no longer allocated (allocated and
  // requested bytes drop, num_frees counts the free) but still active and in the table. Returns it (valid
  // until the next insert or release). Throws Error(kInvalidPointer) (kUnknown, kAlreadyPending), changing
  // nothing but invalid_frees.
  Block& begin_deferred_free(const void* ptr) {
    Block& b = live(ptr, FreeCall::kBeginDeferredFree)->second;
    b.pending_free = true;
    stats_.allocated_bytes.decrease(static_cast<std::int64_t>(b.size_bytes));
    stats_.requested_bytes.decrease(static_cast<std::int64_t>(b.requested_bytes));
    ++stats_.num_frees;
    return b;
  }

  // deallocate(ptr) (`call` kDeallocate: the block must be allocated) or end_deferred_free(ptr)
  // (kEndDeferredFree: pending). The rule for a failed release (header comment): first the free is
  // committed (the block leaves the table; active bytes drop, and for an allocated block allocated and
  // requested bytes too, and num_frees counts it), then give_back(address, block) returns its memory to the
  // policy. Throws Error(kInvalidPointer) (kUnknown, kAlreadyPending, kNotPending), changing nothing but
  // invalid_frees; what give_back throws propagates with the block freed.
  template <typename GiveBack>
  void release(const void* ptr, FreeCall call, GiveBack&& give_back) {
    GMLAKE_DCHECK(call != FreeCall::kBeginDeferredFree, "release of a begin_deferred_free");
    const auto it = live(ptr, call);
    const std::uintptr_t address = it->first;
    const Block b = it->second;
    blocks_.erase(it);
    stats_.active_bytes.decrease(static_cast<std::int64_t>(b.size_bytes));
    if (!b.pending_free) {
      stats_.allocated_bytes.decrease(static_cast<std::int64_t>(b.size_bytes));
      stats_.requested_bytes.decrease(static_cast<std::int64_t>(b.requested_bytes));
      ++stats_.num_frees;
    }
    std::forward<GiveBack>(give_back)(address, b);
  }

  // The live block starting at `address`, or null (any address, no error).
  const Block* find(std::uintptr_t address) const {
    const auto it = blocks_.find(address);
    return it == blocks_.end() ? nullptr : &it->second;
  }
  // The live block at `address`, which must be one (std::out_of_range otherwise).
  const Block& at(std::uintptr_t address) const { return blocks_.at(address); }
  std::size_t size() const { return blocks_.size(); }
  // Every live and pending block, as (address, block), in no particular order.
  typename Map::const_iterator begin() const { return blocks_.begin(); }
  typename Map::const_iterator end() const { return blocks_.end(); }

  // Recounts the equations of the header comment from the blocks. Throws std::logic_error naming the first
  // broken one. O(blocks).
  void check_invariants() const {
    std::int64_t allocated = 0, active = 0, requested = 0;
    std::uint64_t allocated_blocks = 0;
    for (const auto& [address, b] : blocks_) {
      if (b.requested_bytes == 0 || b.requested_bytes > b.size_bytes) {
        detail::table_broken(words_, "a block's requested size is 0 or larger than the block");
      }
      active += static_cast<std::int64_t>(b.size_bytes);
      if (b.pending_free) continue;
      allocated += static_cast<std::int64_t>(b.size_bytes);
      requested += static_cast<std::int64_t>(b.requested_bytes);
      ++allocated_blocks;
    }
    same(stats_.allocated_bytes, allocated, "allocated_bytes");
    same(stats_.active_bytes, active, "active_bytes");
    same(stats_.requested_bytes, requested, "requested_bytes");
    if (stats_.num_allocs - stats_.num_frees != allocated_blocks) {
      detail::table_broken(words_, "num_allocs - num_frees differs from the allocated blocks");
    }
  }

 private:
  // The block at `ptr`, valid for `call`; else rejects it.
  typename Map::iterator live(const void* ptr, FreeCall call) {
    const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == blocks_.end()) detail::reject_free(stats_, words_, ptr, call, InvalidFree::kUnknown);
    const bool want_pending = call == FreeCall::kEndDeferredFree;
    if (it->second.pending_free != want_pending) {
      detail::reject_free(stats_, words_, ptr, call,
                          want_pending ? InvalidFree::kNotPending : InvalidFree::kAlreadyPending);
    }
    return it;
  }

  void same(const Gauge& kept, std::int64_t counted, const char* name) const {
    if (kept.current != counted) detail::table_broken(words_, std::string(name) + " differs from the blocks' sum");
    if (kept.current < 0 || kept.peak < kept.current) {
      detail::table_broken(words_, std::string(name) + " has a bad current or peak");
    }
  }

  InvalidFreeWords words_;
  Stats& stats_;
  Map blocks_;
};

}  // namespace gmlake::policy
