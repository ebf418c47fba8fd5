# ncclloop --ranks 2: 2 processes on the fake NCCL, default scope: collectives are boundaries on
# every rank, compute replays, each rank's result is exact

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
# ranks NAME [VAR=VALUE...] -- ARGS: under the shim when NAME starts with s; per rank r the
# report $tmp/NAME.r.jsonl and NCCL's stats $tmp/NAME.r.nccl
ranks() { local n=$1 envs=() pre=(); shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  [ "${n#s}" = "$n" ] || pre=(LD_PRELOAD=$rt$lib CUGRAFT_REPORT=$tmp/$n.%r.jsonl)
  env "${pre[@]}" "${envs[@]}" FAKENCCL_STATS=$tmp/$n.%r.nccl timeout 90 "$progs/ncclloop" \
    --ranks 2 --iters 40 --timeout 60 "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"; echo $? > "$tmp/$n.rc"; }
same_ranks() { # A B: both exited 0 and each rank printed the same checksum in both
  local n a b
  for n in "$1" "$2"; do
    [ "$(cat "$tmp/$n.rc")" = 0 ] || fail "$n exited $(cat "$tmp/$n.rc"): $(tail -3 "$tmp/$n.err")"; done
  a=$(awk '$3 == "checksum" { print $2, $4 }' "$tmp/$1.out" | sort)
  b=$(awk '$3 == "checksum" { print $2, $4 }' "$tmp/$2.out" | sort)
  [ "$(echo "$a" | wc -l)" = 2 ] && [ "$a" = "$b" ] || fail "checksums: $1: $a; $2: $b"
}
ranks e --; ranks s --; same_ranks e s
for r in 0 1; do
  [ "$(summary "$tmp/s.$r.jsonl" collectives.ncclAllReduce)" = 40 ] || fail "rank $r: not 40 all-reduces"
  [ "$(summary "$tmp/s.$r.jsonl" graph_launches)" -gt 0 ] || fail "rank $r: no graph was launched"
  [ "$(stat internal_launches "$tmp/s.$r.nccl")" = 40 ] || fail "rank $r: NCCL's launches: $(stat internal_launches "$tmp/s.$r.nccl")"
done
