#!/bin/bash
# The one command for the GPU machine: SASS check, correctness, compute-sanitizer, and the benchmark
# beside PyTorch SDPA (cuDNN and flash backends) in the same process. Run from the folder that
# tests/gpu/build_hopper.sh filled; everything lands in $OUT/hopper.tar.gz (and $OUT/table.md).
#     ./hopper_gpu_run.sh check|bench|all [hopper_vs_sdpa.py options...]
set -u
mode=${1:-all}
shift || true
out=${OUT:-out}
logs=$out/logs
mkdir -p "$logs"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$logs/gpu.txt"
status=0
if [ "$mode" = check ] || [ "$mode" = all ]; then
    cuobjdump --dump-sass hopper_check > "$logs/hopper.sass" && ./check_sass.sh "$logs/hopper.sass" | tee "$logs/sass.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
    timeout 300 ./hopper_check > "$logs/check.log" 2>&1 || status=1
    grep -E "^FAIL|PASSED|FAILED" "$logs/check.log"
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 ./hopper_check --quick > "$logs/memcheck.log" 2>&1
    rc=$?; grep -E "ERROR SUMMARY|PASSED|FAILED" "$logs/memcheck.log"; echo "memcheck exit $rc"; [ $rc = 0 ] || status=1
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
    timeout 500 python3 hopper_vs_sdpa.py --lib ./libxfa_sm90.so "$@" > "$logs/bench.csv" 2> "$logs/bench.err" || status=1
    # ablations, each in the same round robin as the default build (D=128 and 64, f16)
    variants=""
    for v in libxfa_sm90_*.so; do [ -e "$v" ] && n=${v#libxfa_sm90_} && variants="$variants --variant ${n%.so}=./$v"; done
    [ -n "$variants" ] && timeout 300 python3 hopper_vs_sdpa.py --lib ./libxfa_sm90.so --dtypes f16 --dims 64,128,256 \
        --seqlens 2048,8192,16384 --peers "" $variants > "$logs/ablation.csv" 2>> "$logs/bench.err"
    grep -v "^check" "$logs/bench.err" | head
    python3 hopper_table.py "$logs/bench.csv" | tee "$out/table.md"
    [ -s "$logs/ablation.csv" ] && python3 hopper_table.py "$logs/ablation.csv" | cut -d'|' -f1-9 | tee "$out/ablation.md"
fi
tar czf "$out/hopper.tar.gz" -C "$out" logs
exit $status
