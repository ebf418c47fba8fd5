#!/bin/sh
# The summary a run writes, read back by `cugraft report --json` from two copies of it (two
# ranks alike): every counter comes back doubled, every ratio (policy/stats.def) and version
# unchanged, every map member and divergence site count doubled. The writer (shim/backend/events.c)
# and the reader (tools/reportfile.c) must not drift apart: a member the reader sums that it
# should not (a ratio, a version) or drops fails here.
# usage: summary-roundtrip.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1 SRC=$2 BUILD=$3
PROG=$BUILD/tests/programs/fourway
[ -x "$PROG" ] && [ -f "$BUILD/tests/fakecuda/libcuda.so.1" ] || exit 77
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
LD_LIBRARY_PATH=$BUILD/tests/fakecuda:$BUILD/tests/programs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  CUGRAFT_MEASURE=0 CUGRAFT_REPORT=$T/r.jsonl LD_PRELOAD=${CG_SANITIZER_RT:+$CG_SANITIZER_RT:}$BUILD/shim/libcugraft.so \
  "$PROG" --iters 30 > /dev/null || { echo "FAIL: fourway under the shim"; exit 1; }
cp "$T/r.jsonl" "$T/r2.jsonl"
"$CG" report --json "$T/r.jsonl" "$T/r2.jsonl" > "$T/merged.json" || { echo "FAIL: report --json"; exit 1; }
python3 - "$T/r.jsonl" "$T/merged.json" "$SRC/policy/stats.def" <<'PY'
import json, re, sys
summary = [json.loads(l) for l in open(sys.argv[1]) if '"event":"summary"' in l][-1]
merged = json.load(open(sys.argv[2]))
ratios = set(re.findall(r'^CG_STAT_RATIO\("(\w+)"', open(sys.argv[3]).read(), re.M))
assert ratios, "no ratio in stats.def"
skip = {"event", "t", "pid", "rank", "control"}  # per process, not merged
bad = []
for k, v in summary.items():
    if k in skip:
        continue
    m = merged.get(k)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        continue
    if isinstance(v, (int, float)):
        want = v if (k in ratios or k.endswith("_version")) else 2 * v
        # (the reader writes ratios to 6 significant digits)
        if m is None or abs(m - want) > (1e-5 if k in ratios else 1e-6) * max(1, abs(want)):
            bad.append(f"{k}: wrote {v}, read back {m}, want {want}")
    elif isinstance(v, dict):
        for sk, sv in v.items():
            if isinstance(sv, (int, float)) and not isinstance(sv, bool):
                mv = (m or {}).get(sk) if isinstance(m, dict) else None
                if mv is None or mv != 2 * sv:
                    bad.append(f"{k}.{sk}: wrote {sv}, read back {mv}, want {2 * sv}")
# Divergence sites: the same sites, each counted twice.
site = lambda d: (d.get("expected"), d.get("got"), d.get("at"), d.get("ops"))
merged_sites = {site(d): d.get("count") for d in merged.get("divergence_sites", [])}
for d in summary.get("divergence_sites", []):
    if merged_sites.get(site(d)) != 2 * d["count"]:
        bad.append(f"divergence site {site(d)}: wrote {d['count']}, read back {merged_sites.get(site(d))}")
if "divergence_sites" not in summary:
    bad.append("divergence_sites not written")
for r in ratios:
    if r not in summary:
        bad.append(f"ratio {r} not written")
if bad:
    print("FAIL:\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"{len(summary)} summary members read back as written ({len(ratios)} ratios)")
PY
