# a decode-like loop whose kernel at one position changes with the token's length (conf_swap):
# the variants' graphs share one executable, every node patched (the function too) at each
# switch, and the results are those of the eager run; switching every token, the later variant
# pays its switches' needless patches (its two launches whose arguments never change) until
# they are worth an instantiation, then gets an executable of its own

eager e "$progs/conf_swap"
shim s "$progs/conf_swap"
same_result e s; same_work e s
built=$(summary "$tmp/s.jsonl" graphs_built) sharing=$(summary "$tmp/s.jsonl" graphs_sharing)
execs=$(summary "$tmp/s.jsonl" executables) switches=$(summary "$tmp/s.jsonl" executable_switches)
replayed=$(summary "$tmp/s.jsonl" replayed_share)
[ "$sharing" -ge 1 ] && [ "$execs" -lt "$built" ] && [ "$switches" -ge 10 ] ||
  fail "$built graphs built on $execs executables, $sharing sharing, $switches switches"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.8 else 1)" "$replayed" ||
  fail "replayed share $replayed"
[ "$(summary "$tmp/s.jsonl" executables_bought)" = 0 ] ||
  fail "$(summary "$tmp/s.jsonl" executables_bought) graphs bought an executable, switching every 8 tokens"
cmd=$(dirname "$progs")/../tools/cugraft
if [ -x "$cmd" ]; then
  "$cmd" report "$tmp/s.jsonl" | grep -q "^  shared     $sharing graphs ran on another chunk's executable ($execs instantiated in all): $switches switches" ||
    fail "cugraft report does not say what shared executables: $("$cmd" report "$tmp/s.jsonl" | grep -A1 replayed)"
fi

eager e1 "$progs/conf_swap" --period 1 --iters 400
shim s1 "$progs/conf_swap" --period 1 --iters 400
same_result e1 s1; same_work e1 s1
bought=$(summary "$tmp/s1.jsonl" executables_bought) switches=$(summary "$tmp/s1.jsonl" executable_switches)
[ "$bought" -ge 1 ] && [ "$switches" -ge 128 ] && [ "$switches" -lt 400 ] ||
  fail "switching every token: $switches switches, $bought graphs bought an executable"
