# the device memory graphs hold (the fake takes 64 KiB and 256 bytes a node from what cuMemGetInfo
# reports free, per instantiated graph) is in the summary, and so is the host time the builds, the
# patches and the graph launches took (of the builds, the captures)

shim s "$progs/fourway" --iters 40
built=$(summary "$tmp/s.jsonl" graphs_built)
[ "$built" -gt 0 ] || fail "no graph built"
peak=$(summary "$tmp/s.jsonl" graph_memory_peak_bytes)
[ "$peak" -ge 65536 ] || fail "graph_memory_peak_bytes $peak with $built graphs built"
build=$(summary "$tmp/s.jsonl" graph_build_us)
awk -v b="$build" 'BEGIN { exit !(b > 0) }' || fail "graph_build_us '$build' with $built graphs built"
capture=$(summary "$tmp/s.jsonl" graph_capture_us)
awk -v c="$capture" -v b="$build" 'BEGIN { exit !(c > 0 && c <= b) }' ||
  fail "graph_capture_us '$capture' of graph_build_us '$build'"
# a chunk's first graph has a record of its own (further instances of it none), with the build's
# host time and its capture's, which the summary sums
python3 - "$tmp/s.jsonl" <<'EOF' || fail "graph_built records do not hold each build's time"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
s = [r for r in recs if r.get("event") == "summary"][-1]
built = [r for r in recs if r.get("event") == "graph_built"]
ok = 0 < len(built) <= s["graphs_built"] and all(0 < r["capture_us"] <= r["build_us"] for r in built)
total = sum(r["build_us"] for r in built)
print("%d graph_built records, %.1f us in them, graph_build_us %.1f" % (len(built), total, s["graph_build_us"]))
sys.exit(0 if ok and 0 < total <= s["graph_build_us"] + 0.01 * len(built) else 1)
EOF
launches=$(summary "$tmp/s.jsonl" graph_launches) patches=$(summary "$tmp/s.jsonl" patches)
[ "$launches" -gt 0 ] && [ "$patches" -gt 0 ] || fail "$launches graph launches, $patches patches"
for k in graph_launch_us patch_us; do
  us=$(summary "$tmp/s.jsonl" $k)
  awk -v t="$us" 'BEGIN { exit !(t > 0) }' || fail "$k '$us' with $launches graph launches, $patches patches"
done
# the program's launch calls inside cugraft, sampled: the calls the samples stand for are the
# calls made, within 5% (each sample stands for 1 to 31 calls)
python3 - "$tmp/s.jsonl" <<'EOF' || fail "launch_call_us / launch_call_count do not stand for the launch calls made"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
made = sum(v for k, v in s["entry_points"].items()
           if k.startswith(("cuLaunchKernel", "cuMemsetD8Async", "cuMemsetD32Async", "cuMemcpyDtoDAsync")))
got = s["launch_call_count"]
print("launch calls made %d, stood for by the samples %d, %.1f ms inside cugraft" % (made, got, s["launch_call_us"] / 1e3))
sys.exit(0 if made > 1000 and abs(got - made) <= 0.05 * made + 31 and s["launch_call_us"] > 0 else 1)
EOF
# of them, those cugraft forwarded to the driver (the ops it ran eagerly) stand for about the
# ops it did not replay
python3 - "$tmp/s.jsonl" <<'EOF' || fail "launch_forward_count does not stand for the calls forwarded"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
eager, fwd = s["ops"] - s["ops_replayed"], s.get("launch_forward_count", -1)
print("ops run eagerly %d, forwards stood for by the samples %d" % (eager, fwd))
sys.exit(0 if eager > 0 and 0 < fwd <= 3 * eager + 31 and fwd < s["launch_call_count"] / 4 and
         0 < s["launch_forward_us"] < s["launch_call_us"] else 1)
EOF
# and the replays' time in those calls (their graph launches, patches and builds), sampled
# alike: some, and with the forwards no more than the calls took
python3 - "$tmp/s.jsonl" <<'EOF' || fail "launch_replay_us does not hold the replays' time in the launch calls"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
rep = s.get("launch_replay_us", -1)
print("replays in the launch calls %.0f us of %.0f" % (rep, s["launch_call_us"]))
sys.exit(0 if 0 < rep and rep + s["launch_forward_us"] < s["launch_call_us"] else 1)
EOF
cmd=$(dirname "$progs")/../tools/cugraft
if [ -x "$cmd" ]; then
  "$cmd" report "$tmp/s.jsonl" | grep -q '^  memory .* MiB of device memory' ||
    fail "cugraft report does not say what the graphs held"
  "$cmd" report "$tmp/s.jsonl" | grep -q '^  saved .*; building the graphs took [0-9.]* ms' ||
    fail "cugraft report does not say what building the graphs took"
  "$cmd" report "$tmp/s.jsonl" | grep -q "^  replay     launching the graphs took [0-9.]* ms (.* us each), patching $patches nodes [0-9.]* ms" ||
    fail "cugraft report does not say what the graph launches and patches took"
  "$cmd" report "$tmp/s.jsonl" | grep -q "^ *the program's launch calls took [0-9.]* ms inside cugraft, [0-9.]* us each" ||
    fail "cugraft report does not say what the launch calls took inside cugraft"
  learned=$(summary "$tmp/s.jsonl" chunks_learned) repaid=$(summary "$tmp/s.jsonl" chunks_launched_8_times)
  [ "$repaid" -gt 0 ] && [ "$repaid" -le "$learned" ] || fail "chunks_launched_8_times '$repaid' of $learned learned"
  "$cmd" report "$tmp/s.jsonl" | grep -q "^ *$repaid of $learned chunks learned ran their graphs 8 times or more" ||
    fail "cugraft report does not say how many chunks repaid their graphs"
fi
