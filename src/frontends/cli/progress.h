// The replay's progress line (`gmlake replay`): label, bar and share of ops done, written in place with \r on a
// terminal and cleared when the replay ends. It stays silent for the first two seconds of a replay, so quick ones
// never show it, and entirely when not enabled (stderr is not a terminal, or --quiet: progress_wanted).
//
// The replay calls it about every 1% of its ops, between its timed blocks (ReplayOptions::on_progress): the clock
// is read there, never per op. Not thread-safe; one line per replay.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

namespace gmlake::cli {

// True when a progress line may be shown: stderr is a terminal and --quiet was not given.
inline bool progress_wanted(bool quiet) { return !quiet && isatty(STDERR_FILENO) == 1; }

class ProgressLine {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  static constexpr std::chrono::seconds kSilentFor{2};
  static constexpr int kBarWidth = 30;
  static constexpr int kLineWidth = 78;  // label (40) + bar + share: what the clearing spaces cover

  // Writes to `out` (stderr in the CLI) only when `enabled`; `clock` is read at construction and at each update.
  ProgressLine(std::string label, bool enabled, std::FILE* out = stderr, Clock clock = std::chrono::steady_clock::now)
      : label_(std::move(label)), enabled_(enabled), out_(out), clock_(std::move(clock)), start_(clock_()) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() {
    if (!shown_) return;
    std::fprintf(out_, "\r%*s\r", kLineWidth, "");
    std::fflush(out_);
  }

  // `fraction` of the ops done, 0..1.
  void operator()(double fraction) {
    if (!enabled_) return;
    if (!shown_ && clock_() - start_ < kSilentFor) return;
    shown_ = true;
    fraction = std::clamp(fraction, 0.0, 1.0);
    const int filled = static_cast<int>(fraction * kBarWidth);
    std::fprintf(out_, "\r%-40.40s [%s%s] %3d%%", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kBarWidth - filled, ' ').c_str(), static_cast<int>(fraction * 100));
    std::fflush(out_);
  }

  bool shown() const { return shown_; }

 private:
  std::string label_;
  bool enabled_;
  std::FILE* out_;
  Clock clock_;
  std::chrono::steady_clock::time_point start_;
  bool shown_ = false;
};

}  // namespace gmlake::cli
