# expandable segments: NCCL reads NCCL_GRAPH_REGISTER=0 at communicator creation, a user's value as
# it is, and nothing without them; the process environment itself is not replaced while the program
# runs (setenv then races with its threads)

export LD_LIBRARY_PATH=$FAKENCCL_DIR:$LD_LIBRARY_PATH
eager e "$progs/ncclloop" --iters 5
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True FAKENCCL_STATS=$tmp/s.nccl \
  shim s "$progs/ncclloop" --iters 5 --check-environ
NCCL_GRAPH_REGISTER=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True FAKENCCL_STATS=$tmp/s2.nccl \
  shim s2 "$progs/ncclloop" --iters 5 --check-environ
FAKENCCL_STATS=$tmp/s3.nccl shim s3 "$progs/ncclloop" --iters 5 --check-environ
for run in s:0 s2:1 s3:unset; do
  n=${run%:*} want=${run#*:}
  same_result e $n
  [ "$(stat graph_register "$tmp/$n.nccl")" = "$want" ] ||
    fail "$n: NCCL read NCCL_GRAPH_REGISTER=$(stat graph_register "$tmp/$n.nccl"), want $want"
  [ "$(field environ "$tmp/$n.out")" = unchanged ] ||
    fail "$n: the process environment was replaced while the program ran"
done
