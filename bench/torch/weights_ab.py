"""Does it matter which allocator holds a model's weights? GPT-2 generate (model_swap_serve's draws: greedy, KV
cache, batch U[1,4], prompt U[16,128], U[8,24] new tokens, bf16, random weights) with the same weights moved to the
GPU twice in one process: once into gmlake's pool, once into PyTorch's own (inside gmlake.torch.native()).

    python3 bench/torch/weights_ab.py [--conf GMLAKE_CONF] [--calls 20] [--pairs 6] > out.json

Why: model_swap_serve's gap (docs/benchmarks.md, nineteenth session) is in its generate calls, in runs with no
VMM call, while train.py's generate A/B, where both arms share weights moved in once under gmlake, runs at
native's time. Here the weights' allocator is the only difference between the two arms; the activations (KV cache,
logits) come from one allocator for both, first PyTorch's, then gmlake's. Each arm runs the same --calls draws,
the arms alternating, --pairs times per activation allocator, after one untimed pass of each.
Also, per copy of the weights, the device time of the logits' GEMV over the 77 MB embedding (F.linear of one
token's hidden state against wte; CUDA events, median of 200): a kernel that only reads the weights.
Prints one JSON object: per activation allocator, each pair's seconds and the total ratio gmlake-held weights /
native-held weights; per holder the GEMV's µs, the embedding's bytes and its address modulo 2 MiB.
"""
import argparse
import contextlib
import copy
import json
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def draws(n, seed=1234):
    """`n` generate calls as model_swap_serve draws them for GPT-2: (batch, prompt tokens, new tokens)."""
    rng = random.Random(seed)
    return [(rng.randint(1, 4), rng.randint(16, 128), rng.randint(8, 24)) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conf", default="")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=6)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch
    import gmlake.torch
    gmlake.torch.enable(conf=args.conf or None, extension=True)
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(1234)
    cfg = GPT2Config(activation_function="gelu_pytorch_tanh")
    host_model = GPT2LMHeadModel(cfg).eval().to(torch.bfloat16)
    models = {"gmlake": copy.deepcopy(host_model).to("cuda")}
    with gmlake.torch.native():
        models["native"] = copy.deepcopy(host_model).to("cuda")
    calls = draws(args.calls)

    def run(model, native_activations):
        ctx = gmlake.torch.native() if native_activations else contextlib.nullcontext()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with ctx, torch.no_grad():
            for b, t, n in calls:
                ids = torch.randint(0, cfg.vocab_size, (b, t), device="cuda")
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                               max_new_tokens=n, min_new_tokens=n, pad_token_id=cfg.eos_token_id, use_cache=True)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    out = {"conf": args.conf, "calls": args.calls, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "activations": {}}
    for native_activations in (True, False):
        for holder in ("native", "gmlake"):
            run(models[holder], native_activations)  # untimed: kernels chosen, pools warm
        pairs = []
        for i in range(args.pairs):
            order = ("native", "gmlake") if i % 2 == 0 else ("gmlake", "native")
            r = {holder: run(models[holder], native_activations) for holder in order}
            pairs.append({"native_weights_s": round(r["native"], 4), "gmlake_weights_s": round(r["gmlake"], 4)})
        out["activations"]["native" if native_activations else "gmlake"] = {
            "pairs": pairs,
            "total_ratio": sum(p["gmlake_weights_s"] for p in pairs) / sum(p["native_weights_s"] for p in pairs)}
        print("activations", "native" if native_activations else "gmlake", out["activations"], file=sys.stderr,
              flush=True)  # seen even where a time limit stops the run later

    gemv = {}
    with gmlake.torch.native():
        x = torch.randn(1, cfg.n_embd, device="cuda", dtype=torch.bfloat16)
        for holder, model in models.items():
            w = model.transformer.wte.weight
            times = []
            for _ in range(220):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.nn.functional.linear(x, w)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1000)
            gemv[holder] = {"us": round(statistics.median(times[20:]), 2), "bytes": w.numel() * w.element_size(),
                            "address_mod_2mib": w.data_ptr() % (2 << 20)}
    out["wte_gemv"] = gemv
    print(json.dumps(out))


if __name__ == "__main__":
    main()
