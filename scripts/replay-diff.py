#!/usr/bin/env python3
"""Checks that two gmlake CLIs decide the same on the shipped traces: for a refactor that must change no decision.

    scripts/replay-diff.py OLD_CLI NEW_CLI [--conf C]... [--device-bytes B]... [--policy gmlake] [TRACE...]

Replays every trace (default: traces/*.snapshot.pickle* and ../shared/traces/*.snapshot.pickle*) with both CLIs on
--backend sim:h100, once per configuration given (none: the default only; each --conf and each --device-bytes is one
more run), and compares their --json results field by field, leaving out the fields that are measured times
(ns_per_op, names ending in _ns or holding "time": backend_time_ns, ...). Every other figure must be equal: peak
reserved bytes, utilization, backend calls of every kind (and in the second half), evictions, stitches, OOMs.
A field that only one of the two reports (the report grew between them) is named once and not compared.

Prints one line per difference and a summary. Exit status: 0 when all runs agree, 1 when one differs, 2 when a
replay fails (either CLI).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def replay(cli, trace, policy, extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        subprocess.run([cli, "replay", trace, "--policy", policy, "--backend", "sim:h100", "--quiet", "--json", out]
                       + extra, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.load(open(out))


def measured(key):
    """A field that is a measured time, which two runs of the same decisions need not share."""
    return key == "ns_per_op" or key.endswith("_ns") or "time" in key


def decisions(rows):
    return [{k: v for k, v in r.items() if not measured(k)} for r in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("traces", nargs="*")
    ap.add_argument("--conf", action="append", default=[])
    ap.add_argument("--device-bytes", action="append", default=[])
    ap.add_argument("--policy", default="gmlake")
    args = ap.parse_args()
    traces = args.traces or sorted(glob.glob(os.path.join(ROOT, "traces", "*.snapshot.pickle*")) +
                                   glob.glob(os.path.join(ROOT, "..", "shared", "traces", "*.snapshot.pickle*")))
    runs = [[]] + [["--conf", c] for c in args.conf] + [["--device-bytes", b] for b in args.device_bytes]
    differ = 0
    only_old, only_new = set(), set()
    for extra in runs:
        for t in traces:
            try:
                a = decisions(replay(args.old, t, args.policy, extra))
                b = decisions(replay(args.new, t, args.policy, extra))
            except (subprocess.CalledProcessError, OSError, ValueError) as e:
                print(f"replay-diff: {os.path.basename(t)} {' '.join(extra)}: replay failed: {e}", file=sys.stderr)
                return 2
            # A field only one CLI reports (a report grown since) is no decision: named once at the end.
            for ra, rb in zip(a, b):
                only_old.update(set(ra) - set(rb))
                only_new.update(set(rb) - set(ra))
            diffs = [sorted(k for k in set(ra) & set(rb) if ra[k] != rb[k]) for ra, rb in zip(a, b)]
            if len(a) != len(b) or any(diffs):
                differ += 1
                for ra, rb, keys in zip(a, b, diffs):
                    print(f"DIFFERS {os.path.basename(t)} {' '.join(extra) or '(default)'}: "
                          + ", ".join(f"{k} {ra.get(k)} -> {rb.get(k)}" for k in keys))
    total = len(runs) * len(traces)
    if only_old or only_new:
        print(f"replay-diff: fields not compared (only in OLD: {', '.join(sorted(only_old)) or 'none'}; "
              f"only in NEW: {', '.join(sorted(only_new)) or 'none'})")
    print(f"replay-diff: {total - differ} of {total} replays decide the same; {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
