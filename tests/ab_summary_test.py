"""bench/torch/ab_summary.py prints what its doc says for both forms of workload_ab.py's JSON, and names a file
that holds no result instead of failing.

    python3 tests/ab_summary_test.py REPO_ROOT

Run by ctest (label cpu); standard library only."""

import json
import os
import subprocess
import sys
import tempfile


def main():
    root = sys.argv[1]
    script = os.path.join(root, "bench", "torch", "ab_summary.py")
    one_process = {"median_ratio": 1.00456, "total_ratio": 1.01234, "gmlake_peak_reserved": 2_705_000_000,
                   "native_peak_reserved": 3_190_000_000,
                   "pairs": [{"ratio": 0.99801, "gmlake_vmm_ms": 47.74, "gmlake_backend_calls": 2417,
                              "gmlake_fence_waits": 2, "gmlake_fence_wait_ms": 165.11,
                              "gmlake_stream_event_calls": 311, "native_minflt": 2500, "gmlake_minflt": 6400}],
                   "per_kind_ratio": {"gpt2": [1.0321, 42], "bert_large": [0.9912, 30]}}
    processes = {"mode": "processes", "median_ratio": 1.0769, "total_ratio": 1.0799,
                 "processes": [{"allocator": "native", "runs_s": [4.51, 4.67]},
                               {"allocator": "gmlake", "runs_s": [5.14, 4.9],
                                "runs": [{"wall_s": 5.14, "vmm_ms": 0.74, "backend_calls": 24, "fence_waits": 0,
                                          "evictions": 5, "stream_event_calls": 12, "minflt": 641943,
                                          "critical_path_moves": 3, "refused_moves": 1},
                                         {"wall_s": 4.9, "vmm_ms": 0.5, "backend_calls": 20, "fence_waits": 1,
                                          "evictions": 2}]}]}
    stopped = {"mode": "processes", "complete": False, "median_ratio": None, "total_ratio": None,
               "processes": [{"allocator": "native", "runs_s": [4.2]}]}
    expected = ["median 1.0046 total 1.0123 peaks GB 2.705 3.19",
                "per kind (gmlake / native host s, calls a run): gpt2 1.0321 42, bert_large 0.9912 30",
                "0.998 47.74 2417 2 165.11 311 faults 2500 6400",
                "median 1.0769 total 1.0799", "native [4.51, 4.67]",
                "gmlake ['s 5.14 vmm_ms 0.74 calls 24 waits 0 evictions 5 events 12 minflt 641943 critical 3 "
                "refused 1', 's 4.9 vmm_ms 0.5 calls 20 waits 1 evictions 2']",
                "median None total None (stopped after 1 processes)", "native [4.2]"]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, r in (("one.json", one_process), ("procs.json", processes), ("stopped.json", stopped)):
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "w") as f:
                json.dump(r, f)
        empty = os.path.join(tmp, "timed_out.json")
        open(empty, "w").close()  # what a run past its limit leaves
        out = subprocess.run([sys.executable, script, paths[0], empty, paths[1], paths[2]], check=True,
                             capture_output=True, text=True).stdout.splitlines()
    got = [line for line in out if not line.startswith(empty)]
    if got != expected or sum(line.startswith(empty + ": no result") for line in out) != 1:
        print("ab_summary_test: expected", expected, "and one no-result line, got", out)
        return 1
    print("ab_summary_test: both forms and a file with no result as documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
