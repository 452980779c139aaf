#!/bin/sh
# Checks a cuobjdump --dump-sass listing of the Hopper kernels: every forward kernel issues HGMMA and
# none touches local memory (STL/LDL: spills or a register array indexed at run time).
set -eu
sass=$1
awk '
/Function : / { name = $3; kernels[name] = 1; next }
name ~ /forward_kernel/ && /HGMMA/ { hgmma[name]++ }
name ~ /forward_kernel/ && /(STL|LDL)/ { local[name]++ }
END {
    bad = 0; n = 0
    for (k in kernels) {
        if (k !~ /forward_kernel/) continue
        n++
        printf "%s: %d HGMMA, %d local-memory instructions\n", k, hgmma[k], local[k]
        if (hgmma[k] == 0 || local[k] > 0) bad = 1
    }
    if (n == 0) { print "no forward kernel in the SASS"; bad = 1 }
    exit bad
}' "$sass" && echo "sass check: ok" || { echo "sass check: FAILED"; exit 1; }
