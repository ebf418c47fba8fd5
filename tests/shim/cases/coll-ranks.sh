# CUGRAFT_SCOPE=+collectives on 2 ranks (ncclloop --ranks 2): they agree on every vote, each
# rank's result is exact and its collectives after warmup are graphed

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH CUGRAFT_SCOPE=+collectives
. "$here/lib-coll.sh"
# every vote agreed (no vote record); every call but the first graphed
want= graphed=29
eranks e --ranks 2 --iters 30
ranks s --ranks 2 --iters 30
for r in 0 1; do
  [ -n "$(rsum e $r)" ] && [ "$(rsum e $r)" = "$(rsum s $r)" ] || fail "rank $r: checksum $(rsum s $r), eager $(rsum e $r)"
  [ "$(votes "$tmp/s.$r.jsonl" | tr '\n' ,)" = "$want" ] || fail "rank $r votes: $(votes "$tmp/s.$r.jsonl" | tr '\n' ,)"
  [ "$(summary "$tmp/s.$r.jsonl" collective_graphs.seen)" = 30 ] || fail "rank $r: seen $(summary "$tmp/s.$r.jsonl" collective_graphs.seen)"
  [ "$(summary "$tmp/s.$r.jsonl" collectives_graphed)" = $graphed ] ||
    fail "rank $r: $(summary "$tmp/s.$r.jsonl" collectives_graphed) collectives graphed, want $graphed"
done
[ "$(cat "$tmp/s.rc")" = 0 ] || fail "exit $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
