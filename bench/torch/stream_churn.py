"""A trace of a job that makes its side streams anew, from one recorded run: the run's device trace repeated N
times, each copy's side streams given new ids (as a job that calls torch.cuda.Stream() per run or per request gets
the next of PyTorch's pooled streams), its addresses moved apart and its times after the previous copy's. Blocks the
run never frees (a stream's cuBLAS workspace: PyTorch keeps one per stream that ran a matmul, 32 MiB on Hopper plus
1 MiB for cuBLASLt) stay live, as they do in the process: each copy's new streams allocate their own; with
--same-streams (every copy keeps the recorded stream ids: a job whose streams are made once) only the first copy
allocates them, as PyTorch reuses a stream's workspace. --drop-unfreed leaves them out, to compare against streams
that pin nothing. --gap-ms puts host time the trace does not hold between copies (a run's setup before its first
allocation: building the model on the host), which the replay's clock sees (Config::handover_quiet_ms reads it).
The output is a snapshot pickle that `gmlake replay` reads:

    python3 bench/torch/stream_churn.py traces/multistream_embed_serve.snapshot.pickle.xz 3 /tmp/churn.pickle
    build/gmlake replay /tmp/churn.pickle --policy gmlake --backend sim:h100 --conf cross_stream_reuse:false

(cross_stream_reuse:false gives every stream its own arenas, as gmlake's PyTorch extension does on the GPU.) Only
the trace's alloc, free_requested and free_completed events are kept, from its device with the most events.
Standard library only; the trace is read (.xz, .gz or plain) by scripts/check-snapshot.py's loader."""

import argparse
import importlib.util
import os
import pickle

KEPT = ("alloc", "free_requested", "free_completed")
ADDRESS_STRIDE = 1 << 40  # each copy's addresses this far above the previous copy's (PyTorch's are below 2^40)


def unfreed(events):
    """Indices of the allocs in `events` whose block is never freed (by free_requested) later in the trace."""
    live = {}
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            live[e["addr"]] = i
        elif e["action"] == "free_requested":
            live.pop(e["addr"], None)
    return set(live.values())


def churn(events, copies, drop_unfreed=False, same_streams=False, gap_us=0):
    """`events` (one device's, in order) repeated `copies` times as described above; returns the new event list.
    With same_streams the blocks never freed are allocated by the first copy only. Each copy starts `gap_us` after
    the previous one's last event (and 1 us)."""
    events = [e for e in events if e["action"] in KEPT]
    if not events:
        return []
    pinned = unfreed(events)  # with same_streams, allocated by the first copy only (one workspace per stream)
    drop = pinned if drop_unfreed else set()
    side = sorted({e.get("stream", 0) for e in events} - {0})
    stride = max(side, default=0) + 1  # copy c's stream s becomes s + c x stride: ids no copy shares
    t0 = events[0].get("time_us", 0)
    span = events[-1].get("time_us", 0) - t0 + 1 + gap_us
    out = []
    for c in range(copies):
        for i, e in enumerate(events):
            if i in drop or (same_streams and c > 0 and i in pinned):
                continue
            f = dict(e)
            stream = e.get("stream", 0)
            f["stream"] = stream if same_streams or stream == 0 else stream + c * stride
            f["addr"] = e["addr"] + c * ADDRESS_STRIDE
            if "time_us" in e:
                f["time_us"] = e["time_us"] + c * span
            out.append(f)
    return out


def load(path):
    """The snapshot at `path`, xz, gzip or plain (by its first bytes): scripts/check-snapshot.py's loader."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location("check_snapshot", os.path.join(root, "scripts", "check-snapshot.py"))
    check_snapshot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_snapshot)
    return check_snapshot.load(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("copies", type=int)
    ap.add_argument("out")
    ap.add_argument("--drop-unfreed", action="store_true")
    ap.add_argument("--same-streams", action="store_true")
    ap.add_argument("--gap-ms", type=float, default=0.0,
                    help="host time between copies that the trace does not hold (a run's setup before its first "
                         "allocation), in ms; the replay's clock follows the trace's times")
    args = ap.parse_args()
    if args.copies < 1:
        ap.error("copies must be at least 1")
    if args.gap_ms < 0:
        ap.error("--gap-ms must be at least 0")
    snap = load(args.trace)
    traces = snap.get("device_traces", [])
    if not traces or not any(traces):
        ap.error(f"{args.trace}: no device trace")
    device = max(range(len(traces)), key=lambda d: len(traces[d]))
    out = [[] for _ in traces]
    out[device] = churn(traces[device], args.copies, args.drop_unfreed, args.same_streams,
                        round(args.gap_ms * 1000))
    with open(args.out, "wb") as f:
        pickle.dump({"segments": [], "device_traces": out}, f, protocol=2)
    print(f"{args.out}: {len(out[device])} events, device {device}, {args.copies} copies")


if __name__ == "__main__":
    main()
