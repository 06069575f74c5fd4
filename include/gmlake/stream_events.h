// StreamEvents: how an allocator learns that the work queued on a stream has finished, so that it never
// unmaps or hands to another stream memory that queued work can still touch. On the GPU these are pooled CUDA
// events (cuEventRecord / cuEventQuery / cuEventSynchronize); host and sim backends run nothing
// asynchronously and pass no StreamEvents at all.
//
// Thread safety: called only under the owning pool's lock.
#pragma once

#include <cstdint>

namespace gmlake {

// A stream as the caller names it (a cudaStream_t cast to an integer for CUDA; 0 is the default stream).
using StreamId = std::uint64_t;

class StreamEvents {
 public:
  using Token = std::uint64_t;
  virtual ~StreamEvents() = default;
  // Marks the point after all work queued on `stream` so far. Throws BackendError when the driver fails.
  virtual Token record(StreamId stream) = 0;
  // True once all work before the mark has finished; never blocks.
  virtual bool done(Token token) = 0;
  // True when all work queued on `stream` so far has finished (cuStreamQuery): the device waits for the host
  // there, so whatever the host spends now delays the stream's next work. Never blocks. Throws BackendError when
  // the driver fails.
  virtual bool idle(StreamId stream) = 0;
  // Blocks the calling host thread until done(token).
  virtual void wait(Token token) = 0;
  // The token is not needed any more (its event goes back to a pool).
  virtual void release(Token token) = 0;
  // Blocks until all work queued on every stream of the device has finished (cuCtxSynchronize). Used before
  // giving memory back (empty_cache, teardown); records nothing, so streams destroyed since are no danger.
  virtual void synchronize_all() = 0;
};

}  // namespace gmlake
