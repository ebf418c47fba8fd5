#!/bin/bash
# Shim tests against the CPU fake driver: each case runs a real program without and with
# libcugraft.so preloaded and compares what the program computed, what the fake executed, and
# what the shim reported.
# usage: shim-tests.sh CASE LIBCUGRAFT FAKEDIR PROGDIR
set -u
case_name=$1 lib=$2 fakedir=$3 progs=$4
export LD_LIBRARY_PATH=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL [$case_name]: $*"; status=1; }
field() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
stat() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
# summary FILE KEY: a top-level number of the report's summary line
summary() { python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"summary\"" in l][-1]
v = s
for k in sys.argv[2].split("."):
    v = v.get(k, 0) if isinstance(v, dict) else 0
print(v)' "$1" "$2"; }

# eager NAME ARGS...: the program alone; shim NAME ARGS...: under the shim. Outputs in $tmp/NAME.*
eager() { local n=$1; shift
  FAKECUDA_STATS=$tmp/$n.stats FAKECUDA_LOG=${LOGRUN:+$tmp/$n.log} timeout 60 "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"; echo $? > "$tmp/$n.rc"; }
shim() { local n=$1; shift
  CUGRAFT_REPORT=$tmp/$n.jsonl FAKECUDA_STATS=$tmp/$n.stats FAKECUDA_LOG=${LOGRUN:+$tmp/$n.log} \
    LD_PRELOAD=$lib timeout 60 "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"; echo $? > "$tmp/$n.rc"; }
same_result() { # A B: both exited 0 and printed the same checksum
  [ "$(cat "$tmp/$1.rc")" = 0 ] || fail "$1 exited $(cat "$tmp/$1.rc"): $(tail -3 "$tmp/$1.err")"
  [ "$(cat "$tmp/$2.rc")" = 0 ] || fail "$2 exited $(cat "$tmp/$2.rc"): $(tail -3 "$tmp/$2.err")"
  local a b; a=$(field checksum "$tmp/$1.out"); b=$(field checksum "$tmp/$2.out")
  [ -n "$a" ] || fail "$1 printed no checksum"
  [ "$a" = "$b" ] || fail "checksum $2=$b differs from $1=$a"
}
same_work() { # A B: the fake ran the same number of kernels (each op once, none lost)
  local a b; a=$(stat kernels_run "$tmp/$1.stats"); b=$(stat kernels_run "$tmp/$2.stats")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "kernels run: $1=$a $2=$b"
}

case $case_name in
fourway) # all four ways of reaching the driver; every launch seen; replay happens and is exact
  eager e "$progs/fourway" --iters 40
  shim s "$progs/fourway" --iters 40
  same_result e s; same_work e s
  launches=$(field launches "$tmp/e.out")
  [ "$(summary "$tmp/s.jsonl" launches)" = "$launches" ] ||
    fail "shim saw $(summary "$tmp/s.jsonl" launches) launches, the program made $launches"
  for ep in cuLaunchKernel cuLaunchKernel_ptsz cuLaunchKernelEx; do
    [ "$(summary "$tmp/s.jsonl" "entry_points.$ep")" = "$(stat "api.$ep" "$tmp/e.stats")" ] ||
      fail "$ep: shim counted $(summary "$tmp/s.jsonl" "entry_points.$ep"), the fake $(stat "api.$ep" "$tmp/e.stats")"
  done
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  grep '"event":"fallback"' "$tmp/s.jsonl" | grep -q '"api":"cuStreamSynchronize"' ||
    fail "no fallback names the program's call (cuStreamSynchronize)"
  [ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
    fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
  ;;
record-only) # the recording pass-through: nothing deferred, same calls reach the fake
  eager e "$progs/fourway" --iters 20
  CUGRAFT_RECORD_ONLY=1 shim s "$progs/fourway" --iters 20
  same_result e s; same_work e s
  [ "$(stat launch_eager "$tmp/s.stats")" = "$(stat launch_eager "$tmp/e.stats")" ] || fail "record-only changed eager launches"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" = 0 ] || fail "record-only launched graphs"
  ;;
unlisted) # an entry point in no list is default-denied: pending work runs before it
  LOGRUN=1 eager e "$progs/fourway" --iters 30 --unlisted
  LOGRUN=1 shim s "$progs/fourway" --iters 30 --unlisted
  same_result e s; same_work e s
  # kernels run before each unlisted call must be the same as without the shim
  before() { awk '/^run /{n++} /^cuCtxGetStreamPriorityRange$/{print n+0}' "$1"; }
  [ "$(before "$tmp/e.log")" = "$(before "$tmp/s.log")" ] || fail "work pending at an unlisted call was not flushed first"
  [ "$(summary "$tmp/s.jsonl" unclassified_entry_points.cuCtxGetStreamPriorityRange)" = 30 ] ||
    fail "unlisted calls not counted: $(summary "$tmp/s.jsonl" unclassified_entry_points.cuCtxGetStreamPriorityRange)"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  ;;
disable) # CUGRAFT_DISABLE=1: a pure pass-through, no report, the fake sees the same calls
  eager e "$progs/fourway" --iters 20
  CUGRAFT_DISABLE=1 shim s "$progs/fourway" --iters 20
  same_result e s; same_work e s
  diff <(grep '^api\.' "$tmp/e.stats") <(grep '^api\.' "$tmp/s.stats") > /dev/null || fail "disabled shim changed driver calls"
  [ ! -s "$tmp/s.jsonl" ] || fail "disabled shim wrote a report"
  # programs whose first wrapped call is a plain linked one (no dlsym, no cuGetProcAddress)
  for m in exit-no-cleanup ctx-destroy; do
    eager e2 "$progs/lifecycle" --mode $m
    CUGRAFT_DISABLE=1 shim s2 "$progs/lifecycle" --mode $m
    same_result e2 s2
  done
  ;;
hostile-env) # garbage options: one warning each, defaults kept, result unchanged
  eager e "$progs/fourway" --iters 20
  CUGRAFT_WARMUP=banana CUGRAFT_CHUNK=-5 CUGRAFT_MAX_GRAPHS=99999999999999999999999 \
    CUGRAFT_MAX_DEFER_US= CUGRAFT_LOG=loud CUGRAFT_BACKTRACE=1e99 CUGRAFT_AUDIT=maybe \
    CUGRAFT_SCOPE=',,=' CUGRAFT_RECORD_ONLY=2 shim s "$progs/fourway" --iters 20
  same_result e s; same_work e s
  for v in WARMUP CHUNK MAX_GRAPHS LOG BACKTRACE AUDIT RECORD_ONLY; do
    n=$(grep -c "CUGRAFT_$v" "$tmp/s.err")
    [ "$n" = 1 ] || fail "CUGRAFT_$v: $n warnings, want 1"
  done
  ;;
startup-checks) # expandable segments: NCCL_GRAPH_REGISTER=0 set and said; a user value kept
  eager e "$progs/fourway" --iters 5
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True shim s "$progs/fourway" --iters 5
  same_result e s
  grep -q '"startup_checks":\["PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True: set NCCL_GRAPH_REGISTER=0' "$tmp/s.jsonl" ||
    fail "the report header does not say NCCL_GRAPH_REGISTER=0 was set"
  grep -q 'NCCL_GRAPH_REGISTER=0' "$tmp/s.err" || fail "stderr does not say NCCL_GRAPH_REGISTER=0 was set"
  NCCL_GRAPH_REGISTER=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True shim s2 "$progs/fourway" --iters 5
  grep -q '"startup_checks":\[\]' "$tmp/s2.jsonl" || fail "a user's NCCL_GRAPH_REGISTER was overridden"
  ;;
backtrace) # first occurrences carry a host backtrace reaching the program's own function, and
           # `cugraft report` adds its source line (the program has debug information)
  shim s "$progs/fourway" --iters 10
  grep '"event":"fallback"' "$tmp/s.jsonl" | grep -q '"backtrace":\[[^]]*main+0x[0-9a-f]* (fourway)' ||
    fail "no fallback backtrace names fourway's main: $(grep -m1 backtrace "$tmp/s.jsonl" | cut -c1-400)"
  if command -v addr2line > /dev/null; then
    "$(dirname "$lib")/../tools/cugraft" report "$tmp/s.jsonl" > "$tmp/rendered" 2>&1 ||
      fail "cugraft report cannot read the shim's own report: $(grep -m3 . "$tmp/rendered")"
    grep -q 'main+0x[0-9a-f]* (fourway)  .*fourway\.c:[0-9]' "$tmp/rendered" ||
      fail "the rendered report gives no fourway.c line: $(grep -m2 'fourway' "$tmp/rendered")"
  fi
  ;;
scope) # CUGRAFT_SCOPE: excluded kernels, memops and streams run eagerly, in order
  eager e "$progs/fourway" --iters 30
  CUGRAFT_SCOPE=-cg_chain shim s "$progs/fourway" --iters 30
  same_result e s; same_work e s
  [ "$(summary "$tmp/s.jsonl" fallbacks.scope)" -gt 0 ] || fail "-cg_chain excluded nothing"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "-cg_chain stopped all graphs"
  CUGRAFT_SCOPE=streams=999 shim s2 "$progs/fourway" --iters 30
  same_result e s2
  [ "$(summary "$tmp/s2.jsonl" graph_launches)" = 0 ] || fail "streams=999 still graphed"
  CUGRAFT_SCOPE=memops shim s3 "$progs/fourway" --iters 30
  same_result e s3
  [ "$(summary "$tmp/s3.jsonl" fallbacks.scope)" -ge "$(field launches "$tmp/e.out")" ] ||
    fail "kernels graphed although CUGRAFT_SCOPE=memops"
  ;;
threads) # 8 threads on 8 streams, an observer thread polling events
  eager e "$progs/threads"
  shim s "$progs/threads"
  same_result e s; same_work e s
  ;;
exit-no-cleanup|ctx-destroy|capture) # lifetimes: no crash, no hang, report written
  eager e "$progs/lifecycle" --mode "$case_name"
  shim s "$progs/lifecycle" --mode "$case_name"
  same_result e s; same_work e s
  grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
  ;;
thread-exit) # exit() from a second thread mid-launch: how much ran first is timing, not a result
  shim s "$progs/lifecycle" --mode "$case_name"
  [ "$(cat "$tmp/s.rc")" = 0 ] || fail "exited $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
  grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
  ;;
managed) # managed memory (CPU-offload style): exact, and noted once in the report
  eager e "$progs/lifecycle" --mode managed
  shim s "$progs/lifecycle" --mode managed
  same_result e s; same_work e s
  [ "$(grep -c '"event":"note".*managed memory' "$tmp/s.jsonl")" = 1 ] || fail "managed memory not noted once"
  ;;
spin) # a host thread spins on memory a deferred kernel writes: the flusher must submit it
  shim s "$progs/lifecycle" --mode spin
  [ "$(cat "$tmp/s.rc")" = 0 ] || fail "spin exited $(cat "$tmp/s.rc"): $(tail -2 "$tmp/s.out" "$tmp/s.err")"
  ;;
fault-*) # a failing graph API: results identical, nothing lost or run twice, reason reported
  api=${case_name#fault-}
  eager e "$progs/fourway" --iters 40
  FAKECUDA_FAIL=$FAULT shim s "$progs/fourway" --iters 40
  same_result e s; same_work e s
  grep -q "\"$REASON\"" "$tmp/s.jsonl" || fail "reason $REASON not in the report"
  ;;
nccl|nccl-group|nccl-dlsym) # collectives are boundaries; NCCL's own launches pass through uncounted
  export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
  mode=; [ "$case_name" = nccl ] || mode=--${case_name#nccl-}
  FAKENCCL_STATS=$tmp/e.nccl eager e "$progs/ncclloop" --iters 40 $mode
  FAKENCCL_STATS=$tmp/s.nccl shim s "$progs/ncclloop" --iters 40 $mode
  same_result e s; same_work e s
  launches=$(field launches "$tmp/e.out")
  [ "$(summary "$tmp/s.jsonl" launches)" = "$launches" ] ||
    fail "shim saw $(summary "$tmp/s.jsonl" launches) launches, the program made $launches"
  [ "$(summary "$tmp/s.jsonl" collectives.ncclAllReduce)" = 40 ] ||
    fail "collectives.ncclAllReduce is $(summary "$tmp/s.jsonl" collectives.ncclAllReduce), want 40"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  for r in e s; do
    [ "$(stat internal_launches "$tmp/$r.nccl")" = 40 ] ||
      fail "$r: NCCL made $(stat internal_launches "$tmp/$r.nccl") internal launches, want 40"
  done
  ;;
nccl-disable) # CUGRAFT_DISABLE=1 around NCCL: the same result and the same driver calls
  export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
  eager e "$progs/ncclloop" --iters 20 --group
  CUGRAFT_DISABLE=1 shim s "$progs/ncclloop" --iters 20 --group
  same_result e s; same_work e s
  diff <(grep '^api\.' "$tmp/e.stats") <(grep '^api\.' "$tmp/s.stats") > /dev/null || fail "disabled shim changed driver calls"
  [ ! -s "$tmp/s.jsonl" ] || fail "disabled shim wrote a report"
  ;;
conf-events|conf-hostfunc|conf-uploads|conf-shapes|conf-legacy) # one hazard each (conf_*.c)
  prog=$progs/conf_${case_name#conf-}
  eager e "$prog"
  shim s "$prog"
  same_result e s; same_work e s
  case $case_name in conf-events|conf-shapes|conf-legacy) # the hazard must be met under replay
    [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
    [ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
      fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
  esac
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
[ $status = 0 ] && echo "ok [$case_name]"
exit $status
