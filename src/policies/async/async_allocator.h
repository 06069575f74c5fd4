// The `async` policy: PyTorch's PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (c10/cuda/
// CUDAMallocAsyncAllocator.cpp), for comparison in `gmlake replay --backend cuda`. Every allocation is one
// cudaMallocAsync (cuMemAllocFromPoolAsync) on the block's stream and every free one cudaFreeAsync
// (cuMemFreeAsync) on that stream, in a stream-ordered pool of the device with the release threshold at its
// maximum (stream_ordered_pool.h): the driver, not gmlake, places the blocks and grows the pool. Over a backend
// that has no such pool (host, sim: Backend::make_stream_ordered_pool() gives none) it is refused.
//
// What it reports (Stats, allocator.h):
//   reserved_bytes   the pool's CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, peak CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH
//                    (reset when the allocator is made, and by reset_peak_stats()), as PyTorch's getDeviceStats
//   allocated_bytes  live blocks, each request rounded up to 512 B (kRoundBytes) as the other policies count
//                    it (PyTorch reports the driver's used bytes instead; the driver's own rounding is not
//                    visible); active_bytes adds the deferred frees; requested_bytes as asked
//   num_allocs, num_frees, num_ooms, invalid_frees; nothing else (no chunks, no backend calls)
//
// Allocations: cudaMallocAsync is asked for the size as requested (as PyTorch asks it); addresses are what the
// driver returns, aligned as the driver aligns them (not necessarily to 512 B). Out of memory: when cap_bytes is set and the
// active bytes plus the request pass it (PyTorch's setMemoryFraction check), or when the driver answers
// CUDA_ERROR_OUT_OF_MEMORY (the device is full or the pool is at its maximum size: the backend's device limit,
// `--device-bytes`), OutOfMemoryError is thrown and num_ooms counts it; as in PyTorch there is no retry (the
// pool has no cache of its own to release: its free memory already serves every request it can).
//
// Frees: deallocate -> cudaFreeAsync on the block's stream. begin_deferred_free / end_deferred_free (record_stream,
// a trace's free_requested ... free_completed): the block stops counting as allocated at the first, and its
// cudaFreeAsync is made at the second, when the trace says every stream is done with it. The live blocks, the
// gauges and the rejection of invalid frees are a BlockTable's (policies/common/block_table.h), as in every
// policy, with the reference policies' words ("gmlake async: deallocate(0x..): ..."), and so is the one rule for
// a failed release: the free is committed first (the block leaves the table, the gauges drop), then
// cudaFreeAsync is made; if the driver refuses it (a sticky CUDA error, nothing a retry mends), the
// BackendError propagates with the block freed, and the pool keeps its bytes until it is trimmed or destroyed.
//
// Streams: a StreamId is a stream's name, not a CUDA handle: the pool gives each name a CUDA stream of its own
// (a trace's streams, replayed). So the policy runs only where the caller's streams are names, the replay: a
// Pool that makes its own cuda backend (the C API, PyTorch) refuses it (pool.h).
//
// blocks() and find_block() list the live and pending blocks; segments() is empty: the driver does not show how
// it lays blocks out (PyTorch's snapshot() refuses for cudaMallocAsync). empty_cache(): synchronize every stream,
// then cuMemPoolTrimTo(0) (PyTorch's emptyCache). Thread safety: none (allocator.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/stream_ordered_pool.h"
#include "../common/block_table.h"

namespace gmlake {

class AsyncAllocator final : public Allocator {
 public:
  // Over the pool backend.make_stream_ordered_pool() makes (made now: the backend's device limit as it is now
  // bounds it). Throws Error(kConfig) when config.validate() fails or the backend has no stream-ordered pool
  // ("gmlake config: policy: async ... backend sim has none"); BackendError when the driver refuses the pool.
  AsyncAllocator(const Config& config, Backend& backend);
  // Over `pool` (not null), which this allocator then owns; `backend` is only what backend() returns. For tests.
  AsyncAllocator(const Config& config, Backend& backend, std::unique_ptr<StreamOrderedPool> pool);
  // Frees every live and pending block on its stream, then destroys the pool (which waits for its streams and
  // gives its memory back). Never throws.
  ~AsyncAllocator() override;
  AsyncAllocator(const AsyncAllocator&) = delete;
  AsyncAllocator& operator=(const AsyncAllocator&) = delete;

  void* allocate(std::uint64_t size_bytes, StreamId stream) override;
  void deallocate(void* ptr) override;
  void begin_deferred_free(void* ptr) override;
  void end_deferred_free(void* ptr) override;
  void empty_cache() override;
  void set_cap_bytes(std::uint64_t cap_bytes) override { cap_bytes_ = cap_bytes; }
  // The gauges above; reserved_bytes asks the driver (two attribute reads).
  Stats stats() const override;
  void reset_peak_stats() override;
  std::vector<BlockInfo> blocks() const override;
  std::optional<BlockInfo> find_block(const void* ptr) const override;
  std::vector<SegmentInfo> segments() const override { return {}; }
  // The block table against the gauges (allocated, active, requested recounted; every block's size its request
  // rounded to 512 B), and the pool's high mark not below its current reserved bytes.
  void check_invariants() const override;
  Policy policy() const override { return Policy::kAsync; }
  const Backend& backend() const override { return backend_; }

  // The pool, for tests (its streams, its maximum size).
  const StreamOrderedPool& pool() const { return *pool_; }

 private:
  // The table's record of a block: nothing beyond its size, request and stream (the driver keeps the rest).
  struct NoRecord {};
  using Table = policy::BlockTable<NoRecord>;

  [[noreturn]] void throw_oom(std::uint64_t requested_bytes, const std::string& reason);

  Backend& backend_;
  std::unique_ptr<StreamOrderedPool> pool_;
  std::uint64_t cap_bytes_;
  Stats stats_;  // every field but reserved_bytes, which is the pool's; the table writes the gauges of live blocks
  Table table_;  // address -> live or pending block
};

}  // namespace gmlake
