#!/bin/bash
# ncclloop on the fake NCCL alone (no shim), 1, 2 and 4 ranks: every rank gets the same
# checksum, which depends on the number of ranks and is the same from run to run; a stalled
# rank (FAKENCCL_STALL) ends in the parent's timeout, not a hang.
# usage: ranks-test.sh NCCLLOOP   (LD_LIBRARY_PATH names the fake libcuda and libnccl)
set -u
loop=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
run() { local n=$1; shift; timeout 60 "$loop" --iters 20 "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"; echo $? > "$tmp/$n.rc"; }
# checksum NAME NRANKS: all ranks exited 0 and printed one checksum; prints it
checksum() {
  local n=$1 k=$2
  [ "$(cat "$tmp/$n.rc")" = 0 ] || fail "$n exited $(cat "$tmp/$n.rc"): $(tail -3 "$tmp/$n.err")"
  [ "$(grep -c ' exit 0$' "$tmp/$n.out")" = "$k" ] || fail "$n: not all $k ranks exited 0"
  local sums; sums=$(awk '$1 == "rank" && $3 == "checksum" { print $4 }' "$tmp/$n.out" | sort -u)
  [ "$(awk '$3 == "checksum"' "$tmp/$n.out" | wc -l)" = "$k" ] || fail "$n: want $k checksum lines"
  [ "$(echo "$sums" | wc -l)" = 1 ] || fail "$n: ranks disagree: $sums"
  echo "$sums"
}

run plain
c0=$(awk '$1 == "checksum" { print $2 }' "$tmp/plain.out")
[ -n "$c0" ] || fail "the one-rank loop printed no checksum: $(tail -3 "$tmp/plain.err")"
run r1 --ranks 1;          c1=$(checksum r1 1)
run r2 --ranks 2;          c2=$(checksum r2 2)
run r2b --ranks 2;         c2b=$(checksum r2b 2)
run r4 --ranks 4;          c4=$(checksum r4 4)
run group --ranks 2 --group;       cg=$(checksum group 2)
run diverge --ranks 2 --diverge 1:5; cd=$(checksum diverge 2)
run dlsym --ranks 2 --dlsym;       cl=$(checksum dlsym 2)
echo "checksums: 1 rank $c0, --ranks 1 $c1, 2 ranks $c2 (again $c2b), 4 ranks $c4, 2 ranks --group $cg"
[ "$c1" = "$c0" ] || fail "--ranks 1 ($c1) differs from the one-rank loop ($c0)"
[ "$c2" != "$c0" ] && [ "$c4" != "$c2" ] && [ "$c4" != "$c0" ] ||
  fail "the checksum does not depend on the number of ranks: $c0 $c2 $c4"
[ "$c2b" = "$c2" ] || fail "two runs of 2 ranks differ: $c2 $c2b"
[ "$cg" != "$c2" ] || fail "--group with 2 ranks did not reduce at the group end"
[ "$cd" = "$c2" ] || fail "--diverge changed the result: $cd, want $c2"
[ "$cl" = "$c2" ] || fail "--dlsym changed the result: $cl, want $c2"

# per-rank stats: every collective executed and NCCL's kernel launched once per iteration
FAKENCCL_STATS=$tmp/st.%r run stats --ranks 2
for r in 0 1; do
  for k in allreduce internal_launches calls; do
    v=$(awk -v k=$k '$1 == k { print $2 }' "$tmp/st.$r" 2>/dev/null)
    [ "$v" = 20 ] || fail "rank $r: stats $k is '$v', want 20"
  done
done

# a rank that stops answering: the parent's timeout ends the run (exit 3), nothing hangs
start=$(date +%s)
FAKENCCL_STALL=1:5 run stall --ranks 2 --timeout 3
took=$(( $(date +%s) - start ))
[ "$(cat "$tmp/stall.rc")" = 3 ] || fail "stall: exit $(cat "$tmp/stall.rc"), want 3"
[ "$took" -le 5 ] || fail "stall: took $took s with --timeout 3"
grep -q 'rank 1 stalls at collective call 5' "$tmp/stall.err" || fail "stall: rank 1 did not say it stalls"
# with a short collective timeout the live rank fails by itself before the parent's timeout
FAKENCCL_STALL=1:5 FAKENCCL_TIMEOUT_MS=500 run stall2 --ranks 2 --timeout 4
[ "$(cat "$tmp/stall2.rc")" = 3 ] || fail "stall2: exit $(cat "$tmp/stall2.rc"), want 3"
grep -q '^rank 0 exit 1$' "$tmp/stall2.out" || fail "stall2: rank 0 did not fail on its own"
grep -q 'rank 1 did not join exchange 4' "$tmp/stall2.err" || fail "stall2: no timeout message from rank 0"
[ $status = 0 ] && echo "ok"
exit $status
