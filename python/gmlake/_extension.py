"""Builds and loads gmlake's c10 allocator extension (csrc/torch_allocator.cpp) against the installed torch.

`pip install .` compiles it into the package (lib/gmlake_torch_allocator.so, with lib/torch_version.txt naming
the torch it was built for) when torch was importable at install time; build_extension() loads that one when the
torch version matches. Otherwise torch.utils.cpp_extension.load compiles it once (a C++ compiler, ninja and the CUDA headers are needed; about
half a minute) and caches it under TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions), keyed by the source
and the torch version; later imports load it in a fraction of a second. Importing gmlake never compiles anything:
only gmlake.torch.enable() (extension=True, the default) or build_extension() do.
"""

import importlib.machinery
import importlib.util
import os
import pathlib
import shutil

_module = None
_NAME = "gmlake_torch_allocator"
_HERE = pathlib.Path(__file__).resolve().parent


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


def _compile(include, build_directory=None, verbose=False):
    from torch.utils import cpp_extension

    kwargs = {"build_directory": str(build_directory)} if build_directory else {}
    # torch's cache keys on the .cpp and the flags: the headers' hash goes into the flags, so that a change to
    # csrc/*.h or to gmlake.h (and the stat table it includes) rebuilds the extension.
    import hashlib

    digest = hashlib.sha256()
    gmlake_headers = [pathlib.Path(include) / "gmlake" / name for name in ("gmlake.h", "stat_fields.h")]
    for header in sorted((_HERE / "csrc").glob("*.h")) + gmlake_headers:
        digest.update(header.read_bytes())
    return cpp_extension.load(
        name=_NAME,
        sources=[str(_HERE / "csrc" / "torch_allocator.cpp")],
        extra_include_paths=[include],
        extra_cflags=["-O2", f"-DGMLAKE_HEADERS_SHA256={digest.hexdigest()[:16]}"],
        with_cuda=True,
        verbose=verbose,
        **kwargs,
    )


def compile_into(lib_dir, include_dir):
    """Compiles the extension against the installed torch into lib_dir (the wheel's gmlake/lib/), with the
    torch version beside it; returns the module's path. For python/build_backend at install time."""
    import torch

    build = pathlib.Path(lib_dir) / "_build"
    build.mkdir(parents=True, exist_ok=True)
    module = _compile(str(include_dir), build_directory=build)
    target = pathlib.Path(lib_dir) / f"{_NAME}.so"
    shutil.copy2(module.__file__, target)
    (pathlib.Path(lib_dir) / "torch_version.txt").write_text(torch.__version__ + "\n")
    shutil.rmtree(build)
    return target


def _load_prebuilt():
    """The extension `pip install .` compiled into this package, when it was built for this torch; else None."""
    import torch

    path, stamp = _HERE / "lib" / f"{_NAME}.so", _HERE / "lib" / "torch_version.txt"
    if not path.is_file() or not stamp.is_file() or stamp.read_text().strip() != torch.__version__:
        return None
    spec = importlib.util.spec_from_file_location(_NAME, path, loader=importlib.machinery.ExtensionFileLoader(
        _NAME, str(path)))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prebuilt():
    """True when the extension in use came with the package (compiled at install time)."""
    return _module is not None and pathlib.Path(_module.__file__).resolve().parent == _HERE / "lib"


def build_extension(verbose=False):
    """Loads the extension compiled at install time, or compiles it (or loads it from torch's cache) and returns
    it. Raises what torch.utils.cpp_extension raises when no compiler or CUDA headers are found."""
    global _module
    if _module is None:
        _module = _load_prebuilt() or _compile(include_dir(), verbose=verbose)
    return _module
