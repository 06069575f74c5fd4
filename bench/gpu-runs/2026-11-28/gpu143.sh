#!/usr/bin/env bash
# Run 143 (nineteenth session): is model_swap_serve's per-process gap (1.080 in run 139, 1.051 in run 142, native's
# own processes 3.95-5.20 s) the host's placement? The workload is bound by pageable host <-> device copies of its
# models (module.to) and host-side generate; a process placed on the far NUMA node copies slower. Prints the
# topology, then runs the same per-process A/B with every process bound to the GPU's own CPUs (and their memory
# where numactl exists).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-143}
nvidia-smi topo -m | head -4; lscpu | grep -E '^(NUMA|Socket|CPU\(s\)|Model name)'; command -v numactl || true
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-F' 'a-f' | sed 's/^0000//')
dev=/sys/bus/pci/devices/$bus
aff=$(cat $dev/local_cpulist 2>/dev/null); node=$(cat $dev/numa_node 2>/dev/null)
echo "GPU CPU affinity: ${aff:-unknown} NUMA node: $node"
pin=()
if command -v numactl >/dev/null && [[ ${node:-} =~ ^[0-9]+$ ]]; then pin=(numactl --cpunodebind=$node --membind=$node)
elif [ -n "$aff" ]; then pin=(taskset -c "$aff"); fi
echo "pinned with: ${pin[*]:-nothing}"
timeout ${LIMIT:-460} "${pin[@]}" python3 bench/torch/workload_ab.py model_swap_serve --processes --runs ${RUNS:-4} \
  --runs-per-process 2 > $OUT/run$run-procs-pinned-model_swap_serve.json 2>/tmp/r.log || tail -3 /tmp/r.log
python3 bench/torch/ab_summary.py $OUT/run$run-procs-pinned-model_swap_serve.json
