"""How long the device worked during a stretch of host time, from torch.profiler's CUDA activity: kernels, copies
and memsets, summed by category. It splits a slow run into device time and host time: a run that took longer with
the same device time lost it on the host (launches, the allocator, page faults); one whose kernels or copies took
longer lost it on the device.

    with device_time.Recorder() as rec:
        run()
    rec.result  # {"kernel_s", "memcpy_s", "memset_s", "kernels"}

Profiling adds host time to every launch (CUPTI activity records), under either allocator alike: compare these
figures between allocators, not with runs timed without the profiler. Standard library only at import time;
torch is imported when a Recorder starts."""

MEMCPY_PREFIX, MEMSET_PREFIX = "Memcpy", "Memset"  # the names CUPTI gives copies and memsets in torch.profiler
FIELDS = ("kernel_s", "memcpy_s", "memset_s", "kernels")  # summed()'s keys


def summed(activities):
    """{"kernel_s", "memcpy_s", "memset_s", "kernels"} (seconds, to 0.1 µs) from (name, on_device, duration_us)
    triples: the durations of device activities (on_device true) summed into copies ("Memcpy ..."), memsets
    ("Memset ...") and kernels (the rest, counted too); host activities (CUDA runtime calls) left out."""
    out = dict.fromkeys(FIELDS, 0.0) | {"kernels": 0}
    for name, on_device, duration_us in activities:
        if not on_device:
            continue
        if name.startswith(MEMCPY_PREFIX):
            out["memcpy_s"] += duration_us / 1e6
        elif name.startswith(MEMSET_PREFIX):
            out["memset_s"] += duration_us / 1e6
        else:
            out["kernel_s"] += duration_us / 1e6
            out["kernels"] += 1
    return {k: round(v, 7) if isinstance(v, float) else v for k, v in out.items()}  # to 0.1 µs


def activities(prof):
    """(name, on_device, duration_us) of each event of a finished torch.profiler.profile, user annotations (which
    span kernels and would count them twice) left out."""
    from torch.autograd import DeviceType
    for e in prof.events():
        if getattr(e, "is_user_annotation", False):
            continue
        yield e.name, e.device_type == DeviceType.CUDA, e.time_range.elapsed_us()


class Recorder:
    """A context manager profiling CUDA activity only (no CPU operators: the least host cost the profiler has);
    `result` holds summed() of what ran on the device within it once it exits. Not reentrant; one at a time in a
    process (torch.profiler's limit)."""

    def __init__(self):
        self.prof, self.result = None, None

    def __enter__(self):
        import torch.profiler
        self.prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
        self.prof.__enter__()
        return self

    def __exit__(self, *exc):
        self.prof.__exit__(*exc)
        self.result = summed(activities(self.prof))
        return False
