#include "cuda_stream_events.h"

#include <cuda.h>

#include "cuda_driver.h"

namespace gmlake {
namespace {

using cuda::check;
using cuda::driver;

CUevent as_event(StreamEvents::Token t) { return reinterpret_cast<CUevent>(static_cast<std::uintptr_t>(t)); }

}  // namespace

CudaStreamEvents::CudaStreamEvents(const CudaBackend& backend) : context_(backend.context()) {}

CudaStreamEvents::~CudaStreamEvents() {
  try {
    const cuda::ScopedContext current(static_cast<CUcontext>(context_));
    for (Token t : pool_) driver().cuEventDestroy(as_event(t));
  } catch (...) {
  }
}

StreamEvents::Token CudaStreamEvents::record(StreamId stream) {
  const cuda::ScopedContext current(static_cast<CUcontext>(context_));
  Token token;
  if (!pool_.empty()) {
    token = pool_.back();
    pool_.pop_back();
  } else {
    CUevent event = nullptr;
    check("cuEventCreate", driver().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
    token = reinterpret_cast<std::uintptr_t>(event);
    ++created_;
  }
  const CUresult r = driver().cuEventRecord(as_event(token), reinterpret_cast<CUstream>(stream));
  if (r != CUDA_SUCCESS) {
    pool_.push_back(token);
    check("cuEventRecord", r);
  }
  return token;
}

bool CudaStreamEvents::done(Token token) {
  const cuda::ScopedContext current(static_cast<CUcontext>(context_));
  const CUresult r = driver().cuEventQuery(as_event(token));
  if (r == CUDA_ERROR_NOT_READY) return false;
  check("cuEventQuery", r);
  return true;
}

bool CudaStreamEvents::idle(StreamId stream) {
  const cuda::ScopedContext current(static_cast<CUcontext>(context_));
  const CUresult r = driver().cuStreamQuery(reinterpret_cast<CUstream>(stream));
  if (r == CUDA_ERROR_NOT_READY) return false;
  check("cuStreamQuery", r);
  return true;
}

void CudaStreamEvents::wait(Token token) {
  const cuda::ScopedContext current(static_cast<CUcontext>(context_));
  check("cuEventSynchronize", driver().cuEventSynchronize(as_event(token)));
}

void CudaStreamEvents::release(Token token) { pool_.push_back(token); }

void CudaStreamEvents::synchronize_all() {
  const cuda::ScopedContext current(static_cast<CUcontext>(context_));
  check("cuCtxSynchronize", driver().cuCtxSynchronize());
}

}  // namespace gmlake
