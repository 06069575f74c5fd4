"""gmlake as PyTorch's CUDA allocator, through torch.cuda.memory.CUDAPluggableAllocator (no PyTorch rebuild).

    import gmlake
    gmlake.torch.enable()          # before the first CUDA allocation
    ...
    gmlake.torch.memory_stats()    # the keys of torch.cuda.memory_stats() that gmlake tracks

The shared library (libgmlake_c.so, built by CMake) is found through the GMLAKE_LIBRARY environment variable,
then this package's lib/ folder, then the repository's build/ folder. Configuration: `conf` (or GMLAKE_CONF),
in PyTorch's "key:value,key:value" form; `gmlake conf` lists the keys.
"""

import ctypes
import os
import pathlib

_lib = None
_allocator = None

# gmlake stats (include/gmlake/stats.h) -> torch.cuda.memory_stats() names
_GAUGES = ["allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes", "inactive_split_bytes"]
_COUNTERS = ["num_alloc_retries", "num_ooms"]
_GMLAKE_COUNTERS = ["stitches", "stitched_chunks", "stitch_reuses", "evictions", "fence_waits", "chunks_created",
                    "chunks_released", "invalid_frees"]


class GmlakeError(RuntimeError):
    """An error reported by the gmlake library."""


def library_path():
    """The path of the gmlake shared library this package would load."""
    candidates = []
    if os.environ.get("GMLAKE_LIBRARY"):
        candidates.append(pathlib.Path(os.environ["GMLAKE_LIBRARY"]))
    here = pathlib.Path(__file__).resolve().parent
    candidates.append(here / "lib" / "libgmlake_c.so")
    candidates.append(here.parent.parent / "build" / "libgmlake_c.so")
    for c in candidates:
        if c.is_file():
            return str(c)
    raise GmlakeError("libgmlake_c.so not found: build it (scripts/build.sh) and set GMLAKE_LIBRARY; looked in "
                      + ", ".join(str(c) for c in candidates))


def _load():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(library_path())
        lib.gmlake_configure.argtypes = [ctypes.c_char_p]
        lib.gmlake_configure.restype = ctypes.c_int
        lib.gmlake_last_error.restype = ctypes.c_char_p
        lib.gmlake_empty_cache.argtypes = [ctypes.c_int]
        lib.gmlake_empty_cache.restype = ctypes.c_int
        lib.gmlake_reset_peak_stats.argtypes = [ctypes.c_int]
        lib.gmlake_reset_peak_stats.restype = ctypes.c_int
        lib.gmlake_get_stat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64),
                                        ctypes.POINTER(ctypes.c_int64)]
        lib.gmlake_get_stat.restype = ctypes.c_int
        _lib = lib
    return _lib


def _check(rc):
    if rc != 0:
        raise GmlakeError(_load().gmlake_last_error().decode())


def enable(conf=None):
    """Makes gmlake PyTorch's CUDA allocator. Call before any CUDA memory is allocated.

    conf: "key:value,..." (GMLAKE_CONF form); None reads GMLAKE_CONF. Raises GmlakeError for a bad config or
    when PyTorch has already allocated CUDA memory (the allocator cannot be swapped then).
    """
    global _allocator
    import torch

    if _allocator is not None:
        return
    if torch.cuda.is_initialized() and torch.cuda.memory_reserved() > 0:
        raise GmlakeError("gmlake.torch.enable() must run before the first CUDA allocation: PyTorch already "
                          f"holds {torch.cuda.memory_reserved()} bytes")
    text = conf if conf is not None else os.environ.get("GMLAKE_CONF", "")
    _check(_load().gmlake_configure(text.encode()))
    allocator = torch.cuda.memory.CUDAPluggableAllocator(library_path(), "gmlake_malloc", "gmlake_free")
    try:
        torch.cuda.memory.change_current_allocator(allocator)
    except RuntimeError as e:
        raise GmlakeError(f"PyTorch refused the allocator: {e}") from e
    _allocator = allocator


def _device(device):
    import torch

    if device is None:
        return torch.cuda.current_device()
    return torch.device(device).index if not isinstance(device, int) else device


def _stat(device, name):
    cur, peak = ctypes.c_int64(), ctypes.c_int64()
    _check(_load().gmlake_get_stat(device, name.encode(), ctypes.byref(cur), ctypes.byref(peak)))
    return cur.value, peak.value


def memory_stats(device=None):
    """gmlake's statistics with the keys of torch.cuda.memory_stats() ("reserved_bytes.all.peak", ...) for
    what gmlake tracks, plus "gmlake.<counter>" for its own counters."""
    d = _device(device)
    out = {}
    for g in _GAUGES:
        cur, peak = _stat(d, g)
        out[f"{g}.all.current"], out[f"{g}.all.peak"] = cur, peak
    for c in _COUNTERS:
        out[c] = _stat(d, c)[0]
    for c in _GMLAKE_COUNTERS:
        out[f"gmlake.{c}"] = _stat(d, c)[0]
    return out


def max_memory_reserved(device=None):
    return _stat(_device(device), "reserved_bytes")[1]


def max_memory_allocated(device=None):
    return _stat(_device(device), "allocated_bytes")[1]


def memory_reserved(device=None):
    return _stat(_device(device), "reserved_bytes")[0]


def memory_allocated(device=None):
    return _stat(_device(device), "allocated_bytes")[0]


def reset_peak_memory_stats(device=None):
    _check(_load().gmlake_reset_peak_stats(_device(device)))


def empty_cache(device=None):
    """Returns free physical chunks to the device (waits for queued work that could still touch them)."""
    _check(_load().gmlake_empty_cache(_device(device)))


def memory_summary(device=None):
    s = memory_stats(device)
    gb = 1e9
    lines = [f"gmlake memory summary (device {_device(device)})"]
    for g in _GAUGES:
        lines.append(f"  {g:<22} current {s[g + '.all.current'] / gb:9.3f} GB   peak {s[g + '.all.peak'] / gb:9.3f} GB")
    for c in _COUNTERS:
        lines.append(f"  {c:<22} {s[c]}")
    for c in _GMLAKE_COUNTERS:
        lines.append(f"  {c:<22} {s['gmlake.' + c]}")
    return "\n".join(lines)
