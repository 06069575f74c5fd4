// CudaStreamEvents: StreamEvents on CUDA events, for the gmlake policy over a CudaBackend (stream_events.h).
//
//   record   cuEventRecord of a pooled event (created with CU_EVENT_DISABLE_TIMING) on the stream
//   done     cuEventQuery (CUDA_ERROR_NOT_READY: false)
//   idle     cuStreamQuery (CUDA_ERROR_NOT_READY: false)
//   wait     cuEventSynchronize
//   release  the event goes back to the pool; the pool's events are destroyed with this object
//   synchronize_all  cuCtxSynchronize in the device's primary context
// A StreamId is a CUstream / cudaStream_t handle's value (0: the legacy default stream, as PyTorch's default).
// Calls run in the backend's device's primary context (made current around each call, then restored).
// Errors: a failing driver call throws BackendError("cuEventRecord", "<CUDA_ERROR_NAME> (...)").
// Thread safety: none; used under the owning pool's lock, like the backend.
#pragma once

#include <vector>

#include "cuda_backend.h"
#include "gmlake/stream_events.h"

namespace gmlake {

class CudaStreamEvents final : public StreamEvents {
 public:
  // `backend` must outlive this object.
  explicit CudaStreamEvents(const CudaBackend& backend);
  ~CudaStreamEvents() override;  // destroys every pooled event; never throws
  CudaStreamEvents(const CudaStreamEvents&) = delete;
  CudaStreamEvents& operator=(const CudaStreamEvents&) = delete;

  Token record(StreamId stream) override;
  bool done(Token token) override;
  bool idle(StreamId stream) override;
  void wait(Token token) override;
  void release(Token token) override;
  void synchronize_all() override;
  std::uint64_t events_created() const { return created_; }

 private:
  void* context_;
  std::vector<Token> pool_;  // idle events (CUevent values)
  std::uint64_t created_ = 0;
};

}  // namespace gmlake
