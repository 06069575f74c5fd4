#include "gmlake/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "gmlake/error.h"

namespace gmlake {
namespace {

// The chart's frame, in CSS pixels: the plot area, then the axis labels and the legend below it.
constexpr double kChartWidthPx = 1160;
constexpr double kPlotLeftPx = 92;
constexpr double kPlotRightPx = 1132;
constexpr double kPlotTopPx = 76;
constexpr double kPlotBottomPx = 530;
constexpr double kLegendTopPx = 596;
constexpr double kLegendRowPx = 22;
constexpr double kLegendSecondColumnPx = 720;
constexpr double kLabelRowPx = 15;            // peak labels closer than this move apart
constexpr double kBytesPerGB = 1e9;           // sizes are drawn in GB, as the table prints them
constexpr double kCapShownUpTo = 1.5;         // a cap above this many times the highest peak is named, not drawn
constexpr std::size_t kMaxFailedMarks = 500;  // failed allocations marked per policy at most
constexpr const char* kDemandColour = "#9aa0a6";
// Text drawn over the curves: a white halo keeps it legible.
constexpr const char* kHalo = "stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"";
constexpr const char* kFontFamily = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif";

const char* colour_of(Policy policy) {
  switch (policy) {
    case Policy::kCaching: return "#d62728";
    case Policy::kExpandable: return "#ff7f0e";
    case Policy::kGmlake: return "#1f5fbf";
    case Policy::kAsync: return "#2ca02c";
  }
  return "#555555";
}

std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

double gb(std::uint64_t bytes) { return static_cast<double>(bytes) / kBytesPerGB; }

// 1, 2, 2.5 or 5 times a power of ten: the tick step that cuts `span` into about `ticks` parts.
double nice_step(double span, int ticks) {
  const double raw = span / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

// What one chart draws: the runs of one trace and device, and where an op and a byte count lie on it.
struct Frame {
  std::vector<const PlotRun*> runs;
  bool seconds = false;         // x is the time since the first event (else the op index)
  double x_span = 1;            // seconds or ops
  double y_top_bytes = 1;       // the top of the y axis
  std::uint64_t cap_bytes = 0;  // drawn when non-zero

  const ReplaySeries& clock() const { return runs.front()->series; }
  double x_of(std::size_t op) const {
    if (!seconds) return static_cast<double>(op);
    return static_cast<double>(clock().time_us[op] - clock().time_us.front()) / 1e6;
  }
  double x_px(std::size_t op) const { return kPlotLeftPx + x_of(op) / x_span * (kPlotRightPx - kPlotLeftPx); }
  double y_px(double bytes) const { return kPlotBottomPx - bytes / y_top_bytes * (kPlotBottomPx - kPlotTopPx); }
};

// Times are usable when they advance and never go back.
bool has_times(const std::vector<std::int64_t>& time_us) {
  return time_us.size() > 1 && time_us.back() > time_us.front() && std::is_sorted(time_us.begin(), time_us.end());
}

std::uint64_t series_peak(const std::vector<std::uint64_t>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

Frame frame_of(std::vector<const PlotRun*> runs, const PlotOptions& options) {
  Frame f;
  f.runs = std::move(runs);
  const ReplaySeries& clock = f.clock();
  f.seconds = has_times(clock.time_us);
  const std::size_t ops = clock.time_us.size();
  f.x_span = f.seconds ? static_cast<double>(clock.time_us.back() - clock.time_us.front()) / 1e6
                       : static_cast<double>(std::max<std::size_t>(ops, 2) - 1);
  std::uint64_t highest = f.runs.front()->result.lower_bound_bytes;
  for (const PlotRun* run : f.runs) {
    highest = std::max({highest, series_peak(run->series.reserved_bytes), series_peak(run->series.requested_bytes)});
  }
  if (options.cap_bytes != 0 &&
      static_cast<double>(options.cap_bytes) <= kCapShownUpTo * static_cast<double>(highest)) {
    f.cap_bytes = options.cap_bytes;
    highest = std::max(highest, options.cap_bytes);
  }
  const double step = nice_step(std::max(static_cast<double>(highest), 1.0) * 1.04, 6);
  f.y_top_bytes = step * std::ceil(std::max(static_cast<double>(highest), 1.0) * 1.04 / step);
  return f;
}

// The kept ops of `values` as a step curve: each value holds until the next kept op.
std::string step_points(const Frame& f, const std::vector<std::uint64_t>& values,
                        const std::vector<std::size_t>& kept) {
  std::string points;
  points.reserve(kept.size() * 30);
  for (std::size_t k = 0; k < kept.size(); ++k) {
    const double x = f.x_px(kept[k]);
    if (k > 0) points += fmt::format("{:.2f},{:.2f} ", x, f.y_px(static_cast<double>(values[kept[k - 1]])));
    points += fmt::format("{:.2f},{:.2f} ", x, f.y_px(static_cast<double>(values[kept[k]])));
  }
  if (!points.empty()) points.pop_back();
  return points;
}

std::string title(const Frame& f) {
  const ReplayResult& r = f.runs.front()->result;
  std::string subtitle = fmt::format("{} ops, lower bound {:.3f} GB", r.ops, gb(r.lower_bound_bytes));
  if (r.lower_bound_held_bytes > r.lower_bound_bytes) {
    subtitle += fmt::format(" ({:.3f} GB with record_stream frees held until they complete)",
                            gb(r.lower_bound_held_bytes));
  }
  if (r.pytorch_peak_reserved_bytes) {
    subtitle += fmt::format(", PyTorch recorded peak reserved {:.3f} GB", gb(*r.pytorch_peak_reserved_bytes));
  }
  subtitle += fmt::format(" [{} backend]", r.backend);
  return fmt::format(
      "<text x=\"{}\" y=\"30\" font-size=\"19\" font-weight=\"bold\">{} (device {}): reserved memory "
      "per policy</text>\n<text x=\"{}\" y=\"54\" font-size=\"13\" fill=\"#555\">{}</text>\n",
      kPlotLeftPx, escaped(r.trace), r.device, kPlotLeftPx, escaped(subtitle));
}

std::string y_axis(const Frame& f) {
  std::string out = "<g class=\"y-axis\" font-size=\"12\" fill=\"#333\">\n";
  const double step = nice_step(f.y_top_bytes, 6);
  for (double v = 0; v <= f.y_top_bytes * (1 + 1e-9); v += step) {
    const double y = f.y_px(v);
    out += fmt::format(
        "<g class=\"ytick\" data-bytes=\"{:.0f}\"><line x1=\"{}\" x2=\"{}\" y1=\"{:.2f}\" y2=\"{:.2f}\" "
        "stroke=\"#e3e3e3\"/><text x=\"{}\" y=\"{:.2f}\" text-anchor=\"end\">{:.12g} GB</text></g>\n",
        v, kPlotLeftPx, kPlotRightPx, y, y, kPlotLeftPx - 8, y + 4, v / kBytesPerGB);
  }
  out += fmt::format(
      "<text transform=\"translate(24 {:.0f}) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">"
      "bytes (GB, 10^9)</text>\n</g>\n",
      (kPlotTopPx + kPlotBottomPx) / 2);
  return out;
}

std::string x_axis(const Frame& f) {
  std::string out = "<g class=\"x-axis\" font-size=\"12\" fill=\"#333\">\n";
  const double step = f.seconds ? nice_step(f.x_span, 10) : std::max(nice_step(f.x_span, 10), 1.0);  // whole ops
  const double px_per_unit = (kPlotRightPx - kPlotLeftPx) / f.x_span;
  for (double v = 0; v <= f.x_span * (1 + 1e-9); v += step) {
    const double x = kPlotLeftPx + v * px_per_unit;
    out += fmt::format(
        "<line x1=\"{:.2f}\" x2=\"{:.2f}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/><text x=\"{:.2f}\" "
        "y=\"{}\" text-anchor=\"middle\">{:.12g}</text>\n",
        x, x, kPlotBottomPx, kPlotBottomPx + 5, x, kPlotBottomPx + 20, v);
  }
  out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", kPlotLeftPx, kPlotRightPx,
                     kPlotBottomPx, kPlotBottomPx);
  out += fmt::format("<text x=\"{:.0f}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n</g>\n",
                     (kPlotLeftPx + kPlotRightPx) / 2, kPlotBottomPx + 42,
                     f.seconds ? "time since the trace's first event (s)" : "op (the trace has no times)");
  return out;
}

// A horizontal line across the plot with its label above it, at the left end (`left`: where the curves of a
// trace usually start low) or at the right.
std::string level(const Frame& f, const char* cls, std::uint64_t bytes, const std::string& label, const char* dash,
                  bool left) {
  const double y = f.y_px(static_cast<double>(bytes));
  return fmt::format(
      "<g class=\"{}\" data-bytes=\"{}\"><line x1=\"{}\" x2=\"{}\" y1=\"{:.2f}\" y2=\"{:.2f}\" "
      "stroke=\"#333\" stroke-width=\"1.2\" stroke-dasharray=\"{}\"/><text x=\"{}\" y=\"{:.2f}\" "
      "text-anchor=\"{}\" font-size=\"12\" fill=\"#333\" {}>{}</text></g>\n",
      cls, bytes, kPlotLeftPx, kPlotRightPx, y, y, dash, left ? kPlotLeftPx + 6 : kPlotRightPx - 4, y - 5,
      left ? "start" : "end", kHalo, escaped(label));
}

// The live requested bytes of the first run, as an area (under a cap they differ by policy with the allocations
// that failed: the legend then says whose they are), the lower bound and the cap.
std::string demand(const Frame& f, std::size_t max_points) {
  std::string out;
  const std::vector<std::uint64_t>& first = f.runs.front()->series.requested_bytes;
  if (!first.empty()) {
    const std::vector<std::size_t> kept = downsample_min_max(first, max_points);
    out += fmt::format(
        "<polygon class=\"requested\" fill=\"{}\" fill-opacity=\"0.35\" stroke=\"none\" "
        "points=\"{:.2f},{:.2f} {} {:.2f},{:.2f}\"/>\n",
        kDemandColour, f.x_px(kept.front()), kPlotBottomPx, step_points(f, first, kept), f.x_px(kept.back()),
        kPlotBottomPx);
  }
  out +=
      level(f, "lower-bound", f.runs.front()->result.lower_bound_bytes,
            fmt::format("lower bound {:.3f} GB", gb(f.runs.front()->result.lower_bound_bytes)), "6,4", /*left=*/true);
  if (f.cap_bytes != 0) {
    out += level(f, "cap", f.cap_bytes, fmt::format("cap {:.3f} GB", gb(f.cap_bytes)), "2,3", /*left=*/false);
  }
  return out;
}

std::string reserved_curve(const Frame& f, const PlotRun& run, std::size_t max_points) {
  const std::vector<std::uint64_t>& values = run.series.reserved_bytes;
  const std::vector<std::size_t> kept = downsample_min_max(values, max_points);
  std::string bytes;
  bytes.reserve(kept.size() * 12);
  for (std::size_t i : kept) bytes += fmt::format("{} ", values[i]);
  if (!bytes.empty()) bytes.pop_back();
  return fmt::format(
      "<polyline class=\"reserved\" data-policy=\"{}\" data-values-bytes=\"{}\" fill=\"none\" "
      "stroke=\"{}\" stroke-width=\"1.8\" stroke-linejoin=\"round\" points=\"{}\"/>\n",
      to_string(run.result.policy), bytes, colour_of(run.result.policy), step_points(f, values, kept));
}

// A cross at the reserved bytes of each failed allocation (every k-th of them past kMaxFailedMarks).
std::string failed_marks(const Frame& f, const PlotRun& run) {
  const std::vector<std::uint64_t>& failed = run.series.failed_ops;
  if (failed.empty()) return "";
  const std::size_t stride = (failed.size() + kMaxFailedMarks - 1) / kMaxFailedMarks;
  std::string path;
  for (std::size_t k = 0; k < failed.size(); k += stride) {
    const auto op = static_cast<std::size_t>(failed[k]);
    path += fmt::format("M{:.1f},{:.1f}l8,8m-8,0l8,-8", f.x_px(op) - 4,
                        f.y_px(static_cast<double>(run.series.reserved_bytes[op])) - 4);
  }
  return fmt::format(
      "<path class=\"failed\" data-policy=\"{}\" data-count=\"{}\" fill=\"none\" stroke=\"{}\" "
      "stroke-width=\"1.6\" d=\"{}\"/>\n",
      to_string(run.result.policy), failed.size(), colour_of(run.result.policy), path);
}

// A marker at each policy's peak reserved (its first op at the peak) and the peak's figure beside it; labels
// that would overlap move down.
std::string peak_markers(const Frame& f) {
  struct Label {
    double x, y, marker_y;
    std::uint64_t bytes;
    Policy policy;
  };
  std::vector<Label> labels;
  for (const PlotRun* run : f.runs) {
    const std::vector<std::uint64_t>& v = run->series.reserved_bytes;
    if (v.empty()) continue;
    const auto op = static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
    const double y = f.y_px(static_cast<double>(v[op]));
    labels.push_back({f.x_px(op), y, y, v[op], run->result.policy});
  }
  std::sort(labels.begin(), labels.end(), [](const Label& a, const Label& b) { return a.y < b.y; });
  std::string out;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    Label& l = labels[i];
    l.y = std::max(l.y - 8, i == 0 ? kPlotTopPx - 4 : labels[i - 1].y + kLabelRowPx);
    const bool left = l.x > kPlotRightPx - 140;
    out += fmt::format(
        "<g class=\"peak\" data-policy=\"{}\" data-bytes=\"{}\"><circle cx=\"{:.2f}\" cy=\"{:.2f}\" "
        "r=\"5\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"1.5\"/><text x=\"{:.2f}\" y=\"{:.2f}\" "
        "text-anchor=\"{}\" font-size=\"12\" font-weight=\"bold\" fill=\"{}\" {}>{:.3f} GB</text></g>\n",
        to_string(l.policy), l.bytes, l.x, l.marker_y, colour_of(l.policy), l.x + (left ? -9 : 9), l.y + 4,
        left ? "end" : "start", colour_of(l.policy), kHalo, gb(l.bytes));
  }
  return out;
}

std::string legend(const Frame& f) {
  std::string out = "<g class=\"legend\" font-size=\"13\" fill=\"#222\">\n";
  double y = kLegendTopPx;
  for (const PlotRun* run : f.runs) {
    const ReplayResult& r = run->result;
    const std::uint64_t failed = r.ooms + r.backend_errors;
    out += fmt::format(
        "<g class=\"legend-policy\" data-policy=\"{}\"><line x1=\"{}\" x2=\"{}\" y1=\"{:.0f}\" "
        "y2=\"{:.0f}\" stroke=\"{}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{:.0f}\" font-weight=\"bold\">"
        "{}</text><text x=\"{}\" y=\"{:.0f}\">peak reserved {:.3f} GB, utilization {:.3f}{}</text>"
        "</g>\n",
        to_string(r.policy), kPlotLeftPx, kPlotLeftPx + 26, y - 4, y - 4, colour_of(r.policy), kPlotLeftPx + 34, y,
        to_string(r.policy), kPlotLeftPx + 128, y, gb(r.peak_reserved_bytes), r.utilization,
        failed ? fmt::format(", {} failed allocations (×)", failed) : "");
    y += kLegendRowPx;
  }
  const double x = kLegendSecondColumnPx;
  y = kLegendTopPx;
  const PlotRun& first = *f.runs.front();
  const bool same_demand = std::all_of(f.runs.begin(), f.runs.end(), [&](const PlotRun* run) {
    return run->series.requested_bytes == first.series.requested_bytes;
  });
  out += fmt::format(
      "<rect x=\"{}\" y=\"{:.0f}\" width=\"26\" height=\"11\" fill=\"{}\" fill-opacity=\"0.35\"/>"
      "<text x=\"{}\" y=\"{:.0f}\">live requested bytes{}</text>\n",
      x, y - 10, kDemandColour, x + 34, y,
      same_demand ? " (the trace's demand)" : fmt::format(" as {} served them", to_string(first.result.policy)));
  y += kLegendRowPx;
  out += fmt::format(
      "<line x1=\"{}\" x2=\"{}\" y1=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"#333\" stroke-dasharray=\"6,4\"/>"
      "<text x=\"{}\" y=\"{:.0f}\">lower bound: the peak of live requested bytes</text>\n",
      x, x + 26, y - 4, y - 4, x + 34, y);
  y += kLegendRowPx;
  out += fmt::format(
      "<circle cx=\"{}\" cy=\"{:.0f}\" r=\"5\" fill=\"#555\"/><text x=\"{}\" y=\"{:.0f}\">peak "
      "reserved of each policy</text>\n",
      x + 13, y - 4, x + 34, y);
  return out + "</g>\n";
}

double chart_height_px(const Frame& f) {
  const std::size_t rows = std::max<std::size_t>(f.runs.size(), 3);
  return kLegendTopPx + static_cast<double>(rows) * kLegendRowPx;
}

std::string chart(const Frame& f, std::size_t max_points) {
  const double height = chart_height_px(f);
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} "
      "{:.0f}\" font-family=\"{}\" data-trace=\"{}\" data-device=\"{}\">\n<rect width=\"{}\" height=\"{:.0f}\" "
      "fill=\"#fff\"/>\n",
      kChartWidthPx, height, kChartWidthPx, height, kFontFamily, escaped(f.runs.front()->result.trace),
      f.runs.front()->result.device, kChartWidthPx, height);
  out += title(f) + y_axis(f) + demand(f, max_points);
  for (const PlotRun* run : f.runs) out += reserved_curve(f, *run, max_points);
  for (const PlotRun* run : f.runs) out += failed_marks(f, *run);
  out += peak_markers(f) + x_axis(f) + legend(f);
  return out + "</svg>\n";
}

void check_series(const PlotRun& run, std::uint64_t ops_of_chart) {
  const ReplayResult& r = run.result;
  const ReplaySeries& s = run.series;
  if (s.time_us.size() != r.ops || s.reserved_bytes.size() != r.ops || s.requested_bytes.size() != r.ops) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("gmlake plot: {} (device {}, {}): the series holds {} times, {} reserved and {} requested "
                            "entries for {} ops",
                            r.trace, r.device, to_string(r.policy), s.time_us.size(), s.reserved_bytes.size(),
                            s.requested_bytes.size(), r.ops));
  }
  if (r.ops != ops_of_chart) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("gmlake plot: {} (device {}): runs of one chart differ in their ops ({} and {})", r.trace,
                            r.device, ops_of_chart, r.ops));
  }
  for (std::uint64_t op : s.failed_ops) {
    if (op >= r.ops)
      throw Error(ErrorCode::kInvalidArgument, fmt::format("gmlake plot: failed op {} past the ops", op));
  }
}

// Consecutive runs of the same trace and device.
std::vector<std::vector<const PlotRun*>> charts_of(const std::vector<PlotRun>& runs) {
  std::vector<std::vector<const PlotRun*>> charts;
  for (const PlotRun& run : runs) {
    const bool same = !charts.empty() && charts.back().front()->result.trace == run.result.trace &&
                      charts.back().front()->result.device == run.result.device;
    if (!same) charts.emplace_back();
    check_series(run, charts.back().empty() ? run.result.ops : charts.back().front()->result.ops);
    charts.back().push_back(&run);
  }
  return charts;
}

}  // namespace

std::vector<std::size_t> downsample_min_max(const std::vector<std::uint64_t>& values, std::size_t max_points) {
  const std::size_t n = values.size();
  max_points = std::max<std::size_t>(max_points, 4);
  std::vector<std::size_t> kept;
  if (n <= max_points) {
    for (std::size_t i = 0; i < n; ++i) kept.push_back(i);
    return kept;
  }
  const std::size_t buckets = (max_points - 2) / 2;
  const std::size_t bucket_size = (n + buckets - 1) / buckets;
  kept.reserve(2 * buckets + 2);
  kept.push_back(0);
  for (std::size_t begin = 0; begin < n; begin += bucket_size) {
    const auto first = values.begin() + static_cast<std::ptrdiff_t>(begin);
    const auto last = values.begin() + static_cast<std::ptrdiff_t>(std::min(begin + bucket_size, n));
    const auto [lo, hi] = std::minmax_element(first, last);  // the first minimum; the last maximum
    const std::size_t lo_at = static_cast<std::size_t>(lo - values.begin());
    const std::size_t hi_at = static_cast<std::size_t>(std::find(first, last, *hi) - values.begin());
    kept.push_back(std::min(lo_at, hi_at));
    kept.push_back(std::max(lo_at, hi_at));
  }
  kept.push_back(n - 1);
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  return kept;
}

std::string format_plot_html(const std::vector<PlotRun>& runs, const PlotOptions& options) {
  const std::vector<std::vector<const PlotRun*>> charts = charts_of(runs);
  std::string names;
  for (const auto& c : charts) names += (names.empty() ? "" : ", ") + c.front()->result.trace;
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>gmlake replay: {}</title>\n<style>body {{ margin: 16px; background: #fff; color: #222; font-family: {}; "
      "}} svg {{ display: block; margin-bottom: 28px; }} p {{ font-size: 12px; color: #666; max-width: 1160px; }}"
      "</style>\n</head>\n<body>\n",
      escaped(names), kFontFamily);
  for (const auto& c : charts) out += chart(frame_of(c, options), options.max_points_per_curve);
  out += fmt::format(
      "<p>Written by <code>gmlake replay --plot</code>. Reserved bytes are sampled after every op "
      "(an op that set a new peak shows that peak). Curves of more than {} ops keep each bucket's "
      "minimum and maximum, so every peak drawn is exact.</p>\n</body>\n</html>\n",
      std::max<std::size_t>(options.max_points_per_curve, 4));
  return out;
}

void write_plot_file(const std::vector<PlotRun>& runs, const PlotOptions& options, const std::string& path) {
  const std::string html = format_plot_html(runs, options);
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(html.data(), static_cast<std::streamsize>(html.size()));
  if (out) out.flush();
  if (!out) {
    const int err = errno;
    throw Error(ErrorCode::kInvalidArgument,
                "gmlake plot: cannot write " + path + (err != 0 ? std::string(": ") + std::strerror(err) : ""));
  }
}

}  // namespace gmlake
