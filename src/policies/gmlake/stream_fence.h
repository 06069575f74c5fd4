// StreamFence: which idle pages queued work can no longer touch.
//
// A page turns idle at an idle-queue tick, on the stream of the arena it belongs to (with asynchronous streams
// every stream has its own arenas). It is safe to unmap, or to map its chunk elsewhere, once all work queued on
// that stream before the tick has finished (cuMemUnmap does not wait for it: PyTorch issue 196258,
// https://github.com/pytorch/pytorch/issues/196258, an unmap under queued work). The fence keeps,
// per stream, the marks recorded at ticks (StreamEvents::record) that have not finished yet, and the highest
// tick known finished. A mark is recorded when pages turn idle and the stream's last mark is at least
// kMarkSpacingTicks older (at most kMaxMarks unfinished): one event per few frees, not one per free.
//
// A page idle since tick t is then
//   safe       when a finished mark has a tick >= t: unmap it now;
//   covered    when an unfinished mark has a tick >= t: waiting for that mark does not drain the stream (work
//              queued after the mark keeps the device busy), so it is cheap;
//   uncovered  otherwise: only recording a mark now and waiting for it would tell, which drains the stream.
//
// Without StreamEvents (host, sim: nothing runs asynchronously) every tick is safe at once.
//
// Invariants (check_invariants), per stream s:
//   s.marks' ticks never decrease, front to back, and s.safe_tick <= s.marks.front().tick
//   s.marks non-empty  =>  s.marks.back().tick = s.last_mark_tick     (marks are appended, finished from the front)
//   not s.marked  =>  s.marks empty and s.last_mark_tick = 0
// and without StreamEvents no stream is kept at all.
#pragma once

#include <cstdint>
#include <cstddef>
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

  enum class Readiness { kSafe, kCovered, kUncovered };
  static constexpr std::uint64_t kMarkSpacingTicks = 8;
  static constexpr std::size_t kMaxMarks = 64;

  bool asynchronous() const { return events_ != nullptr; }
  // Pages of `stream` turned idle at `tick`: records a mark when the spacing allows (and only then polls the
  // stream's marks: one event record and at most a few queries per kMarkSpacingTicks idle turns).
  void note_idle(StreamId stream, std::uint64_t tick);
  // Where the work queued on `stream` before `tick` stands (see above). Never blocks. Asks the driver (polls the
  // stream's marks) only for a tick an unfinished mark covers: a tick known safe or one no mark covers is answered
  // from what the fence knows, as a poll could not change that answer.
  Readiness readiness(StreamId stream, std::uint64_t tick);
  bool safe(StreamId stream, std::uint64_t tick) { return readiness(stream, tick) == Readiness::kSafe; }
  // True when all work queued on `stream` has finished: the device waits for the host there (StreamEvents::idle,
  // cuStreamQuery). Only with StreamEvents (asynchronous()). Never blocks; throws BackendError.
  bool stream_idle(StreamId stream) {
    ++driver_calls_;
    return events_->idle(stream);
  }
  // Blocks until safe(stream, tick); `now_tick` (>= tick) labels a mark recorded now if none covers tick. True when
  // it had to record that mark (tick was uncovered: waiting for it drains the stream's whole queue), false when it
  // waited for an earlier mark or tick was already safe.
  bool wait_safe(StreamId stream, std::uint64_t tick, std::uint64_t now_tick);
  // Never blocks: when no mark covers `tick` yet, records one on `stream` labelled `now_tick` (>= tick), so that
  // readiness() finds `tick` safe once the stream gets there, with no further free on that stream. For work that
  // must wait for the stream, but not now: a recalled loan (StitchingAllocator::give_back_if_unused), which goes
  // back at a later call. Throws what StreamEvents::record throws (BackendError); then nothing changed.
  void cover(StreamId stream, std::uint64_t tick, std::uint64_t now_tick);
  // Blocks until all work queued so far on every stream has finished: every tick up to `now_tick` is safe.
  void wait_all(std::uint64_t now_tick);

  // The StreamEvents calls made so far that ask the driver (record, done, idle, wait, synchronize_all; release
  // returns an event to its pool and is not counted): Stats::stream_event_calls.
  std::uint64_t driver_calls() const { return driver_calls_; }

  // Checks the invariants above; throws std::logic_error (engine_checks.h). O(streams + marks); asks the
  // driver nothing.
  void check_invariants() const;

 private:
  struct Mark {
    std::uint64_t tick;
    StreamEvents::Token token;
  };
  struct Stream {
    std::deque<Mark> marks;       // unfinished, oldest first
    std::uint64_t safe_tick = 0;  // every tick <= this is safe
    bool marked = false;          // a mark was ever recorded
    std::uint64_t last_mark_tick = 0;
  };
  void poll(Stream& s);
  // Records a mark on `stream` labelled `tick` at the end of s.marks. Throws what StreamEvents::record throws
  // (then nothing changed).
  void record_mark(Stream& s, StreamId stream, std::uint64_t tick);

  StreamEvents* events_;
  absl::flat_hash_map<StreamId, Stream> streams_;
  std::uint64_t driver_calls_ = 0;
};

}  // namespace gmlake::engine
