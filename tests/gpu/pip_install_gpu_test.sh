#!/usr/bin/env bash
# `pip install .` on a GPU machine: a fresh virtual environment that sees the machine's torch (a .pth
# file naming torch's site-packages), an offline install (--no-index) that builds libgmlake_c.so and, torch being
# importable, the c10 extension; then, from another folder, gmlake.torch.enable() must come up in extension
# mode with the extension compiled at install time, and a CUDA tensor must compute. CMAKE_PREFIX_PATH must name
# fmt and abseil when they are not installed system-wide (scripts/gpu-carry.sh carries them as .dev/sysroot).
# Label gpu. Passed on the H100 on 2026-11-24 (Python 3.12, torch 2.11, 60 s; run as
# `CMAKE_PREFIX_PATH=$PWD/.dev/sysroot/usr bash tests/gpu/pip_install_gpu_test.sh`, .dev/sysroot carried).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset GMLAKE_LIBRARY GMLAKE_INCLUDE PYTHONPATH
site=$(python3 -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))")
python3 -m venv "$work/venv"
echo "$site" > "$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch_env.pth"
GMLAKE_BUILD_DIR="$work/build" "$work/venv/bin/pip" install -q --no-index "$repo"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import torch, gmlake, gmlake._extension as extension
gmlake.torch.enable()
x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
assert gmlake.torch.mode() == "extension", gmlake.torch.mode()
assert extension.prebuilt(), "the extension was not compiled at install time"
assert float(x.sum()) == float((1 << 20) * ((1 << 20) - 1) / 2)
assert torch.cuda.memory_allocated() >= 4 << 20
print("pip install: extension mode, compiled at install time, from", gmlake.torch.library_path())
PY
