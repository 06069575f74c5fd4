"""The Python package's binding to libgmlake_c.so, on the host backend (no PyTorch, no GPU): calls go through,
statistics come back under PyTorch's key names, and errors surface as GmlakeError. Run by ctest (label cpu)
with GMLAKE_LIBRARY and PYTHONPATH set."""

import sys

import gmlake
from gmlake import torch as gt

MiB = 1 << 20


def main():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    try:
        gt.configure("backend:nosuch")
        failures.append("a bad backend was accepted")
    except gt.GmlakeError as e:
        check("backend" in str(e), f"the error does not name the key: {e}")

    gt.configure("backend:host")
    lib = gt.library()
    p = lib.gmlake_malloc(3 * MiB, 0, 0)
    check(p is not None and p % 512 == 0, f"malloc returned {p}")
    s = gt.memory_stats(0)
    check(s["allocated_bytes.all.current"] == 3 * MiB, f"allocated {s['allocated_bytes.all.current']}")
    check(s["requested_bytes.all.current"] == 3 * MiB, "requested bytes")
    check(s["reserved_bytes.all.current"] >= 3 * MiB, "reserved bytes")
    check(s["gmlake.num_allocs"] == 1, "num_allocs")
    check(gt.max_memory_reserved(0) >= 3 * MiB, "max_memory_reserved")
    lib.gmlake_free(p, 3 * MiB, 0, 0)
    check(gt.memory_allocated(0) == 0, "allocated after free")
    check(gt.max_memory_allocated(0) == 3 * MiB, "peak allocated after free")
    lib.gmlake_free(p, 3 * MiB, 0, 0)  # double free: rejected and counted, nothing else changes
    check(b"not a live block" in lib.gmlake_last_error() or lib.gmlake_last_error() != b"", "double free error")
    check(gt.memory_stats(0)["gmlake.invalid_frees"] == 1, "invalid_frees")
    gt.reset_peak_memory_stats(0)
    check(gt.max_memory_allocated(0) == 0, "reset_peak_memory_stats")
    gt.empty_cache(0)
    check(gt.memory_reserved(0) == 0, f"reserved after empty_cache {gt.memory_reserved(0)}")
    check("reserved_bytes" in gt.memory_summary(0), "memory_summary")
    check(gmlake.__version__ == "0.1.0", "version")
    try:
        gt.memory_stats(999)
        failures.append("a bad device id was accepted")
    except gt.GmlakeError as e:
        check("device" in str(e), f"the error does not name the device: {e}")

    for f in failures:
        print("FAILED:", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
