// StreamFence: which idle pages queued work can no longer touch.
//
// A page turns idle at an idle-queue tick, on the stream of the arena it belongs to (with asynchronous streams
// every stream has its own arenas). It is safe to unmap, or to map its chunk elsewhere, once all work queued on
// that stream before the tick has finished (cuMemUnmap does not wait for it: pytorch#196258). The fence keeps,
// per stream, a few marks recorded at ticks (StreamEvents::record) and the highest tick known finished; a mark
// is recorded when pages turn idle and the stream has no unfinished mark, so marks cost one event per GPU
// round trip, not one per free.
//
// Without StreamEvents (host, sim: nothing runs asynchronously) every tick is safe at once.
#pragma once

#include <cstdint>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "gmlake/stream_events.h"

namespace gmlake::engine {

class StreamFence {
 public:
  explicit StreamFence(StreamEvents* events) : events_(events) {}
  ~StreamFence();
  StreamFence(const StreamFence&) = delete;
  StreamFence& operator=(const StreamFence&) = delete;

  bool asynchronous() const { return events_ != nullptr; }
  // Pages of `stream` turned idle at `tick`: records a mark if the stream has none unfinished.
  void note_idle(StreamId stream, std::uint64_t tick);
  // True when all work queued on `stream` before `tick` has finished. Never blocks.
  bool safe(StreamId stream, std::uint64_t tick);
  // Blocks until safe(stream, tick); `now_tick` (>= tick) labels a mark recorded now if none covers tick.
  void wait_safe(StreamId stream, std::uint64_t tick, std::uint64_t now_tick);
  // Blocks until all work queued so far on every stream seen has finished.
  void wait_all(std::uint64_t now_tick);
  std::uint64_t waits() const { return waits_; }

 private:
  struct Mark {
    std::uint64_t tick;
    StreamEvents::Token token;
  };
  struct Stream {
    std::deque<Mark> marks;       // unfinished, oldest first
    std::uint64_t safe_tick = 0;  // every tick <= this is safe
  };
  void poll(Stream& s);

  StreamEvents* events_;
  absl::flat_hash_map<StreamId, Stream> streams_;
  std::uint64_t waits_ = 0;
};

}  // namespace gmlake::engine
