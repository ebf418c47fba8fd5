#!/bin/sh
# The pip route, as a user takes it: a copy of the sources (as a fresh clone has them) built into
# a wheel with meson-python (`pip wheel`) and installed into a new virtual environment, whose
# `cugraft demo` must give bitwise-equal results (against the CPU fake driver where there is no
# GPU). The wheel must hold the command, the library, the demo and the man page, no test, and
# ELF files that need nothing beyond glibc but the driver. Debian's python3-mesonpy and
# python3-venv (tools/setup-deps.sh); no package index is used.
# usage: wheel.sh SRCDIR
set -u
SRC=$1
fail() { echo "FAIL: $*"; exit 1; }
PY=/usr/bin/python3
if [ -n "${CG_SANITIZER_RT:-}" ]; then
	echo "a sanitized build: the wheel is built plain, and the plain pass checks it"; exit 77
fi
$PY -c 'import mesonpy, ensurepip' 2> /dev/null ||
	{ echo "no meson-python or venv for $PY (tools/setup-deps.sh installs them)"; exit 77; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT

# The tracked files only, as a clone has them (no build folders).
mkdir "$T/src"
if git -C "$SRC" rev-parse --git-dir > /dev/null 2>&1; then
	(cd "$SRC" && git ls-files -z | xargs -0 tar cf - --no-recursion) | tar xf - -C "$T/src" ||
		fail "copying the sources"
else
	(cd "$SRC" && tar cf - --exclude='./build*' --exclude=./.git .) | tar xf - -C "$T/src"
fi

$PY -m venv --system-site-packages "$T/v" || fail "venv"
pip() { "$T/v/bin/pip" --disable-pip-version-check --no-input "$@"; }
pip wheel --no-build-isolation --no-index --no-deps -w "$T/wheel" "$T/src" > "$T/build.log" 2>&1 ||
	{ tail -40 "$T/build.log"; fail "pip wheel"; }
set -- "$T"/wheel/cugraft-*.whl
[ -f "$1" ] || fail "no wheel made"
WHL=$1
echo "wheel: ${WHL##*/}"
files=$($PY -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$WHL")
printf '%s\n' "$files"
for f in scripts/cugraft data/lib/libcugraft.so data/libexec/cugraft/cugraft-demo-work \
         data/libexec/cugraft/fakecuda/libcuda.so.1 data/share/man/man1/cugraft.1; do
	printf '%s\n' "$files" | grep -q "^cugraft-[^/]*\.data/$f\$" || fail "the wheel lacks $f"
done
printf '%s\n' "$files" | grep -Eqi 'test|bench|unit-|fourway' && fail "the wheel holds tests or benchmarks"

pip install --no-index --no-deps "$WHL" > "$T/install.log" 2>&1 ||
	{ cat "$T/install.log"; fail "pip install of the wheel"; }
[ -x "$T/v/bin/cugraft" ] || fail "no cugraft in the environment's bin"
for f in "$T/v/bin/cugraft" "$T/v/lib/libcugraft.so"; do
	extra=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
	        grep -Ev '^(libc\.so\.6|libdl\.so\.2|libpthread\.so\.0|libm\.so\.6|ld-linux-x86-64\.so\.2)$')
	[ -z "$extra" ] || fail "${f##*/} needs $extra"
done
echo "readelf -d: the command and the library need glibc only"

out=$(cd "$T" && PATH="$T/v/bin:$PATH" cugraft demo --iters 3 2>&1); rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || fail "cugraft demo from the environment exited $rc"
printf '%s\n' "$out" | grep -q "results    bitwise equal" || fail "no equality line"

# The route README gives: pip install of the source tree itself, into another environment.
$PY -m venv --system-site-packages "$T/v2" || fail "venv"
"$T/v2/bin/pip" --disable-pip-version-check install --no-build-isolation --no-index "$T/src" \
	> "$T/install2.log" 2>&1 || { tail -40 "$T/install2.log"; fail "pip install ."; }
(cd "$T" && "$T/v2/bin/cugraft" demo --iters 2 | grep -q "results    bitwise equal") ||
	fail "cugraft demo after pip install ."
echo "pip install . then cugraft demo: bitwise equal"
