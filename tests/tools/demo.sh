#!/bin/sh
# `cugraft demo`: the bundled workload gives bitwise-equal checksums eagerly and under cugraft
# (against the CPU fake driver when there is no GPU). Skipped (77) while the workload, the
# library or the fake driver is not built.
# usage: demo.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1
out=$("$CG" demo --iters 3); rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 0 ] || { echo "FAIL: demo exited $rc"; exit 1; }
printf '%s\n' "$out" | grep -q "results    bitwise equal" || { echo "FAIL: no equality line"; exit 1; }
