# CUGRAFT_SCOPE=+collectives with the all-reduce in a group (ncclloop --group): collectives inside
# a group stay eager, with no vote at all; the result and work exact

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH CUGRAFT_SCOPE=+collectives
. "$here/lib-coll.sh"
eager e "$progs/ncclloop" --iters 30 --group
shim s "$progs/ncclloop" --iters 30 --group
same_result e s; same_work e s
grep -q '"collective_graphs":{"seen":0,' "$tmp/s.jsonl" || fail "a collective in a group reached the vote (or no collective_graphs)"
[ "$(summary "$tmp/s.jsonl" votes.held)" = 0 ] || fail "votes held in group mode: $(summary "$tmp/s.jsonl" votes.held)"
