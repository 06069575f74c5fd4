"""The allocator's CPU time per operation as PyTorch sees it: gmlake's extension against PyTorch's own allocator,
in one process, alternating rounds.

    python bench/torch/op_cost.py --ops 200000 --rounds 5 --json out.json

Each round makes the same sequence of torch.empty / del calls (no kernel runs: torch.empty only allocates), once
under gmlake.torch.native() and once under gmlake, in alternating order. The sequence keeps a window of live
tensors and frees them in a shuffled order, sizes drawn (fixed seed) from 512 B to 64 MiB the way activations
are: mostly small, some large. The first pass of each allocator (its layout forming, VMM calls included) is not
timed. What differs between the two halves is the allocator (the Python and dispatcher cost is the same), so
the figure to read is the difference per operation, in ns; an operation is one allocation or one free.
"""
import argparse
import json
import random
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", type=int, default=200000, help="allocations per pass (as many frees follow)")
    p.add_argument("--rounds", type=int, default=5, help="timed passes per allocator, alternating")
    p.add_argument("--window", type=int, default=64, help="live tensors kept")
    p.add_argument("--conf", default=None, help="gmlake configuration (GMLAKE_CONF form)")
    p.add_argument("--json", default=None, help="write the figures here")
    return p.parse_args()


def sequence(n, seed=0):
    """The size in bytes of each allocation, a deterministic activation-like pattern."""
    rng = random.Random(seed)
    sizes = []
    for _ in range(n):
        r = rng.random()
        if r < 0.6:
            sizes.append(rng.choice([512, 2048, 8192, 65536, 262144]))  # small pool
        elif r < 0.95:
            sizes.append(rng.choice([1, 2, 3, 4, 6, 8]) * (1 << 20))
        else:
            sizes.append(rng.choice([16, 24, 32, 64]) * (1 << 20))
    return sizes


def one_pass(torch, sizes, window, order_seed):
    rng = random.Random(order_seed)
    live = []
    t0 = time.perf_counter_ns()
    for s in sizes:
        live.append(torch.empty(s, dtype=torch.uint8, device="cuda"))
        if len(live) > window:
            live.pop(rng.randrange(len(live)))
    live.clear()
    return time.perf_counter_ns() - t0


def main():
    args = parse()
    import gmlake.torch
    gmlake.torch.enable(args.conf)
    import torch

    sizes = sequence(args.ops)
    ops = 2 * len(sizes)
    native_ns, gmlake_ns = [], []
    with gmlake.torch.native():
        one_pass(torch, sizes, args.window, 1)  # untimed: the layout forms
    one_pass(torch, sizes, args.window, 1)
    for r in range(args.rounds):
        first_native = r % 2 == 0
        for under_native in (first_native, not first_native):
            if under_native:
                with gmlake.torch.native():
                    native_ns.append(one_pass(torch, sizes, args.window, 1) / ops)
            else:
                gmlake_ns.append(one_pass(torch, sizes, args.window, 1) / ops)
    native_ns.sort()
    gmlake_ns.sort()
    med = lambda v: v[len(v) // 2]
    out = {
        "ops_per_pass": ops, "rounds": args.rounds, "window": args.window, "conf": args.conf,
        "native_ns_per_op": native_ns, "gmlake_ns_per_op": gmlake_ns,
        "median_native_ns_per_op": med(native_ns), "median_gmlake_ns_per_op": med(gmlake_ns),
        "median_difference_ns_per_op": med(gmlake_ns) - med(native_ns),
        "gmlake_stats": {k: v for k, v in gmlake.torch.memory_stats().items()
                         if k in ("num_alloc_retries", "reserved_bytes.all.peak", "allocated_bytes.all.peak")},
    }
    print(f"per op (alloc or free), median of {args.rounds}: native {out['median_native_ns_per_op']:.0f} ns, "
          f"gmlake {out['median_gmlake_ns_per_op']:.0f} ns, difference {out['median_difference_ns_per_op']:+.0f} ns")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
