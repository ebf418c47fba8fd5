# the program's own SIGTERM handler, installed after cugraft's, chains to it: one signal record,
# and the death (status 143) the program has without cugraft

eager e "$progs/conf_chain" --signal term
shim s "$progs/conf_chain" --signal term
want=143
for r in e s; do [ "$(cat "$tmp/$r.rc")" = "$want" ] || fail "$r exited $(cat "$tmp/$r.rc"), want $want"; done
[ "$(grep -c '"event":"signal"' "$tmp/s.jsonl")" = 1 ] ||
  fail "$(grep -c '"event":"signal"' "$tmp/s.jsonl") signal records, want 1"
[ "$(grep -c 'crash reporter called' "$tmp/s.err")" = 1 ] || fail "the program's handler ran $(grep -c 'crash reporter called' "$tmp/s.err") times"
cmp -s "$tmp/e.out" "$tmp/s.out" || fail "the program printed something else"
