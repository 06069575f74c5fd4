// ConcurrentBumpAllocator: per-thread buffers claimed from one atomic offset.
//
// Each thread keeps, in thread-local storage, up to kThreadSlots buffers {allocator id, epoch, next, end}, one per
// allocator it allocates from. They hold only numbers, never a pointer to the allocator, so an allocator's death
// leaves nothing dangling: its id is never reused, so its slots simply never match again and are replaced.
#include "gmlake/classic/concurrent_bump_allocator.h"

#include <algorithm>
#include <array>
#include <string>

#include "gmlake/error.h"

namespace gmlake::classic {
namespace {

constexpr std::uint64_t kBufferAlignBytes = 64;  // buffers start on their own cache line
constexpr std::size_t kThreadSlots = 4;

struct ThreadBuffer {
  std::uint64_t allocator_id = 0;  // 0: empty slot (ids start at 1)
  std::uint64_t epoch = 0;
  std::uint64_t next = 0;  // offsets in the allocator
  std::uint64_t end = 0;
};

struct ThreadBuffers {
  std::array<ThreadBuffer, kThreadSlots> slots{};
  std::size_t victim = 0;  // the slot replaced next (round robin)
};

thread_local ThreadBuffers t_buffers;

std::atomic<std::uint64_t> next_allocator_id{1};

[[noreturn]] void invalid(const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "ConcurrentBumpAllocator: " + why);
}

std::uint64_t checked_capacity(const Backend& backend, std::uint64_t capacity_bytes) {
  if (capacity_bytes == 0) invalid("capacity_bytes is 0");
  std::uint64_t rounded = 0;
  if (!checked_round_up(capacity_bytes, backend.granularity_bytes(), &rounded)) invalid("capacity_bytes overflows");
  return rounded;
}

std::uint64_t checked_buffer(std::uint64_t thread_buffer_bytes, std::uint64_t capacity_bytes) {
  if (thread_buffer_bytes > capacity_bytes) {
    invalid("thread_buffer_bytes " + std::to_string(thread_buffer_bytes) + " exceeds the capacity " +
            std::to_string(capacity_bytes));
  }
  return round_up(thread_buffer_bytes, kBufferAlignBytes);
}

}  // namespace

ConcurrentBumpAllocator::ConcurrentBumpAllocator(Backend& backend, std::uint64_t capacity_bytes,
                                         std::uint64_t thread_buffer_bytes)
    : backend_(backend),
      range_(backend, checked_capacity(backend, capacity_bytes)),
      capacity_bytes_(range_.reserved_bytes()),
      granularity_bytes_(backend.granularity_bytes()),
      thread_buffer_bytes_(checked_buffer(thread_buffer_bytes, capacity_bytes_)),
      id_(next_allocator_id.fetch_add(1, std::memory_order_relaxed)) {
  range_.map_chunks(capacity_bytes_);
}

void ConcurrentBumpAllocator::check_alignment(std::uint64_t alignment_bytes) const {
  if (!is_pow2(alignment_bytes) || alignment_bytes > granularity_bytes_) {
    invalid("alignment_bytes " + std::to_string(alignment_bytes) + " is not a power of two up to the granularity " +
            std::to_string(granularity_bytes_));
  }
}

void* ConcurrentBumpAllocator::allocate(std::uint64_t size_bytes, std::uint64_t alignment_bytes) {
  check_alignment(alignment_bytes);
  if (size_bytes == 0) return nullptr;
  if (size_bytes <= thread_buffer_bytes_ / 4 && alignment_bytes <= thread_buffer_bytes_ / 4 - size_bytes) {
    return allocate_buffered(size_bytes, alignment_bytes);
  }
  return allocate_shared(size_bytes, alignment_bytes);
}

// Claims [start, end) from the shared offset: start aligned to alignment_bytes, end - start between min_bytes
// and `wanted` bytes (less only when the region's rest is smaller). False when not even min_bytes fit.
bool ConcurrentBumpAllocator::claim(std::uint64_t wanted_bytes, std::uint64_t alignment_bytes, std::uint64_t min_bytes,
                                Claim* out) {
  std::uint64_t offset = offset_bytes_.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint64_t start = round_up(offset, alignment_bytes);
    if (start > capacity_bytes_ || capacity_bytes_ - start < min_bytes) return false;
    const std::uint64_t end = start + std::min(wanted_bytes, capacity_bytes_ - start);
    if (offset_bytes_.compare_exchange_weak(offset, end, std::memory_order_relaxed)) {
      *out = {start, end};
      return true;
    }
  }
}

void ConcurrentBumpAllocator::throw_full(std::uint64_t size_bytes) {
  num_ooms_.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t used = used_bytes();
  throw OutOfMemoryError(size_bytes, capacity_bytes_, used, capacity_bytes_,
                         "arena full: " + std::to_string(capacity_bytes_ - used) +
                             " bytes left before alignment (thread buffers' unused tails are not counted as left)");
}

void* ConcurrentBumpAllocator::allocate_shared(std::uint64_t size_bytes, std::uint64_t alignment_bytes) {
  Claim c{};
  if (!claim(size_bytes, alignment_bytes, size_bytes, &c)) throw_full(size_bytes);
  return reinterpret_cast<void*>(range_.base() + c.start);
}

void* ConcurrentBumpAllocator::allocate_buffered(std::uint64_t size_bytes, std::uint64_t alignment_bytes) {
  const std::uint64_t epoch = epoch_.load(std::memory_order_relaxed);
  ThreadBuffers& mine = t_buffers;
  ThreadBuffer* buffer = nullptr;
  for (ThreadBuffer& slot : mine.slots) {
    if (slot.allocator_id == id_) buffer = &slot;
  }
  if (buffer != nullptr && buffer->epoch == epoch) {
    const std::uint64_t start = round_up(buffer->next, alignment_bytes);
    if (start <= buffer->end && buffer->end - start >= size_bytes) {
      buffer->next = start + size_bytes;
      return reinterpret_cast<void*>(range_.base() + start);
    }
  }
  // A new buffer; it holds this request, since size + alignment <= a quarter buffer (or the region's rest).
  Claim c{};
  if (!claim(thread_buffer_bytes_, kBufferAlignBytes, size_bytes + alignment_bytes, &c)) {
    return allocate_shared(size_bytes, alignment_bytes);  // the region's last bytes, without a buffer
  }
  if (buffer == nullptr) {
    buffer = &mine.slots[mine.victim];
    mine.victim = (mine.victim + 1) % kThreadSlots;
  }
  const std::uint64_t start = round_up(c.start, alignment_bytes);
  *buffer = {id_, epoch, start + size_bytes, c.end};
  return reinterpret_cast<void*>(range_.base() + start);
}

void ConcurrentBumpAllocator::reset() {
  epoch_.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t used = offset_bytes_.exchange(0, std::memory_order_relaxed);
  std::uint64_t peak = peak_before_reset_bytes_.load(std::memory_order_relaxed);
  while (used > peak && !peak_before_reset_bytes_.compare_exchange_weak(peak, used, std::memory_order_relaxed)) {
  }
}

Stats ConcurrentBumpAllocator::stats() const {
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

}  // namespace gmlake::classic
