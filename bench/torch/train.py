"""End-to-end training under one allocator: PyTorch native, PyTorch expandable_segments, or gmlake.

    python bench/torch/train.py --model gpt2 --alloc gmlake --steps 40 --json out.json

--alloc native | expandable | gmlake (the c10 allocator extension) | gmlake-pluggable (CUDAPluggableAllocator)
| ab. `expandable` must be chosen before CUDA starts, so each of those runs is its own process.

--alloc ab times gmlake against PyTorch's native allocator in ONE process, step by step: gmlake's extension is
installed and every batch is trained twice, once under gmlake and once inside gmlake.torch.native() (PyTorch's
own caching allocator), the order swapped each pair. Every batch first runs once, untimed, under PyTorch's
allocator, then both pools are emptied (a new batch shape's first step costs several times more outside the
allocator). --steps counts pairs. It prints the median of the per-pair
ratios gmlake / native: machine drift between processes and rounds (seen up to +-30% on these machines) falls
out, since both halves of a pair run seconds apart on the same GPU state. Each allocator sees every batch shape
in the same order; the weights live in gmlake's pool, gradients and optimizer temporaries in whichever allocator
the step runs under (AdamW's state in the first step's), the inputs of all pairs, made up front, in PyTorch's. So
the peaks this mode reports are no memory figures: the separate runs give those. Models are built from transformers / torchvision configs with random weights (no downloads), seed
1234, bf16 autocast, AdamW (SGD momentum for resnet50). Prints one JSON object: final loss, median step time,
peak reserved, peak allocated, peak requested (the lower bound) and, with --cap-gb, whether every step fit.
"""

import argparse
import json
import os
import statistics
import sys
import time


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["gpt2", "gpt2-fixed", "bert", "resnet50", "resnet50-infer", "unet3d-infer",
                                       "gpt2-generate", "bert-train-eval", "video-infer", "clip-train"],
                   default="gpt2",
                   help="gpt2: sequence length 64..1024 drawn per step; gpt2-fixed: every step --batch x 1024; "
                        "resnet50-infer: bf16 inference (no grad) with batch 1..4x--batch and resolution "
                        "128..512 px drawn per call: varying shapes, no training; unet3d-infer: a 3D UNet's bf16 "
                        "inference on volumes of 64..192 voxels a side and batch 1..2 drawn per call (activations "
                        "of GBs); gpt2-generate: model.generate (greedy, KV cache) with batch 1..4, prompt 16..256 "
                        "and 16..48 new tokens drawn per call: CPU-bound; bert-train-eval: BERT fine-tuning (--batch, "
                        "sequence 64..256) with an evaluation call (eval mode, no grad: 3 batches of 8x--batch at "
                        "sequence 128..512) after every 5 training steps, as a script with periodic validation; "
                        "video-infer: torchvision r2plus1d_18 bf16 inference (no grad), clips of 8, 16 or 32 frames "
                        "at 112..224 px and batch 1..--batch drawn per call (traces/video_infer_varclip's pattern, "
                        "a held-out workload); clip-train: CLIP contrastive training (transformers CLIPModel, "
                        "default CLIPConfig) with batch 32..4x--batch and caption 16..77 tokens drawn per step "
                        "(traces/clip_contrastive_train's pattern, a held-out workload)")
    p.add_argument("--alloc", choices=["native", "expandable", "gmlake", "gmlake-pluggable", "ab"], default="native")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--cap-gb", type=float, default=0, help="memory cap in GB (10^9 bytes); 0 = none")
    p.add_argument("--conf", default="", help="extra GMLAKE_CONF entries")
    p.add_argument("--json", default="")
    p.add_argument("--fill-leave-gb", type=float, default=0,
                   help="after the first step (untimed, as warm-up: CUDA modules load lazily) and empty_cache, take "
                        "the device's free memory with cuMemAlloc, outside every allocator, so that the job can "
                        "reserve at most this many GB (10^9 bytes) in all: a filled GPU, no cap. 0 = off")
    p.add_argument("--rounds", type=int, default=1,
                   help="--alloc ab: rounds of --steps pairs each, one after the other in this process, each on "
                        "batches drawn anew; the JSON gives every round's totals and the total over all")
    p.add_argument("--history-out", default="",
                   help="--alloc ab: record gmlake's allocations over the first round's pairs "
                        "(torch.cuda.memory._record_memory_history, no stacks) and write them to this file "
                        "(_dump_snapshot), for `gmlake replay`: the A/B's own sequence under gmlake. The recording "
                        "costs host time, so that round's timings are not comparable")
    return p.parse_args()


def fill_device(torch, args, batch, opt, gmlake):
    """--fill-leave-gb: one warm-up step, empty_cache, then cuMemAlloc of all free memory but what lets the job's
    reserved bytes reach args.fill_leave_gb."""
    import ctypes

    step = batch()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = step()
    if out.requires_grad:
        out.backward()
        opt.zero_grad(set_to_none=True)
    del out, step
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    reserved = (gmlake.torch.memory_stats() if gmlake else torch.cuda.memory_stats())["reserved_bytes.all.current"]
    free, total = torch.cuda.mem_get_info()
    take = int(free - max(0.0, args.fill_leave_gb * 1e9 - reserved))
    cuda = ctypes.CDLL("libcuda.so.1")
    ptr = ctypes.c_uint64(0)
    if take > 0:
        rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(take))
        if rc != 0:
            raise RuntimeError(f"cuMemAlloc_v2({take}) failed: {rc}")
    print(json.dumps({"fill": {"taken_bytes": take, "free_before": free, "reserved_at_fill": reserved,
                               "free_after": torch.cuda.mem_get_info()[0]}}), flush=True)


def shaped(step, *tensors):
    """Tags a batch's step with its inputs' shapes (the A/B records them per pair), and returns it."""
    step.shapes = [list(t.shape) for t in tensors]
    return step


def main():
    args = parse()
    if args.alloc == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch

    gmlake_mode = None
    if args.alloc == "ab" or args.alloc.startswith("gmlake"):
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
        import gmlake

        conf = ",".join(c for c in [args.conf, f"cap_bytes:{int(args.cap_gb * 1e9)}" if args.cap_gb else ""] if c)
        # gmlake-pluggable: CUDAPluggableAllocator; ab needs the extension for gmlake.torch.native()
        gmlake.torch.enable(conf, extension=args.alloc != "gmlake-pluggable")
        gmlake_mode = gmlake.torch.mode()
    torch.manual_seed(1234)
    import random

    rng = random.Random(1234)
    dev = torch.device("cuda")
    if args.cap_gb and not args.alloc.startswith("gmlake"):
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.cap_gb * 1e9 / total))

    if args.model in ("gpt2", "gpt2-fixed"):
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12)).to(dev)
        vocab = model.config.vocab_size

        def batch():
            seq = rng.randint(64, 1024) if args.model == "gpt2" else 1024
            x = torch.randint(0, vocab, (args.batch, seq), device=dev)
            return shaped(lambda: model(input_ids=x, labels=x).loss, x)
    elif args.model == "gpt2-generate":
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, activation_function="gelu_pytorch_tanh")
        model = GPT2LMHeadModel(cfg).to(dev, torch.bfloat16).eval()

        def batch():
            b, t, n = rng.randint(1, 4), rng.randint(16, 256), rng.randint(16, 48)
            ids = torch.randint(0, cfg.vocab_size, (b, t), device=dev)

            def generate():
                with torch.no_grad():
                    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                         max_new_tokens=n, min_new_tokens=n, pad_token_id=cfg.eos_token_id,
                                         use_cache=True)
                return out.float().sum()
            return shaped(generate, ids)
    elif args.model == "unet3d-infer":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from models import unet3d

        model = unet3d(torch).to(dev).eval()

        def batch():
            b = rng.randint(1, 2)
            d, h, w = (32 * rng.randint(2, 6) for _ in range(3))
            x = torch.randn(b, 1, d, h, w, device=dev)

            def infer():
                with torch.no_grad():
                    return model(x).float().mean()
            return shaped(infer, x)
    elif args.model == "bert":
        from transformers import BertConfig, BertForSequenceClassification

        model = BertForSequenceClassification(BertConfig(num_labels=2)).to(dev)

        def batch():
            seq = rng.randint(32, 512)
            x = torch.randint(0, model.config.vocab_size, (args.batch, seq), device=dev)
            y = torch.randint(0, 2, (args.batch,), device=dev)
            return shaped(lambda: model(input_ids=x, labels=y).loss, x)
    elif args.model == "bert-train-eval":
        from transformers import BertConfig, BertForSequenceClassification

        model = BertForSequenceClassification(BertConfig(num_labels=2)).to(dev)
        vocab = model.config.vocab_size
        calls = [0]

        def batch():
            calls[0] += 1
            if calls[0] % 6 == 0:
                xs = [torch.randint(0, vocab, (8 * args.batch, rng.randint(128, 512)), device=dev) for _ in range(3)]

                def evaluate():
                    model.eval()
                    with torch.no_grad():
                        preds = [model(input_ids=x).logits.argmax(-1) for x in xs]
                    model.train()
                    return torch.cat(preds).float().mean()
                return shaped(evaluate, *xs)
            x = torch.randint(0, vocab, (args.batch, rng.randint(64, 256)), device=dev)
            y = torch.randint(0, 2, (args.batch,), device=dev)
            return shaped(lambda: model(input_ids=x, labels=y).loss, x)
    elif args.model == "clip-train":
        from transformers import CLIPConfig, CLIPModel

        model = CLIPModel(CLIPConfig()).to(dev)
        vocab = model.config.text_config.vocab_size

        def batch():
            n, t = rng.randint(32, 4 * args.batch), rng.randint(16, 77)
            pix = torch.randn(n, 3, 224, 224, device=dev)
            ids = torch.randint(0, vocab, (n, t), device=dev)
            return shaped(lambda: model(input_ids=ids, pixel_values=pix, return_loss=True).loss, pix, ids)
    elif args.model == "video-infer":
        import torchvision

        model = torchvision.models.video.r2plus1d_18().to(dev).eval()

        def batch():
            t, px, n = rng.choice((8, 16, 32)), 16 * rng.randint(7, 14), rng.randint(1, args.batch)
            x = torch.randn(n, 3, t, px, px, device=dev)

            def infer():
                with torch.no_grad():
                    return model(x).float().sum()
            return shaped(infer, x)
    elif args.model == "resnet50-infer":
        import torchvision

        model = torchvision.models.resnet50().to(dev).eval()

        def batch():
            n, px = rng.randint(1, 4 * args.batch), 32 * rng.randint(4, 16)
            x = torch.randn(n, 3, px, px, device=dev)

            def infer():
                with torch.no_grad():
                    return model(x).float().sum()
            return shaped(infer, x)
    else:
        import torchvision

        model = torchvision.models.resnet50().to(dev)
        loss_fn = torch.nn.CrossEntropyLoss()

        def batch():
            x = torch.randn(args.batch, 3, 224, 224, device=dev)
            y = torch.randint(0, 1000, (args.batch,), device=dev)
            return shaped(lambda: loss_fn(model(x), y), x)

    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
           if args.model.startswith("resnet50") or args.model in ("unet3d-infer", "video-infer")
           else torch.optim.AdamW(model.parameters(), lr=1e-4))
    if args.alloc == "ab":
        return ab_main(args, gmlake, batch, model, opt)
    if args.fill_leave_gb:
        fill_device(torch, args, batch, opt, gmlake if gmlake_mode else None)
    times, loss, fit = [], float("nan"), True
    backend_at_5 = None  # gmlake's backend (VMM) calls and time after 5 steps: the steady state is what follows
    try:
        for _ in range(args.steps):
            if gmlake_mode and len(times) == 5:
                s5 = gmlake.torch.memory_stats()
                backend_at_5 = (s5["gmlake.backend_calls"], s5["gmlake.backend_time_ns"], s5["gmlake.fence_waits"])
            step = batch()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = step()
            if out.requires_grad:  # training (inference returns a value with no graph)
                out.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            loss = out.item()
    except torch.OutOfMemoryError:
        fit = False
    except RuntimeError as e:
        # PyTorch 2.11's CUDAPluggableAllocator does not raise OutOfMemoryError when the allocator returns null:
        # the tensor is made without memory and the first kernel that touches it fails like this.
        if "data is not allocated" not in str(e):
            raise
        fit = False

    if args.alloc.startswith("gmlake"):
        import gmlake

        s = gmlake.torch.memory_stats()
        peak_reserved, peak_allocated = s["reserved_bytes.all.peak"], s["allocated_bytes.all.peak"]
        peak_requested = s["requested_bytes.all.peak"]
        extra = {k: v for k, v in s.items() if k.startswith("gmlake.")}
        if backend_at_5 and len(times) > 5:
            n = len(times) - 5
            extra["steady_backend_calls_per_step"] = (s["gmlake.backend_calls"] - backend_at_5[0]) / n
            extra["steady_backend_ms_per_step"] = (s["gmlake.backend_time_ns"] - backend_at_5[1]) / n / 1e6
            extra["steady_fence_waits"] = s["gmlake.fence_waits"] - backend_at_5[2]
    else:
        s = torch.cuda.memory_stats()
        peak_reserved, peak_allocated = s["reserved_bytes.all.peak"], s["allocated_bytes.all.peak"]
        peak_requested = s.get("requested_bytes.all.peak", 0)
        extra = {"num_alloc_retries": s.get("num_alloc_retries", 0)}
    result = {
        "model": args.model, "alloc": args.alloc, "batch": args.batch, "steps_done": len(times), "fit": fit,
        "final_loss": loss, "median_step_s": statistics.median(times[5:] or times) if times else None,
        "step_times_s": [round(t, 5) for t in times],
        "peak_reserved": peak_reserved, "peak_allocated": peak_allocated, "peak_requested": peak_requested,
        "cap_gb": args.cap_gb, "gmlake_mode": gmlake_mode, "torch": torch.__version__, **extra,
    }
    text = json.dumps(result)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


def ab_main(args, gmlake, batch, model, opt):
    """--alloc ab: each batch under both allocators in one process (see the module's doc)."""
    import contextlib
    import gc

    import torch

    def run(step, under_native):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with gmlake.torch.native() if under_native else contextlib.nullcontext():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = step()
            if out.requires_grad:
                out.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            del out  # the activations go back before the switch
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    warm = 5 if args.steps > 10 else 0  # the first pairs of each round fill both caches
    # Python's cyclic garbage collector runs when its allocation counters say so, in whichever half of a pair that
    # is. Single pairs of earlier runs were 30-70 ms off in either direction (docs/benchmarks.md), more than a
    # round's VMM time; a collection is one such cost. It runs between pairs instead (untimed, its time reported as
    # gc_ms), so that neither allocator is charged for it.
    gc.disable()

    def one_round():
        # A batch shape's first step costs several times more outside the allocator (kernel and cuBLAS plan
        # selection for a new sequence length: 3-5x the step on the H200), which would go to whichever allocator
        # ran it first. So every batch runs once first under PyTorch's allocator, then both pools are emptied: in
        # the timed pairs the compute side has seen every shape, and each allocator meets each shape for the
        # first time, as in training (an untimed run under each allocator instead would hand gmlake shapes it
        # had already stitched).
        with gmlake.torch.native():  # the inputs of every step, made up front, stay out of gmlake's pool
            steps = [batch() for _ in range(args.steps)]
        for step in steps:
            run(step, True)
        torch.cuda.empty_cache()  # both pools: gmlake's and, through the extension, PyTorch's
        gmlake.torch.reset_peak_memory_stats()
        s0 = gmlake.torch.memory_stats()
        native_s, gmlake_s = [], []
        s_warm = s0
        recording = args.history_out and not rounds
        if recording:  # gmlake's history only: PyTorch's own allocator records nothing unless told
            torch.cuda.memory._record_memory_history(max_entries=2_000_000, context=None, stacks="python")
        step_vmm_ms = []  # gmlake's VMM time in each of its steps: which pairs the driver calls fell in
        # the same, counted; waiting_growths: growth chunks made while the device waited for the host
        step_counts = {"backend_calls": [], "chunks_created": [], "evictions": [], "waiting_growths": []}
        step_reserved = []  # gmlake's reserved bytes after each of its steps
        gc_ms = []
        for k, step in enumerate(steps):
            t_gc = time.perf_counter()
            gc.collect()
            gc_ms.append(round((time.perf_counter() - t_gc) * 1e3, 2))
            if k == warm:
                s_warm = gmlake.torch.memory_stats()  # the timed pairs' VMM calls: the layout formed before
            stats_before = gmlake.torch.memory_stats()
            before = stats_before["gmlake.backend_time_ns"]
            if k % 2 == 0:
                native_s.append(run(step, True))
                gmlake_s.append(run(step, False))
            else:
                gmlake_s.append(run(step, False))
                native_s.append(run(step, True))
            stats_after = gmlake.torch.memory_stats()
            step_vmm_ms.append(round((stats_after["gmlake.backend_time_ns"] - before) / 1e6, 3))
            for key, counts in step_counts.items():
                counts.append(stats_after[f"gmlake.{key}"] - stats_before[f"gmlake.{key}"])
            step_reserved.append(stats_after["reserved_bytes.all.current"])
        if recording:
            torch.cuda.memory._dump_snapshot(args.history_out)
            torch.cuda.memory._record_memory_history(enabled=None)
        shapes = [getattr(step, "shapes", None) for step in steps]
        del steps
        s = gmlake.torch.memory_stats()
        nat = gmlake.torch.native_memory_stats()
        step_counts["reserved_bytes"] = step_reserved
        return native_s, gmlake_s, s0, s_warm, s, nat, step_vmm_ms, gc_ms, step_counts, shapes

    rounds = []
    for _ in range(max(1, args.rounds)):
        native_s, gmlake_s, s0, s_warm, s, nat, step_vmm_ms, gc_ms, step_counts, shapes = one_round()
        timed = max(1, args.steps - warm)
        ratios = [g / n for g, n in zip(gmlake_s[warm:], native_s[warm:])]
        rounds.append({
            "median_ratio_gmlake_to_native": statistics.median(ratios),
            "mean_ratio_gmlake_to_native": statistics.fmean(ratios),
            # throughput is the sum of step times: the total over the timed pairs is the figure that counts
            "total_ratio_gmlake_to_native": sum(gmlake_s[warm:]) / sum(native_s[warm:]),
            "pairs_gmlake_faster": sum(r < 1 for r in ratios),
            "total_s_gmlake": sum(gmlake_s[warm:]), "total_s_native": sum(native_s[warm:]),
            "median_step_s_gmlake": statistics.median(gmlake_s[warm:]),
            "median_step_s_native": statistics.median(native_s[warm:]),
            "step_times_s_gmlake": [round(t, 5) for t in gmlake_s],
            "step_times_s_native": [round(t, 5) for t in native_s],
            "step_backend_ms_gmlake": step_vmm_ms, "gc_ms": gc_ms,
            # per pair: gmlake's backend calls, chunks created and evictions in its step, and the inputs' shapes
            "step_backend_calls_gmlake": step_counts["backend_calls"],
            "step_chunks_created_gmlake": step_counts["chunks_created"],
            "step_evictions_gmlake": step_counts["evictions"], "step_input_shapes": shapes,
            "step_waiting_growths_gmlake": step_counts["waiting_growths"],
            "step_reserved_bytes_gmlake": step_counts["reserved_bytes"],
            "gmlake_peak_reserved": s["reserved_bytes.all.peak"], "native_peak_reserved": nat["reserved_bytes.all.peak"],
            # peak allocated bytes: utilization on the GPU is gmlake_peak_allocated / gmlake_peak_reserved
            "gmlake_peak_allocated": s["allocated_bytes.all.peak"],
            "native_peak_allocated": nat["allocated_bytes.all.peak"],
            "gmlake_backend_calls_per_step": (s["gmlake.backend_calls"] - s0["gmlake.backend_calls"]) / args.steps,
            "gmlake_backend_ms_per_step":
                (s["gmlake.backend_time_ns"] - s0["gmlake.backend_time_ns"]) / args.steps / 1e6,
            "gmlake_fence_waits": s["gmlake.fence_waits"] - s0["gmlake.fence_waits"],
            "gmlake_in_order_evictions": s.get("gmlake.in_order_evictions", 0) - s0.get("gmlake.in_order_evictions", 0),
            # the same over the timed pairs only (the two above include the warm pairs, where the layout forms)
            "gmlake_timed_backend_calls_per_step": (s["gmlake.backend_calls"] - s_warm["gmlake.backend_calls"]) / timed,
            "gmlake_timed_backend_ms_per_step":
                (s["gmlake.backend_time_ns"] - s_warm["gmlake.backend_time_ns"]) / timed / 1e6,
        })
    total_g = sum(r["total_s_gmlake"] for r in rounds)
    total_n = sum(r["total_s_native"] for r in rounds)
    last = rounds[-1]
    result = {
        "model": args.model, "alloc": "ab", "batch": args.batch, "pairs": args.steps, "warm_pairs": warm,
        "rounds": rounds,
        "total_ratio_gmlake_to_native": total_g / total_n,
        "max_round_total_ratio": max(r["total_ratio_gmlake_to_native"] for r in rounds),
        # the last round's figures, under the names a single round always had
        **{k: v for k, v in last.items() if k not in ("total_ratio_gmlake_to_native",)},
        "torch": torch.__version__,
    }
    text = json.dumps(result)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
