// gmlake: the command-line front end. Thin: argument parsing and output; the work is in the library.
//
//   gmlake replay TRACE... [--policy gmlake|caching|expandable|async|all] [--backend sim[:h100|:h200]|host|cuda[:N]] [--cap BYTES]
//                          [--device-bytes BYTES|FACTORx] [--conf KEY:VALUE,...] [--json FILE] [--snapshot-out FILE]
//                          [--plot FILE.html] [--quiet]
//   gmlake conf            the configuration table (GMLAKE_CONF keys, defaults, units)
//   gmlake lend --socket ADDR --budget BYTES [--device N] [--backend cuda|host] [--allow-uid UID]... [--recall-ms MS]
//                          a lender process for the lake (lend_command.h)
//
// Bad input gets one line on stderr and exit status 2; so does running out of memory (std::bad_alloc anywhere)
// and output that cannot be written (a full disk, > /dev/full).
#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <cstdlib>
#include <optional>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "gmlake/backend_factory.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/plot.h"
#include "gmlake/replay.h"
#include "gmlake/report.h"
#include "gmlake/snapshot_writer.h"
#include "gmlake/trace.h"
#include "lend_command.h"
#include "progress.h"

namespace {

constexpr int kExitBadInput = 2;

// Library errors already start with "gmlake ...": those are printed as they are.
[[noreturn]] void die(const std::string& message) {
  const bool prefixed = message.rfind("gmlake", 0) == 0;
  std::fprintf(stderr, "%s%s\n", prefixed ? "" : "gmlake: ", message.c_str());
  std::exit(kExitBadInput);
}

// Flushes stdout; output that could not be written is an error, never a silent exit 0.
void finish_stdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int err = errno;
    die(std::string("cannot write the output to stdout: ") + (err != 0 ? std::strerror(err) : "write error"));
  }
}

// The pool's keys that the replay takes from its own flags: the backend comes from --backend, and the replay runs
// no debug wrapper. Those entries are dropped from GMLAKE_CONF with a note on stderr, so that one GMLAKE_CONF
// serves both the program (the C API) and the replay.
std::string without_c_api_keys(std::string_view text) {
  std::string kept;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    std::string_view key = entry.substr(0, entry.find(':'));
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.front()))) key.remove_prefix(1);
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.remove_suffix(1);
    if (key == "backend" || key == "debug") {
      std::fprintf(stderr, "gmlake: note: GMLAKE_CONF key '%.*s' is ignored by the replay (%s)\n",
                   static_cast<int>(key.size()), key.data(),
                   key == "backend" ? "the replay uses --backend" : "the replay runs no debug checks");
      continue;
    }
    kept += std::string(entry) + ",";
  }
  return kept;
}

// --cap's value: one byte count (suffixes K, M, G, T), nothing else: no empty value, no second key.
std::string checked_cap(const std::string& cap) {
  if (cap.empty()) die("--cap: empty value: expected a byte count such as 8G (0 means no cap)");
  if (cap.find_first_of(",:") != std::string::npos) {
    die("--cap: bad value '" + cap + "': expected one byte count such as 8G (other settings go in --conf)");
  }
  return cap;
}

// Whether `backend` has a stream-ordered pool (cudaMallocAsync's), which the `async` policy replays through:
// nullopt when it has, else why not. On cuda a pool is made and destroyed to find out (a device without memory
// pools, or a driver that refuses the pool, then says why).
std::optional<std::string> async_unavailable(gmlake::Backend& backend) {
  try {
    if (backend.make_stream_ordered_pool() != nullptr) return std::nullopt;
  } catch (const gmlake::Error& e) {
    return std::string("backend ") + std::string(backend.name()) + " could not make a stream-ordered pool: " + e.what();
  }
  return "it replays through cudaMallocAsync's stream-ordered pool of a GPU, which backend " +
         std::string(backend.name()) + " has none of: use --backend cuda";
}

// The policies --policy names. `all`: caching, expandable and gmlake, and async where the backend has a
// stream-ordered pool (cuda); on a cuda backend that cannot make one, a note on stderr says why async is left out.
// `async` alone on a backend without one: refused here, before any trace is read.
std::vector<gmlake::Policy> policies_from(const std::string& text, gmlake::Backend& backend) {
  if (text == "all") {
    std::vector<gmlake::Policy> all = {gmlake::Policy::kCaching, gmlake::Policy::kExpandable, gmlake::Policy::kGmlake};
    const std::optional<std::string> why_not = async_unavailable(backend);
    if (!why_not) {
      all.push_back(gmlake::Policy::kAsync);
    } else if (backend.name() == "cuda") {
      std::fprintf(stderr, "gmlake: note: --policy all leaves out async: %s\n", why_not->c_str());
    }
    return all;
  }
  gmlake::Policy policy = gmlake::Policy::kGmlake;
  try {
    policy = gmlake::parse_policy(text);
  } catch (const gmlake::Error&) {
    die("unknown policy '" + text + "': expected gmlake, caching, expandable, async or all");
  }
  if (policy == gmlake::Policy::kAsync) {
    if (const std::optional<std::string> why_not = async_unavailable(backend)) die("--policy async: " + *why_not);
  }
  return {policy};
}

// Where --snapshot-out writes `policy`'s snapshot: `path` itself for one policy; with several, the policy's name
// inserted before the file name's first suffix ("out.pickle" -> "out.gmlake.pickle", "out" -> "out.gmlake").
std::string snapshot_path_for(const std::string& path, gmlake::Policy policy, bool several) {
  if (!several) return path;
  const std::size_t name_start = path.find_last_of('/') + 1;  // npos + 1 == 0: no directory
  const std::size_t dot = path.find('.', name_start == 0 ? 0 : name_start);
  const std::size_t at = dot == std::string::npos || dot == name_start ? path.size() : dot;
  return path.substr(0, at) + "." + gmlake::to_string(policy) + path.substr(at);
}

// --device-bytes: a byte count (suffixes K, M, G, T), or a factor of each device's lower bound ("1.01x").
struct DeviceBytes {
  std::uint64_t bytes = 0;  // 0: none
  double factor = 0;        // > 0: factor x the lower bound
};

DeviceBytes checked_device_bytes(const std::string& text) {
  DeviceBytes d;
  if (text.empty()) die("--device-bytes: empty value: expected a byte count such as 80G or a factor such as 1.01x");
  if (text.back() == 'x' || text.back() == 'X') {
    const std::string number = text.substr(0, text.size() - 1);
    char* end = nullptr;
    errno = 0;
    d.factor = std::strtod(number.c_str(), &end);
    const bool parsed = !number.empty() && end == number.c_str() + number.size() && errno == 0;
    if (!parsed || !(d.factor >= 1.0 && d.factor <= 1000.0)) {
      die("--device-bytes: bad factor '" + text + "': expected a number from 1 to 1000 followed by x (1.01x: the "
          "lower bound plus 1%)");
    }
    return d;
  }
  if (text.find_first_of(",:") != std::string::npos) die("--device-bytes: bad value '" + text + "'");
  try {
    d.bytes = gmlake::parse_config("cap_bytes:" + text).cap_bytes;  // the same byte-count syntax as --cap
  } catch (const gmlake::Error&) {
    die("--device-bytes: bad value '" + text + "': expected a byte count such as 80G or a factor such as 1.01x");
  }
  if (d.bytes == 0) die("--device-bytes: 0 is no device: leave the option out for the backend's own size");
  return d;
}

// What `gmlake replay` writes besides the table, and how it talks while it runs.
struct ReplayOutputs {
  std::string json_path;     // --json
  std::string snapshot_out;  // --snapshot-out
  std::string plot_path;     // --plot
  bool quiet = false;        // --quiet: no progress bar
};

int run_replay(const std::vector<std::string>& paths, const std::string& policy_text, const std::string& backend,
               const std::string* cap, const std::string& conf, const ReplayOutputs& outputs,
               const std::string* device_bytes_text, std::uint64_t device_lag_us, std::uint64_t repeat) {
  const DeviceBytes device_bytes =
      device_bytes_text != nullptr ? checked_device_bytes(*device_bytes_text) : DeviceBytes{};
  const std::string& snapshot_out = outputs.snapshot_out;
  gmlake::Config config;
  try {
    config = gmlake::replay_config();  // each stream its own arenas, as under PyTorch on the GPU
    config.apply(without_c_api_keys(gmlake::environment_conf()));
    config.apply(conf);
    if (cap != nullptr) config.apply("cap_bytes:" + checked_cap(*cap));
  } catch (const gmlake::Error& e) {
    die(e.what());
  }
  // Made once up front: a bad name or a missing driver fails before any trace is read, and on cuda this keeps
  // the device's primary context alive between the replays (each makes its own backend).
  std::unique_ptr<gmlake::Backend> probe;
  try {
    probe = gmlake::make_backend(backend, config.page_bytes, false, gmlake::sim_devices_for(config.peer_devices));
  } catch (const gmlake::Error& e) {
    die(e.what());
  }
  const std::vector<gmlake::Policy> policies = policies_from(policy_text, *probe);
  if (!snapshot_out.empty() && paths.size() != 1) die("--snapshot-out: give exactly one trace");

  std::vector<gmlake::ReplayResult> results;
  std::vector<gmlake::PlotRun> plot_runs;  // --plot: each result with its series
  std::map<gmlake::Policy, gmlake::MemorySnapshot> snapshots;  // --snapshot-out: per policy, every device
  for (const std::string& path : paths) {
    gmlake::Trace trace;
    try {
      trace = gmlake::read_trace(path);
    } catch (const gmlake::Error& e) {
      die(e.what());
    }
    if (trace.devices.empty()) die(path + ": the trace holds no allocation events");
    for (const gmlake::DeviceTrace& device : trace.devices) {
      // --device-bytes as a factor: of this device's lower bound, the same for every policy.
      const std::uint64_t device_size_bytes =
          device_bytes.factor > 0
              ? static_cast<std::uint64_t>(static_cast<double>(gmlake::lower_bound_bytes(device)) * device_bytes.factor)
              : device_bytes.bytes;
      for (gmlake::Policy policy : policies) {
        gmlake::ReplayOptions options;
        options.config = config;
        options.config.policy = policy;
        options.backend = backend;
        options.config.backend = backend;
        options.device_bytes = device_size_bytes;
        options.device_lag_us = device_lag_us;
        options.repeat = repeat;
        gmlake::cli::ProgressLine progress(
            fmt::format("{} dev {} {}", trace.name, device.device, gmlake::to_string(policy)),
            gmlake::cli::progress_wanted(outputs.quiet));
        options.on_progress = [&progress](double f) { progress(f); };
        gmlake::ReplayRecord record;
        if (!snapshot_out.empty()) options.record = &record;
        gmlake::ReplaySeries series;
        if (!outputs.plot_path.empty()) options.series = &series;
        try {
          results.push_back(gmlake::replay(trace, device, options));
        } catch (const gmlake::Error& e) {
          die(e.what());
        }
        if (!outputs.plot_path.empty()) plot_runs.push_back({results.back(), std::move(series)});
        if (!snapshot_out.empty()) {
          gmlake::MemorySnapshot& snapshot = snapshots[policy];
          snapshot.policy = gmlake::to_string(policy);
          snapshot.conf = options.config.to_string();
          snapshot.expandable_segments = policy == gmlake::Policy::kExpandable;
          for (gmlake::SegmentInfo& segment : record.segments) {
            snapshot.segments.push_back({device.device, std::move(segment)});
          }
          const auto index = static_cast<std::size_t>(device.device);
          if (snapshot.device_traces.size() <= index) snapshot.device_traces.resize(index + 1);
          snapshot.device_traces[index] = std::move(record.events);
        }
      }
    }
  }
  std::fputs(gmlake::format_table(results).c_str(), stdout);
  finish_stdout();
  if (!outputs.json_path.empty()) {
    std::ofstream out(outputs.json_path);
    out << gmlake::format_json(results);
    out.flush();
    if (!out) die("cannot write " + outputs.json_path);
  }
  if (!outputs.plot_path.empty()) {
    try {
      gmlake::write_plot_file(plot_runs, {.cap_bytes = config.cap_bytes}, outputs.plot_path);
    } catch (const gmlake::Error& e) {
      die(e.what());
    }
  }
  for (const auto& [policy, snapshot] : snapshots) {
    try {
      gmlake::write_snapshot_file(snapshot, snapshot_path_for(snapshot_out, policy, policies.size() > 1));
    } catch (const gmlake::Error& e) {
      die(e.what());
    }
  }
  return 0;
}

// What each backend of this build is, for --help.
std::string describe_backend(std::string_view name) {
  if (name == "sim") return "sim (accounting only)";
  if (name == "sim:h100" || name == "sim:h200") return std::string(name) + " (sim, charging VMM calls as measured on that GPU)";
  if (name == "host") return "host (real virtual memory)";
  if (name == "cuda") return "cuda[:N] (GPU N through the CUDA VMM driver API)";
  return std::string(name);
}

std::string backend_help() {
  std::string help;
  const std::vector<std::string_view> names = gmlake::backend_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    help += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
    help += describe_backend(names[i]);
  }
  return help;
}

int run_conf() {
  for (const gmlake::ConfigFieldInfo& f : gmlake::config_fields()) {
    std::printf("%-32s %-7s %-16s %s%s%s\n", f.name, f.type, f.default_value.c_str(), f.description,
                *f.unit ? " [" : "", *f.unit ? (std::string(f.unit) + "]").c_str() : "");
  }
  finish_stdout();
  return 0;
}

bool backend_names_have_cuda() {
  for (const std::string_view name : gmlake::backend_names()) {
    if (name == "cuda") return true;
  }
  return false;
}

int run(int argc, char** argv) {
  CLI::App app{"gmlake: a stitching GPU memory allocator. `gmlake replay` shows how much memory each allocation "
               "policy needs for a recorded PyTorch workload."};
  app.require_subcommand(1);

  CLI::App* replay = app.add_subcommand("replay", "replay PyTorch memory snapshots or RMM logs through policies");
  std::vector<std::string> paths;
  std::string policy = "all", backend = "sim", cap, conf;
  ReplayOutputs outputs;
  replay->add_option("traces", paths, "snapshot files (.pickle, .pickle.xz, .pickle.gz) or RMM CSV logs")->required();
  replay->add_option("--policy", policy,
                     "gmlake, caching (PyTorch native), expandable (PyTorch expandable_segments), async (PyTorch "
                     "backend:cudaMallocAsync: cudaMallocAsync / cudaFreeAsync on a pool of the GPU; --backend cuda "
                     "only) or all (the first three, and async on cuda)")
      ->capture_default_str();
  replay->add_option("--backend", backend, backend_help())->capture_default_str();
  CLI::Option* cap_option = replay->add_option("--cap", cap, "memory cap in bytes (suffixes K, M, G, T; 0: no cap)");
  std::string device_bytes;
  CLI::Option* device_option = replay->add_option(
      "--device-bytes", device_bytes,
      "the device's size: bytes (suffixes K, M, G, T) or a factor of each device's lower bound (1.01x); the "
      "backend never holds more on it at once (sim, host and cuda alike; for async, the maximum size of its pool), "
      "and the policy is not told, as on a GPU that other work has filled. Allocations that do not fit count as "
      "out-of-memory, as under --cap");
  std::uint64_t device_lag_us = 0;
  replay->add_option("--device-lag-us", device_lag_us,
                     "gmlake: model a device that finishes the work queued at each op this many µs later (0: none, "
                     "every freed chunk may move at once). Idle chunks then move only once the lag has passed, "
                     "else the pool waits or creates a chunk (lag_grow_pages), as on a GPU; the device counts as "
                     "waiting for the host after a gap of the lag between ops (assume_device_waits is not read). "
                     "Reports the waits and the time they would block the host")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{3'600'000'000}));
  std::uint64_t repeat = 1;
  replay->add_option("--repeat", repeat,
                     "replay each trace this many times in a row, as a process that runs the workload again and "
                     "again (blocks a pass leaves live are freed before the next); the report adds the last pass's "
                     "backend calls and time: what each repetition costs once the layout has formed")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1000}))
      ->capture_default_str();
  replay->add_option("--conf", conf,
                     "configuration, GMLAKE_CONF form key:value,key:value (see `gmlake conf`); the replay starts "
                     "from cross_stream_reuse:false (each stream its own arenas, as under PyTorch on the GPU)");
  replay->add_option("--json", outputs.json_path, "also write the results as a JSON array to this file");
  replay->add_option("--snapshot-out", outputs.snapshot_out,
                     "write each policy's final state (segments, blocks) and the trace as it served it, as a PyTorch "
                     "memory snapshot pickle (uncompressed; torch.cuda._memory_viz and `gmlake replay` read it) to "
                     "this file; one trace only. With several policies (--policy all), one file per policy: the "
                     "policy's name inserted before the suffix (out.pickle -> out.caching.pickle, out.gmlake.pickle, "
                     "...)");
  replay->add_option("--plot", outputs.plot_path,
                     "also write a chart of reserved bytes over the trace's time for every policy, per trace and "
                     "device, as one self-contained HTML file (inline SVG, nothing fetched)");
  replay->add_flag("--quiet", outputs.quiet, "no progress bar on stderr (shown otherwise on a terminal, for replays "
                                             "that take more than two seconds)");

  CLI::App* conf_cmd = app.add_subcommand("conf", "list the configuration keys, defaults and units");

  CLI::App* lend = app.add_subcommand("lend", "lend this device's memory to the lake's borrowers (other processes) "
                                              "until SIGTERM, then recall every loan");
  gmlake::cli::LendOptions lend_options;
  lend_options.backend = backend_names_have_cuda() ? "cuda" : "host";
  lend->add_option("--socket", lend_options.socket, "the lender's address: an absolute path (made mode 0600) or @name "
                                                    "(abstract namespace); borrowers set lake_socket to it")->required();
  lend->add_option("--budget", lend_options.budget, "the most bytes lent at once (suffixes K, M, G, T; a multiple of "
                                                    "2 MiB; 0: as much as the device gives)")->required();
  lend->add_option("--device", lend_options.device, "the device whose memory is lent")->capture_default_str();
  lend->add_option("--backend", lend_options.backend, "cuda (the GPU of --device) or host (CPU memory, for tests)")
      ->capture_default_str();
  lend->add_option("--allow-uid", lend_options.allow_uids, "a uid besides this process's own that may borrow "
                                                           "(repeatable; lake_allowed_uids on the borrowers' side)");
  lend->add_option("--recall-ms", lend_options.recall_ms, "on SIGTERM, how long borrowers have to give loans back")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    die(e.what());
  }
  if (*conf_cmd) return run_conf();
  if (*lend) return gmlake::cli::run_lend(lend_options);
  return run_replay(paths, policy, backend, cap_option->count() > 0 ? &cap : nullptr, conf, outputs,
                    device_option->count() > 0 ? &device_bytes : nullptr, device_lag_us, repeat);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    die("out of memory (std::bad_alloc): the input needs more memory than this machine gives the process");
  } catch (const std::exception& e) {
    die(std::string("internal error: ") + e.what());
  }
}
