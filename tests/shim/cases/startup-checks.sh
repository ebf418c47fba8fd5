# expandable segments (PYTORCH_CUDA_ALLOC_CONF): cugraft sets NCCL_GRAPH_REGISTER=0 and says so in
# the report's header and on stderr; a value the user set is kept

eager e "$progs/fourway" --iters 5
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True shim s "$progs/fourway" --iters 5
same_result e s
grep -q '"startup_checks":\["PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True: set NCCL_GRAPH_REGISTER=0' "$tmp/s.jsonl" ||
  fail "the report header does not say NCCL_GRAPH_REGISTER=0 was set"
grep -q 'NCCL_GRAPH_REGISTER=0' "$tmp/s.err" || fail "stderr does not say NCCL_GRAPH_REGISTER=0 was set"
NCCL_GRAPH_REGISTER=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True shim s2 "$progs/fourway" --iters 5
grep -q '"startup_checks":\[\]' "$tmp/s2.jsonl" || fail "a user's NCCL_GRAPH_REGISTER was overridden"
