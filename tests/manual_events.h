// ManualEvents: a StreamEvents fake whose events finish only when the test says so (finish, finish_all) or
// when waited on; record() on a stream in failing_streams throws BackendError, as a failing cuEventRecord.
#pragma once

#include <cstdint>
#include <map>
#include <set>

#include "gmlake/clock.h"
#include "gmlake/error.h"
#include "gmlake/stream_events.h"

namespace gmlake::test {

class ManualEvents final : public StreamEvents {
 public:
  Token record(StreamId stream) override {
    if (failing_streams.count(stream)) throw BackendError("cuEventRecord", "CUDA_ERROR_LAUNCH_FAILED (fake)");
    recorded_streams.insert(stream);
    unfinished.insert(++next_);
    stream_of[next_] = stream;
    return next_;
  }
  bool done(Token t) override {
    ++queries;
    return !unfinished.count(t);
  }
  // A stream is idle unless the test put it in busy_streams or an event recorded on it has not finished (as
  // cuStreamQuery: the stream's work up to its last event is queued work).
  bool idle(StreamId stream) override {
    ++idle_queries;
    if (busy_streams.count(stream)) return false;
    for (const Token t : unfinished) {
      if (stream_of[t] == stream) return false;
    }
    return true;
  }
  // Waiting for an event finishes it and, as a stream runs in order, every event recorded before it on its stream;
  // it moves `clock` (when set) by wait_ns, as the host's time passes while it blocks.
  void wait(Token t) override {
    ++waits;
    if (clock != nullptr) clock->advance_ns(wait_ns);
    const auto it = stream_of.find(t);
    if (it == stream_of.end()) return;
    std::erase_if(unfinished, [&](Token u) { return u <= t && stream_of[u] == it->second; });
  }
  void release(Token t) override {
    unfinished.erase(t);
    ++released;
  }
  void synchronize_all() override {
    ++synchronizations;
    unfinished.clear();
  }
  void finish_all() { unfinished.clear(); }
  // Finishes the events recorded on `stream` so far.
  void finish(StreamId stream) {
    std::erase_if(unfinished, [&](Token t) { return stream_of[t] == stream; });
  }
  // Events recorded so far.
  int recorded() const { return static_cast<int>(next_); }
  // Calls that would reach the driver (records that succeeded, done, idle, wait, synchronize_all; not release):
  // what Stats::stream_event_calls counts.
  std::uint64_t driver_calls() const {
    return static_cast<std::uint64_t>(recorded() + queries + idle_queries + waits + synchronizations);
  }
  // Events recorded and not yet released.
  int outstanding() const { return static_cast<int>(next_) - released; }

  std::set<Token> unfinished;
  std::set<StreamId> recorded_streams;
  std::set<StreamId> failing_streams;
  std::set<StreamId> busy_streams;  // streams with queued work (idle() is false)
  std::map<Token, StreamId> stream_of;
  int waits = 0;
  int queries = 0;  // done() calls (cuEventQuery)
  int idle_queries = 0;  // idle() calls (cuStreamQuery)
  int synchronizations = 0;
  int released = 0;
  ManualClock* clock = nullptr;
  std::int64_t wait_ns = 0;

 private:
  Token next_ = 0;
};

}  // namespace gmlake::test
