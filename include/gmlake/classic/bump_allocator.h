// BumpAllocator: a bump allocator. One region of memory from a Backend, mapped whole at construction;
// allocate advances an offset past alignment padding and the request, nothing is freed one by one, reset()
// releases everything at once, and markers roll the offset back to an earlier point (scoped scratch memory).
// The offset lives on the host, so the allocator works the same over GPU memory.
//
// Sizes and alignment: any size_bytes >= 1; allocate(0) returns nullptr and changes nothing. alignment_bytes
// is a power of two up to the backend's granularity (default alignof(std::max_align_t)); the region starts on
// a granularity boundary, so an offset aligned to alignment_bytes is an aligned address.
//
// Markers: mark() records the offset; rollback(marker) frees everything allocated since. A marker is
// checked to come from this allocator, to be taken since the last reset(), and to lie at or below the current
// offset (else Error(kInvalidArgument)); markers nest like scopes, and one discarded by rolling back past it
// is not detected once the allocator has grown past its offset again.
//
// Errors (the allocator is unchanged after any of them):
//   - capacity_bytes 0 or too large to round, bad alignment: Error(kInvalidArgument);
//   - a request that does not fit: OutOfMemoryError with requested = size_bytes, reserved = capacity_bytes(),
//     allocated = used_bytes(), cap = capacity_bytes().
//
// Stats (gmlake::Stats): allocated_bytes = used_bytes() (padding included; its peak is the high-water mark),
// requested_bytes = bytes asked for since the last reset (rolled back with markers), reserved_bytes =
// capacity_bytes(), num_allocs, num_ooms, chunks_created, backend_calls. The other fields stay 0.
//
// Thread safety: none; ConcurrentBumpAllocator (concurrent_bump_allocator.h) is the thread-safe variant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gmlake/backend.h"
#include "gmlake/classic/vmm_range.h"
#include "gmlake/stats.h"
#include "gmlake/units.h"

namespace gmlake::classic {

class BumpAllocator {
 public:
  // A point to roll back to: see mark().
  struct Marker {
    const BumpAllocator* owner = nullptr;
    std::uint64_t offset_bytes = 0;
    std::uint64_t requested_bytes = 0;
    std::uint64_t epoch = 0;  // resets before the marker was taken
  };

  // Maps capacity_bytes rounded up to the backend's granularity, as one chunk. `backend` must outlive the
  // allocator. Throws Error(kInvalidArgument) when capacity_bytes is 0, and what the backend throws
  // (OutOfMemoryError, BackendError), leaving nothing behind.
  BumpAllocator(Backend& backend, std::uint64_t capacity_bytes);
  BumpAllocator(const BumpAllocator&) = delete;
  BumpAllocator& operator=(const BumpAllocator&) = delete;
  // Returns the region to the backend (every pointer into the allocator becomes invalid).
  ~BumpAllocator() = default;

  // size_bytes at an address aligned to alignment_bytes; O(1). Throws as above.
  void* allocate(std::uint64_t size_bytes, std::uint64_t alignment_bytes = alignof(std::max_align_t)) {
    if (size_bytes != 0 && size_bytes <= capacity_bytes_ && is_pow2(alignment_bytes) &&
        alignment_bytes <= granularity_bytes_) {
      const std::uint64_t start = (offset_bytes_ + alignment_bytes - 1) & ~(alignment_bytes - 1);
      if (start <= capacity_bytes_ - size_bytes) return bump(start, size_bytes);
    }
    return allocate_slow(size_bytes, alignment_bytes);
  }
  // Frees everything: the next allocation starts at the region's start again. Invalidates every marker.
  void reset();
  Marker mark() const { return {this, offset_bytes_, requested_bytes_, epoch_}; }
  // Frees everything allocated since `marker` was taken. Throws Error(kInvalidArgument) for a marker that is
  // not this allocator's, predates the last reset(), or lies past the current offset.
  void rollback(const Marker& marker);

  std::uint64_t used_bytes() const { return offset_bytes_; }
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  std::uint64_t available_bytes() const { return capacity_bytes_ - offset_bytes_; }
  void* data() const { return range_.data(); }
  const Backend& backend() const { return backend_; }

  Stats stats() const;
  void reset_peak_stats() {
    peak_offset_bytes_ = offset_bytes_;
    peak_requested_bytes_ = requested_bytes_;
  }

 private:
  void* bump(std::uint64_t start, std::uint64_t size_bytes) {
    offset_bytes_ = start + size_bytes;
    if (offset_bytes_ > peak_offset_bytes_) peak_offset_bytes_ = offset_bytes_;
    requested_bytes_ += size_bytes;
    if (requested_bytes_ > peak_requested_bytes_) peak_requested_bytes_ = requested_bytes_;
    ++num_allocs_;
    return reinterpret_cast<void*>(range_.base() + start);
  }
  void* allocate_slow(std::uint64_t size_bytes, std::uint64_t alignment_bytes);

  Backend& backend_;
  VmmRange range_;
  std::uint64_t capacity_bytes_;
  std::uint64_t granularity_bytes_;
  std::uint64_t offset_bytes_ = 0;
  std::uint64_t peak_offset_bytes_ = 0;
  std::uint64_t requested_bytes_ = 0;
  std::uint64_t peak_requested_bytes_ = 0;
  std::uint64_t epoch_ = 0;
  std::uint64_t num_allocs_ = 0;
  std::uint64_t num_ooms_ = 0;
};

}  // namespace gmlake::classic
