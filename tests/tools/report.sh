#!/bin/sh
# `cugraft report`: a two-rank pair of hand-written reports renders per rank and merged totals
# (divergence sites summed across ranks);
# --json gives the merged summary; a line cut in the middle is named (file:line), the rest is
# still rendered and the exit status is 1; merged with an older library's file, per-call figures
# are the newer file's own.
# usage: report.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1 DATA=$2/tests/tools/data
fail() { echo "FAIL: $*"; exit 1; }
expect() { printf '%s\n' "$1" | grep -qF -- "$2" || { printf '%s\n' "$1"; fail "missing: $2"; }; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT

out=$("$CG" report "$DATA/rank0.jsonl" "$DATA/rank1.jsonl") || fail "exit $? on good files"
expect "$out" "(rank 0, pid 4101)"
expect "$out" "device     NVIDIA H200 · driver 13.0 · CUDA 13.0 · NCCL 2.27.3"
expect "$out" "device     NVIDIA H200 (GPU 1) · driver 13.0"   # rank 1's summary names its device
expect "$out" "options    CUGRAFT_WARMUP=11 CUGRAFT_REPORT=r%r.jsonl"
expect "$out" "replayed   90.0% of 1000 ops from graphs (15 graph launches, 16 graphs built), 100 eager"
expect "$out" "fallbacks  sync 7 · divergence 2"
expect "$out" "deferral   eager · measured 5600 ns per op graphed vs 5100 eager (0.911x) over 5+5 epochs · 3 decisions, 1 changed"
expect "$out" "deferral   graphs (not measured: no epoch with graphs in use yet, or CUGRAFT_MEASURE=0)"
expect "$out" "first probe early: graphed epochs at 7200 ns per op, clearly over 5000 eager before the graphs"
expect "$out" "first sync: cuStreamSynchronize on stream 1 at op 301"
expect "$out" "at train_step+0x1c4 (trainer)"
expect "$out" "first divergence: cuLaunchKernel on stream 1 at op 77 (kernel softmax_fwd)"
expect "$out" "keeps diverging: expected gemm_nn, got reduce_kernel at op 7 of a 22-op chunk (90 times)"
expect "$out" "keeps diverging: expected softmax_fwd, got gemm at op 2 of a 9-op chunk (3 times)"
expect "$out" "keeps diverging: expected gemm_nn, got reduce_kernel at op 7 of a 22-op chunk (140 times)"
expect "$out" 'expected {"grid":[128,1,1]}'
expect "$out" "hint: NCCL call: collectives run eagerly"
expect "$out" "== merged: 2 processes in 2 files"
expect "$out" "replayed   75.0% of 4000 ops from graphs (60 graph launches, 46 graphs built), 1000 eager"
expect "$out" "saved      ~9.9 ms host time (estimate)"
expect "$out" "kept eager (exposed): a 10-op chunk on stream 1: its graph 216.3 us on the GPU, its ops eagerly 215.9; saves 31.5 us of launches; submitted over 499.9 us, a wait right after it ends 163.2 us later deferred"
expect "$out" "kept eager (cost_gate): a 1-op chunk on stream 2: its graph 11.9 us on the GPU, its ops eagerly 6.4; saves 0.9 us of launches"
expect "$out" "captured   12 launches into the program's own graphs (not counted as ops: its graph launches run them)"
expect "$out" "fallbacks  collective 20 · sync 10 · divergence 2"
[ "$(printf '%s\n' "$out" | grep -c '^  first sync')" -eq 1 ] || fail "first sync shown more than once"
expect "$out" "vote 42 on communicator 0 (ncclAllReduce): declined; this rank wanted replay of the graph captured at vote 8, the ranks ranged from eager to replay of the graph captured at vote 8"
expect "$out" "vote 42 on communicator 0 (ncclAllReduce): declined; this rank wanted eager, the ranks"
expect "$out" "ranks      consistent: every rank ran the same collectives eagerly after the votes that did not agree (communicator:vote 0:42)"
json=$("$CG" report --json "$DATA/rank0.jsonl" "$DATA/rank1.jsonl") || fail "exit $? on good files (--json)"
printf '%s' "$json" | grep -q '"control"' && fail "one process's controller state was merged into --json"
echo "text rendering and merged totals"

# Ranks that did not fall back at the same votes are named.
sed 's/"vote":42/"vote":43/' "$DATA/rank1.jsonl" > "$T/rank1-other.jsonl"
out=$("$CG" report "$DATA/rank0.jsonl" "$T/rank1-other.jsonl") || fail "exit $? on good files"
expect "$out" "ranks      INCONSISTENT: the votes that did not agree differ (communicator:vote): rank 0: 0:42; rank 1: 0:43"
echo "ranks that fell back at different votes named"

json=$("$CG" report --json "$DATA/rank0.jsonl" "$DATA/rank1.jsonl") || fail "--json exit $?"
expect "$json" '"files":2,'
expect "$json" '"ops":4000,'
expect "$json" '"ops_replayed":3000,'
expect "$json" '"replayed_share":0.75'
expect "$json" '"fallbacks":{"sync":10,"divergence":2,"collective":20}'
expect "$json" '"kernels":[{"name":"gemm","launches":2100},{"name":"layernorm","launches":1300},{"name":"softmax_fwd","launches":450}]'
expect "$json" '"divergence_sites":[{"expected":"gemm_nn","got":"reduce_kernel","at":6,"ops":22,"count":140},{"expected":"softmax_fwd","got":"gemm","at":1,"ops":9,"count":3}]'
[ "$(printf '%s\n' "$json" | wc -l)" -eq 1 ] || fail "--json is not one line"
if command -v python3 >/dev/null; then
	printf '%s\n' "$json" | python3 -c 'import json,sys; json.load(sys.stdin)' || fail "--json is not JSON"
fi
echo "--json merged summary"

# A line cut in the middle (line 3), a non-record line (5), and a file ending mid-line.
{ sed -n 1,2p "$DATA/rank0.jsonl"; sed -n 3p "$DATA/rank0.jsonl" | cut -c1-60;
  sed -n 4p "$DATA/rank0.jsonl"; echo '[1,2]'; sed -n '5,$p' "$DATA/rank0.jsonl";
  printf '%s' '{"event":"fallback","reason":"sy'; } > "$T/cut.jsonl"
out=$("$CG" report "$T/cut.jsonl" 2>"$T/err"); rc=$?
[ "$rc" -eq 1 ] || fail "exit $rc with bad lines, want 1"
err=$(cat "$T/err")
expect "$err" "cut.jsonl:3: unterminated string"
expect "$err" 'cut.jsonl:5: not a report record (no "event")'
expect "$err" "cut.jsonl:12: unterminated string at column 31 (the line is cut"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 3 ] || fail "more errors than bad lines: $err"
expect "$out" "replayed   90.0% of 1000 ops"
expect "$out" "first divergence: cuLaunchKernel"
echo "bad lines named, the rest rendered"

"$CG" report "$T/missing.jsonl" 2>/dev/null; rc=$?
[ "$rc" -eq 1 ] || fail "missing file exited $rc"

# A report of an older library (no replay times) merged with a newer one: the merged per-call
# figures are the newer file's own (450 us over its 45 graph launches, 50 us over its 100
# patches, 3 of its 5 chunks), not its times over both files' counts.
sed 's/"event":"summary",/&"graph_launch_us":450,"patch_us":50,"chunks_launched_8_times":3,"chunks_learned":5,/' \
  "$DATA/rank1.jsonl" > "$T/new.jsonl"
sed 's/"event":"summary",/&"chunks_learned":7,/' "$DATA/rank0.jsonl" > "$T/old.jsonl"
out=$("$CG" report "$T/old.jsonl" "$T/new.jsonl" | sed -n '/^== merged/,$p') || fail "exit $? merging old and new"
expect "$out" "replay     launching the graphs took 0.5 ms (10.00 us each), patching 100 nodes 0.1 ms (0.50 us each)"
expect "$out" "3 of 5 chunks learned ran their graphs 8 times or more"
echo "an older file's counts left out of the newer file's per-call figures"

# Where a site diverged first and last (the stream's ops), per file and merged: the earliest
# first and the latest last of the files that say; a file that does not say adds its count only.
sed 's/"count":90}/"count":90,"first_op":100,"last_op":900}/' "$DATA/rank0.jsonl" > "$T/span0.jsonl"
sed 's/"count":50}/"count":50,"first_op":50,"last_op":700}/' "$DATA/rank1.jsonl" > "$T/span1.jsonl"
out=$("$CG" report "$T/span0.jsonl" "$T/span1.jsonl") || fail "exit $? with site spans"
expect "$out" "got reduce_kernel at op 7 of a 22-op chunk (90 times, from op 100 to op 900)"
expect "$out" "got reduce_kernel at op 7 of a 22-op chunk (50 times, from op 50 to op 700)"
expect "$out" "got reduce_kernel at op 7 of a 22-op chunk (140 times, from op 50 to op 900)"
json=$("$CG" report --json "$T/span0.jsonl" "$T/span1.jsonl") || fail "exit $? (--json) with site spans"
expect "$json" '"got":"reduce_kernel","at":6,"ops":22,"count":140,"first_op":50,"last_op":900}'
out=$("$CG" report "$T/span0.jsonl" "$DATA/rank1.jsonl" | sed -n '/^== merged/,$p')
expect "$out" "(140 times, from op 100 to op 900)"
echo "divergence sites: the first and the latest op, per file and merged"

# The driver's share of the launch calls and cugraft's own work: 2000 us in 400 calls, 600 us of
# it in the 100 forwarded; less the 500 us the replays took in them (of the 450 us of graph
# launches, 50 of patches and 100 of builds, some ran elsewhere), cugraft's own work is 900 us,
# 2.25 us a call. A record-only run (no graph launched) says the same under its own label.
sed 's/"event":"summary",/&"graph_launch_us":450,"patch_us":50,"graph_build_us":100,"launch_call_us":2000,"launch_call_count":400,"launch_forward_us":600,"launch_forward_count":100,"launch_replay_us":500,/' \
  "$DATA/rank1.jsonl" > "$T/fwd.jsonl"
out=$("$CG" report "$T/fwd.jsonl") || fail "exit $? on a report with forwards"
expect "$out" "the program's launch calls took 2.0 ms inside cugraft, 5.00 us each"
expect "$out" "of it the driver took 0.6 ms in the 25% of them forwarded (6.00 us each); cugraft's own work about 2.25 us a call"
sed 's/"event":"summary",/&"graph_launch_us":0,"patch_us":0,"graph_build_us":0,"launch_call_us":2000,"launch_call_count":400,"launch_forward_us":1800,"launch_forward_count":400,"launch_replay_us":0,/; s/"graph_launches":[0-9]*/"graph_launches":0/' \
  "$DATA/rank1.jsonl" > "$T/ro.jsonl"
out=$("$CG" report "$T/ro.jsonl") || fail "exit $? on a record-only report"
expect "$out" "  calls      the program's launch calls took 2.0 ms inside cugraft, 5.00 us each"
expect "$out" "of it the driver took 1.8 ms in the 100% of them forwarded (4.50 us each); cugraft's own work about 0.50 us a call"
echo "the driver's share of the launch calls and cugraft's own work"
# Of the 100 us of builds, 60 capturing the ops (the rest instantiating)
sed 's/"event":"summary",/&"graph_capture_us":60,/' "$T/fwd.jsonl" > "$T/capture.jsonl"
out=$("$CG" report "$T/capture.jsonl") || fail "exit $? on a report with captures"
expect "$out" "building the graphs took 0.1 ms (60% of it capturing their ops)"
echo "the builds' share of capturing"
# Of the calls' time, 300 us went to 100 deferred ops they submitted eagerly (a divergence): the
# driver's too, not cugraft's own work (600 us left, 1.50 us a call); and the deferred ops that
# ran eagerly anywhere, 250 of them in 1.0 ms
sed 's/"event":"summary",/&"launch_flush_us":300,"launch_flush_ops":100,"flush_us":1000,"flush_ops":250,/' \
  "$T/fwd.jsonl" > "$T/flush.jsonl"
out=$("$CG" report "$T/flush.jsonl") || fail "exit $? on a report with flushes"
expect "$out" "of it the driver took 0.6 ms in the 25% of them forwarded (6.00 us each) and 0.3 ms in 100 deferred ops they submitted eagerly (3.00 us each, 0.75 us a call); cugraft's own work about 1.50 us a call"
expect "$out" "250 deferred ops ran eagerly after all (divergences, flushes, cost samples): 1.0 ms in the driver, 4.00 us each"
echo "the deferred ops submitted eagerly: the driver's, not cugraft's own work"
# A file written before launch_replay_us: the driver's share, and cugraft's own work only where
# nothing was replayed (the replays' part of the calls unknown otherwise).
sed 's/"launch_replay_us":500,//' "$T/fwd.jsonl" > "$T/fwd-old.jsonl"
out=$("$CG" report "$T/fwd-old.jsonl") || fail "exit $? on a report without launch_replay_us"
expect "$out" "of it the driver took 0.6 ms in the 25% of them forwarded (6.00 us each)"
printf '%s\n' "$out" | grep -q "own work" && fail "own work printed with the replays' part unknown: $out"
sed 's/"launch_replay_us":0,//' "$T/ro.jsonl" > "$T/ro-old.jsonl"
out=$("$CG" report "$T/ro-old.jsonl") || fail "exit $? on a record-only report without launch_replay_us"
expect "$out" "(4.50 us each); cugraft's own work about 0.50 us a call"
echo "reports from before launch_replay_us"
