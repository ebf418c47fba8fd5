# a fallback's first occurrence carries a host backtrace reaching the program's own function, and
# `cugraft report` adds its source line (the program has debug information)

case ${CG_SANITIZER_RT:-} in *libtsan*) echo "skipped: no backtraces under TSan"; exit 77 ;; esac
shim s "$progs/fourway" --iters 10
grep '"event":"fallback"' "$tmp/s.jsonl" | grep -q '"backtrace":\[[^]]*main+0x[0-9a-f]* (fourway)' ||
  fail "no fallback backtrace names fourway's main: $(grep -m1 backtrace "$tmp/s.jsonl" | cut -c1-400)"
if command -v addr2line > /dev/null; then
  "$(dirname "$lib")/../tools/cugraft" report "$tmp/s.jsonl" > "$tmp/rendered" 2>&1 ||
    fail "cugraft report cannot read the shim's own report: $(grep -m3 . "$tmp/rendered")"
  grep -q 'main+0x[0-9a-f]* (fourway)  .*fourway\.c:[0-9]' "$tmp/rendered" ||
    fail "the rendered report gives no fourway.c line: $(grep -m2 'fourway' "$tmp/rendered")"
fi
