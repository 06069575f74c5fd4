#include "tracing_allocator.h"

#include <algorithm>
#include <chrono>

#include "gmlake/error.h"

namespace gmlake {
namespace {

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void TracingAllocator::set_tracing(std::uint64_t max_events) {
  max_events_ = max_events;
  while (max_events_ != 0 && events_.size() > max_events_) {
    events_.pop_front();
    ++dropped_;
  }
}

void TracingAllocator::drain(std::vector<SnapshotEvent>* out, std::size_t max) {
  const std::size_t n = std::min(max, events_.size());
  out->insert(out->end(), events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(n));
  events_.erase(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(n));
}

void TracingAllocator::record(SnapshotAction action, std::uint64_t addr, std::uint64_t size_bytes,
                              StreamId stream) noexcept {
  if (max_events_ == 0) return;
  try {
    if (events_.size() >= max_events_) {
      events_.pop_front();
      ++dropped_;
    }
    events_.push_back({action, addr, size_bytes, stream, now_us()});
  } catch (...) {  // out of host memory: the event is lost, the call is not
    ++dropped_;
  }
}

void* TracingAllocator::allocate(std::uint64_t size_bytes, StreamId stream) {
  if (max_events_ == 0) return inner().allocate(size_bytes, stream);
  void* ptr = nullptr;
  try {
    ptr = inner().allocate(size_bytes, stream);
  } catch (const OutOfMemoryError&) {
    record(SnapshotAction::kOom, 0, size_bytes, stream);
    throw;
  }
  if (ptr != nullptr) record(SnapshotAction::kAlloc, reinterpret_cast<std::uintptr_t>(ptr), size_bytes, stream);
  return ptr;
}

void TracingAllocator::record_placed(void* ptr) noexcept {
  if (max_events_ == 0) return;
  const std::optional<BlockInfo> block = inner().find_block(ptr);
  if (block) record(SnapshotAction::kAlloc, block->address, block->requested_bytes, block->stream);
}

void TracingAllocator::deallocate(void* ptr) {
  if (max_events_ == 0) return inner().deallocate(ptr);
  const std::optional<BlockInfo> block = inner().find_block(ptr);
  inner().deallocate(ptr);  // throws for a bad pointer: nothing recorded
  if (!block) return;
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  record(SnapshotAction::kFreeRequested, addr, block->requested_bytes, block->stream);
  record(SnapshotAction::kFreeCompleted, addr, block->requested_bytes, block->stream);
}

void TracingAllocator::begin_deferred_free(void* ptr) {
  if (max_events_ == 0) return inner().begin_deferred_free(ptr);
  const std::optional<BlockInfo> block = inner().find_block(ptr);
  inner().begin_deferred_free(ptr);
  if (!block) return;
  record(SnapshotAction::kFreeRequested, reinterpret_cast<std::uintptr_t>(ptr), block->requested_bytes, block->stream);
}

void TracingAllocator::end_deferred_free(void* ptr) {
  if (max_events_ == 0) return inner().end_deferred_free(ptr);
  const std::optional<BlockInfo> block = inner().find_block(ptr);
  inner().end_deferred_free(ptr);
  if (!block) return;
  record(SnapshotAction::kFreeCompleted, reinterpret_cast<std::uintptr_t>(ptr), block->requested_bytes, block->stream);
}

void TracingAllocator::on_map(std::uintptr_t addr, std::uint64_t size_bytes) noexcept {
  record(SnapshotAction::kSegmentMap, addr, size_bytes, 0);
}

void TracingAllocator::on_unmap(std::uintptr_t addr, std::uint64_t size_bytes) noexcept {
  record(SnapshotAction::kSegmentUnmap, addr, size_bytes, 0);
}

}  // namespace gmlake
