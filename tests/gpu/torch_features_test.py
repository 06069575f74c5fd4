"""What a PyTorch user reaches for, with gmlake as the allocator, on a GPU machine:

  history    torch.cuda.memory._record_memory_history() + _snapshot() / _dump_snapshot(): segments whose blocks
             cover them, device traces with alloc / free_requested / free_completed / segment_map entries and
             Python frames; torch.cuda._memory_viz.segsum and trace accept the dump; `gmlake replay` replays it
             (when GMLAKE_CLI names the gmlake program)
  mempool    torch.cuda.MemPool + use_mem_pool: the pool's blocks are its own (MemPool.snapshot), freed into it
  graph      torch.cuda.graph(g, pool=...): capture into a private pool, replay with new inputs == eager
  compile    torch.compile(mode="reduce-overhead") (CUDA graph trees) on a small transformer: outputs == eager
  checkpoint CUDA graph trees recording a graph after replaying others, which restores the private pool to a
             checkpoint (setCheckpointPoolState): a compiled training step (forward + backward + SGD, the backward
             first run one step after the forward, so that it is recorded after the forward's replay) gives
             eager's losses; two compiled functions in a row, the second given a new shape after both replay,
             give eager's outputs; each calls torch._C._cuda_setCheckpointPoolState at least once (counted by a
             wrapper: cudagraph_trees.py looks it up on torch._C at each call)
  fraction   torch.cuda.set_per_process_memory_fraction: gmlake's cap (gmlake_set_cap_bytes) at fraction x the
             device's memory; a tensor past it raises torch.OutOfMemoryError, reserved bytes stay under it, one
             that fits still allocates, and fraction 1 lifts the cap
  use_on_oom torch.cuda.MemPool(use_on_oom=True): an allocation the main pool (capped by the memory fraction)
             cannot hold is served from that MemPool's cached memory, reserved bytes unchanged; without
             use_on_oom the same allocation raises torch.OutOfMemoryError
  cache_info c10's CUDACachingAllocator::cacheInfo (what cuDNN fits its convolution workspace to, ATen's
             Conv_v8.cpp get_available_workspace) called as ATen calls it, with a zero guess, through a small
             inline extension: at least the device's free memory less 1 GiB, and at least the pool's unused bytes
             after a freed 1 GiB block (an answer of 0 leaves cuDNN only the plans that need no workspace)

Run: python3 tests/gpu/torch_features_test.py [feature ...] (default: all). Prints one line per check and exits 1
when any fails; every feature runs even when an earlier one failed. Needs torch with CUDA and gmlake's
extension (GMLAKE_LIBRARY / PYTHONPATH as tests/gpu/torch_allocator_test.py).
"""

import gc
import os
import pickle
import subprocess
import sys
import tempfile
import traceback

import torch

import gmlake

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def feature_history():
    torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(4096, 1024, device="cuda")
    c = (a @ b.t()).relu()
    del b
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        d = torch.ones(3 << 20, device="cuda")
    d.record_stream(torch.cuda.current_stream())
    del d
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    segments, traces = snapshot["segments"], snapshot["device_traces"]
    check(len(segments) > 0, f"snapshot has segments ({len(segments)})")
    covered = all(sum(b["size"] for b in seg["blocks"]) == seg["total_size"] for seg in segments)
    check(covered, "every segment's blocks add up to its total_size")
    live = {b["address"] for seg in segments for b in seg["blocks"] if b["state"] == "active_allocated"}
    blocks_in = {seg["address"]: seg for seg in segments}
    check(len(live) >= 2, f"live blocks in the snapshot ({len(live)})")
    actions = {e["action"] for e in traces[0]}
    for action in ("alloc", "free_requested", "free_completed", "segment_map"):
        check(action in actions, f"device trace has {action} entries")
    framed = [e for e in traces[0] if e["action"] == "alloc" and e.get("frames")]
    check(len(framed) > 0, f"alloc entries carry Python frames ({len(framed)})")
    reserved = sum(seg["total_size"] for seg in segments)
    check(reserved <= torch.cuda.memory_reserved(), f"segments {reserved} <= memory_reserved {torch.cuda.memory_reserved()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "snapshot.pickle")
        torch.cuda.memory._dump_snapshot(path)
        with open(path, "rb") as f:
            dumped = pickle.load(f)
        from torch.cuda import _memory_viz

        summary = _memory_viz.segsum(dumped)
        check("total_reserved" in summary, "_memory_viz.segsum accepts the dump")
        lines = _memory_viz.trace(dumped)
        check(len(lines.splitlines()) > 10, f"_memory_viz.trace accepts the dump ({len(lines.splitlines())} lines)")
        cli = os.environ.get("GMLAKE_CLI")
        if cli:
            done = subprocess.run([cli, "replay", path, "--policy", "all"], capture_output=True, text=True)
            check(done.returncode == 0 and "gmlake" in done.stdout, f"gmlake replay reads the dump: {done.stderr.strip()[:200]}")
            if done.returncode == 0:
                print(done.stdout)
    torch.cuda.memory._record_memory_history(enabled=None)
    del a, c
    del blocks_in


def feature_mempool():
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        x = torch.randn(2048, 2048, device="cuda")
        y = x * 2
    z = torch.randn(1024, device="cuda")  # the main pool again
    pool_segments = pool.snapshot()
    pool_blocks = {b["address"] for seg in pool_segments for b in seg["blocks"] if b["state"] == "active_allocated"}
    check(x.data_ptr() in pool_blocks and y.data_ptr() in pool_blocks, "MemPool holds the blocks made inside use_mem_pool")
    check(z.data_ptr() not in pool_blocks, "a block made outside is not in the MemPool")
    check(pool.use_count() >= 1, f"MemPool.use_count() {pool.use_count()}")
    check(torch.equal(y, x * 2), "MemPool tensors compute")
    del x, y, z
    torch.cuda.synchronize()
    live_after = {b["address"] for seg in pool.snapshot() for b in seg["blocks"] if b["state"] == "active_allocated"}
    check(len(live_after) == 0, "freed blocks went back into the MemPool")
    del pool
    torch.cuda.empty_cache()


def feature_graph():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512)).cuda()
    static_in = torch.randn(64, 512, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    pool = torch.cuda.graph_pool_handle()
    with torch.cuda.graph(g, pool=pool):
        static_out = model(static_in)
    ok = True
    for _ in range(5):
        new_in = torch.randn(64, 512, device="cuda")
        static_in.copy_(new_in)
        g.replay()
        torch.cuda.synchronize()
        ok = ok and torch.allclose(static_out, model(new_in), atol=1e-5)
    check(ok, "CUDA graph captured into a private pool replays equal to eager (5 inputs)")
    del g, static_out


def feature_compile():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=512, batch_first=True).cuda().eval()
    compiled = torch.compile(layer, mode="reduce-overhead")
    ok = True
    with torch.no_grad():
        for step in range(4):
            x = torch.randn(8, 64, 256, device="cuda")
            out = compiled(x).clone()
            ok = ok and torch.allclose(out, layer(x), atol=1e-4, rtol=1e-4)
    check(ok, "torch.compile(mode='reduce-overhead') on a transformer layer equals eager (4 steps)")


class CountCheckpointRestores:
    """Counts the calls of torch._C._cuda_setCheckpointPoolState (CUDA graph trees look it up at each call)."""

    def __enter__(self):
        self.calls = 0
        self.real = torch._C._cuda_setCheckpointPoolState

        def counting(*args, **kwargs):
            self.calls += 1
            return self.real(*args, **kwargs)

        torch._C._cuda_setCheckpointPoolState = counting
        return self

    def __exit__(self, *exc):
        torch._C._cuda_setCheckpointPoolState = self.real


def train_losses(compiled, steps=8):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    run = torch.compile(model, mode="reduce-overhead") if compiled else model
    torch.manual_seed(1)
    batches = [(torch.randn(32, 64, device="cuda"), torch.randn(32, 64, device="cuda")) for _ in range(steps)]
    losses = []
    for step, (x, y) in enumerate(batches):
        if compiled:
            torch.compiler.cudagraph_mark_step_begin()
        loss = torch.nn.functional.mse_loss(run(x), y)
        if step > 0:  # step 0: the forward alone, so that the backward is recorded after the forward replays
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    return losses


def feature_checkpoint():
    torch._dynamo.reset()
    eager = train_losses(compiled=False)
    with CountCheckpointRestores() as restores:
        compiled = train_losses(compiled=True)
    close = all(abs(c - e) <= 1e-3 * max(1.0, abs(e)) for c, e in zip(compiled, eager))
    check(close, f"compiled training step (reduce-overhead) gives eager's losses: {compiled} vs {eager}")
    check(restores.calls >= 1, f"the training step restored the private pool to a checkpoint ({restores.calls} calls)")

    torch._dynamo.reset()
    torch.manual_seed(2)
    w = torch.randn(128, 128, device="cuda")
    f = torch.compile(lambda x: (x @ w).relu(), mode="reduce-overhead")
    g = torch.compile(lambda h: (h * 2).sum(dim=0), mode="reduce-overhead")
    ok = True
    # slow_path_cudagraph_asserts: after each restore, CUDA graph trees also check that the pool's allocated blocks
    # are exactly the live tensors' (checkPoolLiveAllocations, then the snapshot's segments on a mismatch).
    import torch._inductor.config as inductor_config

    slow_asserts = inductor_config.patch({"triton.slow_path_cudagraph_asserts": True})
    with CountCheckpointRestores() as restores, torch.no_grad(), slow_asserts:
        for step in range(8):
            torch.compiler.cudagraph_mark_step_begin()
            x = torch.randn(64, 128, device="cuda")
            rows = 64 if step < 5 else 48  # g sees a new shape after f and g were recorded and replayed
            out = g(f(x)[:rows]).clone()
            ok = ok and torch.allclose(out, ((x @ w).relu()[:rows] * 2).sum(dim=0), atol=1e-3, rtol=1e-3)
    check(ok, "two compiled functions, the second re-recorded on a new shape after replays, equal eager (8 steps; "
          "CUDA graph trees' slow-path pool asserts on)")
    check(restores.calls >= 1, f"the new shape restored the private pool to a checkpoint ({restores.calls} calls)")


def feature_fraction():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    fraction = (4 << 30) / total  # a 4 GiB cap
    torch.cuda.set_per_process_memory_fraction(fraction)
    check(abs(torch.cuda.get_per_process_memory_fraction() - fraction) < 1e-12
          if hasattr(torch.cuda, "get_per_process_memory_fraction") else True, "the fraction reads back")
    keep = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    try:
        torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
        check(False, "an allocation past the fraction's cap raises torch.OutOfMemoryError (it did not)")
    except torch.OutOfMemoryError:
        check(True, "an allocation past the fraction's cap raises torch.OutOfMemoryError")
    reserved = torch.cuda.memory_reserved()
    check(reserved <= 4 << 30, f"reserved {reserved} bytes stay under the 4 GiB cap")
    small = torch.full((256 << 20,), 7, dtype=torch.uint8, device="cuda")  # (a sum would upcast to 2 GiB)
    check(int(small[0]) == 7 and int(small[-1]) == 7, "a tensor that fits under the cap still allocates and computes")
    torch.cuda.set_per_process_memory_fraction(1.0)
    big = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    check(big.numel() == 2 << 30, "fraction 1 lifts the cap")
    del keep, small, big
    torch.cuda.empty_cache()


def feature_use_on_oom():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    plain, spare = torch.cuda.MemPool(), torch.cuda.MemPool(use_on_oom=True)
    for pool in (plain, spare):  # each caches 1 GiB, free
        with torch.cuda.use_mem_pool(pool):
            t = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        del t
    del pool  # (the loop's name for spare: its destructor must run at `del spare` below)
    torch.cuda.set_per_process_memory_fraction((512 << 20) / total)  # the main pool: 512 MiB
    try:
        before = torch.cuda.memory_reserved()
        x = torch.full((768 << 20,), 3, dtype=torch.uint8, device="cuda")  # past the main pool's cap
        in_spare = any(s["address"] <= x.data_ptr() < s["address"] + s["total_size"] for s in spare.snapshot())
        check(in_spare, "an allocation past the main pool's cap came from the use_on_oom MemPool's cached memory")
        check(torch.cuda.memory_reserved() == before, "no memory was reserved for it")
        check(int(x[-1]) == 3, "the tensor computes")
        del x
        del spare  # its destructor sets use_on_oom back to False
        gc.collect()
        try:
            torch.empty(768 << 20, dtype=torch.uint8, device="cuda")
            check(False, "without a use_on_oom MemPool the allocation raises torch.OutOfMemoryError (it did not)")
        except torch.OutOfMemoryError:
            check(True, "without a use_on_oom MemPool the allocation raises torch.OutOfMemoryError")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    del plain
    torch.cuda.empty_cache()


def feature_cache_info():
    from torch.utils.cpp_extension import load_inline
    ext = load_inline(
        name="gmlake_cache_info_probe",
        cpp_sources="""
#include <c10/cuda/CUDACachingAllocator.h>
long long cache_info(long long device) {
  size_t largest = 0;  // as ATen's get_available_workspace asks
  c10::cuda::CUDACachingAllocator::cacheInfo(static_cast<c10::DeviceIndex>(device), &largest);
  return static_cast<long long>(largest);
}""",
        functions=["cache_info"], with_cuda=True, verbose=False)
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info()
    largest = ext.cache_info(0)
    check(largest >= free - (1 << 30), f"cacheInfo answers {largest} bytes with {free} free on the device")
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    del x  # its pages stay in the pool, unused
    unused = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    largest = ext.cache_info(0)
    check(unused >= 1 << 30 and largest >= unused, f"cacheInfo answers {largest} bytes with {unused} unused in the pool")
    torch.cuda.empty_cache()


def main():
    gmlake.torch.enable()
    check(gmlake.torch.mode() == "extension", f"gmlake in extension mode ({gmlake.torch.mode()})")
    wanted = sys.argv[1:] or ["history", "mempool", "graph", "compile", "checkpoint", "fraction", "use_on_oom",
                              "cache_info"]
    for name in wanted:
        try:
            globals()["feature_" + name]()
        except Exception:  # noqa: BLE001 (each feature reports and the next runs)
            check(False, f"{name} raised:\n{traceback.format_exc()}")
    check(torch.cuda.memory_stats()["allocated_bytes.all.current"] == gmlake.torch.memory_stats()["allocated_bytes.all.current"],
          "torch.cuda.memory_stats() is still gmlake's")
    print(f"{'PASSED' if not failures else 'FAILED'}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
