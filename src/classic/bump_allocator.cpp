// BumpAllocator: the slow path (validation, exhaustion), reset, rollback and stats. The fast path is inline.
#include "gmlake/classic/bump_allocator.h"

#include <string>

#include "gmlake/error.h"

namespace gmlake::classic {
namespace {

[[noreturn]] void invalid(const std::string& why) { throw Error(ErrorCode::kInvalidArgument, "BumpAllocator: " + why); }

std::uint64_t checked_capacity(const Backend& backend, std::uint64_t capacity_bytes) {
  if (capacity_bytes == 0) invalid("capacity_bytes is 0");
  std::uint64_t rounded = 0;
  if (!checked_round_up(capacity_bytes, backend.granularity_bytes(), &rounded)) invalid("capacity_bytes overflows");
  return rounded;
}

}  // namespace

BumpAllocator::BumpAllocator(Backend& backend, std::uint64_t capacity_bytes)
    : backend_(backend),
      range_(backend, checked_capacity(backend, capacity_bytes)),
      capacity_bytes_(range_.reserved_bytes()),
      granularity_bytes_(backend.granularity_bytes()) {
  range_.map_chunks(capacity_bytes_);
}

void* BumpAllocator::allocate_slow(std::uint64_t size_bytes, std::uint64_t alignment_bytes) {
  if (!is_pow2(alignment_bytes) || alignment_bytes > granularity_bytes_) {
    invalid("alignment_bytes " + std::to_string(alignment_bytes) + " is not a power of two up to the granularity " +
            std::to_string(granularity_bytes_));
  }
  if (size_bytes == 0) return nullptr;
  const std::uint64_t start = round_up(offset_bytes_, alignment_bytes);
  if (size_bytes > capacity_bytes_ || start > capacity_bytes_ - size_bytes) {
    ++num_ooms_;
    throw OutOfMemoryError(size_bytes, capacity_bytes_, offset_bytes_, capacity_bytes_,
                           "arena full: " + std::to_string(capacity_bytes_ - offset_bytes_) +
                               " bytes left before alignment (reset() or rollback() to free)");
  }
  return bump(start, size_bytes);
}

void BumpAllocator::reset() {
  offset_bytes_ = 0;
  requested_bytes_ = 0;
  ++epoch_;
}

void BumpAllocator::rollback(const Marker& marker) {
  if (marker.owner != this) invalid("rollback to another arena's marker");
  if (marker.epoch != epoch_) invalid("rollback to a marker taken before the last reset()");
  if (marker.offset_bytes > offset_bytes_) {
    invalid("rollback to a marker at offset " + std::to_string(marker.offset_bytes) + ", past the current offset " +
            std::to_string(offset_bytes_) + " (discarded by an earlier rollback)");
  }
  offset_bytes_ = marker.offset_bytes;
  requested_bytes_ = marker.requested_bytes;
}

Stats BumpAllocator::stats() const {
  Stats s;
  s.allocated_bytes = {static_cast<std::int64_t>(offset_bytes_), static_cast<std::int64_t>(peak_offset_bytes_)};
  s.requested_bytes = {static_cast<std::int64_t>(requested_bytes_), static_cast<std::int64_t>(peak_requested_bytes_)};
  const auto reserved = static_cast<std::int64_t>(capacity_bytes_);
  s.reserved_bytes = {reserved, reserved};
  s.num_allocs = num_allocs_;
  s.num_ooms = num_ooms_;
  s.chunks_created = range_.chunk_count();
  s.backend_calls = backend_.counters();
  return s;
}

}  // namespace gmlake::classic
