// VmmRange: reserve once, map chunks at the tail, unmap them from the tail. Each step undoes what it did
// when a later backend call of the same step throws, so the range is never left half-changed.
#include "gmlake/classic/vmm_range.h"

#include <string>
#include <utility>

#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake::classic {
namespace {

[[noreturn]] void invalid(const std::string& why) { throw Error(ErrorCode::kInvalidArgument, "VmmRange: " + why); }

std::uint64_t rounded_reservation(const Backend& backend, std::uint64_t reserve_bytes) {
  if (reserve_bytes == 0) invalid("reserve_bytes is 0");
  std::uint64_t rounded = 0;
  if (!checked_round_up(reserve_bytes, backend.granularity_bytes(), &rounded)) {
    invalid("reserve_bytes " + std::to_string(reserve_bytes) + " overflows when rounded to the granularity");
  }
  return rounded;
}

// Runs `undo` while an exception is in flight, swallowing what it throws: the caller must see the first error.
template <typename Undo>
void undo_quietly(Undo&& undo) noexcept {
  try {
    undo();
  } catch (...) {
  }
}

}  // namespace

VmmRange::VmmRange(Backend& backend, std::uint64_t reserve_bytes)
    : backend_(&backend), reserved_bytes_(rounded_reservation(backend, reserve_bytes)) {
  base_ = backend.reserve(reserved_bytes_);
}

VmmRange::VmmRange(VmmRange&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      base_(std::exchange(other.base_, 0)),
      reserved_bytes_(std::exchange(other.reserved_bytes_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
      chunks_(std::move(other.chunks_)),
      unreleased_(std::move(other.unreleased_)) {
  other.chunks_.clear();
  other.unreleased_.clear();
}

VmmRange& VmmRange::operator=(VmmRange&& other) noexcept {
  if (this != &other) {
    destroy();
    backend_ = std::exchange(other.backend_, nullptr);
    base_ = std::exchange(other.base_, 0);
    reserved_bytes_ = std::exchange(other.reserved_bytes_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    chunks_ = std::move(other.chunks_);
    unreleased_ = std::move(other.unreleased_);
    other.chunks_.clear();
    other.unreleased_.clear();
  }
  return *this;
}

VmmRange::~VmmRange() { destroy(); }

void VmmRange::destroy() noexcept {
  if (backend_ == nullptr) return;
  while (!chunks_.empty()) {
    const Chunk chunk = chunks_.back();
    chunks_.pop_back();
    mapped_bytes_ -= chunk.size_bytes;
    undo_quietly([&] { backend_->unmap(base_ + mapped_bytes_, chunk.size_bytes); });
    undo_quietly([&] { backend_->release(chunk.handle); });
  }
  for (ChunkHandle handle : unreleased_) undo_quietly([&] { backend_->release(handle); });
  unreleased_.clear();
  undo_quietly([&] { backend_->address_free(base_, reserved_bytes_); });
  backend_ = nullptr;
  base_ = 0;
  reserved_bytes_ = 0;
}

void VmmRange::map_chunks(std::uint64_t chunk_bytes, std::uint64_t count) {
  if (backend_ == nullptr) invalid("map_chunks on an empty range");
  if (chunk_bytes == 0 || chunk_bytes % backend_->granularity_bytes() != 0) {
    invalid("chunk_bytes " + std::to_string(chunk_bytes) + " is not a non-zero multiple of the granularity");
  }
  const std::uint64_t unmapped_bytes = reserved_bytes_ - mapped_bytes_;
  if (count == 0 || count > unmapped_bytes / chunk_bytes) {
    invalid(std::to_string(count) + " chunks of " + std::to_string(chunk_bytes) +
            " bytes do not fit: " + std::to_string(unmapped_bytes) + " bytes of the reservation are unmapped");
  }
  chunks_.reserve(chunks_.size() + count);  // the only step that may throw besides the backend's, done first
  const std::size_t first = chunks_.size();
  const std::uintptr_t run_start = base_ + mapped_bytes_;
  try {
    for (std::uint64_t i = 0; i < count; ++i) {
      const ChunkHandle handle = backend_->create(chunk_bytes);
      try {
        backend_->map(run_start + i * chunk_bytes, chunk_bytes, handle);
      } catch (...) {
        undo_quietly([&] { backend_->release(handle); });
        throw;
      }
      chunks_.push_back({handle, chunk_bytes});
    }
    backend_->set_access(run_start, count * chunk_bytes);
  } catch (...) {
    while (chunks_.size() > first) {
      const Chunk chunk = chunks_.back();
      chunks_.pop_back();
      undo_quietly([&] { backend_->unmap(run_start + (chunks_.size() - first) * chunk_bytes, chunk_bytes); });
      undo_quietly([&] { backend_->release(chunk.handle); });
    }
    throw;
  }
  mapped_bytes_ += count * chunk_bytes;
}

void VmmRange::unmap_last_chunk() {
  if (chunks_.empty()) invalid("unmap_last_chunk with no chunk mapped");
  unreleased_.reserve(unreleased_.size() + 1);
  const Chunk chunk = chunks_.back();
  backend_->unmap(base_ + mapped_bytes_ - chunk.size_bytes, chunk.size_bytes);
  chunks_.pop_back();
  mapped_bytes_ -= chunk.size_bytes;
  try {
    backend_->release(chunk.handle);
  } catch (...) {
    unreleased_.push_back(chunk.handle);
    throw;
  }
}

}  // namespace gmlake::classic
