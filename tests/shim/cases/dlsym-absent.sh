# a process that has not loaded libcuda looks driver functions up with RTLD_DEFAULT (to learn
# whether CUDA is there): the answers cugraft's exports would give are not given; once the program
# loads libcuda, they are, and dlerror() reports what it would without cugraft (whose start-up,
# inside such a lookup, looks up entry points this driver lacks), with and without a report

eager e "$progs/dlprobe"
shim s "$progs/dlprobe"
same_result e s
cmp -s "$tmp/e.out" "$tmp/s.out" || fail "answers differ: $(diff "$tmp/e.out" "$tmp/s.out" | head -4 | tr '\n' ' ')"
grep -q '^before 0$' "$tmp/s.out" || fail "a driver function was found before libcuda was loaded"
CUGRAFT_REPORT= LD_PRELOAD=$rt$lib timeout 60 "$progs/dlprobe" > "$tmp/n.out" 2> "$tmp/n.err"
cmp -s "$tmp/e.out" "$tmp/n.out" || fail "answers differ without a report: $(diff "$tmp/e.out" "$tmp/n.out" | head -4 | tr '\n' ' ')"
