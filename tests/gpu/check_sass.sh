#!/bin/sh
# Checks a SASS listing of the Hopper kernels (cuobjdump --dump-sass or nvdisasm): every forward
# kernel issues HGMMA, none touches local memory (STL/LDL: spills, or a register array indexed at
# run time). Also reports how many exp2 (MUFU.EX2) of the main loop sit between the two wgmma waits
# (`WARPGROUP.DEPBAR.LE gsb0, 0x1` and `... 0x0`), i.e. run in the shadow of the P V product (only
# with -DXFA_SM90_PIN; see cuda/hopper/sm90_forward.cuh).
set -eu
sass=$1
awk '
/Function : / { name = $3; kernels[name] = 1; next }
/^\t*\.text\./ { name = $1; sub(/:$/, "", name); sub(/.*\.text\./, "", name); kernels[name] = 1; next }
name !~ /forward_kernel/ { next }
/HGMMA/ { hgmma[name]++ }
/(STL|LDL)/ { local[name]++ }
/DEPBAR.LE gsb0, 0x1/ { inwait[name] = 1 }
inwait[name] && /MUFU.EX2/ { overlap[name]++ }
/DEPBAR.LE gsb0, 0x0/ { inwait[name] = 0 }
END {
    bad = 0; n = 0
    for (k in kernels) {
        if (k !~ /forward_kernel/) continue
        n++
        printf "%s: %d HGMMA, %d local-memory instructions, %d exp2 overlapping P V\n", k, hgmma[k], local[k], overlap[k]
        if (hgmma[k] == 0 || local[k] > 0) bad = 1
    }
    if (n == 0) { print "no forward kernel in the SASS"; bad = 1 }
    exit bad
}' "$sass" && echo "sass check: ok" || { echo "sass check: FAILED"; exit 1; }
