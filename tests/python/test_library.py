"""The Python package's binding (python/gmlake/_library.py) is made from the library's own tables, on the host
backend (no PyTorch, no GPU): every function of the C table has its ctypes signature, the table lists every
function gmlake.h declares and libgmlake_c.so exports, statuses carry the library's names, the device limit comes
from the library, and the stat keys of gmlake.torch.memory_stats() are those the PyTorch extension reports. Run
by ctest (label cpu) with GMLAKE_LIBRARY, PYTHONPATH and GMLAKE_SOURCE_DIR set."""

import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import sys

sys.modules["torch"] = None  # as without PyTorch: `import torch` raises ImportError (the calls below need none)

from gmlake import _library  # noqa: E402
from gmlake import torch as gt  # noqa: E402

SOURCE = pathlib.Path(os.environ["GMLAKE_SOURCE_DIR"])
HEADER = (SOURCE / "include" / "gmlake" / "gmlake.h").read_text()


def declared_functions():
    """The functions gmlake.h declares (its prototypes), in order."""
    return re.findall(r"^(?:const )?(?:int|void|char|uint64_t)\s*\*?\s*(gmlake_\w+)\(", HEADER, re.MULTILINE)


def exported_functions():
    """The gmlake_* functions libgmlake_c.so exports, or None where nm is missing."""
    nm = shutil.which("nm")
    if nm is None:
        return None
    out = subprocess.run([nm, "-D", "--defined-only", _library.library_path()], check=True, capture_output=True,
                         text=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if re.search(r" T gmlake_\w+$", line))


def main():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    lib = gt.library()
    table = gt.c_api_table()
    names = [name for name, _, _ in table]
    check(len(names) == len(set(names)), "a function listed twice")
    check(names == declared_functions(), f"GMLAKE_C_API and gmlake.h's declarations differ: "
          f"{sorted(set(names) ^ set(declared_functions()))}")
    exported = exported_functions()
    check(exported is None or exported == sorted(names), f"exported but not listed, or listed but not exported: "
          f"{sorted(set(exported or []) ^ set(names))}")
    for name, restype, argtypes in table:
        function = getattr(lib, name)
        check(function.restype is _library._C_TYPES[restype], f"{name} returns {function.restype}, not {restype}")
        check(function.argtypes == [_library._C_TYPES[t] for t in argtypes], f"{name} argtypes {function.argtypes}")
    check(lib.gmlake_malloc.restype is ctypes.c_void_p, "gmlake_malloc returns a pointer")
    check(lib.gmlake_pool_create.argtypes == [ctypes.c_int32, gt.PoolId], "gmlake_pool_create takes the struct")

    # Calls through functions the binding had no hand-written signature for before: private pools.
    gt.configure("backend:host")
    pool = gt.PoolId(0, 5)
    check(lib.gmlake_pool_create(0, pool) == 0, f"gmlake_pool_create: {lib.gmlake_last_error()}")
    count = ctypes.c_int64(-1)
    check(lib.gmlake_pool_use_count(0, pool, ctypes.byref(count)) == 0 and count.value == 1, "use count 1")
    p = lib.gmlake_pool_malloc(1 << 20, 0, 0, pool)
    check(p is not None and p % 512 == 0, f"gmlake_pool_malloc returned {p}")
    gt.free(p, 0)
    check(lib.gmlake_pool_release(0, pool) == 0, "gmlake_pool_release")

    # The device limit and the statuses come from the library.
    limit = int(re.search(r"#define GMLAKE_MAX_DEVICES (\d+)", HEADER).group(1))
    check(gt.max_devices() == limit and gt.MAX_DEVICES == limit, f"max devices {gt.max_devices()}, header {limit}")
    try:
        gt.memory_stats(limit)
        failures.append("the device limit was not enforced")
    except gt.GmlakeError as e:
        check(str(limit - 1) in str(e), f"the limit's message: {e}")
    statuses = re.findall(r"X\((GMLAKE_\w+), (\d+), \"", HEADER)
    check(len(statuses) >= 9, f"statuses parsed from gmlake.h: {statuses}")
    for name, value in statuses:
        check(lib.gmlake_status_name(int(value)).decode() == name, f"status {value} is not named {name}")
    try:
        gt.free(12345, 0)
        failures.append("freeing a pointer never returned raised nothing")
    except gt.GmlakeError as e:
        check(e.status == 2 and e.status_name == "GMLAKE_ERROR_INVALID_POINTER", f"{e.status} {e.status_name}")
    try:
        gt.configure("backend:host")
        failures.append("a second configure raised nothing")
    except gt.GmlakeError as e:
        check(e.status_name == "GMLAKE_ERROR_ALREADY_INITIALIZED", f"second init: {e.status_name}")

    # The stat table: its names are gmlake_stats' fields (gmlake_stat_names, the same table), and the keys of
    # gmlake.torch.memory_stats() include every PyTorch key the extension's getDeviceStats sets, which in turn
    # knows every PyTorch key of the table.
    rows = gt.stat_table()
    gauges, counters = gt.stat_names()
    check([r["name"] for r in rows] == gauges + counters, "stat_names and stat_table disagree")
    old_form = lib.gmlake_stat_names().decode().split(",")
    check(old_form == [f"{r['name']}:{r['kind']}" for r in rows], "gmlake_stat_names is not the stat table")
    extension = (SOURCE / "python" / "gmlake" / "csrc" / "torch_allocator.cpp").read_text()
    known = set(re.findall(r'key == "([^"]+)"', extension))
    torch_keys = [r["torch_key"] for r in rows if r["torch_key"]]
    check(torch_keys and set(torch_keys) <= known, f"keys the extension does not set: {set(torch_keys) - known}")
    block = gt.malloc(3 << 20, 0)
    stats = gt.memory_stats(0)
    for r in rows:
        if r["kind"] == "gauge" and r["torch_key"]:
            check(f"{r['torch_key']}.current" in stats and f"{r['torch_key']}.peak" in stats, r["torch_key"])
        elif r["torch_key"]:
            check(stats.get(r["torch_key"]) == stats[f"gmlake.{r['name']}"], f"{r['torch_key']} != {r['name']}")
    check(stats["allocated_bytes.all.current"] == 3 << 20, "allocated bytes under PyTorch's key")
    check(stats["allocation.all.current"] == 1, f"allocation.all.current {stats['allocation.all.current']}")
    check("peer_reserved_bytes.all.current" in stats, "a gauge PyTorch has no key for is still reported")
    gt.free(block, 0)
    lib.gmlake_shutdown()

    for f in failures:
        print("FAILED:", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
