"""Builds and loads gmlake's c10 allocator extension (csrc/torch_allocator.cpp) against the installed torch.

torch.utils.cpp_extension.load compiles it once (a C++ compiler, ninja and the CUDA headers are needed; about
half a minute) and caches it under TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions), keyed by the source
and the torch version; later imports load it in a fraction of a second. Importing gmlake never compiles anything:
only gmlake.torch.enable() (extension=True or "auto") or build_extension() do.
"""

import os
import pathlib

_module = None


def include_dir():
    """The folder holding gmlake/gmlake.h: GMLAKE_INCLUDE, this package's include/, the repository's (beside
    the build/ folder of the library loaded, or above this package)."""
    from ._library import library_path

    here = pathlib.Path(__file__).resolve().parent
    candidates = [pathlib.Path(os.environ["GMLAKE_INCLUDE"])] if os.environ.get("GMLAKE_INCLUDE") else []
    candidates += [here / "include", here.parent.parent / "include"]
    try:
        candidates.append(pathlib.Path(library_path()).resolve().parent.parent / "include")
    except Exception:  # noqa: BLE001 (no library: the other candidates still count)
        pass
    for c in candidates:
        if (c / "gmlake" / "gmlake.h").is_file():
            return str(c)
    raise FileNotFoundError("gmlake/gmlake.h not found (set GMLAKE_INCLUDE); looked in "
                            + ", ".join(str(c) for c in candidates))


def build_extension(verbose=False):
    """Compiles (or loads from the cache) the extension module and returns it. Raises what
    torch.utils.cpp_extension raises when no compiler or CUDA headers are found."""
    global _module
    if _module is None:
        from torch.utils import cpp_extension

        source = pathlib.Path(__file__).resolve().parent / "csrc" / "torch_allocator.cpp"
        _module = cpp_extension.load(
            name="gmlake_torch_allocator",
            sources=[str(source)],
            extra_include_paths=[include_dir()],
            extra_cflags=["-O2"],
            with_cuda=True,
            verbose=verbose,
        )
    return _module
