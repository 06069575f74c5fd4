// Can VMM calls leave the allocating thread? Questions the earlier probe (vmm_async_probe.cpp: the driver
// serializes VMM calls across the threads of a context) left open:
//   A. Does a second thread's cuMemMap / cuMemSetAccess / cuMemUnmap slow the first thread's kernel launches, or
//      do launches go on beside them? (If launches wait too, a worker thread hides nothing.)
//   B. Can the mapping of a block be left to a worker thread after the block's address was handed out, with the
//      block's stream gated by cuStreamWaitValue32 on a host flag that the worker sets once it has mapped and
//      granted access? The kernels queued behind the gate must see the new mapping: no fault, every byte right.
//   C. What does that buy a CPU-bound step that grows?
//   D. What does a copy queued before the mapping exists find (PyTorch's H2D copies, cudaMemcpyAsync)?
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -o vmm_overlap_probe bench/cuda/vmm_overlap_probe.cu -lcuda
//   ./vmm_overlap_probe > out.json
//
// Prints one JSON object. A: the main thread's mean and median ns per launch of an empty kernel (10,000 launches,
// synchronized every 100 so the queue does not fill) alone, beside a thread that maps + grants + unmaps a 2 MiB
// chunk in a loop, and beside one that also creates and releases it; with the worker's calls per second. B: for
// 200 rounds of a 64 MiB block of 32 chunks of 2 MiB, mapped by a worker after the fill and check kernels were
// queued behind the gate: the mismatching words counted by the check kernel (0 expected), the first CUDA error,
// and the main thread's time to queue the gate and kernels against the worker's time to map them. C: a step of
// 2,000 kernel launches with 20 blocks of 8 new 2 MiB chunks among them (a CPU-bound step that grows), the blocks
// mapped by the launching thread before their fill kernel (as today) or by a worker behind a gate: median step
// time over 15 steps each, alternating, and the mismatching words of the blocks' check. D: cuMemcpyHtoDAsync of
// 8 MiB queued behind a gate into a range not mapped yet (D1) or mapped without access yet (D2): what queueing
// the copy returned, the stream's state after the worker mapped and opened the gate, and the words that arrived.
//
// Results on the H100 (bench/cuda/vmm_overlap_h100.json, four runs; docs/benchmarks.md, eleventh session):
// A: launches 3.6-4.2 us alone, 3.8-4.9 us beside a worker making 60,000-81,000 VMM calls a second: the driver does
// not hold launches back. B: 0 wrong words, no error, every gated round still waiting once queued. C: 16.1-19.3 ms
// a step mapped inline, 8.6-10.2 ms mapped by the worker. D: both copies are refused when queued
// (CUDA_ERROR_INVALID_VALUE): the driver checks a copy's pointer against its mappings and their access at the
// call, so only kernels may be queued before a block is mapped. PyTorch copies into new blocks all the time
// (Module.to, Tensor.copy_), so deferring map or set_access past the allocation breaks it (run 86: the A/B's
// `model.to("cuda")` failed with "CUDA error: invalid argument"); this probe is why gmlake maps on the allocating
// thread.
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "probe_support.h"

namespace {

using probe::now_ns;
using probe::ok;
using probe::summarize;

__global__ void empty_kernel() {}

__global__ void fill_kernel(std::uint32_t* p, std::size_t words, std::uint32_t value) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x)
    p[i] = value ^ static_cast<std::uint32_t>(i);
}

__global__ void check_kernel(const std::uint32_t* p, std::size_t words, std::uint32_t value,
                             unsigned long long* mismatches) {
  unsigned long long bad = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x)
    bad += p[i] != (value ^ static_cast<std::uint32_t>(i));
  if (bad) atomicAdd(mismatches, bad);
}

constexpr std::size_t kChunk = 2u << 20;

}  // namespace

int main() {
  CUcontext ctx = probe::primary_context(0);
  CUstream stream;
  ok(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  const CUmemAllocationProp prop = probe::prop_of(0);
  const CUmemAccessDesc access = probe::access_of(0);

  std::printf("{\n");
  // ---- A: launches beside a VMM worker
  const char* names[] = {"alone", "beside_map_access_unmap", "beside_create_map_access_unmap_release"};
  for (int mode = 0; mode < 3; ++mode) {
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> worker_calls{0};
    std::thread worker;
    if (mode > 0) {
      worker = std::thread([&, mode] {
        ok(cuCtxSetCurrent(ctx), "worker cuCtxSetCurrent");
        CUdeviceptr va;
        ok(cuMemAddressReserve(&va, kChunk, 0, 0, 0), "reserve");
        CUmemGenericAllocationHandle h;
        if (mode == 1) ok(cuMemCreate(&h, kChunk, &prop, 0), "create");
        while (!stop.load(std::memory_order_relaxed)) {
          if (mode == 2) ok(cuMemCreate(&h, kChunk, &prop, 0), "create");
          ok(cuMemMap(va, kChunk, 0, h, 0), "map");
          ok(cuMemSetAccess(va, kChunk, &access, 1), "access");
          ok(cuMemUnmap(va, kChunk), "unmap");
          if (mode == 2) ok(cuMemRelease(h), "release");
          worker_calls.fetch_add(mode == 2 ? 5 : 3, std::memory_order_relaxed);
        }
        if (mode == 1) ok(cuMemRelease(h), "release");
        ok(cuMemAddressFree(va, kChunk), "address free");
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::vector<std::uint64_t> launch_ns;
    launch_ns.reserve(10000);
    const std::uint64_t calls0 = worker_calls.load();
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < 10000; ++i) {
      const std::uint64_t a = now_ns();
      empty_kernel<<<1, 1, 0, reinterpret_cast<cudaStream_t>(stream)>>>();
      launch_ns.push_back(now_ns() - a);
      if (i % 100 == 99) ok(cuStreamSynchronize(stream), "sync");
    }
    const std::uint64_t t1 = now_ns();
    const std::uint64_t calls = worker_calls.load() - calls0;
    stop = true;
    if (worker.joinable()) worker.join();
    const probe::Figures s = summarize(launch_ns);
    std::printf("  \"A_%s\": {\"launch_mean_ns\": %.0f, \"launch_median_ns\": %.0f, \"loop_ms\": %.2f, "
                "\"worker_vmm_calls_per_s\": %.0f},\n",
                names[mode], s.mean_ns, s.median_ns, (t1 - t0) / 1e6, calls / ((t1 - t0) / 1e9));
  }

  // ---- B: mapping left to a worker, the stream gated on a host flag
  constexpr int kChunks = 32;
  constexpr std::size_t kBytes = kChunks * kChunk;
  constexpr int kRounds = 200;
  CUdeviceptr va;
  ok(cuMemAddressReserve(&va, kBytes, 0, 0, 0), "reserve B");
  void* host_flag = nullptr;
  ok(cuMemHostAlloc(&host_flag, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), "host alloc");
  auto* flag = static_cast<volatile std::uint32_t*>(host_flag);
  *flag = 0;
  CUdeviceptr flag_dev;
  ok(cuMemHostGetDevicePointer(&flag_dev, host_flag, 0), "host device pointer");
  unsigned long long* mismatches = nullptr;
  if (cudaMalloc(&mismatches, sizeof(unsigned long long)) != cudaSuccess) return 1;
  cudaMemset(mismatches, 0, sizeof(unsigned long long));
  cudaDeviceSynchronize();
  std::vector<std::uint64_t> queue_ns, map_ns, round_ns, sync_map_round_ns;
  CUresult first_error = CUDA_SUCCESS;
  int gated_rounds_seen_waiting = 0;
  for (int round = 0; round < kRounds; ++round) {
    const bool sync_mapping = round % 2 == 1;  // odd rounds: map on the main thread first, as today
    std::vector<CUmemGenericAllocationHandle> handles(kChunks);
    const std::uint32_t value = 0x9E3779B9u * static_cast<std::uint32_t>(round + 1);
    const std::uint64_t r0 = now_ns();
    auto map_all = [&] {
      for (int c = 0; c < kChunks; ++c) {
        ok(cuMemCreate(&handles[c], kChunk, &prop, 0), "create B");
        ok(cuMemMap(va + c * kChunk, kChunk, 0, handles[c], 0), "map B");
      }
      ok(cuMemSetAccess(va, kBytes, &access, 1), "access B");
    };
    if (sync_mapping) {
      map_all();
      fill_kernel<<<264, 512, 0, reinterpret_cast<cudaStream_t>(stream)>>>(reinterpret_cast<std::uint32_t*>(va),
                                                                            kBytes / 4, value);
      check_kernel<<<264, 512, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
          reinterpret_cast<const std::uint32_t*>(va), kBytes / 4, value, mismatches);
      const CUresult r = cuStreamSynchronize(stream);
      if (r != CUDA_SUCCESS && first_error == CUDA_SUCCESS) first_error = r;
      sync_map_round_ns.push_back(now_ns() - r0);
    } else {
      const std::uint32_t gate = static_cast<std::uint32_t>(round + 1);
      std::atomic<std::uint64_t> mapped_ns{0};
      std::thread worker([&] {
        ok(cuCtxSetCurrent(ctx), "worker B");
        const std::uint64_t a = now_ns();
        map_all();
        mapped_ns = now_ns() - a;
        std::atomic_thread_fence(std::memory_order_release);
        *flag = gate;
      });
      const std::uint64_t q0 = now_ns();
      ok(cuStreamWaitValue32(stream, flag_dev, gate, CU_STREAM_WAIT_VALUE_GEQ), "wait value");
      fill_kernel<<<264, 512, 0, reinterpret_cast<cudaStream_t>(stream)>>>(reinterpret_cast<std::uint32_t*>(va),
                                                                            kBytes / 4, value);
      check_kernel<<<264, 512, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
          reinterpret_cast<const std::uint32_t*>(va), kBytes / 4, value, mismatches);
      queue_ns.push_back(now_ns() - q0);
      if (cuStreamQuery(stream) == CUDA_ERROR_NOT_READY) ++gated_rounds_seen_waiting;
      worker.join();
      const CUresult r = cuStreamSynchronize(stream);
      if (r != CUDA_SUCCESS && first_error == CUDA_SUCCESS) first_error = r;
      map_ns.push_back(mapped_ns);
      round_ns.push_back(now_ns() - r0);
    }
    ok(cuMemUnmap(va, kBytes), "unmap B");
    for (auto h : handles) ok(cuMemRelease(h), "release B");
  }
  unsigned long long bad = 0;
  cudaMemcpy(&bad, mismatches, sizeof bad, cudaMemcpyDeviceToHost);
  const char* err = nullptr;
  cuGetErrorName(first_error, &err);
  const probe::Figures q = summarize(queue_ns), m = summarize(map_ns), rr = summarize(round_ns),
              sr = summarize(sync_map_round_ns);
  std::printf("  \"B\": {\"rounds_gated\": %zu, \"rounds_mapped_first\": %zu, \"mismatching_words\": %llu, "
              "\"first_error\": \"%s\", \"gated_rounds_still_waiting_after_queueing\": %d,\n"
              "        \"main_queue_gate_and_kernels_median_us\": %.1f, \"worker_map_64MiB_median_us\": %.1f,\n"
              "        \"round_gated_median_us\": %.1f, \"round_mapped_first_median_us\": %.1f},\n",
              queue_ns.size(), sync_map_round_ns.size(), bad, err ? err : "?", gated_rounds_seen_waiting,
              q.median_ns / 1e3, m.median_ns / 1e3, rr.median_ns / 1e3, sr.median_ns / 1e3);
  // ---- C: a CPU-bound step that grows, mapped inline or by a worker behind gates
  constexpr int kBlocks = 20, kBlockChunks = 8, kLaunches = 2000, kSteps = 30;
  constexpr std::size_t kBlockBytes = kBlockChunks * kChunk;
  CUdeviceptr vc;
  ok(cuMemAddressReserve(&vc, kBlocks * kBlockBytes, 0, 0, 0), "reserve C");
  cudaMemset(mismatches, 0, sizeof(unsigned long long));
  cudaDeviceSynchronize();
  std::vector<std::uint64_t> inline_ns, worker_ns;
  std::uint32_t gate_value = 1000;
  CUresult error_c = CUDA_SUCCESS;
  for (int step = 0; step < kSteps; ++step) {
    const bool use_worker = step % 2 == 1;
    std::vector<CUmemGenericAllocationHandle> handles(kBlocks * kBlockChunks);
    auto map_block = [&](int b) {
      for (int c = 0; c < kBlockChunks; ++c) {
        ok(cuMemCreate(&handles[b * kBlockChunks + c], kChunk, &prop, 0), "create C");
        ok(cuMemMap(vc + b * kBlockBytes + c * kChunk, kChunk, 0, handles[b * kBlockChunks + c], 0), "map C");
      }
      ok(cuMemSetAccess(vc + b * kBlockBytes, kBlockBytes, &access, 1), "access C");
    };
    // The worker's queue: blocks to map, in order; each done block raises the flag to its gate value.
    std::atomic<int> requested{0};
    std::atomic<bool> done{false};
    const std::uint32_t base = gate_value;
    std::thread worker;
    if (use_worker) {
      worker = std::thread([&] {
        ok(cuCtxSetCurrent(ctx), "worker C");
        int next = 0;
        while (next < kBlocks) {
          if (next < requested.load(std::memory_order_acquire)) {
            map_block(next);
            std::atomic_thread_fence(std::memory_order_release);
            *flag = base + static_cast<std::uint32_t>(next) + 1;
            ++next;
          } else {
            std::this_thread::yield();
          }
        }
        done = true;
      });
    }
    const std::uint32_t value = 0x85EBCA6Bu * static_cast<std::uint32_t>(step + 1);
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < kLaunches; ++i) {
      if (i % (kLaunches / kBlocks) == 0) {
        const int b = i / (kLaunches / kBlocks);
        auto* p = reinterpret_cast<std::uint32_t*>(vc + b * kBlockBytes);
        if (use_worker) {
          requested.store(b + 1, std::memory_order_release);
          ok(cuStreamWaitValue32(stream, flag_dev, base + static_cast<std::uint32_t>(b) + 1,
                                 CU_STREAM_WAIT_VALUE_GEQ),
             "wait value C");
        } else {
          map_block(b);
        }
        fill_kernel<<<132, 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(p, kBlockBytes / 4, value + b);
      } else {
        empty_kernel<<<1, 1, 0, reinterpret_cast<cudaStream_t>(stream)>>>();
      }
    }
    const CUresult r = cuStreamSynchronize(stream);
    if (r != CUDA_SUCCESS && error_c == CUDA_SUCCESS) error_c = r;
    (use_worker ? worker_ns : inline_ns).push_back(now_ns() - t0);
    if (worker.joinable()) worker.join();
    gate_value = base + kBlocks + 1;
    for (int b = 0; b < kBlocks; ++b)
      check_kernel<<<132, 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
          reinterpret_cast<const std::uint32_t*>(vc + b * kBlockBytes), kBlockBytes / 4, value + b, mismatches);
    ok(cuStreamSynchronize(stream), "sync C");
    ok(cuMemUnmap(vc, kBlocks * kBlockBytes), "unmap C");
    for (auto h : handles) ok(cuMemRelease(h), "release C");
  }
  unsigned long long bad_c = 0;
  cudaMemcpy(&bad_c, mismatches, sizeof bad_c, cudaMemcpyDeviceToHost);
  const char* err_c = nullptr;
  cuGetErrorName(error_c, &err_c);
  inline_ns.erase(inline_ns.begin());  // the first step of each kind warms up
  worker_ns.erase(worker_ns.begin());
  const probe::Figures ci = summarize(inline_ns), cw = summarize(worker_ns);
  // ---- D: what a copy queued before the mapping finds (PyTorch's H2D copies: cudaMemcpyAsync on the stream).
  // D1: cuMemcpyHtoDAsync into a reserved range that is not mapped yet (the worker maps it behind the gate);
  // D2: into a range mapped on this thread but without access yet (the worker grants it behind the gate).
  // The result of queueing the copy, of the stream afterwards, and whether the bytes arrived.
  constexpr std::size_t kCopyBytes = 4 * kChunk;
  std::vector<std::uint32_t> host_words(kCopyBytes / 4), back(kCopyBytes / 4);
  for (std::size_t i = 0; i < host_words.size(); ++i) host_words[i] = 0xD00D0000u + static_cast<std::uint32_t>(i);
  std::printf("  \"C\": {\"step_inline_median_ms\": %.3f, \"step_worker_median_ms\": %.3f, \"step_inline_mean_ms\": "
              "%.3f, \"step_worker_mean_ms\": %.3f, \"mismatching_words\": %llu, \"first_error\": \"%s\"},\n",
              ci.median_ns / 1e6, cw.median_ns / 1e6, ci.mean_ns / 1e6, cw.mean_ns / 1e6, bad_c, err_c ? err_c : "?");
  for (int variant = 1; variant <= 2; ++variant) {
    CUdeviceptr vd;
    ok(cuMemAddressReserve(&vd, kCopyBytes, 0, 0, 0), "reserve D");
    std::vector<CUmemGenericAllocationHandle> hs(kCopyBytes / kChunk);
    for (auto& h : hs) ok(cuMemCreate(&h, kChunk, &prop, 0), "create D");
    if (variant == 2) {
      for (std::size_t c = 0; c < hs.size(); ++c) ok(cuMemMap(vd + c * kChunk, kChunk, 0, hs[c], 0), "map D");
    }
    const std::uint32_t gate = gate_value + 10 + variant;
    ok(cuStreamWaitValue32(stream, flag_dev, gate, CU_STREAM_WAIT_VALUE_GEQ), "wait value D");
    const CUresult queued = cuMemcpyHtoDAsync(vd, host_words.data(), kCopyBytes, stream);
    std::thread worker([&] {
      ok(cuCtxSetCurrent(ctx), "worker D");
      if (variant == 1) {
        for (std::size_t c = 0; c < hs.size(); ++c) ok(cuMemMap(vd + c * kChunk, kChunk, 0, hs[c], 0), "map D");
      }
      ok(cuMemSetAccess(vd, kCopyBytes, &access, 1), "access D");
      std::atomic_thread_fence(std::memory_order_release);
      *flag = gate;
    });
    worker.join();
    const CUresult synced = cuStreamSynchronize(stream);
    std::size_t arrived = 0;
    if (synced == CUDA_SUCCESS && cuMemcpyDtoH(back.data(), vd, kCopyBytes) == CUDA_SUCCESS) {
      for (std::size_t i = 0; i < back.size(); ++i) arrived += back[i] == host_words[i];
    }
    const char *qn = nullptr, *sn = nullptr;
    cuGetErrorName(queued, &qn);
    cuGetErrorName(synced, &sn);
    std::printf("  \"D%d_%s\": {\"queue_copy\": \"%s\", \"stream\": \"%s\", \"words_arrived\": %zu, \"of\": %zu}%s\n",
                variant, variant == 1 ? "copy_into_unmapped_range" : "copy_into_mapped_range_without_access",
                qn ? qn : "?", sn ? sn : "?", arrived, back.size(), variant == 1 ? "," : "");
    if (synced != CUDA_SUCCESS) break;  // the context may be gone
    cuMemUnmap(vd, kCopyBytes);
    for (auto h : hs) cuMemRelease(h);
    cuMemAddressFree(vd, kCopyBytes);
  }
  std::printf("}\n");
  return first_error == CUDA_SUCCESS && bad == 0 && error_c == CUDA_SUCCESS && bad_c == 0 ? 0 : 2;
}
