# an event API failing stops all timing at once: results exact, that API never called again, one
# note in the report, graphs still replay

eager e "$progs/fourway" --iters 40
shim n "$progs/fourway" --iters 40
for f in cuEventCreate:1 cuEventRecord:5 cuEventQuery:3 cuEventElapsedTime_v2:2; do
  rm -f "$tmp/s.jsonl"
  FAKECUDA_FAIL=$f shim s "$progs/fourway" --iters 40
  same_result e s; same_work e s
  [ "$(stat faults_injected "$tmp/s.stats")" -gt 0 ] || fail "$f never fired"
  [ "$(stat "api.${f%:*}" "$tmp/s.stats")" = "${f#*:}" ] ||
    fail "$f: ${f%:*} called $(stat "api.${f%:*}" "$tmp/s.stats") times, timing did not stop"
  records=$(stat api.cuEventRecord "$tmp/s.stats")
  [ "${records:-0}" -lt "$(stat api.cuEventRecord "$tmp/n.stats")" ] ||
    fail "$f: as many events recorded as without the fault"
  [ "$(grep -c '"event":"note".*GPU timing of chunks for the cost gate is off' "$tmp/s.jsonl")" = 1 ] ||
    fail "$f: the report does not note once that timing stopped"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "$f: no graph was launched"
done
