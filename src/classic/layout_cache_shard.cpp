// LayoutCache::Shard: one device's live table and LRU cache. Every mutation that can fail (a backend call, a
// hash-table insert) runs before the first change to the structures, so an error leaves the shard as it was.
#include "layout_cache_shard.h"

#include <stdexcept>
#include <string>

#include "gmlake/units.h"

namespace gmlake::classic {
namespace {

[[noreturn]] void invalid(const std::string& why) { throw Error(ErrorCode::kInvalidArgument, "LayoutCache: " + why); }

[[noreturn]] void fail(const std::string& what) { throw std::logic_error("LayoutCache invariant: " + what); }

std::int64_t as_gauge(std::uint64_t bytes) { return static_cast<std::int64_t>(bytes); }

std::uintptr_t address_of(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }

}  // namespace

void* LayoutCache::Shard::allocate(const Layout& layout) {
  const std::uint64_t granularity = backend_.granularity_bytes();
  if (!is_pow2(layout.alignment_bytes) || layout.alignment_bytes > granularity) {
    invalid("alignment_bytes " + std::to_string(layout.alignment_bytes) +
            " is not a power of two up to the backend's granularity " + std::to_string(granularity));
  }
  if (layout.size_bytes == 0) return nullptr;
  std::uint64_t region_bytes = 0;
  if (!checked_round_up(layout.size_bytes, granularity, &region_bytes)) invalid("size_bytes overflows");
  MutexLock lock(&mutex_);
  live_.reserve(live_.size() + 1);  // so the insert that ends allocate cannot throw
  const auto chain = by_layout_.find(layout);
  if (chain != by_layout_.end()) return take_cached(chain);
  return map_new(layout, region_bytes);
}

void* LayoutCache::Shard::take_cached(ChainMap::iterator chain) {
  Entry& entry = *chain->second.newest;
  const std::uint64_t region_bytes = entry.range.reserved_bytes();
  unlink(entry, chain);
  cached_bytes_ -= region_bytes;
  live_list_.splice(live_list_.end(), cached_, entry.self);
  entry.use_count = 1;
  live_.emplace(entry.range.base(), entry.self);
  ++hits_;
  ++stats_.num_allocs;
  stats_.allocated_bytes.increase(as_gauge(region_bytes));
  stats_.requested_bytes.increase(as_gauge(entry.layout.size_bytes));
  return entry.range.data();
}

void* LayoutCache::Shard::map_new(const Layout& layout, std::uint64_t region_bytes) {
  VmmRange range = map_region(layout, region_bytes);
  live_list_.push_back(Entry{layout, std::move(range), 1});
  const auto it = std::prev(live_list_.end());
  it->self = it;
  live_.emplace(it->range.base(), it);
  ++misses_;
  ++stats_.num_allocs;
  ++stats_.chunks_created;
  stats_.allocated_bytes.increase(as_gauge(region_bytes));
  stats_.requested_bytes.increase(as_gauge(layout.size_bytes));
  stats_.reserved_bytes.increase(as_gauge(region_bytes));
  return it->range.data();
}

VmmRange LayoutCache::Shard::try_map_region(std::uint64_t region_bytes) {
  VmmRange range(backend_, region_bytes);
  range.map_chunks(region_bytes);
  return range;
}

// A new region for a miss. When the backend is out of memory, gives the whole cache back and tries once more.
VmmRange LayoutCache::Shard::map_region(const Layout& layout, std::uint64_t region_bytes) {
  try {
    return try_map_region(region_bytes);
  } catch (const OutOfMemoryError& e) {
    if (cached_.empty()) throw_out_of_memory(layout, e);
  }
  ++stats_.num_alloc_retries;
  while (!cached_.empty()) evict_oldest();
  try {
    return try_map_region(region_bytes);
  } catch (const OutOfMemoryError& e) {
    throw_out_of_memory(layout, e);
  }
}

void LayoutCache::Shard::throw_out_of_memory(const Layout& layout, const OutOfMemoryError& cause) {
  ++stats_.num_ooms;
  throw OutOfMemoryError(layout.size_bytes, static_cast<std::uint64_t>(stats_.reserved_bytes.current),
                         static_cast<std::uint64_t>(stats_.allocated_bytes.current), 0,
                         std::string("layout cache: the backend has no memory left: ") + cause.what());
}

LayoutCache::Shard::EntryList::iterator LayoutCache::Shard::find_live(const void* ptr, const char* call) {
  const auto found = live_.find(address_of(ptr));
  if (found == live_.end()) {
    ++stats_.invalid_frees;
    throw Error(ErrorCode::kInvalidPointer, std::string("LayoutCache::") + call +
                                                ": pointer is not a live block of this device (never allocated, "
                                                "already released to zero, or interior)");
  }
  return found->second;
}

void LayoutCache::Shard::retain(void* ptr) {
  if (ptr == nullptr) return;
  MutexLock lock(&mutex_);
  ++find_live(ptr, "retain")->use_count;
}

void LayoutCache::Shard::release(void* ptr) {
  if (ptr == nullptr) return;
  MutexLock lock(&mutex_);
  const auto it = find_live(ptr, "release");
  if (it->use_count > 1) {
    --it->use_count;
    return;
  }
  const std::uint64_t region_bytes = it->range.reserved_bytes();
  const bool cacheable = options_.max_cached_entries != 0 && region_bytes <= options_.max_cached_bytes;
  const auto chain = cacheable ? by_layout_.try_emplace(it->layout).first : by_layout_.end();  // may throw: first
  live_.erase(it->range.base());
  it->use_count = 0;
  ++stats_.num_frees;
  stats_.allocated_bytes.decrease(as_gauge(region_bytes));
  stats_.requested_bytes.decrease(as_gauge(it->layout.size_bytes));
  if (!cacheable) {
    give_back(live_list_, it);
    return;
  }
  cache(it, chain);
  while (cached_bytes_ > options_.max_cached_bytes || cached_.size() > options_.max_cached_entries) evict_oldest();
}

// Moves a just-released entry to the newest end of the cache and of its layout's chain.
void LayoutCache::Shard::cache(EntryList::iterator it, ChainMap::iterator chain) {
  cached_.splice(cached_.end(), live_list_, it);
  Entry& entry = *it;
  Chain& c = chain->second;
  entry.newer = nullptr;
  entry.older = c.newest;
  if (c.newest != nullptr) c.newest->newer = &entry;
  c.newest = &entry;
  if (c.oldest == nullptr) c.oldest = &entry;
  cached_bytes_ += entry.range.reserved_bytes();
}

void LayoutCache::Shard::unlink(Entry& entry, ChainMap::iterator chain) {
  Chain& c = chain->second;
  (entry.newer != nullptr ? entry.newer->older : c.newest) = entry.older;
  (entry.older != nullptr ? entry.older->newer : c.oldest) = entry.newer;
  entry.newer = entry.older = nullptr;
  if (c.newest == nullptr) by_layout_.erase(chain);
}

void LayoutCache::Shard::evict_oldest() {
  Entry& entry = cached_.front();
  unlink(entry, by_layout_.find(entry.layout));
  cached_bytes_ -= entry.range.reserved_bytes();
  ++stats_.evictions;
  give_back(cached_, cached_.begin());
}

// Destroys the entry: its VmmRange unmaps, releases and frees its region.
void LayoutCache::Shard::give_back(EntryList& list, EntryList::iterator it) {
  ++stats_.chunks_released;
  stats_.reserved_bytes.decrease(as_gauge(it->range.reserved_bytes()));
  list.erase(it);
}

std::uint64_t LayoutCache::Shard::use_count(const void* ptr) const {
  MutexLock lock(&mutex_);
  const auto found = live_.find(address_of(ptr));
  return found == live_.end() ? 0 : found->second->use_count;
}

void LayoutCache::Shard::clear() {
  MutexLock lock(&mutex_);
  while (!cached_.empty()) evict_oldest();
}

LayoutCacheStats LayoutCache::Shard::stats() const {
  MutexLock lock(&mutex_);
  LayoutCacheStats s;
  s.pool = stats_;
  s.pool.backend_calls = backend_.counters();
  s.hits = hits_;
  s.misses = misses_;
  s.cached_bytes = cached_bytes_;
  s.cached_entries = cached_.size();
  s.live_blocks = live_list_.size();
  return s;
}

void LayoutCache::Shard::check_invariants() const {
  MutexLock lock(&mutex_);
  std::uint64_t cached_bytes = 0;
  absl::flat_hash_map<Layout, std::uint64_t, LayoutHash> per_layout;
  for (const Entry& entry : cached_) {
    if (entry.use_count != 0) fail("a cached block has users");
    cached_bytes += entry.range.reserved_bytes();
    ++per_layout[entry.layout];
  }
  if (cached_bytes != cached_bytes_) fail("cached_bytes != a recount");
  if (cached_bytes_ > options_.max_cached_bytes || cached_.size() > options_.max_cached_entries) {
    fail("the cache is over its bounds");
  }
  if (per_layout.size() != by_layout_.size()) fail("by_layout_ has a layout with no cached block, or lacks one");
  for (const auto& [layout, chain] : by_layout_) {
    std::uint64_t n = 0;
    const Entry* newer = nullptr;
    for (const Entry* e = chain.newest; e != nullptr; newer = e, e = e->older, ++n) {
      if (!(e->layout == layout)) fail("a chain holds another layout's block");
      if (e->newer != newer) fail("a chain's links disagree");
    }
    if (newer != chain.oldest) fail("a chain's oldest end is wrong");
    if (n != per_layout[layout]) fail("a chain does not hold exactly its layout's cached blocks");
  }
  if (live_.size() != live_list_.size()) fail("live_ does not index exactly the live blocks");
  std::uint64_t allocated = 0, requested = 0;
  for (const Entry& entry : live_list_) {
    if (entry.use_count == 0) fail("a live block has no user");
    const auto found = live_.find(entry.range.base());
    if (found == live_.end() || &*found->second != &entry) fail("live_ points elsewhere");
    allocated += entry.range.reserved_bytes();
    requested += entry.layout.size_bytes;
  }
  if (stats_.allocated_bytes.current != as_gauge(allocated)) fail("allocated_bytes != a recount");
  if (stats_.requested_bytes.current != as_gauge(requested)) fail("requested_bytes != a recount");
  if (stats_.reserved_bytes.current != as_gauge(allocated + cached_bytes)) fail("reserved_bytes != a recount");
  if (stats_.chunks_created - stats_.chunks_released != live_list_.size() + cached_.size()) {
    fail("chunks created - released != blocks held");
  }
}

}  // namespace gmlake::classic
