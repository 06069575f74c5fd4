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


class _Gauge(ctypes.Structure):
    _fields_ = [("current", ctypes.c_int64), ("peak", ctypes.c_int64)]


class PoolId(ctypes.Structure):
    """gmlake_pool_id (include/gmlake/gmlake.h): a pool of a device, (0, 0) its main pool."""
    _fields_ = [("first", ctypes.c_uint64), ("second", ctypes.c_uint64)]


# The types gmlake_c_api_table names (include/gmlake/gmlake.h) as ctypes passes them.
_C_TYPES = {"void": None, "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64,
            "string": ctypes.c_char_p, "pointer": ctypes.c_void_p, "gmlake_pool_id": PoolId}

_stat_layout = None


def stat_table():
    """The library's stat table (gmlake_stat_table; include/gmlake/stat_fields.h): a list of dicts with name,
    kind ("gauge" or "counter") and torch_key (the key torch.cuda.memory_stats() gives it under the extension; a
    gauge's is the prefix of ".current" and ".peak"; "" when PyTorch has none), in gmlake_stats' order."""
    rows = []
    for line in _load().gmlake_stat_table().decode().splitlines():
        name, kind, torch_key = line.split("\t")
        rows.append({"name": name, "kind": kind, "torch_key": torch_key})
    return rows


def stat_names():
    """(gauges, counters): the names of gmlake's statistics, in gmlake_stats' order, as the loaded library
    declares them (gmlake_stat_table; include/gmlake/stat_fields.h): nothing is copied here."""
    global _stat_layout
    if _stat_layout is None:
        rows = stat_table()
        gauges = [r["name"] for r in rows if r["kind"] == "gauge"]
        counters = [r["name"] for r in rows if r["kind"] == "counter"]
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


def c_api_table():
    """The library's C functions (gmlake_c_api_table: the GMLAKE_C_API list of include/gmlake/gmlake.h) as a list
    of (name, return type, [parameter types]), types spelled as gmlake.h says (int32, uint64, pointer, ...)."""
    return [(name, restype, argtypes.split(",") if argtypes else [])
            for name, restype, argtypes in (line.split("\t") for line in _c_api_table_text(_load()).splitlines())]


def _c_api_table_text(lib):
    lib.gmlake_c_api_table.argtypes = []
    lib.gmlake_c_api_table.restype = ctypes.c_char_p
    return lib.gmlake_c_api_table().decode()


def max_devices():
    """Device ids the C API accepts: 0 .. max_devices() - 1 (GMLAKE_MAX_DEVICES, from the library)."""
    return _load().gmlake_max_devices()


def __getattr__(name):  # MAX_DEVICES, read from the library when first asked (importing loads nothing)
    if name == "MAX_DEVICES":
        return max_devices()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class GmlakeError(RuntimeError):
    """An error reported by the gmlake library. status: the gmlake_status (None for errors found in Python before
    any call), status_name: its name as the library spells it ("GMLAKE_ERROR_OUT_OF_MEMORY"; gmlake_status_name)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status
        self.status_name = _load().gmlake_status_name(status).decode() if status is not None else None


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
        # Every function of include/gmlake/gmlake.h, with its C types as the library lists them (gmlake_c_api_table):
        # without them ctypes would pass and return a C int (a 64-bit count truncated, a pointer or a stream id cut
        # to 32 bits).
        for line in _c_api_table_text(lib).splitlines():
            name, restype, argtypes = line.split("\t")
            function = getattr(lib, name)
            function.argtypes = [_C_TYPES[t] for t in argtypes.split(",")] if argtypes else []
            function.restype = _C_TYPES[restype]
        _lib = lib
    return _lib


def library():
    """The loaded libgmlake_c.so (ctypes.CDLL), with argument types set for its C API (include/gmlake/gmlake.h)."""
    return _load()


def _check(rc):
    """Raises the library's last error as a GmlakeError unless rc is GMLAKE_OK (0)."""
    if rc != 0:
        raise GmlakeError(_load().gmlake_last_error().decode(), status=rc)


