# the device memory graphs hold (the fake takes 64 KiB and 256 bytes a node from what cuMemGetInfo
# reports free, per instantiated graph) is in the summary, and so is the host time the builds took

shim s "$progs/fourway" --iters 40
built=$(summary "$tmp/s.jsonl" graphs_built)
[ "$built" -gt 0 ] || fail "no graph built"
peak=$(summary "$tmp/s.jsonl" graph_memory_peak_bytes)
[ "$peak" -ge 65536 ] || fail "graph_memory_peak_bytes $peak with $built graphs built"
build=$(summary "$tmp/s.jsonl" graph_build_us)
awk -v b="$build" 'BEGIN { exit !(b > 0) }' || fail "graph_build_us '$build' with $built graphs built"
cmd=$(dirname "$progs")/../tools/cugraft
if [ -x "$cmd" ]; then
  "$cmd" report "$tmp/s.jsonl" | grep -q '^  memory .* MiB of device memory' ||
    fail "cugraft report does not say what the graphs held"
  "$cmd" report "$tmp/s.jsonl" | grep -q '^  saved .*; building the graphs took [0-9.]* ms' ||
    fail "cugraft report does not say what building the graphs took"
fi
