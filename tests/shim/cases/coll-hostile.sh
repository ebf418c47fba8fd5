# CUGRAFT_SCOPE=+collectives: the vote (shim/VOTE.md). The fake NCCL moves its data in a host
# function on the stream, which the fake driver captures as a host node: a graphed collective moves
# its data at each graph launch.

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH CUGRAFT_SCOPE=+collectives
# ranks NAME ARGS...: ncclloop --ranks under the shim, one report per rank ($tmp/NAME.R.jsonl)
ranks() { local n=$1; shift
  CUGRAFT_REPORT=$tmp/$n.%r.jsonl LD_PRELOAD=$rt$lib timeout 60 "$progs/ncclloop" "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"
  echo $? > "$tmp/$n.rc"; }
eranks() { local n=$1; shift
  timeout 60 "$progs/ncclloop" "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"; echo $? > "$tmp/$n.rc"; }
rsum() { awk -v r="$2" '$1 == "rank" && $2 == r && $3 == "checksum" { print $4 }' "$tmp/$1.out"; }
votes() { grep '"event":"vote"' "$1" | python3 -c '
import json, sys
for l in sys.stdin:
    v = json.loads(l); print(v["vote"], v["outcome"], v["reason"])'; }
case $case_name in
coll) # one rank: exact; NCCL's launches pass through; graphed after warmup, every vote agreed
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
  ;;
coll-group) # collectives inside a group stay eager: no vote at all
  eager e "$progs/ncclloop" --iters 30 --group
  shim s "$progs/ncclloop" --iters 30 --group
  same_result e s; same_work e s
  grep -q '"collective_graphs":{"seen":0,' "$tmp/s.jsonl" || fail "a collective in a group reached the vote (or no collective_graphs)"
  [ "$(summary "$tmp/s.jsonl" votes.held)" = 0 ] || fail "votes held in group mode: $(summary "$tmp/s.jsonl" votes.held)"
  ;;
coll-ranks|coll-diverge) # 2 ranks agree on every vote (diverge: both decline the same one)
  extra= want= graphed=29
  if [ $case_name = coll-diverge ]; then
    # warmup 5: at iteration 4 rank 1's call is new (seen 1: eager) while rank 0's is due to be
    # captured: vote 5 declines on both; both reset every key and warm up again in lockstep
    # (calls 5-9 eager, call 10 captured): 21 of 30 graphed
    extra="--diverge 1:4" want="5 declined vote_declined," graphed=21
    export CUGRAFT_WARMUP=5
  fi
  eranks e --ranks 2 --iters 30 $extra
  ranks s --ranks 2 --iters 30 $extra
  for r in 0 1; do
    [ -n "$(rsum e $r)" ] && [ "$(rsum e $r)" = "$(rsum s $r)" ] || fail "rank $r: checksum $(rsum s $r), eager $(rsum e $r)"
    [ "$(votes "$tmp/s.$r.jsonl" | tr '\n' ,)" = "$want" ] || fail "rank $r votes: $(votes "$tmp/s.$r.jsonl" | tr '\n' ,)"
    [ "$(summary "$tmp/s.$r.jsonl" collective_graphs.seen)" = 30 ] || fail "rank $r: seen $(summary "$tmp/s.$r.jsonl" collective_graphs.seen)"
    [ "$(summary "$tmp/s.$r.jsonl" collectives_graphed)" = $graphed ] ||
      fail "rank $r: $(summary "$tmp/s.$r.jsonl" collectives_graphed) collectives graphed, want $graphed"
  done
  [ "$(cat "$tmp/s.rc")" = 0 ] || fail "exit $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
  ;;
coll-stall) # rank 1's 3rd NCCL call (split, vote, vote: in its vote thread) never returns:
  # both ranks give up that vote instead of hanging, say so, and finish eagerly with the eager
  # result (rank 1's stuck vote thread is left behind). The first rank to time out aborts its
  # vote communicator, which the fake NCCL (unlike NCCL) propagates: the other rank's vote may
  # then fail just before its own deadline instead of timing out
  eranks e --ranks 2 --iters 20
  start=$(date +%s)
  CUGRAFT_VOTE_TIMEOUT_MS=1000 FAKENCCL_STALL=1:3 ranks s --ranks 2 --iters 20 --timeout 20
  took=$(( $(date +%s) - start ))
  [ "$(cat "$tmp/s.rc")" = 0 ] || fail "exit $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
  [ "$took" -le 10 ] || fail "took $took s with a 1 s vote timeout (the parent waits 20 s)"
  grep -q 'rank 1 stalls at collective call 3' "$tmp/s.err" || fail "rank 1 did not stall"
  for r in 0 1; do
    [ -n "$(rsum e $r)" ] && [ "$(rsum e $r)" = "$(rsum s $r)" ] || fail "rank $r: checksum $(rsum s $r), eager $(rsum e $r)"
    case "$(votes "$tmp/s.$r.jsonl" | tr '\n' ,)" in
    "2 timeout vote_timeout,") timeouts=$(( ${timeouts:-0} + 1 ))
      grep -q '"off":"vote_timeout"' "$tmp/s.$r.jsonl" || fail "rank $r did not switch the communicator off" ;;
    "2 failed vote_unavailable,")
      grep -q '"off":"vote_unavailable"' "$tmp/s.$r.jsonl" || fail "rank $r did not switch the communicator off" ;;
    *) fail "rank $r votes: $(votes "$tmp/s.$r.jsonl" | tr '\n' ,)" ;;
    esac
    t=$(grep '"event":"vote"' "$tmp/s.$r.jsonl" | python3 -c 'import json,sys; print(int(json.loads(sys.stdin.readline())["t"] * 1000))')
    [ "$t" -ge 1000 ] && [ "$t" -le 4000 ] || fail "rank $r: gave up the vote at $t ms, want about 1000"
  done
  [ "${timeouts:-0}" -ge 1 ] || fail "no rank timed out"
  ;;
coll-hostile) # a bad CUGRAFT_VOTE_TIMEOUT_MS warns once and keeps the default; too big is clamped
  eager e "$progs/ncclloop" --iters 10
  for v in banana:30000 -5:30000 '':30000 99999999999:3600000; do
    CUGRAFT_VOTE_TIMEOUT_MS=${v%:*} shim s "$progs/ncclloop" --iters 10
    same_result e s
    [ "$(grep -c CUGRAFT_VOTE_TIMEOUT_MS "$tmp/s.err")" = 1 ] || fail "'${v%:*}': $(grep -c CUGRAFT_VOTE_TIMEOUT_MS "$tmp/s.err") warnings, want 1"
    grep -q "\"CUGRAFT_VOTE_TIMEOUT_MS\":${v#*:}," "$tmp/s.jsonl" || fail "'${v%:*}': the header does not say ${v#*:}"
  done
  ;;
esac
