// Backends by name, for front ends (CLI, replay, tests) that choose one at run time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/stream_events.h"

namespace gmlake {

// "sim" (accounting only), "host" (mmap + memfd), and on builds with the CUDA backend "cuda" (device 0) or
// "cuda:N" (device N), with chunks of granularity_bytes. Throws Error(kInvalidArgument) naming the backend for
// any other name (or a bad device number), and whatever the backend's constructor throws (cuda without a
// driver: BackendError("cuInit", ...); see cuda_backend.h). `exportable`: cuda chunks are made exportable as
// POSIX file descriptors where the device supports it (Config::ipc_handles; the other backends ignore it).
// `sim_devices` (sim backends only; the others ignore it): a sim of that many devices, device 0 the own one and
// the others peers reached over NVLink (SimDevice: H100 link figures), all unbounded, as the lake's
// peer_devices needs them (see sim_devices_for).
std::unique_ptr<Backend> make_backend(std::string_view name, std::uint64_t granularity_bytes,
                                      bool exportable = false, std::uint32_t sim_devices = 1);

// How many devices a sim backend needs for `peer_devices` (a Config value, parse_peer_devices' form): the
// highest peer listed + 1, at least 1. Throws Error(kConfig) for a bad value.
std::uint32_t sim_devices_for(std::string_view peer_devices);

// The names make_backend accepts on this build, without device suffixes: {"sim", "host"[, "cuda"]}.
std::vector<std::string_view> backend_names();

// What an allocator over `backend` must be given to be safe with asynchronous streams (stream_events.h): CUDA
// events for a cuda backend; null for host and sim, which run nothing asynchronously. `backend` must outlive it.
std::unique_ptr<StreamEvents> make_stream_events(Backend& backend);

// The part of a backend name before any ":N" device suffix ("cuda:1" -> "cuda"), to match against
// backend_names().
std::string_view backend_base_name(std::string_view name);

// The backend a pool of `device` runs on, as make_backend takes it: a device backend serves that device ("cuda"
// on device 2 -> "cuda:2"); the others ("host", "sim", a name with a device already) are returned as they are.
// The one place this rule is written (Pool, the C API's IPC imports). Never throws (but bad_alloc).
std::string backend_for_device(std::string_view backend, int device);

}  // namespace gmlake
