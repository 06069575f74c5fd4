#include "pool/device_slot.h"

#include <iterator>
#include <string>
#include <utility>

#include "gmlake/error.h"

namespace gmlake {

Pool& DeviceSlot::main_pool(const Session& session, int device) {
  mutex_.AssertHeld();
  if (!main_ || session_ != &session) {
    privates_.clear();  // the old session's pools, before their replacement takes memory
    main_.reset();
    main_ = std::make_unique<Pool>(session.config, device);
    main_->set_tracing(tracing_max_events_);
    if (cap_bytes_) main_->set_cap_bytes(*cap_bytes_);
    session_ = &session;
  }
  return *main_;
}

Pool& DeviceSlot::existing_main_pool(int device, const char* call) {
  mutex_.AssertHeld();
  if (!main_) {
    throw Error(ErrorCode::kInvalidPointer,
                std::string(call) + ": no block was ever allocated on device " + std::to_string(device));
  }
  return *main_;
}

Pool& DeviceSlot::owner_of(const void* ptr, int device, const char* call) {
  mutex_.AssertHeld();
  if (!privates_.empty() && !(main_ && main_->find_block(ptr))) {
    if (Pool* owner = privates_.owner_of(ptr)) return *owner;
  }
  return existing_main_pool(device, call);
}

Stats DeviceSlot::stats() {
  mutex_.AssertHeld();
  Stats total{};
  for_each_pool([&](Pool& pool, PoolId) {
    const Stats s = pool.stats();
#define GMLAKE_SLOT_ADD_GAUGE(name, torch_key) \
  total.name.current += s.name.current;        \
  total.name.peak += s.name.peak;
#define GMLAKE_SLOT_ADD_COUNTER(name, torch_key) total.name += s.name;
    GMLAKE_GAUGE_FIELDS(GMLAKE_SLOT_ADD_GAUGE)
    GMLAKE_COUNTER_FIELDS(GMLAKE_SLOT_ADD_COUNTER)
#undef GMLAKE_SLOT_ADD_GAUGE
#undef GMLAKE_SLOT_ADD_COUNTER
    total.backend_calls = s.backend_calls;  // the last pool's: the C API reads backend_time() instead
  });
  return total;
}

std::vector<OwnedSegment> DeviceSlot::segments() {
  mutex_.AssertHeld();
  std::vector<OwnedSegment> found;
  for_each_pool([&](Pool& pool, PoolId id) {
    for (SegmentInfo& segment : pool.segments()) found.push_back(OwnedSegment{id, std::move(segment)});
  });
  return found;
}

void DeviceSlot::drain_trace(std::vector<SnapshotEvent>* out, std::size_t max) {
  mutex_.AssertHeld();
  const std::size_t before = out->size();
  for_each_pool([&](Pool& pool, PoolId) { pool.drain_trace(out, max - (out->size() - before)); });
}

BackendTime DeviceSlot::backend_time() const {
  mutex_.AssertHeld();
  BackendTime time;
  if (!main_) return time;
  const BackendCounters& c = main_->backend().counters();
  for (std::uint64_t n : c.calls) time.calls += n;
  time.time_ns = c.total_time_ns();
  return time;
}

void DeviceSlot::set_tracing(std::uint64_t max_events) {
  mutex_.AssertHeld();
  tracing_max_events_ = max_events;
  for_each_pool([&](Pool& pool, PoolId) { pool.set_tracing(max_events); });
}

void DeviceSlot::set_cap_bytes(std::uint64_t cap_bytes) {
  mutex_.AssertHeld();
  cap_bytes_ = cap_bytes;
  if (main_) main_->set_cap_bytes(cap_bytes);
}

void DeviceSlot::tear_down() {
  mutex_.AssertHeld();
  privates_.clear();
  main_.reset();
  tracing_max_events_ = 0;
  cap_bytes_.reset();
  session_ = nullptr;
}

}  // namespace gmlake
