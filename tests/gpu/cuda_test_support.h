// What the GPU tests share: whether a CUDA device is here (else each test is skipped with the reason), the
// primary context of device 0 made current for device copies, and host <-> device copies and fills through the
// same run-time-loaded driver as the backend (src/backends/cuda/cuda_driver.h), so the test program starts anywhere.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_driver.h"
#include "gmlake/error.h"

namespace gmlake::gpu_test {

// Why the GPU tests cannot run here, or nullopt when device 0 is usable. Checked once per process; the first
// successful check retains device 0's primary context for the rest of the process, so that the context is not
// destroyed and created again between tests (each backend also retains it).
inline std::optional<std::string> cuda_unavailable() {
  static const std::optional<std::string> why = []() -> std::optional<std::string> {
    try {
      const cuda::DriverApi& api = cuda::driver();
      int count = 0;
      cuda::check("cuDeviceGetCount", api.cuDeviceGetCount(&count));
      if (count == 0) return "no CUDA device";
      CUdevice device = 0;
      cuda::check("cuDeviceGet", api.cuDeviceGet(&device, 0));
      CUcontext context = nullptr;
      cuda::check("cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain(&context, device));
      return std::nullopt;
    } catch (const Error& e) {
      return std::string("no usable CUDA device, GPU test skipped: ") + e.what();
    }
  }();
  return why;
}

// Device 0's primary context (retained by cuda_unavailable()). Only after cuda_unavailable() said nullopt.
inline CUcontext primary_context() {
  CUcontext context = nullptr;
  const cuda::DriverApi& api = cuda::driver();
  CUdevice device = 0;
  cuda::check("cuDeviceGet", api.cuDeviceGet(&device, 0));
  cuda::check("cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain(&context, device));
  cuda::check("cuDevicePrimaryCtxRelease", api.cuDevicePrimaryCtxRelease(device));  // still retained once
  return context;
}

// A test fixture that skips its tests without a device and keeps device 0's primary context current.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::optional<std::string> why = cuda_unavailable()) GTEST_SKIP() << *why;
    CUcontext context = primary_context();
    cuda::check("cuCtxPushCurrent", cuda::driver().cuCtxPushCurrent(context));
    pushed_ = true;
  }
  void TearDown() override {
    if (!pushed_) return;
    CUcontext popped = nullptr;
    cuda::driver().cuCtxPopCurrent(&popped);
  }

 private:
  bool pushed_ = false;
};

// A new non-blocking stream (the caller destroys it with cuStreamDestroy).
inline CUstream make_stream() {
  CUstream s = nullptr;
  cuda::check("cuStreamCreate", cuda::driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  return s;
}

// Waits until the device has finished all work (the tests' fills and copies run on the legacy default stream).
inline void synchronize() { cuda::check("cuCtxSynchronize", cuda::driver().cuCtxSynchronize()); }

inline void fill_bytes(std::uintptr_t addr, std::uint8_t value, std::uint64_t size_bytes) {
  cuda::check("cuMemsetD8", cuda::driver().cuMemsetD8(addr, value, size_bytes));
}

inline void fill_words(std::uintptr_t addr, std::uint32_t value, std::uint64_t words) {
  cuda::check("cuMemsetD32", cuda::driver().cuMemsetD32(addr, value, words));
}

inline void copy_to_device(std::uintptr_t addr, const void* from, std::uint64_t size_bytes) {
  cuda::check("cuMemcpyHtoD", cuda::driver().cuMemcpyHtoD(addr, from, size_bytes));
}

inline void copy_from_device(void* to, std::uintptr_t addr, std::uint64_t size_bytes) {
  cuda::check("cuMemcpyDtoH", cuda::driver().cuMemcpyDtoH(to, addr, size_bytes));
}

inline std::vector<std::uint8_t> read_bytes(std::uintptr_t addr, std::uint64_t size_bytes) {
  std::vector<std::uint8_t> bytes(size_bytes);
  copy_from_device(bytes.data(), addr, size_bytes);
  return bytes;
}

// Free and total memory of the current context's device, in bytes.
struct DeviceMemory {
  std::uint64_t free_bytes;
  std::uint64_t total_bytes;
};
inline DeviceMemory device_memory() {
  std::size_t free_bytes = 0, total_bytes = 0;
  cuda::check("cuMemGetInfo", cuda::driver().cuMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

}  // namespace gmlake::gpu_test
