#!/bin/sh
# bench/sweep on the CPU fake driver: a workload eagerly and under cugraft, interleaved, the
# second round in reverse order; its summary lines, and one line per run in SWEEP_CSV, in the
# order the runs ran, whose in-process figure is the kept report's controller figures (eager ns
# per op over graphed), or "-" where no probe ended, and whose replay costs (ops replayed, host
# time of graph launches, patches, builds, of the launch calls inside cugraft and their number,
# of the waits and their number: every sync and host copy) are the report's summary's. Skipped (77) while the
# workload or the fake driver is not built.
# usage: sweep.sh CUGRAFT SRCDIR BUILDDIR
set -u
SRC=$2 BUILD=$3
PROG=$BUILD/bench/workloads/mb-driver
[ -x "$PROG" ] && [ -f "$BUILD/tests/fakecuda/libcuda.so.1" ] || exit 77
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Long enough for the controller to end a probe (half a second a run); a sanitized fake driver
# runs some 20 times slower: there the runs end before any probe, and the figure is "-".
iters=3000
[ -n "${CG_SANITIZER_RT:-}" ] && iters=150
out=$(LD_LIBRARY_PATH=$BUILD/tests/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      SWEEP_CSV=$tmp/runs.csv SWEEP_KEEP=$tmp/keep SWEEP_NAME=mb \
      "$SRC/bench/sweep" "$BUILD" 2 default -- "$PROG" --kernels 200 --iters $iters --sync) ||
  fail "sweep exited $?"
printf '%s\n' "$out"
for want in "median of 2, interleaved: $PROG --kernels 200" "  eager " "  default " "x eager  paired " \
            "replayed/mode: " "in-process eager/graphed per op: "; do
  printf '%s\n' "$out" | grep -qF -- "$want" || fail "missing: $want"
done
[ "$(wc -l < "$tmp/runs.csv")" -eq 4 ] || fail "$(wc -l < "$tmp/runs.csv") lines in SWEEP_CSV, not 4"
python3 - "$tmp/runs.csv" "$tmp/keep" <<'PY' || exit 1
import csv, json, sys
rows = list(csv.reader(open(sys.argv[1])))
# the lines come in the order the runs ran: the second round reverses the first's
order = [(r[1], r[2]) for r in rows]
assert order == [("eager", "1"), ("default", "1"), ("default", "2"), ("eager", "2")], order
for row in rows:
    name, setting, rnd, figure, share, mode, inproc = row[:7]
    cost = row[7:]
    assert len(cost) == 12, row  # nineteen fields
    float(figure)
    if setting == "eager":
        assert (share, mode, inproc) == ("-", "-", "-") and cost == ["-"] * 12, row
        continue
    assert 0 <= float(share) <= 1 and mode in ("graphs", "eager", "probing"), row
    s = [json.loads(l) for l in open("%s/mb.1.%s.jsonl" % (sys.argv[2], rnd))
         if '"summary"' in l][-1]
    c = s.get("control", {})
    e, g = c.get("eager_ns_per_op", 0), c.get("graphed_ns_per_op", 0)
    want = "%.3f" % (e / g) if e > 0 and g > 0 else "-"
    assert inproc == want, (row, want)
    keys = ("ops_replayed", "graph_launch_us", "patch_us", "graph_build_us", "launch_call_us",
            "launch_call_count", "wait_call_us", "wait_call_count", "launch_forward_us",
            "launch_forward_count", "launch_replay_us", "launch_flush_us")
    assert [float(x) for x in cost] == [float("%g" % s[k]) for k in keys], (row, [s[k] for k in keys])
    assert float(cost[0]) > 0 and float(cost[1]) > 0 and float(cost[5]) > 0, row
    assert float(cost[7]) == s["boundaries"].get("sync", 0) + s["boundaries"].get("host_copy", 0), row
print("ok: SWEEP_CSV's in-process figures and replay costs are the reports'")
PY

# A run that ended inside a probe is listed as probing, whatever mode the controller was in at
# exit (the probe's epochs run both ways): a stand-in program writes such a summary where the
# sweep asks for the report.
cat > "$tmp/probed" <<'SH'
#!/bin/sh
[ -n "${CUGRAFT_REPORT:-}" ] && echo '{"event":"summary","replayed_share":0.9,"control":{"mode":"eager","phase":"probing","decisions":2}}' > "$CUGRAFT_REPORT"
echo "iter_us 10.0"
SH
chmod +x "$tmp/probed"
SWEEP_CSV=$tmp/probed.csv SWEEP_NAME=probed "$SRC/bench/sweep" "$BUILD" 1 default -- "$tmp/probed" > /dev/null ||
  fail "sweep of a stand-in program exited $?"
mode=$(awk -F, '$2 == "default" { print $6 }' "$tmp/probed.csv")
[ "$mode" = probing ] || { cat "$tmp/probed.csv"; fail "a run that ended inside a probe is listed as '$mode'"; }
echo "ok: a run that ended inside a probe is listed as probing"
# SWEEP_TOKENS: each run writes its time per token where the sweep says (the program's
# --token-times FILE): NAME.I.R.txt for setting I (0 eager) and round R, the settings listed by
# index in NAME.settings; without it the command gets no such argument
cat > "$tmp/tokens" <<'SH'
#!/bin/sh
f=
while [ $# -gt 0 ]; do [ "$1" = --token-times ] && f=$2; shift; done
[ -n "$f" ] && printf '%s\n' 5 6 7 > "$f"
echo "iter_us ${f:+1}0"
SH
chmod +x "$tmp/tokens"
SWEEP_TOKENS=$tmp/tt SWEEP_NAME=tok "$SRC/bench/sweep" "$BUILD" 2 default CUGRAFT_RECORD_ONLY=1 -- "$tmp/tokens" > "$tmp/tok.txt" ||
  fail "sweep with SWEEP_TOKENS exited $?"
for i in 0 1 2; do for r in 1 2; do
  [ "$(cat "$tmp/tt/tok.$i.$r.txt" 2>/dev/null | tr '\n' ' ')" = "5 6 7 " ] || fail "no token times in tok.$i.$r.txt: $(ls "$tmp/tt")"
done; done
[ "$(cat "$tmp/tt/tok.settings")" = "$(printf '0 eager\n1 default\n2 CUGRAFT_RECORD_ONLY=1')" ] ||
  fail "tok.settings: $(cat "$tmp/tt/tok.settings")"
grep -qE "^  default +median +10\.0 " "$tmp/tok.txt" || fail "the runs with --token-times printed no figure 10: $(cat "$tmp/tok.txt")"
SWEEP_NAME=tok "$SRC/bench/sweep" "$BUILD" 1 default -- "$tmp/tokens" | grep -qE "^  default +median +0\.0 " ||
  fail "without SWEEP_TOKENS the command was given --token-times"
echo "ok: SWEEP_TOKENS gives each run its token-times file"
