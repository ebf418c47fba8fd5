# a fallback's first occurrence carries a host backtrace reaching the program's own function (each
# one, at the default depth), and
# `cugraft report` adds its source line (the program has debug information)

case ${CG_SANITIZER_RT:-} in *libtsan*) echo "skipped: no backtraces under TSan"; exit 77 ;; esac
shim s "$progs/fourway" --iters 10
grep '"event":"fallback"' "$tmp/s.jsonl" | grep -q '"backtrace":\[[^]]*main+0x[0-9a-f]* (fourway)' ||
  fail "no fallback backtrace names fourway's main: $(grep -m1 backtrace "$tmp/s.jsonl" | cut -c1-400)"
# every fallback record's frames reach past cugraft's own: the call into it, then the program,
# also where the record is written deep inside it (a memcpy's boundary that ends a learning chunk)
python3 - "$tmp/s.jsonl" > "$tmp/inside" <<'PY' || fail "fallback backtraces that stay inside cugraft: $(head -c 600 "$tmp/inside")"
import json, sys
bad = []
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("event") == "fallback" and r.get("backtrace"):
        bt = r["backtrace"]
        if not any("(fourway" in f for f in bt):
            bad.append("%s at %s: %s" % (r.get("reason"), r.get("api"), bt))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
if command -v addr2line > /dev/null; then
  "$(dirname "$lib")/../tools/cugraft" report "$tmp/s.jsonl" > "$tmp/rendered" 2>&1 ||
    fail "cugraft report cannot read the shim's own report: $(grep -m3 . "$tmp/rendered")"
  grep -q 'main+0x[0-9a-f]* (fourway)  .*fourway\.c:[0-9]' "$tmp/rendered" ||
    fail "the rendered report gives no fourway.c line: $(grep -m2 'fourway' "$tmp/rendered")"
fi
