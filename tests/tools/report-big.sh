#!/bin/sh
# `cugraft report` on reports with many distinct names (300k kernels, 200k entry points, 100k
# fallback reasons in two summaries, 100k fallback records in a file without one): it must stay
# linear (the meson timeout bounds it; a quadratic merge took minutes) and merge every count.
# usage: report-big.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 > /dev/null || { echo "python3 missing"; exit 77; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
K=300000 E=200000 F=100000
python3 - "$T" $K $E $F <<'PY' || fail "generating the reports"
import json, random, sys
d, K, E, F = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(17)
def summary(scale):
    ks = [{"name": "kernel_%06d" % i, "launches": scale * (i + 1)} for i in range(K)]
    rng.shuffle(ks)   # first-seen order differs between the files
    eps = list(range(E)); rng.shuffle(eps)
    fbs = list(range(F)); rng.shuffle(fbs)
    return {"event": "summary", "t": 1, "ops": scale * 10, "kernels": ks,
            "entry_points": {"ep_%d" % i: scale * (i + 1) for i in eps},
            "fallbacks": {"reason_%d" % i: scale * (i + 1) for i in fbs}}
for name, scale in (("a", 1), ("b", 2)):
    with open(d + "/" + name + ".jsonl", "w") as f:
        f.write(json.dumps({"event": "header", "t": 0, "rank": scale - 1}) + "\n")
        f.write(json.dumps(summary(scale), separators=(",", ":")) + "\n")
with open(d + "/c.jsonl", "w") as f:   # killed: fallback records only, each reason once
    f.write(json.dumps({"event": "header", "t": 0, "rank": 2}) + "\n")
    for i in range(F):
        f.write(json.dumps({"event": "fallback", "t": 2, "reason": "reason_%d" % i}) + "\n")
PY
"$CG" report --json "$T/a.jsonl" "$T/b.jsonl" "$T/c.jsonl" > "$T/out.json" || fail "--json exit $?"
python3 - "$T/out.json" $K $E $F <<'PY' || fail "merged counts wrong"
import json, sys
o = json.load(open(sys.argv[1]))
K, E, F = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
assert o["files"] == 3 and o["processes_without_summary"] == 1, (o["files"], o["processes_without_summary"])
assert o["ops"] == 30, o["ops"]
want = [{"name": "kernel_%06d" % i, "launches": 3 * (i + 1)} for i in range(K - 1, K - 21, -1)]
assert o["kernels"] == want, o["kernels"][:3]
ep = o["entry_points"]
assert len(ep) == E and all(ep["ep_%d" % i] == 3 * (i + 1) for i in range(E)), "entry_points"
fb = o["fallbacks"]
assert len(fb) == F and all(fb["reason_%d" % i] == 3 * (i + 1) + 1 for i in range(F)), "fallbacks"
print("merged: %d kernels, %d entry points, %d fallback reasons" % (K, E, F))
PY
"$CG" report "$T/a.jsonl" "$T/b.jsonl" "$T/c.jsonl" > "$T/out.txt" || fail "text exit $?"
n=$(grep -c '^  first reason_' "$T/out.txt")
[ "$n" -eq "$F" ] || fail "$n first-occurrence lines, want $F"
grep -q "^  fallbacks  reason_$((F - 1)) $((3 * F + 1)) · reason_$((F - 2)) $((3 * F - 2)) · " "$T/out.txt" ||
	fail "merged fallbacks not sorted largest first: $(grep -m1 '^  fallbacks' "$T/out.txt" | cut -c1-200)"
echo "text rendering"
