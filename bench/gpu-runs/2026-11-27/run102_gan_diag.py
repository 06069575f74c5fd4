"""Run 102 (H100, thirteenth session): where gan_train's whole-run excess under gmlake goes (1.05-1.08 over 10
pairs in runs 94-99, with no VMM call at headroom 1000, and neither kernel time nor profiled host op time larger).

    python3 run102_gan_diag.py [--pairs 8] [--conf GMLAKE_CONF]

1. Host cost of one allocation and its free through each allocator as PyTorch calls it (torch.empty + del in a
   loop, sizes of gan_train's blocks), in ns per pair, the allocators alternating.
2. gan_train whole (workload_ab.run_once's seeding), the allocators alternating, with a stamp at every step's
   start (the workload's ctx.fits): the host's clock (time.perf_counter, no synchronization) and a CUDA event.
   Per run: wall seconds; the host's seconds until it had queued the last step (host_s: where the host, not the
   GPU, sets the pace, host_s is about wall_s); the host's and the GPU's seconds per plain step and per
   sampled step (every 10th: a no-grad batch of 256), medians over the run.
Prints one JSON object.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--conf", default="")
    ap.add_argument("--workload", default="gan_train")
    args = ap.parse_args()
    import workload_ab
    w = workload_ab.load(args.workload, args.conf)
    import torch
    import gmlake.torch
    ct, calls = w.ct, w.calls

    # 1. alloc + free as PyTorch calls them
    sizes = [512, 8192, 262144, 1 << 20, 4 << 20, 12582912, 50331648]

    def pair_ns(native, n, reps=20000):
        def loop():
            t0 = time.perf_counter_ns()
            for _ in range(reps):
                x = torch.empty(n, dtype=torch.uint8, device="cuda")
                del x
            return (time.perf_counter_ns() - t0) / reps
        if native:
            with gmlake.torch.native():
                loop()
                return loop()
        loop()
        return loop()

    micro = {}
    for n in sizes:
        r = {"native": [], "gmlake": []}
        for i in range(3):
            for native in ((True, False) if i % 2 == 0 else (False, True)):
                r["native" if native else "gmlake"].append(pair_ns(native, n))
        micro[str(n)] = {k: round(min(v), 1) for k, v in r.items()}
        print("micro", n, micro[str(n)], file=sys.stderr)

    # 2. the workload, stamped per step
    class StampCtx(ct.ReplayCtx):
        def __init__(self, n):
            super().__init__(n)
            self.host, self.events = [], []

        def fits(self, est_allocs=0, est_s=0.0):
            self.host.append(time.perf_counter())
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.events.append(e)
            return super().fits(est_allocs, est_s)

    def run(native):
        ctx = StampCtx(calls)
        before = gmlake.torch.memory_stats()
        t0 = time.perf_counter()  # run_once seeds and synchronizes before its own clock starts: a few µs earlier
        wall = workload_ab.run_once(w, native, ctx)
        after = gmlake.torch.memory_stats()
        h = [b - a for a, b in zip(ctx.host, ctx.host[1:])]
        g = [a.elapsed_time(b) / 1e3 for a, b in zip(ctx.events, ctx.events[1:])]
        # step i runs between stamps i and i+1; step i is sampled when i % 10 == 9
        plain = [i for i in range(len(h)) if i % 10 != 9 and i > 0]
        sampled = [i for i in range(len(h)) if i % 10 == 9]
        med = lambda xs, idx: round(statistics.median(xs[i] for i in idx) * 1e3, 4)  # ms
        return {"wall_s": round(wall, 4), "host_s": round(ctx.host[-1] - t0, 4),
                "first_step_host_ms": round((ctx.host[1] - t0) * 1e3, 2) if len(ctx.host) > 1 else None,
                "plain_host_ms": med(h, plain), "plain_gpu_ms": med(g, plain),
                "sampled_host_ms": med(h, sampled), "sampled_gpu_ms": med(g, sampled),
                "sum_host_plain_s": round(sum(h[i] for i in plain), 4), "sum_gpu_plain_s": round(sum(g[i] for i in plain), 4),
                "sum_host_sampled_s": round(sum(h[i] for i in sampled), 4), "sum_gpu_sampled_s": round(sum(g[i] for i in sampled), 4),
                "gmlake_backend_calls": after["gmlake.backend_calls"] - before["gmlake.backend_calls"],
                "gmlake_fence_waits": after["gmlake.fence_waits"] - before["gmlake.fence_waits"]}

    pairs = []
    for i, r in enumerate(workload_ab.alternate(run, args.pairs)):
        pairs.append({"native": r[True], "gmlake": r[False], "ratio": round(r[False]["wall_s"] / r[True]["wall_s"], 4)})
        print("pair", i, pairs[-1]["ratio"], r[True]["wall_s"], r[True]["host_s"], r[False]["wall_s"], r[False]["host_s"],
              file=sys.stderr)
    keys = [k for k in pairs[0]["native"] if k.endswith("_ms") or k.endswith("_s")]
    summary = {who: {k: round(statistics.median(p[who][k] for p in pairs if p[who][k] is not None), 4) for k in keys}
               for who in ("native", "gmlake")}
    out = {"workload": args.workload, "conf": args.conf, "calls": calls, "micro_ns_per_alloc_free": micro,
           "pairs": pairs, "median": summary,
           "total_ratio": sum(p["gmlake"]["wall_s"] for p in pairs) / sum(p["native"]["wall_s"] for p in pairs),
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
