"""bench/torch/device_time.py sums a profiler's device activities by category as its doc says (made-up
activities: no GPU, no PyTorch).

    python3 tests/device_time_test.py REPO_ROOT

Run by ctest (label cpu); standard library only."""

import os
import sys


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "bench", "torch"))
    import device_time

    failures = []
    got = device_time.summed([("ampere_sgemm_128x64_tn", True, 1500.0),
                              ("Memcpy DtoH (Device -> Pageable)", True, 250000.0),
                              ("Memset (Device)", True, 2.0),
                              ("void at::native::elementwise_kernel<128, 2>", True, 3.5),
                              ("cudaLaunchKernel", False, 7.0),
                              ("Memcpy HtoD (Pageable -> Device)", True, 40.0)])
    want = {"kernel_s": 0.0015035, "memcpy_s": 0.25004, "memset_s": 2e-06, "kernels": 2}
    if got != want:
        failures.append(f"summed: {got} != {want}")
    if device_time.summed([]) != {"kernel_s": 0.0, "memcpy_s": 0.0, "memset_s": 0.0, "kernels": 0}:
        failures.append(f"summed of nothing: {device_time.summed([])}")
    for f in failures:
        print("FAILED:", f)
    print("device_time_test:", "failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
