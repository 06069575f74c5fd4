"""Copy bandwidth into and out of blocks of gmlake's pool against blocks of PyTorch's own allocator, in one process
(gmlake's extension enabled; PyTorch's allocator reached inside gmlake.torch.native()).

    python3 bench/torch/copy_bw.py [--conf GMLAKE_CONF] [--reps 10] [--sizes 4,64,256,1024] > out.json

For each size (MiB, --sizes) and each allocator, a device tensor of that many bytes is made in a fresh pool
state (each allocator's first tensor of the size), then timed: host -> device and device -> host copies from
pageable and from pinned host tensors (Tensor.copy_, as Module.to and offloading code copy), device -> device,
a device -> host copy into a new pageable tensor (Tensor.to("cpu"), as Module.to("cpu") moves weights out: the
driver's copy touches fresh host pages), and an in-place add of two blocks (a memory-bound kernel). Median of
--reps copies each, synchronized around each copy, the two allocators alternating per rep.
Prints one JSON object: per size and direction the GB/s of each and time_ratio, gmlake's median copy time over
native's (above 1: the copy into or out of gmlake's block took longer), and each allocator's median host time in
the call itself (<allocator>_call_us: until Tensor.copy_ returned, before the synchronize), which tells a
driver that splits a copy on the host from a copy that runs slower on the device, and each allocator's median
minor page faults of the process during one copy (<allocator>_minflt, getrusage).
"""
import argparse
import json
import resource
import statistics
import sys
import os
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conf", default="")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sizes", default="4,64,256,1024", help="device tensor sizes in MiB, comma-separated")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch
    import gmlake.torch
    gmlake.torch.enable(conf=args.conf or None, extension=True)
    out = {"conf": args.conf, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "sizes": []}
    for mib in (int(x) for x in args.sizes.split(",")):
        n = mib << 20
        host = {"pageable": torch.empty(n, dtype=torch.uint8), "pinned": torch.empty(n, dtype=torch.uint8,
                                                                                      pin_memory=True)}
        for h in host.values():
            h.fill_(7)
        with gmlake.torch.native():
            dev_native = torch.empty(n, dtype=torch.uint8, device="cuda")
            other_native = torch.empty(n, dtype=torch.uint8, device="cuda")
        dev_gmlake = torch.empty(n, dtype=torch.uint8, device="cuda")
        other_gmlake = torch.empty(n, dtype=torch.uint8, device="cuda")
        devs = {"native": (dev_native, other_native), "gmlake": (dev_gmlake, other_gmlake)}
        cases = {
            "h2d_pageable": lambda d, o: d.copy_(host["pageable"]),
            "h2d_pinned": lambda d, o: d.copy_(host["pinned"]),
            "d2h_pageable": lambda d, o: host["pageable"].copy_(d),
            "d2h_pinned": lambda d, o: host["pinned"].copy_(d),
            "d2h_new": lambda d, o: d.to("cpu"),  # returned, so freed after the timing
            "d2d": lambda d, o: o.copy_(d),
            "add": lambda d, o: o.add_(d),  # a memory-bound kernel reading both blocks and writing one
        }
        row = {"mib": mib}
        for case, fn in cases.items():
            times = {"native": [], "gmlake": []}
            queued = {"native": [], "gmlake": []}  # the host's time in the call alone (until it returned)
            faults = {"native": [], "gmlake": []}  # minor page faults of the process during the copy
            for a in ("native", "gmlake"):
                fn(*devs[a])  # warm
            for rep in range(args.reps):
                for a in (("native", "gmlake") if rep % 2 == 0 else ("gmlake", "native")):
                    torch.cuda.synchronize()
                    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                    t0 = time.perf_counter()
                    result = fn(*devs[a])
                    queued[a].append(time.perf_counter() - t0)
                    torch.cuda.synchronize()
                    times[a].append(time.perf_counter() - t0)
                    faults[a].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
                    del result
            med = {a: statistics.median(v) for a, v in times.items()}
            row[case] = {"native_gbs": round(n / med["native"] / 1e9, 2),
                         "gmlake_gbs": round(n / med["gmlake"] / 1e9, 2),
                         "time_ratio": round(med["gmlake"] / med["native"], 4),
                         **{f"{a}_call_us": round(statistics.median(v) * 1e6, 1) for a, v in queued.items()},
                         **{f"{a}_minflt": statistics.median(v) for a, v in faults.items()}}
        out["sizes"].append(row)
        del dev_gmlake, other_gmlake, dev_native, other_native, host
    print(json.dumps(out))


if __name__ == "__main__":
    main()
