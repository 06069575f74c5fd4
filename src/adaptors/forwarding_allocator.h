// ForwardingAllocator: the base of the adaptors that own the allocator they wrap (PoisoningAllocator,
// TracingAllocator): every call goes to the inner allocator unchanged; an adaptor overrides only the calls it
// adds to. Sizes, alignment, streams, errors and thread safety are the inner allocator's (allocator.h).
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "gmlake/allocator.h"

namespace gmlake {

class ForwardingAllocator : public Allocator {
 public:
  explicit ForwardingAllocator(std::unique_ptr<Allocator> inner) : inner_(std::move(inner)) {}

  void* allocate(std::uint64_t size_bytes, StreamId stream) override { return inner_->allocate(size_bytes, stream); }
  void deallocate(void* ptr) override { inner_->deallocate(ptr); }
  void begin_deferred_free(void* ptr) override { inner_->begin_deferred_free(ptr); }
  void end_deferred_free(void* ptr) override { inner_->end_deferred_free(ptr); }
  void empty_cache() override { inner_->empty_cache(); }
  void set_cap_bytes(std::uint64_t cap_bytes) override { inner_->set_cap_bytes(cap_bytes); }
  Stats stats() const override { return inner_->stats(); }
  void reset_peak_stats() override { inner_->reset_peak_stats(); }
  std::vector<BlockInfo> blocks() const override { return inner_->blocks(); }
  std::vector<SegmentInfo> segments() const override { return inner_->segments(); }
  std::optional<BlockInfo> find_block(const void* ptr) const override { return inner_->find_block(ptr); }
  void check_invariants() const override { inner_->check_invariants(); }
  Policy policy() const override { return inner_->policy(); }
  const Backend& backend() const override { return inner_->backend(); }

 protected:
  Allocator& inner() { return *inner_; }
  const Allocator& inner() const { return *inner_; }

 private:
  std::unique_ptr<Allocator> inner_;
};

}  // namespace gmlake
