# tools/setup-deps.sh with stand-ins for dpkg-query, apt-get, id, sudo and meson on a PATH of
# their own: it installs exactly the missing packages (as root directly, else through sudo), runs
# nothing when all are installed, and the README's quick start and .ci/run both start with it.
# usage: setup-deps.sh CUGRAFT SRCDIR BUILDDIR (the first and last unused)
src=$2
script=$src/tools/setup-deps.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

all=$(sh "$script" --list)
[ -n "$all" ] || fail "no package list"
mkdir "$tmp/bin"
for t in grep env; do ln -s "$(command -v $t)" "$tmp/bin/$t"; done
stub() { printf '#!/bin/sh\n%s\n' "$2" > "$tmp/bin/$1"; chmod +x "$tmp/bin/$1"; }
# dpkg-query -W -f=... PKG: installed unless PKG is in $MISSING
stub dpkg-query 'for p in $MISSING; do [ "$p" = "$3" ] && exit 1; done; printf "install ok installed"'
stub apt-get 'echo "apt-get $*" >> "$CALLS"'
stub id 'echo "$UID_IS"'
stub meson 'echo 1.0.1'
sudo_stub() { stub sudo 'echo sudo >> "$CALLS"; exec "$@"'; }

# run NAME UID MISSING: runs the script; its apt-get calls (and sudo's) in $tmp/NAME.calls
run() {
  : > "$tmp/$1.calls"
  CALLS=$tmp/$1.calls UID_IS=$2 MISSING=$3 CUDA_HOME=$tmp PATH=$tmp/bin /bin/sh "$script" \
    > "$tmp/$1.out" 2>&1
  echo $? > "$tmp/$1.rc"
}
rc() { cat "$tmp/$1.rc"; }

sudo_stub
run none 0 ''
[ "$(rc none)" = 0 ] || fail "all installed: exit $(rc none): $(cat "$tmp/none.out")"
[ ! -s "$tmp/none.calls" ] || fail "all installed, yet it ran: $(cat "$tmp/none.calls")"

run root 0 'meson libcmocka-dev'
[ "$(rc root)" = 0 ] || fail "as root: exit $(rc root): $(cat "$tmp/root.out")"
grep -q '^apt-get update' "$tmp/root.calls" || fail "as root: no apt-get update"
grep -q '^apt-get install .* meson libcmocka-dev$' "$tmp/root.calls" ||
  fail "as root: not exactly the missing packages installed: $(cat "$tmp/root.calls")"
! grep -q sudo "$tmp/root.calls" || fail "as root: sudo used"

run user 1000 'ninja-build'
[ "$(rc user)" = 0 ] || fail "as a user: exit $(rc user): $(cat "$tmp/user.out")"
[ "$(grep -c '^sudo$' "$tmp/user.calls")" = 2 ] && grep -q '^apt-get install .* ninja-build$' "$tmp/user.calls" ||
  fail "as a user: not installed through sudo: $(cat "$tmp/user.calls")"

rm "$tmp/bin/sudo"
run nosudo 1000 'ninja-build'
[ "$(rc nosudo)" != 0 ] || fail "as a user without sudo: exit 0"
[ ! -s "$tmp/nosudo.calls" ] || fail "as a user without sudo, it ran: $(cat "$tmp/nosudo.calls")"
grep -q 'ninja-build' "$tmp/nosudo.out" || fail "as a user without sudo: the missing package is not named"

stub meson 'echo 0.61.2'
run oldmeson 0 ''
[ "$(rc oldmeson)" != 0 ] || fail "meson 0.61 accepted"

# both quick-start commands and CI start with it
n=$(grep -c '^    tools/setup-deps.sh && ' "$src/README.md")
[ "$n" = 2 ] || fail "README.md has $n quick-start commands starting with tools/setup-deps.sh, want 2"
grep -q '^tools/setup-deps.sh' "$src/.ci/run" || fail ".ci/run does not call tools/setup-deps.sh"
! grep -q 'apt-get' "$src/.ci/run" || fail ".ci/run installs packages itself (the list is tools/setup-deps.sh's)"
exit $status
