"""gmlake under PyTorch on a GPU (ctest label gpu): record_stream safety, torch.OutOfMemoryError, and
torch.cuda.memory_stats() reporting gmlake's pool, through the c10 allocator extension.

Each case runs in its own process (PyTorch's allocator can be chosen once per process):
  python3 tests/gpu/torch_allocator_test.py              # all cases, asserts, prints a table
  python3 tests/gpu/torch_allocator_test.py case MODE RECORD   # one case (MODE: extension|pluggable|native)

The record_stream case: x is allocated and filled on a main stream; a side stream sleeps ~50 ms, then
reads x (y = 2x, y allocated before the sleep). The host frees x at once and allocates z (same size, filled with 7)
on the main stream, which
runs while the side stream still sleeps. If the allocator hands x's memory to z, the side stream reads 7s and
y is wrong. Tensor.record_stream(side) must prevent that; without it the allocator may reuse (and does: that
row shows the check can fail).
"""

import json
import os
import subprocess
import sys
import time

N_FLOATS = 16 << 20  # 64 MiB


def enable(mode):
    if mode == "native":
        return
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import gmlake

    gmlake.torch.enable(extension=(mode == "extension"))
    assert gmlake.torch.mode() == mode, gmlake.torch.mode()


def record_stream_case(mode, record):
    import torch

    enable(mode)
    dev = torch.device("cuda")
    # Two consecutive streams of PyTorch's pool: the GPU then feeds them through different hardware queues (the
    # first streams of the two priority pools can share one queue, which runs their work in launch order and
    # hides the hazard: seen on the H200), so the main stream's later work can overtake the side stream's.
    main = torch.cuda.Stream()
    side = torch.cuda.Stream()
    with torch.cuda.stream(main):
        x = torch.full((N_FLOATS,), 1.0, device=dev)
    side.wait_stream(main)
    y_start = torch.cuda.Event(enable_timing=True)
    z_end = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(side):
        y = torch.empty_like(x)  # before the sleep: an allocation may synchronize (cudaMalloc does, natively)
    # The side stream waits for a third stream's ~50 ms sleep, then reads x. (A launch onto the sleeping stream
    # itself blocked the host until the sleep ended on the H200, which hides the hazard.)
    slow = torch.cuda.Stream()
    gate = torch.cuda.Event()
    t0 = time.perf_counter()
    with torch.cuda.stream(slow):
        torch.cuda._sleep(100_000_000)  # ~50 ms at 1.98 GHz
        gate.record()
    sleep_launch_ms = (time.perf_counter() - t0) * 1e3
    side.wait_event(gate)
    with torch.cuda.stream(side):
        y_start.record()
        torch.mul(x, 2, out=y)
    host_ms = {"launched": (time.perf_counter() - t0) * 1e3}
    if record:
        x.record_stream(side)
    x_ptr = x.data_ptr()
    del x  # freed in main's order
    host_ms["freed"] = (time.perf_counter() - t0) * 1e3
    with torch.cuda.stream(main):
        z = torch.full((N_FLOATS,), 7.0, device=dev)
        host_ms["z_allocated"] = (time.perf_counter() - t0) * 1e3
        z_end.record()
    side_done_when_z_allocated = side.query()
    reused = z.data_ptr() == x_ptr
    torch.cuda.synchronize()
    # > 0: z was written before the side stream read x (the hazard was real); < 0: the GPU ran them in order.
    z_before_y_ms = z_end.elapsed_time(y_start)
    wrong = int((y != 2).sum().item())
    return {"mode": mode, "record": record, "reused_at_once": reused, "wrong_values": wrong,
            "z_written_ms_before_y_read": round(z_before_y_ms, 2),
            "host_ms_since_sleep_launch": {k: round(v, 2) for k, v in host_ms.items()},
            "side_done_when_z_allocated": side_done_when_z_allocated, "sleep_launch_ms": round(sleep_launch_ms, 3),
            "CUDA_DEVICE_MAX_CONNECTIONS": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS"),
            "CUDA_LAUNCH_BLOCKING": os.environ.get("CUDA_LAUNCH_BLOCKING")}


def stats_and_oom_case():
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import gmlake

    gmlake.torch.enable(conf="cap_bytes:1G", extension=True)
    a = torch.empty(300 << 20, dtype=torch.uint8, device="cuda")
    t = torch.cuda.memory_stats()
    g = gmlake.torch.memory_stats()
    out = {
        "torch_reserved": t.get("reserved_bytes.all.current"), "gmlake_reserved": g["reserved_bytes.all.current"],
        "torch_allocated": t.get("allocated_bytes.all.current"),
        "gmlake_allocated": g["allocated_bytes.all.current"],
        "memory_allocated": torch.cuda.memory_allocated(), "max_memory_reserved": torch.cuda.max_memory_reserved(),
    }
    try:
        torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
        out["oom"] = "none raised"
    except torch.OutOfMemoryError as e:
        out["oom"] = "OutOfMemoryError"
        out["oom_message"] = str(e).splitlines()[0][:160]
    b = torch.ones(100 << 20, dtype=torch.uint8, device="cuda")  # still usable after the OOM
    out["usable_after_oom"] = int(b.min().item()) == 1 and int(b.max().item()) == 1
    del a, b
    torch.cuda.empty_cache()
    out["reserved_after_empty_cache"] = torch.cuda.memory_reserved()
    return out


def run_case(*args):
    env = dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS=os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "32"))
    p = subprocess.run([sys.executable, __file__, "case", *args], capture_output=True, text=True, timeout=600,
                       env=env)
    if p.returncode != 0:
        raise RuntimeError(f"case {args} failed:\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "case":
        if sys.argv[2] == "stats":
            print(json.dumps(stats_and_oom_case()))
        else:
            print(json.dumps(record_stream_case(sys.argv[2], sys.argv[3] == "1")))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    failures = []
    rows = [run_case(mode, record) for mode in ("extension", "native", "pluggable") for record in ("1", "0")]
    for r in rows:
        print(json.dumps(r))
    ext = {r["record"]: r for r in rows if r["mode"] == "extension"}
    if ext[True]["wrong_values"] != 0:
        failures.append(f"extension with record_stream: {ext[True]['wrong_values']} wrong values")
    staged = all(not r["side_done_when_z_allocated"] for r in rows)
    if not staged:
        # Seen on the H200 lent here: launching work that depends on the sleeping stream blocked the host until
        # the sleep ended (host_ms_since_sleep_launch.launched ~51 ms), so the side stream was done before z was
        # even allocated and no allocator could get it wrong. Then the case proves nothing either way.
        print("SKIPPED the corruption check: the side stream had finished before z was allocated (the host was "
              "blocked at the launch), so the hazard could not be staged on this machine")
    elif ext[False]["wrong_values"] == 0:
        failures.append("extension without record_stream: no corruption seen, so the check above proves nothing")
    stats = run_case("stats")
    print(json.dumps(stats))
    if stats["torch_reserved"] != stats["gmlake_reserved"] or stats["torch_reserved"] < (300 << 20):
        failures.append("torch.cuda.memory_stats() does not report gmlake's reserved bytes")
    if stats["torch_allocated"] != stats["gmlake_allocated"] or stats["memory_allocated"] != stats["gmlake_allocated"]:
        failures.append("torch.cuda.memory_allocated() does not report gmlake's allocated bytes")
    if stats["oom"] != "OutOfMemoryError":
        failures.append(f"a request over the cap raised {stats['oom']}")
    if not stats["usable_after_oom"]:
        failures.append("allocator not usable after the OOM")
    if stats["reserved_after_empty_cache"] != 0:
        failures.append(f"torch.cuda.empty_cache left {stats['reserved_after_empty_cache']} bytes reserved")
    for f in failures:
        print("FAIL:", f)
    print("PASSED" if not failures else f"{len(failures)} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
