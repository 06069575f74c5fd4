"""Can one physical chunk be mapped piecewise? gmlake maps a chunk (one cuMemCreate) whole, so where a live block
uses one page of a two-page chunk the other page is stranded (ppo_rollout_train's known miss, traces/targets.json).
Older CUDA documentation said cuMemMap's offset "currently must be zero"; CUDA 13's says offset and size need only
be multiples of the allocation granularity. This probe asks the driver, for a chunk of two pages (plain and with
the POSIX file descriptor handle type, as gmlake's chunks are made with ipc_handles:true):
  - map page 1 alone at an address (offset = one page), and page 0 alone at another (offset 0, size one page);
  - are the bytes the same memory (written through the whole chunk's mapping, read through each page's)?
  - does page 1's mapping live on once the whole chunk's mapping and page 0's are unmapped?
  - what does each map cost (us), whole against one page at an offset?

    python3 bench/cuda/map_offset_probe.py > map_offset.json   # needs torch and cuda-python (cuda.bindings)
"""

import ctypes
import json
import time

import torch
from cuda.bindings import driver as cu

from vmm_sync_probe import ok as must  # a checked call: its value, or RuntimeError


def call(result):
    """(ok, value or error name) of a cuda.bindings call: a refusal is a finding here, not an error (else `must`)."""
    err = result[0] if isinstance(result, tuple) else result
    value = result[1] if isinstance(result, tuple) and len(result) == 2 else None
    return (True, value) if err == cu.CUresult.CUDA_SUCCESS else (False, cu.cuGetErrorName(err)[1].decode())


def prop_for(device, fd_handles):
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    if fd_handles:
        prop.requestedHandleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    return prop


def probe(device, fd_handles):
    prop = prop_for(device, fd_handles)
    minimum = cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
    page = must(cu.cuMemGetAllocationGranularity(prop, minimum))
    access = cu.CUmemAccessDesc()
    access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = device
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    out = {"fd_handles": fd_handles, "page_bytes": page}
    handle = must(cu.cuMemCreate(2 * page, prop, 0))
    whole, first, second = (must(cu.cuMemAddressReserve(n, page, 0, 0)) for n in (2 * page, page, page))

    def timed_map(va, size, offset):
        t = time.perf_counter()
        ok, err = call(cu.cuMemMap(va, size, offset, handle, 0))
        us = (time.perf_counter() - t) * 1e6
        if ok:
            must(cu.cuMemSetAccess(va, size, [access], 1))
        return ok, err, round(us, 1)

    ok, err, out["map_whole_us"] = timed_map(whole, 2 * page, 0)
    assert ok, err
    ok, err, out["map_page1_at_offset_us"] = timed_map(second, page, page)
    out["map_page1_at_offset"] = ok if ok else err
    ok0, err0, out["map_page0_alone_us"] = timed_map(first, page, 0)
    out["map_page0_alone"] = ok0 if ok0 else err0
    n = page // 4
    must(cu.cuMemsetD32(int(whole), 0x11111111, n))
    must(cu.cuMemsetD32(int(whole) + page, 0x22222222, n))
    torch.cuda.synchronize()

    def word_at(va):
        buf = ctypes.c_uint32(0)
        must(cu.cuMemcpyDtoH(ctypes.addressof(buf), va, 4))
        return buf.value

    if ok:
        out["page1_reads_page1"] = word_at(int(second)) == 0x22222222
    if ok0:
        out["page0_reads_page0"] = word_at(int(first)) == 0x11111111
    must(cu.cuMemUnmap(whole, 2 * page))
    if ok0:
        must(cu.cuMemUnmap(first, page))
    if ok:  # page 1's mapping alone keeps the chunk's memory; write through it and read it back
        must(cu.cuMemsetD32(int(second), 0x33333333, n))
        torch.cuda.synchronize()
        out["page1_alone_after_unmaps"] = word_at(int(second) + page - 4) == 0x33333333
        ok2, err2, out["remap_whole_us"] = timed_map(whole, 2 * page, 0)
        out["page1_mapped_twice"] = ok2 if ok2 else err2
        if ok2:
            out["second_mapping_sees_page1"] = word_at(int(whole) + page) == 0x33333333
            must(cu.cuMemUnmap(whole, 2 * page))
        must(cu.cuMemUnmap(second, page))
    must(cu.cuMemRelease(handle))
    for va, size in ((whole, 2 * page), (first, page), (second, page)):
        must(cu.cuMemAddressFree(va, size))
    return out


def main():
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the primary context current
    device = torch.cuda.current_device()
    ok, version = call(cu.cuDriverGetVersion())
    results = {"gpu": torch.cuda.get_device_name(), "driver_api_version": version, "torch": torch.__version__,
               "probes": [probe(device, fd) for fd in (False, True)]}
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
