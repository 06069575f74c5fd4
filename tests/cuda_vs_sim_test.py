"""scripts/cuda-vs-sim.py decides as its doc says: equal replays pass; a gmlake or expandable replay differing in
any compared field, or missing on cuda, fails; caching's differences are shown but not counted; bad usage exits 2.

    python3 tests/cuda_vs_sim_test.py REPO_ROOT

Run by ctest (label cpu); standard library only."""

import copy
import json
import os
import subprocess
import sys
import tempfile


def replay(policy, trace="t1", **fields):
    row = {"trace": trace, "device": 0, "policy": policy, "peak_reserved_bytes": 1 << 30,
           "backend_calls": {"create": 10, "map": 12, "unmap": 2, "release": 1, "set_access": 12},
           "ooms": 0, "evictions": 3}
    row.update(fields)
    return row


def run(script, tmp, cuda_rows, sim_rows):
    paths = []
    for name, rows in (("cuda", cuda_rows), ("sim", sim_rows)):
        path = os.path.join(tmp, f"{name}.json")
        with open(path, "w") as f:
            json.dump(rows, f)
        paths.append(path)
    done = subprocess.run([sys.executable, script, *paths], capture_output=True, text=True)
    return done.returncode, done.stdout


def main():
    script = os.path.join(sys.argv[1], "scripts", "cuda-vs-sim.py")
    sim = [replay("gmlake"), replay("expandable"), replay("caching"), replay("gmlake", trace="t2")]
    failures = []

    def expect(what, want_rc, cuda, want_text=None, sim_rows=sim):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = run(script, tmp, cuda, sim_rows)
        if rc != want_rc or (want_text and want_text not in out):
            failures.append(f"{what}: exit {rc} (want {want_rc}), output:\n{out}")

    expect("identical", 0, copy.deepcopy(sim), "3 of 3 replays identical")
    calls = copy.deepcopy(sim)
    calls[0]["backend_calls"]["set_access"] += 1
    expect("gmlake's calls differ", 1, calls, "DIFFERENT")
    peak = copy.deepcopy(sim)
    peak[1]["peak_reserved_bytes"] += 2 << 20
    expect("expandable's peak differs", 1, peak, "DIFFERENT")
    evictions = copy.deepcopy(sim)
    evictions[3]["evictions"] = 0
    expect("gmlake's evictions differ", 1, evictions, "evictions: cuda 0 sim 3")
    caching = copy.deepcopy(sim)
    caching[2]["peak_reserved_bytes"] += 20 << 20
    expect("caching differs (address order)", 0, caching, "not counted")
    expect("a replay missing on cuda", 1, copy.deepcopy(sim[:3]), "missing")
    expect("only caching: nothing compared", 1, [replay("caching")], "0 of 0", sim_rows=[replay("caching")])
    bad = subprocess.run([sys.executable, script, "only-one.json"], capture_output=True, text=True)
    if bad.returncode != 2:
        failures.append(f"one argument: exit {bad.returncode} (want 2)")
    unreadable = subprocess.run([sys.executable, script, "/nonexistent/a.json", "/nonexistent/b.json"],
                                capture_output=True, text=True)
    if unreadable.returncode != 1 or "cannot read" not in unreadable.stdout:
        failures.append(f"unreadable files: exit {unreadable.returncode} (want 1), {unreadable.stdout}")
    for f in failures:
        print("FAIL", f)
    print(f"cuda_vs_sim_test: {9 - len(failures)} of 9 cases pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
