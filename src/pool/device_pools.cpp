#include "pool/device_pools.h"

#include <string>
#include <utility>

#include "gmlake/backend_factory.h"
#include "gmlake/error.h"

namespace gmlake {
namespace {

// A size a call may ask: below 2^63, so that a negative size from a signed caller is refused, not taken as huge.
void check_size(std::uint64_t size_bytes, const char* call) {
  if (size_bytes > DevicePools::kMaxSizeBytes) {
    throw Error(ErrorCode::kInvalidArgument, std::string(call) + ": size " + std::to_string(size_bytes) +
                                                 " bytes is >= 2^63 (a negative size from a signed caller?)");
  }
}

}  // namespace

DevicePools& DevicePools::instance() {
  static DevicePools* const pools = new DevicePools();  // never destroyed, on purpose (see the header)
  return *pools;
}

void DevicePools::check_device(int device) {
  if (device < 0 || static_cast<std::size_t>(device) >= kDevices) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake: invalid device id " + std::to_string(device) +
                                                 ": expected 0.." + std::to_string(kDevices - 1));
  }
}

Pool& DevicePools::main_pool(DeviceSlot& slot, int device) { return slot.main_pool(*sessions_.current(), device); }

void DevicePools::start(std::string_view conf) { sessions_.start(conf); }

void DevicePools::shut_down() {
  sessions_.end([&] {
    for (DeviceSlot& slot : slots_) {  // one at a time: a call running on a device finishes first
      MutexLock lock(&slot.mutex());
      slot.tear_down();  // never throws: teardown retries and gives up quietly (teardown.h)
    }
  });
}

void* DevicePools::allocate(int device, std::uint64_t size_bytes, StreamId stream) {
  check_size(size_bytes, "gmlake_malloc");
  return with_slot(device, BeforeStart::kStartFromEnvironment,
                   [&](DeviceSlot& slot) { return main_pool(slot, device).allocate(size_bytes, stream); });
}

void DevicePools::deallocate(int device, void* ptr) {
  if (ptr == nullptr) return;
  try {
    with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) {
      Pool& owner = slot.owner_of(ptr, device, "gmlake_free");
      owner.deallocate(ptr);
      if (&owner != slot.main_pool_if_made()) slot.private_pools().collect_released();
    });
  } catch (const ShutDownError&) {
    ignored_frees_.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
}

void DevicePools::record_stream(int device, void* ptr, StreamId stream) {
  if (ptr == nullptr) return;
  with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) {
    slot.owner_of(ptr, device, "gmlake_record_stream").record_stream(ptr, stream);
  });
}

void DevicePools::empty_cache(int device) {
  with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) {
    if (Pool* main = slot.main_pool_if_made()) main->empty_cache();
    slot.private_pools().empty_unused_caches();  // a private pool in use keeps its memory (a graph may use it)
  });
}

Stats DevicePools::stats(int device) {
  return with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) { return slot.stats(); });
}

void DevicePools::reset_peak_stats(int device) {
  with_slot(device, BeforeStart::kRunOnEmptySlot,
            [&](DeviceSlot& slot) { slot.for_each_pool([](Pool& pool, PoolId) { pool.reset_peak_stats(); }); });
}

std::uint64_t DevicePools::cap_bytes(int device) {
  return with_slot(device, BeforeStart::kStartFromEnvironment,
                   [&](DeviceSlot& slot) { return slot.cap_bytes(sessions_.current()->config.cap_bytes); });
}

void DevicePools::set_cap_bytes(int device, std::uint64_t cap_bytes) {
  with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) { slot.set_cap_bytes(cap_bytes); });
}

BackendTime DevicePools::backend_time(int device) {
  return with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) { return slot.backend_time(); });
}

void DevicePools::set_tracing(int device, std::uint64_t max_events) {
  with_slot(device, BeforeStart::kStartFromEnvironment, [&](DeviceSlot& slot) { slot.set_tracing(max_events); });
}

std::vector<SnapshotEvent> DevicePools::drain_trace(int device, std::size_t max) {
  std::vector<SnapshotEvent> events;
  with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) { slot.drain_trace(&events, max); });
  return events;
}

std::vector<OwnedSegment> DevicePools::segments(int device) {
  return with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) { return slot.segments(); });
}

std::vector<BlockInfo> DevicePools::blocks(int device, PoolId pool) {
  return with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) {
    if (pool == kMainPoolId) {
      Pool* main = slot.main_pool_if_made();
      return main ? main->blocks() : std::vector<BlockInfo>{};
    }
    return slot.private_pools().get(pool, device, "gmlake_pool_blocks").blocks();
  });
}

void DevicePools::create_private(int device, PoolId pool) {
  if (pool == kMainPoolId) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_create: pool id (0, 0) is the main pool's");
  }
  with_slot(device, BeforeStart::kStartFromEnvironment, [&](DeviceSlot& slot) {
    const Config& config = main_pool(slot, device).config();
    if (backend_base_name(config.backend) == "sim") {
      throw Error(ErrorCode::kConfig, "gmlake_pool_create: private pools need a backend with real addresses "
                                      "(host or cuda), not sim");
    }
    slot.private_pools().add_user(pool, sessions_.current()->config, device, slot.tracing_max_events());
  });
}

void DevicePools::release_private(int device, PoolId pool) {
  with_slot(device, BeforeStart::kRunOnEmptySlot,
            [&](DeviceSlot& slot) { slot.private_pools().remove_user(pool, device, "gmlake_pool_release"); });
}

std::int64_t DevicePools::private_use_count(int device, PoolId pool) {
  return with_slot(device, BeforeStart::kRunOnEmptySlot,
                   [&](DeviceSlot& slot) { return slot.private_pools().use_count(pool); });
}

void* DevicePools::allocate_private(int device, PoolId pool, std::uint64_t size_bytes, StreamId stream) {
  check_size(size_bytes, "gmlake_pool_malloc");
  return with_slot(device, BeforeStart::kStartFromEnvironment, [&](DeviceSlot& slot) {
    return slot.private_pools().get(pool, device, "gmlake_pool_malloc").allocate(size_bytes, stream);
  });
}

void DevicePools::empty_private_cache(int device, PoolId pool) {
  with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) {
    if (Pool* p = slot.private_pools().find(pool)) p->empty_cache();  // a pool gone has nothing cached
  });
}

void DevicePools::restore(int device, PoolId pool, std::vector<BlockInfo> blocks) {
  with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) {
    if (pool == kMainPoolId) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_restore: pool id (0, 0) is the main pool's: only "
                                               "private pools are restored");
    }
    slot.private_pools().get(pool, device, "gmlake_pool_restore").restore(std::move(blocks));
    slot.private_pools().collect_released();
  });
}

IpcExport DevicePools::ipc_export(int device, const void* ptr) {
  return with_slot(device, BeforeStart::kRunOnEmptySlot, [&](DeviceSlot& slot) {
    return gmlake::ipc_export(slot.existing_main_pool(device, "gmlake_ipc_export"), ptr);
  });
}

void* DevicePools::ipc_import(int device, std::string_view handle) {
  const Config config = with_slot(device, BeforeStart::kStartFromEnvironment,
                                  [&](DeviceSlot&) { return sessions_.current()->config; });
  return imports_.open(device, config, handle);
}

void DevicePools::ipc_close(int device, void* ptr) {
  check_device(device);
  imports_.close(device, ptr);
}

}  // namespace gmlake
