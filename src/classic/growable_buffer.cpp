// GrowableBuffer: a VmmRange whose mapped prefix follows the size, in step_bytes steps.
#include "gmlake/classic/growable_buffer.h"

#include <stdexcept>
#include <string>

#include "gmlake/error.h"

namespace gmlake::classic {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "GrowableBuffer: " + why);
}

std::uint64_t checked_step(const Backend& backend, std::uint64_t step_bytes) {
  std::uint64_t rounded = 0;
  const std::uint64_t wanted = step_bytes == 0 ? backend.granularity_bytes() : step_bytes;
  if (!checked_round_up(wanted, backend.granularity_bytes(), &rounded)) invalid("step_bytes overflows");
  return rounded;
}

std::uint64_t checked_max_chunk(const GrowableBufferOptions& options, std::uint64_t step_bytes) {
  std::uint64_t rounded = 0;
  if (!checked_round_up(options.max_chunk_bytes, step_bytes, &rounded)) invalid("max_chunk_bytes overflows");
  return rounded;
}

std::uint64_t checked_max(const GrowableBufferOptions& options, std::uint64_t step_bytes) {
  if (options.max_bytes == 0) invalid("max_bytes is 0");
  std::uint64_t rounded = 0;
  if (!checked_round_up(options.max_bytes, step_bytes, &rounded)) invalid("max_bytes overflows");
  return rounded;
}

std::int64_t as_gauge(std::uint64_t bytes) { return static_cast<std::int64_t>(bytes); }

[[noreturn]] void fail(const std::string& what) { throw std::logic_error("GrowableBuffer invariant: " + what); }

}  // namespace

GrowableBuffer::GrowableBuffer(Backend& backend, const GrowableBufferOptions& options)
    : backend_(backend),
      step_bytes_(checked_step(backend, options.step_bytes)),
      max_chunk_bytes_(checked_max_chunk(options, step_bytes_)),
      range_(backend, checked_max(options, step_bytes_)) {}

void GrowableBuffer::map_up_to(std::uint64_t wanted_bytes) {
  const std::uint64_t mapped = range_.mapped_bytes();
  if (wanted_bytes <= mapped) return;
  if (wanted_bytes > range_.reserved_bytes()) {
    ++stats_.num_ooms;
    throw OutOfMemoryError(wanted_bytes, mapped, size_bytes(), range_.reserved_bytes(),
                           "growable buffer: past its max_bytes reservation");
  }
  const std::uint64_t chunks = range_.chunk_count();
  try {
    map_growth(round_up(wanted_bytes, step_bytes_) - mapped);
  } catch (const OutOfMemoryError& e) {
    record_growth(mapped, chunks);  // nothing, unless a rollback failed
    ++stats_.num_ooms;
    throw OutOfMemoryError(wanted_bytes, mapped, size_bytes(), range_.reserved_bytes(),
                           "growable buffer cannot grow: " + std::string(e.what()));
  } catch (...) {
    record_growth(mapped, chunks);
    throw;
  }
  ++stats_.num_allocs;
  record_growth(mapped, chunks);
}

// Brings capacity and stats in line with the range after a growth (or a failed one).
void GrowableBuffer::record_growth(std::uint64_t mapped_before, std::uint64_t chunks_before) {
  stats_.chunks_created += range_.chunk_count() - chunks_before;
  stats_.reserved_bytes.increase(as_gauge(range_.mapped_bytes() - mapped_before));
  capacity_bytes_.store(range_.mapped_bytes(), std::memory_order_release);
}

// Maps growth_bytes as one chunk, or as chunks of max_chunk_bytes_ and one smaller last chunk. When a later
// part fails, the parts already mapped are unmapped again (one whose unmap fails stays, as capacity).
void GrowableBuffer::map_growth(std::uint64_t growth_bytes) {
  if (max_chunk_bytes_ == 0 || growth_bytes <= max_chunk_bytes_) {
    range_.map_chunks(growth_bytes);
    return;
  }
  const std::uint64_t whole_chunks = growth_bytes / max_chunk_bytes_;
  const std::uint64_t rest_bytes = growth_bytes % max_chunk_bytes_;
  range_.map_chunks(max_chunk_bytes_, whole_chunks);
  if (rest_bytes == 0) return;
  try {
    range_.map_chunks(rest_bytes);
  } catch (...) {
    try {
      for (std::uint64_t i = 0; i < whole_chunks; ++i) range_.unmap_last_chunk();
    } catch (...) {
    }
    throw;
  }
}

void GrowableBuffer::resize(std::uint64_t new_size_bytes) {
  MutexLock lock(&mutex_);
  map_up_to(new_size_bytes);
  const std::uint64_t old_size = size_bytes_.load(std::memory_order_relaxed);
  if (new_size_bytes >= old_size) {
    stats_.allocated_bytes.increase(as_gauge(new_size_bytes - old_size));
  } else {
    stats_.allocated_bytes.decrease(as_gauge(old_size - new_size_bytes));
  }
  size_bytes_.store(new_size_bytes, std::memory_order_release);
}

void GrowableBuffer::reserve(std::uint64_t capacity_bytes) {
  MutexLock lock(&mutex_);
  map_up_to(capacity_bytes);
}

void GrowableBuffer::shrink_to_fit() {
  MutexLock lock(&mutex_);
  const std::uint64_t keep_bytes = round_up(size_bytes_.load(std::memory_order_relaxed), step_bytes_);
  const std::uint64_t mapped = range_.mapped_bytes();
  try {
    while (range_.chunk_count() != 0 && range_.mapped_bytes() - range_.last_chunk_bytes() >= keep_bytes) {
      range_.unmap_last_chunk();
      ++stats_.chunks_released;
    }
  } catch (...) {
    stats_.reserved_bytes.decrease(as_gauge(mapped - range_.mapped_bytes()));
    capacity_bytes_.store(range_.mapped_bytes(), std::memory_order_release);
    throw;
  }
  if (range_.mapped_bytes() == mapped) return;
  ++stats_.num_frees;
  stats_.reserved_bytes.decrease(as_gauge(mapped - range_.mapped_bytes()));
  capacity_bytes_.store(range_.mapped_bytes(), std::memory_order_release);
}

Stats GrowableBuffer::stats() const {
  MutexLock lock(&mutex_);
  Stats s = stats_;
  s.backend_calls = backend_.counters();
  return s;
}

void GrowableBuffer::check_invariants() const {
  MutexLock lock(&mutex_);
  const std::uint64_t size = size_bytes_.load();
  const std::uint64_t capacity = capacity_bytes_.load();
  if (size > capacity) fail("size > capacity");
  if (capacity != range_.mapped_bytes()) fail("capacity != mapped bytes");
  if (capacity % step_bytes_ != 0) fail("capacity is not a multiple of step_bytes");
  if (stats_.allocated_bytes.current != as_gauge(size)) fail("allocated_bytes != size");
  if (stats_.reserved_bytes.current != as_gauge(capacity)) fail("reserved_bytes != capacity");
  if (stats_.chunks_created - stats_.chunks_released != range_.chunk_count()) fail("chunk counters != chunks mapped");
}

}  // namespace gmlake::classic
