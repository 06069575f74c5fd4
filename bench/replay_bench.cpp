// Allocator time per operation replaying the real traces shipped in traces/ (and ../shared/traces when
// present; or the folders in GMLAKE_BENCH_TRACES, bench_traces.h), for every policy, on the sim backend. Each iteration replays one whole trace; the time reported
// is the allocator calls alone (manual time, see replay.h), and the counter ns_per_op is that time divided by
// the operations. Run with --benchmark_repetitions=N --benchmark_report_aggregates_only=true for medians.
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "bench_traces.h"
#include "gmlake/replay.h"
#include "gmlake/trace.h"

namespace {

const gmlake::Trace& load(const std::string& path) {
  static std::map<std::string, gmlake::Trace> cache;
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, gmlake::read_trace(path)).first;
  return it->second;
}

void BM_Replay(benchmark::State& state, std::string path, gmlake::Policy policy) {
  const gmlake::Trace& trace = load(path);
  gmlake::ReplayOptions options;
  options.config.policy = policy;
  double ns_per_op = 0;
  std::uint64_t ops = 0;
  for (auto _ : state) {
    const gmlake::ReplayResult r = gmlake::replay(trace, trace.devices.at(0), options);
    state.SetIterationTime(r.ns_per_op * static_cast<double>(r.ops) * 1e-9);
    ns_per_op = r.ns_per_op;
    ops = r.ops;
  }
  state.counters["ns_per_op"] = ns_per_op;
  state.counters["ops"] = static_cast<double>(ops);
}

int register_all() {
  const std::map<std::string, std::string> traces =
      gmlake::bench::bench_traces(gmlake::bench::trace_dirs({GMLAKE_TRACES_DIR, GMLAKE_SHARED_TRACES_DIR}));
  for (const auto& [name, path] : traces) {
    for (gmlake::Policy policy : {gmlake::Policy::kGmlake, gmlake::Policy::kCaching, gmlake::Policy::kExpandable}) {
      benchmark::RegisterBenchmark(("replay/" + name + "/" + gmlake::to_string(policy)).c_str(), BM_Replay, path,
                                   policy)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(3);
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace
