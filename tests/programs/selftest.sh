#!/bin/sh
# fake-selftest: the CPU fake driver alone, no shim. Runs the test programs against it and checks
# its counters (FAKECUDA_STATS), call log (FAKECUDA_LOG) and fault injection (FAKECUDA_FAIL).
# usage: selftest.sh FOURWAY LIFECYCLE THREADS FAKECHECK   (LD_LIBRARY_PATH selects the fake)
set -u
fourway=$1 lifecycle=$2 threads=$3 fakecheck=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
stat() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/stats"; }
field() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/out"; }

# fourway: every launch ran exactly once, eagerly, through all four ways
FAKECUDA_STATS=$tmp/stats FAKECUDA_LOG=$tmp/log "$fourway" --iters 5 > "$tmp/out" || fail "fourway exited $?"
launches=$(field launches)
[ "${launches:-0}" -gt 0 ] || fail "fourway printed no launch count"
[ "$(stat kernels_run)" = "$launches" ] || fail "kernels_run $(stat kernels_run) != launches $launches"
[ "$(stat launch_eager)" = "$launches" ] || fail "launch_eager $(stat launch_eager) != launches $launches"
[ "$(grep -c '^run ' "$tmp/log")" = "$launches" ] || fail "log has $(grep -c '^run ' "$tmp/log") run lines, want $launches"
for api in cuLaunchKernel cuLaunchKernel_ptsz cuLaunchKernelEx cuGetProcAddress_v2 cuMemsetD32Async \
           cuMemcpyDtoDAsync_v2_ptsz cuStreamSynchronize; do
  [ -n "$(stat "api.$api")" ] || fail "fourway never called $api"
done
[ -z "$(stat api.cuCtxGetStreamPriorityRange)" ] || fail "cuCtxGetStreamPriorityRange called without --unlisted"
LC_ALL=C sort -c "$tmp/stats" || fail "stats file not sorted"
sum=$(field checksum)

# deterministic, and --unlisted changes nothing but the extra call (once per iteration)
FAKECUDA_STATS=$tmp/stats "$fourway" --iters 5 --unlisted > "$tmp/out" || fail "fourway --unlisted exited $?"
[ "$(field checksum)" = "$sum" ] || fail "fourway --unlisted checksum $(field checksum) != $sum"
[ "$(stat api.cuCtxGetStreamPriorityRange)" = 5 ] || fail "--unlisted made $(stat api.cuCtxGetStreamPriorityRange) calls, want 5"
"$fourway" --iters 6 > "$tmp/out"
[ "$(field checksum)" != "$sum" ] || fail "fourway checksum does not depend on the work done"

# FAKECUDA_FAIL: the third cuStreamSynchronize fails, the program names it and exits 1
FAKECUDA_FAIL=cuStreamSynchronize:3 "$fourway" --iters 5 > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc = 1 ] || fail "fourway under FAKECUDA_FAIL exited $rc, want 1"
grep -q 'cuStreamSynchronize.*CUDA_ERROR_OUT_OF_MEMORY' "$tmp/err" || fail "failing call not reported: $(cat "$tmp/err")"

# the program's own capture: 6 kernel + 2 memory nodes, 10 graph launches, nothing eager
FAKECUDA_STATS=$tmp/stats "$lifecycle" --mode capture > "$tmp/out" || fail "lifecycle capture exited $?"
[ "$(stat captured_nodes)" = 8 ] || fail "captured_nodes $(stat captured_nodes), want 8"
[ "$(stat graph_launches)" = 10 ] || fail "graph_launches $(stat graph_launches), want 10"
[ "$(stat graph_nodes_run)" = 80 ] || fail "graph_nodes_run $(stat graph_nodes_run), want 80"
[ "$(stat kernels_run)" = "$(field launches)" ] || fail "capture: kernels_run $(stat kernels_run)"
[ "$(stat launch_eager)" = 0 ] || fail "capture: eager launches $(stat launch_eager)"

for mode in exit-no-cleanup ctx-destroy spin thread-exit; do
  FAKECUDA_STATS=$tmp/stats timeout 60 "$lifecycle" --mode $mode > "$tmp/out" || fail "lifecycle $mode exited $?"
  grep -q '^checksum ' "$tmp/out" || fail "lifecycle $mode printed no checksum"
  want=$(field launches)
  [ -z "$want" ] || [ "$(stat kernels_run)" = "$want" ] || fail "lifecycle $mode: kernels_run $(stat kernels_run) != $want"
done

FAKECUDA_STATS=$tmp/stats timeout 60 "$threads" > "$tmp/out" || fail "threads exited $?"
[ "$(stat kernels_run)" = "$(field launches)" ] || fail "threads: kernels_run $(stat kernels_run) != $(field launches)"
sum=$(field checksum)
"$threads" > "$tmp/out"
[ "$(field checksum)" = "$sum" ] || fail "threads checksum not deterministic"

"$fakecheck" || fail "fakecheck"
# the record of what ran (launch_shapes) tells a kernel node run with a stale shape from the
# eager launch it stands for, and agrees once the node's shape is updated
for how in eager stale patched; do
  FAKECUDA_STATS=$tmp/stats "$fakecheck" --grid-sum $how > "$tmp/out" || fail "fakecheck --grid-sum $how exited $?"
  eval "shapes_$how=\$(stat launch_shapes) sum_$how=\$(field sum)"
done
[ -n "$shapes_eager" ] && [ "$shapes_eager" = "$shapes_patched" ] || fail "launch_shapes: eager $shapes_eager, patched graph $shapes_patched"
[ "$shapes_eager" != "$shapes_stale" ] || fail "launch_shapes does not tell a stale grid from the launched one"
[ "$sum_eager" = "$sum_patched" ] && [ "$sum_eager" != "$sum_stale" ] || fail "cg_grid_sum: eager $sum_eager, patched $sum_patched, stale $sum_stale"
[ $status = 0 ] && echo "fake-selftest ok"
exit $status
