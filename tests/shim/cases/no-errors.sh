# the shim's own driver queries (parameter layouts of CUfunction and CUkernel handles) never fail:
# a debugger or compute-sanitizer would list each failing call as the program's error

eager e "$progs/fourway" --iters 20
shim s "$progs/fourway" --iters 20
same_result e s; same_work e s
[ "$(stat query_errors "$tmp/s.stats")" = "$(stat query_errors "$tmp/e.stats")" ] ||
  fail "the fake answered $(stat query_errors "$tmp/s.stats") function/kernel queries with an error under the shim, $(stat query_errors "$tmp/e.stats") without"
[ "$(stat api.cuKernelGetParamCount "$tmp/s.stats")" -gt 0 ] && [ "$(stat api.cuFuncGetParamCount "$tmp/s.stats")" -gt 0 ] ||
  fail "layouts were not asked by parameter count (cuFuncGetParamCount $(stat api.cuFuncGetParamCount "$tmp/s.stats"), cuKernelGetParamCount $(stat api.cuKernelGetParamCount "$tmp/s.stats"))"
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
