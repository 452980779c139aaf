#!/bin/bash
# vulkan_gpu_run.sh - everything the Vulkan backend does on the GPU machine, in one go:
# the forward suite (coopmat and scalar paths, validation layer on and off), the
# interop suite, xfa's benchmark on both paths, and PyTorch SDPA flash on the same
# shapes. Run from the copied worktree with a prebuilt build/ (static libxfa);
# logs go to $OUT.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export LD_LIBRARY_PATH="$here/lib:${LD_LIBRARY_PATH:-}"   # libsubunit for Check
export XDG_CACHE_HOME=/tmp/xfa-cache
# Logs gather in one folder and leave as one archive (few files come back from the machine).
final_out=$OUT
OUT=$(mktemp -d)
trap 'tar -C "$OUT" -czf "$final_out/vulkan_logs.tar.gz" .' EXIT
step() { # name timeout command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: rc=$? ${SECONDS}s after $((SECONDS - t0))s" | tee -a "$OUT/summary.txt"
}
vulkaninfo --summary > "$OUT/vulkaninfo.txt" 2>&1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
date -u >> "$OUT/summary.txt"
step forward_coopmat 120 build/tests/test_forward vulkan
step forward_coopmat_validation 150 env XFA_VULKAN_VALIDATION=1 build/tests/test_forward vulkan
step forward_scalar_validation 150 env XFA_VULKAN_VALIDATION=1 XFA_VULKAN_PATH=scalar build/tests/test_forward vulkan
step interop_validation 60 env XFA_VULKAN_VALIDATION=1 build/tests/test_vulkan_interop
step bench_coopmat 150 build/xfa_vulkan_bench --long
step bench_scalar 150 env XFA_VULKAN_PATH=scalar build/xfa_vulkan_bench
step sdpa_flash 120 python3 bench/vulkan_peer_sdpa.py
tail -n 3 "$OUT"/forward_*.log "$OUT"/interop_validation.log
cat "$OUT"/bench_coopmat.log "$OUT"/bench_scalar.log "$OUT"/sdpa_flash.log
