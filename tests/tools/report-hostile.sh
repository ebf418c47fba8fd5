#!/bin/sh
# `cugraft report` on valid but awkward reports: --json stays valid JSON (sums past double's
# range as null, bytes that are not UTF-8 as U+FFFD), a report without kernels, versions taken
# (not summed) across ranks with differing ones named, one fallback per fallback record.
# usage: report-hostile.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1
fail() { echo "FAIL: $*"; exit 1; }
expect() { printf '%s\n' "$1" | grep -qF -- "$2" || { printf '%s\n' "$1"; fail "missing: $2"; }; }
command -v python3 > /dev/null || { echo "python3 missing"; exit 77; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
# valid_json FILE: python3 -m json.tool accepts it (it refuses NaN/Infinity? no: strict parse below)
valid_json() {
	python3 -c 'import json, sys
def bad(c): raise ValueError("not JSON: " + c)
json.loads(open(sys.argv[1], "rb").read().decode("utf-8"), parse_constant=bad)' "$1" ||
		fail "$2: --json output is not valid JSON: $(cut -c1-300 "$1")"
	python3 -m json.tool "$1" > /dev/null || fail "$2: json.tool refuses it"
}
summary() { # FILE JSON-MEMBERS: a header and a summary with those members
	printf '{"event":"header","t":0,"pid":1,"rank":0}\n{"event":"summary","t":1,%s}\n' "$2" > "$1"
}

# Two valid files whose sum overflows a double.
summary "$T/big0.jsonl" '"ops":1e308,"host_time_saved_us":1e308,"entry_points":{"cuLaunchKernel":1e308},"kernels":[{"name":"k","launches":1e308}]'
cp "$T/big0.jsonl" "$T/big1.jsonl"
"$CG" report --json "$T/big0.jsonl" "$T/big1.jsonl" > "$T/out.json" || fail "--json exit $? on overflow"
valid_json "$T/out.json" overflow
expect "$(cat "$T/out.json")" '"ops":null,'
expect "$(cat "$T/out.json")" '"entry_points":{"cuLaunchKernel":null}'
expect "$(cat "$T/out.json")" '{"name":"k","launches":null}'
# A number beyond double's range in one file, and one a sum turns into NaN.
summary "$T/huge.jsonl" '"ops":1e999,"launches":-1e308,"patches":-1e308,"graph_launches":1'
summary "$T/neg.jsonl" '"launches":-1e308,"patches":1e308'
"$CG" report --json "$T/huge.jsonl" "$T/neg.jsonl" "$T/big0.jsonl" > "$T/out.json" || fail "--json exit $? on 1e999"
valid_json "$T/out.json" 1e999
echo "sums past double's range: valid JSON, null"

# Bytes that are not UTF-8 in a kernel name, a map key and a version (raw, not escaped).
printf '{"event":"header","t":0,"rank":0}\n{"event":"summary","t":1,"ops":3,"nccl_version":"2.\377","fallbacks":{"bad\300\257":1},"kernels":[{"name":"gemm\377\376x","launches":3},{"name":"ok \303\251 \360\237\230\200","launches":1},{"name":"sur\355\240\200","launches":1}]}\n' > "$T/utf.jsonl"
"$CG" report --json "$T/utf.jsonl" > "$T/out.json" || fail "--json exit $? on invalid UTF-8"
valid_json "$T/out.json" utf-8
python3 -c 'import json, sys
o = json.load(open(sys.argv[1], encoding="utf-8"))
names = [k["name"] for k in o["kernels"]]
assert names == ["gemm\ufffd\ufffdx", "ok \u00e9 \U0001F600", "sur\ufffd\ufffd\ufffd"], names
assert list(o["fallbacks"]) == ["bad\ufffd\ufffd"], o["fallbacks"]
assert o["nccl_version"] == "2.\ufffd", o["nccl_version"]' "$T/out.json" ||
	fail "invalid UTF-8 not replaced by U+FFFD (valid UTF-8 kept): $(cat "$T/out.json")"
echo "invalid UTF-8: U+FFFD, valid UTF-8 kept"

# No kernels at all (caught by a UBSan build as memcpy(NULL, ..., 0); stderr must stay empty).
summary "$T/none.jsonl" '"ops":5'
"$CG" report --json "$T/none.jsonl" > "$T/out.json" 2> "$T/err" || fail "--json exit $? without kernels"
[ ! -s "$T/err" ] || fail "stderr without kernels: $(head -3 "$T/err")"
valid_json "$T/out.json" no-kernels
expect "$(cat "$T/out.json")" '"ops":5,'
expect "$(cat "$T/out.json")" '"kernels":[],"divergence_sites":[]}'
"$CG" report "$T/none.jsonl" > "$T/out.txt" 2> "$T/err" || fail "exit $? without kernels"
[ ! -s "$T/err" ] || fail "stderr without kernels (text): $(head -3 "$T/err")"
echo "a report without kernels"

# Versions beyond int's range in a header (the text rendering cast them to int: undefined).
printf '{"event":"header","t":0,"rank":0,"driver_version":1e300,"cuda_version":3e9,"nccl_version":-1e300}\n' > "$T/ver.jsonl"
out=$("$CG" report "$T/ver.jsonl") || fail "exit $? on huge versions"
expect "$out" "· CUDA 3000000000 · NCCL -1"
printf '%s\n' "$out" | grep -q 'driver -' && fail "a huge driver version printed negative: $out"
echo "huge versions in a header"

# nccl_version is one value per rank: taken, not summed; ranks that differ are named. A
# header's version counts when the summary has none (libnccl loaded before the header).
summary "$T/n0.jsonl" '"ops":1,"nccl_version":22703'
summary "$T/n1.jsonl" '"ops":1,"nccl_version":22703'
printf '{"event":"header","t":0,"rank":2,"nccl_version":22703}\n{"event":"summary","t":1,"ops":1}\n' > "$T/n2.jsonl"
"$CG" report --json "$T/n0.jsonl" "$T/n1.jsonl" "$T/n2.jsonl" > "$T/out.json" || fail "--json exit $? (versions)"
valid_json "$T/out.json" versions
expect "$(cat "$T/out.json")" '"ops":3,'
expect "$(cat "$T/out.json")" '"nccl_version":22703,'
summary "$T/n3.jsonl" '"ops":1,"nccl_version":22805'
"$CG" report --json "$T/n0.jsonl" "$T/n1.jsonl" "$T/n3.jsonl" > "$T/out.json" || fail "--json exit $? (versions)"
valid_json "$T/out.json" versions
expect "$(cat "$T/out.json")" '"nccl_version":null,"nccl_versions":{"22703":2,"22805":1}'
out=$("$CG" report "$T/n0.jsonl" "$T/n1.jsonl" "$T/n3.jsonl") || fail "exit $? (versions)"
expect "$out" "versions   INCONSISTENT nccl_version: 22703 (2 files) · 22805 (1 file)"
out=$("$CG" report "$T/n0.jsonl" "$T/n1.jsonl") || fail "exit $? (versions)"
printf '%s\n' "$out" | grep -q INCONSISTENT && fail "equal versions called inconsistent"
echo "nccl_version taken, differing ranks named"

# A file without a summary (killed): each fallback record is one fallback; the writer writes
# no "count" in them, so one found there is not a count.
printf '{"event":"header","t":0,"rank":0}\n{"event":"fallback","t":1,"reason":"sync","count":40}\n{"event":"fallback","t":2,"reason":"sync"}\n{"event":"fallback","t":3,"reason":"divergence"}\n' > "$T/killed.jsonl"
"$CG" report --json "$T/killed.jsonl" > "$T/out.json" || fail "--json exit $? (killed)"
expect "$(cat "$T/out.json")" '"processes":1,"processes_without_summary":1,'
expect "$(cat "$T/out.json")" '"fallbacks":{"sync":2,"divergence":1}'
echo "fallback records counted one each"

# Divergence sites with names that look like the reader's own site keys, wrong types, numbers
# out of range, no count: the good ones merged by site, the others dropped, --json valid.
summary "$T/sites.jsonl" '"ops":9,"divergence_sites":[{"expected":"3 4 5:ab","got":"c:d","at":1,"ops":2,"count":4},{"expected":7,"got":"x","at":1,"ops":2,"count":1},{"expected":"a","got":"b","at":-1,"ops":2,"count":1},{"expected":"a","got":"b","at":1e99,"ops":2,"count":1},"junk",{"expected":"","got":"","at":0,"ops":0}]'
cp "$T/sites.jsonl" "$T/sites2.jsonl"   # (two files: one named twice is read once)
"$CG" report --json "$T/sites.jsonl" "$T/sites2.jsonl" > "$T/out.json" 2> "$T/err" || fail "--json exit $? on odd sites"
valid_json "$T/out.json" sites
expect "$(cat "$T/out.json")" '"divergence_sites":[{"expected":"3 4 5:ab","got":"c:d","at":1,"ops":2,"count":8}]'
out=$("$CG" report "$T/sites.jsonl") || fail "exit $? on odd sites"
expect "$out" "keeps diverging: expected 3 4 5:ab, got c:d at op 2 of a 2-op chunk (4 times)"
echo "divergence sites: odd names kept apart, bad entries dropped"
