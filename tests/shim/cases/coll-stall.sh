# CUGRAFT_SCOPE=+collectives on 2 ranks, rank 1's 3rd NCCL call (split, vote, vote: in its vote
# thread) never returning: both ranks give up that vote instead of hanging, say so, and finish
# eagerly with the eager result (rank 1's stuck vote thread is left behind)

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH CUGRAFT_SCOPE=+collectives
. "$here/lib-coll.sh"
eranks e --ranks 2 --iters 20
start=$(date +%s)
CUGRAFT_VOTE_TIMEOUT_MS=1000 FAKENCCL_STALL=1:3 ranks s --ranks 2 --iters 20 --timeout 20
took=$(( $(date +%s) - start ))
[ "$(cat "$tmp/s.rc")" = 0 ] || fail "exit $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
[ "$took" -le 10 ] || fail "took $took s with a 1 s vote timeout (the parent waits 20 s)"
grep -q 'rank 1 stalls at collective call 3' "$tmp/s.err" || fail "rank 1 did not stall"
# The first rank to time out aborts its vote communicator, which the fake NCCL (unlike NCCL)
# propagates: the other rank's vote may then fail just before its own deadline instead of timing
# out.
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
