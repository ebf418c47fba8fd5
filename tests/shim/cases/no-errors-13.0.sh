# on a 13.0 driver, which cannot count a kernel's parameters, the shim's layout queries still never
# fail: each asks for exactly the parameters the loaded image states (PTX, the fat binary nvcc
# writes by default, one compressed with LZ4, one with zstd where libzstd is there), so no probe
# runs one past the last parameter

[ -f "$progs/kernels.fatbin" ] || { echo "skipped: no nvcc, no images"; exit 77; }
old=$fakedir/cuda130:$LD_LIBRARY_PATH
imgs="ptx fatbin lz4.fatbin"  # zstd entries are read where the system has libzstd
ldconfig -p 2>/dev/null | grep -q 'libzstd\.so\.1 ' && imgs="$imgs zstd.fatbin"
for img in $imgs; do
  args=(--iters 20); [ $img = ptx ] || args+=(--image "$progs/kernels.$img")
  LD_LIBRARY_PATH=$old eager e "$progs/fourway" "${args[@]}"
  LD_LIBRARY_PATH=$old shim s "$progs/fourway" "${args[@]}"
  same_result e s; same_work e s
  [ "$(stat query_errors "$tmp/s.stats")" = "$(stat query_errors "$tmp/e.stats")" ] ||
    fail "$img: the fake answered $(stat query_errors "$tmp/s.stats") function/kernel queries with an error under the shim, $(stat query_errors "$tmp/e.stats") without"
  [ -z "$(stat api.cuFuncGetParamCount "$tmp/s.stats")" ] || fail "the 13.0 fake was asked for parameter counts"
  [ "$(stat api.cuFuncGetParamInfo "$tmp/s.stats")" = 13 ] && [ "$(stat api.cuKernelGetParamInfo "$tmp/s.stats")" = 4 ] ||
    fail "$img: layouts not asked parameter by parameter (cuFuncGetParamInfo $(stat api.cuFuncGetParamInfo "$tmp/s.stats") of 2+3+3+3+2, cuKernelGetParamInfo $(stat api.cuKernelGetParamInfo "$tmp/s.stats") of 4)"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "$img: no graph was launched"
done
# Without libzstd, entries compressed with zstd are not read: the probe stays (its failing
# calls), and is exact.
LD_LIBRARY_PATH=$old eager e "$progs/fourway" --iters 20 --image "$progs/kernels.zstd.fatbin"
LD_LIBRARY_PATH=$old shim s "$progs/fourway" --iters 20 --image "$progs/kernels.zstd.fatbin"
same_result e s; same_work e s
