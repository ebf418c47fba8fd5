# Helpers of the collectives scope's cases (cases/coll*.sh: CUGRAFT_SCOPE=+collectives, the vote,
# shim/entry/VOTE.md), sourced after lib.sh. The fake NCCL moves its data in a host function on the
# stream, which the fake driver captures as a host node: a graphed collective moves its data at
# each graph launch.
# ranks NAME ARGS...: ncclloop --ranks under the shim, one report per rank ($tmp/NAME.R.jsonl)
ranks() { local n=$1; shift
  CUGRAFT_REPORT=$tmp/$n.%r.jsonl LD_PRELOAD=$rt$lib timeout 60 "$progs/ncclloop" "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"
  echo $? > "$tmp/$n.rc"; }
# eranks NAME ARGS...: the same without the shim
eranks() { local n=$1; shift
  timeout 60 "$progs/ncclloop" "$@" > "$tmp/$n.out" 2> "$tmp/$n.err"; echo $? > "$tmp/$n.rc"; }
# rsum NAME R: rank R's checksum in NAME's output
rsum() { awk -v r="$2" '$1 == "rank" && $2 == r && $3 == "checksum" { print $4 }' "$tmp/$1.out"; }
# votes REPORT: the report's vote records, one "vote outcome reason" a line
votes() { grep '"event":"vote"' "$1" | python3 -c '
import json, sys
for l in sys.stdin:
    v = json.loads(l); print(v["vote"], v["outcome"], v["reason"])'; }
