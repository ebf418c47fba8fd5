# a process that has not loaded libcuda looks driver functions up with RTLD_DEFAULT (to learn
# whether CUDA is there): the answers cugraft's exports would give are not given; once the program
# loads libcuda, they are

eager e "$progs/dlprobe"
shim s "$progs/dlprobe"
same_result e s
cmp -s "$tmp/e.out" "$tmp/s.out" || fail "answers differ: $(diff "$tmp/e.out" "$tmp/s.out" | head -4 | tr '\n' ' ')"
grep -q '^before 0$' "$tmp/s.out" || fail "a driver function was found before libcuda was loaded"
