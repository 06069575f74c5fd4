// The gmlake policy with CudaStreamEvents on a real device: a chunk whose page was freed while work queued on
// its stream still writes into it is not unmapped and handed to another stream before that work has finished, and
// a block kept in an arena that passed to another stream is not reused before its own stream's work finished.
#include <gtest/gtest.h>

#include <vector>

#include "policies/gmlake/stitching_allocator.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_stream_events.h"
#include "gmlake/clock.h"
#include "gmlake/units.h"
#include "gpu/cuda_test_support.h"

namespace gmlake {
namespace {

class CudaStreamEventsTest : public gpu_test::CudaTest {};

// Queues 2,000 memsets of `bytes` at `addr` on `s`, each of another value: device work that lasts far longer than
// queuing it takes (about 50 ms at 64 MiB on an H100).
void queue_writes(CUdeviceptr addr, std::uint64_t bytes, CUstream s) {
  for (std::uint32_t i = 0; i < 2000; ++i) {
    cuda::check("cuMemsetD32Async", cuda::driver().cuMemsetD32Async(addr, 0xA0A0A0A0u + i, bytes / 4, s));
  }
}

// Fills `bytes` at `addr` with `value` on `s`, waits for the device (which also surfaces any fault from a write
// into an unmapped range), and checks that every `stride`-th word reads back `value` (a fatal failure: call it
// under ASSERT_NO_FATAL_FAILURE).
void fill_and_expect(CUdeviceptr addr, std::uint64_t bytes, std::uint32_t value, CUstream s, std::size_t stride) {
  cuda::check("cuMemsetD32Async", cuda::driver().cuMemsetD32Async(addr, value, bytes / 4, s));
  gpu_test::synchronize();
  std::vector<std::uint32_t> words(bytes / 4);
  gpu_test::copy_from_device(words.data(), addr, bytes);
  for (std::size_t i = 0; i < words.size(); i += stride) ASSERT_EQ(words[i], value) << "word " << i;
}

TEST_F(CudaStreamEventsTest, EventsRecordOnAStreamAndFinish) {
  CudaBackend backend;
  CudaStreamEvents events(backend);
  const CUstream s = gpu_test::make_stream();
  const StreamEvents::Token t = events.record(reinterpret_cast<StreamId>(s));
  events.wait(t);
  EXPECT_TRUE(events.done(t));
  events.release(t);
  const StreamEvents::Token again = events.record(reinterpret_cast<StreamId>(s));
  EXPECT_EQ(again, t);  // pooled
  events.wait(again);
  events.release(again);
  EXPECT_EQ(events.events_created(), 1u);
  cuda::driver().cuStreamDestroy(s);
}

TEST_F(CudaStreamEventsTest, AStreamIsIdleOnlyOnceItsQueuedWorkFinished) {
  CudaBackend backend;
  CudaStreamEvents events(backend);
  const CUstream s = gpu_test::make_stream();
  EXPECT_TRUE(events.idle(reinterpret_cast<StreamId>(s)));  // nothing queued yet
  CUdeviceptr buffer = 0;
  constexpr std::uint64_t kBytes = 64 * kMiB;
  cuda::check("cuMemAlloc", cuda::driver().cuMemAlloc(&buffer, kBytes));
  queue_writes(buffer, kBytes, s);
  EXPECT_FALSE(events.idle(reinterpret_cast<StreamId>(s)));  // the device is busy with it
  cuda::check("cuStreamSynchronize", cuda::driver().cuStreamSynchronize(s));
  EXPECT_TRUE(events.idle(reinterpret_cast<StreamId>(s)));  // drained: the device waits for the host
  cuda::check("cuMemFree", cuda::driver().cuMemFree(buffer));
  cuda::driver().cuStreamDestroy(s);
}

TEST_F(CudaStreamEventsTest, ChunksFreedUnderQueuedWorkMoveToAnotherStreamOnlyAfterThatWorkFinished) {
  constexpr std::uint64_t kBlockBytes = 64 * kMiB;
  CudaBackend backend;
  CudaStreamEvents events(backend);
  // The cap leaves no room for a second block: the second stream's block must take the first one's chunks.
  engine::StitchingAllocator alloc(parse_config("cross_stream_reuse:false,cap_bytes:64M"), backend, &events);
  const CUstream a = gpu_test::make_stream();
  const CUstream b = gpu_test::make_stream();
  void* first = alloc.allocate(kBlockBytes, reinterpret_cast<StreamId>(a));
  const auto first_addr = reinterpret_cast<CUdeviceptr>(first);
  queue_writes(first_addr, kBlockBytes, a);  // each write covers the whole block
  alloc.deallocate(first);  // stream-ordered free: stream a's writes are still queued
  void* second = alloc.allocate(kBlockBytes, reinterpret_cast<StreamId>(b));
  EXPECT_EQ(alloc.stats().fence_waits, 1u) << "the chunks moved without waiting for stream a";
  const auto second_addr = reinterpret_cast<CUdeviceptr>(second);
  ASSERT_NO_FATAL_FAILURE(fill_and_expect(second_addr, kBlockBytes, 0x5EC0DD00u, b, 4099));
  alloc.check_invariants();
  alloc.deallocate(second);
  alloc.empty_cache();
  EXPECT_EQ(backend.live_chunks(), 0u);
  cuda::driver().cuStreamDestroy(a);
  cuda::driver().cuStreamDestroy(b);
}

TEST_F(CudaStreamEventsTest, ChunksFreedUnderQueuedWorkBackABlockOfTheSameStreamInStreamOrder) {
  // The chunks of a block freed while its stream still writes into it move to a new block of the same stream
  // with no wait (ChunkSource::moves_in_order): the new block's work is queued after the old writes, and the old
  // mapping stays until they finish. The new block must read its own value only, and nothing may fault.
  CudaBackend backend;
  CudaStreamEvents events(backend);
  // The cap leaves room for the second block only by moving the first one's chunks (pin keeps the first range
  // from growing, headroom 0 makes no chunk ahead of need, and lag_grow_pages 0 makes none for the device's lag).
  engine::StitchingAllocator alloc(
      parse_config("cross_stream_reuse:false,cap_bytes:50M,headroom_permille:0,lag_grow_pages:0,in_order_moves:true"),
      backend, &events);
  const CUstream a = gpu_test::make_stream();
  const auto stream = reinterpret_cast<StreamId>(a);
  void* first = alloc.allocate(32 * kMiB, stream);
  void* pin = alloc.allocate(2 * kMiB, stream);
  const auto first_addr = reinterpret_cast<CUdeviceptr>(first);
  queue_writes(first_addr, 32 * kMiB, a);
  alloc.deallocate(first);  // stream-ordered free: the writes are still queued
  constexpr std::uint64_t kSecondBytes = 48 * kMiB;
  void* second = alloc.allocate(kSecondBytes, stream);
  EXPECT_TRUE(events.idle(stream) == false) << "the writes finished before the move: the test proves nothing";
  EXPECT_EQ(alloc.stats().fence_waits, 0u) << "a move in stream order waited";
  EXPECT_GT(alloc.stats().in_order_evictions, 0u);
  const auto second_addr = reinterpret_cast<CUdeviceptr>(second);
  ASSERT_NO_FATAL_FAILURE(fill_and_expect(second_addr, kSecondBytes, 0x5EC0DD00u, a, 1021));
  alloc.check_invariants();
  alloc.deallocate(second);
  alloc.deallocate(pin);
  alloc.empty_cache();
  EXPECT_EQ(backend.live_chunks(), 0u);
  cuda::driver().cuStreamDestroy(a);
}

TEST_F(CudaStreamEventsTest, AKeptBlocksFreeWaitsForItsOwnStreamBeforeTheArenasNewStreamReusesIt) {
  // Stream a keeps a block (as PyTorch keeps a stream's cuBLAS workspace) and goes quiet; stream b takes its arena
  // over with the block in it (handover_quiet_ms). Stream a then writes into the block and frees it: the free must
  // wait for those writes, or stream b's block placed there would be overwritten by them.
  constexpr std::uint64_t kBlockBytes = 32 * kMiB;
  CudaBackend backend;
  CudaStreamEvents events(backend);
  ManualClock clock;
  engine::StitchingAllocator alloc(parse_config("cross_stream_reuse:false,handover_quiet_ms:250"), backend, &events,
                                   &clock);
  const CUstream a = gpu_test::make_stream();
  const CUstream b = gpu_test::make_stream();
  const auto sa = reinterpret_cast<StreamId>(a), sb = reinterpret_cast<StreamId>(b);
  void* kept = alloc.allocate(kBlockBytes, sa);
  alloc.deallocate(alloc.allocate(kBlockBytes, sa));
  gpu_test::synchronize();
  clock.advance_ns(250'000'000);
  void* other = alloc.allocate(kBlockBytes, sb);
  ASSERT_EQ(alloc.stats().arena_handovers, 1u) << "stream b did not take stream a's arena: the test proves nothing";
  queue_writes(reinterpret_cast<CUdeviceptr>(kept), kBlockBytes, a);
  alloc.deallocate(kept);
  EXPECT_EQ(alloc.stats().fence_waits, 1u) << "the kept block's free did not wait for stream a";
  EXPECT_TRUE(events.idle(sa));
  void* reuse = alloc.allocate(kBlockBytes, sb);
  EXPECT_EQ(reuse, kept) << "stream b reuses the kept block's range";
  ASSERT_NO_FATAL_FAILURE(fill_and_expect(reinterpret_cast<CUdeviceptr>(reuse), kBlockBytes, 0x5EC0DD00u, b, 4099));
  alloc.check_invariants();
  alloc.deallocate(reuse);
  alloc.deallocate(other);
  alloc.empty_cache();
  EXPECT_EQ(backend.live_chunks(), 0u);
  cuda::driver().cuStreamDestroy(a);
  cuda::driver().cuStreamDestroy(b);
}

}  // namespace
}  // namespace gmlake
