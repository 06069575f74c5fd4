// Pool: the one place that assembles gmlake's stack (pool.h). It sees src/ as the front ends do: it is the layer
// that puts the backends, the policies and the adaptors together.
#include "gmlake/pool.h"

#include <string>
#include <utility>

#include "adaptors/poisoning_allocator.h"
#include "adaptors/stream_uses.h"
#include "adaptors/tracing_allocator.h"
#include "gmlake/backend_factory.h"

namespace gmlake {
namespace {

// config.backend as make_backend takes it: a device backend serves the pool's device.
std::string backend_name(const Config& config, int device) {
  if (config.backend == "cuda") return "cuda:" + std::to_string(device);
  return config.backend;
}

Config validated(const Config& config) {
  config.validate();
  return config;
}

}  // namespace

Pool::Pool(const Config& config, int device, bool stream_events)
    : config_(validated(config)),
      owned_backend_(make_backend(backend_name(config_, device), config_.chunk_bytes, config_.ipc_handles)),
      backend_(owned_backend_.get()),
      owned_events_(stream_events ? make_stream_events(*backend_) : nullptr),
      events_(owned_events_.get()) {
  assemble();
}

Pool::Pool(const Config& config, Backend& backend, StreamEvents* events)
    : config_(validated(config)), backend_(&backend), events_(events) {
  assemble();
}

void Pool::assemble() {
  // Only gmlake moves chunks while blocks live; the reference policies unmap only in empty_cache and their
  // out-of-memory retry: empty_cache synchronizes the device first for them.
  StreamEvents* policy_events = config_.policy == Policy::kGmlake ? events_ : nullptr;
  policy_ = make_allocator(config_, *backend_, policy_events);
  if (config_.debug) policy_ = std::make_unique<PoisoningAllocator>(std::move(policy_));
  auto tracing = std::make_unique<TracingAllocator>(std::move(policy_));
  tracing_ = tracing.get();
  policy_ = std::move(tracing);
  backend_->set_observer(tracing_);
  uses_ = std::make_unique<StreamUses>(*policy_, events_);
}

Pool::~Pool() {
  backend_->set_observer(nullptr);  // the teardown's unmaps are not traced: the tracer goes first
  uses_.reset();  // each layer before those it uses; none throws (teardown.h)
  policy_.reset();
  owned_events_.reset();
}

void* Pool::allocate(std::uint64_t size_bytes, StreamId stream) { return uses_->allocate(size_bytes, stream); }
void Pool::deallocate(void* ptr) { uses_->deallocate(ptr); }
void Pool::begin_deferred_free(void* ptr) { uses_->begin_deferred_free(ptr); }
void Pool::end_deferred_free(void* ptr) { uses_->end_deferred_free(ptr); }

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
void Pool::record_stream(void* ptr, StreamId stream) { uses_->record_stream(ptr, stream); }
void Pool::set_tracing(std::uint64_t max_events) { tracing_->set_tracing(max_events); }
void Pool::drain_trace(std::vector<SnapshotEvent>* out, std::size_t max) { tracing_->drain(out, max); }

}  // namespace gmlake
