"""End-to-end training under one allocator: PyTorch native, PyTorch expandable_segments, or gmlake.

    python bench/torch/train.py --model gpt2 --alloc gmlake --steps 40 --json out.json

--alloc native | expandable | gmlake (the c10 allocator extension) | gmlake-pluggable (CUDAPluggableAllocator). `expandable` must be chosen before CUDA starts, so each run is its own
process. Models are built from transformers / torchvision configs with random weights (no downloads), seed
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
    p.add_argument("--model", choices=["gpt2", "bert", "resnet50"], default="gpt2")
    p.add_argument("--alloc", choices=["native", "expandable", "gmlake", "gmlake-pluggable"], default="native")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--cap-gb", type=float, default=0, help="memory cap in GB (10^9 bytes); 0 = none")
    p.add_argument("--conf", default="", help="extra GMLAKE_CONF entries")
    p.add_argument("--json", default="")
    return p.parse_args()


def main():
    args = parse()
    if args.alloc == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch

    gmlake_mode = None
    if args.alloc.startswith("gmlake"):
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
        import gmlake

        conf = ",".join(c for c in [args.conf, f"cap_bytes:{int(args.cap_gb * 1e9)}" if args.cap_gb else ""] if c)
        gmlake.torch.enable(conf, extension=args.alloc == "gmlake")  # gmlake-pluggable: CUDAPluggableAllocator
        gmlake_mode = gmlake.torch.mode()
    torch.manual_seed(1234)
    import random

    rng = random.Random(1234)
    dev = torch.device("cuda")
    if args.cap_gb and not args.alloc.startswith("gmlake"):
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.cap_gb * 1e9 / total))

    if args.model == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12)).to(dev)
        vocab = model.config.vocab_size

        def batch():
            seq = rng.randint(64, 1024)
            x = torch.randint(0, vocab, (args.batch, seq), device=dev)
            return lambda: model(input_ids=x, labels=x).loss
    elif args.model == "bert":
        from transformers import BertConfig, BertForSequenceClassification

        model = BertForSequenceClassification(BertConfig(num_labels=2)).to(dev)

        def batch():
            seq = rng.randint(32, 512)
            x = torch.randint(0, model.config.vocab_size, (args.batch, seq), device=dev)
            y = torch.randint(0, 2, (args.batch,), device=dev)
            return lambda: model(input_ids=x, labels=y).loss
    else:
        import torchvision

        model = torchvision.models.resnet50().to(dev)
        loss_fn = torch.nn.CrossEntropyLoss()

        def batch():
            x = torch.randn(args.batch, 3, 224, 224, device=dev)
            y = torch.randint(0, 1000, (args.batch,), device=dev)
            return lambda: loss_fn(model(x), y)

    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if args.model == "resnet50"
           else torch.optim.AdamW(model.parameters(), lr=1e-4))
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


if __name__ == "__main__":
    main()
