# the program captures on its per-thread stream through _ptsz with stream 0, after the same
# launches were learned there: they must reach its capture untouched

eager e "$progs/lifecycle" --mode capture-ptds
shim s "$progs/lifecycle" --mode capture-ptds
same_result e s; same_work e s
[ "$(summary "$tmp/s.jsonl" ops_in_program_captures)" = 4 ] ||
  fail "$(summary "$tmp/s.jsonl" ops_in_program_captures) launches passed to the program's capture, 4 made"
[ "$(summary "$tmp/s.jsonl" fallbacks.capture)" = 0 ] ||
  fail "launches into the program's capture counted as ops run eagerly"
