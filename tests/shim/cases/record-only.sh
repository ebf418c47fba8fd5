# CUGRAFT_RECORD_ONLY=1, the recording pass-through: nothing deferred or graphed, the same launches
# reach the fake, the result and work exact

eager e "$progs/fourway" --iters 20
CUGRAFT_RECORD_ONLY=1 shim s "$progs/fourway" --iters 20
same_result e s; same_work e s
[ "$(stat launch_eager "$tmp/s.stats")" = "$(stat launch_eager "$tmp/e.stats")" ] || fail "record-only changed eager launches"
[ "$(summary "$tmp/s.jsonl" graph_launches)" = 0 ] || fail "record-only launched graphs"
# the driver's share of the launch calls' time (sampled alike): every call is forwarded, and with
# each eager kernel launch made to take 20 us in the fake, the forwards hold those 20 us a launch
# and cugraft's own work is what is left
FAKECUDA_SPIN_NS=20000 CUGRAFT_RECORD_ONLY=1 shim t "$progs/fourway" --iters 100
python3 - "$tmp/t.jsonl" <<'PY' || fail "launch_forward_us does not hold the driver's time of the forwarded calls"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
calls, fwd = s["launch_call_count"], s.get("launch_forward_count", 0)
us, fus, kernels = s["launch_call_us"], s.get("launch_forward_us", 0), s["launches"]
print("%d calls, %d forwarded; %.0f us in the calls, %.0f in their forwards, %d kernel launches"
      % (calls, fwd, us, fus, kernels))
sys.exit(0 if calls > 2500 and abs(fwd - calls) <= 0.05 * calls + 31 and
         fus >= 0.8 * 20 * kernels and fus <= us and us - fus < 0.5 * fus else 1)
PY
