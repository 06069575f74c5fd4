#include "pool/private_pools.h"

#include <string>

#include "gmlake/error.h"

namespace gmlake {

void PrivatePools::add_user(PoolId id, const Config& main_config, int device, std::uint64_t tracing_max_events) {
  Entry& entry = pools_[id];
  if (!entry.pool) {
    Config config = main_config;
    config.policy = Policy::kCaching;
    config.release_on_oom = false;
    try {
      entry.pool = std::make_unique<Pool>(config, device, /*stream_events=*/false);
    } catch (...) {
      pools_.erase(id);
      throw;
    }
    entry.pool->set_tracing(tracing_max_events);
  }
  ++entry.use_count;
}

void PrivatePools::remove_user(PoolId id, int device, const char* call) {
  get(id, device, call);  // throws for a pool that does not exist
  Entry& entry = pools_.at(id);
  if (entry.use_count <= 0) throw Error(ErrorCode::kInvalidArgument, std::string(call) + ": released more than made");
  --entry.use_count;
  collect_released();
}

std::int64_t PrivatePools::use_count(PoolId id) const {
  const auto it = pools_.find(id);
  return it == pools_.end() ? 0 : it->second.use_count;
}

Pool* PrivatePools::find(PoolId id) {
  const auto it = pools_.find(id);
  return it == pools_.end() ? nullptr : it->second.pool.get();
}

Pool& PrivatePools::get(PoolId id, int device, const char* call) {
  if (Pool* pool = find(id)) return *pool;
  throw Error(ErrorCode::kInvalidArgument, std::string(call) + ": device " + std::to_string(device) +
                                               " has no private pool (" + std::to_string(id.first) + ", " +
                                               std::to_string(id.second) + ")");
}

Pool* PrivatePools::owner_of(const void* ptr) {
  for (auto& [id, entry] : pools_) {
    if (entry.pool->find_block(ptr)) return entry.pool.get();
  }
  return nullptr;
}

void PrivatePools::collect_released() {
  for (auto it = pools_.begin(); it != pools_.end();) {
    if (it->second.use_count <= 0 && it->second.pool->stats().active_bytes.current == 0) {
      it = pools_.erase(it);
    } else {
      ++it;
    }
  }
}

void PrivatePools::empty_unused_caches() {
  for (auto& [id, entry] : pools_) {
    if (entry.use_count <= 0) entry.pool->empty_cache();
  }
}

}  // namespace gmlake
