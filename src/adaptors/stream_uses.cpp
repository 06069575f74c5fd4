#include "stream_uses.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "gmlake/error.h"

namespace gmlake {
namespace {

std::uintptr_t address(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }
void* pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

StreamUses::StreamUses(Allocator& allocator, StreamEvents* events) : allocator_(&allocator), events_(events) {}

StreamUses::~StreamUses() {
  for (const auto& [stream, marks] : marks_) {
    for (const Mark& mark : marks) {
      try {
        events_->release(mark.token);
      } catch (...) {
      }
    }
  }
}

void StreamUses::record_stream(void* ptr, StreamId stream) {
  if (ptr == nullptr) return;
  const std::optional<BlockInfo> block = allocator_->find_block(ptr);
  if (!block || block->pending_free) {
    throw Error(ErrorCode::kInvalidPointer,
                fmt::format("gmlake: record_stream({}): not a live block (never allocated here, already freed, or "
                            "an interior pointer)", ptr));
  }
  if (events_ == nullptr || stream == block->stream) return;
  Streams& streams = recorded_[block->address];
  if (std::find(streams.begin(), streams.end(), stream) == streams.end()) streams.push_back(stream);
}

void* StreamUses::allocate_with_pending(std::uint64_t size_bytes, StreamId stream) {
  complete(/*wait=*/false);
  try {
    return allocator_->allocate(size_bytes, stream);
  } catch (const OutOfMemoryError&) {
    if (pending_.empty()) throw;
  }
  complete(/*wait=*/true);
  return allocator_->allocate(size_bytes, stream);
}

void StreamUses::deallocate_recorded(void* ptr) {
  const auto it = recorded_.find(address(ptr));
  if (it == recorded_.end()) return allocator_->deallocate(ptr);
  const Streams& streams = it->second;
  // Events first, then the free: whichever fails, nothing has changed once the events are released.
  absl::InlinedVector<StreamEvents::Token, 2> tokens;
  tokens.reserve(streams.size());
  try {
    for (StreamId stream : streams) {
      ++event_calls_;
      tokens.push_back(events_->record(stream));
    }
    allocator_->begin_deferred_free(ptr);
  } catch (...) {
    for (StreamEvents::Token token : tokens) events_->release(token);
    throw;
  }
  for (std::size_t i = 0; i < streams.size(); ++i) marks_[streams[i]].push_back({tokens[i], it->first});
  pending_.emplace(it->first, static_cast<std::uint32_t>(streams.size()));
  recorded_.erase(it);
  ++deferred_frees_;
}

void StreamUses::complete(bool wait) {
  for (auto it = marks_.begin(); it != marks_.end();) {
    std::deque<Mark>& marks = it->second;
    while (!marks.empty()) {
      ++event_calls_;
      if (wait) {
        events_->wait(marks.front().token);
      } else if (!events_->done(marks.front().token)) {
        break;  // the stream's later marks are later in its order: unfinished too
      }
      complete_front(marks);
    }
    if (marks.empty()) {
      marks_.erase(it++);
    } else {
      ++it;
    }
  }
}

void StreamUses::complete_front(std::deque<Mark>& marks) {
  const Mark mark = marks.front();
  marks.pop_front();
  events_->release(mark.token);
  const auto it = pending_.find(mark.block);
  if (--it->second != 0) return;
  pending_.erase(it);
  allocator_->end_deferred_free(pointer(mark.block));
}

void StreamUses::empty_cache() {
  if (!pending_.empty()) complete(/*wait=*/true);
  allocator_->empty_cache();
}

Stats StreamUses::stats() const {
  Stats stats = allocator_->stats();
  stats.deferred_frees = deferred_frees_;
  stats.stream_event_calls += event_calls_;  // the wrapped allocator's own (its StreamFence) and these
  return stats;
}

void StreamUses::check_invariants() const {
  allocator_->check_invariants();
  auto broken = [](const std::string& what, std::uintptr_t block) {
    throw std::logic_error(fmt::format("gmlake StreamUses invariant broken: {} ({:#x})", what, block));
  };
  for (const auto& [block, streams] : recorded_) {
    const std::optional<BlockInfo> info = allocator_->find_block(pointer(block));
    if (!info || info->pending_free) broken("a block with recorded streams is not live", block);
    if (streams.empty()) broken("a recorded block has no stream", block);
  }
  absl::flat_hash_map<std::uintptr_t, std::uint32_t> marks_of;
  for (const auto& [stream, marks] : marks_) {
    for (const Mark& mark : marks) ++marks_of[mark.block];
  }
  if (marks_of.size() != pending_.size()) broken("marks name a block that is not pending", 0);
  for (const auto& [block, count] : pending_) {
    const std::optional<BlockInfo> info = allocator_->find_block(pointer(block));
    if (!info || !info->pending_free) broken("a pending free is not pending in the allocator", block);
    const auto it = marks_of.find(block);
    if (count == 0 || it == marks_of.end() || it->second != count) {
      broken("a pending free's count is not its number of marks", block);
    }
  }
}

}  // namespace gmlake
