// LayoutCache::Shard: one device's part of a LayoutCache: its live blocks, its LRU cache of freed blocks and
// its stats, under one mutex.
//
// Structures (every block is an Entry owning its VmmRange; an Entry never moves in memory):
//   live_list_  the live blocks (list order means nothing); live_ indexes them by address.
//   cached_     the cached blocks, least recently released first (the eviction order).
//   by_layout_  per layout, the newest and oldest cached Entry of that layout; the entries of one layout are
//               chained through newer/older (a doubly linked list inside cached_'s order), so a hit takes the
//               newest of its layout and an eviction unlinks the oldest overall, both O(1).
// Invariants (check_invariants): cached_bytes_ / cached_.size() equal a recount and are within the bounds;
// each layout chain holds exactly the cached entries of that layout, newest to oldest in cached_'s order;
// live_ indexes exactly live_list_, every use count >= 1; the stats' gauges equal a recount.
#pragma once

#include <cstdint>
#include <list>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "gmlake/error.h"
#include "gmlake/mutex.h"
#include "gmlake/classic/layout_cache.h"
#include "gmlake/classic/vmm_range.h"

namespace gmlake::classic {

class LayoutCache::Shard {
 public:
  Shard(Backend& backend, const LayoutCacheOptions& options) : backend_(backend), options_(options) {}
  // Destroys every Entry: each VmmRange gives its memory back.
  ~Shard() = default;

  void* allocate(const Layout& layout);
  void retain(void* ptr);
  void release(void* ptr);
  std::uint64_t use_count(const void* ptr) const;
  void clear();
  LayoutCacheStats stats() const;
  void check_invariants() const;
  const Backend& backend() const { return backend_; }

 private:
  struct Entry {
    Layout layout;
    VmmRange range;
    std::uint64_t use_count = 0;
    std::list<Entry>::iterator self{};  // this entry's node, valid in whichever list holds it
    Entry* newer = nullptr;             // in its layout's chain, while cached
    Entry* older = nullptr;
  };
  using EntryList = std::list<Entry>;
  struct Chain {
    Entry* newest = nullptr;
    Entry* oldest = nullptr;
  };
  struct LayoutHash {
    std::size_t operator()(const Layout& l) const {
      return absl::Hash<std::pair<std::uint64_t, std::uint64_t>>()({l.size_bytes, l.alignment_bytes});
    }
  };

  using ChainMap = absl::flat_hash_map<Layout, Chain, LayoutHash>;

  void* take_cached(ChainMap::iterator chain) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void* map_new(const Layout& layout, std::uint64_t region_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  VmmRange map_region(const Layout& layout, std::uint64_t region_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  VmmRange try_map_region(std::uint64_t region_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void cache(EntryList::iterator it, ChainMap::iterator chain) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void give_back(EntryList& list, EntryList::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void evict_oldest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void unlink(Entry& entry, ChainMap::iterator chain) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  EntryList::iterator find_live(const void* ptr, const char* call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  [[noreturn]] void throw_out_of_memory(const Layout& layout, const OutOfMemoryError& cause)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  Backend& backend_;
  const LayoutCacheOptions options_;
  mutable absl::Mutex mutex_;
  EntryList live_list_ ABSL_GUARDED_BY(mutex_);
  EntryList cached_ ABSL_GUARDED_BY(mutex_);  // least recently released first
  absl::flat_hash_map<std::uintptr_t, EntryList::iterator> live_ ABSL_GUARDED_BY(mutex_);
  ChainMap by_layout_ ABSL_GUARDED_BY(mutex_);
  std::uint64_t cached_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  std::uint64_t hits_ ABSL_GUARDED_BY(mutex_) = 0;
  std::uint64_t misses_ ABSL_GUARDED_BY(mutex_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gmlake::classic
