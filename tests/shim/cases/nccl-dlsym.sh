# one rank, ncclAllReduce called through dlsym on a libnccl handle as frameworks that load NCCL
# themselves do (ncclloop --dlsym): collectives are still boundaries, NCCL's launches uncounted

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
FAKENCCL_STATS=$tmp/e.nccl eager e "$progs/ncclloop" --iters 40 --dlsym
FAKENCCL_STATS=$tmp/s.nccl shim s "$progs/ncclloop" --iters 40 --dlsym
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
