#!/bin/bash
# tests/gpu/run.sh - everything the CUDA backend does on a GPU machine, in one go: the CUDA
# test suites against the fp64 reference, compute-sanitizer memcheck and racecheck on small
# forward problems (both kernel paths), `xfa bench` over the issue's grid beside PyTorch SDPA
# (flash, cuDNN, math) in the same run, and one N = 262144 problem.
#
# Usage, from a source tree: tests/gpu/run.sh [build-dir] [out-dir]
#   build-dir  a CUDA build (default build-gpu); configured and built here first if it has no
#              tools/xfa (needs cmake, nvcc and Check's pkg-config)
#   out-dir    where logs and CSVs go (default $OUT, else gpu-out); one archive cuda_gpu.tar.gz
# XFA_GPU_PHASES picks parts (default "tests sanitizer bench long"); XFA_GPU_QUICK=1 shortens
# the benchmark (fewer points, no math peer); XFA_GPU_PEERS=0 skips the PyTorch peers.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${1:-build-gpu}
final_out=${2:-${OUT:-gpu-out}}
mkdir -p "$final_out"
if [ ! -x "$build/tools/xfa" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DXFA_CUDA=ON -DXFA_OPENCL=OFF -DXFA_VULKAN=OFF \
        -DXFA_CUDA_ARCHITECTURES=native && cmake --build "$build" -j"$(nproc)" || exit 1
fi
export LD_LIBRARY_PATH="$root/$build:$root/$build/lib:$root/lib:${LD_LIBRARY_PATH:-}" # libxfa, libsubunit
xfa="$build/tools/xfa"
logs=$(mktemp -d)
trap 'tar -C "$logs" -czf "$final_out/cuda_gpu.tar.gz" .; cp "$logs/summary.txt" "$final_out/" 2>/dev/null' EXIT
step() { # name timeout command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" > "$logs/$name.log" 2>&1
  echo "$name: rc=$? after $((SECONDS - t0))s" | tee -a "$logs/summary.txt"
}
date -u > "$logs/summary.txt"
nvidia-smi > "$logs/nvidia-smi.txt" 2>&1
step info 30 "$xfa" info
phases=" ${XFA_GPU_PHASES:-tests sanitizer bench long} "
has() { [[ "$phases" == *" $1 "* ]]; }

# Correctness: every suite of the backend, plus the generic kernel forced on every dtype.
if has tests; then
step test_cuda_interop 120 "$build/tests/test_cuda_interop"
step forward 300 "$build/tests/test_forward" cuda
step forward_generic 300 env XFA_CUDA_PATH=generic "$build/tests/test_forward" cuda
step forward_mma 300 env XFA_CUDA_PATH=mma.sync "$build/tests/test_forward" cuda
step cuda_features 600 "$build/tests/test_cuda_features"
step backward 120 "$build/tests/test_backward" cuda
step decode 120 "$build/tests/test_decode" cuda
step threads 120 "$build/tests/test_threads" cuda
step example_minimal 60 "$build/examples/example_minimal" cuda
step example_transformer 60 "$build/examples/example_transformer_block" cuda
[ -d tests/conformance ] && step conformance 120 "$xfa" conformance check tests/conformance --backend cuda
# Every head dim, dtype and causal flag at odd lengths, against fp64.
for d in 32 64 96 128 160 192 224 256; do
  for t in f16 bf16 f32; do
    step "run_d${d}_${t}" 60 "$xfa" run --backend cuda --batch 2 --seqlen 257 --seqlen-k 301 --heads 4 --heads-kv 2 \
         --dim $d --dtype $t --causal --check
  done
done
step run_n1 30 "$xfa" run --backend cuda --seqlen 1 --dim 128 --dtype bf16 --causal --check
fi

# compute-sanitizer on small problems: the tensor-core kernel (f16, bf16, causal, ragged) and the generic one.
if has sanitizer && command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    step "sanitizer_${tool}_mma_f16" 120 compute-sanitizer --tool $tool --error-exitcode 9 \
         "$xfa" run --backend cuda --batch 1 --seqlen 200 --seqlen-k 333 --heads 2 --dim 128 --dtype f16 --causal --check
    step "sanitizer_${tool}_mma_bf16_d256" 120 compute-sanitizer --tool $tool --error-exitcode 9 \
         "$xfa" run --backend cuda --batch 1 --seqlen 77 --heads 2 --dim 256 --dtype bf16 --check
    step "sanitizer_${tool}_mma_d64" 120 compute-sanitizer --tool $tool --error-exitcode 9 \
         "$xfa" run --backend cuda --batch 2 --seqlen 130 --heads 2 --dim 64 --dtype f16 --causal --check
    step "sanitizer_${tool}_generic" 120 compute-sanitizer --tool $tool --error-exitcode 9 \
         "$xfa" run --backend cuda --batch 1 --seqlen 100 --heads 2 --dim 96 --dtype f32 --causal --check
  done
  step sanitizer_memcheck_interop 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/test_cuda_interop"
fi

# Benchmark: the issue's grid, xfa and the peers in one run (same machine, same minutes).
seqlens=512,1024,2048,4096,8192,16384
peers=flash,cudnn,math
[ "${XFA_GPU_QUICK:-0}" = 1 ] && seqlens=1024,4096,16384 && peers=flash,cudnn
csv="$logs/bench.csv"
if has bench; then
echo "backend,device,path,dtype,head_dim,causal,batch,seqlen,heads,median_ms,min_ms,tflops,gbps" > "$csv"
for t in f16 bf16; do
  for d in 64 128 256; do
    for c in "" --causal; do
      "$xfa" bench --backend cuda --dtype $t --dim $d $c --seqlens $seqlens --csv 2>> "$logs/bench_err.log" | tail -n +2 >> "$csv"
      # On Hopper builds the default is wgmma; time the mma.sync kernel beside it.
      if grep -q "path wgmma\|: wgmma" "$logs/info.log"; then
        XFA_CUDA_PATH=mma.sync "$xfa" bench --backend cuda --dtype $t --dim $d $c --seqlens $seqlens --csv \
          2>> "$logs/bench_err.log" | tail -n +2 >> "$csv"
      fi
    done
  done
done
echo "xfa bench: $(($(wc -l < "$csv") - 1)) points" >> "$logs/summary.txt"
if [ -f bench/peers.py ] && [ "${XFA_GPU_PEERS:-1}" = 1 ]; then
  step peers 420 bash -c "python3 bench/peers.py --dtypes f16,bf16 --dims 64,128,256 --seqlens $seqlens \
       --peers $peers > '$logs/peers.csv'"
  grep -v '^backend,' "$logs/peers.csv" >> "$csv"
fi
cp "$csv" "$final_out/bench.csv"
fi
# Long context: extra memory O(N) (no N x N matrix); checked on a sample of rows would be too slow, so timed only.
has long && step long_262144 300 "$xfa" run --backend cuda --batch 1 --seqlen 262144 --heads 16 --dim 128 --dtype bf16 --no-check
cat "$logs/summary.txt"
