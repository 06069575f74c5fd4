"""Does a CUDA VMM call wait for queued GPU work? Times each call of one 2 MiB chunk's life (cuMemCreate,
cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease) while the GPU is idle and while a ~200 ms kernel runs
(torch.cuda._sleep) on another stream. A call that takes ~200 ms only in the second case synchronizes.

    python3 bench/cuda/vmm_sync_probe.py          # needs torch and cuda-python (cuda.bindings)
"""

import json
import time

import torch
from cuda.bindings import driver as cu

CHUNK = 2 << 20


def ok(result):
    err = result[0] if isinstance(result, tuple) else result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA error {err}")
    return result[1] if isinstance(result, tuple) and len(result) == 2 else None


def life_of_a_chunk(device, busy):
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    access = cu.CUmemAccessDesc()
    access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = device
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    va = ok(cu.cuMemAddressReserve(CHUNK, 0, 0, 0))
    times = {}
    side = torch.cuda.Stream()
    if busy:
        with torch.cuda.stream(side):
            torch.cuda._sleep(400_000_000)  # ~200 ms at 1.98 GHz
    t = time.perf_counter()
    handle = ok(cu.cuMemCreate(CHUNK, prop, 0))
    times["create_us"] = (time.perf_counter() - t) * 1e6
    t = time.perf_counter()
    ok(cu.cuMemMap(va, CHUNK, 0, handle, 0))
    times["map_us"] = (time.perf_counter() - t) * 1e6
    t = time.perf_counter()
    ok(cu.cuMemSetAccess(va, CHUNK, [access], 1))
    times["set_access_us"] = (time.perf_counter() - t) * 1e6
    t = time.perf_counter()
    ok(cu.cuMemUnmap(va, CHUNK))
    times["unmap_us"] = (time.perf_counter() - t) * 1e6
    t = time.perf_counter()
    ok(cu.cuMemRelease(handle))
    times["release_us"] = (time.perf_counter() - t) * 1e6
    t = time.perf_counter()
    side.synchronize()
    times["kernel_left_us"] = (time.perf_counter() - t) * 1e6
    ok(cu.cuMemAddressFree(va, CHUNK))
    return times


def main():
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    device = torch.cuda.current_device()
    for busy in (False, True, False, True):
        print(json.dumps({"gpu_busy": busy, **{k: round(v, 1) for k, v in life_of_a_chunk(device, busy).items()}}))


if __name__ == "__main__":
    main()
