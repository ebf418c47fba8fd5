#!/bin/bash
# Stress of the shim on the CPU fake driver, on demand (not part of `meson test`): what a review
# runs before it trusts a change. Bounded in count and time; exit 1 on any failure, with a table.
#
#   tests/stress/shim-stress.sh BUILD_DIR [--rounds N] [--jobs J] [--max-seconds S]
#
# - load: the shim tests that involve threads, timeouts and forks (threads, spin, fork-start,
#   flusher-idle, control-*, ...), each run N times while J copies run at once, so that the
#   machine is loaded and scheduling varies;
# - forks: a program that forks with deferred work pending (conf_fork), N times;
# - options: every CUGRAFT_* variable set to each of a list of hostile values: the job must give
#   the eager result, warn once about the variable and never crash or hang.
# Each run is killed after 60 s (a hang). Build with -Db_sanitize=address,undefined or =thread
# to run the same under a sanitizer.
set -u
build=$(cd "${1:?usage: shim-stress.sh BUILD_DIR [--rounds N] [--jobs J] [--max-seconds S]}" && pwd)
shift
rounds=20 jobs=4 max_s=1200
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --max-seconds) max_s=$2; shift 2 ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
lib=$build/shim/libcugraft.so fake=$build/tests/fakecuda progs=$build/tests/programs
for f in "$lib" "$progs/fourway" "$progs/conf_fork"; do
  [ -e "$f" ] || { echo "missing $f: build first (meson compile -C $build)"; exit 2; }
done
export LD_LIBRARY_PATH=$fake:$progs:$build/tests/faultalloc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# A sanitized build: its runtime first in LD_PRELOAD, as tests/meson.build's setup does for
# `meson test`. Behind an instrumented preloaded library it is not yet initialised when the
# loader calls that library during the runtime's own start-up (libfaultalloc.so's malloc under
# TSan: SIGSEGV in __tsan_func_entry, from _dl_exception_create_format in __tsan::Initialize).
# Thread leaks stay reported (no report_thread_leaks=0 here); ASan's leak check is off as there
# (the programs exit without destroying their driver objects).
rt=$(ldd "$lib" | awk '$1 ~ /^lib[at]san\.so/ { at = $3 } $1 ~ /^libubsan\.so/ { ub = $3 }
                      END { print at ? at : ub }')
if [ -n "$rt" ]; then
  export CG_SANITIZER_RT=$rt
  export ASAN_OPTIONS=${ASAN_OPTIONS-detect_leaks=0:verify_asan_link_order=0:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS-halt_on_error=1:print_stacktrace=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS-halt_on_error=1:second_deadlock_stack=1}
fi
preload=${rt:+$rt:}$lib
export FAULTALLOC_LIB=$build/tests/faultalloc/libfaultalloc.so
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
end=$(( $(date +%s) + max_s ))
declare -A tried failed hung
tally() { tried[$1]=$(( ${tried[$1]:-0} + 1 )); }

# load: the threaded and timing-dependent shim cases, J at a time
cases="threads threads-ptds spin spin-ptds ptds-threads fork-start flusher-idle slow-start thread-exit control-win control-lose"
run_case() { # CASE N: one run of the shim test script; its status in $tmp/load.CASE.N
  timeout 120 "$root/tests/shim/run-case.sh" "$1" "$lib" "$fake" "$progs" > "$tmp/load.$1.$2.out" 2>&1
  echo $? > "$tmp/load.$1.$2.rc"
}
for ((r = 1; r <= rounds && $(date +%s) < end; r++)); do
  for c in $cases; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    run_case "$c" "$r" &
  done
done
wait
for f in "$tmp"/load.*.rc; do
  [ -e "$f" ] || continue
  tally load
  rc=$(cat "$f")
  case $rc in
    0|77) ;;
    124) hung[load]=$(( ${hung[load]:-0} + 1 )); echo "hang: $(basename "$f" .rc)" ;;
    *) failed[load]=$(( ${failed[load]:-0} + 1 ))
       echo "fail: $(basename "$f" .rc): $(grep -m1 FAIL "${f%.rc}.out")" ;;
  esac
done

# forks: deferred work pending at fork(); parent and child results must be the eager ones
want=$(timeout 60 "$progs/conf_fork" 2>/dev/null | grep checksum)
for ((r = 1; r <= rounds && $(date +%s) < end; r++)); do
  tally forks
  out=$(CUGRAFT_MAX_DEFER_US=10000000 LD_PRELOAD=$preload timeout 60 "$progs/conf_fork" 2>"$tmp/fork.err")
  rc=$?
  if [ $rc = 124 ]; then hung[forks]=$(( ${hung[forks]:-0} + 1 )); echo "hang: conf_fork round $r"
  elif [ $rc != 0 ] || [ "$(grep checksum <<<"$out")" != "$want" ]; then
    failed[forks]=$(( ${failed[forks]:-0} + 1 )); echo "fail: conf_fork round $r (exit $rc)"
  fi
done

# options: hostile values for every variable
want=$(timeout 60 "$progs/fourway" --iters 10 2>/dev/null | grep checksum)
vars=$(grep -o '"CUGRAFT_[A-Z_]*"' "$root/shim/base/options.def" | tr -d '"')
values=('' ' ' '-1' '0x10' '1e99' '99999999999999999999999' '-9223372036854775808' 'nan'
        'yes please' $'1\n2' '%n%n%s' '../../../etc/passwd' 'K' '3M' '1G' '0' '1' 'on' 'OFF'
        'kernels,,' '+' '-' 'streams=' 'streams=0xffffffffffffffffff' '+[' '-*' 'collectives')
for v in $vars; do
  [ "$v" = CUGRAFT_REPORT ] && continue  # report paths: tests/tools/report-path.sh
  for val in "${values[@]}"; do
    [ "$(date +%s)" -lt "$end" ] || break 2
    tally options
    out=$(env "$v=$val" LD_PRELOAD=$preload timeout 60 "$progs/fourway" --iters 10 2>"$tmp/opt.err")
    rc=$?
    if [ $rc = 124 ]; then hung[options]=$(( ${hung[options]:-0} + 1 )); echo "hang: $v='$val'"
    elif [ $rc != 0 ] || [ "$(grep checksum <<<"$out")" != "$want" ]; then
      failed[options]=$(( ${failed[options]:-0} + 1 )); echo "fail: $v='$val' (exit $rc)"
    elif [ "$(grep -c "$v" "$tmp/opt.err")" -gt 1 ]; then
      failed[options]=$(( ${failed[options]:-0} + 1 )); echo "fail: $v='$val' warned more than once"
    fi
  done
done

status=0
printf '%-8s %7s %7s %7s\n' check tried failed hangs
for k in load forks options; do
  printf '%-8s %7s %7s %7s\n' $k "${tried[$k]:-0}" "${failed[$k]:-0}" "${hung[$k]:-0}"
  [ "${failed[$k]:-0}" = 0 ] && [ "${hung[$k]:-0}" = 0 ] || status=1
done
[ "$(date +%s)" -lt "$end" ] || echo "(stopped at --max-seconds $max_s: some rounds not run)"
exit $status
