#!/bin/bash
# gpu_run.sh - one GPU-machine run of everything xfa has there: each GPU backend's test suites on
# the NVIDIA device, then one benchmark sweep of every backend beside PyTorch SDPA's flash, cuDNN
# and math (unfused) backends, all in the same run, merged into one CSV, one markdown table with
# the ratios (bench/table.py) and one chart (bench/plot.py); then GQA/window runs, decoding against a KV cache
# (xfa bench-decode beside peers.py --decode and the copy bandwidth of the same run).
#
#   bench/gpu_run.sh <build-dir> [tests|bench|all] [quick]
#
# Run from the source root on the GPU machine with a build carried from the development machine.
# Source .device/prelude.sh first when OpenCL/Vulkan loaders must be brought (../shared/device).
# DTYPES, DIMS, SEQLENS and ITERS override the sweep. Logs and results go to $OUT (default ./gpu-out), packed as gpu_run.tar.gz plus the table,
# CSV and chart (the device tool returns only a few files).
set -u
B=${1:?usage: gpu_run.sh <build-dir> [tests|bench|all] [quick]}
WHAT=${2:-all}
QUICK=${3:-}
OUT=${OUT:-$PWD/gpu-out}
LOGS=$(mktemp -d)
mkdir -p "$OUT"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/xfa-cache} CK_FORK=no
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"   # libsubunit for Check, if carried
trap 'tar -C "$LOGS" -czf "$OUT/gpu_run.tar.gz" .; cp "$LOGS"/summary.txt "$OUT"/ 2>/dev/null' EXIT
trap 'exit 124' TERM INT   # a time limit still leaves the logs

step() { # name timeout command...: runs it, logs it, one summary line
    local name=$1 limit=$2 t0=$SECONDS
    shift 2
    timeout -k 5 "$limit" "$@" > "$LOGS/$name.log" 2>&1
    local rc=$?
    echo "$name: rc=$rc $((SECONDS - t0))s $(grep -E '^[0-9]+%: Checks' "$LOGS/$name.log" | tail -1)" |
        tee -a "$LOGS/summary.txt"
}

{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } | tee "$LOGS/device.txt"
"$B"/tools/xfa info > "$LOGS/info.txt" 2>&1
# The GPU's index within each backend (OpenCL also lists PoCL's CPU device).
gpu_index() { awk -v be="$1" -v pat="${GPU_PATTERN:-NVIDIA|H100|H200}" '
    $1 == be && /device/ { inside = 1; next }
    /^[a-z]/ { inside = 0 }
    inside && /^  \[[0-9]+\]/ && $0 ~ pat { gsub(/[\[\]]/, "", $1); print $1; exit }' "$LOGS/info.txt"; }
BACKENDS=""
for be in cuda vulkan opencl; do
    idx=$(gpu_index $be)
    [ -n "$idx" ] && BACKENDS="$BACKENDS $be:$idx"
done
echo "GPU backends (name:device):$BACKENDS" | tee -a "$LOGS/summary.txt"

if [ "$WHAT" != bench ]; then
    for entry in $BACKENDS; do
        be=${entry%%:*} idx=${entry##*:}
        suites="forward backward decode threads allocator"
        [ -n "$QUICK" ] && suites="forward decode"
        for suite in $suites; do
            step "${suite}_$be" 300 "$B/tests/test_$suite" "$be" "$idx"
        done
        # The validation layer over the device's own paths; Debian 12's (1.3.239, what .device/prelude.sh
        # carries) predates VK_KHR_cooperative_matrix and rejects its SPIR-V, so only on request.
        [ "$be" = vulkan ] && [ -n "${XFA_GPU_VALIDATION:-}" ] &&
            step forward_vulkan_validation 300 env XFA_VULKAN_VALIDATION=1 "$B/tests/test_forward" vulkan "$idx"
        for t in "$B"/tests/test_${be}_*; do
            [ -n "$QUICK" ] && [[ "$t" != *features* ]] && continue
            [ -x "$t" ] && step "$(basename "$t")" 300 "$t" "$idx"
        done
        # The OpenCL tensor-core kernel's second shape (32 rows per warp, opt-in) on the real tensor cores.
        [ "$be" = opencl ] && [ -x "$B/tests/test_opencl_mma" ] &&
            step test_opencl_mma_wide 300 "$B/tests/test_opencl_mma" "$idx" wide
    done
    if [ -x "$B/tools/xfa" ] && [ -z "$QUICK" ]; then
        step crosscheck 300 "$B/tools/xfa" crosscheck --cases 24
        step conformance 300 "$B/tools/xfa" conformance check tests/conformance
    fi
fi

if [ "$WHAT" != tests ]; then
    if [ -n "$QUICK" ]; then dtypes="f16" dims="64 128" seqlens=1024,4096,16384 iters=5
    else dtypes="f16 bf16" dims="64 128 256" seqlens=512,1024,2048,4096,8192,16384 iters=10; fi
    dtypes=${DTYPES:-$dtypes} dims=${DIMS:-$dims} seqlens=${SEQLENS:-$seqlens} iters=${ITERS:-$iters}   # the environment may narrow the grid
    csv="$OUT/bench.csv"
    echo "backend,device,path,dtype,head_dim,causal,batch,seqlen,heads,median_ms,min_ms,tflops,gbps" > "$csv"
    for entry in $BACKENDS; do
        be=${entry%%:*} idx=${entry##*:}
        for dtype in $dtypes; do for d in $dims; do for causal in "" --causal; do
            timeout -k 5 300 "$B/tools/xfa" bench --backend "$be" --device "$idx" --dtype "$dtype" --dim "$d" \
                $causal --seqlens "$seqlens" --tokens 16384 --iters "$iters" --csv 2>> "$LOGS/bench_$be.log" |
                tail -n +2 >> "$csv"
        done; done; done
        echo "bench $be: $(grep -c "^$be," "$csv") points" | tee -a "$LOGS/summary.txt"
        # The OpenCL tensor-core kernel's 32-rows-per-warp shape (XFA_OPENCL_PATH=mma.sync-wide) as its own column.
        if [ "$be" = opencl ] && grep -q "^opencl,.*mma.sync" "$csv"; then
            for dtype in $dtypes; do for d in $dims; do for causal in "" --causal; do
                XFA_OPENCL_PATH=mma.sync-wide timeout -k 5 300 "$B/tools/xfa" bench --backend opencl --device "$idx" \
                    --dtype "$dtype" --dim "$d" $causal --seqlens "$seqlens" --tokens 16384 --iters "$iters" --csv \
                    2>> "$LOGS/bench_opencl_wide.log" | tail -n +2 | sed 's/^opencl,/opencl-wide,/' >> "$csv"
            done; done; done
        fi
        # On Hopper the CUDA backend runs the wgmma kernel; its mma.sync kernel (Ampere-class) as a column too.
        if [ "$be" = cuda ] && grep -q "^cuda,.*wgmma" "$csv"; then
            for dtype in $dtypes; do for d in $dims; do for causal in "" --causal; do
                XFA_CUDA_PATH=mma.sync timeout -k 5 300 "$B/tools/xfa" bench --backend cuda --device "$idx" \
                    --dtype "$dtype" --dim "$d" $causal --seqlens "$seqlens" --tokens 16384 --iters "$iters" --csv \
                    2>> "$LOGS/bench_cuda_mma.log" | tail -n +2 | sed 's/^cuda,/cuda-mma.sync,/' >> "$csv"
            done; done; done
        fi
    done
    PYTHONUNBUFFERED=1 timeout -k 5 600 python3 bench/peers.py --dtypes "${dtypes// /,}" --dims "${dims// /,}" \
        --seqlens "$seqlens" --iters "$iters" 2> "$LOGS/peers.log" | tail -n +2 >> "$csv"
    echo "peers: $(grep -c '^sdpa_' "$csv") points" | tee -a "$LOGS/summary.txt"
    python3 bench/table.py "$csv" > "$OUT/bench_table.md" 2>> "$LOGS/summary.txt"
    python3 bench/plot.py "$OUT/bench.png" "$csv" >> "$LOGS/plot.log" 2>&1 || echo "plot failed" >> "$LOGS/summary.txt"

    # Features at D=128 f16, 16k tokens, 16 query heads: GQA 8:1 against the same with repeated K/V
    # (16 K/V heads), and a causal 4k window against full causal, N = 4k..16k (time should go as N·W).
    fcsv="$OUT/bench_features.csv"
    head -1 "$csv" > "$fcsv"
    for entry in $BACKENDS; do
        be=${entry%%:*} idx=${entry##*:}
        for variant in "--heads-kv 16" "--heads-kv 2" "--heads-kv 16 --window 4096,0"; do
            timeout -k 5 300 "$B/tools/xfa" bench --backend "$be" --device "$idx" --dtype f16 --dim 128 --heads 16 \
                $variant --causal --seqlens 4096,8192,16384 --tokens 16384 --iters "$iters" --csv \
                2>> "$LOGS/bench_features_$be.log" | tail -n +2 >> "$fcsv"
        done
    done
    python3 bench/table.py "$fcsv" > "$OUT/bench_features_table.md" 2>> "$LOGS/summary.txt"


    # Decoding: one new token against a KV cache, 32 query / 8 KV heads, D=128, fp16; GB/s of K and V.
    if [ -n "$QUICK" ]; then batches=1,8 caches=1024,32768; else batches=1,8,32 caches=1024,8192,32768,131072; fi
    dcsv="$OUT/bench_decode.csv"
    head -1 "$csv" > "$dcsv"
    for entry in $BACKENDS; do
        be=${entry%%:*} idx=${entry##*:}
        timeout -k 5 300 "$B/tools/xfa" bench-decode --backend "$be" --device "$idx" --dtype f16 --dim 128 \
            --batches "$batches" --caches "$caches" --iters "$iters" --csv 2>> "$LOGS/bench_decode_$be.log" |
            tail -n +2 >> "$dcsv"
    done
    PYTHONUNBUFFERED=1 timeout -k 5 300 python3 bench/peers.py --decode --batches "$batches" --caches "$caches" \
        --peers flash,cudnn --iters "$iters" 2>> "$LOGS/peers.log" | tail -n +2 >> "$dcsv"
    echo "decode: $(($(wc -l < "$dcsv") - 1)) points" | tee -a "$LOGS/summary.txt"
    python3 bench/table.py --metric gbps "$dcsv" > "$OUT/bench_decode_table.md" 2>> "$LOGS/summary.txt"
    # The backward pass alone (TFLOP/s at 2.5x the forward's FLOPs) beside SDPA flash and cuDNN via autograd,
    # where the issue sets its target (f16, D=64/128, N >= 2k); OpenCL and Vulkan (generic kernels, slow)
    # at two lengths. BWD_DTYPES, BWD_DIMS and BWD_SEQLENS override.
    bdtypes=${BWD_DTYPES:-f16} bdims=${BWD_DIMS:-64 128} bseqlens=${BWD_SEQLENS:-2048,4096,8192,16384}
    bcsv="$OUT/bench_backward.csv"
    head -1 "$csv" > "$bcsv"
    for entry in $BACKENDS; do
        be=${entry%%:*} idx=${entry##*:}
        lens=$bseqlens
        [ "$be" != cuda ] && lens=${BWD_SEQLENS:-2048,8192}
        for dtype in $bdtypes; do for d in $bdims; do for causal in "" --causal; do
            timeout -k 5 300 "$B/tools/xfa" bench --backward --backend "$be" --device "$idx" --dtype "$dtype" --dim "$d" \
                $causal --seqlens "$lens" --tokens 16384 --iters "$iters" --csv 2>> "$LOGS/bench_backward_$be.log" |
                tail -n +2 >> "$bcsv"
        done; done; done
    done
    PYTHONUNBUFFERED=1 timeout -k 5 600 python3 bench/peers.py --backward --peers flash,cudnn --dtypes "${bdtypes// /,}" \
        --dims "${bdims// /,}" --seqlens "$bseqlens" --iters "$iters" 2>> "$LOGS/peers.log" | tail -n +2 >> "$bcsv"
    echo "backward: $(($(wc -l < "$bcsv") - 1)) points" | tee -a "$LOGS/summary.txt"
    python3 bench/table.py "$bcsv" > "$OUT/bench_backward_table.md" 2>> "$LOGS/summary.txt"
    cat "$OUT/bench_table.md" "$OUT/bench_features_table.md" "$OUT/bench_backward_table.md" "$OUT/bench_decode_table.md"
fi
