# CUGRAFT_SCOPE=+collectives on one rank: exact; NCCL's launches pass through; graphed after
# warmup, every vote agreed, and the votes' own collectives and kernels are not the program's

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH CUGRAFT_SCOPE=+collectives
. "$here/lib-coll.sh"
FAKENCCL_STATS=$tmp/e.nccl eager e "$progs/ncclloop" --iters 40
FAKENCCL_STATS=$tmp/s.nccl shim s "$progs/ncclloop" --iters 40
same_result e s
# warmup 2: call 1 eager, call 2 captured (plus its second vote, "graph ready"), 3-40 replay
votes_held=41 graphed=39
# every program kernel ran once, plus NCCL's own kernel in each vote
[ "$(stat kernels_run "$tmp/s.stats")" = $(( $(stat kernels_run "$tmp/e.stats") + votes_held )) ] ||
  fail "kernels run: eager $(stat kernels_run "$tmp/e.stats"), shim $(stat kernels_run "$tmp/s.stats") (want +$votes_held)"
[ "$(summary "$tmp/s.jsonl" launches)" = "$(field launches "$tmp/e.out")" ] ||
  fail "shim counted $(summary "$tmp/s.jsonl" launches) launches, the program made $(field launches "$tmp/e.out")"
[ "$(summary "$tmp/s.jsonl" collectives.ncclAllReduce)" = 40 ] || fail "the vote's all-reduces were counted as the program's"
[ -z "$(votes "$tmp/s.jsonl")" ] || fail "vote records: $(votes "$tmp/s.jsonl" | tr '\n' ,)"
for k in collective_graphs.seen:40 collective_graphs.captured:1 votes.held:$votes_held votes.agreed:$votes_held \
         votes.declined:0 collectives_graphed:$graphed; do
  [ "$(summary "$tmp/s.jsonl" "${k%:*}")" = "${k#*:}" ] || fail "${k%:*} is $(summary "$tmp/s.jsonl" "${k%:*}"), want ${k#*:}"
done
# NCCL's own kernel through NCCL (uncounted): 1 eager call + 1 captured + the votes; the 39
# replays never enter NCCL
[ "$(stat internal_launches "$tmp/s.nccl")" = $(( 40 - graphed + 1 + votes_held )) ] ||
  fail "NCCL made $(stat internal_launches "$tmp/s.nccl") internal launches, want $(( 40 - graphed + 1 + votes_held ))"
cmd=$(dirname "$progs")/../tools/cugraft
if [ -x "$cmd" ]; then
  "$cmd" report "$tmp/s.jsonl" > "$tmp/report.txt" 2>&1
  grep -q "collectives $graphed of 40 in the scope launched from graphs" "$tmp/report.txt" &&
    grep -q "votes *held $votes_held · agreed $votes_held · declined 0" "$tmp/report.txt" ||
    fail "cugraft report does not show the collectives and votes: $(grep -E 'collectives|votes' "$tmp/report.txt")"
fi
