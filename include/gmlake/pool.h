// Pool: gmlake's one public pool type. Every front end is a thin shim over it: the C API (gmlake.h: one Pool per
// device), the replay (`gmlake replay`), Python (through the C API) and the PyTorch extension (through the C API).
//
// A Pool is a stack of layers assembled once from a Config, each layer an Allocator over the one below:
//
//   StreamUses          record_stream: a free waits for the other streams that used the block (stream_uses.h)
//   TracingAllocator    the memory history, while tracing is on (set_tracing, drain_trace)
//   PoisoningAllocator  only with config.debug: freed memory filled with 0xDB and checked on reuse
//   policy              config.policy: gmlake (stitching), caching or expandable (PyTorch's), make_allocator
//   lake                config.lake_socket (gmlake only): the chunk provider the policy borrows from once its
//                       device is full, connected to the lender (src/lake/lake_peers.h)
//   stream events       CUDA events on a cuda backend (the policy and StreamUses fence with them); none on
//                       host and sim, where nothing runs asynchronously
//   backend             config.backend: host, sim, sim:h100|sim:h200, cuda (device `device`: cuda:<device>);
//                       or one the caller owns
//
// The Pool is itself an Allocator (the whole stack), plus record_stream. Sizes are bytes; blocks are at least
// 512 B-aligned and at least the size asked (allocator.h). Streams are opaque ids (a cudaStream_t's value).
//
// Errors: those of the layers (allocator.h: OutOfMemoryError, Error(kInvalidPointer), BackendError); after
// any of them the pool is unchanged and usable.
//
// Thread safety: none, like every Allocator: one pool is used under one lock (the C API holds one per device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/backend.h"
#include "gmlake/chunk_provider.h"
#include "gmlake/config.h"
#include "gmlake/snapshot_writer.h"
#include "gmlake/stats.h"
#include "gmlake/clock.h"
#include "gmlake/stream_events.h"

namespace gmlake {

class CachingAllocator;
class StreamUses;
class TracingAllocator;

class Pool final : public Allocator {
 public:
  // Makes the backend config.backend names ("cuda" serves `device`: cuda:<device>; the other backends ignore
  // `device`) and the stack over it. Throws Error(kConfig) when config.validate() fails, the policy cannot
  // run on that backend, or the policy is `async` (whose streams are names, for the replay only:
  // src/policies/async/async_allocator.h); Error(kInvalidArgument) for a backend this build does not have,
  // BackendError when the backend cannot start (cuda without a driver or device).
  // stream_events false: no CUDA events even on cuda (record_stream then only checks its pointer, and frees
  // complete in the block's stream order): for private pools, whose blocks a CUDA graph capture allocates and
  // frees (an event query during capture is an error).
  explicit Pool(const Config& config, int device = 0, bool stream_events = true);
  // The same stack over `backend` and `events` (null: none), which the caller owns and which must outlive the
  // pool; config.backend is not used. For tests and the replay, whose trace is in stream order already and
  // runs no kernels: it replays on cuda without events, as PyTorch recorded it.
  // `clock` (null: the steady clock) is what the policy reads wall time from (the replay passes the trace's).
  Pool(const Config& config, Backend& backend, StreamEvents* events = nullptr, Clock* clock = nullptr);
  // Gives every chunk back to the backend, live blocks included (their pointers become invalid). Never throws.
  ~Pool() override;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Allocator: the top of the stack (StreamUses). See allocator.h and stream_uses.h. With a lake (lake_socket),
  // allocate first and each free last serve the lender's recalls (serve_recalls).
  void* allocate(std::uint64_t size_bytes, StreamId stream) override;
  void deallocate(void* ptr) override;
  void begin_deferred_free(void* ptr) override;
  void end_deferred_free(void* ptr) override;
  // Waits for the frees that wait for recorded streams, then releases free cached memory. On a device backend
  // the reference policies (caching, expandable: their segments carry no fences) first synchronize the device.
  void empty_cache() override;
  void set_cap_bytes(std::uint64_t cap_bytes) override;
  Stats stats() const override;
  void reset_peak_stats() override;
  std::vector<BlockInfo> blocks() const override;
  std::vector<SegmentInfo> segments() const override;
  std::optional<BlockInfo> find_block(const void* ptr) const override;
  // Every layer's invariants, bottom up. O(n): for tests.
  void check_invariants() const override;
  // The lake's recalls (allocator.h), served by the policy; nothing without a lake.
  void serve_recalls() noexcept override {
    if (lake_policy_) lake_policy_->serve_recalls();
  }
  Policy policy() const override;
  const Backend& backend() const override { return *backend_; }

  // PyTorch's setCheckpointPoolState (CUDA graph trees recording a graph after replaying others): frees every
  // live block, then allocates each of `blocks` again at its address: exactly [address, address + size_bytes),
  // requested_bytes as asked, on its segment's stream (`stream` is not used). Only the caching policy places
  // blocks by address (private pools run it). The bytes are left as they were (a block freed and made again
  // keeps its contents). Frees and allocations are traced as usual. All or nothing: throws
  // Error(kInvalidArgument), changing nothing, when the policy is not caching, the pool has stream events or
  // debug on (a free could be deferred; the poison would overwrite the blocks), or one of `blocks` is pending
  // free, is not a positive multiple of 512 B, asks 0 or more than its size, lies outside every segment or
  // overlaps another. O((live + blocks) log(live + blocks) + segments' blocks).
  void restore(std::vector<BlockInfo> blocks);

  // Tensor.record_stream: the live block at `ptr` is also used by `stream` (stream_uses.h). nullptr: nothing.
  // Throws Error(kInvalidPointer) for anything but a live block's start, changing nothing.
  void record_stream(void* ptr, StreamId stream);

  // PyTorch's memory history (torch.cuda.memory._record_memory_history): max_events >= 1 starts recording this
  // pool's trace entries (alloc, free_requested, free_completed, segment_map, segment_unmap, oom; at most
  // max_events undrained, older dropped first); 0 stops. drain_trace() moves the entries recorded since the last
  // drain, oldest first (at most `max`; the rest stay), into *out. See tracing_allocator.h.
  void set_tracing(std::uint64_t max_events);
  void drain_trace(std::vector<SnapshotEvent>* out, std::size_t max = SIZE_MAX);

  // The configuration the pool was made with (validated).
  const Config& config() const { return config_; }

  // --- IPC (include/gmlake/ipc.h: ipc_export exports the chunks behind a live block through it).
  Backend& mutable_backend() { return *backend_; }

 private:
  void assemble();  // the layers over backend_ and events_

  Config config_;
  std::unique_ptr<Backend> owned_backend_;  // null when the caller owns the backend
  Backend* backend_;
  std::unique_ptr<StreamEvents> owned_events_;  // made for an owned backend: null on host and sim
  StreamEvents* events_ = nullptr;             // used by policy_ and uses_
  Clock* clock_ = nullptr;                     // what the policy reads wall time from; null: the steady clock
  std::unique_ptr<ChunkProvider> lake_;        // config.lake_socket for gmlake, else null; outlives policy_
  std::unique_ptr<Allocator> policy_;       // TracingAllocator over [PoisoningAllocator over] the policy
  Allocator* lake_policy_ = nullptr;        // the policy under the adaptors, when it has a lake: serve_recalls
  TracingAllocator* tracing_ = nullptr;     // policy_ itself; the backend's observer; under uses_ only while it
                                            // records (set_tracing), else uses_ calls below_tracing_
  Allocator* below_tracing_ = nullptr;      // the layer the tracer wraps (owned by it)
  CachingAllocator* caching_ = nullptr;     // the policy under the adaptors, when it is caching (restore)
  std::unique_ptr<StreamUses> uses_;        // the top; uses policy_ and events_, so it is destroyed first
};

}  // namespace gmlake
