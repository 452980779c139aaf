#!/bin/sh
# Builds the Hopper kernel's GPU checker and benchmark with nvcc (no GPU needed), and checks the SASS:
# HGMMA present, no local-memory traffic (STL/LDL) in the kernels.
#     tests/gpu/build_hopper.sh [OUT_DIR]       (default: .device/hopper)
# Environment: NVCC (default nvcc), XFA_SM90_FLAGS (extra flags, e.g. -DXFA_SM90_NO_PINGPONG).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.device/hopper}
nvcc=${NVCC:-nvcc}
mkdir -p "$out/obj"
flags="-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -warn-spills ${XFA_SM90_FLAGS:-}"
objs=""
pids=""
for src in "$root"/cuda/hopper/*.cu; do
    obj="$out/obj/$(basename "$src" .cu).o"
    objs="$objs $obj"
    $nvcc $flags -c "$src" -o "$obj" &
    pids="$pids $!"
    # two compiles at a time (the build machine has two cores)
    if [ $(echo $pids | wc -w) -ge 2 ]; then for p in $pids; do wait $p; done; pids=""; fi
done
for p in $pids; do wait $p; done
$nvcc $flags -Xcompiler -fopenmp "$root/tests/gpu/hopper_check.cu" $objs -o "$out/hopper_check" -lgomp
$nvcc $flags "$root/bench/hopper_bench.cu" $objs -o "$out/hopper_bench"
# what the GPU machine runs (it gets the lead's checkout, not this one)
cp "$root/tests/gpu/check_sass.sh" "$root/tests/gpu/hopper_gpu_run.sh" "$root/bench/peers.py" \
   "$root/bench/hopper_table.py" "$out/"
if command -v cuobjdump >/dev/null; then
    cuobjdump --dump-sass "$out/hopper_check" > "$out/hopper.sass"
    "$root/tests/gpu/check_sass.sh" "$out/hopper.sass"
else
    echo "cuobjdump not here: the SASS check runs on the GPU machine (hopper_gpu_run.sh)"
fi
