# FAULT (FAKECUDA_FAIL) fails a driver API the backend uses: the result is identical, nothing lost
# or run twice, the fault really fired, REASON and DETAIL (the CUresult's name) are in the report;
# an empty REASON: no *_failed reason at all (a failing destroy has nothing to fall back from);
# REASON='*': any

# PROG (fourway), PROG_ARGS and SHIM_ENV pick the run; ATTEMPTS reruns the shim until the fault
# fires (for faults reached only by timing).
eager e "$progs/${PROG:-fourway}" ${PROG_ARGS:---iters 40}
for attempt in $(seq "${ATTEMPTS:-1}"); do
  rm -f "$tmp/s.jsonl"
  (if [ -n "${SHIM_ENV:-}" ]; then export $SHIM_ENV; fi
   FAKECUDA_FAIL=$FAULT shim s "$progs/${PROG:-fourway}" ${PROG_ARGS:---iters 40})
  [ "$(stat faults_injected "$tmp/s.stats")" -gt 0 ] && break
done
same_result e s; same_work e s
[ "$(stat memops_run "$tmp/s.stats")" = "$(stat memops_run "$tmp/e.stats")" ] ||
  fail "memops run: e=$(stat memops_run "$tmp/e.stats") s=$(stat memops_run "$tmp/s.stats")"
[ "$(stat faults_injected "$tmp/s.stats")" -gt 0 ] || fail "FAKECUDA_FAIL=$FAULT never fired"
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
if [ "$REASON" = '*' ]; then :
elif [ -n "$REASON" ]; then
  # a record with the reason, or a note naming it (streams that run eagerly say so once)
  grep -q "\"reason\":\"$REASON\"\|\"event\":\"note\".*($REASON)" "$tmp/s.jsonl" ||
    fail "reason $REASON not in the report"
  # a failed extra instance of an armed chunk replays from the first one: no fallback then
  [ "$REASON" = build_failed ] || [ "$(summary "$tmp/s.jsonl" "fallbacks.$REASON")" -gt 0 ] ||
    fail "the summary counts no fallbacks.$REASON"
else
  ! grep -q '"reason":"[a-z]*_failed"' "$tmp/s.jsonl" || fail "a failure reason without a fallback"
fi
[ -z "${DETAIL:-}" ] || grep -q "\"reason\":\"$REASON\".*\"detail\":\"$DETAIL\"" "$tmp/s.jsonl" ||
  fail "no $REASON line names $DETAIL"
