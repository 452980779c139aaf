#!/bin/bash
# The one command for the GPU machine: SASS check, correctness, compute-sanitizer, benchmark beside
# PyTorch SDPA (cuDNN and flash backends) in the same run. Run from the folder build_hopper.sh filled.
#     ./hopper_gpu_run.sh check|bench|all [bench options...]      logs and CSVs under $OUT (or ./out)
set -u
mode=${1:-all}
shift || true
out=${OUT:-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$out/gpu.txt"
status=0
if [ "$mode" = check ] || [ "$mode" = all ]; then
    cuobjdump --dump-sass hopper_check > "$out/hopper.sass" && ./check_sass.sh "$out/hopper.sass" | tee "$out/sass.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
    timeout 300 ./hopper_check 2>&1 | tee "$out/check.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 ./hopper_check --quick > "$out/memcheck.log" 2>&1
    rc=$?; tail -3 "$out/memcheck.log"; echo "memcheck exit $rc"; [ $rc = 0 ] || status=1
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
    timeout 400 ./hopper_bench "$@" | tee "$out/xfa.csv"
    for v in hopper_bench_*; do
        [ -x "$v" ] && timeout 200 "./$v" --label "xfa_${v#hopper_bench_}" --dims 128 --dtypes f16 "$@" | tail -n +2 | tee -a "$out/xfa.csv"
    done
    timeout 400 python3 peers.py --dtypes f16,bf16 --dims 64,128,256 --peers cudnn,flash > "$out/peers.csv" 2> "$out/peers.err"
    python3 hopper_table.py "$out/xfa.csv" "$out/peers.csv" | tee "$out/table.md"
fi
exit $status
