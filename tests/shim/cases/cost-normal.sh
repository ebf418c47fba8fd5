# graphs faster than eager: chunks are timed a few times, then replay with ever fewer event calls
# (only the chunks the host waits for right after are timed again, at their launches 32, 48, 72,
# ...: their work may grow): the last quarter of a long run makes under an eighth of the first
# quarter's; nothing gated. (Eager samples taken from learning
# sightings are policy_engine's tests: here chunks are mostly armed from the loop's sightings,
# with no learning sighting between, so whether one comes depends on where op hashes fall.)

export CUGRAFT_MAX_DEFER_US=10000000 CUGRAFT_WARMUP=3
eager e "$progs/fourway" --iters 320
LOGRUN=1 shim s "$progs/fourway" --iters 320
same_result e s; same_work e s
! grep -q cost_gate "$tmp/s.jsonl" || fail "a chunk was gated although its graph is faster"
[ "$(stat api.cuEventElapsedTime_v2 "$tmp/s.stats")" -gt 0 ] || fail "no timing sample was read"
[ "$(in_second_half '^cuGraphLaunch' "$tmp/s.log")" -gt 0 ] || fail "replay did not go on in the second half"
timing='^cuEvent(Record|Query|ElapsedTime)'  # (the events are destroyed at exit)
read -r first last < <(awk -v re="$timing" '/^run/ { runs++ } $1 ~ re { at[n++] = runs }
  END { for (i = 0; i < n; i++) { k = int(4 * at[i] / runs); q[k > 3 ? 3 : k]++ }
        print q[0] + 0, q[3] + 0 }' "$tmp/s.log")
[ "$first" -gt 0 ] && [ $((last * 8)) -lt "$first" ] ||
  fail "timing does not thin out: $first event calls in the first quarter of the run, $last in the last"
