"""gmlake under PyTorch with many streams at once (GPU; run by scripts/gpu-checks-carried.sh): each stream has its
own arenas on the GPU, one per (stream, pool), and a process has about 128 TiB of address space, the GPU's
included (126 reservations of 1 TiB on an H200: bench/cuda/va_limit_h200.json). 150 streams (made with
cuStreamCreate and wrapped in torch.cuda.ExternalStream: PyTorch's own pool hands out 32 a priority) each allocate
a small-pool tensor (4 KiB) and a large-pool one (4 MiB), filled on their stream and all kept alive: 300 arenas at
once. Checks that every allocation succeeds, every tensor holds what its stream wrote, and gmlake made them with
no out-of-memory retry (the arenas made past the sixteenth are smaller: ArenaSet).

    python3 tests/gpu/torch_many_streams_test.py     # prints one JSON line, exits 0 when every check passed
"""

import ctypes
import json
import os
import sys

STREAMS = 150


def main():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import gmlake.torch
    import torch

    gmlake.torch.enable()
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    cuda = ctypes.CDLL("libcuda.so.1")
    kept = []
    for i in range(STREAMS):
        handle = ctypes.c_void_p()
        rc = cuda.cuStreamCreate(ctypes.byref(handle), 1)  # CU_STREAM_NON_BLOCKING
        assert rc == 0, f"cuStreamCreate: {rc}"
        stream = torch.cuda.ExternalStream(handle.value)
        with torch.cuda.stream(stream):
            small = torch.full((1024,), float(i), device="cuda")           # 4 KiB: the small pool
            large = torch.full((1 << 20,), float(i) + 0.5, device="cuda")  # 4 MiB: the large pool
        kept.append((stream, small, large))
    torch.cuda.synchronize()
    wrong = [i for i, (_, small, large) in enumerate(kept)
             if not (bool((small == i).all()) and bool((large == i + 0.5).all()))]
    stats = torch.cuda.memory_stats()
    result = {"streams": STREAMS, "wrong": wrong, "num_ooms": stats.get("num_ooms"),
              "num_alloc_retries": stats.get("num_alloc_retries"),
              "reserved_bytes": torch.cuda.memory_reserved()}
    print(json.dumps(result))
    ok = not wrong and result["num_ooms"] == 0 and result["num_alloc_retries"] == 0
    del kept
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
