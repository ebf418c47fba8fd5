# a bad CUGRAFT_VOTE_TIMEOUT_MS warns once and keeps the default; one too big is clamped; the
# result exact either way

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH CUGRAFT_SCOPE=+collectives
. "$here/lib-coll.sh"
eager e "$progs/ncclloop" --iters 10
for v in banana:30000 -5:30000 '':30000 99999999999:3600000; do
  CUGRAFT_VOTE_TIMEOUT_MS=${v%:*} shim s "$progs/ncclloop" --iters 10
  same_result e s
  [ "$(grep -c CUGRAFT_VOTE_TIMEOUT_MS "$tmp/s.err")" = 1 ] || fail "'${v%:*}': $(grep -c CUGRAFT_VOTE_TIMEOUT_MS "$tmp/s.err") warnings, want 1"
  grep -q "\"CUGRAFT_VOTE_TIMEOUT_MS\":${v#*:}," "$tmp/s.jsonl" || fail "'${v%:*}': the header does not say ${v#*:}"
done
