#include "stream_fence.h"

#include "engine_checks.h"

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
  while (!s.marks.empty()) {
    ++driver_calls_;
    if (!events_->done(s.marks.front().token)) break;
    s.safe_tick = s.marks.front().tick;
    events_->release(s.marks.front().token);
    s.marks.pop_front();
  }
}

void StreamFence::note_idle(StreamId stream, std::uint64_t tick) {
  if (!events_) return;
  Stream& s = streams_[stream];
  // Between marks nothing is asked of the driver: a free costs no event query (readiness() polls when asked).
  if (s.marked && tick < s.last_mark_tick + kMarkSpacingTicks) return;
  poll(s);
  if (s.marks.size() >= kMaxMarks) return;
  record_mark(s, stream, tick);
}

void StreamFence::record_mark(Stream& s, StreamId stream, std::uint64_t tick) {
  ++driver_calls_;
  s.marks.push_back({tick, events_->record(stream)});  // record throws: nothing changed
  s.marked = true;
  s.last_mark_tick = tick;
}

StreamFence::Readiness StreamFence::readiness(StreamId stream, std::uint64_t tick) {
  if (!events_) return Readiness::kSafe;
  auto it = streams_.find(stream);
  if (it == streams_.end()) return Readiness::kUncovered;  // never marked: nothing known
  Stream& s = it->second;
  // Answered without the driver where a poll cannot change the answer: a tick already known safe, or one no
  // unfinished mark covers (a poll only moves safe_tick up to a mark's tick).
  if (tick <= s.safe_tick) return Readiness::kSafe;
  if (s.marks.empty() || s.marks.back().tick < tick) return Readiness::kUncovered;
  poll(s);
  if (tick <= s.safe_tick) return Readiness::kSafe;
  return Readiness::kCovered;
}

bool StreamFence::wait_safe(StreamId stream, std::uint64_t tick, std::uint64_t now_tick) {
  if (readiness(stream, tick) == Readiness::kSafe) return false;
  Stream& s = streams_[stream];
  const bool drains = s.marks.empty() || s.marks.back().tick < tick;
  if (drains) record_mark(s, stream, now_tick);
  // Marks finish in stream order: waiting for the first one that covers `tick` is enough.
  for (const Mark& m : s.marks) {
    if (m.tick >= tick) {
      ++driver_calls_;
      events_->wait(m.token);
      break;
    }
  }
  poll(s);
  return drains;
}

void StreamFence::cover(StreamId stream, std::uint64_t tick, std::uint64_t now_tick) {
  if (readiness(stream, tick) != Readiness::kUncovered) return;
  record_mark(streams_[stream], stream, now_tick);
}

void StreamFence::wait_all(std::uint64_t now_tick) {
  if (!events_) return;
  ++driver_calls_;
  events_->synchronize_all();
  for (auto& [id, s] : streams_) {
    for (const Mark& m : s.marks) events_->release(m.token);
    s.marks.clear();
    s.safe_tick = now_tick;
  }
}

void StreamFence::check_invariants() const {
  if (!events_ && !streams_.empty()) broken("the stream fence keeps streams without StreamEvents");
  for (const auto& [id, s] : streams_) {
    if (!s.marked && (!s.marks.empty() || s.last_mark_tick != 0)) broken("a stream never marked holds marks");
    if (s.marks.empty()) continue;
    if (s.marks.front().tick < s.safe_tick) broken("a stream's unfinished mark is older than its safe tick");
    if (s.marks.back().tick != s.last_mark_tick) broken("a stream's last mark is not its newest");
    for (std::size_t i = 1; i < s.marks.size(); ++i) {
      if (s.marks[i].tick < s.marks[i - 1].tick) broken("a stream's marks go back in ticks");
    }
  }
}

}  // namespace gmlake::engine
