"""gmlake under torchrun: every rank enables gmlake on its own device, trains a small GPT-2 with
DistributedDataParallel (NCCL) for a few steps, and reports its device's gmlake statistics.

    torchrun --nproc_per_node=2 bench/torch/ddp_check.py
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))


def main():
    import torch
    import torch.distributed as dist

    rank = int(os.environ["LOCAL_RANK"])
    import gmlake

    gmlake.torch.enable()  # before torch.cuda.set_device, which already initializes PyTorch's allocator
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(1234)
    model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=512, n_head=8)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(rank)
    for step in range(10):
        seq = int(torch.randint(64, 512, (1,), generator=g))
        x = torch.randint(0, 50257, (4, seq), generator=g).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = ddp(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    # The weights must agree across ranks after DDP's all-reduces: a wrong byte anywhere shows here.
    w = next(model.parameters()).detach().float().sum()
    ws = [torch.zeros_like(w) for _ in range(dist.get_world_size())]
    dist.all_gather(ws, w)
    s = gmlake.torch.memory_stats(rank)
    print(json.dumps({"rank": rank, "device": torch.cuda.current_device(), "loss": loss.item(),
                      "weights_agree": all(bool(torch.equal(ws[0], x)) for x in ws),
                      "reserved_peak": s["reserved_bytes.all.peak"], "allocated_peak": s["allocated_bytes.all.peak"],
                      "other_device_reserved": gmlake.torch.memory_stats(1 - rank)["reserved_bytes.all.peak"],
                      "num_allocs": s["gmlake.num_allocs"]}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
