"""How much virtual address space one process can reserve on the GPU with cuMemAddressReserve, in arenas of a
given size (gmlake reserves Config::arena_virtual_bytes, 1 TiB by default, per (stream, pool) on the GPU): reserves
until the driver refuses, frees them all, and prints one JSON line per size. ctypes over libcuda; no PyTorch.

    python3 bench/cuda/va_limit_probe.py [SIZE_GIB ...]   (default: 1024 256 64)
"""
import ctypes
import json
import sys

cuda = ctypes.CDLL("libcuda.so.1")
CU = ctypes.c_int


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: CUresult {rc}")


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1024, 256, 64]
    check(cuda.cuInit(0), "cuInit")
    dev = CU()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    cuda.cuMemAddressReserve.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_size_t,
                                         ctypes.c_uint64, ctypes.c_uint64]
    cuda.cuMemAddressFree.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
    for gib in sizes:
        size = gib << 30
        got, rc = [], 0
        while len(got) < 100000:
            p = ctypes.c_uint64()
            rc = cuda.cuMemAddressReserve(ctypes.byref(p), size, 0, 0, 0)
            if rc != 0:
                break
            got.append(p.value)
        lo, hi = (min(got), max(got) + size) if got else (0, 0)
        for a in got:
            check(cuda.cuMemAddressFree(a, size), "cuMemAddressFree")
        print(json.dumps({"arena_gib": gib, "reserved": len(got), "total_tib": len(got) * gib / 1024,
                          "refused_with": rc, "lowest": hex(lo), "highest_end": hex(hi)}), flush=True)


if __name__ == "__main__":
    main()
