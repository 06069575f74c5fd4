"""gmlake as PyTorch's CUDA allocator, with no PyTorch rebuild: through a small c10 allocator extension compiled
against the installed torch (record_stream, torch.cuda.memory_stats, OutOfMemoryError), or through
torch.cuda.memory.CUDAPluggableAllocator when no compiler is at hand (see enable()).

    import gmlake
    gmlake.torch.enable()          # before the first CUDA allocation
    ...
    gmlake.torch.memory_stats()    # the keys of torch.cuda.memory_stats() that gmlake tracks

The shared library (libgmlake_c.so, built by CMake) is found through the GMLAKE_LIBRARY environment variable,
then this package's lib/ folder, then the repository's build/ folder. Configuration: `conf` (or GMLAKE_CONF),
in PyTorch's "key:value,key:value" form; `gmlake conf` lists the keys.
"""

import contextlib
import ctypes
import warnings

# Finding and binding libgmlake_c.so lives in _library.py; its public names are re-exported here.
from ._library import GmlakeError, PoolId, library, library_path, max_devices  # noqa: F401
from ._library import c_api_table, config_table, stat_names, stat_table  # noqa: F401
from ._library import _check, _load, _stats_struct

_allocator = None
_mode = None


def __getattr__(name):  # MAX_DEVICES, from the library when first asked (importing gmlake loads nothing)
    if name == "MAX_DEVICES":
        return max_devices()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def configure(conf):
    """Initializes the C API with a GMLAKE_CONF-form string (gmlake_init). Raises TypeError when conf is not a
    str (None included: pass os.environ.get("GMLAKE_CONF", "") to use the environment), ValueError when it
    holds a NUL character (C would silently drop what follows), GmlakeError on a bad key or value, or when
    gmlake was initialized already."""
    if not isinstance(conf, str):
        raise TypeError(f"gmlake configuration must be a str of key:value pairs, not {type(conf).__name__}")
    if "\0" in conf:
        raise ValueError("gmlake configuration must not contain a NUL character")
    _check(_load().gmlake_init(conf.encode()))


def enable(conf=None, extension=True):
    """Makes gmlake PyTorch's CUDA allocator. Call before any CUDA memory is allocated, and before
    torch.cuda.set_device (which initializes PyTorch's allocator already: seen with PyTorch 2.11 under torchrun).

    conf: "key:value,..." (GMLAKE_CONF form); None reads GMLAKE_CONF.
    extension: how gmlake plugs in.
      True (default): the c10 allocator extension (gmlake/csrc/torch_allocator.cpp; compiled by `pip install .`
        when torch was importable then, else once on first use by torch.utils.cpp_extension, and cached):
        Tensor.record_stream is honoured, torch.cuda.memory_stats() and friends report gmlake's pool, out of
        memory raises torch.OutOfMemoryError, and the per-allocation cost is lower. When it cannot be had,
        raises GmlakeError saying why and how to fix it: nothing falls back silently.
      False: torch.cuda.memory.CUDAPluggableAllocator over the C library through ctypes, only when asked for;
        nothing to compile, but record_stream never reaches gmlake (a tensor used on a second stream may be
        reused too early: synchronize instead), torch.cuda.memory_stats() is empty (use
        gmlake.torch.memory_stats()), and PyTorch 2.11 raises no OutOfMemoryError when gmlake is out of memory.
    Raises GmlakeError for a bad config or when PyTorch has already allocated CUDA memory (the allocator cannot
    be swapped then).
    """
    global _allocator, _mode
    torch = _import_torch("enable()")

    if _allocator is not None:
        return
    if torch.cuda.is_initialized() and torch.cuda.memory_reserved() > 0:
        raise GmlakeError("gmlake.torch.enable() must run before the first CUDA allocation: PyTorch already "
                          f"holds {torch.cuda.memory_reserved()} bytes")
    if extension not in (True, False):
        raise ValueError(f"extension must be True or False, not {extension!r}")
    module = None
    if extension:
        from . import _extension

        try:
            module = _extension.build_extension()
        except Exception as e:  # noqa: BLE001 (a failed build is reported, whatever raised it)
            raise GmlakeError(
                f"gmlake's allocator extension could not be built against torch {torch.__version__}: {e}. It needs "
                "a C++ compiler, ninja and the CUDA toolkit's headers (CUDA_HOME), or a `pip install .` of gmlake "
                "made where torch was importable; enable(extension=False) uses CUDAPluggableAllocator instead, "
                "which does not honour Tensor.record_stream") from e
    if conf is None:  # backend:cuda, then GMLAKE_CONF on top, which the library reads
        _check(_load().gmlake_init_defaults(b"backend:cuda"))
    else:
        configure("backend:cuda" + ("," + conf if conf else ""))
    try:
        if module is not None:
            module.install(library_path())
            _allocator, _mode = module, "extension"
        else:
            allocator = torch.cuda.memory.CUDAPluggableAllocator(library_path(), "gmlake_malloc", "gmlake_free")
            torch.cuda.memory.change_current_allocator(allocator)
            _allocator, _mode = allocator, "pluggable"
    except RuntimeError as e:
        raise GmlakeError(f"PyTorch refused the allocator: {e}") from e


def mode():
    """How gmlake is plugged in: "extension", "pluggable", or None before enable()."""
    return _mode


def _require_extension(what):
    if _mode != "extension":
        raise GmlakeError(f"gmlake.torch.{what} needs the allocator extension: enable(extension=True)")


@contextlib.contextmanager
def native():
    """Inside this block, CUDA allocations come from PyTorch's own caching allocator instead of gmlake; each block
    is freed later into the allocator that made it, wherever that happens. For code paths gmlake does not serve
    yet, and for timing both allocators step by step in one process (bench/torch/train.py --alloc ab).

    The switch is process-wide, not per thread (autograd runs backward on threads of its own): allocations made
    by other threads meanwhile go to PyTorch's allocator too. Blocks may nest. Needs enable(extension=True) (the
    ctypes path cannot reach PyTorch's allocator); raises GmlakeError otherwise. torch.cuda.memory_stats() keeps
    reporting gmlake's pool; native_memory_stats() reports the other.
    """
    _require_extension("native()")
    before = _allocator.route_to_native(True)
    try:
        yield
    finally:
        _allocator.route_to_native(before)


def native_memory_stats(device=None):
    """PyTorch's own allocator's reserved and allocated bytes ("reserved_bytes.all.peak", ...) for what was
    allocated inside native(); zeros when nothing was. Needs enable(extension=True)."""
    _require_extension("native_memory_stats()")
    return dict(_allocator.native_memory_stats(_device(device)))


def _import_torch(what):
    try:
        import torch
    except ImportError as e:
        raise GmlakeError(f"gmlake.torch.{what} needs PyTorch, which is not installed ({e})") from e
    return torch


def _device(device):
    """The device id for a call: an int in 0 .. max_devices() - 1 as it is (anything else raises GmlakeError, never
    wrapped into range), "cuda:N" or a torch.device, None for the current CUDA device (device 0 when PyTorch is
    not installed or CUDA not initialized: the C API's pools need no PyTorch)."""
    if device is None:
        try:
            import torch
        except ImportError:
            return 0
        return torch.cuda.current_device() if torch.cuda.is_initialized() else 0
    if isinstance(device, str):
        kind, _, index = device.partition(":")
        if kind != "cuda" or (index and not index.isdigit()):
            raise GmlakeError(f"bad device {device!r}: expected an int, 'cuda' or 'cuda:N'")
        device = int(index) if index else _device(None)
    elif not isinstance(device, int) or isinstance(device, bool):
        index = getattr(device, "index", None)  # a torch.device
        if getattr(device, "type", None) != "cuda":
            raise GmlakeError(f"bad device {device!r}: expected an int, 'cuda:N' or a CUDA torch.device")
        device = _device(None) if index is None else index
    if not 0 <= device < max_devices():
        raise GmlakeError(f"device id {device} out of range: expected 0 .. {max_devices() - 1}")
    return device


def malloc(size_bytes, device=None, stream=0):
    """gmlake_malloc: the address of a block of at least size_bytes on `device` (an int), or raises GmlakeError.
    0 bytes gives 0 (None from ctypes), as the C API."""
    if not 0 <= size_bytes < 1 << 63:
        raise GmlakeError(f"size {size_bytes} out of range: expected 0 .. 2^63 - 1")
    lib = _load()
    p = lib.gmlake_malloc(size_bytes, _device(device), _stream(stream))
    if p is None and size_bytes != 0:
        _check(lib.gmlake_last_error_code())
    return p or 0


def free(ptr, device=None, stream=0):
    """gmlake_free of a block malloc returned; raises GmlakeError when the C API reports an error."""
    lib = _load()
    lib.gmlake_free(ptr, 0, _device(device), _stream(stream))
    _check(lib.gmlake_last_error_code())


def record_stream(ptr, stream, device=None):
    """gmlake_record_stream (Tensor.record_stream for a raw block)."""
    _check(_load().gmlake_record_stream(ptr, _device(device), _stream(stream)))


def ignored_frees():
    """gmlake_ignored_frees: frees ignored after gmlake_shutdown, as a 64-bit count."""
    return _load().gmlake_ignored_frees()


def _stream(stream):
    if not isinstance(stream, int) or isinstance(stream, bool) or not 0 <= stream < 1 << 64:
        raise GmlakeError(f"bad stream {stream!r}: expected an int in 0 .. 2^64 - 1 (a cudaStream_t's value)")
    return stream


def _stats(device):
    out = _stats_struct()
    _check(_load().gmlake_get_stats(device, ctypes.byref(out)))
    return out


def memory_stats(device=None):
    """gmlake's statistics under the keys torch.cuda.memory_stats() gives them when the extension is PyTorch's
    allocator (the stat table's torch_key: "reserved_bytes.all.peak", "num_device_alloc", ...;
    gmlake.torch.stat_table()), the gauges PyTorch has no key for as "<name>.all.current" and "<name>.all.peak",
    "allocation.all.current" (allocations not freed, as the extension's getDeviceStats reports it), and
    "gmlake.<counter>" for all its counters."""
    s = _stats(_device(device))
    out = {}
    for row in stat_table():
        name, torch_key = row["name"], row["torch_key"]
        if row["kind"] == "gauge":
            gauge, key = getattr(s, name), torch_key or f"{name}.all"
            out[f"{key}.current"], out[f"{key}.peak"] = gauge.current, gauge.peak
        else:
            out[f"gmlake.{name}"] = getattr(s, name)
            if torch_key:
                out[torch_key] = getattr(s, name)
    out["allocation.all.current"] = out["allocation.all.allocated"] - out["allocation.all.freed"]
    calls, time_ns = ctypes.c_uint64(), ctypes.c_uint64()
    _check(_load().gmlake_get_backend_time(_device(device), ctypes.byref(calls), ctypes.byref(time_ns)))
    out["gmlake.backend_calls"], out["gmlake.backend_time_ns"] = calls.value, time_ns.value
    return out


def max_memory_reserved(device=None):
    return _stats(_device(device)).reserved_bytes.peak


def max_memory_allocated(device=None):
    return _stats(_device(device)).allocated_bytes.peak


def memory_reserved(device=None):
    return _stats(_device(device)).reserved_bytes.current


def memory_allocated(device=None):
    return _stats(_device(device)).allocated_bytes.current


def reset_peak_memory_stats(device=None):
    _check(_load().gmlake_reset_peak_stats(_device(device)))


def empty_cache(device=None):
    """Returns free physical chunks to the device (waits for queued work that could still touch them)."""
    _check(_load().gmlake_empty_cache(_device(device)))


def memory_summary(device=None):
    s = memory_stats(device)
    gb = 1e9
    lines = [f"gmlake memory summary (device {_device(device)})"]
    gauges, counters = stat_names()
    for g in gauges:
        lines.append(f"  {g:<22} current {s[g + '.all.current'] / gb:9.3f} GB   peak {s[g + '.all.peak'] / gb:9.3f} GB")
    for c in counters:
        lines.append(f"  {c:<22} {s['gmlake.' + c]}")
    return "\n".join(lines)
