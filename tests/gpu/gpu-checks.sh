#!/bin/bash
# GPU checks (suite gpu): the shim on the real driver. Each check runs a program without and with
# libcugraft.so preloaded and compares results bitwise; audit mode (CUPTI) counts escapes.
# usage: gpu-checks.sh BUILD_DIR [OUT_DIR] [CHECK...]    exit 77 when there is no GPU
set -u
build=$(cd "$1" && pwd); out=${2:-$build/gpu-checks}; shift; [ $# -gt 0 ] && shift
mkdir -p "$out"
nvidia-smi -L > /dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
lib=$build/shim/libcugraft.so
progs=$build/tests/programs wl=$build/bench/workloads
root=$(cd "$(dirname "$0")/../.." && pwd)
status=0
field() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
. "$root/tests/gpu/verdict.sh"  # fail, summary, shim_ran, compare, compare_exit, same_losses
run() { # NAME: eager and shim runs of CMD; extra env for the shim run in SHIM_ENV
  local n=$1; shift
  rm -f "$out/$n.jsonl"  # an earlier run's report must not vouch for this one
  timeout 300 "$@" > "$out/$n.eager.out" 2> "$out/$n.eager.err"; echo $? > "$out/$n.eager.rc"
  env CUGRAFT_REPORT="$out/$n.jsonl" ${SHIM_ENV:-} LD_PRELOAD="$lib" timeout 300 "$@" \
    > "$out/$n.shim.out" 2> "$out/$n.shim.err"; echo $? > "$out/$n.shim.rc"
}
want() { [ -z "${CHECKS:-}" ] || [[ " $CHECKS " == *" $1 "* ]]; }
CHECKS="$*"

if want fourway; then
  SHIM_ENV="CUGRAFT_AUDIT=1" run fourway "$progs/fourway" --iters 100
  compare fourway checksum
fi
if want nccl && [ -x "$progs/ncclloop" ]; then
  # 1-rank NCCL communicator: all-reduce between compute kernels (NCCL's own launches pass through)
  SHIM_ENV="CUGRAFT_AUDIT=1" run nccl "$progs/ncclloop" --iters 100; compare nccl checksum
  SHIM_ENV="CUGRAFT_AUDIT=1" run nccl-group "$progs/ncclloop" --iters 100 --group; compare nccl-group checksum
  # the opt-in scope: collectives graphed after a vote on a communicator split from the program's
  for m in "" --group; do
    SHIM_ENV="CUGRAFT_AUDIT=1 CUGRAFT_SCOPE=+collectives" run nccl-coll$m "$progs/ncclloop" --iters 100 $m
    compare nccl-coll$m checksum
    echo "   nccl-coll$m: $(summary "$out/nccl-coll$m.jsonl" collectives_graphed votes.held votes.agreed votes.declined votes.timed_out | \
      awk '{printf "collectives_graphed %s votes held %s agreed %s declined %s timed_out %s", $1,$2,$3,$4,$5}')"
  done
fi
if want ddp; then
  # PyTorch DDP, world size 1, NCCL backend: losses identical in the default and collectives scope
  for scope in default +collectives; do
    n=ddp-${scope#+}
    args="$root/bench/train_torch.py --model transformer --steps 100 --ddp"
    rm -f "$out/$n.jsonl"
    timeout 300 python3 $args --out "$out/$n.eager.loss" > "$out/$n.eager.out" 2>&1; echo $? > "$out/$n.eager.rc"
    env CUGRAFT_REPORT="$out/$n.jsonl" CUGRAFT_AUDIT=1 $([ $scope = default ] || echo CUGRAFT_SCOPE=$scope) LD_PRELOAD="$lib" \
      timeout 300 python3 $args --out "$out/$n.shim.loss" > "$out/$n.shim.out" 2>&1; echo $? > "$out/$n.shim.rc"
    same_losses $n &&
      echo "ok $n: losses identical; $(summary "$out/$n.jsonl" launches graph_launches ops_replayed ops_eager escaped_launches collectives.ncclAllReduce collectives_graphed); step eager $(grep step_ms "$out/$n.eager.out") shim $(grep step_ms "$out/$n.shim.out")"
  done
fi
if want multi; then
  # Data parallel on every GPU of the machine (one process per GPU, NCCL): the mini C trainer and
  # PyTorch DDP, eager and under the shim in the default and the collectives scope; then one rank
  # switches to half batches mid-run (--shape-change). Per rank: identical loss lines. Reports per
  # rank ($out/NAME.CONFIG.rankR.jsonl), rendered together by `cugraft report`.
  nr=$(nvidia-smi -L | wc -l) port=29600
  # ranks NAME CONFIG CMD...: CMD as ranks 0..nr-1 (RANK, LOCAL_RANK, WORLD_SIZE; @ID@ -> a fresh
  # file for the NCCL id, @OUT@ -> $out/NAME.CONFIG); CONFIG eager, default or coll
  ranks() {
    local n=$1 c=$2 r pids=(); shift 2
    local pre=$out/$n.$c; rm -f "$pre.id" "$pre".rank*.jsonl; port=$((port + 1))
    local cmd=("${@//@ID@/$pre.id}"); cmd=("${cmd[@]//@OUT@/$pre}")
    for ((r = 0; r < nr; r++)); do
      if [ $c = eager ]; then
        env RANK=$r LOCAL_RANK=$r WORLD_SIZE=$nr MASTER_PORT=$port timeout 300 "${cmd[@]}" > "$pre.out$r" 2>&1 &
      else
        env RANK=$r LOCAL_RANK=$r WORLD_SIZE=$nr MASTER_PORT=$port CUGRAFT_REPORT="$pre.rank%r.jsonl" ${SHIM_ENV:-} \
          $([ $c = coll ] && echo CUGRAFT_SCOPE=+collectives) LD_PRELOAD="$lib" timeout 300 "${cmd[@]}" > "$pre.out$r" 2>&1 &
      fi
      pids+=($!)
    done
    for ((r = 0; r < nr; r++)); do wait "${pids[r]}"; echo $? > "$pre.rc$r"; done
  }
  # same NAME KEY CONFIG: every rank exited 0 both ways and its KEY lines (or loss file) are identical
  same() {
    local n=$1 key=$2 c=$3 r ok=1 a b why
    for ((r = 0; r < nr; r++)); do
      [ "$(cat "$out/$n.eager.rc$r")$(cat "$out/$n.$c.rc$r")" = 00 ] ||
        { fail "$n $c rank $r: exit $(cat "$out/$n.eager.rc$r")/$(cat "$out/$n.$c.rc$r"): $(tail -n 2 "$out/$n.$c.out$r")"; ok=0; continue; }
      why=$(shim_ran "$out/$n.$c.rank$r.jsonl") || { fail "$n $c rank $r: $why"; ok=0; continue; }
      if [ $key = lossfile ]; then
        a=$out/$n.eager.loss$([ $r = 0 ] || echo .rank$r) b=$out/$n.$c.loss$([ $r = 0 ] || echo .rank$r)
        [ -s "$a" ] && cmp -s "$a" "$b" || { fail "$n $c rank $r: losses differ"; ok=0; }
      else
        a=$(grep "^$key" "$out/$n.eager.out$r"); b=$(grep "^$key" "$out/$n.$c.out$r")
        [ -n "$a" ] && [ "$a" = "$b" ] || { fail "$n $c rank $r: '$key' lines differ"; ok=0; }
      fi
    done
    [ $ok = 1 ] || return
    local line="ok $n $c: $nr ranks identical"
    for ((r = 0; r < nr; r++)); do
      line+="; rank $r $(summary "$out/$n.$c.rank$r.jsonl" launches ops_replayed ops_eager escaped_launches collectives_graphed votes.held votes.declined |
        awk '{printf "launches %s replayed %s eager %s escaped %s coll_graphed %s votes %s declined %s", $1,$2,$3,$4,$5,$6,$7}')"
    done
    echo "$line"
  }
  steptime() { # NAME KEY CONFIG...: rank 0's KEY value per config, ratio to eager
    local n=$1 key=$2 c e v; shift 2; e=$(field "$key" "$out/$n.eager.out0")
    for c in "$@"; do v=$(field "$key" "$out/$n.$c.out0"); echo "   $n $key eager $e $c $v speedup $(python3 -c "print(round($e/$v,3))" 2>/dev/null)"; done
  }
  votes() { # NAME CONFIG: each rank's vote events, one line per rank
    local r; for ((r = 0; r < nr; r++)); do
      echo "   $1 $2 rank $r votes: $(grep '"event":"vote"' "$out/$1.$2.rank$r.jsonl" | python3 -c '
import json, sys
print(", ".join("%s %s %s %s" % (v["vote"], v["api"], v["outcome"], v["reason"]) for v in map(json.loads, sys.stdin)) or "all agreed")')"
    done
  }
  if [ "$nr" -lt 2 ]; then
    echo "   multi: $nr GPU(s), skipped"
  else
    # dp NAME KEY TIMEKEY CMD...: eager, default scope, collectives scope; then the same with rank 1
    # on half batches from step 120 (audited). Identical results per rank; rank 0's step time.
    dp() {
      local n=$1 key=$2 tk=$3 c; shift 3
      for c in eager default coll; do ranks $n $c "$@"; done
      for c in default coll; do same $n $key $c; done
      steptime $n $tk default coll
      for c in eager default coll; do SHIM_ENV=CUGRAFT_AUDIT=1 ranks $n-shape $c "$@" --shape-change 1:120; done
      for c in default coll; do same $n-shape $key $c; votes $n-shape $c; done
    }
    dp dp-trainer step iter_us "$wl/mini-trainer" --steps 200 --nccl-id-file @ID@
    dp dp-torch lossfile step_ms python3 "$root/bench/train_torch.py" --model transformer --steps 200 --ddp --out @OUT@.loss
    "$build/tools/cugraft" report "$out"/dp-trainer-shape.coll.rank*.jsonl > "$out/dp-trainer-shape.report.txt" 2>&1 &&
      echo "ok report: $(wc -l < "$out/dp-trainer-shape.report.txt") lines for $nr ranks" || fail "report: $(tail -n 2 "$out/dp-trainer-shape.report.txt")"
  fi
fi
if want conf; then
  # conformance programs (CPU twins in the cpu suite): events, host functions, uploads, shapes,
  # launch shapes changing every iteration, legacy-stream ordering, fork, a crash mid-iteration,
  # variants whose graphs share an executable (switched every 8 tokens, every token)
  for c in events hostfunc uploads shapes grow legacy fork crash swap; do
    [ -x "$progs/conf_$c" ] || continue
    SHIM_ENV="CUGRAFT_AUDIT=1" run conf_$c "$progs/conf_$c"; compare_exit conf_$c
  done
  if [ -x "$progs/conf_swap" ]; then
    SHIM_ENV="CUGRAFT_AUDIT=1" run conf_swap-1 "$progs/conf_swap" --period 1 --iters 400
    compare_exit conf_swap-1
    for n in conf_swap conf_swap-1; do
      echo "   $n: $(summary "$out/$n.jsonl" graphs_built executables graphs_sharing executable_switches executables_bought |
        awk '{printf "%s graphs built on %s executables (%s sharing), %s switches, %s bought", $1, $2, $3, $4, $5}')"
    done
  fi
  # a device copy and a memset whose sizes grow every token: patched into the graph's nodes
  for m in copy memset; do
    [ -x "$progs/conf_grow" ] || continue
    SHIM_ENV="CUGRAFT_AUDIT=1" run conf_grow-$m "$progs/conf_grow" --$m; compare_exit conf_grow-$m
    echo "   conf_grow-$m: $(summary "$out/conf_grow-$m.jsonl" ops_replayed ops divergences |
      awk '{printf "replayed %s of %s ops, %s divergences", $1, $2, $3}')"
  done
fi
if want conf-gpu; then
  # runtime-API conformance programs (tests/gpu/conf): same exit status and identical checksum
  # lines eager and under the shim (a program that aborts on purpose must abort the same way)
  for p in "$build"/tests/gpu/conf/conf-*; do
    [ -x "$p" ] && [ -f "$p" ] || continue
    n=$(basename "$p")
    SHIM_ENV="CUGRAFT_AUDIT=1" run "$n" "$p"; compare_exit "$n"
  done
  # per-thread default streams: replayed, and deferred work other threads submitted (timeouts)
  [ -f "$out/conf-rt-ptds.jsonl" ] && echo "   conf-rt-ptds: $(summary "$out/conf-rt-ptds.jsonl" fallbacks.timeout fallbacks.per_thread_stream |
    awk '{printf "timed out (submitted by the flusher) %s, kept eager as per-thread %s", $1, $2}')"
fi
if want threads; then
  SHIM_ENV="CUGRAFT_AUDIT=1" run threads "$progs/threads"; compare threads checksum
  SHIM_ENV="CUGRAFT_AUDIT=1" run threads-ptds "$progs/threads" --ptds; compare threads-ptds checksum
fi
if want plain; then
  # The same programs without CUGRAFT_AUDIT: audit sends every boundary down the full path, so
  # the short path of forwarded boundaries (shim/entry/boundary.c: event records and queries, stream
  # queries, the program's graph launches while the process is settled) runs only here.
  run plain-fourway "$progs/fourway" --iters 100; compare plain-fourway checksum
  run plain-threads "$progs/threads"; compare plain-threads checksum
  [ -x "$progs/conf_events" ] && { run plain-conf_events "$progs/conf_events"; compare_exit plain-conf_events; }
  p=$build/tests/gpu/conf/conf-events
  [ -x "$p" ] && { run plain-conf-events "$p"; compare_exit plain-conf-events; }
fi
if want lifecycle; then
  for m in exit-no-cleanup ctx-destroy capture capture-ptds ptds-threads; do
    run "life-$m" "$progs/lifecycle" --mode $m; compare "life-$m" checksum
  done
  for m in spin spin-ptds; do  # the host spins on memory a deferred kernel writes
    run "life-$m" "$progs/lifecycle" --mode $m; compare "life-$m" checksum
    echo "   life-$m: timed out (submitted by the flusher) $(summary "$out/life-$m.jsonl" fallbacks.timeout)"
  done
fi
if want demo; then
  "$build/tools/cugraft" demo > "$out/demo.txt" 2>&1 && echo "ok demo: $(grep -i -E 'ratio|identical|equal' "$out/demo.txt" | tr '\n' ' ')" ||
    fail "demo: $(tail -5 "$out/demo.txt")"
fi
if want micro; then
  for blocks in 16 4096; do
    for api in driver runtime; do
      n=mb-$api-$blocks
      SHIM_ENV="CUGRAFT_AUDIT=1" run $n "$wl/mb-$api" --kernels 1000 --blocks $blocks --iters 200 --sync
      "$wl/mb-$api" --kernels 1000 --blocks $blocks --iters 200 --sync --graph > "$out/$n.graph.out" 2>&1
      compare $n checksum
      e=$(field iter_us "$out/$n.eager.out"); s=$(field iter_us "$out/$n.shim.out"); g=$(field iter_us "$out/$n.graph.out")
      echo "   $n iter_us eager $e cugraft $s hand-graph $g  speedup cugraft $(python3 -c "print(round($e/$s,3))" 2>/dev/null) hand $(python3 -c "print(round($e/$g,3))" 2>/dev/null)"
    done
  done
  for api in driver runtime; do  # the same on the per-thread default stream
    n=mb-$api-16-ptds
    SHIM_ENV="CUGRAFT_AUDIT=1" run $n "$wl/mb-$api" --kernels 1000 --blocks 16 --iters 200 --sync --ptds
    compare $n checksum
    e=$(field iter_us "$out/$n.eager.out"); s=$(field iter_us "$out/$n.shim.out")
    echo "   $n iter_us eager $e cugraft $s speedup $(python3 -c "print(round($e/$s,3))" 2>/dev/null)"
  done
fi
if want trainer; then
  SHIM_ENV="CUGRAFT_AUDIT=1" run trainer "$wl/mini-trainer" --steps 50; compare trainer step
fi
if want torch; then
  # Eager loops, and jobs that make CUDA graphs themselves (torch.cuda.graph, reduce-overhead):
  # their losses must be identical with and without the shim.
  for spec in mlp:eager transformer:eager transformer:graph transformer:compile-ro; do
    model=${spec%%:*} mode=${spec#*:} n=torch-$model-$mode
    rm -f "$out/$n.jsonl"
    timeout 300 python3 "$root/bench/train_torch.py" --model $model --mode $mode --steps 50 --out "$out/$n.eager.loss" > "$out/$n.eager.out" 2>&1; echo $? > "$out/$n.eager.rc"
    env CUGRAFT_REPORT="$out/$n.jsonl" CUGRAFT_AUDIT=1 LD_PRELOAD="$lib" timeout 300 python3 "$root/bench/train_torch.py" \
      --model $model --mode $mode --steps 50 --out "$out/$n.shim.loss" > "$out/$n.shim.out" 2>&1; echo $? > "$out/$n.shim.rc"
    same_losses $n &&
      echo "ok $n: losses identical; $(summary "$out/$n.jsonl" launches graph_launches ops_replayed ops_eager escaped_launches audit.driver_launches_seen fallbacks.cost_gate); step eager $(grep step_ms "$out/$n.eager.out") shim $(grep step_ms "$out/$n.shim.out")"
  done
fi
exit $status
