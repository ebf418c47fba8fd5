#!/bin/sh
# A Meson install staged with DESTDIR, and the same tree moved elsewhere: its `cugraft run`
# preloads the staged library into a program on the CPU fake driver (which it replays from
# graphs) and its `cugraft demo` gives bitwise-equal results, both found relative to the
# command itself (tools/launch.c); the installed pages link to each other.
# usage: destdir.sh BUILDDIR PREFIX BINDIR PROGRAM
set -u
BUILD=$1 PREFIX=$2 BINDIR=$3 PROG=$4
fail() { echo "FAIL: $*"; exit 1; }
if [ -n "${CG_SANITIZER_RT:-}" ]; then
	echo "a sanitized build: the plain pass checks the install"; exit 77
fi
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
meson install -C "$BUILD" --no-rebuild --quiet --destdir "$T/stage" > "$T/install.log" 2>&1 ||
	{ cat "$T/install.log"; fail "meson install"; }
case $BINDIR in /*) ;; *) BINDIR=$PREFIX/$BINDIR ;; esac

check() {   # $1: the root of the staged tree
	CG=$1$BINDIR/cugraft
	[ -x "$CG" ] || fail "no $CG"
	fake=$(find "$1" -path '*/cugraft/fakecuda/libcuda.so.1' | head -1)
	[ -n "$fake" ] || fail "no fake driver in the staged tree"
	pre=$("$CG" run -- sh -c 'echo "$LD_PRELOAD"') || fail "cugraft run from $1"
	case $pre in "$1"/*libcugraft.so) ;; *) fail "the staged cugraft preloads '$pre'" ;; esac
	rm -f "$T/report.jsonl"
	(cd "$T" && LD_LIBRARY_PATH=${fake%/*} "$CG" run --report "$T/report.jsonl" -- "$PROG" --iters 20 \
		> /dev/null) || fail "cugraft run -- ${PROG##*/} exited $?"
	grep -q '"event":"summary".*"graph_launches":[1-9]' "$T/report.jsonl" ||
		fail "no graph launches in the report of the staged run"
	out=$(cd "$T" && "$CG" demo --iters 3 2>&1); rc=$?
	[ "$rc" -eq 0 ] || { printf '%s\n' "$out"; fail "staged cugraft demo exited $rc"; }
	printf '%s\n' "$out" | grep -q "results    bitwise equal" || fail "no equality line"
	echo "$1: cugraft run replays from graphs; cugraft demo bitwise equal"
}
# The installed pages link to each other as in the sources (README.md at the top, docs/ below
# it); links to what is not installed (bench/, shim/) are left out.
docs=$(find "$T/stage" -path '*/share/doc/cugraft' -type d | head -1)
[ -n "$docs" ] && [ -f "$docs/README.md" ] || fail "no README.md under share/doc/cugraft"
python3 - "$docs" > "$T/links" <<'PY' || fail "installed pages link to pages not where they are: $(head -5 "$T/links")"
import os, re, sys
top = sys.argv[1]
pages = [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if f.endswith(".md")]
names = {os.path.basename(p) for p in pages}
bad = []
for p in pages:
    for target in re.findall(r"\]\(([^)#\s]+)", open(p, encoding="utf-8").read()):
        parts = target.split("/")
        if "://" in target or os.path.basename(target) not in names or \
                {"bench", "shim", "policy", "tests", "tools"} & set(parts):
            continue
        if not os.path.exists(os.path.join(os.path.dirname(p), target)):
            bad.append("%s -> %s" % (os.path.relpath(p, top), target))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
check "$T/stage"
mv "$T/stage" "$T/moved"
check "$T/moved"
