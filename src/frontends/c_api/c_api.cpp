// The C API (gmlake.h): one guarded line per function over DevicePools (src/pool/device_pools.h), which owns the
// pools, the sessions and the IPC imports. guarded and guarded_status (c_status.h) turn every exception into a
// status and this thread's last error, so that nothing is thrown across the C boundary; c_structs.h copies
// results into the C structs; c_tables.h makes the tables the library describes itself with.
#include "gmlake/gmlake.h"

#include <string>
#include <string_view>

#include "frontends/c_api/c_status.h"
#include "frontends/c_api/c_structs.h"
#include "frontends/c_api/c_tables.h"
#include "gmlake/config.h"
#include "pool/device_pools.h"

using gmlake::DevicePools;
using namespace gmlake::capi;

namespace {

DevicePools& pools() { return DevicePools::instance(); }

// gmlake_init_defaults' configuration: `defaults` first, GMLAKE_CONF's keys over them.
std::string defaults_then_environment(const char* defaults) {
  const std::string first = defaults != nullptr ? defaults : "";
  const std::string env = gmlake::environment_conf();
  return first.empty() ? env : env.empty() ? first : first + "," + env;
}

}  // namespace

extern "C" {

int gmlake_init(const char* conf) {
  return guarded_status([&] { pools().start(conf != nullptr ? std::string(conf) : gmlake::environment_conf()); });
}

int gmlake_init_defaults(const char* defaults) {
  return guarded_status([&] { pools().start(defaults_then_environment(defaults)); });
}

void* gmlake_malloc(size_t size_bytes, int device, uint64_t stream) {
  return guarded(static_cast<void*>(nullptr), [&] { return pools().allocate(device, size_bytes, stream); });
}

void gmlake_free(void* ptr, size_t /*size_bytes*/, int device, uint64_t /*stream*/) {
  guarded_status([&] { pools().deallocate(device, ptr); });
}

int gmlake_record_stream(void* ptr, int device, uint64_t stream) {
  return guarded_status([&] { pools().record_stream(device, ptr, stream); });
}

int gmlake_empty_cache(int device) { return guarded_status([&] { pools().empty_cache(device); }); }

int gmlake_get_stats(int device, gmlake_stats* out) {
  return guarded_status([&] {
    require(out != nullptr, "gmlake_get_stats: out is NULL");
    *out = c_stats_of(pools().stats(device));
  });
}

int gmlake_reset_peak_stats(int device) { return guarded_status([&] { pools().reset_peak_stats(device); }); }

int gmlake_set_cap_bytes(int device, uint64_t cap_bytes) {
  return guarded_status([&] { pools().set_cap_bytes(device, cap_bytes); });
}

int gmlake_get_cap_bytes(int device, uint64_t* cap_bytes) {
  return guarded_status([&] {
    require(cap_bytes != nullptr, "gmlake_get_cap_bytes: cap_bytes is NULL");
    *cap_bytes = pools().cap_bytes(device);
  });
}

int gmlake_get_backend_time(int device, uint64_t* calls, uint64_t* time_ns) {
  return guarded_status([&] {
    require(calls != nullptr && time_ns != nullptr, "gmlake_get_backend_time: calls or time_ns is NULL");
    const gmlake::BackendTime time = pools().backend_time(device);
    *calls = time.calls;
    *time_ns = time.time_ns;
  });
}

void gmlake_shutdown(void) { guarded_status([] { pools().shut_down(); }); }

uint64_t gmlake_ignored_frees(void) { return pools().ignored_frees(); }

int gmlake_set_tracing(int device, uint64_t max_events) {
  return guarded_status([&] { pools().set_tracing(device, max_events); });
}

int gmlake_drain_trace(int device, gmlake_trace_event* out, size_t capacity, size_t* count) {
  return guarded_status([&] {
    require(count != nullptr && (out != nullptr || capacity == 0),
            "gmlake_drain_trace: count is NULL, or out is NULL with a capacity");
    write_trace(pools().drain_trace(device, capacity), out, count);
  });
}

int gmlake_get_segments(int device, gmlake_segment* segments, size_t segment_capacity, size_t* segment_count,
                        gmlake_block* blocks, size_t block_capacity, size_t* block_count) {
  return guarded_status([&] {
    require(segment_count != nullptr && block_count != nullptr && (segments != nullptr || segment_capacity == 0) &&
                (blocks != nullptr || block_capacity == 0),
            "gmlake_get_segments: a NULL count, or a NULL array with a capacity");
    write_segments(pools().segments(device), segments, segment_capacity, segment_count, blocks, block_capacity,
                   block_count);
  });
}

int gmlake_pool_create(int device, gmlake_pool_id pool_id) {
  return guarded_status([&] { pools().create_private(device, pool_id_of(pool_id)); });
}

int gmlake_pool_release(int device, gmlake_pool_id pool_id) {
  return guarded_status([&] { pools().release_private(device, pool_id_of(pool_id)); });
}

int gmlake_pool_use_count(int device, gmlake_pool_id pool_id, int64_t* count) {
  return guarded_status([&] {
    require(count != nullptr, "gmlake_pool_use_count: count is NULL");
    *count = pools().private_use_count(device, pool_id_of(pool_id));
  });
}

void* gmlake_pool_malloc(size_t size_bytes, int device, uint64_t stream, gmlake_pool_id pool_id) {
  return guarded(static_cast<void*>(nullptr),
                 [&] { return pools().allocate_private(device, pool_id_of(pool_id), size_bytes, stream); });
}

int gmlake_pool_empty_cache(int device, gmlake_pool_id pool_id) {
  return guarded_status([&] { pools().empty_private_cache(device, pool_id_of(pool_id)); });
}

int gmlake_pool_blocks(int device, gmlake_pool_id pool_id, gmlake_block* blocks, size_t capacity, size_t* count) {
  return guarded_status([&] {
    require(count != nullptr && (blocks != nullptr || capacity == 0),
            "gmlake_pool_blocks: count is NULL, or blocks is NULL with a capacity");
    write_blocks(pools().blocks(device, pool_id_of(pool_id)), blocks, capacity, count);
  });
}

int gmlake_pool_restore(int device, gmlake_pool_id pool_id, const gmlake_block* blocks, size_t count) {
  return guarded_status([&] { pools().restore(device, pool_id_of(pool_id), blocks_from_c(blocks, count)); });
}

const char* gmlake_stat_names(void) { return stat_names_text(); }

const char* gmlake_stat_table(void) { return stat_table_text(); }

const char* gmlake_config_table(void) { return config_table_text(); }

int gmlake_max_devices(void) { return GMLAKE_MAX_DEVICES; }

const char* gmlake_status_name(int status) { return status_name(status); }

const char* gmlake_c_api_table(void) { return c_api_table_text(); }

int gmlake_last_error_code(void) { return last_error_code(); }

const char* gmlake_last_error(void) { return last_error_message(); }

int gmlake_ipc_export(void* ptr, int device, char* handle_out, size_t* handle_bytes, size_t* offset_bytes) {
  return guarded_status([&] {
    require(handle_bytes != nullptr && offset_bytes != nullptr,
            "gmlake_ipc_export: handle_bytes or offset_bytes is NULL");
    write_ipc_export(pools().ipc_export(device, ptr), handle_out, handle_bytes, offset_bytes);
  });
}

int gmlake_ipc_import(const char* handle, size_t handle_bytes, int device, void** ptr_out) {
  return guarded_status([&] {
    require(handle != nullptr && ptr_out != nullptr, "gmlake_ipc_import: handle or ptr_out is NULL");
    *ptr_out = nullptr;
    *ptr_out = pools().ipc_import(device, std::string_view(handle, handle_bytes));
  });
}

int gmlake_ipc_close(void* ptr, int device) { return guarded_status([&] { pools().ipc_close(device, ptr); }); }

}  // extern "C"
