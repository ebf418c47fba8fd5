set -x
(meson setup build-gpu > $OUT/setup.log 2>&1 && ninja -C build-gpu > $OUT/build.log 2>&1) || { tail -30 $OUT/setup.log $OUT/build.log; exit 1; }
gcc -shared -fPIC -o /tmp/segv.so tests/gpu/segvtrace.c
L=$PWD/build-gpu/shim/libcugraft.so
T="python3 bench/train_torch.py --model mlp --steps 30"
for cfg in "CUGRAFT_AUDIT=0" "CUGRAFT_AUDIT=1" "CUGRAFT_RECORD_ONLY=1"; do
  env $cfg PYTHONFAULTHANDLER=1 CUGRAFT_REPORT=$OUT/mlp-$cfg.jsonl LD_PRELOAD="/tmp/segv.so $L" timeout 120 $T --out /tmp/l > $OUT/mlp-$cfg.txt 2>&1; echo "$cfg rc=$?"; tail -25 $OUT/mlp-$cfg.txt | grep -v "^step" | head -30
done
W=build-gpu/bench/workloads
$W/mb-runtime --kernels 1000 --blocks 16 --iters 200 --sync | grep iter_us | sed 's/^/mb-runtime eager /'
for d in 100 300 1000; do
  CUGRAFT_MAX_DEFER_US=$d CUGRAFT_REPORT=$OUT/mbr-$d.jsonl LD_PRELOAD=$L $W/mb-runtime --kernels 1000 --blocks 16 --iters 200 --sync | grep iter_us | sed "s/^/mb-runtime defer=$d /"
  python3 -c "import json,sys; s=json.loads(open(sys.argv[1]).readlines()[-1]); print('   ', s['ops_replayed'], s['ops_eager'], s['fallbacks'])" $OUT/mbr-$d.jsonl
done
python3 bench/train_torch.py --model transformer --steps 60 --out $OUT/tr-eager.loss | grep step_ms | sed 's/^/transformer eager /'
for d in 100 1000 5000; do
  CUGRAFT_MAX_DEFER_US=$d CUGRAFT_REPORT=$OUT/tr-$d.jsonl LD_PRELOAD="/tmp/segv.so $L" python3 bench/train_torch.py --model transformer --steps 60 --out $OUT/tr-$d.loss 2>&1 | grep -E "step_ms|SEGV" | sed "s/^/transformer defer=$d /"
  cmp -s $OUT/tr-eager.loss $OUT/tr-$d.loss && echo "   losses identical" || echo "   LOSSES DIFFER"
  python3 -c "import json,sys; s=json.loads(open(sys.argv[1]).readlines()[-1]); print('   ', s.get('event'), s.get('ops'), s.get('ops_replayed'), s.get('graph_launches'), s.get('patches'), s.get('fallbacks'))" $OUT/tr-$d.jsonl
done
