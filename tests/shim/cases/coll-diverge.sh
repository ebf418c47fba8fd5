# CUGRAFT_SCOPE=+collectives on 2 ranks, one of which makes another call at one iteration
# (ncclloop --diverge): both decline the same vote, start over in lockstep, and stay exact

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH CUGRAFT_SCOPE=+collectives
. "$here/lib-coll.sh"
# warmup 5: at iteration 4 rank 1's call is new (seen 1: eager) while rank 0's is due to be
# captured: vote 5 declines on both; both reset every key and warm up again in lockstep
# (calls 5-9 eager, call 10 captured): 21 of 30 graphed
export CUGRAFT_WARMUP=5
want="5 declined vote_declined," graphed=21
eranks e --ranks 2 --iters 30 --diverge 1:4
ranks s --ranks 2 --iters 30 --diverge 1:4
for r in 0 1; do
  [ -n "$(rsum e $r)" ] && [ "$(rsum e $r)" = "$(rsum s $r)" ] || fail "rank $r: checksum $(rsum s $r), eager $(rsum e $r)"
  [ "$(votes "$tmp/s.$r.jsonl" | tr '\n' ,)" = "$want" ] || fail "rank $r votes: $(votes "$tmp/s.$r.jsonl" | tr '\n' ,)"
  [ "$(summary "$tmp/s.$r.jsonl" collective_graphs.seen)" = 30 ] || fail "rank $r: seen $(summary "$tmp/s.$r.jsonl" collective_graphs.seen)"
  [ "$(summary "$tmp/s.$r.jsonl" collectives_graphed)" = $graphed ] ||
    fail "rank $r: $(summary "$tmp/s.$r.jsonl" collectives_graphed) collectives graphed, want $graphed"
done
[ "$(cat "$tmp/s.rc")" = 0 ] || fail "exit $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
