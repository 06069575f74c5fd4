// BlockPool: a LIFO stack of free block indices over a VmmRange that grows one region at a time.
#include "gmlake/classic/block_pool.h"

#include <stdexcept>
#include <string>

#include "gmlake/error.h"

namespace gmlake::classic {
namespace {

std::int64_t as_gauge(std::uint64_t bytes) { return static_cast<std::int64_t>(bytes); }

[[noreturn]] void fail(const std::string& what) { throw std::logic_error("BlockPool invariant: " + what); }

}  // namespace

BlockPool::BlockPool(Backend& backend, const BlockPoolOptions& options)
    : backend_(backend),
      geometry_(options, backend.granularity_bytes()),
      range_(backend, geometry_.reservation_bytes()) {
  grow();
}

void BlockPool::grow() {
  const std::uint64_t old_blocks = live_.size();
  const std::uint64_t new_blocks = geometry_.blocks_within(range_.mapped_bytes() + geometry_.region_bytes());
  // Host bookkeeping first (it may throw bad_alloc); trimmed back if the backend then fails.
  free_.reserve(new_blocks);
  live_.reserve(new_blocks);
  range_.map_chunks(geometry_.region_bytes());
  live_.resize(new_blocks, 0);
  // Pushed highest first, so the lowest new address is allocated first.
  for (std::uint64_t i = new_blocks; i > old_blocks; --i) free_.push_back(static_cast<std::uint32_t>(i - 1));
  ++stats_.chunks_created;
  stats_.reserved_bytes.increase(as_gauge(geometry_.region_bytes()));
}

void BlockPool::throw_exhausted(const std::string& reason) {
  ++stats_.num_ooms;
  throw OutOfMemoryError(geometry_.block_bytes(), range_.mapped_bytes(),
                         static_cast<std::uint64_t>(stats_.allocated_bytes.current), geometry_.reservation_bytes(),
                         reason);
}

void* BlockPool::allocate() {
  if (free_.empty()) {
    if (range_.chunk_count() == geometry_.max_regions()) throw_exhausted("block pool exhausted: every block is live");
    try {
      grow();
    } catch (const OutOfMemoryError& e) {
      throw_exhausted("block pool cannot grow: " + std::string(e.what()));
    }
  }
  const std::uint32_t index = free_.back();
  free_.pop_back();
  live_[index] = 1;
  ++stats_.num_allocs;
  stats_.allocated_bytes.increase(as_gauge(geometry_.stride_bytes()));
  stats_.requested_bytes.increase(as_gauge(geometry_.block_bytes()));
  return reinterpret_cast<void*>(geometry_.address_of(range_.base(), index));
}

void BlockPool::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  const std::uint64_t index = geometry_.index_of(range_.base(), reinterpret_cast<std::uintptr_t>(ptr), live_.size());
  if (index == BlockGeometry::kNoBlock || live_[index] == 0) {
    ++stats_.invalid_frees;
    throw Error(ErrorCode::kInvalidPointer,
                index == BlockGeometry::kNoBlock
                    ? "BlockPool::deallocate: pointer is not the start of a block of this pool"
                    : "BlockPool::deallocate: block is not live (freed twice?)");
  }
  live_[index] = 0;
  free_.push_back(static_cast<std::uint32_t>(index));  // never reallocates: reserved for every mapped block
  ++stats_.num_frees;
  stats_.allocated_bytes.decrease(as_gauge(geometry_.stride_bytes()));
  stats_.requested_bytes.decrease(as_gauge(geometry_.block_bytes()));
}

bool BlockPool::is_live(const void* ptr) const {
  const std::uint64_t index = geometry_.index_of(range_.base(), reinterpret_cast<std::uintptr_t>(ptr), live_.size());
  return index != BlockGeometry::kNoBlock && live_[index] != 0;
}

Stats BlockPool::stats() const {
  Stats s = stats_;
  s.backend_calls = backend_.counters();
  return s;
}

void BlockPool::check_invariants() const {
  std::vector<std::uint8_t> seen(live_.size(), 0);
  for (std::uint32_t index : free_) {
    if (index >= live_.size()) fail("the free list holds an index past the mapped blocks");
    if (live_[index] != 0) fail("the free list holds a live block");
    if (seen[index]++ != 0) fail("the free list holds a block twice");
  }
  std::uint64_t live_blocks = 0;
  for (std::uint8_t live : live_) live_blocks += live;
  if (live_blocks + free_.size() != live_.size()) fail("live + free blocks != mapped blocks");
  if (live_.size() != geometry_.blocks_within(range_.mapped_bytes())) fail("block count != mapped bytes / stride");
  if (stats_.allocated_bytes.current != as_gauge(live_blocks * geometry_.stride_bytes())) {
    fail("allocated_bytes != live blocks x stride");
  }
  if (stats_.requested_bytes.current != as_gauge(live_blocks * geometry_.block_bytes())) {
    fail("requested_bytes != live blocks x block_bytes");
  }
  if (stats_.reserved_bytes.current != as_gauge(range_.mapped_bytes())) fail("reserved_bytes != mapped bytes");
  if (stats_.num_allocs - stats_.num_frees != live_blocks) fail("num_allocs - num_frees != live blocks");
}

}  // namespace gmlake::classic
