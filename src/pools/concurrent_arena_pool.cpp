// ConcurrentArenaPool: a compare-and-swap bump of one atomic offset.
#include "gmlake/pools/concurrent_arena_pool.h"

#include <algorithm>
#include <string>

#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake::pools {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "ConcurrentArenaPool: " + why);
}

std::uint64_t checked_capacity(const Backend& backend, std::uint64_t capacity_bytes) {
  if (capacity_bytes == 0) invalid("capacity_bytes is 0");
  std::uint64_t rounded = 0;
  if (!checked_round_up(capacity_bytes, backend.granularity_bytes(), &rounded)) invalid("capacity_bytes overflows");
  return rounded;
}

}  // namespace

ConcurrentArenaPool::ConcurrentArenaPool(Backend& backend, std::uint64_t capacity_bytes)
    : backend_(backend),
      range_(backend, checked_capacity(backend, capacity_bytes)),
      capacity_bytes_(range_.reserved_bytes()),
      granularity_bytes_(backend.granularity_bytes()) {
  range_.map_chunks(capacity_bytes_);
}

void ConcurrentArenaPool::check_alignment(std::uint64_t alignment_bytes) const {
  if (!is_pow2(alignment_bytes) || alignment_bytes > granularity_bytes_) {
    invalid("alignment_bytes " + std::to_string(alignment_bytes) + " is not a power of two up to the granularity " +
            std::to_string(granularity_bytes_));
  }
}

void* ConcurrentArenaPool::allocate(std::uint64_t size_bytes, std::uint64_t alignment_bytes) {
  check_alignment(alignment_bytes);
  if (size_bytes == 0) return nullptr;
  std::uint64_t offset = offset_bytes_.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint64_t start = round_up(offset, alignment_bytes);
    if (size_bytes > capacity_bytes_ || start > capacity_bytes_ - size_bytes) {
      num_ooms_.fetch_add(1, std::memory_order_relaxed);
      throw OutOfMemoryError(size_bytes, capacity_bytes_, offset, capacity_bytes_,
                             "arena full: " + std::to_string(capacity_bytes_ - offset) + " bytes left before alignment");
    }
    if (offset_bytes_.compare_exchange_weak(offset, start + size_bytes, std::memory_order_relaxed)) {
      return reinterpret_cast<void*>(range_.base() + start);
    }
  }
}

void ConcurrentArenaPool::reset() {
  const std::uint64_t used = offset_bytes_.exchange(0, std::memory_order_relaxed);
  std::uint64_t peak = peak_before_reset_bytes_.load(std::memory_order_relaxed);
  while (used > peak && !peak_before_reset_bytes_.compare_exchange_weak(peak, used, std::memory_order_relaxed)) {
  }
}

Stats ConcurrentArenaPool::stats() const {
  Stats s;
  const std::uint64_t used = used_bytes();
  const std::uint64_t peak = std::max(used, peak_before_reset_bytes_.load(std::memory_order_relaxed));
  s.allocated_bytes = {static_cast<std::int64_t>(used), static_cast<std::int64_t>(peak)};
  const auto reserved = static_cast<std::int64_t>(capacity_bytes_);
  s.reserved_bytes = {reserved, reserved};
  s.num_ooms = num_ooms_.load(std::memory_order_relaxed);
  s.chunks_created = range_.chunk_count();
  s.backend_calls = backend_.counters();
  return s;
}

}  // namespace gmlake::pools
