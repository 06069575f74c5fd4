// The lake's placement policy (docs/design.md, "The lake"), measured: each trace in traces/ replayed by gmlake
// on a two-device sim whose own device holds only 80% of the peak that gmlake reserves for the trace alone, with
// and without peer_devices:1. Counters: ooms (allocations that failed), peak_reserved_GB and peak_peer_GB (the
// part held on the peer at its peak), peer_share (peak_peer / peak_reserved), chunks_created (against the
// unconstrained run's base_chunks: what giving peer chunks back first costs in creates), and link_cost, the
// modelled time to touch the peak's memory once relative to all of it local: (local / HBM + peer / NVLink) /
// (all / HBM), H100 bandwidths (an upper bound: the peer's peak and the own device's need not coincide).
// Run: build/gmlake_bench --benchmark_filter=lake/
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "bench_traces.h"
#include "gmlake/replay.h"
#include "gmlake/sim_backend.h"
#include "backends/sim/vmm_cost_model.h"
#include "gmlake/trace.h"

namespace {

using gmlake::kPageBytes;

const gmlake::Trace& load_trace(const std::string& path) {
  static std::map<std::string, gmlake::Trace> cache;
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, gmlake::read_trace(path)).first;
  return it->second;
}

// gmlake alone on one unbounded device, replayed once per trace for both benchmarks below.
const gmlake::ReplayResult& unconstrained_run(const std::string& path) {
  static std::map<std::string, gmlake::ReplayResult> cache;
  auto it = cache.find(path);
  if (it == cache.end()) {
    const gmlake::Trace& trace = load_trace(path);
    gmlake::SimBackend unconstrained(kPageBytes);
    it = cache.emplace(path, gmlake::replay(trace, trace.devices.at(0), gmlake::ReplayOptions{}, unconstrained)).first;
  }
  return it->second;
}

// 80% of `bytes`, whole chunks: the own device's memory, or the cap, that the trace does not fit in.
std::uint64_t four_fifths(std::uint64_t bytes) { return bytes / 10 * 8 / kPageBytes * kPageBytes; }

void BM_Lake(benchmark::State& state, std::string path, bool peers) {
  const gmlake::Trace& trace = load_trace(path);
  gmlake::ReplayOptions options;
  const gmlake::ReplayResult& base = unconstrained_run(path);
  const std::uint64_t own_bytes = four_fifths(base.peak_reserved_bytes);
  if (peers) options.config.apply("peer_devices:1");
  gmlake::ReplayResult r;
  for (auto _ : state) {
    gmlake::SimBackend backend(kPageBytes, {gmlake::SimDevice{own_bytes, gmlake::kH100HbmBytesPerS},
                                             gmlake::SimDevice{0, gmlake::kH100NvlinkBytesPerS}});
    r = gmlake::replay(trace, trace.devices.at(0), options, backend);
  }
  const auto peer = static_cast<double>(r.stats.peer_reserved_bytes.peak);
  const auto all = static_cast<double>(r.peak_reserved_bytes);
  const double hbm = static_cast<double>(gmlake::kH100HbmBytesPerS), nvlink = static_cast<double>(gmlake::kH100NvlinkBytesPerS);
  state.counters["own_device_GB"] = static_cast<double>(own_bytes) * 1e-9;
  state.counters["ooms"] = static_cast<double>(r.ooms);
  state.counters["peak_reserved_GB"] = all * 1e-9;
  state.counters["peak_peer_GB"] = peer * 1e-9;
  state.counters["peer_share"] = all == 0 ? 0 : peer / all;
  state.counters["chunks_created"] = static_cast<double>(r.stats.chunks_created);
  state.counters["base_peak_GB"] = static_cast<double>(base.peak_reserved_bytes) * 1e-9;
  state.counters["base_chunks"] = static_cast<double>(base.stats.chunks_created);
  state.counters["link_cost"] = all == 0 ? 1 : ((all - peer) / hbm + peer / nvlink) / (all / hbm);
}

// Under a cap instead of a small device (as a user runs the lake: `cap_bytes` 80% of the trace's peak and
// peer_devices:1, both devices unbounded): what the engine moves in the steady state. Counters as above, plus
// steady_calls: create + map + unmap + release calls in the second half of the ops, when a repeating trace
// should need none (against base_steady_calls, the same trace with no cap); vmm_ns_per_op: the modelled VMM
// time per operation (sim:h100 costs, and a peer chunk's cuMemSetAccess its measured H200 cost).
void BM_LakeUnderCap(benchmark::State& state, std::string path, bool peers) {
  const gmlake::Trace& trace = load_trace(path);
  gmlake::ReplayOptions options;
  const gmlake::ReplayResult& base = unconstrained_run(path);
  const std::uint64_t cap_bytes = four_fifths(base.peak_reserved_bytes);
  options.config.apply("cap_bytes:" + std::to_string(cap_bytes));
  if (peers) options.config.apply("peer_devices:1");
  gmlake::ReplayResult r;
  for (auto _ : state) {
    gmlake::SimBackend backend(kPageBytes,
                               {gmlake::SimDevice{0, gmlake::kH100HbmBytesPerS},
                                gmlake::SimDevice{0, gmlake::kH100NvlinkBytesPerS}},
                               *gmlake::vmm_cost_model("h100"));
    r = gmlake::replay(trace, trace.devices.at(0), options, backend);
  }
  auto steady = [](const gmlake::BackendCounters& c) {
    using gmlake::BackendCall;
    return static_cast<double>(c[BackendCall::kCreate] + c[BackendCall::kMap] + c[BackendCall::kUnmap] +
                               c[BackendCall::kRelease]);
  };
  state.counters["cap_GB"] = static_cast<double>(cap_bytes) * 1e-9;
  state.counters["ooms"] = static_cast<double>(r.ooms);
  state.counters["peak_reserved_GB"] = static_cast<double>(r.peak_reserved_bytes) * 1e-9;
  state.counters["peak_peer_GB"] = static_cast<double>(r.stats.peer_reserved_bytes.peak) * 1e-9;
  state.counters["steady_calls"] = steady(r.backend_calls_second_half);
  state.counters["base_steady_calls"] = steady(base.backend_calls_second_half);
  state.counters["chunks_created"] = static_cast<double>(r.stats.chunks_created);
  state.counters["vmm_ns_per_op"] = static_cast<double>(r.backend_time_ns) / static_cast<double>(r.ops);
}

int register_lake() {
  const std::map<std::string, std::string> traces =
      gmlake::bench::bench_traces(gmlake::bench::trace_dirs({GMLAKE_TRACES_DIR}));
  for (const auto& [name, path] : traces) {
    for (const bool peers : {false, true}) {
      benchmark::RegisterBenchmark(("lake/" + name + (peers ? "/peer" : "/own_only")).c_str(), BM_Lake, path, peers)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1);
      benchmark::RegisterBenchmark(("lake_cap/" + name + (peers ? "/peer" : "/own_only")).c_str(), BM_LakeUnderCap,
                                   path, peers)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1);
    }
  }
  return 0;
}

const int registered = register_lake();

}  // namespace
