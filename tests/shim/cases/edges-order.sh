# a producer on one stream sets a flag that a consumer on another spins on: submitted in the
# program's order (the producer's deferred work first) it finishes; deferred both, or the consumer
# forwarded as it came (CUGRAFT_SCOPE leaves it out)

eager e "$progs/conf_edges" --mode order
for sc in kernels,memops kernels,memops,-cg_wait_all; do
  CUGRAFT_SCOPE=$sc shim "s$sc" "$progs/conf_edges" --mode order
  [ "$(cat "$tmp/s$sc.rc")" != 124 ] || fail "scope $sc: the program hung (consumer submitted before its producer)"
  same_result e "s$sc"
done
[ "$(summary "$tmp/skernels,memops.jsonl" graph_launches)" -gt 0 ] || fail "nothing replayed"
