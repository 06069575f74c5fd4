// Pool: the one place that assembles gmlake's stack (pool.h). It sees src/ as the front ends do: it is the layer
// that puts the backends, the policies and the adaptors together.
#include "gmlake/pool.h"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "adaptors/poisoning_allocator.h"
#include "adaptors/stream_uses.h"
#include "adaptors/tracing_allocator.h"
#include "gmlake/backend_factory.h"
#include "gmlake/error.h"
#include "gmlake/units.h"
#include "lake/lake_peers.h"
#include "policies/caching/caching_allocator.h"

namespace gmlake {
namespace {

Config validated(const Config& config) {
  config.validate();
  return config;
}

// The Pool that makes its own backend serves real streams (the C API, PyTorch), which `async` would take for
// names of its own streams (async_allocator.h): refused, with what does the same under PyTorch.
Config validated_for_own_backend(const Config& config) {
  if (config.policy == Policy::kAsync) {
    throw Error(ErrorCode::kConfig,
                "gmlake config: policy: async is for `gmlake replay --backend cuda` only; under PyTorch, "
                "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync is that allocator");
  }
  return validated(config);
}

// Throws Error(kInvalidArgument) unless every block of `wanted` (sorted by address) can be made again once every
// live block is freed: each a positive multiple of 512 B asking 1 .. its size, inside one segment, apart.
void check_restorable(const std::vector<BlockInfo>& wanted, const std::vector<SegmentInfo>& segments) {
  std::uintptr_t taken_until = 0;
  auto segment = segments.begin();
  for (const BlockInfo& b : wanted) {
    auto refuse = [&](const char* why) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("gmlake restore: block {:#x} ({} bytes, {} requested): {}",
                                                           b.address, b.size_bytes, b.requested_bytes, why));
    };
    if (b.pending_free) refuse("a pending free is not a block to make");
    if (b.size_bytes == 0 || b.size_bytes % kRoundBytes != 0) refuse("the size is not a positive multiple of 512 B");
    if (b.requested_bytes == 0 || b.requested_bytes > b.size_bytes) refuse("the requested size is not 1 .. size");
    if (b.address < taken_until) refuse("it overlaps the block before it");
    while (segment != segments.end() && segment->address + segment->size_bytes <= b.address) ++segment;
    if (segment == segments.end() || b.address < segment->address ||
        b.size_bytes > segment->address + segment->size_bytes - b.address) {
      refuse("it is not inside one segment of the pool");
    }
    taken_until = b.address + b.size_bytes;
  }
}

}  // namespace

Pool::Pool(const Config& config, int device, bool stream_events)
    : config_(validated_for_own_backend(config)),
      owned_backend_(
          make_backend(backend_for_device(config_.backend, device), config_.page_bytes, config_.ipc_handles)),
      backend_(owned_backend_.get()),
      owned_events_(stream_events ? make_stream_events(*backend_) : nullptr),
      events_(owned_events_.get()) {
  assemble();
}

Pool::Pool(const Config& config, Backend& backend, StreamEvents* events, Clock* clock)
    : config_(validated(config)), backend_(&backend), events_(events), clock_(clock) {
  assemble();
}

void Pool::assemble() {
  // Only gmlake moves chunks while blocks live; the reference policies unmap only in empty_cache and their
  // out-of-memory retry: empty_cache synchronizes the device first for them.
  StreamEvents* policy_events = config_.policy == Policy::kGmlake ? events_ : nullptr;
  // Only gmlake borrows: the lake is connected for it alone (the others ignore lake_socket).
  if (config_.policy == Policy::kGmlake) lake_ = make_lake_peers(config_, *backend_);
  policy_ = make_allocator(config_, *backend_, policy_events, clock_, lake_.get());
  if (lake_) lake_policy_ = policy_.get();  // serves the lake's recalls (allocator.h), below the adaptors
  caching_ = dynamic_cast<CachingAllocator*>(policy_.get());
  if (config_.debug) policy_ = std::make_unique<PoisoningAllocator>(std::move(policy_));
  below_tracing_ = policy_.get();
  auto tracing = std::make_unique<TracingAllocator>(std::move(policy_));
  tracing_ = tracing.get();
  policy_ = std::move(tracing);
  backend_->set_observer(tracing_);
  // The tracer is in the call path only while it records (set_tracing swaps it in): idle, as it starts, it would
  // only forward each call.
  uses_ = std::make_unique<StreamUses>(*below_tracing_, events_);
}

Pool::~Pool() {
  backend_->set_observer(nullptr);  // the teardown's unmaps are not traced: the tracer goes first
  uses_.reset();  // each layer before those it uses; none throws (teardown.h)
  policy_.reset();
  lake_.reset();  // after the policy, which gives its loans back through it
  owned_events_.reset();
}

// With a lake, recalls are served before each allocation (so that a recalled chunk takes no new block and room
// it frees is seen) and after each free (a recalled chunk whose last block went goes back at once).
void* Pool::allocate(std::uint64_t size_bytes, StreamId stream) {
  serve_recalls();
  return uses_->allocate(size_bytes, stream);
}
void Pool::deallocate(void* ptr) {
  uses_->deallocate(ptr);
  serve_recalls();
}
void Pool::begin_deferred_free(void* ptr) { uses_->begin_deferred_free(ptr); }
void Pool::end_deferred_free(void* ptr) {
  uses_->end_deferred_free(ptr);
  serve_recalls();
}

void Pool::empty_cache() {
  if (events_ && config_.policy != Policy::kGmlake) events_->synchronize_all();
  uses_->empty_cache();
}

void Pool::set_cap_bytes(std::uint64_t cap_bytes) {
  uses_->set_cap_bytes(cap_bytes);
  config_.cap_bytes = cap_bytes;
}

Stats Pool::stats() const { return uses_->stats(); }
void Pool::reset_peak_stats() { uses_->reset_peak_stats(); }
std::vector<BlockInfo> Pool::blocks() const { return uses_->blocks(); }
std::vector<SegmentInfo> Pool::segments() const { return uses_->segments(); }
std::optional<BlockInfo> Pool::find_block(const void* ptr) const { return uses_->find_block(ptr); }
void Pool::check_invariants() const { uses_->check_invariants(); }
Policy Pool::policy() const { return config_.policy; }
void Pool::restore(std::vector<BlockInfo> blocks) {
  if (caching_ == nullptr || events_ != nullptr || config_.debug) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("gmlake restore: needs the caching policy, no stream events and debug off (this pool: "
                            "policy {}, stream events {}, debug {}): private pools are made so",
                            to_string(config_.policy), events_ != nullptr ? "on" : "off", config_.debug ? 1 : 0));
  }
  std::sort(blocks.begin(), blocks.end(), [](const BlockInfo& x, const BlockInfo& y) { return x.address < y.address; });
  check_restorable(blocks, uses_->segments());
  const std::vector<BlockInfo> live = uses_->blocks();
  for (const BlockInfo& b : live) {
    if (b.pending_free) throw Error(ErrorCode::kInvalidArgument, "gmlake restore: the pool has a pending free");
  }
  // Nothing throws from here on: with no stream events and no pending free, each free completes at once and
  // leaves every segment one free block, and check_restorable placed each wanted block inside one.
  for (const BlockInfo& b : live) uses_->deallocate(reinterpret_cast<void*>(b.address));
  for (const BlockInfo& b : blocks) {
    tracing_->record_placed(caching_->allocate_at(b.address, b.size_bytes, b.requested_bytes));
  }
}

void Pool::record_stream(void* ptr, StreamId stream) { uses_->record_stream(ptr, stream); }
void Pool::set_tracing(std::uint64_t max_events) {
  tracing_->set_tracing(max_events);
  uses_->set_allocator(tracing_->tracing() ? static_cast<Allocator&>(*tracing_) : *below_tracing_);
}
void Pool::drain_trace(std::vector<SnapshotEvent>* out, std::size_t max) { tracing_->drain(out, max); }

}  // namespace gmlake
