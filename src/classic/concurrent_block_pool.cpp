// ConcurrentBlockPool: a tagged Treiber stack of block indices; growth under a mutex.
//
// Memory ordering: a block's slot (its `next` link) is written before the release swap of head_ that
// publishes it, and read after the acquire load of head_ that found it, so a pop always reads the link its
// pusher wrote, or fails its swap because the tag moved on. Segments and capacity_blocks_ are written before
// the blocks they cover are published (release), so any index a thread learns (from the list, or from a
// pointer checked against capacity_blocks_) has its segment visible.
#include "gmlake/classic/concurrent_block_pool.h"

#include <stdexcept>

#include "gmlake/error.h"

namespace gmlake::classic {
namespace {

constexpr std::uint64_t kLowMask = 0xFFFFFFFFu;

std::uint64_t with_top(std::uint64_t head, std::uint64_t top) { return (((head >> 32) + 1) << 32) | top; }

[[noreturn]] void fail(const std::string& what) { throw std::logic_error("ConcurrentBlockPool invariant: " + what); }

}  // namespace

ConcurrentBlockPool::ConcurrentBlockPool(Backend& backend, const BlockPoolOptions& options)
    : backend_(backend),
      geometry_(options, backend.granularity_bytes()),
      range_(backend, geometry_.reservation_bytes()),
      segments_((geometry_.max_blocks() + kSegmentSlots - 1) >> kSegmentShift),
      base_(range_.base()) {
  MutexLock lock(&grow_mutex_);
  grow_locked();
}

void ConcurrentBlockPool::grow_locked() {
  const std::uint64_t old_blocks = capacity_blocks_.load(std::memory_order_relaxed);
  const std::uint64_t new_blocks = geometry_.blocks_within(range_.mapped_bytes() + geometry_.region_bytes());
  // Host slots first (may throw bad_alloc; kept for the next try if the backend fails).
  for (std::uint64_t s = old_blocks >> kSegmentShift; s <= (new_blocks - 1) >> kSegmentShift; ++s) {
    if (!segments_[s]) segments_[s] = std::make_unique<Slot[]>(kSegmentSlots);
  }
  range_.map_chunks(geometry_.region_bytes());
  // Link the new blocks lowest first, so the lowest address is allocated first.
  for (std::uint64_t i = old_blocks; i + 1 < new_blocks; ++i) {
    slot(i).next.store(static_cast<std::uint32_t>(i + 2), std::memory_order_relaxed);
  }
  capacity_blocks_.store(new_blocks, std::memory_order_release);
  push_chain(static_cast<std::uint32_t>(old_blocks), static_cast<std::uint32_t>(new_blocks - 1));
}

// Pushes the linked run first -> ... -> last (linked through `next`) onto the free list in one swap.
void ConcurrentBlockPool::push_chain(std::uint32_t first, std::uint32_t last) {
  std::uint64_t head = head_.load(std::memory_order_relaxed);
  do {
    slot(last).next.store(static_cast<std::uint32_t>(head & kLowMask), std::memory_order_relaxed);
  } while (!head_.compare_exchange_weak(head, with_top(head, std::uint64_t{first} + 1), std::memory_order_release,
                                        std::memory_order_relaxed));
}

void ConcurrentBlockPool::throw_exhausted(const std::string& reason) {
  num_ooms_.fetch_add(1, std::memory_order_relaxed);
  const auto live = static_cast<std::uint64_t>(live_blocks_.load(std::memory_order_relaxed));
  throw OutOfMemoryError(geometry_.block_bytes(), range_.mapped_bytes(), live * geometry_.stride_bytes(),
                         geometry_.reservation_bytes(), reason);
}

void ConcurrentBlockPool::grow_or_throw() {
  MutexLock lock(&grow_mutex_);
  if ((head_.load(std::memory_order_acquire) & kLowMask) != 0) return;  // freed or grown meanwhile
  if (range_.chunk_count() == geometry_.max_regions()) throw_exhausted("block pool exhausted: every block is live");
  try {
    grow_locked();
  } catch (const OutOfMemoryError& e) {
    throw_exhausted("block pool cannot grow: " + std::string(e.what()));
  }
}

void* ConcurrentBlockPool::allocate() {
  std::uint64_t head = head_.load(std::memory_order_acquire);
  for (;;) {
    const std::uint64_t top = head & kLowMask;
    if (top == 0) {
      grow_or_throw();
      head = head_.load(std::memory_order_acquire);
      continue;
    }
    const std::uint32_t next = slot(top - 1).next.load(std::memory_order_relaxed);
    if (head_.compare_exchange_weak(head, with_top(head, next), std::memory_order_acquire, std::memory_order_acquire)) {
      slot(top - 1).live.store(1, std::memory_order_relaxed);
      const std::int64_t live = live_blocks_.fetch_add(1, std::memory_order_relaxed) + 1;
      std::int64_t peak = peak_live_blocks_.load(std::memory_order_relaxed);
      while (live > peak && !peak_live_blocks_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
      }
      return reinterpret_cast<void*>(geometry_.address_of(base_, top - 1));
    }
  }
}

std::uint64_t ConcurrentBlockPool::index_of(const void* ptr) const {
  return geometry_.index_of(base_, reinterpret_cast<std::uintptr_t>(ptr), capacity_blocks());
}

void ConcurrentBlockPool::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  const std::uint64_t index = index_of(ptr);
  if (index == BlockGeometry::kNoBlock) {
    invalid_frees_.fetch_add(1, std::memory_order_relaxed);
    throw Error(ErrorCode::kInvalidPointer,
                "ConcurrentBlockPool::deallocate: pointer is not the start of a block of this pool");
  }
  if (slot(index).live.exchange(0, std::memory_order_relaxed) == 0) {
    invalid_frees_.fetch_add(1, std::memory_order_relaxed);
    throw Error(ErrorCode::kInvalidPointer, "ConcurrentBlockPool::deallocate: block is not live (freed twice?)");
  }
  live_blocks_.fetch_sub(1, std::memory_order_relaxed);
  push_chain(static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index));
}

std::uint64_t ConcurrentBlockPool::available() const {
  const auto live = static_cast<std::uint64_t>(live_blocks_.load(std::memory_order_relaxed));
  const std::uint64_t capacity = capacity_blocks();
  return capacity > live ? capacity - live : 0;
}

bool ConcurrentBlockPool::is_live(const void* ptr) const {
  const std::uint64_t index = index_of(ptr);
  return index != BlockGeometry::kNoBlock && slot(index).live.load(std::memory_order_relaxed) != 0;
}

Stats ConcurrentBlockPool::stats() const {
  Stats s;
  const std::int64_t stride = static_cast<std::int64_t>(geometry_.stride_bytes());
  const std::int64_t block = static_cast<std::int64_t>(geometry_.block_bytes());
  const std::int64_t live = live_blocks_.load(std::memory_order_relaxed);
  const std::int64_t peak = peak_live_blocks_.load(std::memory_order_relaxed);
  s.allocated_bytes = {live * stride, peak * stride};
  s.requested_bytes = {live * block, peak * block};
  s.num_ooms = num_ooms_.load(std::memory_order_relaxed);
  s.invalid_frees = invalid_frees_.load(std::memory_order_relaxed);
  {
    MutexLock lock(&grow_mutex_);
    const auto reserved = static_cast<std::int64_t>(range_.mapped_bytes());
    s.reserved_bytes = {reserved, reserved};
    s.chunks_created = range_.chunk_count();
    s.backend_calls = backend_.counters();
  }
  return s;
}

void ConcurrentBlockPool::check_invariants() const {
  const std::uint64_t capacity = capacity_blocks();
  std::uint64_t mapped_bytes;
  {
    MutexLock lock(&grow_mutex_);
    mapped_bytes = range_.mapped_bytes();
  }
  if (capacity != geometry_.blocks_within(mapped_bytes)) fail("block count != mapped bytes / stride");
  std::vector<std::uint8_t> seen(capacity, 0);
  std::uint64_t free_blocks = 0;
  for (std::uint64_t top = head_.load() & kLowMask; top != 0; top = slot(top - 1).next.load()) {
    if (top > capacity) fail("the free list holds an index past the mapped blocks");
    if (slot(top - 1).live.load() != 0) fail("the free list holds a live block");
    if (seen[top - 1]++ != 0) fail("the free list holds a block twice (or loops)");
    ++free_blocks;
  }
  std::uint64_t live_blocks = 0;
  for (std::uint64_t i = 0; i < capacity; ++i) live_blocks += slot(i).live.load();
  if (live_blocks + free_blocks != capacity) fail("live + free blocks != mapped blocks");
  if (static_cast<std::uint64_t>(live_blocks_.load()) != live_blocks) fail("the live count != a recount");
}

}  // namespace gmlake::classic
