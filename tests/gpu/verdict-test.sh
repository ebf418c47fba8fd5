#!/bin/bash
# CPU test of the GPU checks' verdicts (verdict.sh) on canned runs: a run counts as identical
# only when the shim's report shows it was there; a missing, empty or launch-less report fails.
# usage: verdict-test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
errors=0
status=0
. "$here/verdict.sh"
bad() { echo "WRONG: $*"; errors=1; }

# canned NAME RC_EAGER RC_SHIM CHECKSUM_SHIM [REPORT_LINE...]: the files run() would leave
canned() {
  local n=$1; echo "$2" > "$out/$n.eager.rc"; echo "$3" > "$out/$n.shim.rc"
  printf 'checksum 0123abcd\n' > "$out/$n.eager.out"; printf 'checksum %s\n' "$4" > "$out/$n.shim.out"
  : > "$out/$n.eager.err"; : > "$out/$n.shim.err"; shift 4
  rm -f "$out/$n.jsonl"; for l in "$@"; do echo "$l" >> "$out/$n.jsonl"; done
}
# expect NAME pass|fail CMD...: the verdict CMD gives for NAME
expect() {
  local n=$1 want=$2 got; shift 2
  status=0; "$@" > "$out/verdict.txt"
  got=$([ $status = 0 ] && echo pass || echo fail)
  [ $got = $want ] || bad "$n: $* gave $got, want $want: $(cat "$out/verdict.txt")"
}
sum='{"event":"summary","launches":480,"graph_launches":100}'

canned good 0 0 0123abcd '{"event":"header"}' "$sum"
expect good pass compare good checksum
canned differs 0 0 feedbeef "$sum"
expect differs fail compare differs checksum
canned no-report 0 0 0123abcd              # the library was never preloaded
expect no-report fail compare no-report checksum
canned empty-report 0 0 0123abcd ''
: > "$out/empty-report.jsonl"
expect empty-report fail compare empty-report checksum
canned zero 0 0 0123abcd '{"event":"header"}' '{"event":"summary","launches":0,"ops":0}'
expect zero fail compare zero checksum
canned capture-only 0 0 0123abcd '{"event":"summary","launches":0,"ops":0,"ops_in_program_captures":8}'  # all in its own capture
expect capture-only pass compare capture-only checksum
canned no-summary 0 0 0123abcd '{"event":"header"}'
expect no-summary fail compare no-summary checksum
canned garbled 0 0 0123abcd '{"event":"summary","launches":'
expect garbled fail compare garbled checksum

# a program that aborts on purpose: the same death both ways, and the report's last record says so
canned abort 134 134 0123abcd '{"event":"header"}' '{"event":"signal","t":1.5,"signal":6,"name":"ABRT","work_pending":false}'
expect abort pass compare_exit abort
canned abort-no-report 134 134 0123abcd
expect abort-no-report fail compare_exit abort-no-report
canned abort-other 134 134 0123abcd '{"event":"signal","signal":11,"name":"SEGV"}'
expect abort-other fail compare_exit abort-other
canned abort-shim-only 0 134 0123abcd "$sum"
expect abort-shim-only fail compare_exit abort-shim-only

# loss files (PyTorch checks)
losses() { canned "$1" 0 0 0123abcd "${@:3}"; echo "1.5 1.25" > "$out/$1.eager.loss"; echo "$2" > "$out/$1.shim.loss"; }
losses loss-good "1.5 1.25" "$sum"
expect loss-good pass same_losses loss-good
losses loss-no-report "1.5 1.25"
expect loss-no-report fail same_losses loss-no-report
losses loss-zero "1.5 1.25" '{"event":"summary","launches":0}'
expect loss-zero fail same_losses loss-zero
losses loss-differs "1.5 1.26" "$sum"
expect loss-differs fail same_losses loss-differs

[ $errors = 0 ] && echo "all verdicts right"
exit $errors
