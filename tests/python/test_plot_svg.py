"""`gmlake replay --plot` as a program reading the page sees it: the HTML parses as XML, nothing is fetched, there is
one chart per trace and device and one reserved curve per policy, and each curve's peak is the report's
peak_reserved_bytes (--json), drawn where the y axis puts that many bytes. Run by ctest (label cpu) with GMLAKE_CLI
and GMLAKE_TRACES_DIR set; standard library only."""

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
MAX_FILE_BYTES = 3_000_000


def points_of(polyline):
    return [tuple(float(v) for v in p.split(",")) for p in polyline.get("points").split()]


def y_of_bytes(chart):
    """The y axis as a function: bytes -> pixel, from two of its ticks."""
    ticks = [(float(t.get("data-bytes")), float(t.find(SVG + "line").get("y1")))
             for t in chart.iter(SVG + "g") if t.get("class") == "ytick"]
    (b0, y0), (b1, y1) = ticks[0], ticks[-1]
    return lambda b: y0 + (b - b0) * (y1 - y0) / (b1 - b0)


def check_chart(chart, results, cap_bytes, check):
    name = f"{chart.get('data-trace')} device {chart.get('data-device')}"
    curves = [e for e in chart.iter(SVG + "polyline") if e.get("class") == "reserved"]
    policies = [c.get("data-policy") for c in curves]
    check(sorted(policies) == sorted(results), f"{name}: curves {policies}, policies replayed {sorted(results)}")
    y_of = y_of_bytes(chart)
    peaks = {g.get("data-policy"): g for g in chart.iter(SVG + "g") if g.get("class") == "peak"}
    legend = " ".join("".join(t.itertext()) for t in chart.iter(SVG + "g") if t.get("class") == "legend-policy")
    for curve in curves:
        policy = curve.get("data-policy")
        r = results[policy]
        values = [int(v) for v in curve.get("data-values-bytes").split()]
        points = points_of(curve)
        check(len(points) == 2 * len(values) - 1, f"{name} {policy}: {len(points)} points for {len(values)} values")
        check(max(values) == r["peak_reserved_bytes"],
              f"{name} {policy}: plotted peak {max(values)} != report's {r['peak_reserved_bytes']}")
        top = min(y for _, y in points)
        check(abs(top - y_of(r["peak_reserved_bytes"])) < 0.02,
              f"{name} {policy}: the curve's top at y={top}, the axis puts the peak at {y_of(r['peak_reserved_bytes'])}")
        for (x, y), v in zip(points[::2], values):
            if abs(y - y_of(v)) > 0.02:
                check(False, f"{name} {policy}: point ({x}, {y}) is not at {v} bytes")
                break
        marker = peaks.get(policy)
        check(marker is not None and int(marker.get("data-bytes")) == r["peak_reserved_bytes"],
              f"{name} {policy}: no peak marker at the report's peak")
        if marker is not None:
            check(abs(float(marker.find(SVG + "circle").get("cy")) - top) < 0.02, f"{name} {policy}: marker off the curve")
        figures = f"{policy}peak reserved {r['peak_reserved_bytes'] / 1e9:.3f} GB, utilization {r['utilization']:.3f}"
        check(figures in legend, f"{name}: legend lacks '{figures}': {legend}")
        failed = [e for e in chart.iter(SVG + "path") if e.get("class") == "failed" and e.get("data-policy") == policy]
        check(len(failed) == (1 if r["ooms"] else 0) and all(int(e.get("data-count")) == r["ooms"] for e in failed),
              f"{name} {policy}: failed marks do not count the report's {r['ooms']} out-of-memory allocations")
    lower = [g for g in chart.iter(SVG + "g") if g.get("class") == "lower-bound"]
    first = results[policies[0]] if policies else None
    check(len(lower) == 1 and first is not None and int(lower[0].get("data-bytes")) == first["lower_bound_bytes"],
          f"{name}: no lower-bound line at the table's lower bound")
    caps = [g for g in chart.iter(SVG + "g") if g.get("class") == "cap"]
    check(len(caps) == (1 if cap_bytes else 0), f"{name}: {len(caps)} cap lines, cap {cap_bytes}")


def replay_and_check(cli, args, cap_bytes, failures, expect_ooms=False):
    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        html_path, json_path = os.path.join(tmp, "plot.html"), os.path.join(tmp, "r.json")
        done = subprocess.run([cli, "replay", *args, "--plot", html_path, "--json", json_path],
                              capture_output=True, text=True)
        if done.returncode != 0:
            failures.append(f"gmlake replay {args} failed: {done.stderr}")
            return
        size = os.path.getsize(html_path)
        check(size < MAX_FILE_BYTES, f"{size} bytes: the page should stay under {MAX_FILE_BYTES}")
        text = open(html_path, encoding="utf-8").read()
        check("<script" not in text, "the page holds a script")
        urls = set(re.findall(r"https?://[^\"' )]+", text)) - {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml"}
        check(not urls, f"the page names addresses: {urls}")
        check(not re.search(r"\b(src|href)=", text), "the page links to something")
        root = ET.fromstring(text)  # raises on anything that is not well-formed XML
        results = json.load(open(json_path))
        check(any(r["ooms"] for r in results) == expect_ooms, f"out-of-memory allocations: expected {expect_ooms}")
        groups = {}
        for r in results:
            groups.setdefault((r["trace"], str(r["device"])), {})[r["policy"]] = r
        charts = [e for e in root.iter(SVG + "svg") if e.get("class") == "chart"]
        check(len(charts) == len(groups), f"{len(charts)} charts for {len(groups)} trace x device")
        for chart in charts:
            key = (chart.get("data-trace"), chart.get("data-device"))
            check(key in groups, f"a chart of {key}, which was not replayed")
            if key in groups:
                check_chart(chart, groups[key], cap_bytes, check)


def main():
    cli, traces = os.environ["GMLAKE_CLI"], os.environ["GMLAKE_TRACES_DIR"]
    failures = []
    gpt2, resnet = f"{traces}/gpt2_varlen.snapshot.pickle.xz", f"{traces}/resnet50.snapshot.pickle.xz"
    # Two traces, every policy: two charts; 113,903 and 47,465 ops downsampled with their peaks kept.
    replay_and_check(cli, [gpt2, resnet, "--policy", "all"], 0, failures)
    # Under a cap that two policies cannot keep to: their failed allocations are marked, the cap drawn.
    cap_bytes = 5800 * 1024 * 1024
    replay_and_check(cli, [resnet, "--policy", "all", "--cap", "5800M"], cap_bytes, failures, expect_ooms=True)
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok: the plot parses as XML, one curve per policy, each at the report's peak")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
