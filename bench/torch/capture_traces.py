"""Captures PyTorch memory snapshots of workloads that do NOT repeat step after step (issue 10, "Traces").

Each workload runs in its own `torch.cuda.memory._record_memory_history(enabled="all", context=None,
stacks="python", max_entries=...)` session, is dumped with `torch.cuda.memory._dump_snapshot`, then xz-compressed
(lzma, preset 9, in a background process while the next workload runs) to <xz-dir>/<name>.snapshot.pickle.xz.
Beside it, <json-dir>/<name>.native.json holds max_memory_allocated / max_memory_reserved, the workload's
parameters (every per-call draw), wall time, and the trace's event counts, streams and lower bound (peak of live
requested bytes). Random weights built from transformers / torchvision configs, no downloads, seed 1234.

Workloads (see each function's docstring):
  gpt2_generate        GPT-2 small `model.generate`, batch / prompt length / new tokens drawn per call, bf16, KV cache
  llm_offload_streams  LLaMA-style inference, layer weights in pinned CPU memory, prefetched 2 layers ahead on two
                       copy streams, logits copied back on a fourth stream; batch / prompt / decode length per request
  cnn_varres           ResNet-50 bf16 inference and training steps, resolution 128..768 px and batch drawn per call
  calib_layerwise      GPTQ-like layer-by-layer calibration: per layer, move it to the GPU, accumulate X^T X per
                       linear, Cholesky, blockwise fake-quantization with error feedback, next layer's inputs
  moe_varload          4 MoE layers (top-2 of 8 experts, by hand), forward+backward+AdamW, tokens and router skew
                       drawn per step, so the tokens per expert vary
  unet3d_infer         a 3D UNet's bf16 inference on volumes of 64..192 voxels a side, batch 1..2 (GB tensors)
  calib_awq_1b         AWQ-like layer-by-layer calibration of a ~1.1B LLaMA-style model, activations collected
  bert_infer_varbatch  BERT-base bf16 inference, batch 1..128 and sequence 64..512 drawn per call
  gpt2_generate_small  GPT-2 small `model.generate`, batch 1..4, prompt 16..256, 16..48 new tokens (CPU-bound)
Added as a held-out check of the default (none of them shaped it):
  vit_train            ViT-B/16 training, fixed shape (batch 64, 224 px), AdamW, bf16 autocast
  t5_train_varlen      T5-small-shaped seq2seq training, source / target lengths drawn per step
  lora_ckpt_train      peft LoRA on a ~0.3B LLaMA-style model, gradient checkpointing, sequence drawn per step
  gpt2_beam            GPT-2 medium beam search (4 beams), batch / prompt / new tokens drawn per call
  unet2d_bucket_train  latent-diffusion-style UNet training, aspect-ratio buckets drawn per step
  prefetch_stream_train ResNet-18 training with inputs copied on a side stream, record_stream to the default
  detection_train      Faster R-CNN (MobileNetV3 FPN) training, image sizes and box counts drawn per image
  gnn_train            3-layer GCN (index_add_), a new random graph of 20k..400k nodes each step
  diffusion_cfg_infer  the UNet2D sampled with classifier-free guidance, 12 steps, bucket and batch per call
  llama_accum_train    ~0.15B LLaMA-style full training, 4 micro-batches per step, sequence drawn per micro-batch
  recsys_train         DLRM-like recommender, 8 embedding tables of 500k x 128, batch drawn per step
Held out a second time (2026-11-26):
  llm_serve_contbatch  LLaMA-style serving by continuous batching: 8 requests in flight, per-request KV caches
                       grown by torch.cat, requests joining and leaving at their own lengths
  act_offload_train    GPT-2-shaped training, saved activations offloaded to pinned host memory (save_on_cpu)
  pipeline_streams_infer ResNet-50 in two stages on two streams, micro-batches handed over with record_stream
  whisper_train        Whisper-base-shaped speech training, batch and transcript length drawn per step
  dpo_train            DPO of a LLaMA-style policy against a frozen reference, fp32 logits, lengths per step
  bert_train_eval      BERT fine-tuning with an evaluation pass (batch 256, longer sequences) every 5 steps
  vae_decode_varres    a VAE decoder's bf16 inference at latent sizes 32..128 a side, batch 1..4 (GB tensors)
Held out a third time (2026-11-27, tenth session):
  clip_contrastive_train CLIP (ViT-B/32 + text tower) contrastive training, batch and caption length per step
  seg_train_fp16       DeepLabV3 (MobileNetV3) segmentation training, fp16 + GradScaler, crop and batch per step
  video_infer_varclip  R(2+1)D-18 video inference, frames / side / batch drawn per call
  distill_mlm_train    MLM logit distillation: frozen BERT-large-shaped teacher, 4-layer student, sequence per step
  compiled_gpt_train   a 6-layer GPT trained under torch.compile (inductor's buffers), sequence from 4 buckets
Held out a fourth time (2026-11-27, eleventh session):
  fsdp_like_train      one rank of FSDP2-style training: flat shards, unshard on an all-gather stream one block
                       ahead, per-block recompute, gradients reduce-scattered on a third stream (record_stream)
  lstm_lm_train        a 2-layer cuDNN LSTM language model, batch and sequence drawn per step (RNN workspaces)
  convnext_multiscale_train ConvNeXt-T multi-scale training, side 160..320 px per step at constant pixels
  ppo_rollout_train    RLHF-style: a LLaMA-style policy samples (generate, KV cache), then two policy-gradient
                       updates on the rollout, in turn
Held out a fifth time (2026-11-27, twelfth session):
  gan_train            DCGAN-style adversarial training at 128 px, two Adam optimizers
  spec_decode_infer    speculative decoding (transformers' assistant_model): two KV caches grown and cut back
  sweep_train          a hyper-parameter sweep: each trial a new model width and batch in one process
  pointcloud_train     PointNet-style classification of clouds of varying size (per-point activations)
Held out a sixth time (2026-11-28, sixteenth session):
  embed_infer_sorted   BERT-large-shaped sentence embeddings, shards sorted by length: batches rise short to long
  int8_weight_generate weight-only int8 LLaMA-style generate: a bf16 temporary per linear per use, KV by torch.cat
  longctx_chunked_prefill documents of 4k-32k tokens prefilled in chunks of 2,048 into a KV cache sized per
                       document (GB tensors of a new size every document), then a short answer decoded
  mae_pretrain         masked-autoencoder pretraining (ViT-B/16 encoder on 25% of patches, a small decoder), fixed
Held out a seventh time (2026-11-28, seventeenth session):
  token_budget_train   GPT-2-shaped training with batches cut by a token budget: length and batch change each step
  stochastic_depth_train a ViT-S-shaped classifier whose blocks are skipped at random per step (stochastic depth)
  zero_offload_train   ZeRO-Offload-style: gradients copied to pinned host memory on a side stream, parameters
                       replaced by new GPU tensors after a host AdamW step
  rag_two_model_serve  a BERT embedder and a GPT-2 generator taking turns per request batch
Held out an eighth time (2026-11-28, eighteenth session):
  graphed_decode_serve LLM decode replayed from CUDA graphs (one per batch bucket, one shared private pool) around
                       eager prefills of varying batch and prompt
  model_swap_serve     four models on a server with room for two: weights moved in and out by demand (LRU)
  ckpt_longseq_train   LLaMA-style training with checkpointing on every layer, 1k-8k tokens per sequence per step
Held out a ninth time (2026-11-29, twenty-third session):
  ssm_lm_train         a Mamba-2-style state-space LM (chunked scan written here), sequence 512..4,096 per step
  maskrcnn_infer       Mask R-CNN inference, image sizes, batch and detections kept drawn per call (pasted masks)
  multistream_embed_serve BERT-base embeddings, four requests at once on four streams, handed back with record_stream
  chunked_ce_train     a 128k-vocabulary LLaMA-style LM whose head and loss run in checkpointed chunks of 2,048 tokens
  vector_search_infer  exact top-k search over a 2 GB vector database in blocks of 500k rows, appended to as it serves
Held out a tenth time (2026-11-29, twenty-fifth session):
  sparse_embed_train   skip-gram embeddings (2 x 2M x 128) with sparse gradients and SparseAdam, batch per step
  unfreeze_finetune_train BERT-base fine-tuned with gradual unfreezing: a layer more trainable every 10 steps
  simclr_varbatch_train SimCLR-style ResNet-18 pretraining, batch 256..2,048 per step (2B x 2B similarities)
  sam_prompt_infer     Segment-Anything-shaped inference: a ViT-B encoder at 1,024 px, 1..64 prompts per image
Held out an eleventh time (2026-11-29, twenty-sixth session):
  dino_multicrop_train DINO-style self-distillation: ViT-S/16 student and EMA teacher, 2..8 local crops per step
  nerf_rays_train      Instant-NGP-style radiance field: 16 hash tables (2^19 x 2), rays and samples per step
  lora_adapter_serve   one decoder, 24 LoRA adapters from pinned host memory, per-request adapters in a batch
  resume_ckpt_train    GPT-style training that copies its state to the host and rebuilds model and optimizer
Written for a twelfth held-out batch (2026-12-07, twenty-ninth session), captured in the thirtieth (run 196, unchanged):
  pipeline_1f1b_train  a GPT-style decoder in 4 stages run in the 1F1B schedule, 8 micro-batches, stage inputs
                       detached (up to four micro-batches' activations per stage, freed oldest first)
  t5_beam_generate     T5-small-shaped encoder-decoder beam search (4 beams), batch / source / new tokens per call
  shampoo_like_train   ResNet-18 with a Shampoo-like optimizer: per-matrix statistics, eigh roots every 5th step

With --unrecorded, each workload runs a second time with the same draws and the same number of calls (every
ctx.fits() answered as in the recorded run) without recording, and its wall time goes to the JSON as
workload_unrecorded_s: the workload's own time, without the recorder's cost.

    python3 bench/torch/capture_traces.py --xz-dir traces --json-dir traces [--only gpt2_generate,...]

Each workload guards itself (try/except; a time budget and an allocation budget checked between its calls, so a
trace stays under ~300k events); a failed workload still dumps what it recorded, marked "error" in its JSON.
"""

import argparse
import gc
import json
import math
import os
import pickle
import random
import subprocess
import sys
import time
import traceback

SEED = 1234
GB = 1e9

torch = None  # imported in main(), so that --help works anywhere
F = None


def _allocs():
    return torch.cuda.memory_stats().get("allocation.all.allocated", 0)


class Ctx:
    """A workload's budget: wall seconds and number of allocations (about 3 trace events each)."""

    def __init__(self, budget_s, max_allocs):
        self.budget_s = budget_s
        self.max_allocs = max_allocs
        self.t0 = time.time()
        self.a0 = _allocs()
        self.stopped_by = None

    def allocs(self):
        return _allocs() - self.a0

    def elapsed(self):
        return time.time() - self.t0

    def fits(self, est_allocs=0, est_s=0.0):
        """True while the next call, estimated at est_allocs allocations and est_s seconds, fits the budget."""
        if self.elapsed() + est_s > self.budget_s:
            self.stopped_by = "time"
            return False
        if self.allocs() + est_allocs > self.max_allocs:
            self.stopped_by = "allocs"
            return False
        self.calls_fitted += 1
        return True

    calls_fitted = 0


class ReplayCtx(Ctx):
    """The same workload again, unrecorded: fits() says yes exactly as often as it did in the recorded run."""

    def __init__(self, calls_fitted):
        super().__init__(float("inf"), float("inf"))
        self.left = calls_fitted

    def fits(self, est_allocs=0, est_s=0.0):
        self.left -= 1
        return self.left >= 0


def optimizer_step(loss, opt):
    """The end of a training step, as the training workloads here end it: backward, the optimizer's step, and the
    gradients dropped (set_to_none, so that their memory goes back to the allocator before the next step)."""
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


_GPT_BLOCK = None


def gpt_block(d, h):
    """A pre-norm GPT block of width d with h heads (LayerNorm, causal scaled_dot_product_attention, a 4d GELU
    MLP), as compiled_gpt_train and resume_ckpt_train use it; the class is made on first use (torch is imported in
    main())."""
    global _GPT_BLOCK
    if _GPT_BLOCK is None:
        nn = torch.nn

        class Block(nn.Module):
            def __init__(self, d, h):
                super().__init__()
                self.h = h
                self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
                self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
                self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

            def forward(self, x):
                b, t, d = x.shape
                q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
                x = x + self.proj(a)
                return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

        _GPT_BLOCK = Block
    return _GPT_BLOCK(d, h)


def rms_norm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rope_tables(hd, max_pos, device, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    t = torch.arange(max_pos, device=device, dtype=torch.float32)
    f = torch.outer(t, inv)
    emb = torch.cat([f, f], dim=-1)
    return emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)


def apply_rope(x, cos, sin):
    # x: (B, heads, T, hd); cos/sin: (T, hd)
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + rot * sin


def llama_block(x, w, cfg, cos, sin, pos, cache=None, hooks=None):
    """One LLaMA decoder layer written with functional ops; w holds its weights (out, in).
    cache: (k_cache, v_cache) of (B, kv_heads, T_max, hd) written at [pos, pos+T); hooks(name, input) sees each
    linear's input (calibration)."""
    B, T, H = x.shape
    nh, kvh = cfg["heads"], cfg["kv_heads"]
    hd = H // nh

    def lin(name, inp):
        if hooks is not None:
            hooks(name, inp)
        return inp @ w[name].t()

    h = rms_norm(x, w["ln1"])
    q = lin("wq", h).view(B, T, nh, hd).transpose(1, 2)
    k = lin("wk", h).view(B, T, kvh, hd).transpose(1, 2)
    v = lin("wv", h).view(B, T, kvh, hd).transpose(1, 2)
    c, s = cos[pos:pos + T], sin[pos:pos + T]
    q = apply_rope(q, c, s)
    k = apply_rope(k, c, s)
    if cache is not None:
        kc, vc = cache
        kc[:, :, pos:pos + T] = k
        vc[:, :, pos:pos + T] = v
        k = kc[:, :, :pos + T]
        v = vc[:, :, :pos + T]
    a = F.scaled_dot_product_attention(q, k, v, is_causal=(T > 1 and pos == 0), enable_gqa=True)
    a = a.transpose(1, 2).reshape(B, T, H)
    x = x + lin("wo", a)
    h = rms_norm(x, w["ln2"])
    m = F.silu(lin("wg", h)) * lin("wu", h)
    x = x + lin("wd", m)
    return x


def llama_cfg(hidden, inter, layers, heads, kv_heads, vocab=32000, max_pos=4096):
    from transformers import LlamaConfig
    c = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                    num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                    max_position_embeddings=max_pos)
    return {"hidden": c.hidden_size, "inter": c.intermediate_size, "layers": c.num_hidden_layers,
            "heads": c.num_attention_heads, "kv_heads": c.num_key_value_heads, "vocab": c.vocab_size,
            "max_pos": c.max_position_embeddings, "config": "transformers.LlamaConfig"}


def cpu_layer_weights(cfg, gen, dtype, pin):
    H, I, nh, kvh = cfg["hidden"], cfg["inter"], cfg["heads"], cfg["kv_heads"]
    hd = H // nh
    shapes = {"ln1": (H,), "wq": (H, H), "wk": (kvh * hd, H), "wv": (kvh * hd, H), "wo": (H, H), "ln2": (H,),
              "wg": (I, H), "wu": (I, H), "wd": (H, I)}
    w = {}
    for k, shp in shapes.items():
        if k.startswith("ln"):
            t = torch.ones(shp, dtype=dtype)
        else:
            t = (torch.randn(shp, generator=gen, dtype=torch.float32) * (1.0 / math.sqrt(shp[1]))).to(dtype)
        w[k] = t.pin_memory() if pin else t
    return w


# ---------------------------------------------------------------------------------------------------------------
def w_gpt2_generate(ctx, p):
    """GPT-2 small (12 layers, d 768; activation gelu_pytorch_tanh, the fused form of GPT-2's gelu_new) bf16,
    `model.generate` greedy with KV cache (DynamicCache), batch 1..32, prompt 16..512, new tokens 8..32 drawn per
    call (min_new_tokens = max_new_tokens, so every call runs its full length)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    rng = random.Random(SEED)
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024, activation_function="gelu_pytorch_tanh")
    model = GPT2LMHeadModel(cfg).eval()
    model = model.to("cuda", torch.bfloat16)
    p.update(model="GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024, "
                   "activation_function='gelu_pytorch_tanh'))", dtype="bfloat16", calls=[],
             draws="batch U[1,32], prompt U[16,512], new tokens U[8,32]", max_calls=p.get("max_calls", 30))
    per_token = 260.0  # allocations per generated token and per call's prefill, refined as calls complete
    for i in range(p["max_calls"]):
        b, t, n = rng.randint(1, 32), rng.randint(16, 512), rng.randint(8, 32)
        if not ctx.fits(est_allocs=int(per_token * (n + 2))):
            break
        a0 = ctx.allocs()
        ids = torch.randint(0, cfg.vocab_size, (b, t), device="cuda")
        mask = torch.ones_like(ids)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=n,
                                 min_new_tokens=n, pad_token_id=cfg.eos_token_id, use_cache=True)
        got = int(out.shape[1] - t)
        del out, ids, mask
        per_token = max(per_token, (ctx.allocs() - a0) / (n + 2))
        p["calls"].append([b, t, n, got])
    p["allocs_per_token_est"] = round(per_token, 1)


def w_llm_offload_streams(ctx, p):
    """LLaMA-style decoder (LlamaConfig hidden 2048, intermediate 5632, 16 layers, 16 heads, 4 KV heads), bf16.
    Layer weights live in pinned CPU memory; each pass copies layer i+2's weights to the GPU on copy stream
    (i % 2) while layer i runs on the default stream (events order them; record_stream on the default stream
    before the copies are dropped). Embedding, final norm and LM head stay on the GPU. Each request: batch
    U[1,16], prompt U[64,1024], decode U[2,8] tokens with a per-request KV cache; every pass's logits are copied
    back to pinned CPU memory on a fourth stream (record_stream). Streams: default + 2 copy + 1 out."""
    cfg = llama_cfg(2048, 5632, 16, 16, 4)
    gen = torch.Generator().manual_seed(SEED)
    dt = torch.bfloat16
    L, H, kvh = cfg["layers"], cfg["hidden"], cfg["kv_heads"]
    hd = H // cfg["heads"]
    cpu_layers = [cpu_layer_weights(cfg, gen, dt, pin=True) for _ in range(L)]
    rng = random.Random(SEED)
    p.update(model=cfg, dtype="bfloat16", prefetch=2, streams="default (compute), copy0, copy1, out",
             draws="batch U[1,16], prompt U[64,1024], decode tokens U[2,8]", requests=[],
             max_requests=p.get("max_requests", 24))
    ctx.t0 = time.time()  # CPU weight init is not the workload
    emb = torch.randn(cfg["vocab"], H, device="cuda", dtype=dt) * 0.02
    lm_head = torch.randn(cfg["vocab"], H, device="cuda", dtype=dt) * 0.02
    ln_f = torch.ones(H, device="cuda", dtype=dt)
    cos, sin = rope_tables(hd, cfg["max_pos"], "cuda")
    compute = torch.cuda.current_stream()
    copy_streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    out_stream = torch.cuda.Stream()
    P = 2

    def fetch(i):
        s = copy_streams[i % 2]
        with torch.cuda.stream(s):
            w = {k: v.to("cuda", non_blocking=True) for k, v in cpu_layers[i].items()}
            ev = torch.cuda.Event()
            ev.record(s)
        return w, ev

    def forward(tokens, pos, caches):
        x = emb[tokens]
        pending = [fetch(j) for j in range(min(P, L))]
        for i in range(L):
            w, ev = pending.pop(0)
            if i + P < L:
                pending.append(fetch(i + P))
            compute.wait_event(ev)
            for t in w.values():
                t.record_stream(compute)
            x = llama_block(x, w, cfg, cos, sin, pos, cache=caches[i])
            del w
        logits = rms_norm(x[:, -1], ln_f) @ lm_head.t()
        done = torch.cuda.Event()
        done.record(compute)
        with torch.cuda.stream(out_stream):
            out_stream.wait_event(done)
            host = torch.empty(logits.shape, dtype=dt, pin_memory=True)
            host.copy_(logits, non_blocking=True)
            logits.record_stream(out_stream)
        nxt = logits.argmax(-1, keepdim=True)
        return nxt, host

    per_pass = 600.0
    for r in range(p["max_requests"]):
        b, t, n = rng.randint(1, 16), rng.randint(64, 1024), rng.randint(2, 8)
        if not ctx.fits(est_allocs=int(per_pass * (n + 1))):
            break
        a0 = ctx.allocs()
        with torch.no_grad():
            caches = [(torch.empty(b, kvh, t + n, hd, device="cuda", dtype=dt),
                       torch.empty(b, kvh, t + n, hd, device="cuda", dtype=dt)) for _ in range(L)]
            tokens = torch.randint(0, cfg["vocab"], (b, t), device="cuda")
            nxt, host = forward(tokens, 0, caches)
            pos = t
            for _ in range(n - 1):
                nxt, host = forward(nxt, pos, caches)
                pos += 1
            out_stream.synchronize()
            del caches, tokens, nxt, host
        per_pass = max(per_pass, (ctx.allocs() - a0) / (n + 1))
        p["requests"].append([b, t, n])
    torch.cuda.synchronize()
    p["allocs_per_pass_est"] = round(per_pass, 1)


def w_cnn_varres(ctx, p):
    """torchvision ResNet-50 (random weights) in bf16: a random mix of inference calls (eval, no_grad; batch U[1,32])
    and training steps (train mode, cross-entropy, SGD momentum 0.9; batch U[1,16]), each at a square resolution
    drawn from 128..768 px in steps of 32. Probability of a training step 0.3."""
    import torchvision
    rng = random.Random(SEED)
    model = torchvision.models.resnet50(weights=None).to("cuda", torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    p.update(model="torchvision.models.resnet50(weights=None)", dtype="bfloat16", calls=[],
             draws="train with p=0.3; res 32*U[4,24]; batch U[1,32] (infer) / U[1,16] (train)",
             max_calls=p.get("max_calls", 80))
    for i in range(p["max_calls"]):
        train = rng.random() < 0.3
        res = 32 * rng.randint(4, 24)
        b = rng.randint(1, 16) if train else rng.randint(1, 32)
        if not ctx.fits(est_allocs=1500):
            break
        x = torch.randn(b, 3, res, res, device="cuda", dtype=torch.bfloat16)
        if train:
            model.train()
            y = torch.randint(0, 1000, (b,), device="cuda")
            loss = F.cross_entropy(model(x).float(), y)
            optimizer_step(loss, opt)
            del loss, y
        else:
            model.eval()
            with torch.no_grad():
                out = model(x)
                del out
        del x
        p["calls"].append(["train" if train else "infer", b, res])
    torch.cuda.synchronize()


def w_calib_layerwise(ctx, p):
    """GPTQ-like calibration of a LLaMA-style model (LlamaConfig hidden 2048, intermediate 5632, 12 layers, 16
    heads, 4 KV heads), weights bf16 on the CPU. Calibration set: 128 samples x 512 tokens (random embeddings on
    the GPU), run 8 samples per forward. For each layer in turn: copy it to the GPU; forward all samples with a
    hook that accumulates H = X^T X (fp32) per linear (q, k, v, o, gate, up, down; one H each, as GPTQ's
    per-module hooks do); per linear: dead columns, damping 1% of mean diag, Cholesky, cholesky_inverse, upper
    Cholesky of the inverse, then 4-bit asymmetric per-row fake quantization in blocks of 128 columns with the
    block's error propagated to the remaining columns (block-level, no per-column inner loop); forward all samples
    again through the quantized layer to make the next layer's inputs (inputs/outputs buffers swapped); copy the
    quantized layer back to the CPU and free it."""
    cfg = llama_cfg(2048, 5632, 12, 16, 4)
    gen = torch.Generator().manual_seed(SEED)
    dt = torch.bfloat16
    L, H = cfg["layers"], cfg["hidden"]
    hd = H // cfg["heads"]
    cpu_layers = [cpu_layer_weights(cfg, gen, dt, pin=False) for _ in range(L)]
    nsamples, seqlen, bs, block = 128, 512, 8, 128
    p.update(model=cfg, dtype="bfloat16 weights, fp32 Hessians", nsamples=nsamples, seqlen=seqlen,
             batch_per_forward=bs, quant="4-bit asymmetric per output row", block=block, damp=0.01,
             layers_done=0)
    ctx.t0 = time.time()
    cos, sin = rope_tables(hd, seqlen, "cuda")
    inps = torch.randn(nsamples, seqlen, H, device="cuda", dtype=dt)
    outs = torch.empty_like(inps)
    maxq = 15
    in_of = {"wq": H, "wk": H, "wv": H, "wo": H, "wg": H, "wu": H, "wd": cfg["inter"]}

    def quantize(W, Hs):
        W = W.float().clone()
        Hs = Hs.clone()
        dead = torch.diag(Hs) == 0
        Hs[dead, dead] = 1
        W[:, dead] = 0
        damp = 0.01 * torch.mean(torch.diag(Hs))
        Hs.diagonal().add_(damp)
        for attempt in range(5):
            Lc, info = torch.linalg.cholesky_ex(Hs)
            if int(info) == 0:
                break
            Hs.diagonal().add_(damp * 10 ** attempt)  # not positive definite yet: more damping, as GPTQ users do
        Hinv = torch.cholesky_inverse(Lc)
        Hinv = torch.linalg.cholesky(Hinv, upper=True)
        del Lc, Hs
        wmin = W.amin(1, keepdim=True).clamp(max=0)
        wmax = W.amax(1, keepdim=True).clamp(min=0)
        scale = ((wmax - wmin) / maxq).clamp(min=1e-8)
        zero = torch.round(-wmin / scale)
        Q = torch.zeros_like(W)
        cols = W.shape[1]
        for i1 in range(0, cols, block):
            i2 = min(i1 + block, cols)
            W1 = W[:, i1:i2].clone()
            Q1 = (torch.clamp(torch.round(W1 / scale) + zero, 0, maxq) - zero) * scale
            Err1 = (W1 - Q1) / torch.diag(Hinv[i1:i2, i1:i2])
            Q[:, i1:i2] = Q1
            if i2 < cols:
                W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
            del W1, Q1, Err1
        return Q.to(dt)

    with torch.no_grad():
        for li in range(L):
            if not ctx.fits(est_s=8.0):
                break
            w = {k: v.to("cuda") for k, v in cpu_layers[li].items()}
            Hs = {k: torch.zeros(n, n, device="cuda", dtype=torch.float32) for k, n in in_of.items()}
            counts = {"n": 0}

            def hook(name, inp):
                xf = inp.reshape(-1, inp.shape[-1]).float()
                Hs[name].addmm_(xf.t(), xf)

            for b0 in range(0, nsamples, bs):
                outs[b0:b0 + bs] = llama_block(inps[b0:b0 + bs], w, cfg, cos, sin, 0, hooks=hook)
                counts["n"] += bs * seqlen
            for k in in_of:
                Hs[k].mul_(2.0 / counts["n"])
                w[k] = quantize(w[k], Hs[k])
                del Hs[k]
            for b0 in range(0, nsamples, bs):
                outs[b0:b0 + bs] = llama_block(inps[b0:b0 + bs], w, cfg, cos, sin, 0)
            cpu_layers[li] = {k: v.to("cpu") for k, v in w.items()}
            del w, Hs
            inps, outs = outs, inps
            p["layers_done"] = li + 1
    torch.cuda.synchronize()


def w_gpt2_generate_small(ctx, p):
    """GPT-2 small bf16 `model.generate` (greedy, KV cache) as a chat server with few users sees it: batch 1..4,
    prompt 16..256, new tokens 16..48 drawn per call. CPU-bound: the GPU waits for the host between kernels."""
    from transformers import GPT2Config, GPT2LMHeadModel
    rng = random.Random(SEED)
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024, activation_function="gelu_pytorch_tanh")
    model = GPT2LMHeadModel(cfg).eval().to("cuda", torch.bfloat16)
    p.update(model="GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024, "
                   "activation_function='gelu_pytorch_tanh'))", dtype="bfloat16", calls=[],
             draws="batch U[1,4], prompt U[16,256], new tokens U[16,48]", max_calls=p.get("max_calls", 60))
    for i in range(p["max_calls"]):
        b, t, n = rng.randint(1, 4), rng.randint(16, 256), rng.randint(16, 48)
        if not ctx.fits(est_allocs=300 * (n + 2)):
            break
        ids = torch.randint(0, cfg.vocab_size, (b, t), device="cuda")
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=n, min_new_tokens=n, pad_token_id=cfg.eos_token_id, use_cache=True)
        del out, ids
        p["calls"].append([b, t, n])


def w_bert_infer_varbatch(ctx, p):
    """BERT-base (BertForSequenceClassification, random weights) bf16 inference, no grad: batch U[1,128] and
    sequence length from {64, 128, 256, 384, 512} drawn per call, as a serving queue that batches what came."""
    from transformers import BertConfig, BertForSequenceClassification
    rng = random.Random(SEED)
    model = BertForSequenceClassification(BertConfig(num_labels=2)).eval().to("cuda", torch.bfloat16)
    p.update(model="BertForSequenceClassification(BertConfig(num_labels=2))", dtype="bfloat16", calls=[],
             draws="batch U[1,128], seq from {64,128,256,384,512}", max_calls=p.get("max_calls", 200))
    for i in range(p["max_calls"]):
        b, t = rng.randint(1, 128), rng.choice([64, 128, 256, 384, 512])
        if not ctx.fits(est_allocs=400):
            break
        ids = torch.randint(0, 30522, (b, t), device="cuda")
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        del out, ids
        p["calls"].append([b, t])


def w_unet3d_infer(ctx, p):
    """A 3D UNet (4 levels, 32..256 channels, random weights) in bf16, eval, no grad, on volumes whose sides are
    drawn from 64..192 voxels (steps of 32) and batch 1..2 per call: activations of up to ~2 GB each."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from models import unet3d
    rng = random.Random(SEED)
    model = unet3d(torch).eval().to("cuda", torch.bfloat16)
    p.update(model="UNet3D(base=32, levels=4) (bench/torch/models.py)", dtype="bfloat16", calls=[],
             draws="batch U[1,2], each side 32*U[2,6]", max_calls=p.get("max_calls", 60))
    for i in range(p["max_calls"]):
        b = rng.randint(1, 2)
        d, h, w = (32 * rng.randint(2, 6) for _ in range(3))
        if not ctx.fits(est_allocs=200, est_s=2.0):
            break
        x = torch.randn(b, 1, d, h, w, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            out = model(x)
        del out, x
        p["calls"].append([b, d, h, w])
    torch.cuda.synchronize()


def w_calib_awq_1b(ctx, p):
    """AWQ-like activation-aware calibration of a ~1.1B LLaMA-style model (LlamaConfig hidden 2048, intermediate
    5632, 22 layers, 32 heads, 4 KV heads: TinyLlama's shape), weights bf16 on the CPU. Calibration set: 64
    samples x 512 tokens (random embeddings on the GPU), 8 per forward. For each layer in turn: copy it to the
    GPU; forward all samples with hooks that collect every linear's input activations (kept on the GPU, as AWQ
    caches them) and their per-channel mean |x|; per linear, a grid of 10 scaling exponents alpha: scales
    s = mean|x|^alpha, 4-bit fake quantization of W*s in groups of 128, output error of Q(W*s)/s on the collected
    activations; keep the best; forward all samples again through the quantized layer for the next layer's
    inputs; copy the layer back."""
    cfg = llama_cfg(2048, 5632, 22, 32, 4)
    gen = torch.Generator().manual_seed(SEED)
    dt = torch.bfloat16
    L, H = cfg["layers"], cfg["hidden"]
    hd = H // cfg["heads"]
    cpu_layers = [cpu_layer_weights(cfg, gen, dt, pin=False) for _ in range(L)]
    nsamples, seqlen, bs, group = 64, 512, 8, 128
    p.update(model=cfg, dtype="bfloat16", nsamples=nsamples, seqlen=seqlen, batch_per_forward=bs,
             quant="4-bit asymmetric, groups of 128 input columns", alphas=10, layers_done=0)
    ctx.t0 = time.time()
    cos, sin = rope_tables(hd, seqlen, "cuda")
    inps = torch.randn(nsamples, seqlen, H, device="cuda", dtype=dt)
    outs = torch.empty_like(inps)

    def fake_quant(W):
        shape = W.shape
        Wg = W.float().reshape(-1, group)
        wmin, wmax = Wg.amin(1, keepdim=True), Wg.amax(1, keepdim=True)
        scale = ((wmax - wmin) / 15).clamp(min=1e-8)
        zero = torch.round(-wmin / scale)
        return ((torch.clamp(torch.round(Wg / scale) + zero, 0, 15) - zero) * scale).reshape(shape).to(W.dtype)

    with torch.no_grad():
        for li in range(L):
            if not ctx.fits(est_s=6.0):
                break
            w = {k: v.to("cuda") for k, v in cpu_layers[li].items()}
            acts = {k: [] for k in ("wq", "wk", "wv", "wo", "wg", "wu", "wd")}

            def hook(name, inp):
                acts[name].append(inp.reshape(-1, inp.shape[-1])[::16].clone())  # a sample of the rows, as AWQ

            for b0 in range(0, nsamples, bs):
                outs[b0:b0 + bs] = llama_block(inps[b0:b0 + bs], w, cfg, cos, sin, 0, hooks=hook)
            for k, chunks in acts.items():
                x = torch.cat(chunks)
                acts[k] = None
                del chunks
                x_mean = x.abs().float().mean(0)
                ref = x @ w[k].t()
                best, best_err = None, None
                for alpha in [i / 10 for i in range(10)]:
                    s = x_mean.pow(alpha).clamp(min=1e-4)
                    s = (s / (s.max() * s.min()).sqrt()).to(dt)
                    q = fake_quant(w[k] * s) / s
                    err = (x @ q.t() - ref).float().pow(2).mean().item()
                    if best_err is None or err < best_err:
                        best, best_err = q, err
                    del q, s
                w[k] = best
                del x, ref, best
            for b0 in range(0, nsamples, bs):
                outs[b0:b0 + bs] = llama_block(inps[b0:b0 + bs], w, cfg, cos, sin, 0)
            cpu_layers[li] = {k: v.to("cpu") for k, v in w.items()}
            del w, acts
            inps, outs = outs, inps
            p["layers_done"] = li + 1
    torch.cuda.synchronize()


def w_moe_varload(ctx, p):
    """4 residual MoE layers (RMSNorm, router d->8, top-2 of 8 SwiGLU experts d 2048 -> 4096 -> 2048, gates
    renormalised), by hand: tokens sorted by expert, one matmul chain per expert, index_add_ back. bf16 params,
    AdamW (foreach). Per step: tokens U[2048,16384] and a router bias N(0, s^2) per expert with s U[0,2.5] per
    step, so the tokens per expert vary by step; loss = mean square of the output; forward+backward+step."""
    rng = random.Random(SEED)
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    D, Fd, E, K, NL = 2048, 4096, 8, 2, 4
    dt = torch.bfloat16

    def par(*shape, scale):
        return torch.nn.Parameter(torch.randn(*shape, device="cuda", dtype=dt, generator=gen) * scale)

    layers = []
    for _ in range(NL):
        layers.append({
            "ln": torch.nn.Parameter(torch.ones(D, device="cuda", dtype=dt)),
            "router": par(D, E, scale=D ** -0.5),
            "w1": [par(D, Fd, scale=D ** -0.5) for _ in range(E)],
            "w3": [par(D, Fd, scale=D ** -0.5) for _ in range(E)],
            "w2": [par(Fd, D, scale=Fd ** -0.5) for _ in range(E)],
        })
    params = []
    for l in layers:
        params += [l["ln"], l["router"]] + l["w1"] + l["w3"] + l["w2"]
    opt = torch.optim.AdamW(params, lr=1e-4)
    p.update(model=f"{NL} MoE layers, d {D}, ffn {Fd}, {E} experts, top-{K}", dtype="bfloat16", optimizer="AdamW",
             draws="tokens U[2048,16384], router bias N(0, s^2) per expert with s U[0,2.5] per step", steps=[],
             max_steps=p.get("max_steps", 24))

    def moe(x, l, bias, loads):
        h = rms_norm(x, l["ln"])
        logits = (h @ l["router"]).float() + bias
        probs = logits.softmax(-1)
        topw, topi = probs.topk(K, dim=-1)
        topw = (topw / topw.sum(-1, keepdim=True)).to(dt)
        flat = topi.reshape(-1)
        order = flat.argsort()
        counts = torch.bincount(flat, minlength=E).tolist()
        loads.append(counts)
        tok = order // K
        xs = h[tok]
        outs = []
        for e, part in enumerate(xs.split(counts)):
            if counts[e] == 0:
                continue
            a = F.silu(part @ l["w1"][e]) * (part @ l["w3"][e])
            outs.append(a @ l["w2"][e])
        ys = torch.cat(outs) * topw.reshape(-1)[order].unsqueeze(1)
        out = torch.zeros_like(x).index_add(0, tok, ys)
        return x + out

    for step in range(p["max_steps"]):
        T = rng.randint(2048, 16384)
        s = rng.uniform(0.0, 2.5)
        if not ctx.fits(est_allocs=2500):
            break
        bias = torch.randn(E, device="cuda", generator=gen) * s
        x = torch.randn(T, D, device="cuda", dtype=dt, generator=gen)
        loads = []
        for l in layers:
            x = moe(x, l, bias, loads)
        loss = x.float().pow(2).mean()
        optimizer_step(loss, opt)
        p["steps"].append({"tokens": T, "skew": round(s, 3), "loss": round(float(loss), 5), "tokens_per_expert": loads})
        del x, loss, bias
    torch.cuda.synchronize()


# --- Workloads added 2026-11-26 (sixth session) as a held-out check of the default: none of them shaped it. -------
def w_vit_train(ctx, p):
    """torchvision ViT-B/16 (random weights) training, fixed shape: batch 64 at 224 px, cross-entropy, AdamW (foreach),
    bf16 autocast over fp32 parameters. The same shape every step, as an image-classification run."""
    import torchvision
    model = torchvision.models.vit_b_16(weights=None).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    p.update(model="torchvision.models.vit_b_16(weights=None)", dtype="fp32 params, bf16 autocast", optimizer="AdamW",
             batch=64, res=224, steps=0, max_steps=p.get("max_steps", 30))
    for step in range(p["max_steps"]):
        if not ctx.fits(est_allocs=1500):
            break
        x = torch.randn(64, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (64,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        optimizer_step(loss, opt)
        del x, y, loss
        p["steps"] += 1
    torch.cuda.synchronize()


def w_t5_train_varlen(ctx, p):
    """T5 encoder-decoder (T5Config d_model 512, d_ff 2048, 6+6 layers, 8 heads: t5-small's shape, random weights)
    seq2seq training: batch 16, source length U[32,512], target length U[8,128] drawn per step, AdamW, bf16 autocast
    over fp32 parameters."""
    from transformers import T5Config, T5ForConditionalGeneration
    rng = random.Random(SEED)
    cfg = T5Config(d_model=512, d_ff=2048, num_layers=6, num_decoder_layers=6, num_heads=8, vocab_size=32128,
                   decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    p.update(model="T5ForConditionalGeneration(T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8))",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", batch=16,
             draws="source U[32,512], target U[8,128] per step", steps=[], max_steps=p.get("max_steps", 80))
    for step in range(p["max_steps"]):
        s, t = rng.randint(32, 512), rng.randint(8, 128)
        if not ctx.fits(est_allocs=2500):
            break
        src = torch.randint(1, cfg.vocab_size, (16, s), device="cuda")
        tgt = torch.randint(1, cfg.vocab_size, (16, t), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=src, attention_mask=torch.ones_like(src), labels=tgt).loss
        optimizer_step(loss, opt)
        del src, tgt, loss
        p["steps"].append([s, t])
    torch.cuda.synchronize()


def w_lora_ckpt_train(ctx, p):
    """LoRA fine-tuning (peft, r 16 on q/k/v/o) of a LLaMA-style model (LlamaConfig hidden 1024, intermediate 2816,
    16 layers, 16 heads, 4 KV heads, vocab 32000; ~0.3B parameters, bf16 base weights, frozen) with gradient
    checkpointing (non-reentrant): batch 4, sequence U[128,2048] per step, AdamW over the adapters."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from peft import LoraConfig, get_peft_model
    rng = random.Random(SEED)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=4096)
    model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj",
                                                                                   "o_proj"], lora_dropout=0.0))
    model.train()
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=1e-4)
    p.update(model="peft LoRA r=16 (q,k,v,o) on LlamaForCausalLM(hidden 1024, inter 2816, 16 layers, 16/4 heads)",
             dtype="bfloat16", optimizer="AdamW (adapters)", batch=4, gradient_checkpointing="non-reentrant",
             draws="sequence U[128,2048] per step", steps=[], max_steps=p.get("max_steps", 60))
    for step in range(p["max_steps"]):
        t = rng.randint(128, 2048)
        if not ctx.fits(est_allocs=4000):
            break
        ids = torch.randint(0, cfg.vocab_size, (4, t), device="cuda")
        loss = model(input_ids=ids, labels=ids).loss
        optimizer_step(loss, opt)
        del ids, loss
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_gpt2_beam(ctx, p):
    """GPT-2 medium (24 layers, d 1024, 16 heads, random weights) bf16 beam search, 4 beams (the cache reordered
    every token): batch U[1,8], prompt U[32,384], new tokens U[16,64] per call."""
    from transformers import GPT2Config, GPT2LMHeadModel
    rng = random.Random(SEED)
    cfg = GPT2Config(n_layer=24, n_embd=1024, n_head=16, n_positions=1024, activation_function="gelu_pytorch_tanh")
    model = GPT2LMHeadModel(cfg).eval().to("cuda", torch.bfloat16)
    p.update(model="GPT2LMHeadModel(GPT2Config(n_layer=24, n_embd=1024, n_head=16))", dtype="bfloat16", beams=4,
             draws="batch U[1,8], prompt U[32,384], new tokens U[16,64]", calls=[], max_calls=p.get("max_calls", 40))
    beam_search_calls(ctx, p, rng, model, (0, cfg.vocab_size), (32, 384), 500, pad_token_id=cfg.eos_token_id)


def beam_search_calls(ctx, p, rng, model, token_range, prompt_range, est_allocs_per_token, **generate_kwargs):
    """The calls of a beam-search workload (gpt2_beam, t5_beam_generate): per call, batch U[1,8], a prompt of
    U[prompt_range] random tokens drawn from [token_range), U[16,64] new tokens (min = max: random weights would
    stop early), `generate` with 4 beams and a KV cache; each call's draws go to p["calls"]."""
    for i in range(p["max_calls"]):
        b, t, n = rng.randint(1, 8), rng.randint(*prompt_range), rng.randint(16, 64)
        if not ctx.fits(est_allocs=est_allocs_per_token * (n + 2)):
            break
        ids = torch.randint(*token_range, (b, t), device="cuda")
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=4,
                                 max_new_tokens=n, min_new_tokens=n, use_cache=True, **generate_kwargs)
        del out, ids
        p["calls"].append([b, t, n])
    torch.cuda.synchronize()


def w_unet2d_bucket_train(ctx, p):
    """A latent-diffusion-style 2D UNet (bench/torch/models.py unet2d: 4 input channels, 128..512 channels, residual
    blocks with GroupNorm and SiLU, self-attention at the lowest level, random weights) trained on noise prediction
    with aspect-ratio buckets: each step draws a latent shape from 7 buckets of about 64x64 (64x64, 48x80, 80x48,
    56x72, 72x56, 40x96, 96x40) with batch 16; MSE loss, AdamW, bf16 autocast over fp32 parameters."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from models import unet2d
    rng = random.Random(SEED)
    model = unet2d(torch).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    buckets = [(64, 64), (48, 80), (80, 48), (56, 72), (72, 56), (40, 96), (96, 40)]
    p.update(model="UNet2D(base=128, levels=4, attention at the lowest level) (bench/torch/models.py)",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", batch=16, buckets=buckets, steps=[],
             max_steps=p.get("max_steps", 60))
    for step in range(p["max_steps"]):
        h, w = rng.choice(buckets)
        if not ctx.fits(est_allocs=1500):
            break
        x = torch.randn(16, 4, h, w, device="cuda")
        noise = torch.randn_like(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(model(x + noise).float(), noise)
        optimizer_step(loss, opt)
        del x, noise, loss
        p["steps"].append([h, w])
    torch.cuda.synchronize()


def w_prefetch_stream_train(ctx, p):
    """torchvision ResNet-18 (random weights) training, channels-last, bf16 autocast, SGD momentum 0.9, batch 256 at
    160 px, with its inputs prefetched one step ahead: each batch is made in pinned host memory, copied on a side
    stream (non_blocking), the default stream waits on an event, and the batch is handed over with
    record_stream(default stream): two allocating streams, and frees that wait for the other stream's work."""
    import torchvision
    model = torchvision.models.resnet18(weights=None).cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    gen = torch.Generator().manual_seed(SEED)
    p.update(model="torchvision.models.resnet18(weights=None), channels_last", dtype="fp32 params, bf16 autocast",
             optimizer="SGD momentum 0.9", batch=256, res=160, prefetch="side stream, one step ahead", steps=0,
             max_steps=p.get("max_steps", 60))

    def fetch():
        x = torch.randn(256, 3, 160, 160, generator=gen).pin_memory()
        y = torch.randint(0, 1000, (256,), generator=gen).pin_memory()
        with torch.cuda.stream(side):
            xd = x.to("cuda", non_blocking=True).to(memory_format=torch.channels_last)
            yd = y.to("cuda", non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(side)
        return xd, yd, ev

    nxt = fetch()
    for step in range(p["max_steps"]):
        if not ctx.fits(est_allocs=800):
            break
        x, y, ev = nxt
        main.wait_event(ev)
        x.record_stream(main)
        y.record_stream(main)
        nxt = fetch()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        optimizer_step(loss, opt)
        del x, y, loss
        p["steps"] += 1
    del nxt
    torch.cuda.synchronize()


def w_detection_train(ctx, p):
    """torchvision Faster R-CNN (MobileNetV3-Large FPN backbone, random weights, 91 classes) training: batch 4 of
    images whose sides are drawn from 320..800 px per image, 1..20 random boxes each, SGD momentum 0.9, fp32. The
    detector resizes and pads each batch to its largest image, so every step has its own shapes."""
    import torchvision
    rng = random.Random(SEED)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(
        weights=None, weights_backbone=None, num_classes=91).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    p.update(model="fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None, num_classes=91)",
             dtype="float32", optimizer="SGD momentum 0.9", batch=4,
             draws="per image: height, width U[320,800], boxes U[1,20]", steps=[], max_steps=p.get("max_steps", 80))
    for step in range(p["max_steps"]):
        shapes = [(rng.randint(320, 800), rng.randint(320, 800), rng.randint(1, 20)) for _ in range(4)]
        if not ctx.fits(est_allocs=3000):
            break
        images, targets = [], []
        for h, w, n in shapes:
            images.append(torch.rand(3, h, w, device="cuda"))
            xy = torch.rand(n, 2, device="cuda") * torch.tensor([w * 0.7, h * 0.7], device="cuda")
            wh = torch.rand(n, 2, device="cuda") * torch.tensor([w * 0.3, h * 0.3], device="cuda") + 8
            targets.append({"boxes": torch.cat([xy, xy + wh], 1),
                            "labels": torch.randint(1, 91, (n,), device="cuda")})
        losses = model(images, targets)
        loss = sum(losses.values())
        optimizer_step(loss, opt)
        del images, targets, losses, loss
        p["steps"].append(shapes)
    torch.cuda.synchronize()


def w_gnn_train(ctx, p):
    """A 3-layer graph convolution network written with index_add_ (mean aggregation over random edges), hidden 256,
    trained full-batch on a new random graph each step: nodes U[20k,400k], 8 edges per node, node features 128,
    cross-entropy over 32 classes, AdamW, fp32. Every step's tensors scale with its graph."""
    rng = random.Random(SEED)
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    dims = [128, 256, 256, 32]
    ws = [torch.nn.Parameter(torch.randn(a, b, device="cuda", generator=gen) * a ** -0.5)
          for a, b in zip(dims[:-1], dims[1:])]
    opt = torch.optim.AdamW(ws, lr=1e-3)
    p.update(model="3-layer GCN (index_add_ mean aggregation), dims 128-256-256-32", dtype="float32",
             optimizer="AdamW", draws="nodes U[20000,400000], edges 8 per node", steps=[],
             max_steps=p.get("max_steps", 60))
    for step in range(p["max_steps"]):
        n = rng.randint(20_000, 400_000)
        if not ctx.fits(est_allocs=300):
            break
        e = 8 * n
        src = torch.randint(0, n, (e,), device="cuda", generator=gen)
        dst = torch.randint(0, n, (e,), device="cuda", generator=gen)
        deg = torch.zeros(n, device="cuda").index_add_(0, dst, torch.ones(e, device="cuda")).clamp_(min=1)
        h = torch.randn(n, dims[0], device="cuda", generator=gen)
        y = torch.randint(0, dims[-1], (n,), device="cuda", generator=gen)
        for i, w in enumerate(ws):
            m = torch.zeros(n, h.shape[1], device="cuda").index_add_(0, dst, h[src]) / deg.unsqueeze(1)
            h = (m + h) @ w
            if i < len(ws) - 1:
                h = F.relu(h)
        loss = F.cross_entropy(h, y)
        optimizer_step(loss, opt)
        del src, dst, deg, h, y, m, loss
        p["steps"].append(n)
    torch.cuda.synchronize()


def w_diffusion_cfg_infer(ctx, p):
    """Sampling with the latent-diffusion-style UNet of unet2d_bucket_train (bench/torch/models.py unet2d, random
    weights) in bf16, no grad, with classifier-free guidance (the batch doubled every denoising step): per call a
    latent shape from the same 7 buckets, batch U[1,4], 12 denoising steps (Euler-like update)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from models import unet2d
    rng = random.Random(SEED)
    model = unet2d(torch).eval().to("cuda", torch.bfloat16)
    buckets = [(64, 64), (48, 80), (80, 48), (56, 72), (72, 56), (40, 96), (96, 40)]
    p.update(model="UNet2D(base=128, levels=4) (bench/torch/models.py)", dtype="bfloat16", guidance="CFG, batch x2",
             draws="bucket from 7, batch U[1,4]; 12 steps", calls=[], max_calls=p.get("max_calls", 40))
    for i in range(p["max_calls"]):
        (h, w), b = rng.choice(buckets), rng.randint(1, 4)
        if not ctx.fits(est_allocs=12 * 400):
            break
        x = torch.randn(b, 4, h, w, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            for t in range(12):
                eps = model(torch.cat([x, x]))
                cond, uncond = eps.chunk(2)
                x = x - 0.05 * (uncond + 7.5 * (cond - uncond))
                del eps, cond, uncond
        del x
        p["calls"].append([b, h, w])
    torch.cuda.synchronize()


def w_llama_accum_train(ctx, p):
    """Full training of a LLaMA-style model (LlamaConfig hidden 768, intermediate 2048, 12 layers, 12 heads, vocab
    32000; ~0.15B parameters, random weights) with gradient accumulation: 4 micro-batches of batch 8 per optimizer
    step, each micro-batch's sequence length drawn from U[128,1024]; bf16 autocast over fp32 parameters, AdamW.
    Gradients live across the micro-batches."""
    from transformers import LlamaConfig, LlamaForCausalLM
    rng = random.Random(SEED)
    cfg = LlamaConfig(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                      num_key_value_heads=12, vocab_size=32000, max_position_embeddings=2048)
    model = LlamaForCausalLM(cfg).cuda().train()
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    p.update(model="LlamaForCausalLM(hidden 768, inter 2048, 12 layers, 12 heads, vocab 32000)",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", batch=8, accumulation=4,
             draws="sequence U[128,1024] per micro-batch", steps=[], max_steps=p.get("max_steps", 20))
    for step in range(p["max_steps"]):
        lens = [rng.randint(128, 1024) for _ in range(4)]
        if not ctx.fits(est_allocs=4 * 1500):
            break
        for t in lens:
            ids = torch.randint(0, cfg.vocab_size, (8, t), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss / 4
            loss.backward()
            del ids, loss
        opt.step()
        opt.zero_grad(set_to_none=True)
        p["steps"].append(lens)
    torch.cuda.synchronize()


def w_recsys_train(ctx, p):
    """A DLRM-like recommender: 8 embedding tables (500k x 128 each, dense gradients), a bottom MLP over 13 dense
    features, pairwise dot-product interaction, a top MLP; batch drawn from U[1024,32768] per step (16 lookups per
    table and sample, mean-pooled with embedding_bag), BCE loss, AdamW, fp32."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    T, R, D = 8, 500_000, 128
    tables = torch.nn.ModuleList([torch.nn.EmbeddingBag(R, D, mode="mean") for _ in range(T)]).cuda()
    bottom = torch.nn.Sequential(torch.nn.Linear(13, 512), torch.nn.ReLU(), torch.nn.Linear(512, D)).cuda()
    top = torch.nn.Sequential(torch.nn.Linear(D + (T + 1) * T // 2, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1)).cuda()
    params = list(tables.parameters()) + list(bottom.parameters()) + list(top.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    iu = torch.triu_indices(T + 1, T + 1, offset=1, device="cuda")
    p.update(model=f"DLRM-like: {T} EmbeddingBag({R}, {D}, mean), bottom MLP 13-512-{D}, top MLP -1024-512-1",
             dtype="float32", optimizer="AdamW", draws="batch U[1024,32768], 16 lookups per table and sample",
             steps=[], max_steps=p.get("max_steps", 40))
    for step in range(p["max_steps"]):
        b = rng.randint(1024, 32768)
        if not ctx.fits(est_allocs=600):
            break
        dense = torch.randn(b, 13, device="cuda")
        embs = [bottom(dense)]
        for t in tables:
            idx = torch.randint(0, R, (b, 16), device="cuda")
            embs.append(t(idx))
        z = torch.stack(embs, 1)
        inter = (z @ z.transpose(1, 2))[:, iu[0], iu[1]]
        logit = top(torch.cat([embs[0], inter], 1)).squeeze(1)
        loss = F.binary_cross_entropy_with_logits(logit, torch.rand(b, device="cuda").round())
        optimizer_step(loss, opt)
        del dense, embs, z, inter, logit, loss
        p["steps"].append(b)
    torch.cuda.synchronize()


# Held out a second time (2026-11-26): none of these shaped the default either.
def serve_layer(x, w, cfg, reqs, li, cos, sin, prefill):
    """One LLaMA decoder layer (llama_block's weights) over the requests `reqs` in flight, x (len(reqs), T, H): the
    linear layers batched, attention per request over its own KV cache, grown by torch.cat (as transformers'
    DynamicCache grows it) at the request's position."""
    B, T, H = x.shape
    nh, kvh = cfg["heads"], cfg["kv_heads"]
    hd = H // nh
    h = rms_norm(x, w["ln1"])
    q = (h @ w["wq"].t()).view(B, T, nh, hd).transpose(1, 2)
    k = (h @ w["wk"].t()).view(B, T, kvh, hd).transpose(1, 2)
    v = (h @ w["wv"].t()).view(B, T, kvh, hd).transpose(1, 2)
    outs = []
    for b, r in enumerate(reqs):
        c, s = cos[r["pos"]:r["pos"] + T], sin[r["pos"]:r["pos"] + T]
        qb, kb, vb = apply_rope(q[b:b + 1], c, s), apply_rope(k[b:b + 1], c, s), v[b:b + 1].contiguous()
        kc, vc = r["cache"][li]
        if kc is not None:
            kb, vb = torch.cat([kc, kb], 2), torch.cat([vc, vb], 2)
        r["cache"][li] = (kb, vb)
        outs.append(F.scaled_dot_product_attention(qb, kb, vb, is_causal=prefill, enable_gqa=True))
    a = torch.cat(outs, 0).transpose(1, 2).reshape(B, T, H)
    x = x + a @ w["wo"].t()
    h = rms_norm(x, w["ln2"])
    return x + (F.silu(h @ w["wg"].t()) * (h @ w["wu"].t())) @ w["wd"].t()


def w_llm_serve_contbatch(ctx, p):
    """A LLaMA-style decoder (LlamaConfig hidden 1024, intermediate 2816, 4 layers, 16 heads, 4 KV heads, vocab
    32000; random weights, bf16, embedding tied to the output) serving requests by continuous batching: up to 8
    requests in flight, each with its own KV cache grown by torch.cat every token; a request joins as soon as one
    leaves (its prompt prefilled alone) and leaves at its own output length; every decode step runs the requests in
    flight as one batch through the linear layers and attends per request (serve_layer). Per request: prompt
    U[32,1024], output U[8,96] tokens, greedy."""
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    cfg = llama_cfg(1024, 2816, 4, 16, 4)
    hd = cfg["hidden"] // cfg["heads"]
    layers = [{k: t.cuda() for k, t in cpu_layer_weights(cfg, gen, torch.bfloat16, False).items()}
              for _ in range(cfg["layers"])]
    emb = (torch.randn(cfg["vocab"], cfg["hidden"], generator=gen) * 0.02).to(torch.bfloat16).cuda()
    cos, sin = rope_tables(hd, 2048, "cuda")
    p.update(model="LLaMA-style decoder (serve_layer), " + json.dumps({k: cfg[k] for k in ("hidden", "inter",
             "layers", "heads", "kv_heads", "vocab")}), dtype="bfloat16", in_flight=8,
             draws="per request: prompt U[32,1024], output U[8,96]", requests=[], decode_steps=0,
             max_requests=p.get("max_requests", 200))
    active = []
    admitted = 0
    with torch.no_grad():
        while True:
            while len(active) < 8 and admitted < p["max_requests"]:
                t, n = rng.randint(32, 1024), rng.randint(8, 96)
                if not ctx.fits(est_allocs=60 * cfg["layers"]):
                    active = []
                    break
                admitted += 1
                r = {"pos": 0, "left": n, "cache": [(None, None)] * cfg["layers"]}
                x = emb[torch.randint(0, cfg["vocab"], (1, t), device="cuda")]
                for li, w in enumerate(layers):
                    x = serve_layer(x, w, cfg, [r], li, cos, sin, True)
                r["pos"] = t
                r["tok"] = (x[:, -1:] @ emb.t()).argmax(-1)
                del x
                active.append(r)
                p["requests"].append([t, n])
            if not active or ctx.stopped_by:
                break
            if not ctx.fits(est_allocs=12 * len(active) * cfg["layers"]):
                break
            x = emb[torch.cat([r["tok"] for r in active], 0)]
            for li, w in enumerate(layers):
                x = serve_layer(x, w, cfg, active, li, cos, sin, False)
            toks = (x @ emb.t()).argmax(-1)
            del x
            for b, r in enumerate(active):
                r["pos"] += 1
                r["left"] -= 1
                r["tok"] = toks[b:b + 1]
            del toks
            active = [r for r in active if r["left"] > 0]
            p["decode_steps"] += 1
    del active
    torch.cuda.synchronize()


def w_act_offload_train(ctx, p):
    """GPT-2-shaped training (GPT2Config n_layer 12, n_embd 1024, n_head 16; random weights) with every activation
    that autograd saves offloaded to pinned host memory during the forward and copied back during the backward
    (torch.autograd.graph.save_on_cpu(pin_memory=True)): batch 8, sequence U[128,1024] per step, bf16 autocast over
    fp32 parameters, AdamW."""
    from transformers import GPT2Config, GPT2LMHeadModel
    rng = random.Random(SEED)
    cfg = GPT2Config(n_layer=12, n_embd=1024, n_head=16, n_positions=1024, activation_function="gelu_pytorch_tanh")
    model = GPT2LMHeadModel(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    p.update(model="GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=1024, n_head=16))",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", batch=8,
             offload="torch.autograd.graph.save_on_cpu(pin_memory=True)", draws="sequence U[128,1024] per step",
             steps=[], max_steps=p.get("max_steps", 60))
    for step in range(p["max_steps"]):
        t = rng.randint(128, 1024)
        if not ctx.fits(est_allocs=2500, est_s=1.0):
            break
        ids = torch.randint(0, cfg.vocab_size, (8, t), device="cuda")
        with torch.autograd.graph.save_on_cpu(pin_memory=True):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
        optimizer_step(loss, opt)
        del ids, loss
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_pipeline_streams_infer(ctx, p):
    """torchvision ResNet-50 (random weights, bf16, eval, no grad) cut in two stages run as a pipeline on two
    streams: stage 1 (stem to layer2) on one stream, stage 2 (layer3 to fc) on another, which waits on an event per
    micro-batch of 8; each stage-1 output is handed over with record_stream, the outputs gathered on the default
    stream. Per call: batch U[8,96] at a side drawn from 160..320 px in steps of 32."""
    import torchvision
    rng = random.Random(SEED)
    m = torchvision.models.resnet50(weights=None).eval().to("cuda", torch.bfloat16)
    stage1 = torch.nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1, m.layer2)
    stage2 = torch.nn.Sequential(m.layer3, m.layer4, m.avgpool, torch.nn.Flatten(), m.fc)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    main = torch.cuda.current_stream()
    p.update(model="torchvision.models.resnet50(weights=None) in two stages (stem..layer2 | layer3..fc)",
             dtype="bfloat16", streams="stage 1, stage 2, default", micro_batch=8,
             draws="batch U[8,96], side 32*U[5,10]", calls=[], max_calls=p.get("max_calls", 200))
    with torch.no_grad():
        for i in range(p["max_calls"]):
            b, res = rng.randint(8, 96), 32 * rng.randint(5, 10)
            if not ctx.fits(est_allocs=40 * b):
                break
            x = torch.randn(b, 3, res, res, device="cuda", dtype=torch.bfloat16)
            s1.wait_stream(main)
            outs = []
            for mb in x.split(8):
                with torch.cuda.stream(s1):
                    h = stage1(mb)
                    ev = torch.cuda.Event()
                    ev.record(s1)
                with torch.cuda.stream(s2):
                    s2.wait_event(ev)
                    h.record_stream(s2)
                    outs.append(stage2(h))
                del h
            x.record_stream(s1)
            main.wait_stream(s2)
            for o in outs:
                o.record_stream(main)
            y = torch.cat(outs).float().softmax(-1)
            del x, outs, y
            p["calls"].append([b, res])
    torch.cuda.synchronize()


def w_whisper_train(ctx, p):
    """A Whisper-base-shaped speech model (WhisperConfig d_model 512, 6+6 layers, 8 heads, FFN 2048, 80 mel bins;
    random weights) trained on random 30 s log-mel inputs (80 x 3000): batch U[4,16] and transcript length
    U[16,224] drawn per step, bf16 autocast over fp32 parameters, AdamW."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    rng = random.Random(SEED)
    cfg = WhisperConfig(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                        decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, num_mel_bins=80)
    model = WhisperForConditionalGeneration(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    p.update(model="WhisperForConditionalGeneration(WhisperConfig(d_model=512, 6+6 layers, 8 heads, ffn 2048))",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW",
             draws="batch U[4,16], transcript U[16,224] per step", steps=[], max_steps=p.get("max_steps", 80))
    for step in range(p["max_steps"]):
        b, t = rng.randint(4, 16), rng.randint(16, 224)
        if not ctx.fits(est_allocs=2000):
            break
        feats = torch.randn(b, 80, 3000, device="cuda")
        labels = torch.randint(0, cfg.vocab_size - 100, (b, t), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_features=feats, labels=labels).loss
        optimizer_step(loss, opt)
        del feats, labels, loss
        p["steps"].append([b, t])
    torch.cuda.synchronize()


def w_dpo_train(ctx, p):
    """Direct preference optimization (DPO, beta 0.1) of a LLaMA-style policy (LlamaConfig hidden 1024, intermediate
    2816, 8 layers, 16 heads, 4 KV heads, vocab 32000; random weights, fp32, bf16 autocast, AdamW) against a frozen
    bf16 reference copy: per step 4 pairs of chosen / rejected responses in one batch of 8, prompt U[64,256] and
    response U[32,512] tokens; per-token log-probabilities from fp32 logits (log_softmax, gather), the reference's
    under no_grad."""
    from transformers import LlamaConfig, LlamaForCausalLM
    rng = random.Random(SEED)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
    policy = LlamaForCausalLM(cfg).cuda().train()
    policy.config.use_cache = False
    ref = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    ref.config.use_cache = False
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-5)
    p.update(model="LlamaForCausalLM(hidden 1024, inter 2816, 8 layers, 16/4 heads) policy + bf16 reference",
             dtype="fp32 policy, bf16 autocast; bf16 reference", optimizer="AdamW", pairs=4, beta=0.1,
             draws="prompt U[64,256], response U[32,512] per step", steps=[], max_steps=p.get("max_steps", 60))

    def logps(model, ids, start):
        logits = model(input_ids=ids).logits.float()
        lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        return lp[:, start - 1:].sum(-1)

    for step in range(p["max_steps"]):
        tp, tr = rng.randint(64, 256), rng.randint(32, 512)
        if not ctx.fits(est_allocs=2500):
            break
        ids = torch.randint(0, cfg.vocab_size, (8, tp + tr), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with torch.no_grad():
                ref_c, ref_r = logps(ref, ids, tp).chunk(2)
            pol_c, pol_r = logps(policy, ids, tp).chunk(2)
        loss = -F.logsigmoid(0.1 * ((pol_c - ref_c) - (pol_r - ref_r))).mean()
        optimizer_step(loss, opt)
        del ids, ref_c, ref_r, pol_c, pol_r, loss
        p["steps"].append([tp, tr])
    torch.cuda.synchronize()


def w_bert_train_eval(ctx, p):
    """BERT-base (BertForSequenceClassification, random weights) fine-tuning with an evaluation pass every 5
    training steps, as a training script with periodic validation runs it: training at batch 32, sequence
    U[64,256], bf16 autocast over fp32 parameters, AdamW; evaluation (eval mode, no grad, bf16 autocast) of 3
    batches of 256 at sequence U[128,512]."""
    from transformers import BertConfig, BertForSequenceClassification
    rng = random.Random(SEED)
    model = BertForSequenceClassification(BertConfig(num_labels=2)).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    p.update(model="BertForSequenceClassification(BertConfig(num_labels=2))", dtype="fp32 params, bf16 autocast",
             optimizer="AdamW", draws="train: batch 32, sequence U[64,256]; eval every 5 steps: 3 x batch 256, "
             "sequence U[128,512]", steps=[], max_steps=p.get("max_steps", 120))
    vocab = model.config.vocab_size
    for step in range(p["max_steps"]):
        if step % 6 == 5:
            seqs = [rng.randint(128, 512) for _ in range(3)]
            if not ctx.fits(est_allocs=3 * 400):
                break
            model.eval()
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                for t in seqs:
                    ids = torch.randint(0, vocab, (256, t), device="cuda")
                    pred = model(input_ids=ids).logits.argmax(-1)
                    del ids, pred
            model.train()
            p["steps"].append(["eval"] + seqs)
            continue
        t = rng.randint(64, 256)
        if not ctx.fits(est_allocs=1500):
            break
        ids = torch.randint(0, vocab, (32, t), device="cuda")
        y = torch.randint(0, 2, (32,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=y).loss
        optimizer_step(loss, opt)
        del ids, y, loss
        p["steps"].append(["train", t])
    torch.cuda.synchronize()


def w_vae_decode_varres(ctx, p):
    """The decoder of a latent-diffusion-style VAE (bench/torch/models.py vae_decoder: 512, 512, 256, 128 channels,
    random weights) in bf16, eval, no grad, decoding latents of 4 channels whose sides are drawn from 32..128 in
    steps of 16 (images of 256..1024 px a side), batch U[1,4]: activations of up to 1 GB each."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from models import vae_decoder
    rng = random.Random(SEED)
    model = vae_decoder(torch).eval().to("cuda", torch.bfloat16)
    p.update(model="vae_decoder(chs=(512, 512, 256, 128)) (bench/torch/models.py)", dtype="bfloat16",
             draws="latent sides 16*U[2,8] each, batch U[1,4]", calls=[], max_calls=p.get("max_calls", 120))
    with torch.no_grad():
        for i in range(p["max_calls"]):
            b, h, w = rng.randint(1, 4), 16 * rng.randint(2, 8), 16 * rng.randint(2, 8)
            if not ctx.fits(est_allocs=120):
                break
            z = torch.randn(b, 4, h, w, device="cuda", dtype=torch.bfloat16)
            img = model(z).clamp_(-1, 1)
            del z, img
            p["calls"].append([b, h, w])
    torch.cuda.synchronize()


def w_clip_contrastive_train(ctx, p):
    """CLIP-style contrastive training (transformers CLIPModel, default CLIPConfig: ViT-B/32 image tower, 12-layer
    text tower; random weights): batch drawn per step from U[32,192], captions of U[16,77] tokens, bf16 autocast
    over fp32 parameters, AdamW. The batch x batch similarity logits and their gradients change size every step."""
    from transformers import CLIPConfig, CLIPModel
    rng = random.Random(SEED)
    model = CLIPModel(CLIPConfig()).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = model.config.text_config.vocab_size
    p.update(model="CLIPModel(CLIPConfig())", dtype="fp32 params, bf16 autocast", optimizer="AdamW",
             draws="batch U[32,192], caption tokens U[16,77], 224 px images", steps=[],
             max_steps=p.get("max_steps", 120))
    for step in range(p["max_steps"]):
        b, t = rng.randint(32, 192), rng.randint(16, 77)
        if not ctx.fits(est_allocs=1200):
            break
        pix = torch.randn(b, 3, 224, 224, device="cuda")
        ids = torch.randint(0, vocab, (b, t), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, pixel_values=pix, return_loss=True).loss
        optimizer_step(loss, opt)
        del pix, ids, loss
        p["steps"].append([b, t])
    torch.cuda.synchronize()


def w_seg_train_fp16(ctx, p):
    """Semantic segmentation training (torchvision deeplabv3_mobilenet_v3_large, 21 classes, random weights) with
    fp16 autocast and a GradScaler, SGD with momentum; square crops drawn per step from 256..640 px in steps of 64
    and batch U[4,16], as multi-scale segmentation training does. Per-pixel logits are upsampled to the crop."""
    import torchvision
    rng = random.Random(SEED)
    model = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=21, aux_loss=False).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    p.update(model="torchvision deeplabv3_mobilenet_v3_large(num_classes=21)", dtype="fp32 params, fp16 autocast, "
             "GradScaler", optimizer="SGD momentum 0.9", draws="crop 64*U[4,10] px, batch U[4,16]", steps=[],
             max_steps=p.get("max_steps", 150))
    for step in range(p["max_steps"]):
        s, b = 64 * rng.randint(4, 10), rng.randint(4, 16)
        if not ctx.fits(est_allocs=900):
            break
        x = torch.randn(b, 3, s, s, device="cuda")
        y = torch.randint(0, 21, (b, s, s), device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x)["out"], y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        del x, y, loss
        p["steps"].append([b, s])
    torch.cuda.synchronize()


def w_video_infer_varclip(ctx, p):
    """Video classification inference (torchvision r2plus1d_18, random weights) in bf16, eval, no grad: clips of
    8, 16 or 32 frames at 112..224 px a side (steps of 16) and batch U[1,8] drawn per call, as a video service
    scoring uploads of different lengths and sizes."""
    import torchvision
    rng = random.Random(SEED)
    model = torchvision.models.video.r2plus1d_18(weights=None).eval().to("cuda", torch.bfloat16)
    p.update(model="torchvision.models.video.r2plus1d_18(weights=None)", dtype="bfloat16",
             draws="frames of {8,16,32}, side 16*U[7,14], batch U[1,8]", calls=[], max_calls=p.get("max_calls", 150))
    with torch.no_grad():
        for i in range(p["max_calls"]):
            t, s, b = rng.choice((8, 16, 32)), 16 * rng.randint(7, 14), rng.randint(1, 8)
            if not ctx.fits(est_allocs=150):
                break
            x = torch.randn(b, 3, t, s, s, device="cuda", dtype=torch.bfloat16)
            pred = model(x).argmax(-1)
            del x, pred
            p["calls"].append([b, t, s])
    torch.cuda.synchronize()


def w_distill_mlm_train(ctx, p):
    """Knowledge distillation of masked-language-model logits: a frozen BERT-large-shaped teacher (24 layers,
    hidden 1024; bf16 weights, eval, no grad) and a 4-layer BERT student (hidden 384) trained on the KL divergence
    between their vocabulary logits (fp32, softmax temperature 2), batch 16, sequence U[64,384] per step, bf16
    autocast, AdamW. Each step holds two batch x sequence x 30522 logit tensors (up to 0.75 GB each in fp32)."""
    from transformers import BertConfig, BertForMaskedLM
    rng = random.Random(SEED)
    teacher = BertForMaskedLM(BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                         intermediate_size=4096)).eval().to("cuda", torch.bfloat16)
    for w in teacher.parameters():
        w.requires_grad_(False)
    student = BertForMaskedLM(BertConfig(hidden_size=384, num_hidden_layers=4, num_attention_heads=6,
                                         intermediate_size=1536)).cuda().train()
    opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
    vocab = student.config.vocab_size
    p.update(model="teacher BertForMaskedLM(24 x 1024, bf16, frozen), student BertForMaskedLM(4 x 384)",
             dtype="student fp32 params, bf16 autocast; KL on fp32 logits", optimizer="AdamW",
             draws="batch 16, sequence U[64,384]", steps=[], max_steps=p.get("max_steps", 120))
    for step in range(p["max_steps"]):
        t = rng.randint(64, 384)
        if not ctx.fits(est_allocs=700):
            break
        ids = torch.randint(0, vocab, (16, t), device="cuda")
        with torch.no_grad():
            soft = F.log_softmax(teacher(input_ids=ids).logits.float() / 2.0, dim=-1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = student(input_ids=ids).logits
        loss = F.kl_div(F.log_softmax(logits.float() / 2.0, dim=-1), soft, log_target=True,
                        reduction="batchmean") * 4.0
        optimizer_step(loss, opt)
        del ids, soft, logits, loss
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_compiled_gpt_train(ctx, p):
    """A 6-layer GPT (hidden 768, 12 heads, vocab 32000, written here with scaled_dot_product_attention) trained under torch.compile (inductor, default mode): Inductor plans its own
    buffers, so the allocation pattern is the compiled graph's, not eager PyTorch's. Batch 16, sequence drawn per
    step from {128, 256, 384, 512} (a recompile, then dynamic shapes), bf16 autocast, AdamW. The compiles happen
    inside the recorded steps."""
    rng = random.Random(SEED)
    nn = torch.nn

    class GPT(nn.Module):
        def __init__(self, vocab=32000, d=768, h=12, layers=6, max_t=512):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_t, d)
            self.blocks = nn.ModuleList(gpt_block(d, h) for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, ids, labels):
            x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))

    model = GPT().cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    step_fn = torch.compile(model)
    p.update(model="GPT 6 x 768, 12 heads, vocab 32000 (written in capture_traces.py)",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", compile="torch.compile(model), inductor default",
             draws="batch 16, sequence from {128,256,384,512}", steps=[], max_steps=p.get("max_steps", 120))
    for step in range(p["max_steps"]):
        t = rng.choice((128, 256, 384, 512))
        if not ctx.fits(est_allocs=600):
            break
        ids = torch.randint(0, 32000, (16, t), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(ids, torch.roll(ids, -1, 1))
        optimizer_step(loss, opt)
        del ids, loss
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_fsdp_like_train(ctx, p):
    """One rank of FSDP2-style sharded training, on one GPU: 12 pre-norm MLP blocks (d 2048, FFN 8192, GELU) whose
    parameters live as one flat fp32 shard per block (1/8 of the block, as on 8 ranks). Before a block runs, its
    full parameters are gathered into a new flat buffer on an all-gather stream (the shard copied 8 times stands for
    the collective), one block ahead, and handed to the compute stream with record_stream; freed after the block's
    forward and unsharded again for its backward (recomputed: the activations are checkpointed per block). Each
    block's full gradient is reduce-scattered on a third stream into a shard-sized buffer (its slice copied),
    averaged into the shard's gradient, and freed. AdamW over the shards; batch 8 x sequence U[128,1024] tokens
    per step, bf16 autocast. Three allocating streams, and frees that wait for another stream's work."""
    rng = random.Random(SEED)
    d, ffn, blocks, ranks = 2048, 8192, 12, 8
    full = 2 * d * ffn + 2 * d  # W1 (ffn x d), W2 (d x ffn), LayerNorm weight and bias
    shard_n = -(-full // ranks)
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    shards = [torch.nn.Parameter(torch.randn(shard_n, device="cuda", generator=gen) * 0.02) for _ in range(blocks)]
    opt = torch.optim.AdamW(shards, lr=1e-4)
    ag, rs = torch.cuda.Stream(), torch.cuda.Stream()
    main = torch.cuda.current_stream()
    p.update(model=f"{blocks} MLP blocks d {d} FFN {ffn}, flat shards of 1/{ranks}", dtype="fp32 shards, bf16 autocast",
             optimizer="AdamW", streams="compute, all-gather, reduce-scatter", draws="sequence U[128,1024], batch 8",
             steps=[], max_steps=p.get("max_steps", 60))

    def unshard(i):
        with torch.cuda.stream(ag):
            ag.wait_stream(main)
            flat = torch.empty(ranks * shard_n, device="cuda")
            flat.view(ranks, shard_n).copy_(shards[i].detach().expand(ranks, shard_n))
            ev = torch.cuda.Event()
            ev.record(ag)
        return flat, ev

    def take(pending):
        flat, ev = pending
        main.wait_event(ev)
        flat.record_stream(main)
        return flat

    def block(x, flat):
        w1 = flat[:ffn * d].view(ffn, d)
        w2 = flat[ffn * d:2 * ffn * d].view(d, ffn)
        ln_w, ln_b = flat[2 * ffn * d:2 * ffn * d + d], flat[2 * ffn * d + d:full]
        h = F.layer_norm(x, (d,), ln_w, ln_b)
        return x + F.linear(F.gelu(F.linear(h, w1)), w2)

    for step in range(p["max_steps"]):
        t = rng.randint(128, 1024)
        if not ctx.fits(est_allocs=40 * blocks):
            break
        x = torch.randn(8, t, d, device="cuda")
        inputs = []
        nxt = unshard(0)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for i in range(blocks):
                flat = take(nxt)
                nxt = unshard(i + 1) if i + 1 < blocks else None
                inputs.append(x)
                x = block(x, flat)
                del flat
        # The loss at the top, then each block recomputed and differentiated, last first.
        grad = (x.float() / x.numel()).to(x.dtype)
        del x
        nxt = unshard(blocks - 1)
        for i in reversed(range(blocks)):
            flat = take(nxt).requires_grad_(True)
            nxt = unshard(i - 1) if i > 0 else None
            xi = inputs.pop().detach().requires_grad_(True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = block(xi, flat)
            g_x, g_flat = torch.autograd.grad(y, (xi, flat), grad)
            del y, flat, xi
            grad = g_x
            with torch.cuda.stream(rs):
                rs.wait_stream(main)
                g_flat.record_stream(rs)
                g_shard = torch.empty(shard_n, device="cuda")
                g_shard.copy_(g_flat[:shard_n])  # this rank's slice; a reduce-scatter would sum the ranks' first
                g_shard.div_(ranks)
            main.wait_stream(rs)
            g_shard.record_stream(main)
            shards[i].grad = g_shard
            del g_flat, g_shard
        del grad
        opt.step()
        opt.zero_grad(set_to_none=True)
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_lstm_lm_train(ctx, p):
    """An LSTM language model (embedding 512, 2-layer nn.LSTM of hidden 1024 on cuDNN, tied-size output over a
    32,000-token vocabulary; random weights) trained with batch U[16,64] and sequence U[32,512] drawn per step, fp32
    (cuDNN's RNN workspace and reserve space change size with every shape), Adam, gradient clipping at 1.0."""
    rng = random.Random(SEED)
    vocab = 32000

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, 512)
            self.rnn = torch.nn.LSTM(512, 1024, num_layers=2, batch_first=True)
            self.out = torch.nn.Linear(1024, vocab)

        def forward(self, ids):
            h, _ = self.rnn(self.emb(ids))
            return self.out(h)

    model = LM().cuda().train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    p.update(model="Embedding 512 + nn.LSTM(512, 1024, 2 layers) + Linear to 32000", dtype="fp32 (cuDNN RNN)",
             optimizer="Adam, clip 1.0", draws="batch U[16,64], sequence U[32,512]", steps=[],
             max_steps=p.get("max_steps", 150))
    for step in range(p["max_steps"]):
        b, t = rng.randint(16, 64), rng.randint(32, 512)
        if not ctx.fits(est_allocs=120):
            break
        ids = torch.randint(0, vocab, (b, t + 1), device="cuda")
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1))
        del logits
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del ids, loss
        p["steps"].append([b, t])
    torch.cuda.synchronize()


def w_convnext_multiscale_train(ctx, p):
    """Multi-scale image training of torchvision convnext_tiny (random weights, 1000 classes), channels-last, bf16
    autocast, AdamW, label smoothing 0.1: the side drawn per step from 32*U[5,10] (160..320 px) and the batch so
    that the pixels per step stay near 96 x 224^2 (as multi-scale detectors and classifiers train)."""
    import torchvision
    rng = random.Random(SEED)
    model = torchvision.models.convnext_tiny(weights=None).cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    p.update(model="torchvision.models.convnext_tiny(weights=None), channels_last", dtype="fp32 params, bf16 autocast",
             optimizer="AdamW", draws="side 32*U[5,10], batch = 96*224^2/side^2 (at least 16)", steps=[],
             max_steps=p.get("max_steps", 120))
    for step in range(p["max_steps"]):
        s = 32 * rng.randint(5, 10)
        b = max(16, (96 * 224 * 224) // (s * s))
        if not ctx.fits(est_allocs=700):
            break
        x = torch.randn(b, 3, s, s, device="cuda").to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (b,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        optimizer_step(loss, opt)
        del x, y, loss
        p["steps"].append([b, s])
    torch.cuda.synchronize()


def w_ppo_rollout_train(ctx, p):
    """RLHF-style rollouts and updates alternating (PPO's shape, the reward a random stand-in): a LLaMA-style policy
    (LlamaConfig hidden 1024, intermediate 2816, 8 layers, 16 heads, 4 KV heads, vocab 32000; random weights, bf16
    autocast over fp32 parameters) samples responses of U[32,128] new tokens to a batch of U[4,16] prompts of
    U[32,256] tokens (`generate`, do_sample, KV cache, no grad), then takes two policy-gradient steps on the prompts
    and responses (clipped ratio against the rollout's log-probabilities, AdamW): inference and training in turn,
    each with its own shapes."""
    from transformers import LlamaConfig, LlamaForCausalLM
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).cuda()
    model.generation_config.pad_token_id = 0
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    p.update(model="LlamaForCausalLM(hidden 1024, inter 2816, 8 layers, 16 heads, 4 KV)", dtype="fp32 params, bf16",
             optimizer="AdamW", draws="batch U[4,16], prompt U[32,256], new tokens U[32,128]; 2 updates per rollout",
             iterations=[], max_iterations=p.get("max_iterations", 60))
    for it in range(p["max_iterations"]):
        b, t, n = rng.randint(4, 16), rng.randint(32, 256), rng.randint(32, 128)
        if not ctx.fits(est_allocs=60 * n + 3000):
            break
        prompts = torch.randint(1, 32000, (b, t), device="cuda")
        model.eval()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            seq = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=True, top_p=0.9,
                                 max_new_tokens=n, min_new_tokens=n)
            old_logp = torch.log_softmax(model(seq).logits[:, t - 1:-1].float(), -1).gather(
                -1, seq[:, t:, None]).squeeze(-1)
        reward = torch.randn(b, 1, device="cuda")
        model.train()
        for _ in range(2):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(seq).logits[:, t - 1:-1].float()
            logp = torch.log_softmax(logits, -1).gather(-1, seq[:, t:, None]).squeeze(-1)
            ratio = torch.exp(logp - old_logp)
            loss = -torch.min(ratio * reward, torch.clamp(ratio, 0.8, 1.2) * reward).mean()
            del logits, logp, ratio
            optimizer_step(loss, opt)
            del loss
        del prompts, seq, old_logp, reward
        p["iterations"].append([b, t, n])
    torch.cuda.synchronize()


def w_gan_train(ctx, p):
    """DCGAN-style adversarial training at 128 px (a generator of 5 transposed convolutions 512 -> 32 channels from a
    128-d latent, a discriminator of 5 strided convolutions 32 -> 512 channels, batch norm / leaky ReLU, random
    weights), fp32: each step a discriminator update on real and detached fake images, then a generator update
    through the discriminator, two Adam optimizers (2e-4, betas 0.5 / 0.999); batch 64, and every 10th step a
    no-grad sample of 256 images: two models and two optimizers in turn, with a larger inference batch now and
    then."""
    torch.manual_seed(SEED)
    nn = torch.nn
    G = nn.Sequential(
        nn.ConvTranspose2d(128, 512, 4, 1, 0, bias=False), nn.BatchNorm2d(512), nn.ReLU(True),        # 4
        nn.ConvTranspose2d(512, 256, 4, 2, 1, bias=False), nn.BatchNorm2d(256), nn.ReLU(True),        # 8
        nn.ConvTranspose2d(256, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.ReLU(True),        # 16
        nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(True),          # 32
        nn.ConvTranspose2d(64, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(True),           # 64
        nn.ConvTranspose2d(32, 3, 4, 2, 1, bias=False), nn.Tanh()).cuda()                             # 128
    D = nn.Sequential(
        nn.Conv2d(3, 32, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),                               # 64
        nn.Conv2d(32, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.LeakyReLU(0.2, True),          # 32
        nn.Conv2d(64, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.LeakyReLU(0.2, True),        # 16
        nn.Conv2d(128, 256, 4, 2, 1, bias=False), nn.BatchNorm2d(256), nn.LeakyReLU(0.2, True),       # 8
        nn.Conv2d(256, 512, 4, 2, 1, bias=False), nn.BatchNorm2d(512), nn.LeakyReLU(0.2, True),       # 4
        nn.Conv2d(512, 1, 4, 1, 0, bias=False), nn.Flatten()).cuda()
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    p.update(model="DCGAN 128 px: G 128-d latent -> 512..32 ch, D 32..512 ch", dtype="fp32", optimizer="2 x Adam",
             draws="batch 64; every 10th step a no-grad sample of 256", steps=[], max_steps=p.get("max_steps", 400))
    for step in range(p["max_steps"]):
        if not ctx.fits(est_allocs=200):
            break
        real = torch.rand(64, 3, 128, 128, device="cuda") * 2 - 1
        fake = G(torch.randn(64, 128, 1, 1, device="cuda"))
        d_loss = bce(D(real), torch.ones(64, 1, device="cuda")) + bce(D(fake.detach()), torch.zeros(64, 1, device="cuda"))
        optimizer_step(d_loss, opt_d)
        g_loss = bce(D(fake), torch.ones(64, 1, device="cuda"))
        optimizer_step(g_loss, opt_g)
        opt_d.zero_grad(set_to_none=True)  # the discriminator's gradients from the generator's step
        del real, fake, d_loss, g_loss
        sampled = step % 10 == 9
        if sampled:
            G.eval()
            with torch.no_grad():
                imgs = G(torch.randn(256, 128, 1, 1, device="cuda"))
                del imgs
            G.train()
        p["steps"].append([step, int(sampled)])
    torch.cuda.synchronize()


def w_spec_decode_infer(ctx, p):
    """Speculative (assisted) decoding with transformers' `generate(assistant_model=...)`: a LLaMA-style target
    (LlamaConfig hidden 1024, intermediate 2816, 8 layers, 16 heads, 4 KV heads) and a draft (hidden 512,
    intermediate 1408, 2 layers, 8 heads, 2 KV heads), vocab 32000, random weights, bf16, greedy; one prompt of
    U[16,512] tokens and U[32,256] new tokens per request: both models' KV caches grow token by token and are cut
    back wherever the target rejects the draft's guesses (with random weights, most of them)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    tcfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                       num_key_value_heads=4, vocab_size=32000, max_position_embeddings=1024)
    dcfg = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=2, num_attention_heads=8,
                       num_key_value_heads=2, vocab_size=32000, max_position_embeddings=1024)
    target = LlamaForCausalLM(tcfg).to("cuda", torch.bfloat16).eval()
    draft = LlamaForCausalLM(dcfg).to("cuda", torch.bfloat16).eval()
    for m in (target, draft):
        m.generation_config.pad_token_id = 0
    p.update(model="target LlamaForCausalLM(1024, 2816, 8 layers, 16/4 heads), draft (512, 1408, 2 layers, 8/2)",
             dtype="bf16", draws="prompt U[16,512], new tokens U[32,256], batch 1, greedy", requests=[],
             max_requests=p.get("max_requests", 200))
    for r in range(p["max_requests"]):
        t, n = rng.randint(16, 512), rng.randint(32, 256)
        if not ctx.fits(est_allocs=40 * n):
            break
        prompt = torch.randint(1, 32000, (1, t), device="cuda")
        with torch.no_grad():
            out = target.generate(prompt, attention_mask=torch.ones_like(prompt), assistant_model=draft,
                                  do_sample=False, max_new_tokens=n, min_new_tokens=n)
        del prompt, out
        p["requests"].append([t, n])
    torch.cuda.synchronize()


def w_sweep_train(ctx, p):
    """A hyperparameter sweep in one process: trial after trial, a pre-norm transformer encoder (nn.TransformerEncoder,
    width U{256,384,512,768,1024}, 2..6 layers, 4x FFN, random weights) is built, trained 12 steps on batch
    U[8,64] x sequence U[64,512] of random tokens (vocab 16000, bf16 autocast, AdamW, a learning rate drawn per
    trial), evaluated once without grad at batch 128, and dropped with its optimizer before the next: the pool
    meets a new set of tensor sizes at each trial."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn
    vocab = 16000
    p.update(model="nn.TransformerEncoder per trial: width U{256..1024}, 2..6 layers", dtype="fp32 params, bf16 autocast",
             optimizer="AdamW, lr per trial", draws="per trial width, depth, batch U[8,64], sequence U[64,512]; 12 "
             "steps and one eval of batch 128", steps=[], max_steps=p.get("max_steps", 600))
    step = 0
    while step < p["max_steps"]:
        d, layers = rng.choice([256, 384, 512, 768, 1024]), rng.randint(2, 6)
        b, t = rng.randint(8, 64), rng.randint(64, 512)
        emb = nn.Embedding(vocab, d).cuda()
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, max(4, d // 64), 4 * d, batch_first=True,
                                                               norm_first=True), layers, enable_nested_tensor=False).cuda()
        head = nn.Linear(d, vocab).cuda()
        params = list(emb.parameters()) + list(enc.parameters()) + list(head.parameters())
        opt = torch.optim.AdamW(params, lr=10 ** rng.uniform(-4.5, -3))
        stopped = False
        for _ in range(12):
            if step >= p["max_steps"] or not ctx.fits(est_allocs=40 * layers + 60):
                stopped = True
                break
            ids = torch.randint(0, vocab, (b, t + 1), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = head(enc(emb(ids[:, :-1])))
            loss = F.cross_entropy(logits.float().reshape(-1, vocab), ids[:, 1:].reshape(-1))
            del logits
            optimizer_step(loss, opt)
            del ids, loss
            p["steps"].append([d, layers, b, t])
            step += 1
        if not stopped and ctx.fits(est_allocs=40 * layers):
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                ids = torch.randint(0, vocab, (128, t), device="cuda")
                logits = head(enc(emb(ids)))
                del ids, logits
        del emb, enc, head, params, opt
        if stopped:
            break
    torch.cuda.synchronize()


def w_pointcloud_train(ctx, p):
    """PointNet-style classification of point clouds of varying size: a batch of U[8,32] clouds of U[512,16384]
    points each, concatenated (no padding), a shared per-point MLP 3 -> 64 -> 128 -> 1024 (Linear, ReLU), a max over
    each cloud's points (scatter_reduce amax), a classifier 1024 -> 512 -> 256 -> 40, cross-entropy, AdamW; random
    points and labels, fp32: per-point activations change size every step."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn
    point_mlp = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1024)).cuda()
    head = nn.Sequential(nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 40)).cuda()
    opt = torch.optim.AdamW(list(point_mlp.parameters()) + list(head.parameters()), lr=1e-3)
    p.update(model="PointNet-style: per-point MLP 3-64-128-1024, scatter max, MLP 1024-512-256-40", dtype="fp32",
             optimizer="AdamW", draws="U[8,32] clouds of U[512,16384] points per step", steps=[],
             max_steps=p.get("max_steps", 500))
    for step in range(p["max_steps"]):
        if not ctx.fits(est_allocs=60):
            break
        counts = [rng.randint(512, 16384) for _ in range(rng.randint(8, 32))]
        n = sum(counts)
        pts = torch.randn(n, 3, device="cuda")
        owner = torch.repeat_interleave(torch.arange(len(counts), device="cuda"),
                                        torch.tensor(counts, device="cuda"))
        feats = point_mlp(pts)
        pooled = torch.full((len(counts), 1024), float("-inf"), device="cuda").scatter_reduce(
            0, owner[:, None].expand(-1, 1024), feats, reduce="amax", include_self=True)
        loss = F.cross_entropy(head(pooled), torch.randint(0, 40, (len(counts),), device="cuda"))
        del feats, pooled
        optimizer_step(loss, opt)
        del pts, owner, loss
        p["steps"].append([len(counts), n])
    torch.cuda.synchronize()


def w_embed_infer_sorted(ctx, p):
    """A sentence-embedding job (transformers BertModel, BERT-large-shaped: 24 layers, hidden 1024, 16 heads; random
    weights, bf16, eval, no grad) over shards of 2,048 documents whose token lengths are drawn long-tailed (16 +
    an exponential of mean 120, at most 512), sorted by length within the shard and cut into batches of 64 as
    embedding pipelines do (least padding): every shard's batches rise from short to long, each a new high. Per
    batch: masked mean pooling over the last hidden state, L2 normalized, kept on the GPU; at the shard's end the
    shard's embeddings are concatenated and copied to the host."""
    from transformers import BertConfig, BertModel
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    cfg = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                     max_position_embeddings=512)
    model = BertModel(cfg, add_pooling_layer=False).eval().to("cuda", torch.bfloat16)
    p.update(model="BertModel(hidden 1024, 24 layers, 16 heads, intermediate 4096)", dtype="bfloat16",
             draws="per document: length 16 + Exp(mean 120), at most 512; shards of 2048 sorted, batches of 64",
             calls=[], shards=0, max_calls=p.get("max_calls", 400))
    done = False
    while not done:
        lengths = sorted(min(512, 16 + int(rng.expovariate(1.0 / 120))) for _ in range(2048))
        embs = []
        for i in range(0, len(lengths), 64):
            t = lengths[min(i + 63, len(lengths) - 1)]
            if len(p["calls"]) >= p["max_calls"] or not ctx.fits(est_allocs=600):
                done = True
                break
            ids = torch.randint(1, cfg.vocab_size, (64, t), device="cuda")
            mask = (torch.arange(t, device="cuda")[None, :] <
                    torch.tensor(lengths[i:i + 64], device="cuda")[:, None]).long()
            with torch.no_grad():
                h = model(input_ids=ids, attention_mask=mask).last_hidden_state
                m = mask[..., None].to(h.dtype)
                e = F.normalize(((h * m).sum(1) / m.sum(1)).float(), dim=-1)
            embs.append(e)
            del ids, mask, h, m, e
            p["calls"].append(t)
        if embs:
            out = torch.cat(embs).cpu()
            del out
            p["shards"] += 1
        del embs
    torch.cuda.synchronize()


def w_int8_weight_generate(ctx, p):
    """Weight-only int8 LLM inference: a LLaMA-style decoder (LlamaConfig hidden 2048, intermediate 5632, 8 layers,
    32 heads, 4 KV heads, vocab 32000, ~0.35B parameters in its linears; random weights) whose linear weights live on
    the GPU as int8 with a bf16 scale per output channel and are dequantized to a bf16 temporary at every use (as
    simple weight-only quantization kernels-less code does), KV caches grown by torch.cat, greedy; batch U[1,8],
    prompt U[32,1024], U[8,32] new tokens per request."""
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    cfg = llama_cfg(2048, 5632, 8, 32, 4)
    H, nh, kvh = cfg["hidden"], cfg["heads"], cfg["kv_heads"]
    hd = H // nh
    layers = []
    for _ in range(cfg["layers"]):
        w = {}
        for k, t in cpu_layer_weights(cfg, gen, torch.float32, False).items():
            if k.startswith("ln"):
                w[k] = t.to("cuda", torch.bfloat16)
            else:
                scale = t.abs().amax(1, keepdim=True).clamp(min=1e-8) / 127.0
                w[k] = ((t / scale).round().clamp(-127, 127).to(torch.int8).cuda(), scale.to("cuda", torch.bfloat16))
            del t
        layers.append(w)
    emb = (torch.randn(cfg["vocab"], H, generator=gen) * 0.02).to(torch.bfloat16).cuda()
    cos, sin = rope_tables(hd, 2048, "cuda")

    def lin(w, x):
        q, s = w
        return x @ (q.to(torch.bfloat16) * s).t()

    def layer(x, w, cache, pos):
        B, T, _ = x.shape
        h = rms_norm(x, w["ln1"])
        q = lin(w["wq"], h).view(B, T, nh, hd).transpose(1, 2)
        k = lin(w["wk"], h).view(B, T, kvh, hd).transpose(1, 2)
        v = lin(w["wv"], h).view(B, T, kvh, hd).transpose(1, 2)
        c, s = cos[pos:pos + T], sin[pos:pos + T]
        q, k = apply_rope(q, c, s), apply_rope(k, c, s)
        if cache[0] is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1, enable_gqa=True)
        x = x + lin(w["wo"], a.transpose(1, 2).reshape(B, T, H))
        h = rms_norm(x, w["ln2"])
        return x + lin(w["wd"], F.silu(lin(w["wg"], h)) * lin(w["wu"], h)), (k, v)

    p.update(model="LLaMA-style decoder, int8 weights + bf16 per-channel scales, " + json.dumps(
             {k: cfg[k] for k in ("hidden", "inter", "layers", "heads", "kv_heads", "vocab")}), dtype="int8 / bf16",
             draws="batch U[1,8], prompt U[32,1024], new tokens U[8,32]", requests=[],
             max_requests=p.get("max_requests", 100))
    with torch.no_grad():
        for r in range(p["max_requests"]):
            b, t, n = rng.randint(1, 8), rng.randint(32, 1024), rng.randint(8, 32)
            if not ctx.fits(est_allocs=60 * cfg["layers"] * (n + 1)):
                break
            caches = [(None, None)] * cfg["layers"]
            x = emb[torch.randint(0, cfg["vocab"], (b, t), device="cuda")]
            pos = 0
            for step in range(n):
                for li, w in enumerate(layers):
                    x, caches[li] = layer(x, w, caches[li], pos)
                pos += x.shape[1]
                tok = (x[:, -1:] @ emb.t()).argmax(-1)
                x = emb[tok]
                del tok
            del x, caches
            p["requests"].append([b, t, n])
    torch.cuda.synchronize()


def w_longctx_chunked_prefill(ctx, p):
    """Long-document inference by chunked prefill: a LLaMA-style decoder (LlamaConfig hidden 2048, intermediate
    5632, 8 layers, 16 heads, 8 KV heads, vocab 32000; random weights, bf16) reads documents of U[4096,32768] tokens
    in chunks of 2,048 into a KV cache allocated per document at the document's length plus the answer's (one
    tensor per layer for K and one for V, 8-67 MB each, 0.14-1.1 GB in all: a new size every document), then
    decodes U[8,32] tokens greedily into the same cache (llama_block writes the cache in place)."""
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    cfg = llama_cfg(2048, 5632, 8, 16, 8, max_pos=40960)
    H, kvh = cfg["hidden"], cfg["kv_heads"]
    hd = H // cfg["heads"]
    layers = [{k: t.cuda() for k, t in cpu_layer_weights(cfg, gen, torch.bfloat16, False).items()}
              for _ in range(cfg["layers"])]
    emb = (torch.randn(cfg["vocab"], H, generator=gen) * 0.02).to(torch.bfloat16).cuda()
    cos, sin = rope_tables(hd, 34 * 1024, "cuda")
    p.update(model="LLaMA-style decoder (llama_block), " + json.dumps({k: cfg[k] for k in ("hidden", "inter",
             "layers", "heads", "kv_heads", "vocab")}), dtype="bfloat16", chunk=2048,
             draws="document U[4096,32768] tokens, answer U[8,32] tokens", requests=[],
             max_requests=p.get("max_requests", 60))
    with torch.no_grad():
        for r in range(p["max_requests"]):
            t, n = rng.randint(4096, 32768), rng.randint(8, 32)
            if not ctx.fits(est_allocs=50 * cfg["layers"] * (t // 2048 + n + 1)):
                break
            caches = [(torch.empty(1, kvh, t + n, hd, device="cuda", dtype=torch.bfloat16),
                       torch.empty(1, kvh, t + n, hd, device="cuda", dtype=torch.bfloat16))
                      for _ in range(cfg["layers"])]
            ids = torch.randint(0, cfg["vocab"], (1, t), device="cuda")
            pos = 0
            x = None
            while pos < t:
                c = min(2048, t - pos)
                x = emb[ids[:, pos:pos + c]]
                for li, w in enumerate(layers):
                    x = llama_block(x, w, cfg, cos, sin, pos, cache=caches[li])
                pos += c
            for step in range(n):
                tok = (x[:, -1:] @ emb.t()).argmax(-1)
                x = emb[tok]
                for li, w in enumerate(layers):
                    x = llama_block(x, w, cfg, cos, sin, pos, cache=caches[li])
                pos += 1
                del tok
            del x, ids, caches
            p["requests"].append([t, n])
    torch.cuda.synchronize()


def w_mae_pretrain(ctx, p):
    """Masked-autoencoder pretraining (MAE's shape: a ViT-B/16 encoder of 12 nn.TransformerEncoderLayer over the 25%
    of 196 patches kept, a decoder of 4 layers at width 512 over all 196 with mask tokens, MSE on the masked
    patches' pixels), batch 128 at 224 px, random masks per image (a fixed count kept), bf16 autocast over fp32
    parameters, AdamW: a fixed-shape training job of gathers and scatters."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn
    D, Dd, N, keep, B = 768, 512, 196, 49, 128
    patch = nn.Conv2d(3, D, 16, 16).cuda()
    pos_e = nn.Parameter(torch.randn(1, N, D, device="cuda") * 0.02)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 12, 4 * D, dropout=0.0, activation="gelu",
                                                           batch_first=True, norm_first=True), 12).cuda()
    to_dec = nn.Linear(D, Dd).cuda()
    mask_tok = nn.Parameter(torch.zeros(1, 1, Dd, device="cuda"))
    pos_d = nn.Parameter(torch.randn(1, N, Dd, device="cuda") * 0.02)
    dec = nn.TransformerEncoder(nn.TransformerEncoderLayer(Dd, 16, 4 * Dd, dropout=0.0, activation="gelu",
                                                           batch_first=True, norm_first=True), 4).cuda()
    head = nn.Linear(Dd, 16 * 16 * 3).cuda()
    params = [*patch.parameters(), pos_e, *enc.parameters(), *to_dec.parameters(), mask_tok, pos_d,
              *dec.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1.5e-4, weight_decay=0.05)
    p.update(model="MAE: ViT-B/16 encoder (12 layers, 768) on 49 of 196 patches, decoder 4 layers x 512",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", batch=B, steps=0,
             max_steps=p.get("max_steps", 300))
    for step in range(p["max_steps"]):
        if not ctx.fits(est_allocs=700):
            break
        img = torch.randn(B, 3, 224, 224, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = patch(img).flatten(2).transpose(1, 2) + pos_e
            order = torch.rand(B, N, device="cuda").argsort(1)
            kept = order[:, :keep]
            x = torch.gather(x, 1, kept[..., None].expand(-1, -1, D))
            z = to_dec(enc(x))
            full = mask_tok.expand(B, N, Dd).to(z.dtype).scatter(1, kept[..., None].expand(-1, -1, Dd), z)
            pred = head(dec(full + pos_d))
        target = img.unfold(2, 16, 16).unfold(3, 16, 16).permute(0, 2, 3, 1, 4, 5).reshape(B, N, -1)
        masked = torch.ones(B, N, device="cuda").scatter(1, kept, 0.0)
        loss = (((pred.float() - target) ** 2).mean(-1) * masked).sum() / masked.sum()
        del x, order, kept, z, full, pred, target, masked
        optimizer_step(loss, opt)
        del loss, img
        p["steps"] += 1
    torch.cuda.synchronize()


def token_budget_steps(ctx, p, rng, model, opt, vocab, shortest, longest, round_to, est_allocs, budget=16384):
    """The steps of the token-budget training workloads (token_budget_train, ckpt_longseq_train): each draws a
    length shortest x 2^U[0, log2(longest / shortest)] rounded to round_to (kept within [shortest, longest]) and a
    batch of budget // length, then trains a causal LM (`model(input_ids, labels)`, transformers' form) on random
    ids under bf16 autocast and ends with optimizer_step; each step's [batch, length] goes to p["steps"]."""
    octaves = math.log2(longest / shortest)
    for _ in range(p["max_steps"]):
        t = min(longest, max(shortest, int(round(shortest * 2 ** rng.uniform(0, octaves) / round_to)) * round_to))
        b = max(1, budget // t)
        if not ctx.fits(est_allocs=est_allocs):
            break
        ids = torch.randint(0, vocab, (b, t), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        optimizer_step(loss, opt)
        del ids, loss
        p["steps"].append([b, t])
    torch.cuda.synchronize()


def w_token_budget_train(ctx, p):
    """GPT-2-shaped training (GPT2Config n_layer 8, n_embd 768, n_head 12, n_positions 2048; random weights) with
    batches cut by a token budget, as packing-free trainers do: each step draws a sequence length 128 x 2^U[0,4]
    rounded to 64 (128..2048, long-tailed) and takes batch = 16384 // length, so both dimensions change every step
    while the tokens stay about constant (attention's memory grows with the length). bf16 autocast over fp32
    parameters, AdamW."""
    from transformers import GPT2Config, GPT2LMHeadModel
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    cfg = GPT2Config(n_layer=8, n_embd=768, n_head=12, n_positions=2048, activation_function="gelu_pytorch_tanh")
    model = GPT2LMHeadModel(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    p.update(model="GPT2LMHeadModel(GPT2Config(n_layer=8, n_embd=768, n_head=12, n_positions=2048))",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", token_budget=16384,
             draws="length 128 x 2^U[0,4] rounded to 64, batch 16384 // length", steps=[],
             max_steps=p.get("max_steps", 200))
    token_budget_steps(ctx, p, rng, model, opt, cfg.vocab_size, 128, 2048, 64, est_allocs=1200)


def w_stochastic_depth_train(ctx, p):
    """A ViT-S/16-shaped classifier (12 nn.TransformerEncoderLayer of width 384, 6 heads, MLP 1536, pre-norm; random
    weights) trained with stochastic depth at the batch level: each step every block but the first and the last is
    skipped with probability 0.3, so the activations autograd keeps change from step to step at a fixed input
    shape. Batch 128 at 224 px, bf16 autocast over fp32 parameters, AdamW, label smoothing 0.1."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn
    D, N, B = 384, 196, 128
    patch = nn.Conv2d(3, D, 16, 16).cuda()
    cls = nn.Parameter(torch.zeros(1, 1, D, device="cuda"))
    pos = nn.Parameter(torch.randn(1, N + 1, D, device="cuda") * 0.02)
    blocks = nn.ModuleList(nn.TransformerEncoderLayer(D, 6, 4 * D, dropout=0.0, activation="gelu",
                                                      batch_first=True, norm_first=True) for _ in range(12)).cuda()
    norm, head = nn.LayerNorm(D).cuda(), nn.Linear(D, 1000).cuda()
    params = [*patch.parameters(), cls, pos, *blocks.parameters(), *norm.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.05)
    p.update(model="ViT-S/16 shape: 12 x nn.TransformerEncoderLayer(384, 6 heads, 1536, pre-norm)",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", batch=B,
             draws="per step, each of blocks 2..11 skipped with probability 0.3", steps=[],
             max_steps=p.get("max_steps", 200))
    for step in range(p["max_steps"]):
        kept = [i for i in range(12) if i in (0, 11) or rng.random() >= 0.3]
        if not ctx.fits(est_allocs=60 * len(kept) + 200):
            break
        img = torch.randn(B, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (B,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = torch.cat([cls.expand(B, -1, -1), patch(img).flatten(2).transpose(1, 2)], 1) + pos
            for i in kept:
                x = blocks[i](x)
            loss = F.cross_entropy(head(norm(x[:, 0])).float(), y, label_smoothing=0.1)
        optimizer_step(loss, opt)
        del img, y, x, loss
        p["steps"].append(len(kept))
    torch.cuda.synchronize()


def w_zero_offload_train(ctx, p):
    """ZeRO-Offload-style training of a LLaMA-style model (LlamaForCausalLM, LlamaConfig hidden 1024, intermediate
    2816, 6 layers, 16 heads, 4 KV heads, vocab 32000; random weights): bf16 parameters on the GPU, fp32 master
    weights and AdamW's state on the host. Per step (batch 8, sequence U[256,1024]): forward and backward in bf16;
    every gradient copied to pinned host memory on a side stream (record_stream on it) and dropped; the host AdamW
    step; every parameter then replaced by a new GPU tensor copied from pinned host memory (the old one freed), as
    offloading engines swap parameter storage."""
    from transformers import LlamaConfig, LlamaForCausalLM
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=6, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).train()
    params = [q for q in model.parameters() if q.requires_grad]
    master = [q.detach().float().cpu().requires_grad_(True) for q in params]
    opt = torch.optim.AdamW(master, lr=1e-4, foreach=True)
    grads_host = [torch.empty(q.shape, dtype=torch.bfloat16, pin_memory=True) for q in params]
    up_host = [torch.empty(q.shape, dtype=torch.bfloat16, pin_memory=True) for q in params]
    side = torch.cuda.Stream()
    p.update(model="LlamaForCausalLM(LlamaConfig(hidden 1024, intermediate 2816, 6 layers, 16 heads, 4 KV heads))",
             dtype="bf16 params on the GPU, fp32 master and AdamW state on the host", batch=8,
             draws="sequence U[256,1024] per step", steps=[], max_steps=p.get("max_steps", 60))
    for step in range(p["max_steps"]):
        t = rng.randint(256, 1024)
        if not ctx.fits(est_allocs=1500 + 2 * len(params), est_s=1.0):
            break
        ids = torch.randint(0, cfg.vocab_size, (8, t), device="cuda")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        del ids, loss
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for q, h in zip(params, grads_host):
                g = q.grad
                q.grad = None
                h.copy_(g, non_blocking=True)
                g.record_stream(side)
                del g
        side.synchronize()
        for m, h in zip(master, grads_host):
            m.grad = h.float()
        opt.step()
        for m in master:
            m.grad = None
        for q, m, h in zip(params, master, up_host):
            h.copy_(m)
            q.data = h.to("cuda", non_blocking=True)
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_rag_two_model_serve(ctx, p):
    """Retrieval-augmented generation served from one process: per request batch, an embedder (BertModel,
    BERT-base-shaped, random weights, bf16, eval, no grad) encodes the queries (batch U[1,16], length U[8,64],
    mean-pooled), then a generator (GPT2LMHeadModel, GPT-2-small-shaped, bf16) runs `generate` (greedy, KV cache)
    over prompts of the retrieved context, U[128,768] tokens, with U[16,64] new tokens, batch U[1,4]: two models
    whose activations differ in shape take turns on the same pool."""
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    enc = BertModel(BertConfig(), add_pooling_layer=False).eval().to("cuda", torch.bfloat16)
    gcfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024, activation_function="gelu_pytorch_tanh")
    gen = GPT2LMHeadModel(gcfg).eval().to("cuda", torch.bfloat16)
    p.update(model="BertModel(BertConfig()) embedder + GPT2LMHeadModel(n_layer 12, n_embd 768) generator",
             dtype="bfloat16", draws="queries: batch U[1,16], length U[8,64]; generate: batch U[1,4], prompt "
             "U[128,768], new tokens U[16,64]", calls=[], max_calls=p.get("max_calls", 80))
    for i in range(p["max_calls"]):
        qb, ql = rng.randint(1, 16), rng.randint(8, 64)
        b, t, n = rng.randint(1, 4), rng.randint(128, 768), rng.randint(16, 64)
        if not ctx.fits(est_allocs=300 * (n + 2) + 400):
            break
        with torch.no_grad():
            q = torch.randint(1, 30522, (qb, ql), device="cuda")
            h = enc(input_ids=q).last_hidden_state
            e = F.normalize(h.mean(1).float(), dim=-1)
            del q, h
            ids = torch.randint(0, gcfg.vocab_size, (b, t), device="cuda")
            out = gen.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                               max_new_tokens=n, min_new_tokens=n, pad_token_id=gcfg.eos_token_id, use_cache=True)
            del out, ids, e
        p["calls"].append([qb, ql, b, t, n])
    torch.cuda.synchronize()


def w_graphed_decode_serve(ctx, p):
    """LLM serving with CUDA graphs, as vLLM and TensorRT-LLM-style servers run decode: a LLaMA-shaped decoder
    (written here: 8 layers, hidden 1024, 16 heads of 64, SwiGLU 2816, vocab 32000, bf16, random weights) with a
    static KV cache for 32 sequences of 1,024 tokens allocated once; one decode step captured per batch bucket
    (32, 16, 8, 4, 2, 1: largest first) with torch.cuda.graph into one shared private pool (graph_pool_handle).
    Then per request batch: an eager prefill of batch U[1,32] x prompt U[32,512] (causal SDPA, K/V written into the
    cache), then U[16,64] decode steps by replaying the smallest bucket's graph that holds the batch (inputs copied
    into its static tensors, the next tokens taken by argmax outside the graph). The graphs' memory sits in the
    private pool; the prefill's activations and the loop's small tensors churn in the main pool around it."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn
    L, D, H, HD, FF, V, B, T = 8, 1024, 16, 64, 2816, 32000, 32, 1024
    bf = torch.bfloat16

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.Parameter(torch.ones(D)), nn.Parameter(torch.ones(D))
            self.qkv, self.o = nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D, bias=False)
            self.gu, self.down = nn.Linear(D, 2 * FF, bias=False), nn.Linear(FF, D, bias=False)

        def mlp(self, x):
            g, u = self.gu(rms_norm(x, self.n2)).chunk(2, dim=-1)
            return x + self.down(F.silu(g) * u)

    layers = nn.ModuleList(Layer() for _ in range(L)).to("cuda", bf)
    emb, pos_emb = nn.Embedding(V, D).to("cuda", bf), nn.Embedding(T, D).to("cuda", bf)
    norm, head = nn.Parameter(torch.ones(D, device="cuda", dtype=bf)), nn.Linear(D, V, bias=False).to("cuda", bf)
    kc = [torch.zeros(B, H, T, HD, device="cuda", dtype=bf) for _ in range(L)]
    vc = [torch.zeros(B, H, T, HD, device="cuda", dtype=bf) for _ in range(L)]
    slots = torch.arange(B, device="cuda")
    steps_of = torch.arange(T, device="cuda")

    def prefill(ids):
        b, t = ids.shape
        x = emb(ids) + pos_emb(steps_of[:t])
        for i, ly in enumerate(layers):
            q, k, v = ly.qkv(rms_norm(x, ly.n1)).view(b, t, 3, H, HD).permute(2, 0, 3, 1, 4)
            kc[i][:b, :, :t].copy_(k)
            vc[i][:b, :, :t].copy_(v)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, D)
            x = ly.mlp(x + ly.o(a))
        return head(rms_norm(x[:, -1], norm)).argmax(-1)

    def decode(tok, pos):
        b = tok.shape[0]
        x = emb(tok) + pos_emb(pos)
        mask = (steps_of[None, :] <= pos[:, None]).view(b, 1, 1, T)
        for i, ly in enumerate(layers):
            q, k, v = ly.qkv(rms_norm(x, ly.n1)).view(b, 3, H, HD).unbind(1)
            kc[i][slots[:b], :, pos] = k
            vc[i][slots[:b], :, pos] = v
            a = F.scaled_dot_product_attention(q.unsqueeze(2), kc[i][:b], vc[i][:b], attn_mask=mask)
            x = ly.mlp(x + ly.o(a.reshape(b, D)))
        return head(rms_norm(x, norm))

    pool = torch.cuda.graph_pool_handle()
    graphs = {}
    with torch.no_grad():
        for nb in (32, 16, 8, 4, 2, 1):
            tok = torch.zeros(nb, dtype=torch.long, device="cuda")
            pos = torch.zeros(nb, dtype=torch.long, device="cuda")
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    decode(tok, pos)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                out = decode(tok, pos)
            graphs[nb] = (g, tok, pos, out)
    p.update(model="LLaMA-shaped decoder written here: 8 x 1024, 16 heads of 64, SwiGLU 2816, vocab 32000, bf16",
             kv_cache="static, 32 sequences x 1024 tokens", graphs="decode per batch bucket 32/16/8/4/2/1, one "
             "graph_pool_handle pool", draws="batch U[1,32], prompt U[32,512], new tokens U[16,64]", calls=[],
             max_calls=p.get("max_calls", 120))
    for _ in range(p["max_calls"]):
        b, t, n = rng.randint(1, 32), rng.randint(32, 512), rng.randint(16, 64)
        if not ctx.fits(est_allocs=L * 30 + 6 * n + 50):
            break
        nb = next(s for s in (1, 2, 4, 8, 16, 32) if s >= b)
        g, tok, pos, out = graphs[nb]
        with torch.no_grad():
            ids = torch.randint(0, V, (b, t), device="cuda")
            nxt = prefill(ids)
            made = [nxt]
            for i in range(n):
                tok[:b].copy_(nxt)
                pos.fill_(t + i)
                g.replay()
                nxt = out[:b].argmax(-1)
                made.append(nxt)
            text = torch.stack(made, dim=1)
            del ids, nxt, made, text
        p["calls"].append([b, t, n])
    torch.cuda.synchronize()
    del graphs


_SWAP_MODELS = {}  # model_swap_serve's four models, on the host between runs


def w_model_swap_serve(ctx, p):
    """A multi-model inference server with room for two models on the GPU (as TorchServe or Triton hosts several
    models and swaps them in and out by demand): four models built once on the host in bf16 with random weights,
    GPT-2 small (GPT2LMHeadModel), BERT-large (BertModel, 24 x 1024), torchvision ResNet-50 and ViT-B/16. Each
    request picks a model (weights 0.35 / 0.25 / 0.2 / 0.2); one not on the GPU is moved there (module.to), the
    least recently used of the two resident ones moved back to the host first. Requests: GPT-2 generate (greedy, KV
    cache) of batch U[1,4], prompt U[16,128], U[8,24] new tokens; BERT-large over batch U[1,32] x length U[32,256];
    the two image models over batch U[1,32] at 224 px. Weights of hundreds of MB come and go between requests whose
    activations differ in shape."""
    import torchvision
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    bf = torch.bfloat16
    gcfg = GPT2Config(activation_function="gelu_pytorch_tanh")
    bcfg = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    if not _SWAP_MODELS:  # built on the host once per process: a later run (unrecorded, an A/B pair) reuses them
        _SWAP_MODELS.update(gpt2=GPT2LMHeadModel(gcfg).eval().to(bf),
                            bert_large=BertModel(bcfg, add_pooling_layer=False).eval().to(bf),
                            resnet50=torchvision.models.resnet50().eval().to(bf),
                            vit_b_16=torchvision.models.vit_b_16().eval().to(bf))
    models = _SWAP_MODELS
    names, weights = list(models), [0.35, 0.25, 0.2, 0.2]
    resident = []  # least recently used first
    p.update(models="GPT2LMHeadModel(GPT2Config()), BertModel(24 x 1024), torchvision resnet50, vit_b_16; bf16",
             resident_models=2, draws="model by weights 0.35/0.25/0.2/0.2; gpt2 generate batch U[1,4] prompt "
             "U[16,128] new U[8,24]; bert_large batch U[1,32] length U[32,256]; images batch U[1,32] at 224",
             calls=[], max_calls=p.get("max_calls", 120))
    for _ in range(p["max_calls"]):
        name = rng.choices(names, weights)[0]
        b = rng.randint(1, 4) if name == "gpt2" else rng.randint(1, 32)
        t = rng.randint(16, 128) if name == "gpt2" else rng.randint(32, 256)
        n = rng.randint(8, 24)
        est = 200 * (n + 2) if name == "gpt2" else 500
        if not ctx.fits(est_allocs=est + 600):
            break
        swapped = None
        if name in resident:
            resident.remove(name)
        else:
            if len(resident) == 2:
                swapped = resident.pop(0)
                models[swapped].to("cpu")
            models[name].to("cuda")
        resident.append(name)
        m = models[name]
        with torch.no_grad():
            if name == "gpt2":
                ids = torch.randint(0, gcfg.vocab_size, (b, t), device="cuda")
                out = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=n, min_new_tokens=n, pad_token_id=gcfg.eos_token_id, use_cache=True)
                del ids
            elif name == "bert_large":
                ids = torch.randint(1, bcfg.vocab_size, (b, t), device="cuda")
                out = m(input_ids=ids).last_hidden_state.mean(1)
                del ids
            else:
                x = torch.randn(b, 3, 224, 224, device="cuda", dtype=bf)
                out = m(x).argmax(-1)
                del x
            del out
        p["calls"].append([name, b, t if name in ("gpt2", "bert_large") else 224, n if name == "gpt2" else 0,
                           swapped])
    torch.cuda.synchronize()
    for name in resident:
        models[name].to("cpu")


def w_ckpt_longseq_train(ctx, p):
    """Long-context training with activation checkpointing, as long-sequence fine-tuning runs it: a LLaMA-style model
    (transformers LlamaForCausalLM, hidden 1024, intermediate 2816, 8 layers, 16 heads, 4 KV heads, 8,192 positions,
    attention as transformers picks it; random weights) with gradient checkpointing on every layer (non-reentrant),
    bf16 autocast over fp32 parameters, AdamW. Each step draws a length 1024 x 2^U[0,3] rounded to 256
    (1,024..8,192) and a batch of 16,384 // length: the checkpoints are small, the recomputed layer and the logits
    (16k tokens x 32k vocab) large, and both change shape every step."""
    from transformers import LlamaConfig, LlamaForCausalLM
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=4, max_position_embeddings=8192, vocab_size=32000)
    model = LlamaForCausalLM(cfg).cuda().train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    p.update(model="LlamaForCausalLM(hidden 1024, intermediate 2816, 8 layers, 16/4 heads, 8192 positions)",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", checkpointing="every layer, use_reentrant=False",
             token_budget=16384, draws="length 1024 x 2^U[0,3] rounded to 256, batch 16384 // length", steps=[],
             max_steps=p.get("max_steps", 200))
    token_budget_steps(ctx, p, rng, model, opt, cfg.vocab_size, 1024, 8192, 256, est_allocs=2500)


def ssd_scan(x, dt, a, bm, cm, chunk):
    """The chunked scan of a Mamba-2-style state-space layer (the SSD form of Dao & Gu, "Transformers are SSMs",
    2024: a scalar decay per head, so each chunk is a masked matmul and only the chunk boundaries recur), written
    here for its memory pattern. x (b, l, h, p); dt, a (b, l, h) fp32 (a = -exp(A_log) x dt); bm, cm (b, l, n);
    l a multiple of chunk. Returns y (b, l, h, p)."""
    b, l, h, hp = x.shape
    c = l // chunk
    x = (x * dt[..., None].to(x.dtype)).reshape(b, c, chunk, h, hp)
    a = a.reshape(b, c, chunk, h).permute(0, 3, 1, 2)  # (b, h, c, q)
    bm, cm = bm.reshape(b, c, chunk, -1), cm.reshape(b, c, chunk, -1)
    acum = a.cumsum(-1)
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=x.device).tril()
    decay_in = torch.exp((acum[..., :, None] - acum[..., None, :]).masked_fill(~causal, float("-inf")))
    scores = torch.einsum("bcin,bcjn->bcij", cm, bm)
    y = torch.einsum("bcij,bhcij,bcjhp->bcihp", scores, decay_in.to(x.dtype), x)
    states = torch.einsum("bcjn,bhcj,bcjhp->bchpn", bm, torch.exp(acum[..., -1:] - acum).to(x.dtype), x)
    chunk_decay = torch.exp(acum[..., -1])  # (b, h, c)
    state = torch.zeros_like(states[:, 0])
    starts = []
    for k in range(c):
        starts.append(state)
        state = state * chunk_decay[:, :, k, None, None].to(state.dtype) + states[:, k]
    y = y + torch.einsum("bcin,bchpn,bhci->bcihp", cm, torch.stack(starts, 1), torch.exp(acum).to(x.dtype))
    return y.reshape(b, l, h, hp)


def w_ssm_lm_train(ctx, p):
    """A Mamba-2-style state-space language model written here (12 layers, d_model 768, 24 heads of 64, state 64,
    depthwise causal conv of width 4, chunk 128; vocab 32000; random weights), trained with bf16 autocast over fp32
    parameters and AdamW: batch 8, sequence 128 x U[4,32] (512..4,096) per step. Its chunked scan (ssd_scan) keeps
    per-layer tensors of batch x heads x chunks x 128 x 128 for backward, so the step's large tensors are neither
    attention's nor an MLP's, and change size with the sequence."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    d, layers, heads, hp, n, chunk, vocab = 768, 12, 24, 64, 64, 128, 32000
    e = heads * hp

    class Mixer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(d)
            self.in_proj = torch.nn.Linear(d, 2 * e + 2 * n + heads, bias=False)
            self.conv = torch.nn.Conv1d(e + 2 * n, e + 2 * n, 4, groups=e + 2 * n, padding=3)
            self.a_log = torch.nn.Parameter(torch.log(torch.rand(heads) * 15 + 1))
            self.dt_bias = torch.nn.Parameter(torch.rand(heads) * 0.1)
            self.out_proj = torch.nn.Linear(e, d, bias=False)

        def forward(self, u):
            b, l, _ = u.shape
            z, xbc, dt = self.in_proj(self.norm(u)).split([e, e + 2 * n, heads], -1)
            xbc = F.silu(self.conv(xbc.transpose(1, 2))[..., :l].transpose(1, 2))
            x, bm, cm = xbc.split([e, n, n], -1)
            dt = F.softplus(dt.float() + self.dt_bias)
            y = ssd_scan(x.reshape(b, l, heads, hp), dt, -torch.exp(self.a_log.float()) * dt, bm, cm, chunk)
            return u + self.out_proj(y.reshape(b, l, e) * F.silu(z))

    model = torch.nn.Sequential(torch.nn.Embedding(vocab, d), *[Mixer() for _ in range(layers)],
                                torch.nn.LayerNorm(d), torch.nn.Linear(d, vocab, bias=False)).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    p.update(model="Mamba-2-style SSM LM (12 x d 768, 24 heads x 64, state 64, conv 4, chunk 128, vocab 32000)",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", draws="batch 8, sequence 128 x U[4,32]",
             steps=[], max_steps=p.get("max_steps", 200))
    for step in range(p["max_steps"]):
        t = 128 * rng.randint(4, 32)
        if not ctx.fits(est_allocs=2500):
            break
        ids = torch.randint(0, vocab, (8, t + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), ids[:, 1:].reshape(-1))
        del logits
        optimizer_step(loss, opt)
        del ids, loss
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_maskrcnn_infer(ctx, p):
    """Instance segmentation inference (torchvision maskrcnn_resnet50_fpn, random weights, fp32, eval, no grad) on
    batches of U[1,4] images of 32 x U[10,40] by 32 x U[10,40] px (resized inside to a short side of 800), keeping
    U[10,100] detections an image (score threshold 0, so every call keeps that many): the masks are pasted at each
    image's own size, so the largest tensors of a call follow the images and the detection count."""
    from torchvision.models.detection import maskrcnn_resnet50_fpn
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    model = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91,
                                  box_score_thresh=0.0).eval().cuda()
    p.update(model="torchvision maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, box_score_thresh=0)",
             dtype="float32", draws="batch U[1,4], each image 32*U[10,40] x 32*U[10,40], detections U[10,100]",
             calls=[], max_calls=p.get("max_calls", 300))
    with torch.no_grad():
        for i in range(p["max_calls"]):
            sizes = [(32 * rng.randint(10, 40), 32 * rng.randint(10, 40)) for _ in range(rng.randint(1, 4))]
            k = rng.randint(10, 100)
            if not ctx.fits(est_allocs=2500):
                break
            model.roi_heads.detections_per_img = k
            images = [torch.rand(3, h, w, device="cuda") for h, w in sizes]
            out = model(images)
            kept = [int(o["masks"].shape[0]) for o in out]
            del images, out
            p["calls"].append([sizes, k, kept])
    torch.cuda.synchronize()


def w_multistream_embed_serve(ctx, p):
    """An embedding server that runs four requests at once, one CUDA stream each (as a server with a stream per
    worker does): BERT-base (BertModel, random weights, bf16, eval, no grad); per tick, four request batches of
    U[1,32] texts of U[32,512] tokens, their ids made on the default stream and handed to the request's stream
    (record_stream), the normalised [CLS] embeddings gathered back on the default stream (record_stream) and copied
    to the host. Four streams allocate at once, each its own shapes."""
    from transformers import BertConfig, BertModel
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    model = BertModel(BertConfig()).eval().to("cuda", torch.bfloat16)
    streams = [torch.cuda.Stream() for _ in range(4)]
    main = torch.cuda.current_stream()
    p.update(model="transformers BertModel(BertConfig()) (BERT-base)", dtype="bfloat16", streams="4 + default",
             draws="per tick, 4 requests of batch U[1,32] x tokens U[32,512]", ticks=[],
             max_ticks=p.get("max_ticks", 400))
    with torch.no_grad():
        for tick in range(p["max_ticks"]):
            reqs = [(rng.randint(1, 32), rng.randint(32, 512)) for _ in streams]
            if not ctx.fits(est_allocs=4 * 200):
                break
            embs = []
            for s, (b, t) in zip(streams, reqs):
                ids = torch.randint(0, 30522, (b, t), device="cuda")
                s.wait_stream(main)
                with torch.cuda.stream(s):
                    ids.record_stream(s)
                    embs.append(F.normalize(model(input_ids=ids).last_hidden_state[:, 0].float(), dim=-1))
                del ids
            for s, emb in zip(streams, embs):
                main.wait_stream(s)
                emb.record_stream(main)
            host = torch.cat(embs).cpu()
            del embs, host
            p["ticks"].append(reqs)
    torch.cuda.synchronize()


def w_chunked_ce_train(ctx, p):
    """A LLaMA-3-sized vocabulary trained without ever holding the whole logits, as memory-saving loss kernels and
    recipes do: a LLaMA-style body (LlamaModel, hidden 1024, intermediate 2816, 8 layers, 16 heads, 4 KV heads,
    vocab 128,256; random weights; bf16 autocast over fp32 parameters, AdamW) whose output head and cross-entropy
    run on 2,048 tokens at a time under non-reentrant checkpointing (each chunk's 2,048 x 128,256 logits made, used
    and freed, then made again in backward). Batch 8, sequence 128 x U[2,16] (256..2,048) per step, so the last
    chunk of each step has its own size."""
    from torch.utils.checkpoint import checkpoint
    from transformers import LlamaConfig, LlamaModel
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=128256, max_position_embeddings=4096)
    body = LlamaModel(cfg).cuda().train()
    head = torch.nn.Linear(1024, cfg.vocab_size, bias=False).cuda()
    opt = torch.optim.AdamW(list(body.parameters()) + list(head.parameters()), lr=1e-4)

    def chunk_loss(h, y):
        return F.cross_entropy(head(h).float(), y, reduction="sum")

    p.update(model="LlamaModel(hidden 1024, intermediate 2816, 8 layers, 16/4 heads) + head to 128256",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW",
             loss="cross-entropy over chunks of 2048 tokens, each under checkpoint(use_reentrant=False)",
             draws="batch 8, sequence 128 x U[2,16]", steps=[], max_steps=p.get("max_steps", 200))
    for step in range(p["max_steps"]):
        t = 128 * rng.randint(2, 16)
        if not ctx.fits(est_allocs=1500):
            break
        ids = torch.randint(0, cfg.vocab_size, (8, t + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            hidden = body(input_ids=ids[:, :-1]).last_hidden_state.reshape(-1, 1024)
            targets = ids[:, 1:].reshape(-1)
            loss = sum(checkpoint(chunk_loss, h, y, use_reentrant=False)
                       for h, y in zip(hidden.split(2048), targets.split(2048))) / targets.numel()
        del hidden
        optimizer_step(loss, opt)
        del ids, targets, loss
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_vector_search_infer(ctx, p):
    """Exact nearest-neighbour search on the GPU, as a retrieval service without an index runs it: a database of
    4,000,000 unit vectors of 256 fp16 (2 GB), queries in batches of U[1,2048] with k of 10 or 100, scored in blocks
    of 500,000 rows (a block's scores up to 2 GB) and merged by top-k; every 25 calls U[10k,200k] vectors are
    appended (torch.cat: the database made anew, one size larger)."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    dim, block = 256, 500_000
    db = F.normalize(torch.randn(4_000_000, dim, device="cuda", dtype=torch.float16), dim=-1)
    p.update(database="4,000,000 x 256 fp16, unit rows; appended every 25 calls", block_rows=block,
             draws="queries U[1,2048], k of {10,100}; appends U[10000,200000]", calls=[],
             max_calls=p.get("max_calls", 400))
    with torch.no_grad():
        for i in range(p["max_calls"]):
            q, k = rng.randint(1, 2048), rng.choice((10, 100))
            grow = rng.randint(10_000, 200_000) if i % 25 == 24 else 0
            if not ctx.fits(est_allocs=150):
                break
            if grow:
                db = torch.cat([db, F.normalize(torch.randn(grow, dim, device="cuda", dtype=torch.float16), dim=-1)])
            queries = F.normalize(torch.randn(q, dim, device="cuda", dtype=torch.float16), dim=-1)
            best_v = best_i = None
            for start in range(0, db.shape[0], block):
                scores = queries @ db[start:start + block].T
                v, idx = scores.topk(min(k, scores.shape[1]), dim=1)
                del scores
                idx += start
                if best_v is not None:
                    v, sel = torch.cat([best_v, v], 1).topk(k, dim=1)
                    idx = torch.cat([best_i, idx], 1).gather(1, sel)
                best_v, best_i = v, idx
                del v, idx
            hits = best_i.cpu()
            del queries, best_v, best_i, hits
            p["calls"].append([q, k, grow])
    torch.cuda.synchronize()


def w_sparse_embed_train(ctx, p):
    """Skip-gram word embeddings trained with sparse gradients, as word2vec-style and large-vocabulary recommender
    jobs train them: input and output tables of 2,000,000 x 128 fp32 (nn.Embedding(sparse=True), 1 GB each; random
    init), SparseAdam (its dense moment buffers, 4 GB, made on the first step). Per step U[4096,65536] centre words
    drawn Zipf-like (floor(V^u)), each with 1 context word and 5 negatives from the same law; loss: the negated
    log-sigmoid of the signed dot products. Every step's gradients are sparse tensors with their own number of
    rows, coalesced by the optimizer."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    V, D, K = 2_000_000, 128, 5
    emb_in = torch.nn.Embedding(V, D, sparse=True).cuda()
    emb_out = torch.nn.Embedding(V, D, sparse=True).cuda()
    opt = torch.optim.SparseAdam(list(emb_in.parameters()) + list(emb_out.parameters()), lr=1e-3)
    sign = torch.tensor([1.0] + [-1.0] * K, device="cuda")

    def zipf(*shape):
        return torch.pow(float(V), torch.rand(*shape, device="cuda")).long().sub_(1).clamp_(0, V - 1)

    p.update(model="2 x nn.Embedding(2,000,000, 128, sparse=True)", dtype="fp32", optimizer="SparseAdam",
             draws="per step: U[4096,65536] centre words, Zipf-like ids, 1 context + 5 negatives each", steps=[],
             max_steps=p.get("max_steps", 300))
    for step in range(p["max_steps"]):
        b = rng.randint(4096, 65536)
        if not ctx.fits(est_allocs=150):
            break
        centre, words = zipf(b), zipf(b, 1 + K)
        logits = torch.bmm(emb_out(words), emb_in(centre).unsqueeze(2)).squeeze(2)
        loss = -F.logsigmoid(logits * sign).mean()
        optimizer_step(loss, opt)
        del centre, words, logits, loss
        p["steps"].append(b)
    torch.cuda.synchronize()


def w_unfreeze_finetune_train(ctx, p):
    """Fine-tuning with gradual unfreezing (ULMFiT's schedule): BERT-base (BertForSequenceClassification, 4 labels,
    random weights) starts with only its classifier and pooler trainable, and every 10 steps the next encoder layer
    from the top is unfrozen (the embeddings last), so the activations autograd keeps, the gradients and AdamW's
    moments (made on a parameter's first gradient) grow stage by stage through the run. bf16 autocast over fp32
    parameters, batch 32, sequence 64 x U[1,8] (64..512) per step."""
    from transformers import BertConfig, BertForSequenceClassification
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    model = BertForSequenceClassification(BertConfig(num_labels=4)).cuda().train()
    for prm in model.parameters():
        prm.requires_grad_(False)
    layers = model.bert.encoder.layer
    stages = [[*model.classifier.parameters(), *model.bert.pooler.parameters()]]
    stages += [list(layers[i].parameters()) for i in reversed(range(len(layers)))]
    stages.append(list(model.bert.embeddings.parameters()))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    p.update(model="BertForSequenceClassification(bert-base shape, 4 labels)", dtype="fp32 params, bf16 autocast",
             optimizer="AdamW", batch=32, unfreeze="classifier+pooler, then one encoder layer from the top every "
             "10 steps, embeddings last", draws="sequence 64 x U[1,8] per step", steps=[],
             max_steps=p.get("max_steps", 200))
    for step in range(p["max_steps"]):
        t = 64 * rng.randint(1, 8)
        if not ctx.fits(est_allocs=800):
            break
        if step % 10 == 0 and step // 10 < len(stages):
            for prm in stages[step // 10]:
                prm.requires_grad_(True)
        ids = torch.randint(0, 30522, (32, t), device="cuda")
        y = torch.randint(0, 4, (32,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=y).loss
        optimizer_step(loss, opt)
        del ids, y, loss
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_simclr_varbatch_train(ctx, p):
    """SimCLR-style contrastive pretraining with a batch that changes per step (as when the batch is sized to the
    free memory, or shards end unevenly): torchvision ResNet-18 (random weights, channels-last, bf16 autocast) and a
    projection head 512 -> 2048 -> 128 on two noisy views of B = 256 x U[1,8] (256..2,048) images of 64 px; the
    NT-Xent loss (temperature 0.2) over the 2B x 2B cosine similarities in fp32 (up to 67 MB, a size of its own
    each step), SGD with momentum 0.9."""
    import torchvision
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn
    net = torchvision.models.resnet18()
    net.fc = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(inplace=True), nn.Linear(2048, 128))
    net = net.cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-6)
    p.update(model="resnet18 + projection 512-2048-128", dtype="fp32 params, bf16 autocast", optimizer="SGD m0.9",
             loss="NT-Xent, temperature 0.2, fp32 similarities", draws="B = 256 x U[1,8] per step, 64 px, 2 views",
             steps=[], max_steps=p.get("max_steps", 200))
    for step in range(p["max_steps"]):
        b = 256 * rng.randint(1, 8)
        if not ctx.fits(est_allocs=400):
            break
        x = torch.randn(b, 3, 64, 64, device="cuda")
        views = torch.cat([x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)]).contiguous(
            memory_format=torch.channels_last)
        del x
        with torch.autocast("cuda", dtype=torch.bfloat16):
            z = net(views)
        z = F.normalize(z.float(), dim=1)
        sim = z @ z.T / 0.2
        sim.fill_diagonal_(float("-inf"))
        target = torch.cat([torch.arange(b, 2 * b), torch.arange(0, b)]).cuda()
        loss = F.cross_entropy(sim, target)
        optimizer_step(loss, opt)
        del views, z, sim, target, loss
        p["steps"].append(b)
    torch.cuda.synchronize()


def w_sam_prompt_infer(ctx, p):
    """Promptable segmentation in the shape of Segment Anything, bf16, eval, no grad, random weights: a ViT-B image
    encoder at 1,024 px (16 px patches: 4,096 tokens, 12 nn.TransformerEncoderLayer of width 768, 12 heads) and a
    neck to 256 x 64 x 64, then a mask decoder for U[1,64] prompts per image (drawn per call): the image embedding
    repeated per prompt, two rounds of cross-attention between 6 tokens per prompt and the 4,096 image tokens, an
    upscaler (two stride-2 transposed convolutions to 32 x 256 x 256), 4 masks per prompt, upsampled to 1,024 x 1,024
    and thresholded; the best mask of each prompt copied to the host. One or two images per call."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn
    bf = dict(device="cuda", dtype=torch.bfloat16)
    patch = nn.Conv2d(3, 768, 16, 16)
    enc = nn.ModuleList(nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True,
                                                   norm_first=True) for _ in range(12))
    neck = nn.Sequential(nn.Conv2d(768, 256, 1), nn.Conv2d(256, 256, 3, padding=1))
    t2i = nn.ModuleList(nn.MultiheadAttention(256, 8, batch_first=True) for _ in range(2))
    i2t = nn.ModuleList(nn.MultiheadAttention(256, 8, batch_first=True) for _ in range(2))
    up = nn.Sequential(nn.ConvTranspose2d(256, 64, 2, 2), nn.GELU(), nn.ConvTranspose2d(64, 32, 2, 2), nn.GELU())
    hyper = nn.Linear(256, 32)
    mods = nn.ModuleList([patch, enc, neck, t2i, i2t, up, hyper]).to(**bf).eval()
    pos = torch.randn(1, 4096, 768, **bf) * 0.02
    dense_pe = torch.randn(1, 256, 64, 64, **bf) * 0.02
    p.update(model="ViT-B/16 encoder at 1024 px + SAM-shaped mask decoder (2 two-way rounds, 4 masks a prompt)",
             dtype="bf16", draws="per call: U[1,2] images, U[1,64] prompts per image", calls=[],
             max_calls=p.get("max_calls", 200))
    with torch.no_grad():
        for i in range(p["max_calls"]):
            n_img = rng.randint(1, 2)
            prompts = [rng.randint(1, 64) for _ in range(n_img)]
            if not ctx.fits(est_allocs=300 + 60 * n_img):
                break
            img = torch.randn(n_img, 3, 1024, 1024, **bf)
            x = patch(img).flatten(2).transpose(1, 2) + pos
            del img
            for layer in enc:
                x = layer(x)
            emb = neck(x.transpose(1, 2).reshape(n_img, 768, 64, 64))
            del x
            for j, n in enumerate(prompts):
                tokens = torch.randn(n, 6, 256, **bf)
                src = (emb[j:j + 1].repeat_interleave(n, 0) + dense_pe).flatten(2).transpose(1, 2)
                for a, b in zip(t2i, i2t):
                    tokens = tokens + a(tokens, src, src, need_weights=False)[0]
                    src = src + b(src, tokens, tokens, need_weights=False)[0]
                feats = up(src.transpose(1, 2).reshape(n, 256, 64, 64))
                del src
                masks = (hyper(tokens[:, :4]) @ feats.flatten(2)).view(n, 4, 256, 256)
                del feats, tokens
                masks = F.interpolate(masks.float(), (1024, 1024), mode="bilinear", align_corners=False)
                best = masks.mean((2, 3)).argmax(1)
                keep = (masks[torch.arange(n, device="cuda"), best] > 0).cpu()
                del masks, best, keep
            del emb
            p["calls"].append(prompts)
    torch.cuda.synchronize()


def w_dino_multicrop_train(ctx, p):
    """Self-distillation with multi-crop in the shape of DINO: a ViT-S/16 student and its EMA teacher (random
    weights, fp32 parameters, bf16 autocast), 2 global crops of 224 px through both, U[2,8] local crops of 96 px
    (drawn per step) through the student only, 48 images a crop; heads 384 -> 2,048 -> 256 -> 4,096 prototypes; the
    cross-entropy between the teacher's centred, sharpened softmax (temperature 0.04) and the student's (0.1) over
    every pair of a global crop and another crop; AdamW; then the teacher by EMA (momentum 0.996, foreach ops over
    its parameters) and the centre by EMA."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, 384, 16, 16)
            self.cls = nn.Parameter(torch.zeros(1, 1, 384))
            self.pos = nn.Parameter(torch.randn(1, 384, 14, 14) * 0.02)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(384, 6, 1536, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True) for _ in range(12))
            self.norm = nn.LayerNorm(384)
            self.head = nn.Sequential(nn.Linear(384, 2048), nn.GELU(), nn.Linear(2048, 256))
            self.proto = nn.Linear(256, 4096, bias=False)

        def forward(self, x):
            x = self.patch(x)
            side = x.shape[-1]
            pos = self.pos if side == 14 else F.interpolate(self.pos, size=(side, side), mode="bicubic",
                                                            align_corners=False)
            x = (x + pos).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
            for blk in self.blocks:
                x = blk(x)
            z = self.head(self.norm(x[:, 0]))
            return self.proto(F.normalize(z, dim=-1))

    student = ViT().cuda().train()
    teacher = ViT().cuda().eval()
    teacher.load_state_dict(student.state_dict())
    for q in teacher.parameters():
        q.requires_grad_(False)
    s_params = [q for q in student.parameters()]
    t_params = [q for q in teacher.parameters()]
    opt = torch.optim.AdamW(student.parameters(), lr=5e-4, weight_decay=0.04)
    center = torch.zeros(1, 4096, device="cuda")
    b = 48
    p.update(model="ViT-S/16 student + EMA teacher, heads 384-2048-256-4096", dtype="fp32 params, bf16 autocast",
             optimizer="AdamW; teacher EMA 0.996 (foreach)", batch_per_crop=b,
             draws="U[2,8] local crops of 96 px per step; 2 global crops of 224 px", steps=[],
             max_steps=p.get("max_steps", 200))
    for step in range(p["max_steps"]):
        n_local = rng.randint(2, 8)
        if not ctx.fits(est_allocs=900 + 150 * n_local):
            break
        globals_ = torch.randn(2 * b, 3, 224, 224, device="cuda")
        locals_ = torch.randn(n_local * b, 3, 96, 96, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with torch.no_grad():
                t_out = teacher(globals_).float()
            s_out = torch.cat([student(globals_).float(), student(locals_).float()])
        del globals_, locals_
        q = F.softmax((t_out - center) / 0.04, dim=-1).chunk(2)
        logp = F.log_softmax(s_out / 0.1, dim=-1).chunk(2 + n_local)
        loss = 0.0
        terms = 0
        for iq in range(2):
            for v in range(2 + n_local):
                if v == iq:
                    continue
                loss = loss + torch.sum(-q[iq] * logp[v], dim=-1).mean()
                terms += 1
        loss = loss / terms
        optimizer_step(loss, opt)
        with torch.no_grad():
            torch._foreach_mul_(t_params, 0.996)
            torch._foreach_add_(t_params, s_params, alpha=0.004)
            center.mul_(0.9).add_(t_out.mean(0, keepdim=True), alpha=0.1)
        del t_out, s_out, q, logp, loss
        p["steps"].append(n_local)
    torch.cuda.synchronize()


def w_nerf_rays_train(ctx, p):
    """Neural radiance field training in the shape of Instant-NGP: a multiresolution hash encoding (16 levels,
    2^19 entries x 2 features a level, resolutions 16..1,024, trilinear over 8 corners, written here) into a
    density MLP (32 -> 64 -> 16) and a colour MLP (16 + a 16-term direction encoding -> 64 -> 64 -> 3), fp32; per
    step R = 2,048 x U[1,4] rays of S = U[32,160] samples each (drawn per step, as occupancy-pruned sampling
    varies), volume rendering by cumulative transmittance (cumprod), MSE to random colours; Adam (its moments on
    the 16 hash tables too)."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn
    levels, table, feat = 16, 1 << 19, 2
    res = [int(16 * (1024 / 16) ** (i / (levels - 1))) for i in range(levels)]
    tables = nn.Parameter(torch.empty(levels, table, feat, device="cuda").uniform_(-1e-4, 1e-4))
    density = nn.Sequential(nn.Linear(levels * feat, 64), nn.ReLU(), nn.Linear(64, 16)).cuda()
    colour = nn.Sequential(nn.Linear(16 + 16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3)).cuda()
    opt = torch.optim.Adam([tables, *density.parameters(), *colour.parameters()], lr=1e-2, eps=1e-15)
    primes = torch.tensor([1, 2654435761, 805459861], device="cuda", dtype=torch.int64)
    corners = torch.tensor([[i >> 2 & 1, i >> 1 & 1, i & 1] for i in range(8)], device="cuda", dtype=torch.int64)

    def encode(x):  # x: (N, 3) in [0, 1)
        out = []
        for lv in range(levels):
            xs = x * res[lv]
            x0 = xs.floor()
            w = xs - x0
            x0 = x0.long()
            f = 0
            for c in range(8):
                idx = x0 + corners[c]
                h = (idx * primes).remainder(table)
                h = (h[:, 0] ^ h[:, 1] ^ h[:, 2]).remainder(table)
                cw = torch.where(corners[c].bool(), w, 1 - w).prod(-1, keepdim=True)
                f = f + cw * tables[lv][h]
            out.append(f)
        return torch.cat(out, dim=-1)

    def dir_enc(d):  # 16 terms: sines and cosines of the direction at 2 frequencies, and d
        return torch.cat([d, torch.sin(d), torch.cos(d), torch.sin(2 * d), torch.cos(2 * d), d[:, :1]], dim=-1)

    p.update(model="hash grid 16 x 2^19 x 2 + MLPs 32-64-16 / 32-64-64-3", dtype="fp32", optimizer="Adam",
             draws="R = 2048 x U[1,4] rays, S = U[32,160] samples a ray, per step", steps=[],
             max_steps=p.get("max_steps", 300))
    for step in range(p["max_steps"]):
        r = 2048 * rng.randint(1, 4)
        s = rng.randint(32, 160)
        if not ctx.fits(est_allocs=3000):
            break
        origins = torch.rand(r, 1, 3, device="cuda") * 0.2 + 0.4
        dirs = F.normalize(torch.randn(r, 3, device="cuda"), dim=-1)
        t = torch.sort(torch.rand(r, s, device="cuda"), dim=-1).values * 0.5
        pts = (origins + dirs[:, None, :] * t[..., None]).clamp(0, 0.999).reshape(-1, 3)
        h = density(encode(pts))
        sigma = F.softplus(h[:, 0]).view(r, s)
        rgb = torch.sigmoid(colour(torch.cat([h, dir_enc(dirs).repeat_interleave(s, 0)], dim=-1))).view(r, s, 3)
        delta = torch.cat([t[:, 1:] - t[:, :-1], torch.full((r, 1), 1e-3, device="cuda")], dim=-1)
        alpha = 1 - torch.exp(-sigma * delta)
        trans = torch.cumprod(torch.cat([torch.ones(r, 1, device="cuda"), 1 - alpha + 1e-10], dim=-1), dim=-1)[:, :-1]
        pixel = ((alpha * trans)[..., None] * rgb).sum(1)
        loss = F.mse_loss(pixel, torch.rand(r, 3, device="cuda"))
        optimizer_step(loss, opt)
        del origins, dirs, t, pts, h, sigma, rgb, delta, alpha, trans, pixel, loss
        p["steps"].append([r, s])
    torch.cuda.synchronize()


def w_lora_adapter_serve(ctx, p):
    """Serving one base model with many LoRA adapters in the shape of S-LoRA / Punica: a decoder of GPT-2-medium
    size (24 layers, width 1,024, 16 heads, 50,257 vocabulary, bf16, random weights, written here) and 24 adapters
    of rank 8, 16 or 64 (drawn per adapter) on the q and v projections, held in pinned host memory; per call a batch
    of U[1,8] requests, each with an adapter drawn, a prompt of U[16,384] tokens (left-padded), U[4,24] new tokens
    decoded greedily with a KV cache grown by torch.cat; the batch's adapters copied to the GPU (non_blocking),
    stacked at the batch's largest rank, and dropped after the call."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    d, heads, layers, vocab = 1024, 16, 24, 50257
    hd = d // heads
    bf = dict(device="cuda", dtype=torch.bfloat16)
    emb = (torch.randn(vocab, d, **bf) * 0.02)
    pos = (torch.randn(2048, d, **bf) * 0.02)
    W = [dict(ln1=torch.ones(d, **bf), qkv=torch.randn(d, 3 * d, **bf) * 0.02, o=torch.randn(d, d, **bf) * 0.02,
              ln2=torch.ones(d, **bf), up=torch.randn(d, 4 * d, **bf) * 0.02, down=torch.randn(4 * d, d, **bf) * 0.02)
         for _ in range(layers)]
    ranks = [rng.choice([8, 16, 64]) for _ in range(24)]
    adapters = [[(torch.randn(2, d, r, dtype=torch.bfloat16) * 0.01).pin_memory(),
                 (torch.randn(2, r, d, dtype=torch.bfloat16) * 0.01).pin_memory()] for r in ranks]

    def lora(x, A, B, which):  # x: (b, t, d); A: (b, 2, d, r); B: (b, 2, r, d)
        return torch.bmm(torch.bmm(x, A[:, which]), B[:, which])

    def forward(ids, start, cache, A, B, mask):
        b, t = ids.shape
        x = emb[ids] + pos[start:start + t]
        for i, w in enumerate(W):
            h = F.layer_norm(x, (d,), w["ln1"])
            qkv = h @ w["qkv"]
            q, k, v = qkv.split(d, dim=-1)
            q = q + lora(h, A, B, 0)
            v = v + lora(h, A, B, 1)
            k = k.view(b, t, heads, hd).transpose(1, 2)
            v = v.view(b, t, heads, hd).transpose(1, 2)
            if cache[i] is not None:
                k = torch.cat([cache[i][0], k], dim=2)
                v = torch.cat([cache[i][1], v], dim=2)
            cache[i] = (k, v)
            q = q.view(b, t, heads, hd).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = x + a.transpose(1, 2).reshape(b, t, d) @ w["o"]
            h = F.layer_norm(x, (d,), w["ln2"])
            x = x + F.gelu(h @ w["up"]) @ w["down"]
        return x[:, -1] @ emb.T

    p.update(model="GPT-2-medium-sized decoder (24 x 1024) + 24 LoRA adapters on q, v", dtype="bf16",
             ranks=ranks, draws="per call: U[1,8] requests, adapter, prompt U[16,384], new tokens U[4,24]",
             calls=[], max_calls=p.get("max_calls", 200))
    with torch.no_grad():
        for call in range(p["max_calls"]):
            n = rng.randint(1, 8)
            reqs = [(rng.randrange(24), rng.randint(16, 384)) for _ in range(n)]
            new = rng.randint(4, 24)
            if not ctx.fits(est_allocs=layers * 24 * (new + 1) + 200):
                break
            rmax = max(ranks[a] for a, _ in reqs)
            A = torch.zeros(n, 2, d, rmax, **bf)
            B = torch.zeros(n, 2, rmax, d, **bf)
            for j, (a, _) in enumerate(reqs):
                A[j, :, :, :ranks[a]].copy_(adapters[a][0].cuda(non_blocking=True))
                B[j, :, :ranks[a], :].copy_(adapters[a][1].cuda(non_blocking=True))
            plen = max(L for _, L in reqs)
            ids = torch.randint(0, vocab, (n, plen), device="cuda")
            valid = torch.zeros(n, plen, dtype=torch.bool, device="cuda")
            for j, (_, L) in enumerate(reqs):
                valid[j, plen - L:] = True
            causal = torch.ones(plen, plen, dtype=torch.bool, device="cuda").tril()
            mask = (causal[None] & valid[:, None, :])[:, None]
            mask = mask | torch.eye(plen, dtype=torch.bool, device="cuda")[None, None]
            cache = [None] * layers
            logits = forward(ids, 0, cache, A, B, mask)
            out = [logits.argmax(-1)]
            for s in range(new - 1):
                valid = torch.cat([valid, torch.ones(n, 1, dtype=torch.bool, device="cuda")], dim=1)
                logits = forward(out[-1][:, None], plen + s, cache, A, B, valid[:, None, None, :])
                out.append(logits.argmax(-1))
            tokens = torch.stack(out, dim=1).cpu()
            del A, B, ids, valid, causal, mask, cache, logits, out, tokens
            p["calls"].append([reqs, new])
    torch.cuda.synchronize()


def w_resume_ckpt_train(ctx, p):
    """Training that checkpoints and resumes in one process, as preemptible and elastic jobs do: a GPT-style decoder
    (12 layers, width 768, 12 heads, 50,257 vocabulary, random weights, bf16 autocast, AdamW), batch 8 x U[128,1024]
    tokens per step; every 6th step the model's and the optimizer's state copied to host memory (state_dict,
    .cpu()), every 12th step the model and optimizer deleted and rebuilt from that copy (weights and Adam moments
    allocated anew, no empty_cache), as a restart after preemption does."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(50257, 768)
            self.pos = nn.Embedding(1024, 768)
            self.blocks = nn.ModuleList(gpt_block(768, 12) for _ in range(12))
            self.norm = nn.LayerNorm(768)

        def forward(self, ids):
            x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for blk in self.blocks:
                x = blk(x)
            return self.norm(x) @ self.tok.weight.T

    def build(state=None):
        model = GPT().cuda().train()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        if state is not None:
            model.load_state_dict(state[0])
            opt.load_state_dict(state[1])
        return model, opt

    model, opt = build()
    host_state = None
    p.update(model="GPT-style decoder 12 x 768, 50,257 vocabulary", dtype="fp32 params, bf16 autocast",
             optimizer="AdamW", draws="sequence U[128,1024] per step, batch 8",
             schedule="state to host every 6th step, model and optimizer rebuilt from it every 12th", steps=[],
             max_steps=p.get("max_steps", 200))
    for step in range(p["max_steps"]):
        t = rng.randint(128, 1024)
        if not ctx.fits(est_allocs=700):
            break
        ids = torch.randint(0, 50257, (8, t + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        optimizer_step(loss, opt)
        del ids, logits, loss
        event = ""
        if step % 6 == 5:
            host_state = (_to_host(model.state_dict()), _to_host(opt.state_dict()))
            event = "saved"
        if step % 12 == 11:
            del model, opt
            model, opt = build(host_state)
            event = "restarted"
        p["steps"].append([t, event] if event else t)
    torch.cuda.synchronize()


def w_pipeline_1f1b_train(ctx, p):
    """Pipeline-parallel training as one rank sees it, all four stages run here: a GPT-style decoder (12 layers,
    width 768, 12 heads, 50,257 vocabulary, random weights, bf16 autocast, AdamW) cut into 4 stages of 3 layers, 8
    micro-batches of 4 x U[128,1024] tokens per step (one length per step), run in the 1F1B schedule (stage s
    warms up with 3 - s forwards, then alternates one forward and one backward, then drains its backwards). Stage
    inputs are detached leaves and each backward is driven by the next stage's input gradient, as between pipeline
    ranks, so up to four micro-batches' activations of a stage live at once and are freed oldest first."""
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    nn = torch.nn
    stages_n, micro_n, width, vocab = 4, 8, 768, 50257
    tok, pos = nn.Embedding(vocab, width).cuda(), nn.Embedding(1024, width).cuda()
    stages = nn.ModuleList(nn.ModuleList(gpt_block(width, 12) for _ in range(3)) for _ in range(stages_n)).cuda()
    norm = nn.LayerNorm(width).cuda()
    params = list(tok.parameters()) + list(pos.parameters()) + list(stages.parameters()) + list(norm.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4)

    def stage_forward(s, x, ids):
        if s == 0:
            x = tok(ids[:, :-1]) + pos(torch.arange(ids.shape[1] - 1, device=ids.device))
        for blk in stages[s]:
            x = blk(x)
        if s == stages_n - 1:
            logits = norm(x) @ tok.weight.T
            return F.cross_entropy(logits.float().view(-1, vocab), ids[:, 1:].reshape(-1)) / micro_n
        return x

    def schedule(s):
        warm = min(stages_n - s - 1, micro_n)
        ops = [("F", m) for m in range(warm)]
        for i in range(micro_n - warm):
            ops += [("F", warm + i), ("B", i)]
        return ops + [("B", m) for m in range(micro_n - warm, micro_n)]

    p.update(model="GPT-style decoder 12 x 768 in 4 stages of 3 layers, 50,257 vocabulary",
             dtype="fp32 params, bf16 autocast", optimizer="AdamW", schedule="1F1B, 8 micro-batches of 4",
             draws="sequence U[128,1024] per step", steps=[], max_steps=p.get("max_steps", 100))
    for step in range(p["max_steps"]):
        t = rng.randint(128, 1024)
        if not ctx.fits(est_allocs=micro_n * 400):
            break
        ids = [torch.randint(0, vocab, (4, t + 1), device="cuda") for _ in range(micro_n)]
        ops = [schedule(s) for s in range(stages_n)]
        at = [0] * stages_n
        outputs, grads, forwarded, backwarded = {}, {}, set(), set()
        while any(at[s] < len(ops[s]) for s in range(stages_n)):
            moved = False
            for s in range(stages_n):
                if at[s] == len(ops[s]):
                    continue
                kind, m = ops[s][at[s]]
                if kind == "F":
                    if s > 0 and (s - 1, m) not in forwarded:
                        continue
                    x = None if s == 0 else outputs[(s - 1, m)][1].detach().requires_grad_()
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        outputs[(s, m)] = (x, stage_forward(s, x, ids[m]))
                    forwarded.add((s, m))
                else:
                    if s < stages_n - 1 and (s + 1, m) not in backwarded:
                        continue
                    x, y = outputs.pop((s, m))
                    if s == stages_n - 1:
                        y.backward()
                    else:
                        y.backward(grads.pop((s, m)))
                    if s > 0:
                        grads[(s - 1, m)] = x.grad
                    del x, y
                    backwarded.add((s, m))
                at[s] += 1
                moved = True
            if not moved:
                raise RuntimeError("1F1B schedule stalled")
        opt.step()
        opt.zero_grad(set_to_none=True)
        del ids, outputs, grads
        p["steps"].append(t)
    torch.cuda.synchronize()


def w_t5_beam_generate(ctx, p):
    """Encoder-decoder beam search: T5 (T5Config d_model 512, d_ff 2048, 6+6 layers, 8 heads: t5-small's shape,
    random weights) bf16 `generate` with 4 beams (self- and cross-attention caches reordered every token): batch
    U[1,8], source U[32,512], new tokens U[16,64] per call."""
    from transformers import T5Config, T5ForConditionalGeneration
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    cfg = T5Config(d_model=512, d_ff=2048, num_layers=6, num_decoder_layers=6, num_heads=8, vocab_size=32128,
                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(cfg).eval().to("cuda", torch.bfloat16)
    p.update(model="T5ForConditionalGeneration(T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8))",
             dtype="bfloat16", beams=4, draws="batch U[1,8], source U[32,512], new tokens U[16,64]", calls=[],
             max_calls=p.get("max_calls", 60))
    beam_search_calls(ctx, p, rng, model, (2, cfg.vocab_size), (32, 512), 400)


def w_shampoo_like_train(ctx, p):
    """A second-order optimizer's memory: ResNet-18 (torchvision, random weights, 100 classes) trained at 112 px,
    batch U[32,256] per step, bf16 autocast, with a Shampoo-like update written here: for each weight matrix (a
    conv's reshaped to out x in*k*k) the statistics L += G G^T and R += G^T G (a side over 2,048 keeps a diagonal
    instead), their inverse fourth roots recomputed by eigendecomposition every 5th step (torch.linalg.eigh: solver
    workspaces of many sizes), and the update L^-1/4 G R^-1/4 with grafted norm; biases and norms by SGD."""
    import torchvision
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    model = torchvision.models.resnet18(num_classes=100).cuda().train()
    mats = [w for w in model.parameters() if w.dim() >= 2]
    others = [w for w in model.parameters() if w.dim() < 2]
    side_max, eps, lr = 2048, 1e-6, 0.05

    def side_state(n):
        return {"full": n <= side_max, "stat": torch.zeros((n, n) if n <= side_max else (n,), device="cuda"),
                "root": None}

    state = [(side_state(w.shape[0]), side_state(w[0].numel())) for w in mats]

    def inv_root(st):
        if st["full"]:
            stat = torch.nan_to_num(st["stat"], nan=0.0, posinf=1e30, neginf=-1e30)  # eigh fails on NaN
            vals, vecs = torch.linalg.eigh(stat + eps * torch.eye(stat.shape[0], device="cuda"))
            del stat
            st["root"] = (vecs * vals.clamp_min(eps).pow(-0.25)) @ vecs.T
            del vals, vecs
        else:
            st["root"] = (st["stat"] + eps).pow(-0.25)

    def apply(st, g, left):
        if st["full"]:
            return st["root"] @ g if left else g @ st["root"]
        return g * (st["root"][:, None] if left else st["root"][None, :])

    p.update(model="torchvision resnet18(num_classes=100)", dtype="fp32 params, bf16 autocast",
             optimizer="Shampoo-like (written here): L, R statistics, inverse 4th roots by eigh every 5th step",
             draws="batch U[32,256] per step at 112 px", steps=[], max_steps=p.get("max_steps", 200))
    for step in range(p["max_steps"]):
        b = rng.randint(32, 256)
        if not ctx.fits(est_allocs=900):
            break
        x = torch.randn(b, 3, 112, 112, device="cuda")
        y = torch.randint(0, 100, (b,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            for w, (ls, rs) in zip(mats, state):
                g = w.grad.reshape(w.shape[0], -1)
                ls["stat"] += g @ g.T if ls["full"] else (g * g).sum(1)
                rs["stat"] += g.T @ g if rs["full"] else (g * g).sum(0)
                if step % 5 == 0:
                    inv_root(ls)
                    inv_root(rs)
                u = apply(rs, apply(ls, g, True), False)
                u *= g.norm() / u.norm().clamp_min(eps)
                w -= lr * u.view_as(w)
                del g, u
            for w in others:
                w -= lr * w.grad
        model.zero_grad(set_to_none=True)
        del x, y, loss
        p["steps"].append(b)
    torch.cuda.synchronize()


def _to_host(obj):
    """A copy of `obj` (a model's or an optimizer's state_dict: dicts, lists, tensors, numbers) with every tensor on
    the host."""
    if torch.is_tensor(obj):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_host(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_host(v) for v in obj)
    return obj


WORKLOADS = {
    "gpt2_generate": (w_gpt2_generate, 60),
    "llm_offload_streams": (w_llm_offload_streams, 60),
    "cnn_varres": (w_cnn_varres, 45),
    "calib_layerwise": (w_calib_layerwise, 70),
    "moe_varload": (w_moe_varload, 45),
    "unet3d_infer": (w_unet3d_infer, 40),
    "calib_awq_1b": (w_calib_awq_1b, 50),
    "bert_infer_varbatch": (w_bert_infer_varbatch, 30),
    "gpt2_generate_small": (w_gpt2_generate_small, 30),
    "vit_train": (w_vit_train, 30),
    "t5_train_varlen": (w_t5_train_varlen, 30),
    "lora_ckpt_train": (w_lora_ckpt_train, 40),
    "gpt2_beam": (w_gpt2_beam, 30),
    "unet2d_bucket_train": (w_unet2d_bucket_train, 30),
    "prefetch_stream_train": (w_prefetch_stream_train, 30),
    "detection_train": (w_detection_train, 30),
    "gnn_train": (w_gnn_train, 30),
    "diffusion_cfg_infer": (w_diffusion_cfg_infer, 30),
    "llama_accum_train": (w_llama_accum_train, 30),
    "recsys_train": (w_recsys_train, 30),
    "llm_serve_contbatch": (w_llm_serve_contbatch, 30),
    "act_offload_train": (w_act_offload_train, 30),
    "pipeline_streams_infer": (w_pipeline_streams_infer, 30),
    "whisper_train": (w_whisper_train, 30),
    "dpo_train": (w_dpo_train, 30),
    "bert_train_eval": (w_bert_train_eval, 30),
    "vae_decode_varres": (w_vae_decode_varres, 30),
    "clip_contrastive_train": (w_clip_contrastive_train, 30),
    "seg_train_fp16": (w_seg_train_fp16, 90),
    "video_infer_varclip": (w_video_infer_varclip, 30),
    "distill_mlm_train": (w_distill_mlm_train, 30),
    "compiled_gpt_train": (w_compiled_gpt_train, 60),
    "fsdp_like_train": (w_fsdp_like_train, 40),
    "lstm_lm_train": (w_lstm_lm_train, 30),
    "convnext_multiscale_train": (w_convnext_multiscale_train, 40),
    "ppo_rollout_train": (w_ppo_rollout_train, 50),
    "gan_train": (w_gan_train, 30),
    "spec_decode_infer": (w_spec_decode_infer, 40),
    "sweep_train": (w_sweep_train, 40),
    "pointcloud_train": (w_pointcloud_train, 30),
    "embed_infer_sorted": (w_embed_infer_sorted, 40),
    "int8_weight_generate": (w_int8_weight_generate, 50),
    "longctx_chunked_prefill": (w_longctx_chunked_prefill, 50),
    "mae_pretrain": (w_mae_pretrain, 40),
    "token_budget_train": (w_token_budget_train, 40),
    "stochastic_depth_train": (w_stochastic_depth_train, 40),
    "zero_offload_train": (w_zero_offload_train, 50),
    "rag_two_model_serve": (w_rag_two_model_serve, 50),
    "graphed_decode_serve": (w_graphed_decode_serve, 45),
    "model_swap_serve": (w_model_swap_serve, 50),
    "ckpt_longseq_train": (w_ckpt_longseq_train, 50),
    "ssm_lm_train": (w_ssm_lm_train, 40),
    "maskrcnn_infer": (w_maskrcnn_infer, 40),
    "multistream_embed_serve": (w_multistream_embed_serve, 40),
    "chunked_ce_train": (w_chunked_ce_train, 40),
    "vector_search_infer": (w_vector_search_infer, 40),
    "sparse_embed_train": (w_sparse_embed_train, 40),
    "unfreeze_finetune_train": (w_unfreeze_finetune_train, 40),
    "simclr_varbatch_train": (w_simclr_varbatch_train, 40),
    "sam_prompt_infer": (w_sam_prompt_infer, 40),
    "dino_multicrop_train": (w_dino_multicrop_train, 40),
    "nerf_rays_train": (w_nerf_rays_train, 40),
    "lora_adapter_serve": (w_lora_adapter_serve, 45),
    "resume_ckpt_train": (w_resume_ckpt_train, 45),
    "pipeline_1f1b_train": (w_pipeline_1f1b_train, 45),
    "t5_beam_generate": (w_t5_beam_generate, 40),
    "shampoo_like_train": (w_shampoo_like_train, 45),
}


# ---------------------------------------------------------------------------------------------------------------
def analyze(snap):
    """Event counts, streams and lower bound (peak of live requested bytes) of a snapshot dict."""
    traces = snap.get("device_traces", [])
    res = {"devices_with_events": sum(1 for t in traces if t)}
    tr = max(traces, key=len) if traces else []
    actions = {}
    streams = {}
    live = peak = 0
    sizes = {}
    unmatched_frees = 0
    for e in tr:
        a = e["action"]
        actions[a] = actions.get(a, 0) + 1
        st = e.get("stream", 0)
        if a == "alloc":
            streams[st] = streams.get(st, 0) + 1
            live += e["size"]
            sizes[e["addr"]] = e["size"]
            if live > peak:
                peak = live
        elif a == "free_requested":
            s = sizes.pop(e["addr"], None)
            if s is None:
                unmatched_frees += 1
            else:
                live -= s
    res.update(events=len(tr), actions=actions, alloc_streams={str(k): v for k, v in streams.items()},
               n_streams=len(streams), lower_bound_bytes=peak, live_at_end_bytes=live,
               unmatched_frees=unmatched_frees,
               first_time_us=tr[0].get("time_us") if tr else None, last_time_us=tr[-1].get("time_us") if tr else None)
    return res


COMPRESS = ("import lzma, os, sys\n"
            "src, dst = sys.argv[1], sys.argv[2]\n"
            "data = open(src, 'rb').read()\n"
            "open(dst + '.part', 'wb').write(lzma.compress(data, preset=9))\n"
            "os.replace(dst + '.part', dst)\n"
            "os.remove(src)\n"
            "print('compressed', dst, len(data), '->', os.path.getsize(dst), flush=True)\n")


def run_one(name, fn, budget_s, args, env, compressors):
    print(f"=== {name}: budget {budget_s:.0f} s, {args.max_allocs} allocations", flush=True)
    gc.collect()
    torch.cuda.synchronize()
    try:
        torch._C._cuda_clearCublasWorkspaces()
    except Exception:
        pass
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    torch.manual_seed(SEED)
    random.seed(SEED)
    kw = dict(enabled="all", context=None, stacks="python", max_entries=args.max_entries)
    try:
        torch.cuda.memory._record_memory_history(clear_history=True, **kw)
    except TypeError:
        torch.cuda.memory._record_memory_history(**kw)
    ctx = Ctx(budget_s, args.max_allocs)
    params = {}
    err = None
    t0 = time.time()
    try:
        fn(ctx, params)
        torch.cuda.synchronize()
    except Exception:
        err = traceback.format_exc()
        print(f"!!! {name} failed:\n{err}", flush=True)
        try:
            torch.cuda.synchronize()
        except Exception:
            pass
    wall = time.time() - t0
    raw = os.path.join(args.tmp, f"{name}.snapshot.pickle")
    rec = {"workload": name, "conf": "native", "wall_s": round(wall, 3), "workload_s": round(ctx.elapsed(), 3),
           "stopped_by": ctx.stopped_by, "seed": SEED, **env}
    try:
        torch.cuda.memory._dump_snapshot(raw)
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    stats = torch.cuda.memory_stats()
    rec.update(peak_allocated=torch.cuda.max_memory_allocated(), peak_reserved=torch.cuda.max_memory_reserved(),
               num_alloc_retries=stats.get("num_alloc_retries"), num_ooms=stats.get("num_ooms"),
               num_device_alloc=stats.get("num_device_alloc"), num_device_free=stats.get("num_device_free"),
               peak_inactive_split=stats.get("inactive_split_bytes.all.peak"),
               allocations=stats.get("allocation.all.allocated"))
    with open(raw, "rb") as f:
        snap = pickle.load(f)
    rec["trace"] = analyze(snap)
    del snap
    rec["params"] = params
    if err:
        rec["error"] = err
    dst = os.path.join(args.xz_dir, f"{name}.snapshot.pickle.xz")
    rec["snapshot_pickle_bytes"] = os.path.getsize(raw)
    compressors.append(subprocess.Popen([sys.executable, "-c", COMPRESS, raw, dst]))
    if args.unrecorded and not err:
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.manual_seed(SEED)
        random.seed(SEED)
        again = ReplayCtx(ctx.calls_fitted)
        t1 = time.time()
        try:
            fn(again, {})
            torch.cuda.synchronize()
            rec["workload_unrecorded_s"] = round(again.elapsed(), 3)
            rec["wall_unrecorded_s"] = round(time.time() - t1, 3)
        except Exception:
            rec["unrecorded_error"] = traceback.format_exc()
    js = os.path.join(args.json_dir, f"{name}.native.json")
    with open(js, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    short = {k: v for k, v in rec.items() if k not in ("params", "error")}
    print(f"--- {name}: " + json.dumps(short), flush=True)
    print(f"--- {name} params: " + json.dumps(params)[:3000], flush=True)
    gc.collect()
    torch.cuda.empty_cache()


def recorded_calls(params):
    """How many calls (steps, requests, rollouts, layers) a workload's recorded run made, from its JSON's params: what
    a ReplayCtx must allow to run it again the same way. None when the params list no such count."""
    n = next((params[k] for k in ("calls", "requests", "steps", "iterations", "layers_done", "ticks") if k in params),
             None)
    n = len(n) if isinstance(n, list) else n
    return n if isinstance(n, int) else None


def time_only(name, fn, args):
    """--time-only: the workload unrecorded, for the calls its JSON lists; workload_unrecorded_s added there."""
    js = os.path.join(args.json_dir, f"{name}.native.json")
    if not os.path.exists(js):
        print(f"=== {name}: no {js}, skipped", flush=True)
        return
    rec = json.load(open(js))
    n = recorded_calls(rec.get("params", {}))
    if n is None:
        print(f"=== {name}: its JSON lists no count of calls, skipped", flush=True)
        return
    gc.collect()
    torch.cuda.empty_cache()
    torch.manual_seed(SEED)
    random.seed(SEED)
    ctx = ReplayCtx(n)
    t0 = time.time()
    fn(ctx, {})
    torch.cuda.synchronize()
    rec["workload_unrecorded_s"] = round(ctx.elapsed(), 3)
    rec["wall_unrecorded_s"] = round(time.time() - t0, 3)
    rec["unrecorded_env"] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    with open(js, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print(f"=== {name}: {n} calls unrecorded in {rec['workload_unrecorded_s']} s (recorded: {rec.get('workload_s')} s)",
          flush=True)


def main():
    global torch, F
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--xz-dir", default="traces")
    ap.add_argument("--json-dir", default="traces")
    ap.add_argument("--tmp", default="/tmp/capture_traces")
    ap.add_argument("--only", default="", help="comma-separated workload names (default: all, in order)")
    ap.add_argument("--budget-scale", type=float, default=1.0, help="multiplies each workload's time budget")
    ap.add_argument("--max-allocs", type=int, default=95000, help="allocations per workload (~3 events each)")
    ap.add_argument("--max-entries", type=int, default=2_000_000)
    ap.add_argument("--unrecorded", action="store_true",
                    help="run each workload again without recording, for its own wall time (workload_unrecorded_s)")
    ap.add_argument("--time-only", action="store_true",
                    help="record nothing: for each workload whose <json-dir>/<name>.native.json exists, run it "
                         "unrecorded for as many calls as that JSON lists (calls, requests, steps or layers_done) "
                         "and add workload_unrecorded_s to the JSON")
    ap.add_argument("--deadline", type=float, default=0.0,
                    help="seconds from start after which no workload starts (0: none)")
    args = ap.parse_args()
    import torch as _torch
    import torch.nn.functional as _F
    torch, F = _torch, _F
    start = time.time()
    for d in (args.xz_dir, args.json_dir, args.tmp):
        os.makedirs(d, exist_ok=True)
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)}
    try:
        import transformers
        import torchvision
        env["transformers"] = transformers.__version__
        env["torchvision"] = torchvision.__version__
    except Exception as e:
        print("import:", e)
    try:
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        pass
    print("env:", json.dumps(env), flush=True)
    torch.zeros(1, device="cuda")
    names = [n for n in args.only.split(",") if n] or list(WORKLOADS)
    compressors = []
    if args.time_only:
        for name in names:
            time_only(name, WORKLOADS[name][0], args)
        return
    for name in names:
        fn, budget = WORKLOADS[name]
        if args.deadline and time.time() - start > args.deadline:
            print(f"=== {name}: skipped, past the deadline ({time.time() - start:.0f} s)", flush=True)
            continue
        try:
            run_one(name, fn, budget * args.budget_scale, args, env, compressors)
        except Exception:
            print(f"!!! {name}: capture failed:\n{traceback.format_exc()}", flush=True)
            try:
                torch.cuda.memory._record_memory_history(enabled=None)
            except Exception:
                pass
        print(f"[{time.time() - start:.0f} s]", flush=True)
    for c in compressors:
        c.wait()
    print(f"all done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
