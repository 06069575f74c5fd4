// Shared by the trace-reader fuzz targets: a finding is reported by require(), and what a reader returns is
// replayed, so that arbitrary event streams (sizes up to 2^64 - 1, frees of unknown addresses, deferred frees
// never completed) also reach the replay and the policies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "gmlake/error.h"
#include "gmlake/replay.h"
#include "gmlake/trace.h"

namespace gmlake::fuzz {

// Prints `what` and aborts (a finding) unless `ok`.
inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "gmlake fuzz finding: %s\n", what);
  std::abort();
}

// Replays the first kMaxDevices devices of `trace` with invariants checked every 64 ops, through the policy
// `seed` picks, when the device's trace is small enough to keep the fuzzer fast. A replay must never throw for
// trace content (replay.h). Each device has 8 GiB of physical memory (ReplayOptions::device_bytes, as a small
// GPU): what does not fit fails as out of memory, as on a GPU. Unbounded, one input of 149 devices mapped 1.1 TB
// on each, 524,288 pages of page-table work per device, over 10 s under ASan; at 64 GiB such inputs still took
// about 1 s each, a fifth of the target's speed once they were seeds. Sizes up to 2^64 - 1 still reach every
// policy (they fail at the backend), and any device id can be among the devices replayed.
inline void replay_small_trace(const Trace& trace, std::size_t seed) {
  constexpr std::size_t kMaxEvents = 4096;
  constexpr std::size_t kMaxDevices = 16;
  constexpr std::uint64_t kDeviceBytes = std::uint64_t{8} << 30;
  constexpr Policy kPolicies[] = {Policy::kGmlake, Policy::kCaching, Policy::kExpandable};
  ReplayOptions options;
  options.config.policy = kPolicies[seed % 3];
  options.check_every_ops = 64;
  options.device_bytes = kDeviceBytes;
  std::size_t replayed = 0;
  for (const DeviceTrace& device : trace.devices) {
    if (device.events.size() + device.initial_blocks.size() > kMaxEvents) continue;
    if (++replayed > kMaxDevices) break;
    try {
      const ReplayResult r = replay(trace, device, options);
      require(r.stats.allocated_bytes.current >= 0, "negative allocated bytes after a replay");
    } catch (const std::exception& e) {
      require(false, e.what());
    }
  }
}

// The pickle targets' body: `data` read as a snapshot; a reader may refuse it only with Error(kTrace), and what
// it returns is replayed (replay_small_trace).
inline int fuzz_snapshot_pickle(const std::uint8_t* data, std::size_t size) {
  Trace trace;
  try {
    trace = parse_snapshot_pickle(std::span<const std::uint8_t>(data, size), "fuzz");
  } catch (const Error& e) {
    require(e.code() == ErrorCode::kTrace, e.what());
    return 0;
  }
  replay_small_trace(trace, size);
  return 0;
}

}  // namespace gmlake::fuzz
