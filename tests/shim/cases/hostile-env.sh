# garbage values for the options: one warning each, the defaults kept, the result and work
# unchanged

eager e "$progs/fourway" --iters 20
CUGRAFT_WARMUP=banana CUGRAFT_CHUNK=-5 CUGRAFT_MAX_GRAPHS=99999999999999999999999 \
  CUGRAFT_MAX_DEFER_US= CUGRAFT_LOG=loud CUGRAFT_BACKTRACE=1e99 CUGRAFT_AUDIT=maybe \
  CUGRAFT_SCOPE=',,=' CUGRAFT_RECORD_ONLY=2 shim s "$progs/fourway" --iters 20
same_result e s; same_work e s
for v in WARMUP CHUNK MAX_GRAPHS LOG BACKTRACE AUDIT RECORD_ONLY; do
  n=$(grep -c "CUGRAFT_$v" "$tmp/s.err")
  [ "$n" = 1 ] || fail "CUGRAFT_$v: $n warnings, want 1"
done
# a value too long to repeat whole: the warning is cut in the value, not at its end, so that why
# it was ignored and the default kept still show
long=$(printf 'q%.0s' $(seq 1100))
CUGRAFT_WARMUP=$long CUGRAFT_SCOPE=$long shim l "$progs/fourway" --iters 20
same_result e l
for v in WARMUP SCOPE; do
  grep "CUGRAFT_$v=" "$tmp/l.err" | grep -q "ignored: .*; keeping the default" ||
    fail "CUGRAFT_$v: the warning lost its end: $(grep "CUGRAFT_$v=" "$tmp/l.err" | tail -c 120)"
done
