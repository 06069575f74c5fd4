"""The Python package's binding to libgmlake_c.so, on the host backend (no PyTorch, no GPU): calls go through,
statistics come back under PyTorch's key names, and errors surface as GmlakeError. Run by ctest (label cpu)
with GMLAKE_LIBRARY and PYTHONPATH set."""

import ctypes
import os
import sys

sys.modules["torch"] = None  # as without PyTorch: `import torch` raises ImportError (the calls below need none)

import gmlake  # noqa: E402
from gmlake import torch as gt  # noqa: E402

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

    # Every C function has its C types: record_stream takes (void*, int, uint64), ignored_frees
    # returns a 64-bit count.
    for name in ("gmlake_init", "gmlake_malloc", "gmlake_free", "gmlake_record_stream", "gmlake_empty_cache",
                 "gmlake_get_stats", "gmlake_reset_peak_stats", "gmlake_shutdown", "gmlake_get_backend_time",
                 "gmlake_ignored_frees", "gmlake_stat_names", "gmlake_config_table", "gmlake_last_error_code",
                 "gmlake_last_error"):
        check(getattr(lib, name).argtypes is not None, f"{name} has no argtypes")
    check(lib.gmlake_record_stream.argtypes == [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64],
          "gmlake_record_stream argtypes")
    check(lib.gmlake_ignored_frees.restype is ctypes.c_uint64, "gmlake_ignored_frees returns a C int")
    check(gt.ignored_frees() == 0, "ignored_frees")
    q = gt.malloc(MiB, 0)
    gt.record_stream(q, 7, 0)
    gt.free(q, 0)
    try:
        gt.free(q, 0)
        failures.append("a double free through gt.free raised nothing")
    except gt.GmlakeError as e:
        check("live block" in str(e), f"double free message: {e}")

    # Device ids out of range are refused, never wrapped (2^32 was device 0 through ctypes' c_int).
    for bad in (2**32, -1, 64, 2**31):
        try:
            gt.memory_stats(bad)
            failures.append(f"device {bad} was accepted")
        except gt.GmlakeError as e:
            check("out of range" in str(e), f"device {bad}: {e}")
    check(gt.memory_allocated("cuda:0") == 0, "device 'cuda:0'")

    # configure(): a str only, without NUL; clear errors for the rest.
    for bad, error in ((None, TypeError), (b"backend:host", TypeError), ("backend:host\0,cap_bytes:1", ValueError)):
        try:
            gt.configure(bad)
            failures.append(f"configure({bad!r}) was accepted")
        except error as e:
            check("configuration" in str(e), f"configure({bad!r}): {e}")

    # Without PyTorch: the calls on gmlake's own pools work (device None is device 0), enable() says why not.
    check(gt.memory_reserved() == gt.memory_reserved(0), "memory_reserved() without torch")
    gt.reset_peak_memory_stats()
    gt.empty_cache()
    try:
        gt.enable()
        failures.append("enable() without PyTorch raised nothing")
    except gt.GmlakeError as e:
        check("needs PyTorch" in str(e), f"enable() without torch: {e}")

    # The stats and the config keys cross from the library (one table each, in C++), not from lists copied here.
    gauges, counters = gt.stat_names()
    check(gauges[:2] == ["allocated_bytes", "reserved_bytes"] and "stitches" in counters, f"stat names {gauges}")
    check(ctypes.sizeof(gt._stats_struct()) == 16 * len(gauges) + 8 * len(counters), "stats struct size")
    keys = [row["name"] for row in gt.config_table()]
    check(keys[:3] == ["policy", "backend", "debug"] and "cap_bytes" in keys and "page_bytes" in keys,
          f"config keys {keys[:4]}")
    check(all(row["description"] for row in gt.config_table()), "a config key without a description")

    # gmlake_init_defaults (what enable(None) uses): the defaults, then GMLAKE_CONF on top, read by the library.
    lib.gmlake_shutdown()
    os.environ["GMLAKE_CONF"] = "cap_bytes:8M"
    check(lib.gmlake_init_defaults(b"backend:host,cap_bytes:64M") == 0, "gmlake_init_defaults")
    try:
        gt.free(gt.malloc(16 * MiB, 0), 0)
        failures.append("GMLAKE_CONF's cap did not apply over the defaults")
    except gt.GmlakeError as e:
        check("cap" in str(e), f"out of memory under GMLAKE_CONF's cap: {e}")
    del os.environ["GMLAKE_CONF"]
    lib.gmlake_shutdown()

    for f in failures:
        print("FAILED:", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
