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
flags="-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -warn-spills -Xcompiler -fPIC ${XFA_SM90_FLAGS:-}"
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
$nvcc $flags -shared $objs -o "$out/libxfa_sm90.so"   # for bench/hopper_vs_sdpa.py (ctypes)
# ablation builds: the same kernels without one optimisation each, as libraries for
# bench/hopper_vs_sdpa.py --variant NAME=libxfa_sm90_NAME.so (timed in the same round robin)
if [ "${XFA_SM90_ABLATION:-1}" = 1 ]; then
    for variant in nopingpong:-DXFA_SM90_NO_PINGPONG pin:-DXFA_SM90_PIN rescaleearly:-DXFA_SM90_RESCALE_EARLY; do
        name=${variant%%:*}
        mkdir -p "$out/obj_$name"
        vobjs=""
        pids=""
        for src in "$root"/cuda/hopper/*.cu; do
            obj="$out/obj_$name/$(basename "$src" .cu).o"
            vobjs="$vobjs $obj"
            $nvcc $flags ${variant#*:} -c "$src" -o "$obj" &
            pids="$pids $!"
            if [ $(echo $pids | wc -w) -ge 2 ]; then for p in $pids; do wait $p; done; pids=""; fi
        done
        for p in $pids; do wait $p; done
        $nvcc $flags -shared $vobjs -o "$out/libxfa_sm90_$name.so"
    done
fi
rm -rf "$out"/obj*
# what the GPU machine runs (it gets the lead's checkout, not this one)
cp "$root/tests/gpu/check_sass.sh" "$root/tests/gpu/hopper_gpu_run.sh" "$root/bench/peers.py" \
   "$root/bench/hopper_table.py" "$root/bench/hopper_vs_sdpa.py" "$out/"
if command -v cuobjdump >/dev/null; then
    cuobjdump --dump-sass "$out/hopper_check" > "$out/hopper.sass"
    "$root/tests/gpu/check_sass.sh" "$out/hopper.sass"
else
    echo "cuobjdump not here: the SASS check runs on the GPU machine (hopper_gpu_run.sh)"
fi
