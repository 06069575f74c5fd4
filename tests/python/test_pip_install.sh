#!/usr/bin/env bash
# `pip install .` at the repository root: in a fresh virtual environment, offline (--no-index: the
# in-tree build backend needs nothing from an index), it builds libgmlake_c.so and installs a self-contained
# package: the library with its non-system libraries beside it, the headers and the extension source, found
# with no GMLAKE_LIBRARY and no repository on the path. Run by ctest (label cpu); ~30 s on 2 cores.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
unset GMLAKE_LIBRARY GMLAKE_INCLUDE PYTHONPATH
export PIP_DISABLE_PIP_VERSION_CHECK=1 GMLAKE_BUILD_DIR="$work/build" GMLAKE_BUILD_EXTENSION=0
"$work/venv/bin/python" -m pip install -q --no-index "$repo"
cd "$work"  # away from the repository: only the installed package can be found
"$work/venv/bin/python" - "$work/venv" <<'PY'
import pathlib, sys
sys.modules["torch"] = None  # no PyTorch needed for the library's own pools
import gmlake
from gmlake import _extension, torch as gt
venv = pathlib.Path(sys.argv[1]).resolve()
lib = pathlib.Path(gt.library_path()).resolve()
assert venv in lib.parents, f"library not from the installed package: {lib}"
assert (pathlib.Path(_extension.include_dir()) / "gmlake" / "gmlake.h").is_file(), "headers not installed"
assert (pathlib.Path(gmlake.__file__).parent / "csrc" / "torch_allocator.cpp").is_file(), "extension source missing"
gt.configure("backend:host")
p = gt.malloc(3 << 20, 0)
assert gt.memory_stats(0)["allocated_bytes.all.current"] == 3 << 20
gt.free(p, 0)
print("pip install: package self-contained at", lib.parent)
PY
