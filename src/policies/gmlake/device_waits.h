// DeviceWaits: whether the device waits for the host on the stream of the allocation in progress, so that a
// backend call made now is on the critical path rather than hidden behind queued work (VMM calls cost the
// allocating thread's time and do not stall the GPU: ../shared/REFERENCE.md). ChunkSource asks it where the pool
// grows (waiting_growth_chunk_share), where the plain headroom would move memory (waiting_headroom_permille), and
// for the move budget's wall-time share (move_share_permille: only moves on the critical path are charged and
// refused), after a move and where the share alone would refuse one.
//
// With StreamEvents it asks the stream (StreamFence::stream_idle: cuStreamQuery), and only until the stream
// says it has drained: nothing is queued on the stream while the allocating thread is inside the allocator, so a
// drained stream stays drained until the allocation returns. A busy answer is asked again at the next question,
// since the queue drains while the host works. Without StreamEvents (host, sim, the replay) nothing can be asked:
// the answer is the assumption it was made with (Config::assume_device_waits), and it never changes.
//
// Invariant: without StreamEvents, now() = assumed, always.
// Thread safety: none (the policy's lock).
#pragma once

#include "gmlake/stream_events.h"
#include "stream_fence.h"

namespace gmlake::engine {

class DeviceWaits {
 public:
  // `fence` must outlive it; `assumed`: the answer without StreamEvents.
  DeviceWaits(StreamFence& fence, bool assumed) : fence_(fence), assumed_(assumed) {}

  // An allocation on `stream` begins: the next now() asks the stream again.
  void begin(StreamId stream) {
    stream_ = stream;
    drained_ = false;
  }
  // True when the device waits for the host on the allocation's stream (see above). Never blocks; throws
  // BackendError when the driver fails (then nothing changed).
  bool now() {
    if (!fence_.asynchronous()) return assumed_;
    if (!drained_) drained_ = fence_.stream_idle(stream_);
    return drained_;
  }

 private:
  StreamFence& fence_;
  bool assumed_;
  StreamId stream_ = 0;   // the allocation's stream (begin())
  bool drained_ = false;  // the stream said it has drained since begin()
};

}  // namespace gmlake::engine
