# sourced on the GPU machine: the carried binaries and libraries of scripts/gpu-carry.sh
export LD_LIBRARY_PATH=$PWD/.dev/lib GMLAKE_LIBRARY=$PWD/.dev/lib/libgmlake_c.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
