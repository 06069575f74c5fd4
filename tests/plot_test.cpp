// The replay's chart (plot.h): downsampling that keeps every peak, one chart per trace and device with one curve
// per policy, the legend's figures as the table prints them, escaping, and the errors. The page as a browser and an
// XML parser see it: tests/python/test_plot_svg.py and test_plot_render.py.
#include "gmlake/plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A run of `ops` ops whose reserved bytes climb to `peak_bytes` at op ops/3 and fall back; demand half of it.
PlotRun run_of(const std::string& trace, int device, Policy policy, std::size_t ops, std::uint64_t peak_bytes) {
  PlotRun run;
  run.result.trace = trace;
  run.result.device = device;
  run.result.policy = policy;
  run.result.backend = "sim";
  run.result.ops = ops;
  run.result.peak_reserved_bytes = peak_bytes;
  run.result.lower_bound_bytes = peak_bytes / 2;
  run.result.utilization = 0.5;
  for (std::size_t i = 0; i < ops; ++i) {
    const std::uint64_t v = i == ops / 3 ? peak_bytes : peak_bytes / 4 + (i % 7) * kMiB;
    run.series.time_us.push_back(static_cast<std::int64_t>(1'000'000 + i * 10));
    run.series.reserved_bytes.push_back(v);
    run.series.requested_bytes.push_back(std::min(v, peak_bytes / 2));
  }
  return run;
}

TEST(PlotDownsampleTest, ACurveOfAtMostMaxPointsKeepsEveryIndex) {
  const std::vector<std::uint64_t> values = {5, 1, 9, 9, 2};
  const std::vector<std::size_t> kept = downsample_min_max(values, 5);
  EXPECT_EQ(kept, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
}

TEST(PlotDownsampleTest, ALongCurveKeepsAtMostMaxPointsAscendingWithTheFirstPeakTheFirstAndTheLast) {
  std::vector<std::uint64_t> values(100'003);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = (i * 7919) % 1000;
  values[61'234] = 5000;  // the peak, and a second one later: the first is kept
  values[90'000] = 5000;
  for (std::size_t max_points : {4u, 10u, 2000u}) {
    const std::vector<std::size_t> kept = downsample_min_max(values, max_points);
    EXPECT_LE(kept.size(), max_points);
    EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
    EXPECT_EQ(std::adjacent_find(kept.begin(), kept.end()), kept.end()) << "no index twice";
    EXPECT_EQ(kept.front(), 0u);
    EXPECT_EQ(kept.back(), values.size() - 1);
    EXPECT_NE(std::find(kept.begin(), kept.end(), 61'234u), kept.end()) << max_points;
  }
}

TEST(PlotDownsampleTest, EveryBucketKeepsItsMinimumSoDipsShowToo) {
  std::vector<std::uint64_t> values(10'000, 100);
  values[4321] = 1;
  const std::vector<std::size_t> kept = downsample_min_max(values, 20);
  EXPECT_NE(std::find(kept.begin(), kept.end(), 4321u), kept.end());
}

TEST(PlotTest, OneChartPerTraceAndDeviceWithOneReservedCurvePerPolicyAndTheTablesFigures) {
  std::vector<PlotRun> runs;
  for (Policy p : {Policy::kCaching, Policy::kExpandable, Policy::kGmlake}) {
    runs.push_back(run_of("t1", 0, p, 5000, 6 * kGiB));
  }
  runs.push_back(run_of("t1", 1, Policy::kGmlake, 40, 2 * kGiB));
  runs.push_back(run_of("t2", 0, Policy::kGmlake, 40, 2 * kGiB));
  const std::string html = format_plot_html(runs, {});
  EXPECT_EQ(count(html, "<svg "), 3u);
  EXPECT_EQ(count(html, "class=\"reserved\""), 5u);
  for (const char* p : {"caching", "expandable", "gmlake"}) {
    EXPECT_EQ(count(html, std::string("class=\"reserved\" data-policy=\"") + p + "\""),
              p == std::string("gmlake") ? 3u : 1u);
  }
  EXPECT_NE(html.find("peak reserved 6.442 GB, utilization 0.500"), std::string::npos);  // 6 GiB, as the table
  EXPECT_NE(html.find("lower bound 3.221 GB"), std::string::npos);
  EXPECT_NE(html.find("time since the trace's first event (s)"), std::string::npos);
  EXPECT_EQ(count(html, "class=\"peak\""), 5u);
  EXPECT_NE(html.find("data-bytes=\"" + std::to_string(6 * kGiB) + "\""), std::string::npos) << "the exact peak";
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
}

// `--policy all` on cuda adds async (PyTorch's cudaMallocAsync): four curves on one chart, each in a colour of its own.
TEST(PlotTest, AsyncGetsACurveInAColourOfItsOwnBesideTheOtherThreePolicies) {
  std::vector<PlotRun> runs;
  for (Policy p : {Policy::kCaching, Policy::kExpandable, Policy::kGmlake, Policy::kAsync}) {
    runs.push_back(run_of("t1", 0, p, 100, 6 * kGiB));
  }
  const std::string html = format_plot_html(runs, {});
  std::vector<std::string> colours;
  for (const char* p : {"caching", "expandable", "gmlake", "async"}) {
    const std::string start = std::string("class=\"reserved\" data-policy=\"") + p + "\"";
    ASSERT_EQ(count(html, start), 1u) << p;
    const std::size_t stroke = html.find("stroke=\"", html.find(start)) + 8;
    colours.push_back(html.substr(stroke, html.find('"', stroke) - stroke));
  }
  std::sort(colours.begin(), colours.end());
  EXPECT_EQ(std::unique(colours.begin(), colours.end()), colours.end()) << "two policies share a colour";
}

TEST(PlotTest, ATraceWithoutTimesIsDrawnOverTheOpIndexWithWholeOpsSpelledOut) {
  PlotRun run = run_of("t", 0, Policy::kGmlake, 1'500'001, kGiB);
  std::fill(run.series.time_us.begin(), run.series.time_us.end(), 0);
  const std::string html = format_plot_html({run}, {});
  EXPECT_NE(html.find("op (the trace has no times)"), std::string::npos);
  EXPECT_EQ(html.find("time since"), std::string::npos);
  EXPECT_NE(html.find(">1000000</text>"), std::string::npos);
  EXPECT_EQ(html.find("e+06"), std::string::npos);
  EXPECT_LT(html.size(), 300'000u) << "downsampled";
  PlotRun three = run_of("t", 0, Policy::kGmlake, 3, kGiB);
  std::fill(three.series.time_us.begin(), three.series.time_us.end(), 0);
  const std::string tiny = format_plot_html({three}, {});
  EXPECT_NE(tiny.find(">2</text>"), std::string::npos);
  EXPECT_EQ(tiny.find(">0.5</text>"), std::string::npos) << "no tick between two ops";
}

TEST(PlotTest, FailedAllocationsAreMarkedAndCountedAndTheCapIsDrawn) {
  PlotRun run = run_of("t", 0, Policy::kCaching, 100, kGiB);
  run.result.ooms = 2;
  run.series.failed_ops = {10, 20};
  const std::string html = format_plot_html({run}, {.cap_bytes = kGiB});
  EXPECT_NE(html.find("class=\"failed\" data-policy=\"caching\" data-count=\"2\""), std::string::npos);
  EXPECT_NE(html.find("2 failed allocations"), std::string::npos);
  EXPECT_NE(html.find("class=\"cap\" data-bytes=\"" + std::to_string(kGiB) + "\""), std::string::npos);
  // A cap far above every curve is not drawn: it would squash them.
  EXPECT_EQ(format_plot_html({run}, {.cap_bytes = 100 * kGiB}).find("class=\"cap\""), std::string::npos);
}

TEST(PlotTest, TheTraceNameIsEscaped) {
  const std::string html = format_plot_html({run_of("a<b>&\"c'", 0, Policy::kGmlake, 10, kGiB)}, {});
  EXPECT_EQ(html.find("a<b>"), std::string::npos);
  EXPECT_NE(html.find("a&lt;b&gt;&amp;&quot;c&#39;"), std::string::npos);
}

TEST(PlotTest, ASeriesThatDoesNotMatchItsOpsIsRejected) {
  PlotRun run = run_of("t", 0, Policy::kGmlake, 10, kGiB);
  run.series.reserved_bytes.pop_back();
  test::expect_error([&] { format_plot_html({run}, {}); }, ErrorCode::kInvalidArgument, "9 reserved");
  PlotRun other = run_of("t", 0, Policy::kCaching, 12, kGiB);
  test::expect_error(
      [&] {
        format_plot_html({run_of("t", 0, Policy::kGmlake, 10, kGiB), other}, {});
      },
      ErrorCode::kInvalidArgument, "differ in their ops");
  PlotRun failed = run_of("t", 0, Policy::kGmlake, 10, kGiB);
  failed.series.failed_ops = {10};
  test::expect_error([&] { format_plot_html({failed}, {}); }, ErrorCode::kInvalidArgument, "past the ops");
}

TEST(PlotTest, WritingToAPathThatCannotBeWrittenThrowsNamingIt) {
  const std::string path = "/nonexistent-gmlake-dir/plot.html";
  test::expect_error([&] { write_plot_file({run_of("t", 0, Policy::kGmlake, 10, kGiB)}, {}, path); },
                     ErrorCode::kInvalidArgument, path);
}

TEST(PlotTest, WritingAFileWritesThePage) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "gmlake_plot_test.html";
  const std::vector<PlotRun> runs = {run_of("t", 0, Policy::kGmlake, 10, kGiB)};
  write_plot_file(runs, {}, path.string());
  EXPECT_EQ(std::filesystem::file_size(path), format_plot_html(runs, {}).size());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gmlake
