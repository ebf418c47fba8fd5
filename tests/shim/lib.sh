# Helpers of the shim test cases (cases/*.sh), sourced by run-case.sh after it has set
# case_name, lib (libcugraft.so, or a list for LD_PRELOAD), fakedir, progs (tests/programs in the
# build), here (this folder), rt (the sanitizer runtime and a colon, or nothing), tmp (a scratch
# folder, removed at exit) and status (0; fail sets it to 1; run-case.sh exits with it).
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

# conf_grow PATCHES ARGS...: the checks the conf-grow cases share. conf_grow ARGS eagerly (e) and
# under the shim (s): the same result and work, the launch the driver refuses mid-loop refused
# alike, 95% replayed with no divergence and PATCHES patches at least (the shapes, or the copy's
# size, patched every token), and every graph launch the fake ran reported.
conf_grow() {
  local patches=$1; shift
  eager e "$progs/conf_grow" "$@"
  shim s "$progs/conf_grow" "$@"
  same_result e s; same_work e s
  local r ops replayed
  r=$(field refused "$tmp/e.out")
  [ -n "$r" ] && [ "$r" != 0 ] && [ "$r" = "$(field refused "$tmp/s.out")" ] ||
    fail "a launch the driver refuses returned $(field refused "$tmp/s.out") under the shim, $r without"
  ops=$(summary "$tmp/s.jsonl" ops) replayed=$(summary "$tmp/s.jsonl" ops_replayed)
  [ "$ops" -gt 0 ] && [ $((replayed * 100)) -ge $((ops * 95)) ] ||
    fail "replayed $replayed of $ops ops, want 95% (fallbacks: $(grep -o '"fallbacks":{[^}]*}' "$tmp/s.jsonl" | tail -1))"
  [ "$(summary "$tmp/s.jsonl" divergences)" = 0 ] || fail "$(summary "$tmp/s.jsonl" divergences) divergences"
  [ "$(summary "$tmp/s.jsonl" patches)" -ge "$patches" ] ||
    fail "$(summary "$tmp/s.jsonl" patches) patches, want $patches at least"
  [ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
    fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
}

# conf_grow_limit ARGS...: the checks of the conf-grow-limit cases (conf_grow --limit ARGS): the
# same result and work, the same launches refused with the same errors (12 at least), and the
# loop still replayed (95%), every graph launch the fake ran reported.
conf_grow_limit() {
  eager e "$progs/conf_grow" --limit "$@"
  shim s "$progs/conf_grow" --limit "$@"
  same_result e s; same_work e s
  [ "$(grep -c '^limit ' "$tmp/e.out")" -ge 12 ] || fail "eager: $(grep -c '^limit ' "$tmp/e.out") refused launches, want 12"
  cmp -s <(grep '^limit ' "$tmp/e.out") <(grep '^limit ' "$tmp/s.out") ||
    fail "refused launches (token result) differ: eager $(grep '^limit ' "$tmp/e.out" | tr '\n' ' '); shim $(grep '^limit ' "$tmp/s.out" | tr '\n' ' ')"
  # (a refused launch learned into a chunk would fail its graph's build every time: 75% replayed)
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 100 ] || fail "$(summary "$tmp/s.jsonl" graph_launches) graph launches, want the loop replayed"
  local ops replayed
  ops=$(summary "$tmp/s.jsonl" ops) replayed=$(summary "$tmp/s.jsonl" ops_replayed)
  [ "$ops" -gt 0 ] && [ $((replayed * 100)) -ge $((ops * 95)) ] ||
    fail "replayed $replayed of $ops ops, want 95% (fallbacks: $(grep -o '"fallbacks":{[^}]*}' "$tmp/s.jsonl" | tail -1))"
  [ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
    fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
}

# nccl_loop ARGS...: one rank of ncclloop --iters 40 ARGS on the fake NCCL, eagerly and under the
# shim: the same result and work, every launch of the program counted, the 40 all-reduces counted
# as collectives, graphs launched in between, and NCCL's own 40 launches passed through uncounted.
nccl_loop() {
  export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
  FAKENCCL_STATS=$tmp/e.nccl eager e "$progs/ncclloop" --iters 40 "$@"
  FAKENCCL_STATS=$tmp/s.nccl shim s "$progs/ncclloop" --iters 40 "$@"
  same_result e s; same_work e s
  local launches r
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
}

# controlled SPIN WANT ITERS: the control cases' shared checks. fourway --iters ITERS eagerly and
# under the shim with the deferral controller on and the fake's eager and graph launches made to
# cost SPIN (FAKECUDA_SPIN_NS): the same result and work, a decision in the report whose first
# verdict is WANT (graphs or eager), and the summary's controller in that mode with a decision.
controlled() {
  local spin=$1 want=$2 iters=$3 first mode
  export CUGRAFT_MEASURE=1
  eager e "$progs/fourway" --iters "$iters"
  FAKECUDA_SPIN_NS=$spin shim s "$progs/fourway" --iters "$iters"
  same_result e s; same_work e s
  grep -q '"event":"decision"' "$tmp/s.jsonl" || fail "no controller decision in the report"
  first=$(grep -m1 '"event":"decision"' "$tmp/s.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["decision"])')
  [ "$first" = "$want" ] || fail "first decision $first, want $want: $(grep -m1 '"event":"decision"' "$tmp/s.jsonl")"
  mode=$(summary "$tmp/s.jsonl" control.mode)
  [ "$mode" = "$want" ] || fail "the summary's control mode is '$mode', want $want"
  [ "$(summary "$tmp/s.jsonl" control.decisions)" -ge 1 ] || fail "the summary counts no decision"
}
