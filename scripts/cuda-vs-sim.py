"""Compares replays on --backend cuda with the same replays on --backend sim: `gmlake replay --json` results,
matched by (trace, device, policy).

    python3 scripts/cuda-vs-sim.py CUDA.json SIM.json [CUDA.json SIM.json ...]

gmlake and expandable place blocks by offset into their arenas, not by address, so on the two backends they must
agree in peak reserved bytes, backend calls of every kind, out-of-memory errors and evictions. caching breaks
best-fit ties by address, and each backend hands out different addresses: its rows are printed, never counted
as a difference. Prints one line per replay, then a summary line. Exit status: 0 when every compared replay
agrees, 1 when one differs, a sim replay has no cuda counterpart, a file cannot be read, or nothing was compared;
2 on bad usage. Used by scripts/gpu-cuda-vs-sim.sh and scripts/gpu-check.sh.
"""
import json
import sys

FIELDS = ("peak_reserved_bytes", "backend_calls", "ooms", "evictions")
ADDRESS_ORDERED = ("caching",)  # placement depends on addresses: informative only


def load(path):
    return {(r["trace"], r["device"], r["policy"]): r for r in json.load(open(path))}


def compare(cuda, sim):
    """Rows (key, differing fields, informative only) for every sim replay."""
    rows = []
    for key, s in sim.items():
        c = cuda.get(key)
        differ = list(FIELDS) if c is None else [f for f in FIELDS if c.get(f) != s.get(f)]
        rows.append((key, differ, key[2] in ADDRESS_ORDERED, c, s))
    return rows


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    rows = []
    for cuda_path, sim_path in zip(argv[0::2], argv[1::2]):
        try:
            rows += compare(load(cuda_path), load(sim_path))
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"cuda vs sim: cannot read {cuda_path} / {sim_path}: {e}")
            return 1
    counted = [r for r in rows if not r[2]]
    bad = [r for r in counted if r[1]]
    for (trace, device, policy), differ, informative, c, s in rows:
        verdict = "same" if not differ else ("differs (address order, not counted)" if informative else "DIFFERENT")
        print(f"{verdict:9} {trace:20} dev {device} {policy:10} peak reserved cuda "
              f"{c['peak_reserved_bytes'] if c else 'missing'} sim {s['peak_reserved_bytes']}")
        for f in differ:
            print(f"    {f}: cuda {c.get(f) if c else 'missing'} sim {s.get(f)}")
    print(f"cuda vs sim: {len(counted) - len(bad)} of {len(counted)} replays identical in "
          f"{', '.join(FIELDS)}; differ: {[r[0] for r in bad] or 'none'}"
          + (f"; {len(rows) - len(counted)} caching replays not counted" if len(rows) > len(counted) else ""))
    return 1 if bad or not counted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
