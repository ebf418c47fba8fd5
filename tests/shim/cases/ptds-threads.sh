# threads one after another end with work deferred on their per-thread streams: nothing lost; each
# thread its own stream record and proxy (pthread_t values are reused); the records of exited
# threads retired before the program ends

eager e "$progs/lifecycle" --mode ptds-threads
shim s "$progs/lifecycle" --mode ptds-threads
same_result e s; same_work e s
proxies=$(( $(stat api.cuStreamCreate "$tmp/s.stats") - $(stat api.cuStreamCreate "$tmp/e.stats") ))
[ "$proxies" -ge 6 ] || fail "the shim created $proxies streams for 6 threads' per-thread streams"
left=$(grep '"event":"summary"' "$tmp/s.jsonl" | grep -o '"kind":"per_thread"' | wc -l)
[ "$left" -lt 6 ] || fail "all $left per-thread stream records of exited threads still live at exit"
