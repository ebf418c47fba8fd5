# the same arguments each iteration with other bytes in their padding, under valgrind: no decision
# of the shim reads an uninitialised byte (backtraces off: libunwind probes addresses with
# write(2), which valgrind flags)

command -v valgrind > /dev/null || { echo "no valgrind: skipped"; exit 77; }
[ -z "${CG_SANITIZER_RT:-}" ] || { echo "skipped: valgrind does not run a sanitized build"; exit 77; }
CUGRAFT_BACKTRACE=0 shim s valgrind -q --error-exitcode=9 "$progs/lifecycle" --mode padding
[ "$(cat "$tmp/s.rc")" = 0 ] ||
  fail "valgrind: exit $(cat "$tmp/s.rc"), $(grep -c 'uninitialised' "$tmp/s.err") uses of uninitialised bytes: $(grep -m1 -A3 'uninitialised' "$tmp/s.err")"
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
