# one rank on the fake NCCL (ncclloop): collectives are boundaries and NCCL's own launches pass
# through uncounted; the result exact, every launch of the program counted, replays in between

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
FAKENCCL_STATS=$tmp/e.nccl eager e "$progs/ncclloop" --iters 40
FAKENCCL_STATS=$tmp/s.nccl shim s "$progs/ncclloop" --iters 40
same_result e s; same_work e s
launches=$(field launches "$tmp/e.out")
[ "$(summary "$tmp/s.jsonl" launches)" = "$launches" ] ||
  fail "shim saw $(summary "$tmp/s.jsonl" launches) launches, the program made $launches"
[ "$(summary "$tmp/s.jsonl" collectives.ncclAllReduce)" = 40 ] ||
  fail "collectives.ncclAllReduce is $(summary "$tmp/s.jsonl" collectives.ncclAllReduce), want 40"
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
for r in e s; do
  [ "$(stat internal_launches "$tmp/$r.nccl")" = 40 ] ||
    fail "$r: NCCL made $(stat internal_launches "$tmp/$r.nccl") internal launches, want 40"
done
