#!/usr/bin/env python3
"""Checks a memory snapshot written by `gmlake replay TRACE --snapshot-out FILE` (or by PyTorch's
torch.cuda.memory._dump_snapshot): loads it with pickle (.xz and .gz too) and

  - when torch is importable, runs torch.cuda._memory_viz.segsum and trace on it (PyTorch's own readers; segsum
    asserts that every segment's blocks add up to its size) and prints their first lines;
  - always checks the schema in plain Python: every segment's keys, its blocks contiguous from its address and
    adding up to total_size, states valid, allocated_size / active_size / requested_size equal to its blocks',
    every trace entry's keys and action.

Usage: scripts/check-snapshot.py FILE...   Exit status 0 when every file passes, 1 otherwise.
"""
import gzip
import lzma
import pickle
import sys

SEGMENT_KEYS = ("device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
                "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks")
BLOCK_KEYS = ("address", "size", "requested_size", "state", "frames")
STATES = ("active_allocated", "active_pending_free", "inactive")
ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot")


def load(path):
    with open(path, "rb") as f:
        head = f.read(6)
    opener = lzma.open if head.startswith(b"\xfd7zXZ") else gzip.open if head.startswith(b"\x1f\x8b") else open
    with opener(path, "rb") as f:
        return pickle.load(f)


def schema_errors(data):
    errors = []
    if not isinstance(data, dict):
        return ["top level is a %s, not a dict" % type(data).__name__]
    for key in ("segments", "device_traces", "allocator_settings"):
        if key not in data:
            errors.append("no " + key)
    for i, seg in enumerate(data.get("segments", [])):
        where = "segments[%d]" % i
        missing = [k for k in SEGMENT_KEYS if k not in seg]
        if missing:
            errors.append("%s: no %s" % (where, ", ".join(missing)))
            continue
        if seg["segment_type"] not in ("large", "small"):
            errors.append("%s: segment_type %r" % (where, seg["segment_type"]))
        nxt = seg["address"]
        allocated = active = requested = 0
        for j, b in enumerate(seg["blocks"]):
            bwhere = "%s.blocks[%d]" % (where, j)
            missing = [k for k in BLOCK_KEYS if k not in b]
            if missing:
                errors.append("%s: no %s" % (bwhere, ", ".join(missing)))
                continue
            if b["address"] != nxt:
                errors.append("%s: address %d, expected %d (blocks not contiguous)" % (bwhere, b["address"], nxt))
            if b["size"] <= 0:
                errors.append("%s: size %d" % (bwhere, b["size"]))
            nxt = b["address"] + b["size"]
            if b["state"] not in STATES:
                errors.append("%s: state %r" % (bwhere, b["state"]))
            elif b["state"] != "inactive":
                if not 0 < b["requested_size"] <= b["size"]:
                    errors.append("%s: requested_size %d of size %d" % (bwhere, b["requested_size"], b["size"]))
                active += b["size"]
                requested += b["requested_size"]
                if b["state"] == "active_allocated":
                    allocated += b["size"]
        if nxt - seg["address"] != seg["total_size"]:
            errors.append("%s: blocks add up to %d, total_size %d" % (where, nxt - seg["address"], seg["total_size"]))
        for key, value in (("allocated_size", allocated), ("active_size", active), ("requested_size", requested)):
            if seg[key] != value:
                errors.append("%s: %s %d, its blocks %d" % (where, key, seg[key], value))
    for d, entries in enumerate(data.get("device_traces", [])):
        for i, e in enumerate(entries):
            where = "device_traces[%d][%d]" % (d, i)
            if e.get("action") not in ACTIONS:
                errors.append("%s: action %r" % (where, e.get("action")))
                continue
            keys = ("device_free" if e["action"] == "oom" else "addr", "size", "stream", "time_us")
            missing = [k for k in keys if k not in e]
            if missing:
                errors.append("%s: no %s" % (where, ", ".join(missing)))
    return errors


def torch_views(data):
    try:
        from torch.cuda import _memory_viz
    except ImportError:
        return None
    segsum = _memory_viz.segsum(data)
    trace = _memory_viz.trace(data)
    return segsum, trace


def main(paths):
    ok = True
    for path in paths:
        try:
            data = load(path)
        except Exception as e:  # a file that pickle cannot load fails the check, with the reason
            print("%s: cannot load: %s" % (path, e))
            ok = False
            continue
        errors = schema_errors(data)
        segments = data.get("segments", []) if isinstance(data, dict) else []
        entries = sum(len(t) for t in data.get("device_traces", [])) if isinstance(data, dict) else 0
        print("%s: %d segments, %d reserved bytes, %d trace entries, schema %s" % (
            path, len(segments), sum(s.get("total_size", 0) for s in segments), entries,
            "ok" if not errors else "BROKEN"))
        for e in errors[:20]:
            print("  " + e)
        if errors:
            ok = False
            continue
        try:
            views = torch_views(data)
        except Exception as e:  # PyTorch's own reader refused it
            print("  torch.cuda._memory_viz failed: %r" % (e,))
            ok = False
            continue
        if views is None:
            print("  torch not importable: PyTorch's viewers not run (schema checked in plain Python)")
        else:
            segsum, trace = views
            print("  _memory_viz.segsum: ok; " + " | ".join(l for l in segsum.splitlines() if l.startswith("total_")))
            print("  _memory_viz.trace: ok; %d lines" % len(trace.splitlines()))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
