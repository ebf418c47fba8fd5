#!/bin/sh
# CUGRAFT_NVTX: a program under the shim and the recording injection library (libnvtxrec); the
# ranges and marks are checked against the report (check-nvtx.py). Without CUGRAFT_NVTX, or with
# it 0, NVTX is never initialised: no NVTX call is made.
# usage: nvtx-test.sh LIBCUGRAFT LIBNVTXREC FAKECUDA_DIR PROGRAM CHECK_PY REASON_H
set -u
LIB=$1 REC=$2 FAKE=$3 PROG=$4 CHECK=$5 REASONS=$6
fail() { echo "FAIL: $*"; exit 1; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
PRE=${CG_SANITIZER_RT:+$CG_SANITIZER_RT:}$LIB
run() {   # $1: trace file, then extra environment
	out=$1; shift
	env LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$PRE" NVTX_INJECTION64_PATH="$REC" NVTXREC_OUT="$out" \
		CUGRAFT_REPORT="$T/report.jsonl" "$@" "$PROG" --iters 40 > /dev/null || fail "program exited $?"
}

run "$T/off.txt" CUGRAFT_LOG=warn
[ -e "$T/off.txt" ] && fail "CUGRAFT_NVTX unset, yet NVTX was initialised: $(head -3 "$T/off.txt")"
run "$T/zero.txt" CUGRAFT_NVTX=0
[ -e "$T/zero.txt" ] && fail "CUGRAFT_NVTX=0, yet NVTX was initialised"
echo "unset and 0: the injection library was never initialised"

rm -f "$T/report.jsonl"
run "$T/on.txt" CUGRAFT_NVTX=1
[ -s "$T/on.txt" ] || fail "CUGRAFT_NVTX=1 recorded nothing"
python3 "$CHECK" "$T/on.txt" "$T/report.jsonl" "$REASONS" --only-cugraft || exit 1

# The same with a short defer budget: the flusher thread submits work itself (timeouts).
rm -f "$T/report.jsonl" "$T/on2.txt"
run "$T/on2.txt" CUGRAFT_NVTX=1 CUGRAFT_MAX_DEFER_US=1 CUGRAFT_MEASURE=0
python3 "$CHECK" "$T/on2.txt" "$T/report.jsonl" "$REASONS" --only-cugraft || exit 1
