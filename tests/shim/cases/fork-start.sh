# main forks again and again while another thread starts the shim, made slow in its driver load
# (dlopen of libcuda) and then in building the engine (tests/faultalloc): each child makes a driver
# call and must end (the program gives it 10 s)

# A sanitizer's runtime intercepts dlopen and malloc itself, so libfaultalloc.so cannot slow
# the start-up there: the window this case needs is not made (the plain build runs it).
case ${CG_SANITIZER_RT:-} in *libasan*|*libtsan*)
  echo "skipped: the sanitizer's dlopen and malloc bypass libfaultalloc.so"; exit 77 ;; esac
eager e "$progs/lifecycle" --mode fork-start
slows=(FAULTALLOC_DLOPEN_DELAY_MS=300 'FAULTALLOC_N=1 FAULTALLOC_DELAY_MS=300')
for slow in "${slows[@]}"; do
  # Whether a fork lands inside the start-up is scheduling (a loaded machine, a sanitized
  # build): up to 3 tries to meet that precondition; every try must be exact.
  for try in 1 2 3; do
    (export $slow; lib=$lib:$FAULTALLOC_LIB shim s "$progs/lifecycle" --mode fork-start)
    same_result e s
    during=$(awk '$1 == "forked" { print $4 }' "$tmp/s.out")
    [ "${during:-0}" -gt 0 ] && break
  done
  [ "${during:-0}" -gt 0 ] || fail "$slow: no child was forked during the start-up (3 tries)"
done
