// LaggingStreamEvents: the replay's model of a device that runs behind the host (`gmlake replay --device-lag-us`).
//
// A replay runs no kernels, so without a model every chunk is safe to move the moment it turns idle, and the
// replay assumes the device busy wherever the pool grows or moves (assume_device_waits). On a GPU neither holds: the
// work queued before a free may still be running, so the StreamFence (stream_fence.h) must wait for it, or the
// pool creates a chunk instead (lag_grow_pages), and at the start of a step the stream has drained. This model
// gives the fence one answer for both, from one figure, the lag L: the work the host queues at (trace) time t
// has finished at t + L. The device is one queue for all streams.
//   record(stream) at time t  ->  a mark done at t + L;
//   done(mark)                 =  now >= its t + L, or a later mark was waited for (queue order);
//   idle(stream)               =  now - (the last op the host ran, host_op()) >= L: the device has drained;
//   wait(mark)                 :  the host would block for (t + L - now) if positive; that time is added to
//                                 wait_ns() and the mark and every earlier one count as done;
//   synchronize_all()          :  likewise for everything queued so far.
// The replay's clock is the trace's own, so a wait does not move it: what a wait costs is reported (waits(),
// wait_ns()), and the ops after it keep their recorded times (a first-order model).
// L is the caller's choice: an H100 step time (tens of ms) for a GPU-bound training loop, a few ms for a
// CPU-bound one. bench/gpu-runs/2026-11-27 holds A/B rounds recorded on an H100 to fit it against.
// Invariants (check_invariants): every live mark's done time is its record time + L, and marks' sequence numbers
// rise with their record times; no mark counts as waited for before it was recorded.
// Thread safety: none (the replay's single thread).
#pragma once

#include <cstdint>
#include <map>

#include "gmlake/clock.h"
#include "gmlake/stream_events.h"

namespace gmlake {

class LaggingStreamEvents final : public StreamEvents {
 public:
  // `clock` (the replay's trace clock) must outlive this; `lag_ns` >= 0.
  LaggingStreamEvents(Clock& clock, std::int64_t lag_ns);

  // The host ran an op (queued work) at the clock's now: idle() measures the device's drain from it.
  void host_op() { last_op_ns_ = clock_.now_ns(); }

  Token record(StreamId stream) override;
  bool done(Token token) override;
  bool idle(StreamId stream) override;
  void wait(Token token) override;
  void release(Token token) override;
  void synchronize_all() override;

  // Waits the host made (wait() and synchronize_all()), and the time it would have been blocked in them (ns).
  std::uint64_t waits() const { return waits_; }
  std::int64_t wait_ns() const { return wait_ns_; }
  // Marks not yet released.
  std::size_t live_marks() const { return marks_.size(); }
  // Checks the invariants above; throws std::logic_error.
  void check_invariants() const;

 private:
  struct Mark {
    std::int64_t recorded_ns;
    std::int64_t done_ns;
  };
  void wait_until(std::int64_t done_ns);
  Clock& clock_;
  std::int64_t lag_ns_;
  std::int64_t last_op_ns_ = 0;
  std::map<Token, Mark> marks_;  // by sequence number (the token), live ones
  Token next_ = 1;
  Token waited_ = 0;             // every mark with a token <= this is done (one was waited for)
  std::uint64_t waits_ = 0;
  std::int64_t wait_ns_ = 0;
};

}  // namespace gmlake
