"""gmlake under PyTorch on a GPU (ctest label gpu): record_stream safety, torch.OutOfMemoryError, and
torch.cuda.memory_stats() reporting gmlake's pool, through the c10 allocator extension.

Each case runs in its own process (PyTorch's allocator can be chosen once per process):
  python3 tests/gpu/torch_allocator_test.py              # all cases, asserts, prints a table
  python3 tests/gpu/torch_allocator_test.py case MODE RECORD   # one case (MODE: extension|pluggable|native)

The record_stream case stages the hazard deterministically. x is allocated and filled with 1 on a main stream. A
side stream is held by cuStreamWaitValue32 on a flag in host-mapped memory, then computes y = 2x. The host frees
x at once (in main's order) and allocates z (x's size) on main, filled with 7, and waits until main has written z
while the side stream is still held. Only then does it release the flag. If the allocator handed x's memory to z,
the side stream reads 7s and y holds 14s. Tensor.record_stream(side) must prevent that. Without it the allocator
reuses x's memory at once: that row shows that the check can fail. No kernel is launched onto the held stream
before the release, and a watchdog thread releases the flag after WATCHDOG_S whatever happens, so the case
cannot hang. Kernels are loaded before the staging (see record_stream_case): with CUDA's lazy module loading, the
first launch of torch.mul behind the held stream blocked the host until the release, in every mode, native
PyTorch included, so no allocator could be caught.
"""

import ctypes
import json
import os
import subprocess
import sys
import threading
import time

N_FLOATS = 16 << 20  # 64 MiB
WATCHDOG_S = 20.0
Z_WAIT_S = 5.0
CU_STREAM_WAIT_VALUE_GEQ = 0x0
CU_MEMHOSTALLOC_DEVICEMAP = 0x2


def enable(mode):
    if mode == "native":
        return
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import gmlake

    gmlake.torch.enable(extension=(mode == "extension"))
    assert gmlake.torch.mode() == mode, gmlake.torch.mode()


class HostFlag:
    """A 32-bit word in pinned, device-mapped host memory that a stream can wait on (cuStreamWaitValue32)."""

    def __init__(self):
        cuda = ctypes.CDLL("libcuda.so.1")
        self._cuda = cuda
        self._host = ctypes.c_void_p()
        self._check(cuda.cuMemHostAlloc(ctypes.byref(self._host), ctypes.c_size_t(4),
                                        ctypes.c_uint(CU_MEMHOSTALLOC_DEVICEMAP)), "cuMemHostAlloc")
        self.word = ctypes.c_uint32.from_address(self._host.value)
        self.word.value = 0
        self.device_ptr = ctypes.c_uint64()
        self._check(cuda.cuMemHostGetDevicePointer_v2(ctypes.byref(self.device_ptr), self._host, ctypes.c_uint(0)),
                    "cuMemHostGetDevicePointer")
        wait = getattr(cuda, "cuStreamWaitValue32_v2", None) or cuda.cuStreamWaitValue32
        wait.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        self._wait = wait

    @staticmethod
    def _check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    def hold(self, stream):
        """Queues on `stream` a wait until the word is >= 1. Returns the CUresult (0: queued)."""
        return self._wait(ctypes.c_void_p(stream.cuda_stream), self.device_ptr.value, 1, CU_STREAM_WAIT_VALUE_GEQ)

    def release(self):
        self.word.value = 1


def record_stream_case(mode, record):
    import torch

    enable(mode)
    dev = torch.device("cuda")
    main = torch.cuda.Stream()
    side = torch.cuda.Stream()
    torch.cuda.synchronize()  # CUDA started, so the flag lands in the primary context
    flag = HostFlag()
    watchdog = threading.Timer(WATCHDOG_S, flag.release)
    watchdog.daemon = True
    # Every kernel the staged part launches runs once first. With CUDA's lazy module loading (the default since
    # CUDA 12.2) a kernel's first launch loads its module, which may wait for the whole device, so the host
    # blocked at the first torch.mul behind the held stream until the watchdog released it (seen on the H200).
    # run_case also sets CUDA_MODULE_LOADING=EAGER.
    warm = torch.full((1024,), 1.0, device=dev)
    torch.mul(warm, 2, out=torch.empty_like(warm))
    int((warm != 2).sum().item())
    del warm
    torch.cuda.synchronize()
    with torch.cuda.stream(main):
        x = torch.full((N_FLOATS,), 1.0, device=dev)
    side.wait_stream(main)
    with torch.cuda.stream(side):
        y = torch.empty_like(x)  # before the hold: an allocation may synchronize (cudaMalloc does, natively)
    t0 = time.perf_counter()
    watchdog.start()
    rc = flag.hold(side)
    if rc != 0:
        flag.release()
        watchdog.cancel()
        return {"mode": mode, "record": record, "staged": False, "why": f"cuStreamWaitValue32 returned {rc}"}
    with torch.cuda.stream(side):
        torch.mul(x, 2, out=y)  # queued behind the hold: reads x only after the release
    if record:
        x.record_stream(side)
    x_ptr = x.data_ptr()
    del x  # freed in main's order
    with torch.cuda.stream(main):
        z = torch.full((N_FLOATS,), 7.0, device=dev)
        z_written = torch.cuda.Event()
        z_written.record()
    reused = z.data_ptr() == x_ptr
    host_ms_to_z = (time.perf_counter() - t0) * 1e3
    deadline = time.perf_counter() + Z_WAIT_S
    while not z_written.query() and time.perf_counter() < deadline:
        time.sleep(0.001)
    z_done_while_held = z_written.query() and flag.word.value == 0 and not side.query()
    flag.release()
    watchdog.cancel()
    torch.cuda.synchronize()
    wrong = int((y != 2).sum().item())
    return {"mode": mode, "record": record, "staged": bool(z_done_while_held), "reused_at_once": reused,
            "wrong_values": wrong, "host_ms_to_z": round(host_ms_to_z, 2),
            "why": "" if z_done_while_held else "main's write of z did not finish while the side stream was held"}


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


def native_route_case():
    """gmlake.torch.native(): allocations inside come from PyTorch's allocator, each block goes back to its own
    allocator wherever it is freed, and gmlake's pool does not see them."""
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import gmlake

    gmlake.torch.enable(extension=True)
    mib = 1 << 20
    a = torch.ones(64 * mib, dtype=torch.uint8, device="cuda")  # gmlake
    with gmlake.torch.native():
        b = torch.full((32 * mib,), 3, dtype=torch.uint8, device="cuda")  # PyTorch's own
        side = torch.cuda.Stream()
        b.record_stream(side)  # reaches the native allocator, not gmlake
    c = torch.ones(16 * mib, dtype=torch.uint8, device="cuda")  # gmlake again
    out = {"gmlake_allocated": gmlake.torch.memory_stats()["allocated_bytes.all.current"],
           "native_allocated": gmlake.torch.native_memory_stats()["allocated_bytes.all.current"],
           "values_ok": int(a.sum().item()) == 64 * mib and int(b.sum().item()) == 96 * mib
           and int(c.sum().item()) == 16 * mib}
    del b  # freed outside the block: must return to PyTorch's allocator (once side's event, recorded now, is done)
    torch.cuda.empty_cache()  # PyTorch's allocator completes its pending record_stream frees here
    out["native_allocated_after_free"] = gmlake.torch.native_memory_stats()["allocated_bytes.all.current"]
    out["gmlake_allocated_after_free"] = gmlake.torch.memory_stats()["allocated_bytes.all.current"]
    out["native_reserved_after_empty_cache"] = gmlake.torch.native_memory_stats()["reserved_bytes.all.current"]
    del a, c
    return out


def run_case(*args):
    env = dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS=os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "32"),
               CUDA_MODULE_LOADING="EAGER")
    p = subprocess.run([sys.executable, __file__, "case", *args], capture_output=True, text=True, timeout=600,
                       env=env)
    if p.returncode != 0:
        raise RuntimeError(f"case {args} failed:\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "case":
        if sys.argv[2] == "stats":
            print(json.dumps(stats_and_oom_case()))
        elif sys.argv[2] == "native_route":
            print(json.dumps(native_route_case()))
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
    staged = all(r["staged"] for r in rows)
    if not staged:
        failures.append("the record_stream hazard could not be staged: "
                        + "; ".join(f"{r['mode']} record={r['record']}: {r['why']}" for r in rows if not r["staged"]))
    else:
        by = {(r["mode"], r["record"]): r for r in rows}
        if by[("extension", True)]["wrong_values"] != 0:
            failures.append(f"extension with record_stream: {by[('extension', True)]['wrong_values']} wrong values")
        if by[("extension", True)]["reused_at_once"]:
            failures.append("extension with record_stream handed the recorded block to z at once")
        if by[("extension", False)]["wrong_values"] == 0:
            failures.append("extension without record_stream: no corruption seen, so the check above proves nothing")
        if by[("native", True)]["wrong_values"] != 0:
            failures.append("PyTorch native with record_stream gave wrong values: the staging itself is wrong")
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
    route = run_case("native_route")
    print(json.dumps(route))
    mib = 1 << 20
    if not route["values_ok"]:
        failures.append("native(): wrong values")
    if route["gmlake_allocated"] != 80 * mib or route["native_allocated"] != 32 * mib:
        failures.append("native(): the blocks did not land in the allocators they were routed to")
    if route["native_allocated_after_free"] != 0 or route["gmlake_allocated_after_free"] != 80 * mib:
        failures.append("native(): a block routed to PyTorch's allocator did not go back to it")
    if route["native_reserved_after_empty_cache"] != 0:
        failures.append("native(): torch.cuda.empty_cache() left PyTorch's allocator holding memory")
    for f in failures:
        print("FAIL:", f)
    print("PASSED" if not failures else f"{len(failures)} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
