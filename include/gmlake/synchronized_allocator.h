// SynchronizedAllocator: makes any Allocator thread-safe with one plain mutex (one lock per device pool, as
// PyTorch's allocator). Every call locks for its whole duration; no callback runs under the lock. The wrapped
// allocator is reached only under the lock (policy() and backend() read what never changes after construction).
// Errors and their guarantees are those of the wrapped allocator.
#pragma once

#include <memory>

#include "gmlake/allocator.h"
#include "gmlake/mutex.h"

namespace gmlake {

class SynchronizedAllocator final : public Allocator {
 public:
  explicit SynchronizedAllocator(std::unique_ptr<Allocator> inner)
      : inner_(std::move(inner)), policy_(inner_->policy()), backend_(inner_->backend()) {}

  void* allocate(std::uint64_t size_bytes, StreamId stream) override {
    MutexLock lock(&mutex_);
    return inner_->allocate(size_bytes, stream);
  }
  void deallocate(void* ptr) override {
    MutexLock lock(&mutex_);
    inner_->deallocate(ptr);
  }
  void begin_deferred_free(void* ptr) override {
    MutexLock lock(&mutex_);
    inner_->begin_deferred_free(ptr);
  }
  void end_deferred_free(void* ptr) override {
    MutexLock lock(&mutex_);
    inner_->end_deferred_free(ptr);
  }
  void empty_cache() override {
    MutexLock lock(&mutex_);
    inner_->empty_cache();
  }
  void set_cap_bytes(std::uint64_t cap_bytes) override {
    MutexLock lock(&mutex_);
    inner_->set_cap_bytes(cap_bytes);
  }
  Stats stats() const override {
    MutexLock lock(&mutex_);
    return inner_->stats();
  }
  void reset_peak_stats() override {
    MutexLock lock(&mutex_);
    inner_->reset_peak_stats();
  }
  std::vector<BlockInfo> blocks() const override {
    MutexLock lock(&mutex_);
    return inner_->blocks();
  }
  std::vector<SegmentInfo> segments() const override {
    MutexLock lock(&mutex_);
    return inner_->segments();
  }
  std::optional<BlockInfo> find_block(const void* ptr) const override {
    MutexLock lock(&mutex_);
    return inner_->find_block(ptr);
  }
  void check_invariants() const override {
    MutexLock lock(&mutex_);
    inner_->check_invariants();
  }
  Policy policy() const override { return policy_; }
  const Backend& backend() const override { return backend_; }

 private:
  mutable absl::Mutex mutex_;
  std::unique_ptr<Allocator> inner_ ABSL_GUARDED_BY(mutex_);
  const Policy policy_;     // inner_'s, fixed at construction
  const Backend& backend_;  // inner_'s, fixed at construction
};

}  // namespace gmlake
