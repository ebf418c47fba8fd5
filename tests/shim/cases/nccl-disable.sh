# CUGRAFT_DISABLE=1 around NCCL (ncclloop --group): the same result and work, the same driver
# calls, and no report

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
eager e "$progs/ncclloop" --iters 20 --group
CUGRAFT_DISABLE=1 shim s "$progs/ncclloop" --iters 20 --group
same_result e s; same_work e s
diff <(grep '^api\.' "$tmp/e.stats") <(grep '^api\.' "$tmp/s.stats") > /dev/null || fail "disabled shim changed driver calls"
[ ! -s "$tmp/s.jsonl" ] || fail "disabled shim wrote a report"
