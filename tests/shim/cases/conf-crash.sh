# abort() with launches in flight (conf_crash): the same death and checksum lines as without the
# shim, and a report of JSON lines whose last says the job died of SIGABRT

eager e "$progs/conf_crash"
shim s "$progs/conf_crash"
for r in e s; do [ "$(cat "$tmp/$r.rc")" = 134 ] || fail "$r exited $(cat "$tmp/$r.rc"), want 134 (SIGABRT)"; done
[ "$(grep -c '^checksum ' "$tmp/e.out")" = 4 ] || fail "eager printed $(grep -c '^checksum ' "$tmp/e.out") checksum lines, want 4"
cmp -s <(grep '^checksum ' "$tmp/e.out") <(grep '^checksum ' "$tmp/s.out") || fail "checksum lines differ under the shim"
[ -s "$tmp/s.jsonl" ] || fail "no report"
python3 -c '
import json, sys
for l in open(sys.argv[1]):
    json.loads(l)' "$tmp/s.jsonl" 2> "$tmp/json.err" || fail "report line is not JSON: $(tail -1 "$tmp/json.err")"
# the report says how the program ended (no summary: exit work never ran)
tail -1 "$tmp/s.jsonl" | grep -q '"event":"signal".*"signal":6,"name":"ABRT"' ||
  fail "the report's last line is not the SIGABRT record: $(tail -1 "$tmp/s.jsonl" | cut -c1-120)"
cmd=$(dirname "$progs")/../tools/cugraft
if [ -x "$cmd" ]; then
  "$cmd" report "$tmp/s.jsonl" > "$tmp/report.txt" 2>&1
  grep -q 'ended *by signal 6 (SIGABRT)' "$tmp/report.txt" || fail "cugraft report does not say the job died of SIGABRT"
fi
