# the deferred ops that ran eagerly after all (conf_shapes diverges in its last step and in its
# logging steps) and their driver time, every one: with each eager kernel launch made to take
# 20 us in the fake, about 20 us an op; of it, what the program's launch calls spent on them
# (sampled) is apart from cugraft's own work; recording only, nothing is deferred

eager e "$progs/conf_shapes"
FAKECUDA_SPIN_NS=20000 CUGRAFT_MEASURE=0 shim s "$progs/conf_shapes"
same_result e s; same_work e s
python3 - "$tmp/s.jsonl" <<'PY' || fail "flush_us does not hold the driver's time of the deferred ops run eagerly"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
ops, us = s.get("flush_ops", -1), s.get("flush_us", -1)
lops, lus = s.get("launch_flush_ops", -1), s.get("launch_flush_us", -1)
print("%d divergences; %d deferred ops ran eagerly, %.0f us; in the sampled launch calls %d, "
      "%.0f us" % (s["divergences"], ops, us, lops, lus))
parts = s["launch_forward_us"] + s["launch_replay_us"] + lus
sys.exit(0 if s["divergences"] > 0 and ops > 0 and 0.8 * 20 * ops <= us <= 3 * 20 * ops and
         lops >= 0 and lus >= 0 and (lops == 0) == (lus == 0) and parts <= s["launch_call_us"]
         else 1)
PY
cmd=$(dirname "$progs")/../tools/cugraft
if [ -x "$cmd" ]; then
  "$cmd" report "$tmp/s.jsonl" | grep -q "^ *[0-9]* deferred ops ran eagerly after all (divergences, flushes, cost samples): [0-9.]* ms in the driver, [0-9.]* us each" ||
    fail "cugraft report does not say what the deferred ops run eagerly took: $("$cmd" report "$tmp/s.jsonl")"
fi
FAKECUDA_SPIN_NS=20000 CUGRAFT_RECORD_ONLY=1 shim r "$progs/conf_shapes"
same_result e r
[ "$(summary "$tmp/r.jsonl" flush_ops)" = 0 ] && [ "$(summary "$tmp/r.jsonl" launch_flush_ops)" = 0 ] ||
  fail "recording only, $(summary "$tmp/r.jsonl" flush_ops) deferred ops ran eagerly"
