# fork() with deferred work: the child (exit(0), atexit handlers) calls no driver entry point and
# writes nothing into the parent's report; the parent still replays

# a 10 s deferral bound: the parent's flusher cannot submit while the child runs, so every
# call logged between the program's two cuCtxGetDevice markers is the child's
LOGRUN=1 eager e "$progs/conf_fork"
LOGRUN=1 CUGRAFT_MAX_DEFER_US=10000000 shim s "$progs/conf_fork"
same_result e s; same_work e s
c=$(field child "$tmp/e.out")
[ -n "$c" ] && [ "$c" = "$(field child "$tmp/s.out")" ] || fail "child printed '$(field child "$tmp/s.out")', eager '$c'"
for r in e s; do
  [ "$(grep -c '^cuCtxGetDevice$' "$tmp/$r.log")" = 2 ] || fail "$r: want 2 cuCtxGetDevice markers in the log"
  calls=$(awk '/^cuCtxGetDevice$/ { m++; next } m == 1' "$tmp/$r.log" | sort | uniq -c | tr -s ' \n' ' ')
  [ -z "$calls" ] || fail "$r: driver calls from the child:$calls"
done
python3 -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    n += json.loads(l).get("event") == "summary"
sys.exit(n != 1)' "$tmp/s.jsonl" || fail "the report is not JSON lines with exactly one summary"
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
