// GrowableBuffer: a byte buffer that grows without moving. It reserves max_bytes of virtual address space
// once, maps physical chunks at its end as it grows, and unmaps chunks from its end when asked to shrink, so
// data() never changes and growing never copies a byte (the alternative, realloc or cudaMalloc + copy +
// cudaFree, copies the whole buffer at each growth and needs old + new memory at once).
//
// Sizes: size_bytes() is what the caller asked for with resize(); capacity_bytes() is what is mapped, a
// multiple of step_bytes() >= size_bytes(); max_bytes() is the reservation and the largest size. A growth
// maps exactly the bytes it needs, rounded up to step_bytes() (no doubling: nothing is copied, so there is
// nothing to amortize), as one chunk, or as chunks of at most max_chunk_bytes() when that is set: one
// create + map per chunk and one set_access per growth, so the backend calls per growth stay few however
// large it is (on a GPU each chunk costs tens of microseconds). Shrinking keeps the mapping (resize is cheap
// both ways); shrink_to_fit() unmaps the whole chunks past the size, so memory goes back at the granularity
// of past growths: a buffer grown by doubling and halved gives back its last growth. The bytes below the
// old size keep their contents; bytes added by growth are unspecified (fresh chunks read as zeroes on the
// host backend; re-grown mapped bytes keep what was written there).
//
// Alignment: data() is aligned to the backend's granularity (2 MiB by default).
//
// Errors (the buffer is unchanged after any of them):
//   - bad options: Error(kInvalidArgument) (max_bytes 0; step_bytes, max_chunk_bytes or max_bytes
//     overflowing when rounded);
//   - resize past max_bytes(): OutOfMemoryError with requested = the new size, reserved = capacity_bytes(),
//     allocated = size_bytes(), cap = max_bytes(); also when the backend has no memory for the new chunks.
//
// Stats (gmlake::Stats): allocated_bytes = size_bytes(), reserved_bytes = capacity_bytes() (current and
// peak), num_allocs = growths that mapped chunks, num_frees = shrinks that unmapped chunks, num_ooms,
// chunks_created, chunks_released, backend_calls.
//
// Thread safety: resize, reserve, shrink_to_fit and stats are serialized by an internal mutex; data(),
// size_bytes(), capacity_bytes() may be read at any time. Since data() never moves, other threads may keep
// reading and writing bytes below a size they know (synchronized by the caller) while one thread grows the
// buffer; only shrinking invalidates bytes. The Backend must outlive the buffer and must not be used by
// another thread meanwhile.
#pragma once

#include <atomic>
#include <cstdint>

#include "gmlake/backend.h"
#include "gmlake/mutex.h"
#include "gmlake/classic/vmm_range.h"
#include "gmlake/stats.h"
#include "gmlake/units.h"

namespace gmlake::classic {

struct GrowableBufferOptions {
  std::uint64_t max_bytes = 64 * kGiB;  // the reservation, rounded up to step_bytes: virtual only, free on
                                        // 64-bit hosts and on CUDA devices
  std::uint64_t step_bytes = 0;         // sizes are mapped in multiples of it (the growth step; called
                                        // chunk_bytes before 2026-11); 0: the backend's granularity; rounded up
                                        // to it
  std::uint64_t max_chunk_bytes = 0;    // the largest chunk one growth maps; 0: a growth is one chunk;
                                        // rounded up to step_bytes
};

class GrowableBuffer {
 public:
  // Reserves the address space; maps nothing (size and capacity 0). `backend` must outlive the buffer.
  // Throws Error(kInvalidArgument) for bad options, BackendError when the backend cannot reserve.
  GrowableBuffer(Backend& backend, const GrowableBufferOptions& options = {});
  GrowableBuffer(const GrowableBuffer&) = delete;
  GrowableBuffer& operator=(const GrowableBuffer&) = delete;
  // Unmaps and releases everything.
  ~GrowableBuffer() = default;

  // The first byte; the same for the buffer's whole life, never nullptr.
  void* data() const { return range_.data(); }
  std::uint64_t size_bytes() const { return size_bytes_.load(std::memory_order_acquire); }
  std::uint64_t capacity_bytes() const { return capacity_bytes_.load(std::memory_order_acquire); }
  std::uint64_t max_bytes() const { return range_.reserved_bytes(); }
  std::uint64_t step_bytes() const { return step_bytes_; }
  std::uint64_t max_chunk_bytes() const { return max_chunk_bytes_; }

  // Sets the size, mapping chunks when it grows past capacity_bytes(). Throws OutOfMemoryError (above).
  void resize(std::uint64_t new_size_bytes);
  // Maps chunks until capacity_bytes() >= capacity_bytes; the size does not change. Throws as resize.
  void reserve(std::uint64_t capacity_bytes);
  // Unmaps and releases every chunk that lies wholly past size_bytes() (rounded up to step_bytes()); a chunk
  // the size ends inside stays. Throws BackendError when the backend fails (the chunks not yet unmapped stay).
  void shrink_to_fit();

  Stats stats() const;
  // Checks size <= capacity <= max, capacity = mapped bytes, and the stats; throws std::logic_error.
  void check_invariants() const;

 private:
  void map_up_to(std::uint64_t capacity_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void map_growth(std::uint64_t growth_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void record_growth(std::uint64_t mapped_before, std::uint64_t chunks_before) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  Backend& backend_;
  const std::uint64_t step_bytes_;
  const std::uint64_t max_chunk_bytes_;
  VmmRange range_;  // maps and unmaps under mutex_; its base and reserved size never change (data(), max_bytes())
  mutable absl::Mutex mutex_;
  std::atomic<std::uint64_t> size_bytes_{0};      // written under mutex_
  std::atomic<std::uint64_t> capacity_bytes_{0};  // written under mutex_
  Stats stats_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gmlake::classic
