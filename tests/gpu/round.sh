(meson setup build-gpu > $OUT/setup.log 2>&1 && ninja -C build-gpu > $OUT/build.log 2>&1) || { tail -30 $OUT/setup.log $OUT/build.log; exit 1; }
gcc -shared -fPIC -o /tmp/segv.so tests/gpu/segvtrace.c
L=$PWD/build-gpu/shim/libcugraft.so
LD_PRELOAD=/tmp/segv.so tests/gpu/gpu-checks.sh build-gpu $OUT/checks 2>&1 | tee $OUT/checks.txt
for model in transformer mlp; do
python3 bench/train_torch.py --model $model --steps 100 --out $OUT/tr-eager.loss | grep step_ms | sed "s/^/$model eager /"
for d in 2000 5000 20000; do
  CUGRAFT_MAX_DEFER_US=$d CUGRAFT_REPORT=$OUT/tr-$d.jsonl LD_PRELOAD="/tmp/segv.so $L" python3 bench/train_torch.py --model $model --steps 100 --out $OUT/tr-$d.loss 2>&1 | grep -E "step_ms|SEGV" | sed "s/^/$model defer=$d /"
  cmp -s $OUT/tr-eager.loss $OUT/tr-$d.loss && echo "   losses identical" || echo "   LOSSES DIFFER"
  python3 -c "import json,sys; s=json.loads(open(sys.argv[1]).readlines()[-1]); print('   ', s.get('event'), s.get('ops'), s.get('ops_replayed'), s.get('graph_launches'), s.get('patches'), s.get('fallbacks'), s.get('chunks_disabled'))" $OUT/tr-$d.jsonl
done; done
cd $OUT && tar czf checks.tgz checks && rm -rf checks tr-*.loss
