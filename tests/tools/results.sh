#!/bin/sh
# bench/table's results file on the CPU fake driver: bench/sweep's runs of a workload (as
# bench/table collects them) go through bench/results.py, which must write
# <date>-<gpu>-<commit>.md and the CSV beside it, with the machine, the command, the table row
# (its in-process column the median of the runs' own controller figures), what the replays and
# the waits cost and every run. Skipped (77) while the workload or the fake
# driver is not built.
# usage: results.sh CUGRAFT SRCDIR BUILDDIR
set -u
SRC=$2 BUILD=$3
PROG=$BUILD/bench/workloads/mb-driver
[ -x "$PROG" ] && [ -f "$BUILD/tests/fakecuda/libcuda.so.1" ] || exit 77
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LD_LIBRARY_PATH=$BUILD/tests/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  SWEEP_CSV=$tmp/runs.csv SWEEP_NAME=mb-200 \
  "$SRC/bench/sweep" "$BUILD" 2 default CUGRAFT_RECORD_ONLY=1 -- "$PROG" --kernels 200 --iters 50 --sync > "$tmp/table.txt" ||
  fail "sweep exited $?"
echo "mb-200: per iteration              2.00 ms wall · 200.0 launches · 1.0 syncs · 1.00 ms in launch calls" >> "$tmp/table.txt"
echo "mb-200: waits                      1.0 per iteration (syncs, copies to or from the host), 50.0 us each over the run" >> "$tmp/table.txt"
echo "mb-200: the floor                  busy bound at most 2.50x (host-bound) · launch-gap bound at most 1.20x" >> "$tmp/table.txt"
# and a row of two runs whose controllers ended a probe (as a GPU run's do): 1.100 and 1.300
printf '%s\n' "syn,eager,1,10,-,-,-" "syn,default,1,9,0.900,graphs,1.100" \
  "syn,default,2,8,0.900,graphs,1.300" "syn,eager,2,10,-,-,-" >> "$tmp/runs.csv"
python3 "$SRC/bench/results.py" --runs "$tmp/runs.csv" --floors "$tmp/table.txt" --dir "$tmp/results" \
  --gpu "FakeCUDA CPU" --driver 13.0 --cuda 13.0 --date 2026-01-02 --commit abc1234 \
  --command "bench/table --rounds 2 --only mb-200" || fail "results.py exited $?"
md=$tmp/results/2026-01-02-fakecuda-cpu-abc1234.md
[ -f "$md" ] || fail "no $md: $(ls "$tmp/results")"
[ -f "${md%.md}.csv" ] || fail "no CSV beside $md"
cat "$md"
for want in "FakeCUDA CPU" "driver 13.0" "bench/table --rounds 2 --only mb-200" "| mb-200 | default |" \
            "| 2.50x | 1.20x | " "## Every run" "| mb-200 | eager | 2 |"; do
  grep -qF -- "$want" "$md" || fail "missing from the results file: $want"
done
# The share of each bound's gain the speedup reached, (speedup - 1) / (bound - 1), from the
# row's own speedup.
row=$(grep '^| mb-200 | default |' "$md")
printf '%s\n' "$row" | awk -F' [|] ' '{
  s = $5; sub(/x$/, "", s); g = $11; sub(/ [|]$/, "", g); split(g, r, "% · ")
  d1 = r[1] - 100 * (s - 1) / 1.5; d2 = r[2] + 0 - 100 * (s - 1) / 0.2
  exit !(g ~ /^-?[0-9]+% · -?[0-9]+%$/ && d1 * d1 <= 1 && d2 * d2 <= 1) }' ||
  fail "gain reached: want (speedup - 1) / 1.5 and / 0.2 in $row"
# the in-process column: the median of the runs' own eager/graphed figures, "-" without one
want=$(awk -F, '$1 == "mb-200" && $2 == "default" && $7 != "-" { print $7 }' "$tmp/runs.csv" | sort -g |
  awk '{ v[NR] = $1 } END { if (NR) printf "%.3fx", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2; else print "-" }')
printf '%s\n' "$row" | awk -F' [|] ' -v w="$want" '{ exit !($7 == w) }' ||
  fail "in-process: want $want (the runs' median) in $row"
grep '^| syn | default |' "$md" | awk -F' [|] ' '{ exit !($7 == "1.200x") }' ||
  fail "in-process: want 1.200x, the median of 1.100 and 1.300, in $(grep '^| syn | default |' "$md")"
# paired: the median of the rounds' own ratios (10/9 and 10/8), and their lowest and highest
grep '^| syn | default |' "$md" | awk -F' [|] ' '{ exit !($6 == "1.181x (1.11-1.25)") }' ||
  fail "paired: want 1.181x (1.11-1.25) in $(grep '^| syn | default |' "$md")"
[ "$(grep -c '^| mb-200 | ' "$md")" -eq 12 ] || fail "want 2 table rows, 2 replay cost rows, 2 wait cost rows and 6 runs"
# What the replays cost: each cugraft run's CSV line carries its summary's ops replayed and the
# host time of its graph launches, patches and builds; the section sets their medians per op
# replayed beside the eager launch call: what the driver took in the calls the row's
# CUGRAFT_RECORD_ONLY=1 runs forwarded, every one (the median over those two runs of
# launch_forward_us / launch_forward_count), not the default runs' (the ops they ran eagerly)
# nor the per-iteration line's 1000 us / 200 launches. Each figure shown is rounded to 0.01:
# sums of three may differ by up to 0.03, of two by up to 0.02.
awk -F, '$1 == "mb-200" && $2 == "default" && !($8 > 0 && $9 > 0 && $11 > 0 && $12 > 0 && $13 > 0) { bad = 1 } END { exit bad }' "$tmp/runs.csv" ||
  fail "a cugraft run without its replay costs: $(cat "$tmp/runs.csv")"
grep -qF "## What the replays cost the host" "$md" || fail "no replay cost section"
cost=$(sed -n '/^## What the replays cost/,/^## Every run/p' "$md" | grep '^| mb-200 | default | ')
fwd=$(awk -F, '$1 == "mb-200" && $2 == "CUGRAFT_RECORD_ONLY=1" { print $16 / $17 }' "$tmp/runs.csv" | sort -g |
  awk '{ v[NR] = $1 } END { printf "%.2f", NR == 2 ? (v[1] + v[2]) / 2 : -1 }')
printf '%s\n' "$cost" | awk -F' [|] ' -v f="$fwd" '{
  l = $4; p = $5; b = $6; r = $7; e = $8; s = $9; c = $11; cs = $12
  exit !(e == f && e != "5.00" && (l + p + b - r) ^ 2 <= 0.0009 && (e - r - s) ^ 2 <= 0.0009 &&
         c > 0 && (e - c - cs) ^ 2 <= 0.0004) }' ||
  fail "replay cost: want launches + patches + builds = replay, eager $fwd, saved = eager - replay, a launch call under cugraft and eager less it in $cost"
# without the forwards (an older sweep's 15 fields) the eager launch call is the profile's:
# 1000 us over 200 launches
cut -d, -f1-15 "$tmp/runs.csv" > "$tmp/old.csv"
python3 "$SRC/bench/results.py" --runs "$tmp/old.csv" --floors "$tmp/table.txt" --dir "$tmp/old" \
  --gpu "FakeCUDA CPU" --date 2026-01-02 --commit abc1234 --command x > /dev/null || fail "results.py exited $? on 15 fields"
old=$(sed -n '/^## What the replays cost/,/^## Every run/p' "$tmp/old/2026-01-02-fakecuda-cpu-abc1234.md" | grep '^| mb-200 | default | ')
printf '%s\n' "$old" | awk -F' [|] ' '{ exit !($8 == "5.00") }' || fail "15 fields: want the profile's eager launch call, 5.00, in $old"
# the launch call under cugraft is the median of the runs' launch_call_us / launch_call_count
want=$(awk -F, '$1 == "mb-200" && $2 == "default" { print $12 / $13 }' "$tmp/runs.csv" | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", (v[1] + v[NR]) / 2 }')
printf '%s\n' "$cost" | grep -qF "| $want |" || fail "launch call under cugraft: want $want (the runs' median) in $cost"
# the driver's share of the calls forwarded (the runs' median of launch_forward_us /
# launch_forward_count) and cugraft's own work a call (the launch calls less the forwards and the
# replays' time in them, launch_replay_us, and the deferred ops they submitted eagerly,
# launch_flush_us, over the calls); with CUGRAFT_RECORD_ONLY=1 nothing is
# replayed, and the row still says what the launch calls took, all of them forwarded
own() { # SETTING: the two figures, as the section rounds them
  awk -F, -v s="$1" '$1 == "mb-200" && $2 == s { print $16 / $17, ($12 - $16 - $18 - $19) / $13 }' "$tmp/runs.csv" |
    sort -g | awk '{ f[NR] = $1; o[NR] = $2 } END { if (f[1] > f[2]) { t = f[1]; f[1] = f[2]; f[2] = t }
      if (o[1] > o[2]) { t = o[1]; o[1] = o[2]; o[2] = t } printf "%.2f %.2f", (f[1] + f[2]) / 2, (o[1] + o[2]) / 2 }'; }
printf '%s\n' "$cost" | awk -F' [|] ' -v w="$(own default)" '{ sub(/ [|]$/, "", $15); exit !($14 " " $15 == w) }' ||
  fail "driver a call forwarded, cugraft's own a call: want $(own default) in $cost"
ro=$(sed -n '/^## What the replays cost/,/^## Every run/p' "$md" | grep '^| mb-200 | CUGRAFT_RECORD_ONLY=1 | ')
printf '%s\n' "$ro" | awk -F' [|] ' -v w="$(own CUGRAFT_RECORD_ONLY=1)" '{ sub(/ [|]$/, "", $15); exit !($3 == "0" && $11 > 0 && $14 " " $15 == w) }' ||
  fail "record-only: want 0 ops replayed, its launch calls and $(own CUGRAFT_RECORD_ONLY=1) in $ro"
# What the waits cost: the median of the runs' wait_call_us / wait_call_count beside the eager
# wait of the waits line (50 us, 1 an iteration), their difference, and what it makes of the
# 2000 us iteration, its sign a cost.
grep -qF "## What the waits cost" "$md" || fail "no wait cost section"
waits=$(sed -n '/^## What the waits cost/,/^## Every run/p' "$md" | grep '^| mb-200 | default | ')
want=$(awk -F, '$1 == "mb-200" && $2 == "default" { print $14 / $15 }' "$tmp/runs.csv" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f", (v[1] + v[NR]) / 2 }')
printf '%s\n' "$waits" | awk -F' [|] ' -v w="$want" '{
  n = $3; e = $4; c = $5; x = $6; o = $7; sub(/%$/, "", o)
  exit !(n == "1.0" && e == "50.0" && c == w && (c - e - x) ^ 2 <= 0.01 && (o + 100 * x / 2000) ^ 2 <= 0.01) }' ||
  fail "wait cost: want 1.0 a wait an iteration, eager 50.0, $want under cugraft (the runs' median), their difference and -100 * it / 2000 % in $waits"
echo "ok: $waits"
# cugraft's own work a call leaves out the driver's time in the deferred ops the launch calls
# submitted eagerly (launch_flush_us, the sweep's nineteenth field): 2000 us in 400 calls, 600 of
# them the forwards', 500 the replays', 300 those ops': 1.50 us a call (2.25 with a sweep before
# that field)
own=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import results
c = (10, 1, 1, 1, 2000, 400, 0, 0, 600, 100, 500)
print("%.2f %.2f" % (results.own_work([c + (300,)]), results.own_work([c + (None,), c])))' "$SRC/bench") ||
  fail "results.own_work: exit $?"
[ "$own" = "1.50 2.25" ] || fail "cugraft's own work a call: want 1.50 with the deferred ops' 300 us out, 2.25 without the field; got $own"
echo "ok: cugraft's own work without the deferred ops submitted eagerly"
# Where in a run the time goes: each run's token times (bench/sweep's SWEEP_TOKENS) in 10
# columns of equal tokens, each the run's median, the cell the median over the setting's runs.
# Eager: one run at 100 us a token, one at 200 (150 in every column); cugraft: its first two
# tokens 1000 us in both runs (learning), then 100 (the first column 1000, the others 100).
mkdir -p "$tmp/tt"
printf '0 eager\n1 default\n' > "$tmp/tt/tok.settings"
for r in 1 2; do
  awk -v v=$((r * 100)) 'BEGIN { for (i = 0; i < 20; i++) print v }' > "$tmp/tt/tok.0.$r.txt"
  awk 'BEGIN { for (i = 0; i < 20; i++) print (i < 2 ? 1000 : 100) }' > "$tmp/tt/tok.1.$r.txt"
done
printf '%s\n' "tok,eager,1,2000,-,-,-" "tok,default,1,2100,0.900,graphs,-" \
  "tok,default,2,2100,0.900,graphs,-" "tok,eager,2,2000,-,-,-" > "$tmp/tok.csv"
python3 "$SRC/bench/results.py" --runs "$tmp/tok.csv" --dir "$tmp/tokres" --gpu "FakeCUDA CPU" \
  --date 2026-01-02 --commit abc1234 --command "bench/table --only tok" --token-times "$tmp/tt" ||
  fail "results.py with --token-times exited $?"
md=$tmp/tokres/2026-01-02-fakecuda-cpu-abc1234.md
grep -qF "## Where in a run the time goes" "$md" || fail "no token-time section: $(cat "$md")"
grep -qF "| tok | eager | 2 | 150 | 150 | 150 | 150 | 150 | 150 | 150 | 150 | 150 | 150 |" "$md" ||
  fail "eager token columns: $(grep '^| tok |' "$md")"
grep -qF "| tok | default | 2 | 1000 | 100 | 100 | 100 | 100 | 100 | 100 | 100 | 100 | 100 |" "$md" ||
  fail "cugraft token columns: $(grep '^| tok |' "$md")"
python3 "$SRC/bench/results.py" --runs "$tmp/tok.csv" --dir "$tmp/tokres2" --gpu "FakeCUDA CPU" \
  --date 2026-01-02 --commit abc1234 --command "bench/table --only tok" > /dev/null || fail "results.py exited $?"
grep -qF "Where in a run" "$tmp/tokres2/2026-01-02-fakecuda-cpu-abc1234.md" && fail "a token-time section without token times"
echo "ok: where in a run the time goes, from each run's token times"
