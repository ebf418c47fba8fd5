# managed memory (CPU-offload style, lifecycle --mode managed): the result and work exact, and the
# report notes it once

eager e "$progs/lifecycle" --mode managed
shim s "$progs/lifecycle" --mode managed
same_result e s; same_work e s
[ "$(grep -c '"event":"note".*managed memory' "$tmp/s.jsonl")" = 1 ] || fail "managed memory not noted once"
