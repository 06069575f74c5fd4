"""torch.multiprocessing shares gmlake-backed CUDA tensors (ctest label gpu): the c10 extension's shareIpcHandle /
getIpcDevPtr (gmlake_ipc_export / gmlake_ipc_import, include/gmlake/ipc.h).

The parent enables gmlake, makes a tensor (a second one first, so the shared block is not the pool's first) and a
view at an offset, and sends both to a spawned child through a torch.multiprocessing queue. The child, which
enables gmlake too, checks the bytes of both, writes new values into the tensor, and reports. The parent then
checks that it sees the child's values (the same memory both ways). The child also sends back a checksum of what
it read, so a child that saw zeros or another block fails the check.

  python3 tests/gpu/torch_ipc_test.py      # exits 0 and prints one line per check when every check passed
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

N = (12 << 20) // 4 + 1000  # 12 MiB and a bit: several 2 MiB chunks, not a multiple of them


def child(queue, results, done):
    import gmlake
    import torch

    gmlake.torch.enable()
    assert gmlake.torch.mode() == "extension", gmlake.torch.mode()
    tensor, view = queue.get()
    expected = torch.arange(N, dtype=torch.float32, device="cuda")
    results.put(("child sees the parent's tensor", bool(torch.equal(tensor, expected))))
    results.put(("child sees the parent's view at an offset", bool(torch.equal(view, expected[1000:2000]))))
    results.put(("child's sum", float(tensor.double().sum().item())))
    tensor.mul_(-1)
    torch.cuda.synchronize()
    results.put(("child wrote", True))
    done.wait(60)
    del tensor, view


def main():
    import gmlake
    import torch
    import torch.multiprocessing as mp

    gmlake.torch.enable()
    assert gmlake.torch.mode() == "extension", gmlake.torch.mode()
    first = torch.ones(1000, device="cuda")
    tensor = torch.arange(N, dtype=torch.float32, device="cuda")
    view = tensor[1000:2000]
    ctx = mp.get_context("spawn")
    queue, results, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    process = ctx.Process(target=child, args=(queue, results, done))
    process.start()
    queue.put((tensor, view))
    checks = {}
    for _ in range(4):
        name, value = results.get(timeout=120)
        checks[name] = value
    torch.cuda.synchronize()
    expected = -torch.arange(N, dtype=torch.float32, device="cuda")
    checks["parent sees the child's writes"] = bool(torch.equal(tensor, expected))
    done.set()
    process.join(60)
    checks["child exited 0"] = process.exitcode == 0
    expected_sum = float(N) * (N - 1) / 2
    checks["child's sum"] = checks["child's sum"] == expected_sum
    stats = torch.cuda.memory_stats()
    checks["memory_stats still gmlake's"] = stats.get("allocated_bytes.all.current", 0) >= tensor.numel() * 4
    del first
    failed = [name for name, ok in checks.items() if not ok]
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if failed:
        print("torch IPC test FAILED:", ", ".join(failed))
        return 1
    print("torch IPC test passed: a gmlake tensor shared both ways through torch.multiprocessing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
