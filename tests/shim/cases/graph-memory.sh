# the device memory graphs hold (the fake takes 64 KiB and 256 bytes a node from what cuMemGetInfo
# reports free, per instantiated graph) is in the summary

shim s "$progs/fourway" --iters 40
built=$(summary "$tmp/s.jsonl" graphs_built)
[ "$built" -gt 0 ] || fail "no graph built"
peak=$(summary "$tmp/s.jsonl" graph_memory_peak_bytes)
[ "$peak" -ge 65536 ] || fail "graph_memory_peak_bytes $peak with $built graphs built"
cmd=$(dirname "$progs")/../tools/cugraft
if [ -x "$cmd" ]; then
  "$cmd" report "$tmp/s.jsonl" | grep -q '^  memory .* MiB of device memory' ||
    fail "cugraft report does not say what the graphs held"
fi
