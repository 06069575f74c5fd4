#include "engine/stream_fence.h"

namespace gmlake::engine {

StreamFence::~StreamFence() {
  if (!events_) return;
  for (auto& [id, s] : streams_) {
    for (const Mark& m : s.marks) {
      try {
        events_->release(m.token);
      } catch (...) {
      }
    }
  }
}

void StreamFence::poll(Stream& s) {
  while (!s.marks.empty() && events_->done(s.marks.front().token)) {
    s.safe_tick = s.marks.front().tick;
    events_->release(s.marks.front().token);
    s.marks.pop_front();
  }
}

void StreamFence::note_idle(StreamId stream, std::uint64_t tick) {
  if (!events_) return;
  Stream& s = streams_[stream];
  poll(s);
  if (s.marks.empty()) s.marks.push_back({tick, events_->record(stream)});
}

bool StreamFence::safe(StreamId stream, std::uint64_t tick) {
  if (!events_) return true;
  auto it = streams_.find(stream);
  if (it == streams_.end()) return false;  // pages idle on a stream that was never marked: not known finished
  poll(it->second);
  return tick <= it->second.safe_tick;
}

void StreamFence::wait_safe(StreamId stream, std::uint64_t tick, std::uint64_t now_tick) {
  if (!events_ || safe(stream, tick)) return;
  Stream& s = streams_[stream];
  if (s.marks.empty() || s.marks.back().tick < tick) s.marks.push_back({now_tick, events_->record(stream)});
  ++waits_;
  while (s.safe_tick < tick) {
    events_->wait(s.marks.front().token);
    poll(s);
  }
}

void StreamFence::wait_all(std::uint64_t now_tick) {
  if (!events_) return;
  for (auto& [id, s] : streams_) wait_safe(id, now_tick, now_tick);
}

}  // namespace gmlake::engine
