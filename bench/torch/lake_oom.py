"""The lake on two GPUs (issue 12): a training run that does not fit device 0 under a memory cap completes with
gmlake borrowing device 1's memory (`peer_devices:1`), against what a user would do instead.

    python bench/torch/lake_oom.py --all OUTDIR          # every mode below, each in its own process
    python bench/torch/lake_oom.py --mode lake --cap-gb 6 --json out.json

Modes (one process each; the same model, data and seed in all of them):
  native    PyTorch's allocator, no cap: the "larger GPU" whose loss the others must match (run twice by --all:
            native-again shows the run-to-run noise left with deterministic algorithms on)
  gmlake    gmlake, no cap: gmlake's own step time and peak on one device
  native-cap  PyTorch's allocator under the cap (torch.cuda.set_per_process_memory_fraction): expected to OOM
  gmlake-cap  gmlake under the cap (`cap_bytes`), no peer: expected to OOM
  lake      gmlake under the cap with `peer_devices:1`: what device 0 cannot hold is mapped from device 1
  offload   PyTorch's allocator under the cap, every tensor saved for backward kept in pinned host memory
            (torch.autograd.graph.save_on_cpu): the CPU offload a user would pick instead
  bw        device 0 reading and writing a 1 GiB tensor on its own memory and one gmlake placed on device 1

--all runs `native` first and sets the cap to --cap-fraction (default 0.75) of native's peak requested bytes:
the run needs a quarter more than device 0 is allowed to hold. Model: GPT-2 (12 layers, 768 wide, random
weights from the config, no download), fixed batch and sequence length, bf16 autocast, AdamW, seed 1234: the
losses of all modes that complete must be equal. Prints one JSON object per mode (and --all a summary).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["native", "gmlake", "native-cap", "gmlake-cap", "lake", "offload", "bw"])
    p.add_argument("--all", metavar="OUTDIR", default="")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--varlen", action="store_true",
                   help="a sequence length drawn per step, uniform in [seq/4, seq] (seeded): shapes that vary")
    p.add_argument("--cap-gb", type=float, default=0, help="device 0's cap in GB (10^9 bytes)")
    p.add_argument("--cap-fraction", type=float, default=0.75, help="--all: the cap over native's peak requested")
    p.add_argument("--json", default="")
    p.add_argument("--record", default="", help="also record the run's memory history (torch.cuda.memory."
                   "_record_memory_history, stacks python, no C++ context) and dump the snapshot to this path")
    return p.parse_args()


def enable_gmlake(conf):
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import gmlake

    gmlake.torch.enable(conf)
    return gmlake


def train(args):
    gmlake = None
    if args.mode == "gmlake":
        gmlake = enable_gmlake("")
    elif args.mode == "gmlake-cap":
        gmlake = enable_gmlake(f"cap_bytes:{int(args.cap_gb * 1e9)}")
    elif args.mode == "lake":
        gmlake = enable_gmlake(f"cap_bytes:{int(args.cap_gb * 1e9)},peer_devices:1")
    import contextlib

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    # Same kernels in every mode, so that equal losses mean equal arithmetic (warn_only: an op with no
    # deterministic kernel warns instead of failing; `native-again` shows what run-to-run noise remains).
    torch.use_deterministic_algorithms(True, warn_only=True)

    dev = torch.device("cuda:0")
    if args.mode in ("native-cap", "offload"):
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.cap_gb * 1e9 / total), 0)
    torch.manual_seed(1234)
    model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device="cpu").manual_seed(1234)
    saved = (torch.autograd.graph.save_on_cpu(pin_memory=True) if args.mode == "offload"
             else contextlib.nullcontext())
    if args.record:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=2_000_000)
    times, losses, fit, error = [], [], True, ""
    own_at_step_end = 0  # gmlake: the most bytes reserved on device 0 itself, sampled after each step
    calls_at_5 = None
    try:
        for _ in range(args.steps):
            if gmlake is not None and len(times) == 5:
                s5 = gmlake.torch.memory_stats(0)
                calls_at_5 = (s5["gmlake.backend_calls"], s5["gmlake.backend_time_ns"])
            seq = int(torch.randint(args.seq // 4, args.seq + 1, (1,), generator=gen)) if args.varlen else args.seq
            x = torch.randint(0, model.config.vocab_size, (args.batch, seq), generator=gen).to(dev)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with saved, torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=x, labels=x).loss
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            losses.append(loss.item())
            del loss
            if gmlake is not None:
                s1 = gmlake.torch.memory_stats(0)
                own_at_step_end = max(own_at_step_end, s1["reserved_bytes.all.current"] -
                                      s1["peer_reserved_bytes.all.current"])
    except torch.OutOfMemoryError as e:
        fit, error = False, str(e).splitlines()[0][:300]
    if args.record:
        torch.cuda.memory._dump_snapshot(args.record)
        torch.cuda.memory._record_memory_history(enabled=None)
    out = {"mode": args.mode, "batch": args.batch, "seq": args.seq, "varlen": args.varlen, "steps": args.steps,
           "steps_done": len(times),
           "fit": fit, "error": error, "cap_gb": args.cap_gb, "losses": losses,
           "median_step_s": statistics.median(times[3:] or times) if times else None,
           "step_times_s": [round(t, 5) for t in times], "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "device_count": torch.cuda.device_count()}
    if gmlake is not None:
        s = gmlake.torch.memory_stats(0)
        out.update({"peak_reserved": s["reserved_bytes.all.peak"], "peak_requested": s["requested_bytes.all.peak"],
                    "peak_peer_reserved": s["peer_reserved_bytes.all.peak"],
                    "backend_calls": s["gmlake.backend_calls"], "backend_time_ns": s["gmlake.backend_time_ns"],
                    "num_alloc_retries": s["num_alloc_retries"], "own_reserved_at_step_end": own_at_step_end})
        if calls_at_5 and len(times) > 5:
            n = len(times) - 5
            out["steady_backend_calls_per_step"] = (s["gmlake.backend_calls"] - calls_at_5[0]) / n
            out["steady_backend_ms_per_step"] = (s["gmlake.backend_time_ns"] - calls_at_5[1]) / n / 1e6
    else:
        s = torch.cuda.memory_stats(0)
        out.update({"peak_reserved": s["reserved_bytes.all.peak"], "peak_requested": s["requested_bytes.all.peak"],
                    "num_alloc_retries": s.get("num_alloc_retries", 0)})
    # What the driver says each device holds now (this process's contexts included: device 1 gets one here).
    for d in range(min(2, torch.cuda.device_count())):
        free, total = torch.cuda.mem_get_info(d)
        out[f"device{d}_used_bytes_at_end"] = total - free
    return out


def bandwidth(args):
    """Device 0 reads (sum) and writes (fill) a 1 GiB tensor in its own memory and one on device 1. gmlake with a
    cap of 1 GiB places the first tensor locally and the second, past the cap, on the peer."""
    gmlake = enable_gmlake(f"cap_bytes:{1 << 30},peer_devices:1")
    import torch

    n = 1 << 30
    local = torch.empty(n // 4, dtype=torch.float32, device="cuda:0")
    peer_before = gmlake.torch.memory_stats(0)["peer_reserved_bytes.all.current"]
    peer = torch.empty(n // 4, dtype=torch.float32, device="cuda:0")
    peer_bytes = gmlake.torch.memory_stats(0)["peer_reserved_bytes.all.current"] - peer_before
    out = {"mode": "bw", "bytes": n, "peer_bytes_of_second_tensor": peer_bytes,
           "device": torch.cuda.get_device_name(0)}

    def timed(fn, reps=20):
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / reps

    for name, t in (("local", local), ("peer", peer)):
        out[f"{name}_write_GBps"] = n / timed(lambda: t.fill_(3)) / 1e9
        out[f"{name}_read_GBps"] = n / timed(lambda: t.sum()) / 1e9
        out[f"{name}_checksum_ok"] = bool((t == 3).all().item())
    out["read_slowdown_peer_over_local"] = out["local_read_GBps"] / out["peer_read_GBps"]
    out["write_slowdown_peer_over_local"] = out["local_write_GBps"] / out["peer_write_GBps"]
    return out


def run_all(args):
    os.makedirs(args.all, exist_ok=True)

    def one(mode, cap_gb=0.0, label=""):
        path = os.path.join(args.all, f"{label or mode}.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--mode", mode, "--steps", str(args.steps),
               "--batch", str(args.batch), "--seq", str(args.seq), "--cap-gb", str(cap_gb), "--json", path]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(path):
            print(f"{mode}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}", flush=True)
            return {"mode": mode, "exit": p.returncode, "stderr_tail": p.stderr[-1500:]}
        with open(path) as f:
            r = json.load(f)
        print(json.dumps({k: v for k, v in r.items() if k not in ("step_times_s", "losses")}), flush=True)
        return r

    results = {"native": one("native")}
    cap = round(args.cap_fraction * results["native"]["peak_requested"] / 1e9, 3)
    results["native-again"] = one("native", 0.0, "native-again")
    for mode in ("gmlake", "native-cap", "gmlake-cap", "lake", "offload"):
        results[mode] = one(mode, cap)
    results["bw"] = one("bw")
    ref = results["native"].get("losses", [])
    summary = {"cap_gb": cap, "native_peak_requested": results["native"]["peak_requested"]}
    for mode, r in results.items():
        if mode == "bw":
            continue
        summary[mode] = {"fit": r.get("fit"), "median_step_s": r.get("median_step_s"),
                         "step_over_native": (r["median_step_s"] / results["native"]["median_step_s"]
                                              if r.get("median_step_s") and r.get("fit") else None),
                         "losses_equal_native": r.get("losses") == ref if r.get("fit") else None,
                         "max_loss_diff": (max(abs(a - b) for a, b in zip(r["losses"], ref))
                                           if r.get("fit") and r.get("losses") else None),
                         "peak_reserved": r.get("peak_reserved"), "peak_peer_reserved": r.get("peak_peer_reserved"),
                         "own_reserved_at_step_end": r.get("own_reserved_at_step_end"),
                         "steady_backend_calls_per_step": r.get("steady_backend_calls_per_step"),
                         "steady_backend_ms_per_step": r.get("steady_backend_ms_per_step"),
                         "device1_used_bytes_at_end": r.get("device1_used_bytes_at_end")}
    summary["bw"] = results["bw"]
    with open(os.path.join(args.all, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))


def main():
    args = parse()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (before CUDA starts)
    if args.all:
        return run_all(args)
    if not args.mode:
        sys.exit("lake_oom.py: give --mode or --all")
    if args.mode not in ("native", "gmlake", "bw") and args.cap_gb <= 0:
        sys.exit(f"lake_oom.py: --mode {args.mode} needs --cap-gb")
    out = bandwidth(args) if args.mode == "bw" else train(args)
    text = json.dumps(out)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
