"""Finding and binding libgmlake_c.so: the library's path, its C API's ctypes signatures
(include/gmlake/gmlake.h), the stats struct, and errors. No torch here: the package's modules all import from
this one, and it imports none of them.

The shared library is found through the GMLAKE_LIBRARY environment variable, then this package's lib/ folder,
then the repository's build/ folder.
"""

import ctypes
import os
import pathlib

_lib = None

_TORCH_COUNTERS = ["num_alloc_retries", "num_ooms"]  # the counters torch.cuda.memory_stats() also has (PyTorch's)


class _Gauge(ctypes.Structure):
    _fields_ = [("current", ctypes.c_int64), ("peak", ctypes.c_int64)]


_stat_layout = None


def stat_names():
    """(gauges, counters): the names of gmlake's statistics, in gmlake_stats' order, as the loaded library
    declares them (gmlake_stat_names; include/gmlake/stats.h): nothing is copied here."""
    global _stat_layout
    if _stat_layout is None:
        gauges, counters = [], []
        for entry in _load().gmlake_stat_names().decode().split(","):
            name, kind = entry.split(":")
            (gauges if kind == "gauge" else counters).append(name)
        fields = [(g, _Gauge) for g in gauges] + [(c, ctypes.c_uint64) for c in counters]
        stats_type = type("_Stats", (ctypes.Structure,), {"_fields_": fields})
        _stat_layout = (gauges, counters, stats_type)
    return _stat_layout[0], _stat_layout[1]


def _stats_struct():
    """A zeroed gmlake_stats, laid out from the library's own field names."""
    stat_names()
    return _stat_layout[2]()


def config_table():
    """The configuration table (include/gmlake/config.h, gmlake_config_table): a list of dicts with name, type,
    default, unit and description, in table order."""
    rows = []
    for line in _load().gmlake_config_table().decode().splitlines():
        name, type_, default, unit, description = line.split("\t")
        rows.append({"name": name, "type": type_, "default": default, "unit": unit, "description": description})
    return rows


# Device ids the C API accepts: 0 .. GMLAKE_MAX_DEVICES - 1 (include/gmlake/gmlake.h).
MAX_DEVICES = 64


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


def _preload_shipped_libraries(path):
    """Loads the shared libraries a wheel ships beside libgmlake_c.so (fmt, abseil: python/build_backend) first,
    process-wide: its RUNPATH ($ORIGIN) finds its own direct needs, but not theirs (abseil's libraries need each
    other), and the loader matches a need against libraries loaded already by name. Nothing to do for a library
    in a build folder, whose needs the system has."""
    folder = pathlib.Path(path).parent
    pending = [p for p in sorted(folder.glob("lib*.so*")) if p.name != "libgmlake_c.so" and
               not p.name.startswith("gmlake_torch_allocator")]
    while pending:  # in dependency order, found by retrying: a library loads once what it needs is loaded
        failed = []
        for p in pending:
            try:
                ctypes.CDLL(str(p), mode=ctypes.RTLD_GLOBAL)
            except OSError:
                failed.append(p)
        if len(failed) == len(pending):
            return  # what is left fails on its own: loading libgmlake_c.so reports it
        pending = failed


def _load():
    global _lib
    if _lib is None:
        if (pathlib.Path(__file__).resolve().parent / "lib") == pathlib.Path(library_path()).resolve().parent:
            _preload_shipped_libraries(library_path())
        lib = ctypes.CDLL(library_path())
        # Every function of include/gmlake/gmlake.h, with its C types: without them ctypes would pass and return
        # a C int (a 64-bit count truncated, a pointer or a stream id cut to 32 bits).
        c_int, c_size_t, c_uint64, c_void_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_void_p
        signatures = {
            "gmlake_init": ([ctypes.c_char_p], c_int),
            "gmlake_init_defaults": ([ctypes.c_char_p], c_int),
            "gmlake_malloc": ([c_size_t, c_int, c_uint64], c_void_p),
            "gmlake_free": ([c_void_p, c_size_t, c_int, c_uint64], None),
            "gmlake_record_stream": ([c_void_p, c_int, c_uint64], c_int),
            "gmlake_empty_cache": ([c_int], c_int),
            "gmlake_get_stats": ([c_int, c_void_p], c_int),  # a gmlake_stats laid out by stat_names()
            "gmlake_reset_peak_stats": ([c_int], c_int),
            "gmlake_set_cap_bytes": ([c_int, c_uint64], c_int),
            "gmlake_shutdown": ([], None),
            "gmlake_get_backend_time": ([c_int, ctypes.POINTER(c_uint64), ctypes.POINTER(c_uint64)], c_int),
            "gmlake_ignored_frees": ([], c_uint64),
            "gmlake_stat_names": ([], ctypes.c_char_p),
            "gmlake_config_table": ([], ctypes.c_char_p),
            "gmlake_last_error_code": ([], c_int),
            "gmlake_last_error": ([], ctypes.c_char_p),
        }
        for name, (argtypes, restype) in signatures.items():
            function = getattr(lib, name)
            function.argtypes = argtypes
            function.restype = restype
        _lib = lib
    return _lib


def library():
    """The loaded libgmlake_c.so (ctypes.CDLL), with argument types set for its C API (include/gmlake/gmlake.h)."""
    return _load()


def _check(rc):
    if rc != 0:
        raise GmlakeError(_load().gmlake_last_error().decode())


