# exit() from a second thread while its exit work is held inside a kernel of one stream: main's
# launch on another stream with work still deferred must run after that work (the flusher is kept
# away by a long deferral bound)

eager e "$progs/lifecycle" --mode exit-order
CUGRAFT_MAX_DEFER_US=10000000 shim s "$progs/lifecycle" --mode exit-order
same_result e s
[ "$(field window "$tmp/s.out")" = 1 ] ||
  fail "main's launch did not fall inside the exit work (window $(field window "$tmp/s.out"))"
