"""scripts/replay-gate.py's verdict per trace (reasons()), as a table: the bar (PyTorch's best, the utilization
target, a 1.01x device), the recorded bounds, and known misses (held to what they reached, failing once met).

    python3 tests/replay_gate_test.py REPO_ROOT

Run by ctest (label cpu); standard library only; replays nothing."""

import importlib.util
import os
import sys


def load(root):
    spec = importlib.util.spec_from_file_location("replay_gate", os.path.join(root, "scripts", "replay-gate.py"))
    gate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gate)
    return gate


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: replay_gate_test.py REPO_ROOT")
    gate = load(sys.argv[1])
    gate.TRAINING = {"train"}
    gate.PAGE_GRANULAR_LIMITS = {"limited": 0.95}
    bound = {"min_utilization": 0.985, "max_vmm_share": 0.05}
    miss = {"utilization": 0.9892, "ooms_at_1.01x": 1}

    def fig(util=0.993, peak=1.0, best=1.2, share=0.02, tight=0, tight_pg=0):
        return {"peak": peak, "best_pytorch": best, "utilization": util, "vmm_share": share,
                "tight_ooms": tight, "tight_pg_ooms": tight_pg}

    loose = {"min_utilization": 0.94}  # for the trace whose page-granular limit is 0.95
    cases = [
        # name, figures, recorded bounds, known miss, expected reasons
        ("train", fig(), bound, None, []),
        ("train", fig(peak=1.2013), bound, None, ["above PyTorch's best"]),
        ("train", fig(peak=1.2011), bound, None, []),  # within 0.1%
        ("train", fig(util=0.9895), bound, None, ["below target"]),
        ("infer", fig(util=0.9895), bound, None, []),  # 0.98 off the training list
        ("limited", fig(util=0.9501, share=None), loose, None, []),  # the page-granular limit
        ("train", fig(tight=1), bound, None, ["fails on a 1.01x device"]),
        ("train", fig(tight=3, tight_pg=2), bound, None, []),  # the page-granular engine fails too
        ("train", fig(util=0.984), bound, None, ["below target", "utilization regressed"]),
        ("train", fig(share=0.06), bound, None, ["VMM share regressed"]),
        ("train", fig(util=0.9892, tight=1), bound, miss, []),  # a known miss, as found
        ("train", fig(util=0.9891, tight=1), bound, miss, ["below its known miss (0.9892)"]),
        ("train", fig(util=0.9895, tight=2), bound, miss,
         ["more failures on a 1.01x device than its known miss (1)"]),
        ("train", fig(util=0.9895, tight=0), bound, miss, []),  # better at 1.01x, still under 0.99: still a miss
        ("train", fig(util=0.9901, tight=0), bound, miss,
         ["known miss now met: remove it from traces/targets.json's known_misses"]),
        ("train", fig(util=0.9892, tight=1, peak=1.3), bound, miss, ["above PyTorch's best"]),
    ]
    failures = 0
    for name, r, b, m, expected in cases:
        got = gate.reasons(name, r, b, m)
        if got != expected:
            failures += 1
            print(f"FAILED: {name} {r} bound={b} miss={m}: {got}, expected {expected}")
    print(f"replay_gate_test: {len(cases) - failures} of {len(cases)} cases as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
