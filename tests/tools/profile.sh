#!/bin/sh
# `cugraft profile` on the CPU fake driver: a loop with several host syncs per iteration is
# counted by its iterations (one period of its launches and boundaries), not by its syncs, and
# computes what it computes alone; a loop replaying its own graph after a compile phase is the
# iteration, its graph's kernels counted as its launches; without CUPTI activity the GPU busy
# time is said to be unavailable, never printed as zero; a long loop of one kernel that never
# waits is measured over the later half of its launch calls; with the fake CUPTI, the GPU's idle
# time inside launch calls leaves the host's own work between syncs out of the launch-gap
# bound, which the busy bound counts, and what tracing adds to each launch call is measured and
# taken out of it; the program's exit status comes through.
# usage: profile.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1 BUILD=$3
fail() { echo "FAIL: $*"; exit 1; }
expect() { printf '%s\n' "$1" | grep -qF -- "$2" || { printf '%s\n' "$1"; fail "missing: $2"; }; }
refuse() { ! printf '%s\n' "$1" | grep -qE -- "$2" || { printf '%s\n' "$1"; fail "unexpected: $2"; }; }
PROG=$BUILD/tests/programs/syncloop
[ -x "$PROG" ] && [ -f "$BUILD/tests/fakecuda/libcuda.so.1" ] || exit 77
# (the fake CUPTI only where a case asks for it: without it, no GPU busy time)
LD_LIBRARY_PATH=$(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' '\n' | grep -v '/fakecupti$' | paste -sd: -)
LD_LIBRARY_PATH=$BUILD/tests/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH

# 5 syncs per iteration (3+4+5+6+7 launches), an input upload and a loss read each, a logging
# read every 10 iterations, set-up before and read-backs and frees after.
out=$("$CG" profile -- "$PROG" --iters 60) || fail "exit $?"
expect "$out" "launches per iteration 25"                      # the program's own count
alone=$("$PROG" --iters 60 | grep '^checksum') || fail "syncloop alone failed"
expect "$out" "$alone"                              # profiling changes nothing the program sees
expect "$out" "iteration                  25 launches and 7 boundaries, the period"
expect "$out" "the last 59 iterations measured"   # (the last one ends in other reads)
expect "$out" " · 25.0 launches · 5.0 syncs · "
expect "$out" "GPU busy                   unavailable ("
refuse "$out" "GPU busy +[0-9]|GPU busy 0"
expect "$out" "the floor                  busy bound at most "
expect "$out" "x if the GPU keeps up · launch-gap bound unknown (GPU busy time unknown)"
echo "5 syncs per iteration: 25 launches per iteration, GPU busy unavailable"

out=$("$CG" profile -- "$PROG" --iters 40 --syncs 8) || fail "exit $?"
expect "$out" "launches per iteration 52"
expect "$out" "iteration                  52 launches and 10 boundaries, the period"
expect "$out" "the last 39 iterations measured"
expect "$out" " · 52.0 launches · 8.0 syncs · "
echo "8 syncs per iteration: 52 launches per iteration"

# torch.compile(mode="reduce-overhead")'s shape: a compile phase benchmarking a kernel launches
# more than the loop makes launch calls; the loop replays a graph of 40 kernels per iteration,
# which count as its launches, and it is the iteration.
out=$("$CG" profile -- "$PROG" --iters 60 --graph) || fail "exit $?"
expect "$out" "launches per iteration 41"
alone=$("$PROG" --iters 60 --graph | grep '^checksum') || fail "syncloop --graph alone failed"
expect "$out" "$alone"
expect "$out" "iteration                  41 launches and 3 boundaries, the period"
expect "$out" "the last 60 iterations measured"
expect "$out" " · 41.0 launches (40.0 in 1.0 launches of the program's own graphs) · 1.0 syncs · "
echo "a loop replaying its own graph after a launch-heavy compile phase: 41 launches per iteration"

# A process that reaches the driver and does nothing (as PyTorch's compile workers do) writes a
# summary of zeros: it is not a process with CUDA work.
out=$("$CG" profile -- sh -c "\"$PROG\" --init-only && exec \"$PROG\" --iters 60") || fail "exit $?"
expect "$out" "processes with CUDA work   1 (and 1 that reached the driver and did no work)"
refuse "$out" "the one that launched most"
expect "$out" "the last 59 iterations measured"
echo "a process without CUDA work is not counted as one"

# Too short to repeat: figures over the run, said so.
out=$("$CG" profile -- "$PROG" --iters 2) || fail "exit $?"
expect "$out" "none found (no repeating sequence of launches and boundaries); figures over the run"
expect "$out" "over the run               "
expect "$out" " · 50 launches · "
echo "no iteration: figures over the run"

# A loop of one kernel with no boundary, its results read after it: the reads repeat, but they
# are not the iteration (they launch nothing), and 600 launches of one kernel are one event;
# figures over the run instead.
out=$("$CG" profile -- "$PROG" --iters 60 --nosync) || fail "exit $?"
expect "$out" "none found (no repeating sequence of launches and boundaries); figures over the run"
expect "$out" " · 600 launches · "
refuse "$out" "0.0 launches"
echo "a loop without boundaries: no iteration made of its trailing reads"

# The same loop long enough (20000 launch calls): the figures come from the later half of the
# run's launch calls, from the first snapshot of the counters (one per 4096 calls) at or past
# half of them, so that start-up is left out of the floor.
out=$("$CG" profile -- "$PROG" --iters 2000 --nosync) || fail "exit $?"
expect "$out" "none found (no repeating sequence of launches and boundaries); figures over the later half of the run's launch calls (start-up left out)"
expect "$out" "over the later half        "
expect "$out" " · 7712 launches · 0 syncs · "
expect "$out" "the floor                  busy bound at most "
echo "a long loop without boundaries: figures over the later half of its launch calls"

# The two bounds, against the fake driver's simulated device (FAKECUDA_GPU_NS per op, each
# launch call spending FAKECUDA_SPIN_NS on the host first) as the fake CUPTI reports it.
# figure LABEL: that line's first time, in us.
figure() {
  printf '%s\n' "$out" | awk -v l="$1" 'index($0, l) == 3 {
    for (i = 1; i <= NF; i++) if ($(i + 1) == "us" || $(i + 1) == "ms") {
      print ($(i + 1) == "ms" ? $i * 1000 : $i); exit } }'
}
bound() { printf '%s\n' "$out" | sed -n "s/.*$1 at most \([0-9.]*\)x.*/\1/p"; }
if [ -f "$BUILD/tests/fakecupti/libcupti.so.13" ]; then
  # The C trainer's case: a step whose GPU is busy while the host launches (100 us a launch
  # call, 200 us a kernel), and 100 us of host work after each of its 5 syncs. The GPU's idle
  # time is that work and the first launch call after each sync: the busy bound (the GPU busy
  # time's on a quiet machine) counts all of it as removable; the launch-gap bound leaves the
  # work out. (A loaded machine stretches the host's spins: the figures move, not that.)
  out=$(LD_LIBRARY_PATH=$BUILD/tests/fakecupti:$LD_LIBRARY_PATH FAKECUDA_SPIN_NS=100000 \
        FAKECUDA_GPU_NS=200000 "$CG" profile -- "$PROG" --iters 20 --host-us 100) || fail "exit $?"
  expect "$out" "iteration                  25 launches and 7 boundaries, the period"
  expect "$out" "GPU idle in launch calls   "
  w=$(figure "per iteration") b=$(figure "GPU busy") g=$(figure "GPU idle in launch calls")
  busy=$(bound "busy bound") gap=$(bound "launch-gap bound")
  [ -n "$w" ] && [ -n "$b" ] && [ -n "$g" ] && [ -n "$busy" ] && [ -n "$gap" ] || { printf '%s\n' "$out"; fail "figures missing"; }
  awk -v w="$w" -v b="$b" -v g="$g" -v busy="$busy" -v gap="$gap" 'BEGIN {
    exit !(b > 5000 && w - b - g >= 250 && gap < busy) }' ||
    { printf '%s\n' "$out"; fail "idle in launch calls $g us of $w - $b us idle; bounds $busy and $gap"; }
  echo "host work between syncs: GPU idle $w - $b us, $g us of it in launch calls; bounds ${busy}x (busy) and ${gap}x (launch-gap)"

  # A step starved by its launch calls (1 us kernels): the GPU waits through most of them, and
  # the launch-gap bound nearly reaches the busy bound.
  out=$(LD_LIBRARY_PATH=$BUILD/tests/fakecupti:$LD_LIBRARY_PATH FAKECUDA_SPIN_NS=20000 \
        FAKECUDA_GPU_NS=1000 "$CG" profile -- "$PROG" --iters 30) || fail "exit $?"
  h=$(printf '%s\n' "$out" | awk '/^  per iteration / && / in launch calls$/ {
    print ($(NF - 3) == "ms" ? $(NF - 4) * 1000 : $(NF - 4)) }')
  g=$(figure "GPU idle in launch calls") gap=$(bound "launch-gap bound")
  [ -n "$h" ] && [ -n "$g" ] && [ -n "$gap" ] || { printf '%s\n' "$out"; fail "figures missing"; }
  awk -v h="$h" -v g="$g" -v gap="$gap" 'BEGIN { exit !(g * 2 > h && gap > 2) }' ||
    { printf '%s\n' "$out"; fail "idle in launch calls $g us of $h us; launch-gap bound $gap"; }
  echo "launch-starved: GPU idle in launch calls $g us of $h us, launch-gap bound ${gap}x"

  # Too short a run to time launch calls untraced (under 2,816 of them) says so.
  expect "$out" "each launch call is unknown (not measured: the run made too few launch calls): the figures and bounds include it"

  # The same step, long enough, where recording kernels adds nothing, then 40 us to each launch
  # call (2.2-2.5 us in a PyTorch decoding loop on an H100): the blocks of launch calls timed
  # with records paused measure it (nothing, then 40 us), and the GPU's idle time inside launch
  # calls without it is less by that much on each of an iteration's 25 calls, through all of
  # which the GPU waits. (A loaded machine stretches the two runs' spins unequally: each run is
  # checked against itself, not against the other.)
  added() { printf '%s\n' "$out" | sed -n 's/.*records added \([0-9.]*\) us to each launch call.*/\1/p'; }
  out=$(LD_LIBRARY_PATH=$BUILD/tests/fakecupti:$LD_LIBRARY_PATH FAKECUDA_SPIN_NS=20000 \
        FAKECUDA_GPU_NS=1000 "$CG" profile -- "$PROG" --iters 150) || fail "exit $?"
  plain=$(figure "GPU idle in launch calls") none=$(added)
  out=$(LD_LIBRARY_PATH=$BUILD/tests/fakecupti:$LD_LIBRARY_PATH FAKECUDA_SPIN_NS=20000 \
        FAKECUPTI_LAUNCH_NS=40000 FAKECUDA_GPU_NS=1000 "$CG" profile -- "$PROG" --iters 150) ||
    fail "exit $?"
  g=$(figure "GPU idle in launch calls") gap=$(bound "launch-gap bound") d=$(added)
  without=$(printf '%s\n' "$out" | sed -n 's/.*without them, GPU idle in launch calls \([0-9.]*\) \(u\|m\)s.*/\1 \2/p' |
            awk '{ print $2 == "m" ? $1 * 1000 : $1 }')
  traced=$(printf '%s\n' "$out" | sed -n 's/.*(as traced: \([0-9.]*\)x).*/\1/p')
  [ -n "$plain" ] && [ -n "$none" ] && [ -n "$g" ] && [ -n "$d" ] && [ -n "$without" ] &&
    [ -n "$gap" ] && [ -n "$traced" ] || { printf '%s\n' "$out"; fail "figures missing"; }
  awk -v p="$plain" -v z="$none" -v g="$g" -v d="$d" -v u="$without" -v gap="$gap" -v t="$traced" 'BEGIN {
    exit !(z < 5 && d >= 30 && d <= 60 && u > 0 && g - u >= 0.8 * 25 * d && gap < t) }' ||
    { printf '%s\n' "$out"; fail "tracing added $none us, then $d us a call: idle $g us traced, $without without (untraced run: $plain); bounds $gap and $traced as traced"; }
  expect "$out" "both without the kernel records' cost"
  echo "tracing's cost: $none us a call, then $d; GPU idle in launch calls $g us traced, $without us without it (untraced run: $plain us); launch-gap bound ${gap}x (${traced}x as traced)"
fi

out=$("$CG" profile -- sh -c 'exit 3'); rc=$?
[ "$rc" -eq 3 ] || fail "exit status 3 came back as $rc"
expect "$out" "no summary was written"
echo "exit status and a program without CUDA"
# The user's CUGRAFT_DISABLE=1 does not turn the profile off; an unknown option before the command
# is refused (exit 2), not run as the command; a command not found says only that (exit 127).
out=$(CUGRAFT_DISABLE=1 "$CG" profile -- "$PROG" --iters 30) || fail "exit $? with CUGRAFT_DISABLE=1"
expect "$out" "iteration                  25 launches and 7 boundaries"
err=$("$CG" profile --bogus -- true 2>&1); rc=$?
[ "$rc" -eq 2 ] && printf '%s\n' "$err" | grep -q "unknown option --bogus" || fail "profile --bogus: exit $rc: $err"
err=$("$CG" profile -- /nonexistent/program 2>&1); rc=$?
[ "$rc" -eq 127 ] || fail "profile of a missing command exited $rc"
refuse "$err" "cugraft profile \\(record-only|did not use CUDA"
echo "disabled by the user, profiled all the same; --bogus refused; a missing command exits 127"

