"""Prints the lines the GPU run scripts show of a workload_ab.py JSON, either form:

    python3 bench/torch/ab_summary.py OUT.json [...]

- both allocators in one process: "median M total T peaks GB G N", with --per-call a line of the ratio per
  kind of call, then per pair its ratio, gmlake's VMM ms, backend calls, fence waits, the ms blocked in them
  and, where reported, the stream event calls and "faults N G" (native's and gmlake's minor page faults);
- --processes: "median M total T" (and how many processes ran, where a time limit stopped it), then per process
  its allocator and, per run, "s S vmm_ms V calls C waits W evictions E events N minflt F critical M refused R"
  (seconds, VMM ms, backend calls, fence waits, evictions, stream event calls, minor page faults, moves charged
  to the move budget as on the critical path, refused moves; each figure labelled, and left out where the JSON
  lacks it) where the JSON has them (workload_ab.py's --alone counters), else its seconds.
A file that does not hold a JSON object (a run that passed its time limit) is named as such and skipped.
"""
import json
import sys


# A --processes run's figures as printed, each with its label (a JSON without one leaves it out, and the others
# keep their labels): workload_ab.py's --alone counters.
RUN_FIGURES = (("wall_s", "s"), ("vmm_ms", "vmm_ms"), ("backend_calls", "calls"), ("fence_waits", "waits"),
               ("evictions", "evictions"), ("stream_event_calls", "events"), ("minflt", "minflt"),
               ("critical_path_moves", "critical"), ("refused_moves", "refused"))


def summary(r):
    """The lines for one workload_ab.py result `r` (a dict)."""
    if r.get("mode") == "processes":
        rnd = lambda x: None if x is None else round(x, 4)  # noqa: E731 (None: one allocator has no run yet)
        lines = [f"median {rnd(r['median_ratio'])} total {rnd(r['total_ratio'])}"
                 + ("" if r.get("complete", True) else f" (stopped after {len(r['processes'])} processes)")]
        for p in r["processes"]:
            runs = [" ".join(f"{label} {x[k]}" for k, label in RUN_FIGURES if k in x) for x in p["runs"]] \
                if "runs" in p else p["runs_s"]
            lines.append(f"{p['allocator']} {runs}")
        return lines
    lines = [f"median {round(r['median_ratio'], 4)} total {round(r['total_ratio'], 4)} peaks GB "
             f"{round(r['gmlake_peak_reserved'] / 1e9, 3)} {round(r['native_peak_reserved'] / 1e9, 3)}"]
    if "per_kind_ratio" in r:
        lines.append("per kind (gmlake / native host s, calls a run): "
                     + ", ".join(f"{k} {v[0]} {v[1]}" for k, v in r["per_kind_ratio"].items()))
    for p in r["pairs"]:
        lines.append(f"{round(p['ratio'], 4)} {p['gmlake_vmm_ms']} {p['gmlake_backend_calls']} "
                     f"{p['gmlake_fence_waits']} {p.get('gmlake_fence_wait_ms')}"
                     + (f" {p['gmlake_stream_event_calls']}" if "gmlake_stream_event_calls" in p else "")
                     + (f" faults {p['native_minflt']} {p['gmlake_minflt']}" if "gmlake_minflt" in p else ""))
    return lines


def main():
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: no result ({e})")
            continue
        print("\n".join(summary(r)))


if __name__ == "__main__":
    main()
