# all four ways of reaching the driver: every launch seen and counted by entry point, replay
# happens and is exact, and the report names the program's calls and its device

eager e "$progs/fourway" --iters 40
shim s "$progs/fourway" --iters 40
same_result e s; same_work e s
launches=$(field launches "$tmp/e.out")
[ "$(summary "$tmp/s.jsonl" launches)" = "$launches" ] ||
  fail "shim saw $(summary "$tmp/s.jsonl" launches) launches, the program made $launches"
for ep in cuLaunchKernel cuLaunchKernel_ptsz cuLaunchKernelEx; do
  [ "$(summary "$tmp/s.jsonl" "entry_points.$ep")" = "$(stat "api.$ep" "$tmp/e.stats")" ] ||
    fail "$ep: shim counted $(summary "$tmp/s.jsonl" "entry_points.$ep"), the fake $(stat "api.$ep" "$tmp/e.stats")"
done
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
grep '"event":"fallback"' "$tmp/s.jsonl" | grep -q '"api":"cuStreamSynchronize"' ||
  fail "no fallback names the program's call (cuStreamSynchronize)"
[ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
  fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
# the summary names the device the program's streams used (the header is written before)
grep '"event":"summary"' "$tmp/s.jsonl" | grep -q '"devices":\[{"ordinal":0,"name":"FakeCUDA CPU"}\]' ||
  fail "the summary does not name device 0: $(grep -o '"devices":[^]]*]' "$tmp/s.jsonl")"
