// What the hand-run CUDA probes of bench/cuda share: a driver call checked (the probe stops with the call's name
// and the driver's error name on failure), the steady clock in nanoseconds, a sample's median and mean, the primary
// context of a device, and a chunk's properties and access. Header only; the probes build with
// one nvcc line each (see each probe's header).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace probe {

// Exits with status 1, printing "<what> failed: <CUDA_ERROR_NAME>" to stderr, unless r is CUDA_SUCCESS.
inline void ok(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    std::fprintf(stderr, "%s failed: %s\n", what, name ? name : "?");
    std::exit(1);
  }
}

// The steady clock, in nanoseconds.
inline std::uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The median and mean of a sample of times, in nanoseconds (the sample must not be empty).
struct Figures {
  double median_ns, mean_ns;
};
inline Figures summarize(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return {static_cast<double>(v[v.size() / 2]), mean};
}

// cuInit, then device `device`'s primary context, retained and made current on this thread.
inline CUcontext primary_context(int device) {
  ok(cuInit(0), "cuInit");
  CUdevice dev;
  ok(cuDeviceGet(&dev, device), "cuDeviceGet");
  CUcontext ctx;
  ok(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  ok(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return ctx;
}

// A chunk's properties: pinned memory on `device`.
inline CUmemAllocationProp prop_of(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

// Read and write access for `device`.
inline CUmemAccessDesc access_of(int device) {
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = device;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return a;
}

}  // namespace probe
