# CUGRAFT_SCOPE=+collectives: collectives inside a group stay eager: no vote at all

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH CUGRAFT_SCOPE=+collectives
. "$here/lib-coll.sh"
eager e "$progs/ncclloop" --iters 30 --group
shim s "$progs/ncclloop" --iters 30 --group
same_result e s; same_work e s
grep -q '"collective_graphs":{"seen":0,' "$tmp/s.jsonl" || fail "a collective in a group reached the vote (or no collective_graphs)"
[ "$(summary "$tmp/s.jsonl" votes.held)" = 0 ] || fail "votes held in group mode: $(summary "$tmp/s.jsonl" votes.held)"
