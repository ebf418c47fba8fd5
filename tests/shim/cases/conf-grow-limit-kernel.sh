# shapes only cg_grid_sum refuses (1024 threads of its 512; 56 KiB of shared memory before its
# attribute is raised and after it is lowered again), launched through a CUkernel (conf_grow
# --kernel) once its loop is replayed: the same calls fail with the same errors as without the
# shim, no refused launch runs, and the rest is still replayed

eager e "$progs/conf_grow" --limit --kernel
shim s "$progs/conf_grow" --limit --kernel
same_result e s; same_work e s
[ "$(grep -c '^limit ' "$tmp/e.out")" -ge 12 ] || fail "eager: $(grep -c '^limit ' "$tmp/e.out") refused launches, want 12"
cmp -s <(grep '^limit ' "$tmp/e.out") <(grep '^limit ' "$tmp/s.out") ||
  fail "refused launches (token result) differ: eager $(grep '^limit ' "$tmp/e.out" | tr '\n' ' '); shim $(grep '^limit ' "$tmp/s.out" | tr '\n' ' ')"
# (a refused launch learned into a chunk would fail its graph's build every time: 75% replayed)
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 100 ] || fail "$(summary "$tmp/s.jsonl" graph_launches) graph launches, want the loop replayed"
ops=$(summary "$tmp/s.jsonl" ops) replayed=$(summary "$tmp/s.jsonl" ops_replayed)
[ "$ops" -gt 0 ] && [ $((replayed * 100)) -ge $((ops * 95)) ] ||
  fail "replayed $replayed of $ops ops, want 95% (fallbacks: $(grep -o '"fallbacks":{[^}]*}' "$tmp/s.jsonl" | tail -1))"
[ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
  fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
