// The traces the replay benchmarks run: every *.snapshot.pickle* file in the folders named by the environment
// variable GMLAKE_BENCH_TRACES (folders separated by ':'), else in the folders the build names (the repo's traces/
// and ../shared/traces beside the repo, GMLAKE_TRACES_DIR and GMLAKE_SHARED_TRACES_DIR). The variable lets a
// binary built on one machine run on another (the GPU machine) without links to the build's paths.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gmlake::bench {

// The folders to read: GMLAKE_BENCH_TRACES when set and not empty, else `built_in` (folders that do not exist are
// skipped by bench_traces).
inline std::vector<std::string> trace_dirs(std::vector<std::string> built_in) {
  const char* env = std::getenv("GMLAKE_BENCH_TRACES");
  if (env == nullptr || *env == '\0') return built_in;
  std::vector<std::string> dirs;
  std::string rest = env;
  for (std::size_t pos; (pos = rest.find(':')) != std::string::npos; rest.erase(0, pos + 1)) {
    if (pos > 0) dirs.push_back(rest.substr(0, pos));
  }
  if (!rest.empty()) dirs.push_back(rest);
  return dirs;
}

// Trace name (the file name before ".snapshot.pickle") -> path, over `dirs` in order (the first folder with a name
// wins). Never throws for a missing or unreadable folder: it is skipped.
inline std::map<std::string, std::string> bench_traces(const std::vector<std::string>& dirs) {
  std::map<std::string, std::string> traces;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string file = entry.path().filename().string();
      const auto pos = file.find(".snapshot.pickle");
      if (pos != std::string::npos) traces.emplace(file.substr(0, pos), entry.path().string());
    }
  }
  return traces;
}

}  // namespace gmlake::bench
