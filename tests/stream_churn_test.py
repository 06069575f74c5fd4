"""bench/torch/stream_churn.py repeats a device trace with new side-stream ids per copy, moved addresses and later
times (gap_us apart); keeps or drops the blocks never freed; keeps the stream ids with same_streams, its never-freed blocks
allocated once (made-up events: no GPU, no PyTorch).

    python3 tests/stream_churn_test.py REPO_ROOT

Run by ctest (label cpu); standard library only."""

import os
import sys


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "bench", "torch"))
    import stream_churn as sc

    ev = [{"action": "alloc", "addr": 100, "size": 8, "stream": 0, "time_us": 10},
          {"action": "alloc", "addr": 200, "size": 32, "stream": 7, "time_us": 11},   # never freed: a workspace
          {"action": "alloc", "addr": 300, "size": 16, "stream": 7, "time_us": 12},
          {"action": "segment_map", "addr": 0, "size": 2, "stream": 0, "time_us": 12},  # not kept
          {"action": "free_requested", "addr": 300, "size": 16, "stream": 7, "time_us": 13},
          {"action": "free_completed", "addr": 300, "size": 16, "stream": 7, "time_us": 13},
          {"action": "alloc", "addr": 300, "size": 4, "stream": 9, "time_us": 14},   # the address again: never freed
          {"action": "free_requested", "addr": 100, "size": 8, "stream": 0, "time_us": 15}]
    failures = []
    if sc.unfreed(ev) != {1, 6}:
        failures.append(f"unfreed: {sc.unfreed(ev)} != {{1, 6}}")
    out = sc.churn(ev, 3)
    if len(out) != 3 * 7:
        failures.append(f"3 copies of 7 kept events: {len(out)}")
    streams = [sorted({e["stream"] for e in out[7 * c:7 * c + 7]}) for c in range(3)]
    if streams != [[0, 7, 9], [0, 17, 19], [0, 27, 29]]:
        failures.append(f"each copy's side streams new, the default stream kept: {streams}")
    if out[7]["addr"] != 100 + sc.ADDRESS_STRIDE or out[14]["addr"] != 100 + 2 * sc.ADDRESS_STRIDE:
        failures.append(f"addresses moved apart: {out[7]['addr']}, {out[14]['addr']}")
    times = [e["time_us"] for e in out]
    if times != sorted(times) or out[7]["time_us"] <= out[6]["time_us"]:
        failures.append(f"times in order across copies: {times}")
    dropped = sc.churn(ev, 2, drop_unfreed=True)
    if len(dropped) != 2 * 5 or any(e["size"] in (32, 4) for e in dropped):
        failures.append(f"unfreed allocs dropped from every copy: {dropped}")
    same = sc.churn(ev, 2, same_streams=True)
    if sorted({e["stream"] for e in same}) != [0, 7, 9]:
        failures.append(f"same_streams keeps the ids: {sorted({e['stream'] for e in same})}")
    if len(same) != 7 + 5 or [e["size"] for e in same[7:] if e["action"] == "alloc"] != [8, 16]:
        failures.append(f"same_streams: the never-freed blocks allocated by the first copy only: {same}")
    gapped = sc.churn(ev, 2, gap_us=5000)
    if gapped[7]["time_us"] - gapped[6]["time_us"] != 5000 + 1:
        failures.append(f"gap_us puts the next copy's first event that far after the last one (and 1 us): "
                        f"{gapped[6]['time_us']} -> {gapped[7]['time_us']}")
    if sc.churn([], 4) != []:
        failures.append("nothing in, nothing out")
    for f in failures:
        print("FAILED:", f)
    print("stream_churn_test:", "failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
