#!/bin/bash
# Shim tests against the CPU fake driver: each case runs a real program without and with
# libcugraft.so preloaded and compares what the program computed, what the fake executed, and
# what the shim reported.
# usage: shim-tests.sh CASE LIBCUGRAFT FAKEDIR PROGDIR
set -u
case_name=$1 lib=$2 fakedir=$3 progs=$4
export LD_LIBRARY_PATH=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# A sanitized build's runtime comes first in LD_PRELOAD (tests/meson.build sets CG_SANITIZER_RT).
rt=${CG_SANITIZER_RT:+$CG_SANITIZER_RT:}
# The deferral controller decides from wall time, which on the CPU fake is noise: every case
# counts what the policy does with it off, unless it sets it (control-*: wall time made to differ).
export CUGRAFT_MEASURE=${CUGRAFT_MEASURE:-0}
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
    LD_PRELOAD=$rt$lib timeout 60 "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"; echo $? > "$tmp/$n.rc"; }
same_result() { # A B: both exited 0 and printed the same checksum
  [ "$(cat "$tmp/$1.rc")" = 0 ] || fail "$1 exited $(cat "$tmp/$1.rc"): $(tail -3 "$tmp/$1.err")"
  [ "$(cat "$tmp/$2.rc")" = 0 ] || fail "$2 exited $(cat "$tmp/$2.rc"): $(tail -3 "$tmp/$2.err")"
  local a b; a=$(field checksum "$tmp/$1.out"); b=$(field checksum "$tmp/$2.out")
  [ -n "$a" ] || fail "$1 printed no checksum"
  [ "$a" = "$b" ] || fail "checksum $2=$b differs from $1=$a"
}
in_second_half() { # RE LOG: calls matching RE logged after half of the kernel runs (fake call log)
  awk -v re="$1" '/^run/ { runs++ } $1 ~ re { at[n++] = runs }
    END { c = 0; for (i = 0; i < n; i++) c += at[i] > runs / 2; print c }' "$2"; }
same_work() { # A B: the fake ran the same number of kernels (each op once, none lost), and
               # the same kernels with the same launch shapes (grid, block, shared memory)
  local a b; a=$(stat kernels_run "$tmp/$1.stats"); b=$(stat kernels_run "$tmp/$2.stats")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "kernels run: $1=$a $2=$b"
  a=$(stat launch_shapes "$tmp/$1.stats"); b=$(stat launch_shapes "$tmp/$2.stats")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "kernels ran with other launch shapes: $1=$a $2=$b"
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
  # the summary names the device the program's streams used (the header is written before)
  grep '"event":"summary"' "$tmp/s.jsonl" | grep -q '"devices":\[{"ordinal":0,"name":"FakeCUDA CPU"}\]' ||
    fail "the summary does not name device 0: $(grep -o '"devices":[^]]*]' "$tmp/s.jsonl")"
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
capture-ptds) # the program captures on its per-thread stream through _ptsz with stream 0, after
              # the same launches were learned there: they must reach its capture untouched
  eager e "$progs/lifecycle" --mode capture-ptds
  shim s "$progs/lifecycle" --mode capture-ptds
  same_result e s; same_work e s
  [ "$(summary "$tmp/s.jsonl" ops_in_program_captures)" = 4 ] ||
    fail "$(summary "$tmp/s.jsonl" ops_in_program_captures) launches passed to the program's capture, 4 made"
  [ "$(summary "$tmp/s.jsonl" fallbacks.capture)" = 0 ] ||
    fail "launches into the program's capture counted as ops run eagerly"
  ;;
thread-exit) # exit() from a second thread mid-launch: how much ran first is timing, not a result
  shim s "$progs/lifecycle" --mode "$case_name"
  [ "$(cat "$tmp/s.rc")" = 0 ] || fail "exited $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
  grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
  ;;
exit-order) # exit() from a second thread while its exit work is held inside a kernel of one
            # stream: main's launch on another stream with work still deferred must run after
            # that work (the flusher is kept away by a long deferral bound)
  eager e "$progs/lifecycle" --mode exit-order
  CUGRAFT_MAX_DEFER_US=10000000 shim s "$progs/lifecycle" --mode exit-order
  same_result e s
  [ "$(field window "$tmp/s.out")" = 1 ] ||
    fail "main's launch did not fall inside the exit work (window $(field window "$tmp/s.out"))"
  ;;
managed) # managed memory (CPU-offload style): exact, and noted once in the report
  eager e "$progs/lifecycle" --mode managed
  shim s "$progs/lifecycle" --mode managed
  same_result e s; same_work e s
  [ "$(grep -c '"event":"note".*managed memory' "$tmp/s.jsonl")" = 1 ] || fail "managed memory not noted once"
  ;;
no-errors) # the shim's own driver queries (parameter layouts of CUfunction and CUkernel handles)
  # never fail: a debugger or compute-sanitizer would list each failing call as the program's error
  eager e "$progs/fourway" --iters 20
  shim s "$progs/fourway" --iters 20
  same_result e s; same_work e s
  [ "$(stat query_errors "$tmp/s.stats")" = "$(stat query_errors "$tmp/e.stats")" ] ||
    fail "the fake answered $(stat query_errors "$tmp/s.stats") function/kernel queries with an error under the shim, $(stat query_errors "$tmp/e.stats") without"
  [ "$(stat api.cuKernelGetParamCount "$tmp/s.stats")" -gt 0 ] && [ "$(stat api.cuFuncGetParamCount "$tmp/s.stats")" -gt 0 ] ||
    fail "layouts were not asked by parameter count (cuFuncGetParamCount $(stat api.cuFuncGetParamCount "$tmp/s.stats"), cuKernelGetParamCount $(stat api.cuKernelGetParamCount "$tmp/s.stats"))"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  ;;
no-errors-13.0) # the same on a 13.0 driver, which cannot count a kernel's parameters: each layout
  # is asked for exactly the parameters the loaded image states (PTX, the fat binary nvcc writes
  # by default, one compressed with LZ4, one with zstd where libzstd is there), so no probe runs
  # one past the last parameter
  [ -f "$progs/kernels.fatbin" ] || { echo "skipped: no nvcc, no images"; exit 77; }
  old=$fakedir/cuda130:$LD_LIBRARY_PATH
  imgs="ptx fatbin lz4.fatbin"  # zstd entries are read where the system has libzstd
  ldconfig -p 2>/dev/null | grep -q 'libzstd\.so\.1 ' && imgs="$imgs zstd.fatbin"
  for img in $imgs; do
    args=(--iters 20); [ $img = ptx ] || args+=(--image "$progs/kernels.$img")
    LD_LIBRARY_PATH=$old eager e "$progs/fourway" "${args[@]}"
    LD_LIBRARY_PATH=$old shim s "$progs/fourway" "${args[@]}"
    same_result e s; same_work e s
    [ "$(stat query_errors "$tmp/s.stats")" = "$(stat query_errors "$tmp/e.stats")" ] ||
      fail "$img: the fake answered $(stat query_errors "$tmp/s.stats") function/kernel queries with an error under the shim, $(stat query_errors "$tmp/e.stats") without"
    [ -z "$(stat api.cuFuncGetParamCount "$tmp/s.stats")" ] || fail "the 13.0 fake was asked for parameter counts"
    [ "$(stat api.cuFuncGetParamInfo "$tmp/s.stats")" = 13 ] && [ "$(stat api.cuKernelGetParamInfo "$tmp/s.stats")" = 4 ] ||
      fail "$img: layouts not asked parameter by parameter (cuFuncGetParamInfo $(stat api.cuFuncGetParamInfo "$tmp/s.stats") of 2+3+3+3+2, cuKernelGetParamInfo $(stat api.cuKernelGetParamInfo "$tmp/s.stats") of 4)"
    [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "$img: no graph was launched"
  done
  # Without libzstd, entries compressed with zstd are not read: the probe stays (its failing
  # calls), and is exact.
  LD_LIBRARY_PATH=$old eager e "$progs/fourway" --iters 20 --image "$progs/kernels.zstd.fatbin"
  LD_LIBRARY_PATH=$old shim s "$progs/fourway" --iters 20 --image "$progs/kernels.zstd.fatbin"
  same_result e s; same_work e s
  ;;
padding) # the same arguments each iteration, other stack bytes in the padding between parameters:
  # replays patch nothing (the padding is neither read from the program nor compared)
  eager e "$progs/lifecycle" --mode padding
  shim s "$progs/lifecycle" --mode padding
  same_result e s; same_work e s
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  [ "$(summary "$tmp/s.jsonl" patches)" = 0 ] ||
    fail "$(summary "$tmp/s.jsonl" patches) patches of unchanged arguments (fake: $(stat api.cuGraphExecKernelNodeSetParams_v2 "$tmp/s.stats") kernel node updates)"
  ;;
padding-valgrind) # the same under valgrind: no decision of the shim reads an uninitialised byte
  # (backtraces off: libunwind probes addresses with write(2), which valgrind flags)
  command -v valgrind > /dev/null || { echo "no valgrind: skipped"; exit 77; }
  [ -z "${CG_SANITIZER_RT:-}" ] || { echo "skipped: valgrind does not run a sanitized build"; exit 77; }
  CUGRAFT_BACKTRACE=0 shim s valgrind -q --error-exitcode=9 "$progs/lifecycle" --mode padding
  [ "$(cat "$tmp/s.rc")" = 0 ] ||
    fail "valgrind: exit $(cat "$tmp/s.rc"), $(grep -c 'uninitialised' "$tmp/s.err") uses of uninitialised bytes: $(grep -m1 -A3 'uninitialised' "$tmp/s.err")"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  ;;
spin|spin-ptds) # the host spins on memory a deferred kernel writes: the flusher must submit it
  # (lifecycle exits 3 after 5 s otherwise, as it does with CUGRAFT_MAX_DEFER_US=10000000)
  eager e "$progs/lifecycle" --mode "$case_name"
  LOGRUN=1 shim s "$progs/lifecycle" --mode "$case_name"
  same_result e s; same_work e s
  [ "$(summary "$tmp/s.jsonl" fallbacks.timeout)" -gt 0 ] || fail "no deferred work timed out"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  if [ "$case_name" = spin-ptds ]; then
    # The flusher cannot name the program thread's per-thread stream: it makes the proxy wait
    # for the fence, submits there, records the handback; the program thread's next call
    # (a sync: the program calls no cuStreamWaitEvent itself) first waits for the handback.
    verdict=$(awk '/^cuStreamWaitEvent/ { if (st == 2) { st = 0; done++ } else st = 1; next }
      st == 1 && /^cuEventRecord/ { st = 2; next }
      st == 2 && /^cuStreamSynchronize|^cuLaunchKernel$/ { bad++ }
      END { print (done > 0 && !bad) ? "ok" : "redirects " done + 0 ", used before catching up " bad + 0 }' "$tmp/s.log")
    [ "$verdict" = ok ] || fail "per-thread stream hand-over: $verdict"
  fi
  ;;
ptds-threads) # threads one after another end with work deferred on their per-thread streams:
              # nothing lost; each thread its own stream record and proxy (pthread_t values are
              # reused); the records of exited threads retired before the program ends
  eager e "$progs/lifecycle" --mode ptds-threads
  shim s "$progs/lifecycle" --mode ptds-threads
  same_result e s; same_work e s
  proxies=$(( $(stat api.cuStreamCreate "$tmp/s.stats") - $(stat api.cuStreamCreate "$tmp/e.stats") ))
  [ "$proxies" -ge 6 ] || fail "the shim created $proxies streams for 6 threads' per-thread streams"
  left=$(grep '"event":"summary"' "$tmp/s.jsonl" | grep -o '"kind":"per_thread"' | wc -l)
  [ "$left" -lt 6 ] || fail "all $left per-thread stream records of exited threads still live at exit"
  ;;
threads-ptds) # 8 threads on their per-thread default streams, naps past the deferral bound,
              # thread 0 on the legacy stream too, an observer thread polling events
  eager e "$progs/threads" --ptds
  shim s "$progs/threads" --ptds
  same_result e s; same_work e s
  [ "$(summary "$tmp/s.jsonl" ops_replayed)" -gt 0 ] || fail "nothing replayed on per-thread streams"
  # deferred work flushed from another thread: the flusher (timeout), or another thread's call
  # (stream order: what other streams deferred goes first); which one varies with the
  # scheduling. Either may launch a complete chunk as its graph, no op eager: the proxy's wait
  # for the owner's fence (cuStreamWaitEvent, which the program never calls) says it came
  [ $(( $(summary "$tmp/s.jsonl" fallbacks.timeout) + $(summary "$tmp/s.jsonl" fallbacks.stream_order) +
        $(summary "$tmp/s.jsonl" defer_budget_raises) + $(stat api.cuStreamWaitEvent "$tmp/s.stats") )) -gt 0 ] ||
    fail "no deferred work was flushed by the flusher or another thread"
  [ "$(summary "$tmp/s.jsonl" fallbacks.per_thread_stream)" = 0 ] || fail "per-thread streams kept eager"
  ;;
cost-gate) # graphs slower than eager on the fake's simulated GPU clock (FAKECUDA_GRAPH_SLOW=1):
           # the timed chunks are disabled (cost_gate) and replay no more; results and work exact.
           # Chunk cuts hash per-process handles, so runs differ: each claim is checked inside
           # one run's call log (half: the second half of its kernel runs).
  export CUGRAFT_MAX_DEFER_US=10000000
  eager e "$progs/fourway" --iters 80
  FAKECUDA_GRAPH_SLOW=1 LOGRUN=1 shim s "$progs/fourway" --iters 80
  same_result e s; same_work e s
  [ "$(stat memops_run "$tmp/s.stats")" = "$(stat memops_run "$tmp/e.stats")" ] ||
    fail "memops run: e=$(stat memops_run "$tmp/e.stats") s=$(stat memops_run "$tmp/s.stats")"
  gated=$(grep -c '"event":"chunk_disabled".*"reason":"cost_gate"' "$tmp/s.jsonl")
  [ "$gated" -gt 0 ] || fail "no chunk disabled by the cost gate"
  [ "$(in_second_half '^cuGraphLaunch' "$tmp/s.log")" = 0 ] ||
    fail "gated chunks kept replaying: $(in_second_half '^cuGraphLaunch' "$tmp/s.log") graph launches in the second half"
  ;;
control-win|control-lose) # the controller times the program's epochs eager and graphed: with
  # each eager op made to cost 100 us of host time, graphs win and stay; with each graph launch
  # made to cost 2 ms, the program goes eager. Either way the results are exact, and the report
  # has the decision and the summary the controller's state.
  export CUGRAFT_MEASURE=1
  # (an epoch lasts 3 ms at least: the fake's eager iterations take tens of microseconds; where
  # graphs win, they save most of the host's time, and 200 ms run graphed before the probe:
  # more than 12,000 of the fake's graphed iterations here)
  if [ $case_name = control-win ]; then spin=100000,0 want=graphs iters=40000; else spin=0,2000000 want=eager iters=300; fi
  eager e "$progs/fourway" --iters $iters
  FAKECUDA_SPIN_NS=$spin shim s "$progs/fourway" --iters $iters
  same_result e s; same_work e s
  grep -q '"event":"decision"' "$tmp/s.jsonl" || fail "no controller decision in the report"
  first=$(grep -m1 '"event":"decision"' "$tmp/s.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["decision"])')
  [ "$first" = $want ] || fail "first decision $first, want $want: $(grep -m1 '"event":"decision"' "$tmp/s.jsonl")"
  mode=$(summary "$tmp/s.jsonl" control.mode)
  [ "$mode" = $want ] || fail "the summary's control mode is '$mode', want $want"
  [ "$(summary "$tmp/s.jsonl" control.decisions)" -ge 1 ] || fail "the summary counts no decision"
  share=$(summary "$tmp/s.jsonl" replayed_share)
  if [ $want = graphs ]; then
    python3 -c "import sys; sys.exit(0 if $share > 0.5 else 1)" || fail "graphs won but only $share replayed"
  else
    [ "$(summary "$tmp/s.jsonl" fallbacks.measured_eager)" -gt 0 ] || fail "no op ran eagerly by measurement"
  fi
  ;;
cost-normal) # graphs faster than eager: chunks are timed a few times, then replay with no event
             # calls at all (none in the second half of the run); nothing gated. At warmup 3 a
             # chunk's second sighting is an eager sample (at 2 such graphs need none)
  export CUGRAFT_MAX_DEFER_US=10000000 CUGRAFT_WARMUP=3
  eager e "$progs/fourway" --iters 80
  LOGRUN=1 shim s "$progs/fourway" --iters 80
  same_result e s; same_work e s
  ! grep -q cost_gate "$tmp/s.jsonl" || fail "a chunk was gated although its graph is faster"
  [ "$(( $(summary "$tmp/s.jsonl" fallbacks.cost_sample) + $(summary "$tmp/s.jsonl" learning_samples) ))" -gt 0 ] ||
    fail "no chunk ran as a timed eager sample (from learning or in place of a replay)"
  [ "$(stat api.cuEventElapsedTime_v2 "$tmp/s.stats")" -gt 0 ] || fail "no timing sample was read"
  [ "$(in_second_half '^cuGraphLaunch' "$tmp/s.log")" -gt 0 ] || fail "replay did not go on in the second half"
  timing='^cuEvent(Record|Query|ElapsedTime)'  # (the events are destroyed at exit)
  [ "$(in_second_half "$timing" "$tmp/s.log")" = 0 ] ||
    fail "timing never stops: $(in_second_half "$timing" "$tmp/s.log") event calls in the second half"
  ;;
cost-fault) # an event API failing stops all timing at once: results exact, that API never called
            # again, one note in the report, graphs still replay
  eager e "$progs/fourway" --iters 40
  shim n "$progs/fourway" --iters 40
  for f in cuEventCreate:1 cuEventRecord:5 cuEventQuery:3 cuEventElapsedTime_v2:2; do
    rm -f "$tmp/s.jsonl"
    FAKECUDA_FAIL=$f shim s "$progs/fourway" --iters 40
    same_result e s; same_work e s
    [ "$(stat faults_injected "$tmp/s.stats")" -gt 0 ] || fail "$f never fired"
    [ "$(stat "api.${f%:*}" "$tmp/s.stats")" = "${f#*:}" ] ||
      fail "$f: ${f%:*} called $(stat "api.${f%:*}" "$tmp/s.stats") times, timing did not stop"
    records=$(stat api.cuEventRecord "$tmp/s.stats")
    [ "${records:-0}" -lt "$(stat api.cuEventRecord "$tmp/n.stats")" ] ||
      fail "$f: as many events recorded as without the fault"
    [ "$(grep -c '"event":"note".*GPU timing of chunks for the cost gate is off' "$tmp/s.jsonl")" = 1 ] ||
      fail "$f: the report does not note once that timing stopped"
    [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "$f: no graph was launched"
  done
  ;;
fault-*) # FAULT (FAKECUDA_FAIL) fails a driver API the backend uses: the result is identical,
          # nothing lost or run twice, the fault really fired, REASON and DETAIL (the CUresult's
          # name) are in the report; an empty REASON: no *_failed reason at all (a failing
          # destroy has nothing to fall back from); REASON='*': any. PROG (fourway), PROG_ARGS and
          # SHIM_ENV pick the run; ATTEMPTS reruns the shim until the fault fires (for faults
          # reached only by timing).
  eager e "$progs/${PROG:-fourway}" ${PROG_ARGS:---iters 40}
  for attempt in $(seq "${ATTEMPTS:-1}"); do
    rm -f "$tmp/s.jsonl"
    (if [ -n "${SHIM_ENV:-}" ]; then export $SHIM_ENV; fi
     FAKECUDA_FAIL=$FAULT shim s "$progs/${PROG:-fourway}" ${PROG_ARGS:---iters 40})
    [ "$(stat faults_injected "$tmp/s.stats")" -gt 0 ] && break
  done
  same_result e s; same_work e s
  [ "$(stat memops_run "$tmp/s.stats")" = "$(stat memops_run "$tmp/e.stats")" ] ||
    fail "memops run: e=$(stat memops_run "$tmp/e.stats") s=$(stat memops_run "$tmp/s.stats")"
  [ "$(stat faults_injected "$tmp/s.stats")" -gt 0 ] || fail "FAKECUDA_FAIL=$FAULT never fired"
  grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
  if [ "$REASON" = '*' ]; then :
  elif [ -n "$REASON" ]; then
    # a record with the reason, or a note naming it (streams that run eagerly say so once)
    grep -q "\"reason\":\"$REASON\"\|\"event\":\"note\".*($REASON)" "$tmp/s.jsonl" ||
      fail "reason $REASON not in the report"
    # a failed extra instance of an armed chunk replays from the first one: no fallback then
    [ "$REASON" = build_failed ] || [ "$(summary "$tmp/s.jsonl" "fallbacks.$REASON")" -gt 0 ] ||
      fail "the summary counts no fallbacks.$REASON"
  else
    ! grep -q '"reason":"[a-z]*_failed"' "$tmp/s.jsonl" || fail "a failure reason without a fallback"
  fi
  [ -z "${DETAIL:-}" ] || grep -q "\"reason\":\"$REASON\".*\"detail\":\"$DETAIL\"" "$tmp/s.jsonl" ||
    fail "no $REASON line names $DETAIL"
  ;;
oom-*) # libfaultalloc.so fails libcugraft.so's FAULTALLOC_N-th allocation (FAULTALLOC_FROM=1: and
        # every later one): the result is identical, nothing lost or run twice, the allocation
        # really failed, the report has its summary and the report or stderr has EXPECT.
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
  ;;
flusher-idle) # the flusher sleeps while nothing is deferred: lifecycle --mode idle (10 rounds of
              # launches and a sync, then 0.5 s with no driver call) wakes it at most 6 times a
              # round (the round's deferral, its deadline, 4 quiet polls), also with deferral
              # bounds of 4 s and more (whose sleeps once all failed at once: a spinning core)
  eager e "$progs/lifecycle" --mode idle
  for d in 2000 4000000 10000000; do
    rm -f "$tmp/s.jsonl"
    CUGRAFT_MAX_DEFER_US=$d shim s "$progs/lifecycle" --mode idle
    same_result e s; same_work e s
    w=$(summary "$tmp/s.jsonl" flusher_wakeups)
    [ "$w" -gt 0 ] && [ "$w" -le 60 ] || fail "CUGRAFT_MAX_DEFER_US=$d: the flusher woke $w times"
  done
  ;;
slow-start) # start-up made slow (tests/faultalloc: the policy engine's allocation waits 500 ms)
            # while 8 threads and an observer make their first calls: they wait until the shim is
            # built, so no stream runs eagerly for want of an engine ("no_memory"), every launch
            # is seen, and the result is exact
  eager e "$progs/threads"
  FAULTALLOC_N=1 FAULTALLOC_DELAY_MS=500 lib=$lib:$FAULTALLOC_LIB shim s "$progs/threads"
  same_result e s; same_work e s
  [ "$(summary "$tmp/s.jsonl" fallbacks.no_memory)" = 0 ] ||
    fail "$(summary "$tmp/s.jsonl" fallbacks.no_memory) ops ran eagerly as no_memory"
  [ "$(summary "$tmp/s.jsonl" launches)" = "$(field launches "$tmp/e.out")" ] ||
    fail "shim saw $(summary "$tmp/s.jsonl" launches) launches, the program made $(field launches "$tmp/e.out")"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  ;;
fork-start) # main forks again and again while another thread starts the shim, made slow in its
            # driver load (dlopen of libcuda) and then in building the engine (tests/faultalloc):
            # each child makes a driver call and must end (the program gives it 10 s)
  # A sanitizer's runtime intercepts dlopen and malloc itself, so libfaultalloc.so cannot slow
  # the start-up there: the window this case needs is not made (the plain build runs it).
  case ${CG_SANITIZER_RT:-} in *libasan*|*libtsan*)
    echo "skipped: the sanitizer's dlopen and malloc bypass libfaultalloc.so"; exit 77 ;; esac
  eager e "$progs/lifecycle" --mode fork-start
  slows=(FAULTALLOC_DLOPEN_DELAY_MS=300 'FAULTALLOC_N=1 FAULTALLOC_DELAY_MS=300')
  for slow in "${slows[@]}"; do
    # Whether a fork lands inside the start-up is scheduling (a loaded machine, a sanitized
    # build): up to 3 tries to meet that precondition; every try must be exact.
    for try in 1 2 3; do
      (export $slow; lib=$lib:$FAULTALLOC_LIB shim s "$progs/lifecycle" --mode fork-start)
      same_result e s
      during=$(awk '$1 == "forked" { print $4 }' "$tmp/s.out")
      [ "${during:-0}" -gt 0 ] && break
    done
    [ "${during:-0}" -gt 0 ] || fail "$slow: no child was forked during the start-up (3 tries)"
  done
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
startup-nccl) # expandable segments: NCCL reads NCCL_GRAPH_REGISTER=0 at communicator creation, a
              # user's value as it is, and nothing without them; the process environment itself
              # is not replaced while the program runs (setenv then races with its threads)
  export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
  eager e "$progs/ncclloop" --iters 5
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True FAKENCCL_STATS=$tmp/s.nccl \
    shim s "$progs/ncclloop" --iters 5 --check-environ
  NCCL_GRAPH_REGISTER=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True FAKENCCL_STATS=$tmp/s2.nccl \
    shim s2 "$progs/ncclloop" --iters 5 --check-environ
  FAKENCCL_STATS=$tmp/s3.nccl shim s3 "$progs/ncclloop" --iters 5 --check-environ
  for run in s:0 s2:1 s3:unset; do
    n=${run%:*} want=${run#*:}
    same_result e $n
    [ "$(stat graph_register "$tmp/$n.nccl")" = "$want" ] ||
      fail "$n: NCCL read NCCL_GRAPH_REGISTER=$(stat graph_register "$tmp/$n.nccl"), want $want"
    [ "$(field environ "$tmp/$n.out")" = unchanged ] ||
      fail "$n: the process environment was replaced while the program ran"
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
edges-memop) # memsets and device copies the driver refuses from iteration 35 on (misaligned, past
  # the end, from a freed buffer, past the end of the destination): each call returns what it
  # returns eagerly, nothing is deferred that the driver refused, the buffers come out the same
  for bad in misaligned past-end freed-src copy-past-end; do
    eager "e-$bad" "$progs/conf_edges" --mode memop --bad "$bad"
    shim "s-$bad" "$progs/conf_edges" --mode memop --bad "$bad"
    same_result "e-$bad" "s-$bad"
    cmp -s "$tmp/e-$bad.out" "$tmp/s-$bad.out" ||
      fail "$bad: the program saw other results: $(diff "$tmp/e-$bad.out" "$tmp/s-$bad.out" | head -4 | tr '\n' ' ')"
    grep -q '^rc 35 ' "$tmp/e-$bad.out" || fail "$bad: the fake accepted the bad call eagerly"
    [ "$(summary "$tmp/s-$bad.jsonl" fallbacks.memop_range)" -gt 0 ] || fail "$bad: no memop_range fallback"
    [ "$(summary "$tmp/s-$bad.jsonl" graph_launches)" -gt 0 ] || fail "$bad: nothing replayed before iteration 35"
  done
  ;;
deferred-error) # deferred work whose eager submission fails (its graph's memset node refused, then
  # the memset itself): the error reaches the program at its next sync, never silence. The
  # fake's 3rd cuMemsetD32Async is the first eager submission of a deferred one (the 1st is the
  # program's own, the 2nd the graph's capture) as of this commit's learning.
  FAKECUDA_FAIL="cuGraphExecMemsetNodeSetParams:1+=1,cuMemsetD32Async:3=1" \
    shim s "$progs/conf_edges" --mode memop --at 1000
  [ "$(cat "$tmp/s.rc")" = 0 ] || fail "exited $(cat "$tmp/s.rc"): $(tail -2 "$tmp/s.err")"
  [ "$(grep -c '^rc' "$tmp/s.out")" = 1 ] && grep -q '^rc [0-9]* cuStreamSynchronize 1$' "$tmp/s.out" ||
    fail "the failed deferred memset was not returned by one sync: $(grep '^rc' "$tmp/s.out" | head -3 | tr '\n' ' ')"
  grep -q 'deferred work failed' "$tmp/s.err" || fail "nothing said on stderr"
  ;;
edges-order) # a producer on one stream sets a flag that a consumer on another spins on: submitted
  # in the program's order (the producer's deferred work first) it finishes; deferred both, or
  # the consumer forwarded as it came (CUGRAFT_SCOPE leaves it out)
  eager e "$progs/conf_edges" --mode order
  for sc in kernels,memops kernels,memops,-cg_wait_all; do
    CUGRAFT_SCOPE=$sc shim "s$sc" "$progs/conf_edges" --mode order
    [ "$(cat "$tmp/s$sc.rc")" != 124 ] || fail "scope $sc: the program hung (consumer submitted before its producer)"
    same_result e "s$sc"
  done
  [ "$(summary "$tmp/skernels,memops.jsonl" graph_launches)" -gt 0 ] || fail "nothing replayed"
  ;;
edges-blocking) # CUDA_LAUNCH_BLOCKING=1: every launch has completed when it returns, so a host
  # reading mapped memory right after it sees its write; cugraft defers nothing then, and says so
  eager e "$progs/conf_edges" --mode blocking
  CUDA_LAUNCH_BLOCKING=1 shim s "$progs/conf_edges" --mode blocking
  shim d "$progs/conf_edges" --mode blocking
  same_result e s
  [ "$(field stale "$tmp/e.out")" = 0 ] || fail "eager read $(field stale "$tmp/e.out") stale values"
  [ "$(field stale "$tmp/s.out")" = 0 ] || fail "with CUDA_LAUNCH_BLOCKING=1, $(field stale "$tmp/s.out") stale reads"
  [ "$(field stale "$tmp/d.out")" -gt 0 ] || fail "deferred launches were never read stale: the test shows nothing"
  grep -q '"startup_checks":\["CUDA_LAUNCH_BLOCKING' "$tmp/s.jsonl" || fail "the report header does not say it"
  grep -q 'CUDA_LAUNCH_BLOCKING' "$tmp/s.err" || fail "stderr does not say it"
  ;;
chain-segv|chain-term) # the program's own crash handler, installed after cugraft's, chains to it:
  # one signal record, and the death (status) the program has without cugraft
  case ${CG_SANITIZER_RT:-}:$case_name in *lib?san*:chain-segv)
    echo "skipped: the sanitizer runtime handles SIGSEGV"; exit 77 ;; esac
  eager e "$progs/conf_chain" --signal "${case_name#chain-}"
  shim s "$progs/conf_chain" --signal "${case_name#chain-}"
  want=$([ "$case_name" = chain-segv ] && echo 139 || echo 143)
  for r in e s; do [ "$(cat "$tmp/$r.rc")" = "$want" ] || fail "$r exited $(cat "$tmp/$r.rc"), want $want"; done
  [ "$(grep -c '"event":"signal"' "$tmp/s.jsonl")" = 1 ] ||
    fail "$(grep -c '"event":"signal"' "$tmp/s.jsonl") signal records, want 1"
  [ "$(grep -c 'crash reporter called' "$tmp/s.err")" = 1 ] || fail "the program's handler ran $(grep -c 'crash reporter called' "$tmp/s.err") times"
  cmp -s "$tmp/e.out" "$tmp/s.out" || fail "the program printed something else"
  ;;
option-ends) # both ends of every integer option's range (shim/options.def), on programs with a
  # launch of an unproven shape (alike), every launch form (fourway) and changing shapes
  # (conf_shapes): the same results as eager
  def=$(dirname "$0")/../../shim/options.def
  ends=$(awk -F, '/^X\(/ && $3 ~ /INT/ { gsub(/[" ]/, "", $2); gsub(/ /, "", $5); gsub(/ /, "", $6);
                   print $2 "=" $5; print $2 "=" $6 }' "$def")
  [ -n "$ends" ] || fail "no integer option found in $def"
  for p in alike "fourway --iters 12" conf_shapes; do
    eager "e-${p%% *}" $progs/$p
    for kv in $ends; do
      (export "$kv"; shim "s-${p%% *}-$kv" $progs/$p)
      same_result "e-${p%% *}" "s-${p%% *}-$kv"
    done
  done
  ;;
dlsym-absent) # a process that has not loaded libcuda looks driver functions up with
  # RTLD_DEFAULT (to learn whether CUDA is there): the answers cugraft's exports would give are
  # not given; once the program loads libcuda, they are
  eager e "$progs/dlprobe"
  shim s "$progs/dlprobe"
  same_result e s
  cmp -s "$tmp/e.out" "$tmp/s.out" || fail "answers differ: $(diff "$tmp/e.out" "$tmp/s.out" | head -4 | tr '\n' ' ')"
  grep -q '^before 0$' "$tmp/s.out" || fail "a driver function was found before libcuda was loaded"
  ;;
graph-memory) # the device memory graphs hold (the fake takes 64 KiB and 256 bytes a node from
  # what cuMemGetInfo reports free, per instantiated graph) is in the summary
  shim s "$progs/fourway" --iters 40
  built=$(summary "$tmp/s.jsonl" graphs_built)
  [ "$built" -gt 0 ] || fail "no graph built"
  peak=$(summary "$tmp/s.jsonl" graph_memory_peak_bytes)
  [ "$peak" -ge 65536 ] || fail "graph_memory_peak_bytes $peak with $built graphs built"
  cmd=$(dirname "$progs")/../tools/cugraft
  if [ -x "$cmd" ]; then
    "$cmd" report "$tmp/s.jsonl" | grep -q '^  memory .* MiB of device memory' ||
      fail "cugraft report does not say what the graphs held"
  fi
  ;;
alike) # two chunks of a step that begin with the same kernel, the first step's first launch of
  # an unproven shape: each chunk is learned at its first sighting, and its second, held as it
  # comes for whichever of the two chunks was learned last, runs as its graph: every op from the
  # second step on replays (all but the 2 ops before the loop and the first step's 17); a
  # deferral budget of a second, so that a slow machine's flusher never releases a hold
  eager e "$progs/alike"
  CUGRAFT_MAX_DEFER_US=1000000 shim s "$progs/alike"
  same_result e s; same_work e s
  ops=$(summary "$tmp/s.jsonl" ops) replayed=$(summary "$tmp/s.jsonl" ops_replayed)
  [ "$ops" -gt 19 ] && [ "$replayed" = $((ops - 19)) ] ||
    fail "replayed $replayed of $ops ops, want $((ops - 19)) (fallbacks: $(grep -o '"fallbacks":{[^}]*}' "$tmp/s.jsonl" | tail -1))"
  [ "$(summary "$tmp/s.jsonl" divergences)" = 0 ] || fail "$(summary "$tmp/s.jsonl" divergences) divergences"
  ;;
boundary-counts) # the report counts every boundary call the program made, those forwarded
  # while every stream was settled (boundary.c) as those that took the full path: per entry
  # point and per kind, equal to the calls the fake saw without the shim (conf_events records
  # events on settled and on unsettled streams; threads does from 8 threads; lifecycle launches
  # its own graph)
  for p in conf_events threads; do
    eager e "$progs/$p"
    shim s "$progs/$p"
    same_result e s
    for ep in cuEventRecord cuStreamWaitEvent cuStreamSynchronize; do
      want=$(stat "api.$ep" "$tmp/e.stats")
      [ "$(summary "$tmp/s.jsonl" "entry_points.$ep")" = "${want:-0}" ] ||
        fail "$p: $ep counted $(summary "$tmp/s.jsonl" "entry_points.$ep"), the program made ${want:-0}"
    done
    rec=$(stat api.cuEventRecord "$tmp/e.stats") wait=$(stat api.cuStreamWaitEvent "$tmp/e.stats")
    want=$(( ${rec:-0} + ${wait:-0} ))
    [ "$(summary "$tmp/s.jsonl" boundaries.event)" = "$want" ] ||
      fail "$p: $(summary "$tmp/s.jsonl" boundaries.event) event boundaries counted, the program made $want"
  done
  # the program's own graph launched 10 times on a settled stream (a hook, not a boundary wrapper)
  eager e "$progs/lifecycle" --mode capture
  shim s "$progs/lifecycle" --mode capture
  same_result e s
  want=$(stat api.cuGraphLaunch "$tmp/e.stats")
  [ "$(summary "$tmp/s.jsonl" entry_points.cuGraphLaunch)" = "${want:-0}" ] ||
    fail "capture: cuGraphLaunch counted $(summary "$tmp/s.jsonl" entry_points.cuGraphLaunch), the program made ${want:-0}"
  want=$(( want + $(stat api.cuStreamBeginCapture_v2 "$tmp/e.stats") ))
  [ "$(summary "$tmp/s.jsonl" boundaries.capture)" = "$want" ] ||
    fail "capture: $(summary "$tmp/s.jsonl" boundaries.capture) capture boundaries counted, the program made $want"
  ;;
conf-grow|conf-grow-block|conf-grow-cluster) # launch shapes that change every iteration (a
  # decoding loop's growing grid; block and shared memory; clusters) are patched into the graphs:
  # replayed after warmup, every launch run with its own shape (same_work), no divergence
  args=; case $case_name in *-block) args=--block ;; *-cluster) args=--cluster ;; esac
  eager e "$progs/conf_grow" $args
  shim s "$progs/conf_grow" $args
  same_result e s; same_work e s
  r=$(field refused "$tmp/e.out")
  [ -n "$r" ] && [ "$r" != 0 ] && [ "$r" = "$(field refused "$tmp/s.out")" ] ||
    fail "a launch the driver refuses returned $(field refused "$tmp/s.out") under the shim, $r without"
  ops=$(summary "$tmp/s.jsonl" ops) replayed=$(summary "$tmp/s.jsonl" ops_replayed)
  [ "$ops" -gt 0 ] && [ $((replayed * 100)) -ge $((ops * 95)) ] ||
    fail "replayed $replayed of $ops ops, want 95% (fallbacks: $(grep -o '"fallbacks":{[^}]*}' "$tmp/s.jsonl" | tail -1))"
  [ "$(summary "$tmp/s.jsonl" divergences)" = 0 ] || fail "$(summary "$tmp/s.jsonl" divergences) divergences"
  [ "$(summary "$tmp/s.jsonl" patches)" -ge 190 ] || fail "$(summary "$tmp/s.jsonl" patches) patches, want one per token"
  [ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
    fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
  ;;
conf-grow-limit|conf-grow-limit-kernel) # a shape only cg_grid_sum refuses (1024 threads of its
  # 512; 56 KiB of shared memory before its attribute is raised and after it is lowered again),
  # once its loop is replayed: the same calls fail with the same errors as without the shim,
  # and no refused launch runs; the rest is still replayed (a refused launch learned into a
  # chunk would fail its graph's build every time: 75% replayed)
  args=--limit; [ "$case_name" = conf-grow-limit-kernel ] && args="--limit --kernel"
  eager e "$progs/conf_grow" $args
  shim s "$progs/conf_grow" $args
  same_result e s; same_work e s
  [ "$(grep -c '^limit ' "$tmp/e.out")" -ge 12 ] || fail "eager: $(grep -c '^limit ' "$tmp/e.out") refused launches, want 12"
  cmp -s <(grep '^limit ' "$tmp/e.out") <(grep '^limit ' "$tmp/s.out") ||
    fail "refused launches (token result) differ: eager $(grep '^limit ' "$tmp/e.out" | tr '\n' ' '); shim $(grep '^limit ' "$tmp/s.out" | tr '\n' ' ')"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 100 ] || fail "$(summary "$tmp/s.jsonl" graph_launches) graph launches, want the loop replayed"
  ops=$(summary "$tmp/s.jsonl" ops) replayed=$(summary "$tmp/s.jsonl" ops_replayed)
  [ "$ops" -gt 0 ] && [ $((replayed * 100)) -ge $((ops * 95)) ] ||
    fail "replayed $replayed of $ops ops, want 95% (fallbacks: $(grep -o '"fallbacks":{[^}]*}' "$tmp/s.jsonl" | tail -1))"
  [ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
    fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
  ;;
conf-fork) # fork() with deferred work: the child (exit(0), atexit handlers) calls no driver entry
           # point and writes nothing into the parent's report; the parent still replays
  # a 10 s deferral bound: the parent's flusher cannot submit while the child runs, so every
  # call logged between the program's two cuCtxGetDevice markers is the child's
  LOGRUN=1 eager e "$progs/conf_fork"
  LOGRUN=1 CUGRAFT_MAX_DEFER_US=10000000 shim s "$progs/conf_fork"
  same_result e s; same_work e s
  c=$(field child "$tmp/e.out")
  [ -n "$c" ] && [ "$c" = "$(field child "$tmp/s.out")" ] || fail "child printed '$(field child "$tmp/s.out")', eager '$c'"
  for r in e s; do
    [ "$(grep -c '^cuCtxGetDevice$' "$tmp/$r.log")" = 2 ] || fail "$r: want 2 cuCtxGetDevice markers in the log"
    calls=$(awk '/^cuCtxGetDevice$/ { m++; next } m == 1' "$tmp/$r.log" | sort | uniq -c | tr -s ' \n' ' ')
    [ -z "$calls" ] || fail "$r: driver calls from the child:$calls"
  done
  python3 -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    n += json.loads(l).get("event") == "summary"
sys.exit(n != 1)' "$tmp/s.jsonl" || fail "the report is not JSON lines with exactly one summary"
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  ;;
conf-crash) # abort() with launches in flight: the same death and checksum lines, a readable report
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
  ;;
coll|coll-group|coll-ranks|coll-diverge|coll-stall|coll-hostile) # CUGRAFT_SCOPE=+collectives: the vote
  # (shim/VOTE.md). The fake NCCL moves its data in a host function on the stream, which the fake
  # driver captures as a host node: a graphed collective moves its data at each graph launch.
  export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH CUGRAFT_SCOPE=+collectives
  # ranks NAME ARGS...: ncclloop --ranks under the shim, one report per rank ($tmp/NAME.R.jsonl)
  ranks() { local n=$1; shift
    CUGRAFT_REPORT=$tmp/$n.%r.jsonl LD_PRELOAD=$rt$lib timeout 60 "$progs/ncclloop" "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"
    echo $? > "$tmp/$n.rc"; }
  eranks() { local n=$1; shift
    timeout 60 "$progs/ncclloop" "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"; echo $? > "$tmp/$n.rc"; }
  rsum() { awk -v r="$2" '$1 == "rank" && $2 == r && $3 == "checksum" { print $4 }' "$tmp/$1.out"; }
  votes() { grep '"event":"vote"' "$1" | python3 -c '
import json, sys
for l in sys.stdin:
    v = json.loads(l); print(v["vote"], v["outcome"], v["reason"])'; }
  case $case_name in
  coll) # one rank: exact; NCCL's launches pass through; graphed after warmup, every vote agreed
    FAKENCCL_STATS=$tmp/e.nccl eager e "$progs/ncclloop" --iters 40
    FAKENCCL_STATS=$tmp/s.nccl shim s "$progs/ncclloop" --iters 40
    same_result e s
    # warmup 2: call 1 eager, call 2 captured (plus its second vote, "graph ready"), 3-40 replay
    votes_held=41 graphed=39
    # every program kernel ran once, plus NCCL's own kernel in each vote
    [ "$(stat kernels_run "$tmp/s.stats")" = $(( $(stat kernels_run "$tmp/e.stats") + votes_held )) ] ||
      fail "kernels run: eager $(stat kernels_run "$tmp/e.stats"), shim $(stat kernels_run "$tmp/s.stats") (want +$votes_held)"
    [ "$(summary "$tmp/s.jsonl" launches)" = "$(field launches "$tmp/e.out")" ] ||
      fail "shim counted $(summary "$tmp/s.jsonl" launches) launches, the program made $(field launches "$tmp/e.out")"
    [ "$(summary "$tmp/s.jsonl" collectives.ncclAllReduce)" = 40 ] || fail "the vote's all-reduces were counted as the program's"
    [ -z "$(votes "$tmp/s.jsonl")" ] || fail "vote records: $(votes "$tmp/s.jsonl" | tr '\n' ,)"
    for k in collective_graphs.seen:40 collective_graphs.captured:1 votes.held:$votes_held votes.agreed:$votes_held \
             votes.declined:0 collectives_graphed:$graphed; do
      [ "$(summary "$tmp/s.jsonl" "${k%:*}")" = "${k#*:}" ] || fail "${k%:*} is $(summary "$tmp/s.jsonl" "${k%:*}"), want ${k#*:}"
    done
    # NCCL's own kernel through NCCL (uncounted): 1 eager call + 1 captured + the votes; the 39
    # replays never enter NCCL
    [ "$(stat internal_launches "$tmp/s.nccl")" = $(( 40 - graphed + 1 + votes_held )) ] ||
      fail "NCCL made $(stat internal_launches "$tmp/s.nccl") internal launches, want $(( 40 - graphed + 1 + votes_held ))"
    cmd=$(dirname "$progs")/../tools/cugraft
    if [ -x "$cmd" ]; then
      "$cmd" report "$tmp/s.jsonl" > "$tmp/report.txt" 2>&1
      grep -q "collectives $graphed of 40 in the scope launched from graphs" "$tmp/report.txt" &&
        grep -q "votes *held $votes_held · agreed $votes_held · declined 0" "$tmp/report.txt" ||
        fail "cugraft report does not show the collectives and votes: $(grep -E 'collectives|votes' "$tmp/report.txt")"
    fi
    ;;
  coll-group) # collectives inside a group stay eager: no vote at all
    eager e "$progs/ncclloop" --iters 30 --group
    shim s "$progs/ncclloop" --iters 30 --group
    same_result e s; same_work e s
    grep -q '"collective_graphs":{"seen":0,' "$tmp/s.jsonl" || fail "a collective in a group reached the vote (or no collective_graphs)"
    [ "$(summary "$tmp/s.jsonl" votes.held)" = 0 ] || fail "votes held in group mode: $(summary "$tmp/s.jsonl" votes.held)"
    ;;
  coll-ranks|coll-diverge) # 2 ranks agree on every vote (diverge: both decline the same one)
    extra= want= graphed=29
    if [ $case_name = coll-diverge ]; then
      # warmup 5: at iteration 4 rank 1's call is new (seen 1: eager) while rank 0's is due to be
      # captured: vote 5 declines on both; both reset every key and warm up again in lockstep
      # (calls 5-9 eager, call 10 captured): 21 of 30 graphed
      extra="--diverge 1:4" want="5 declined vote_declined," graphed=21
      export CUGRAFT_WARMUP=5
    fi
    eranks e --ranks 2 --iters 30 $extra
    ranks s --ranks 2 --iters 30 $extra
    for r in 0 1; do
      [ -n "$(rsum e $r)" ] && [ "$(rsum e $r)" = "$(rsum s $r)" ] || fail "rank $r: checksum $(rsum s $r), eager $(rsum e $r)"
      [ "$(votes "$tmp/s.$r.jsonl" | tr '\n' ,)" = "$want" ] || fail "rank $r votes: $(votes "$tmp/s.$r.jsonl" | tr '\n' ,)"
      [ "$(summary "$tmp/s.$r.jsonl" collective_graphs.seen)" = 30 ] || fail "rank $r: seen $(summary "$tmp/s.$r.jsonl" collective_graphs.seen)"
      [ "$(summary "$tmp/s.$r.jsonl" collectives_graphed)" = $graphed ] ||
        fail "rank $r: $(summary "$tmp/s.$r.jsonl" collectives_graphed) collectives graphed, want $graphed"
    done
    [ "$(cat "$tmp/s.rc")" = 0 ] || fail "exit $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
    ;;
  coll-stall) # rank 1's 3rd NCCL call (split, vote, vote: in its vote thread) never returns:
    # both ranks give up that vote instead of hanging, say so, and finish eagerly with the eager
    # result (rank 1's stuck vote thread is left behind). The first rank to time out aborts its
    # vote communicator, which the fake NCCL (unlike NCCL) propagates: the other rank's vote may
    # then fail just before its own deadline instead of timing out
    eranks e --ranks 2 --iters 20
    start=$(date +%s)
    CUGRAFT_VOTE_TIMEOUT_MS=1000 FAKENCCL_STALL=1:3 ranks s --ranks 2 --iters 20 --timeout 20
    took=$(( $(date +%s) - start ))
    [ "$(cat "$tmp/s.rc")" = 0 ] || fail "exit $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
    [ "$took" -le 10 ] || fail "took $took s with a 1 s vote timeout (the parent waits 20 s)"
    grep -q 'rank 1 stalls at collective call 3' "$tmp/s.err" || fail "rank 1 did not stall"
    for r in 0 1; do
      [ -n "$(rsum e $r)" ] && [ "$(rsum e $r)" = "$(rsum s $r)" ] || fail "rank $r: checksum $(rsum s $r), eager $(rsum e $r)"
      case "$(votes "$tmp/s.$r.jsonl" | tr '\n' ,)" in
      "2 timeout vote_timeout,") timeouts=$(( ${timeouts:-0} + 1 ))
        grep -q '"off":"vote_timeout"' "$tmp/s.$r.jsonl" || fail "rank $r did not switch the communicator off" ;;
      "2 failed vote_unavailable,")
        grep -q '"off":"vote_unavailable"' "$tmp/s.$r.jsonl" || fail "rank $r did not switch the communicator off" ;;
      *) fail "rank $r votes: $(votes "$tmp/s.$r.jsonl" | tr '\n' ,)" ;;
      esac
      t=$(grep '"event":"vote"' "$tmp/s.$r.jsonl" | python3 -c 'import json,sys; print(int(json.loads(sys.stdin.readline())["t"] * 1000))')
      [ "$t" -ge 1000 ] && [ "$t" -le 4000 ] || fail "rank $r: gave up the vote at $t ms, want about 1000"
    done
    [ "${timeouts:-0}" -ge 1 ] || fail "no rank timed out"
    ;;
  coll-hostile) # a bad CUGRAFT_VOTE_TIMEOUT_MS warns once and keeps the default; too big is clamped
    eager e "$progs/ncclloop" --iters 10
    for v in banana:30000 -5:30000 '':30000 99999999999:3600000; do
      CUGRAFT_VOTE_TIMEOUT_MS=${v%:*} shim s "$progs/ncclloop" --iters 10
      same_result e s
      [ "$(grep -c CUGRAFT_VOTE_TIMEOUT_MS "$tmp/s.err")" = 1 ] || fail "'${v%:*}': $(grep -c CUGRAFT_VOTE_TIMEOUT_MS "$tmp/s.err") warnings, want 1"
      grep -q "\"CUGRAFT_VOTE_TIMEOUT_MS\":${v#*:}," "$tmp/s.jsonl" || fail "'${v%:*}': the header does not say ${v#*:}"
    done
    ;;
  esac
  ;;
nccl-ranks) # ncclloop --ranks 2: 2 processes on the fake NCCL, default scope
  export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
  # ranks NAME [VAR=VALUE...] -- ARGS: under the shim when NAME starts with s; per rank r the
  # report $tmp/NAME.r.jsonl and NCCL's stats $tmp/NAME.r.nccl
  ranks() { local n=$1 envs=() pre=(); shift
    while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
    [ "${n#s}" = "$n" ] || pre=(LD_PRELOAD=$rt$lib CUGRAFT_REPORT=$tmp/$n.%r.jsonl)
    env "${pre[@]}" "${envs[@]}" FAKENCCL_STATS=$tmp/$n.%r.nccl timeout 90 "$progs/ncclloop" \
      --ranks 2 --iters 40 --timeout 60 "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"; echo $? > "$tmp/$n.rc"; }
  same_ranks() { # A B: both exited 0 and each rank printed the same checksum in both
    local n a b
    for n in "$1" "$2"; do
      [ "$(cat "$tmp/$n.rc")" = 0 ] || fail "$n exited $(cat "$tmp/$n.rc"): $(tail -3 "$tmp/$n.err")"; done
    a=$(awk '$3 == "checksum" { print $2, $4 }' "$tmp/$1.out" | sort)
    b=$(awk '$3 == "checksum" { print $2, $4 }' "$tmp/$2.out" | sort)
    [ "$(echo "$a" | wc -l)" = 2 ] && [ "$a" = "$b" ] || fail "checksums: $1: $a; $2: $b"
  }
  case $case_name in
  nccl-ranks) # default scope: collectives are boundaries on every rank, compute replays
    ranks e --; ranks s --; same_ranks e s
    for r in 0 1; do
      [ "$(summary "$tmp/s.$r.jsonl" collectives.ncclAllReduce)" = 40 ] || fail "rank $r: not 40 all-reduces"
      [ "$(summary "$tmp/s.$r.jsonl" graph_launches)" -gt 0 ] || fail "rank $r: no graph was launched"
      [ "$(stat internal_launches "$tmp/s.$r.nccl")" = 40 ] || fail "rank $r: NCCL's launches: $(stat internal_launches "$tmp/s.$r.nccl")"
    done ;;
  esac
  ;;
dlscope) # dlsym/dlvsym answered from the caller's scope as glibc does; only driver pointers change
  eager e "$progs/dlscope" "$progs/libdlscope_a.so"
  shim s "$progs/dlscope" "$progs/libdlscope_a.so"
  same_result e s
  for kv in a.default=b_func a.vdefault=b_func a.vdefault_wrong=none a.next=b a.vnext=b \
            main.handle=found main.vhandle=same main.default=none \
            cuda.dlsym=libcuda cuda.dlvsym=same cuda.vdefault=same; do
    [ "$(field "${kv%%=*}" "$tmp/e.out")" = "${kv#*=}" ] || fail "without the shim ${kv%%=*} is $(field "${kv%%=*}" "$tmp/e.out")"
  done
  diff <(grep -v '^cuda\.' "$tmp/e.out") <(grep -v '^cuda\.' "$tmp/s.out") > "$tmp/diff" ||
    fail "lookups answered differently under the shim: $(tr '\n' ' ' < "$tmp/diff")"
  # the driver's function is handed out as the wrapper, through dlsym and dlvsym alike
  for kv in cuda.dlsym=elsewhere cuda.dlvsym=same cuda.vdefault=same; do
    [ "$(field "${kv%%=*}" "$tmp/s.out")" = "${kv#*=}" ] || fail "under the shim ${kv%%=*} is $(field "${kv%%=*}" "$tmp/s.out")"
  done
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
[ $status = 0 ] && echo "ok [$case_name]"
exit $status
