// The replay as a picture (`gmlake replay --plot FILE.html`): one self-contained HTML page, inline SVG only (no
// script, no style sheet or font fetched, nothing reached over a network), with one chart per trace and device:
//
//   - reserved bytes of every policy replayed, on one shared axis, over the trace's time (seconds since its first
//     event), or over the op index when the trace has no times;
//   - the live requested bytes (the demand: a grey area) and the lower bound (its peak: a dashed line);
//   - a marker at each policy's peak reserved, marks at its failed allocations (under a cap), the cap as a line;
//   - a legend with each policy's peak reserved and utilization, as format_table (report.h) prints them.
//
// Sizes are drawn in GB (10^9 bytes), as the table prints them. A curve of more than max_points_per_curve ops
// is downsampled (downsample_min_max): its minimum and maximum per bucket of ops are kept, so every peak drawn is
// the exact peak. The SVG is well-formed XML inside XHTML-compatible HTML; each policy's curve is a <polyline
// class="reserved" data-policy="NAME" data-values-bytes="..."> holding the bytes of the points it draws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gmlake/replay.h"

namespace gmlake {

// One replay to draw: its result and its series (ReplayOptions::series), from the same run.
struct PlotRun {
  ReplayResult result;
  ReplaySeries series;
};

struct PlotOptions {
  std::uint64_t cap_bytes = 0;              // the cap the runs were replayed under, drawn as a line; 0: none
  std::size_t max_points_per_curve = 2000;  // ops kept per curve at most (downsample_min_max); 4 at least
};

// The indexes of `values` a curve keeps, ascending: all of them when there are at most `max_points`; otherwise
// the first and the last, and, in each of (max_points - 2) / 2 buckets of consecutive indexes, the first minimum
// and the first maximum. At most max(max_points, 4) indexes; the first index of the maximum is always kept.
std::vector<std::size_t> downsample_min_max(const std::vector<std::uint64_t>& values, std::size_t max_points);

// The page, as a string. `runs` in the order of the table (report.h): consecutive runs of the same trace name and
// device make one chart, in that order. Throws Error(kInvalidArgument) when a run's series does not hold one
// entry per op (ReplayResult::ops) in time_us, reserved_bytes and requested_bytes, or when runs of one chart
// differ in their number of ops.
std::string format_plot_html(const std::vector<PlotRun>& runs, const PlotOptions& options);

// Writes format_plot_html(runs, options) to `path` (replaced if it exists). Throws Error(kInvalidArgument) as
// format_plot_html does, and when the file cannot be written (the message names the path and the OS's reason).
void write_plot_file(const std::vector<PlotRun>& runs, const PlotOptions& options, const std::string& path);

}  // namespace gmlake
