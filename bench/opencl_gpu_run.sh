#!/bin/bash
# opencl_gpu_run.sh - one GPU-machine run of the OpenCL backend: the test suites on the NVIDIA
# OpenCL device (tensor-core path, then the portable path), the benchmark, and PyTorch SDPA peers
# on the same shapes. Usage (from the source root, with a prebuilt static build dir):
#   bench/opencl_gpu_run.sh <build-dir> <out-dir>
set -u
B=$1 OUT=$2
export XDG_CACHE_HOME=/tmp/xfa-cache CK_FORK=no
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u | tee -a $OUT/gpu.txt
$B/xfa_opencl_bench --list | tee $OUT/devices.txt
dev=$(awk -F'\t' '$3 ~ /NVIDIA/ {print $1; exit}' $OUT/devices.txt)
[ -z "$dev" ] && { echo "no NVIDIA OpenCL device"; exit 1; }
echo "NVIDIA device index $dev"
{
  echo "== test_forward opencl (default path)"; timeout 150 $B/tests/test_forward opencl $dev
  echo "== test_opencl_mma"; timeout 120 $B/tests/test_opencl_mma $dev
  echo "== test_opencl_interop"; timeout 60 $B/tests/test_opencl_interop $dev
  echo "== test_forward opencl (XFA_OPENCL_PATH=portable)"; XFA_OPENCL_PATH=portable timeout 120 $B/tests/test_forward opencl $dev
} 2>&1 | tee $OUT/tests.txt | grep -E "^==|Checks|backend|device|SKIP" 
timeout 200 $B/xfa_opencl_bench --device $dev --long 2>&1 | tee $OUT/bench_xfa.md
PYTHONUNBUFFERED=1 timeout 150 python3 bench/opencl_sdpa_peers.py 16384 5 2>&1 | tee $OUT/bench_sdpa.md
