"""The PEP 517 build backend behind `pip install .` at the repository root (pyproject.toml names it).

It needs nothing from a package index: pip's build isolation installs a backend's requirements from the index
before building, which fails on machines without internet (GPU clusters, our own GPU machine), and this one
has none. What it does:

1. builds libgmlake_c.so with CMake (`-DGMLAKE_LIBRARY_ONLY=ON`: the library alone, which needs fmt and abseil,
   the Debian packages libfmt-dev and libabsl-dev; scripts/install-deps.sh installs them), with the CUDA backend
   when the toolkit's cuda.h is found;
2. copies it into the package as gmlake/lib/libgmlake_c.so, with the shared libraries it needs beyond glibc and
   libstdc++ beside it (it finds them there first: its RUNPATH is $ORIGIN), and include/gmlake/ as
   gmlake/include/gmlake/ (the extension's headers);
3. when torch is importable by the interpreter that runs pip (outside pip's isolated environment), compiles the
   c10 allocator extension (gmlake/csrc/torch_allocator.cpp) against it into gmlake/lib/, so that
   gmlake.torch.enable() compiles nothing; otherwise enable() compiles it on first use (gmlake/_extension.py).
   GMLAKE_BUILD_EXTENSION=0 skips this step; =1 makes its failure fail the install.

Environment: CMAKE_PREFIX_PATH (read by CMake) where fmt and abseil live when not in /usr; GMLAKE_CMAKE_ARGS
extra CMake arguments (split on spaces); GMLAKE_BUILD_DIR the CMake build folder (default build-wheel/).
Errors: a failed CMake step raises RuntimeError with the command and the last lines of its output.
"""

import base64
import hashlib
import io
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = "gmlake"
# The libraries every Linux machine has: never shipped in the wheel.
_SYSTEM_LIBRARY = re.compile(r"/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*|libpthread|libdl|librt)\.so")


def _version():
    text = (ROOT / "pyproject.toml").read_text()
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if not match:
        raise RuntimeError("pyproject.toml: no version")
    return match.group(1)


def _run(command, **kwargs):
    print("gmlake build:", " ".join(shlex.quote(str(c)) for c in command), flush=True)
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-40:])
        raise RuntimeError(f"gmlake build: {' '.join(map(str, command))} failed ({done.returncode}):\n{tail}")
    return done.stdout


def _build_library():
    """Builds libgmlake_c.so with CMake; returns its path."""
    if shutil.which("cmake") is None:
        raise RuntimeError("gmlake build: cmake not found: install it (apt-get install cmake, or pip install cmake)")
    build = pathlib.Path(os.environ.get("GMLAKE_BUILD_DIR", ROOT / "build-wheel"))
    extra = shlex.split(os.environ.get("GMLAKE_CMAKE_ARGS", ""))
    # CMake runs outside pip's isolation: a pip-installed cmake is a Python script that needs its own package.
    env = _outside_env()
    _run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", "-DGMLAKE_LIBRARY_ONLY=ON",
          *extra], env=env)
    _run(["cmake", "--build", str(build), "--target", "gmlake_c", "-j", str(os.cpu_count() or 2)], env=env)
    return build / "libgmlake_c.so"


def _dependencies(library):
    """The shared libraries `library` needs beyond those every Linux machine has (ldd), looked up also in the
    lib folders of CMAKE_PREFIX_PATH (where CMake found them). Raises RuntimeError naming any not found."""
    folders = []
    for prefix in filter(None, os.environ.get("CMAKE_PREFIX_PATH", "").split(os.pathsep)):
        folders += [os.path.join(prefix, "lib", "x86_64-linux-gnu"), os.path.join(prefix, "lib"),
                    os.path.join(prefix, "lib64")]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(folders + [env.get("LD_LIBRARY_PATH", "")])
    out = _run(["ldd", str(library)], env=env)
    found, missing = [], []
    for line in out.splitlines():
        if "not found" in line:
            missing.append(line.split()[0])
            continue
        match = re.search(r"=>\s+(/\S+)", line)
        if match and not _SYSTEM_LIBRARY.search(match.group(1)):
            found.append(pathlib.Path(match.group(1)))
    if missing:
        raise RuntimeError("gmlake build: libgmlake_c.so needs libraries not found: " + ", ".join(missing) +
                           " (set CMAKE_PREFIX_PATH to where fmt and abseil are installed)")
    return found


def _outside_env():
    """The environment of the interpreter that runs pip, without pip's build isolation (which hides torch)."""
    env = dict(os.environ)
    for key in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME"):
        env.pop(key, None)
    return env


def _build_extension(package, staging):
    """Compiles the c10 extension into package/lib when torch is importable; returns True when it did."""
    wanted = os.environ.get("GMLAKE_BUILD_EXTENSION", "auto")
    if wanted == "0":
        return False
    env = _outside_env()
    probe = subprocess.run([sys.executable, "-c", "import torch, torch.utils.cpp_extension"], env=env,
                           capture_output=True, text=True)
    if probe.returncode != 0:
        if wanted == "1":
            last = (probe.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise RuntimeError(f"gmlake build: GMLAKE_BUILD_EXTENSION=1 but torch is not importable: {last}")
        print("gmlake build: torch not importable: the allocator extension is compiled on first enable()")
        return False
    script = (
        "import sys, pathlib\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from gmlake import _extension\n"
        "path = _extension.compile_into(pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]))\n"
        "print(path)\n")
    try:
        _run([sys.executable, "-c", script, str(staging), str(package / "lib"), str(package / "include")], env=env)
    except RuntimeError:
        if wanted == "1":
            raise
        print("gmlake build: the allocator extension did not compile: enable() will try again on first use")
        return False
    return True


def _stage(directory):
    """The package's files under directory/gmlake; returns that folder."""
    package = directory / NAME
    shutil.copytree(ROOT / "python" / NAME, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "lib"))
    (package / "lib").mkdir()
    library = _build_library()
    shutil.copy2(library, package / "lib" / "libgmlake_c.so")
    for dependency in _dependencies(library):
        shutil.copy2(dependency.resolve(), package / "lib" / dependency.name)
    shutil.copytree(ROOT / "include" / "gmlake", package / "include" / "gmlake")
    _build_extension(package, directory)
    return package


def _tag():
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{platform}"


def _metadata(version):
    readme = (ROOT / "python" / "README.md").read_text()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
            "Summary: gmlake: a stitching GPU memory allocator, as a drop-in allocator for unmodified PyTorch\n"
            "Requires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n" + readme)


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


# --- PEP 517 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    tag = _tag()
    dist_info = f"{NAME}-{version}.dist-info"
    wheel_name = f"{NAME}-{version}-{tag}.whl"
    with tempfile.TemporaryDirectory() as temp:
        package = _stage(pathlib.Path(temp))
        records = []
        with zipfile.ZipFile(pathlib.Path(wheel_directory) / wheel_name, "w", zipfile.ZIP_DEFLATED) as wheel:
            for path in sorted(p for p in package.rglob("*") if p.is_file()):
                arcname = path.relative_to(package.parent).as_posix()
                data = path.read_bytes()
                info = zipfile.ZipInfo(arcname)
                info.external_attr = (path.stat().st_mode & 0o777) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                wheel.writestr(info, data)
                records.append(_record_line(arcname, data))
            meta = {
                f"{dist_info}/METADATA": _metadata(version).encode(),
                f"{dist_info}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: gmlake_build\nRoot-Is-Purelib: false\n"
                                       f"Tag: {tag}\n").encode(),
            }
            for arcname, data in meta.items():
                wheel.writestr(arcname, data)
                records.append(_record_line(arcname, data))
            records.append(f"{dist_info}/RECORD,,")
            wheel.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    """The tracked files of the repository (git ls-files), as NAME-VERSION.tar.gz."""
    version = _version()
    base = f"{NAME}-{version}"
    files = _run(["git", "-C", str(ROOT), "ls-files"]).splitlines()
    name = f"{base}.tar.gz"
    with tarfile.open(pathlib.Path(sdist_directory) / name, "w:gz") as sdist:
        for f in files:
            if (ROOT / f).is_file():
                sdist.add(ROOT / f, arcname=f"{base}/{f}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata(version).encode()
        info.size = len(data)
        sdist.addfile(info, io.BytesIO(data))
    return name
