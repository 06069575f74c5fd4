"""What each CUDA virtual-memory call costs, as a function of size: the table a calibrated sim backend charges.

Calls the driver API through ctypes (libcuda.so.1 only: no torch, no cuda-python), host wall clock
(time.perf_counter_ns) around each call, median of the repetitions:

- per call, one physical chunk of 2 MiB, 4 MiB, ..., 4 GiB: cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
  cuMemRelease (each repetition is one fresh chunk's life, access set on a freshly mapped range);
- cuMemSetAccess over one range made of k separately created 2 MiB chunks, k = 1, 2, 4, ..., 512;
- cuMemUnmap of a range spanning k adjacent separate mappings in ONE call: accepted or not, and its time;
- cuMemMap of a handle at a non-zero offset: accepted or not (the error code);
- cuMemAddressReserve / cuMemAddressFree of 1 TiB.

    python3 bench/cuda/vmm_cost_probe.py [--out bench/cuda/vmm_costs_h100.json] [--device 0] [--location 1] [--quick]

The struct layouts (CUmemLocation, CUmemAllocationProp, CUmemAccessDesc) are printed with their ctypes offsets;
when a C compiler and cuda.h are found, the script also compiles a few offsetof() lines against that cuda.h and
refuses to run if they disagree.
"""

import argparse
import ctypes
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_NONE = 0
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0
CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1

CUdeviceptr = ctypes.c_ulonglong
CUmemGenericAllocationHandle = ctypes.c_ulonglong


class CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class CUmemAllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class CUmemAllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", CUmemLocation),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", CUmemAllocFlags),
    ]


class CUmemAccessDesc(ctypes.Structure):
    _fields_ = [("location", CUmemLocation), ("flags", ctypes.c_int)]


def layout():
    """The offsets this script uses, as {struct: {field: offset, "sizeof": n}}."""
    out = {}
    for st in (CUmemLocation, CUmemAllocationProp, CUmemAccessDesc, CUmemAllocFlags):
        d = {f: getattr(st, f).offset for f, _ in st._fields_}
        d["sizeof"] = ctypes.sizeof(st)
        out[st.__name__] = d
    return out


def find_cuda_h():
    cands = ["/usr/local/cuda/include/cuda.h"]
    cands += sorted(glob.glob("/usr/local/cuda*/include/cuda.h"))
    cands += sorted(glob.glob("/usr/local/cuda*/targets/*/include/cuda.h"))
    for sp in sys.path:
        cands += sorted(glob.glob(os.path.join(sp, "nvidia", "*", "include", "cuda.h")))
        cands += sorted(glob.glob(os.path.join(sp, "nvidia", "include", "cuda.h")))
        cands += sorted(glob.glob(os.path.join(sp, "triton", "backends", "nvidia", "include", "cuda.h")))
    for c in cands:
        if os.path.isfile(c):
            return c
    return None


def print_header_structs(path):
    """Prints the typedefs of the three structs as cuda.h spells them."""
    import re
    text = open(path, errors="replace").read()
    for name in ("CUmemLocation_st", "CUmemAllocationProp_st", "CUmemAccessDesc_st"):
        i = text.find("typedef struct " + name)
        if i < 0:
            print(f"  {name}: not found in {path}")
            continue
        m = re.compile(r"\}\s*" + name[:-3] + r"(_v\d+)?\s*;").search(text, i)
        print(text[i:m.end()] if m else text[i:i + 800])


def check_with_compiler(path):
    """Compiles offsetof() lines against cuda.h; returns (dict or None, message)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("g++") or shutil.which("clang")
    if not cc:
        return None, "no C compiler"
    inc = os.path.dirname(path)
    src = r"""
#include <stdio.h>
#include <stddef.h>
#include <cuda.h>
#define P(s, f) printf("%s %s %zu\n", #s, #f, offsetof(s, f))
int main(void) {
  P(CUmemLocation, type); P(CUmemLocation, id); printf("CUmemLocation sizeof %zu\n", sizeof(CUmemLocation));
  P(CUmemAllocationProp, type); P(CUmemAllocationProp, requestedHandleTypes); P(CUmemAllocationProp, location);
  P(CUmemAllocationProp, win32HandleMetaData); P(CUmemAllocationProp, allocFlags);
  printf("CUmemAllocationProp sizeof %zu\n", sizeof(CUmemAllocationProp));
  P(CUmemAccessDesc, location); P(CUmemAccessDesc, flags); printf("CUmemAccessDesc sizeof %zu\n", sizeof(CUmemAccessDesc));
  printf("enum PINNED %d DEVICE %d RW %d\n", (int)CU_MEM_ALLOCATION_TYPE_PINNED, (int)CU_MEM_LOCATION_TYPE_DEVICE,
         (int)CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  return 0;
}
"""
    with tempfile.TemporaryDirectory() as d:
        c = os.path.join(d, "l.c")
        exe = os.path.join(d, "l")
        open(c, "w").write(src)
        r = subprocess.run([cc, "-I", inc, c, "-o", exe], capture_output=True, text=True)
        if r.returncode != 0:
            return None, "compile failed: " + r.stderr[-500:]
        out = subprocess.run([exe], capture_output=True, text=True).stdout
    got = {}
    enums = None
    for line in out.splitlines():
        parts = line.split()
        if parts[0] == "enum":
            enums = {"PINNED": int(parts[2]), "DEVICE": int(parts[4]), "RW": int(parts[6])}
            continue
        got.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return {"offsets": got, "enums": enums}, out


class Driver:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.names = {}

    def fn(self, name, argtypes):
        """The driver's entry point, its _v2 name where the library exports one."""
        for cand in (name + "_v2", name):
            try:
                f = getattr(self.lib, cand)
            except AttributeError:
                continue
            f.restype = ctypes.c_int
            f.argtypes = argtypes
            self.names[name] = cand
            return f
        raise RuntimeError(f"libcuda exports neither {name}_v2 nor {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/cuda/vmm_costs_h100.json")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--location", type=int, default=-1,
                    help="the device whose memory backs the chunks (cuMemCreate's location; default --device): "
                         "a peer, as the lake's peer_devices creates them; access is granted to --device")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and sizes (a smoke test)")
    args = ap.parse_args()

    print("ctypes layout used:", json.dumps(layout()))
    hdr = find_cuda_h()
    print("cuda.h:", hdr)
    if hdr:
        print_header_structs(hdr)
        chk, msg = check_with_compiler(hdr)
        print("compiled offsetof check:", msg.strip() if isinstance(msg, str) else msg)
        if chk:
            mine = layout()
            bad = []
            for st, fields in chk["offsets"].items():
                for f, off in fields.items():
                    if mine[st].get(f) != off:
                        bad.append((st, f, off, mine[st].get(f)))
            e = chk["enums"]
            if e and (e["PINNED"], e["DEVICE"], e["RW"]) != (CU_MEM_ALLOCATION_TYPE_PINNED,
                                                             CU_MEM_LOCATION_TYPE_DEVICE,
                                                             CU_MEM_ACCESS_FLAGS_PROT_READWRITE):
                bad.append(("enums", e))
            if bad:
                print("LAYOUT MISMATCH against cuda.h:", bad)
                sys.exit(2)
            print("layout matches cuda.h")

    drv = Driver()
    P = ctypes.POINTER
    cuInit = drv.fn("cuInit", [ctypes.c_uint])
    cuDriverGetVersion = drv.fn("cuDriverGetVersion", [P(ctypes.c_int)])
    cuDeviceGet = drv.fn("cuDeviceGet", [P(ctypes.c_int), ctypes.c_int])
    cuDeviceGetName = drv.fn("cuDeviceGetName", [ctypes.c_char_p, ctypes.c_int, ctypes.c_int])
    cuDeviceTotalMem = drv.fn("cuDeviceTotalMem", [P(ctypes.c_size_t), ctypes.c_int])
    cuDevicePrimaryCtxRetain = drv.fn("cuDevicePrimaryCtxRetain", [P(ctypes.c_void_p), ctypes.c_int])
    cuCtxSetCurrent = drv.fn("cuCtxSetCurrent", [ctypes.c_void_p])
    cuGetErrorName = drv.fn("cuGetErrorName", [ctypes.c_int, P(ctypes.c_char_p)])
    cuMemGetAllocationGranularity = drv.fn(
        "cuMemGetAllocationGranularity", [P(ctypes.c_size_t), P(CUmemAllocationProp), ctypes.c_int])
    cuMemCreate = drv.fn("cuMemCreate", [P(CUmemGenericAllocationHandle), ctypes.c_size_t,
                                         P(CUmemAllocationProp), ctypes.c_ulonglong])
    cuMemAddressReserve = drv.fn("cuMemAddressReserve", [P(CUdeviceptr), ctypes.c_size_t, ctypes.c_size_t,
                                                         CUdeviceptr, ctypes.c_ulonglong])
    cuMemAddressFree = drv.fn("cuMemAddressFree", [CUdeviceptr, ctypes.c_size_t])
    cuMemMap = drv.fn("cuMemMap", [CUdeviceptr, ctypes.c_size_t, ctypes.c_size_t, CUmemGenericAllocationHandle,
                                   ctypes.c_ulonglong])
    cuMemSetAccess = drv.fn("cuMemSetAccess", [CUdeviceptr, ctypes.c_size_t, P(CUmemAccessDesc), ctypes.c_size_t])
    cuMemUnmap = drv.fn("cuMemUnmap", [CUdeviceptr, ctypes.c_size_t])
    cuMemRelease = drv.fn("cuMemRelease", [CUmemGenericAllocationHandle])
    print("driver entry points:", drv.names)

    def errname(rc):
        s = ctypes.c_char_p()
        cuGetErrorName(rc, ctypes.byref(s))
        return (s.value or b"?").decode()

    def ok(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: CUresult {rc} {errname(rc)}")

    ok(cuInit(0), "cuInit")
    ver = ctypes.c_int()
    ok(cuDriverGetVersion(ctypes.byref(ver)), "cuDriverGetVersion")
    dev = ctypes.c_int()
    ok(cuDeviceGet(ctypes.byref(dev), args.device), "cuDeviceGet")
    name = ctypes.create_string_buffer(256)
    ok(cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
    total = ctypes.c_size_t()
    ok(cuDeviceTotalMem(ctypes.byref(total), dev), "cuDeviceTotalMem")
    ctx = ctypes.c_void_p()
    ok(cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ok(cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    drv_ver = f"{ver.value // 1000}.{(ver.value % 1000) // 10}"
    nvsmi = ""
    try:
        nvsmi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        pass
    print(f"device {name.value.decode()} total {total.value} B; CUDA driver API {drv_ver} ({ver.value}); "
          f"kernel driver {nvsmi}")

    prop = CUmemAllocationProp()
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE
    location = dev.value if args.location < 0 else args.location
    if location != dev.value:
        loc_dev = ctypes.c_int()
        ok(cuDeviceGet(ctypes.byref(loc_dev), location), "cuDeviceGet(location)")
        location = loc_dev.value
    prop.location.id = location
    access = CUmemAccessDesc()
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = dev.value
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE

    gmin = ctypes.c_size_t()
    grec = ctypes.c_size_t()
    ok(cuMemGetAllocationGranularity(ctypes.byref(gmin), ctypes.byref(prop), CU_MEM_ALLOC_GRANULARITY_MINIMUM), "gran")
    ok(cuMemGetAllocationGranularity(ctypes.byref(grec), ctypes.byref(prop),
                                     CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "gran")
    gran = gmin.value
    print(f"granularity minimum {gmin.value} recommended {grec.value}")

    now = time.perf_counter_ns

    def reserve(size):
        va = CUdeviceptr()
        ok(cuMemAddressReserve(ctypes.byref(va), size, 0, 0, 0), f"cuMemAddressReserve({size})")
        return va.value

    def create(size):
        h = CUmemGenericAllocationHandle()
        t = now()
        rc = cuMemCreate(ctypes.byref(h), size, ctypes.byref(prop), 0)
        dt = now() - t
        ok(rc, f"cuMemCreate({size})")
        return h.value, dt

    def timed(f, *a, what=""):
        t = now()
        rc = f(*a)
        dt = now() - t
        ok(rc, what)
        return dt

    def med(xs):
        return int(statistics.median(xs))

    result = {
        "device": name.value.decode(),
        "driver": drv_ver,
        "driver_version_int": ver.value,
        "kernel_driver": nvsmi,
        "total_mem_bytes": total.value,
        "location_device": location,
        "granularity_bytes": gran,
        "granularity_recommended_bytes": grec.value,
        "entry_points": drv.names,
        "struct_layout": layout(),
        "method": "host wall clock (time.perf_counter_ns) around each ctypes call, median over repetitions; "
                  "per_call: each repetition creates, maps, sets access on, unmaps and releases one chunk",
        "per_call": {k: [] for k in ("create", "map", "set_access", "unmap", "release")},
        "per_call_reps": [],
    }

    # Warm-up: a few whole lives of a 2 MiB chunk, untimed.
    va = reserve(gran)
    for _ in range(5):
        h, _ = create(gran)
        ok(cuMemMap(va, gran, 0, h, 0), "map")
        ok(cuMemSetAccess(va, gran, ctypes.byref(access), 1), "access")
        ok(cuMemUnmap(va, gran), "unmap")
        ok(cuMemRelease(h), "release")
    ok(cuMemAddressFree(va, gran), "free")

    sizes = []
    s = 2 * MiB
    top = 256 * MiB if args.quick else 4 * GiB
    while s <= top:
        sizes.append(max(s, gran))
        s *= 2
    for size in sizes:
        reps = 3 if args.quick else (50 if size <= 64 * MiB else 20 if size <= 512 * MiB else 10)
        va = reserve(size)
        ts = {k: [] for k in result["per_call"]}
        for _ in range(reps):
            h, dt = create(size)
            ts["create"].append(dt)
            ts["map"].append(timed(cuMemMap, va, size, 0, h, 0, what="cuMemMap"))
            ts["set_access"].append(timed(cuMemSetAccess, va, size, ctypes.byref(access), 1, what="cuMemSetAccess"))
            ts["unmap"].append(timed(cuMemUnmap, va, size, what="cuMemUnmap"))
            ts["release"].append(timed(cuMemRelease, h, what="cuMemRelease"))
        ok(cuMemAddressFree(va, size), "cuMemAddressFree")
        for k, v in ts.items():
            result["per_call"][k].append([size, med(v)])
        result["per_call_reps"].append([size, reps])
        print(f"size {size >> 20:5d} MiB x{reps}: " + ", ".join(f"{k} {med(v) / 1000:.1f} us" for k, v in ts.items()),
              flush=True)

    # cuMemSetAccess over k separate 2 MiB chunks; cuMemUnmap of the k mappings in one call.
    c = 2 * MiB
    ks = [1, 2, 4, 8, 16, 32, 64] if args.quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    handles = [create(c)[0] for _ in range(ks[-1])]
    set_k, unmap_k, unmap_each_k = [], [], []
    multi_ok = None
    multi_err = None
    for k in ks:
        reps = 3 if args.quick else (20 if k <= 32 else 10 if k <= 128 else 5)
        va = reserve(k * c)
        ts_set, ts_un, ts_each = [], [], []
        for r in range(reps):
            for i in range(k):
                ok(cuMemMap(va + i * c, c, 0, handles[i], 0), "cuMemMap chunk")
            ts_set.append(timed(cuMemSetAccess, va, k * c, ctypes.byref(access), 1, what="cuMemSetAccess k"))
            if k == 1 or multi_ok is not False:
                t = now()
                rc = cuMemUnmap(va, k * c)
                dt = now() - t
                if rc == 0:
                    if k > 1:
                        multi_ok = True
                    ts_un.append(dt)
                    continue
                multi_ok = False
                multi_err = f"{rc} {errname(rc)}"
                print(f"cuMemUnmap over {k} mappings refused: {multi_err}")
            t = now()
            for i in range(k):
                ok(cuMemUnmap(va + i * c, c), "cuMemUnmap chunk")
            ts_each.append(now() - t)
        ok(cuMemAddressFree(va, k * c), "cuMemAddressFree")
        set_k.append([k, med(ts_set)])
        if ts_un:
            unmap_k.append([k, med(ts_un)])
        if ts_each:
            unmap_each_k.append([k, med(ts_each)])
        print(f"k {k:4d} x{reps}: set_access {med(ts_set) / 1000:.1f} us"
              + (f", unmap one call {med(ts_un) / 1000:.1f} us" if ts_un else "")
              + (f", unmap chunk by chunk {med(ts_each) / 1000:.1f} us" if ts_each else ""), flush=True)
    # Chunk-by-chunk unmap for comparison, where the one-call form was taken.
    if multi_ok:
        for k in ks:
            reps = 3 if args.quick else (10 if k <= 128 else 3)
            va = reserve(k * c)
            ts_each = []
            for r in range(reps):
                for i in range(k):
                    ok(cuMemMap(va + i * c, c, 0, handles[i], 0), "cuMemMap chunk")
                ok(cuMemSetAccess(va, k * c, ctypes.byref(access), 1), "access")
                t = now()
                for i in range(k):
                    ok(cuMemUnmap(va + i * c, c), "cuMemUnmap chunk")
                ts_each.append(now() - t)
            ok(cuMemAddressFree(va, k * c), "cuMemAddressFree")
            unmap_each_k.append([k, med(ts_each)])
        print("unmap chunk by chunk:", unmap_each_k)
    for h in handles:
        ok(cuMemRelease(h), "cuMemRelease")
    result["set_access_k_chunks_2mib"] = set_k
    result["unmap_multi_mapping"] = {"accepted": bool(multi_ok), "error": multi_err, "ns": unmap_k,
                                     "ns_chunk_by_chunk": unmap_each_k}

    # cuMemMap of a handle at a non-zero offset.
    h, _ = create(2 * c)
    va = reserve(c)
    rc = cuMemMap(va, c, c, h, 0)
    result["map_offset_nonzero"] = {"accepted": rc == 0, "error": rc, "error_name": errname(rc),
                                    "what": "cuMemMap(va, 2 MiB, offset 2 MiB, handle of 4 MiB)"}
    if rc == 0:
        ok(cuMemSetAccess(va, c, ctypes.byref(access), 1), "access")
        ok(cuMemUnmap(va, c), "unmap")
    print("map at offset 2 MiB of a 4 MiB handle:", result["map_offset_nonzero"])
    ok(cuMemAddressFree(va, c), "free")
    ok(cuMemRelease(h), "release")

    # 1 TiB of address space.
    tr, tf = [], []
    for _ in range(3 if args.quick else 10):
        v = CUdeviceptr()
        t = now()
        rc = cuMemAddressReserve(ctypes.byref(v), TiB, 0, 0, 0)
        tr.append(now() - t)
        ok(rc, "cuMemAddressReserve 1 TiB")
        tf.append(timed(cuMemAddressFree, v.value, TiB, what="cuMemAddressFree 1 TiB"))
    result["reserve_1tib_ns"] = med(tr)
    result["address_free_1tib_ns"] = med(tf)
    print(f"1 TiB reserve {med(tr) / 1000:.1f} us, free {med(tf) / 1000:.1f} us")

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
