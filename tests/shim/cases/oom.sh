# libfaultalloc.so fails libcugraft.so's FAULTALLOC_N-th allocation (FAULTALLOC_FROM=1: and every
# later one): the result is identical, nothing lost or run twice, the allocation really failed, the
# report has its summary and the report or stderr has EXPECT.

case ${CG_SANITIZER_RT:-} in *libasan*|*libtsan*)
  echo "skipped: the sanitizer's allocator takes the malloc that libfaultalloc.so interposes"; exit 77 ;;
esac
eager e "$progs/fourway" --iters 40
FAULTALLOC_STATS=$tmp/s.alloc lib=$lib:$FAULTALLOC_LIB shim s "$progs/fourway" --iters 40
same_result e s; same_work e s
[ "$(stat memops_run "$tmp/s.stats")" = "$(stat memops_run "$tmp/e.stats")" ] ||
  fail "memops run: e=$(stat memops_run "$tmp/e.stats") s=$(stat memops_run "$tmp/s.stats")"
[ "$(awk '{ n += $4 } END { print n + 0 }' "$tmp/s.alloc")" -gt 0 ] ||
  fail "no allocation of libcugraft.so failed: $(cat "$tmp/s.alloc")"
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
cat "$tmp/s.jsonl" "$tmp/s.err" | grep -q "$EXPECT" || fail "neither report nor stderr has $EXPECT"
