#!/bin/sh
# Installs the Debian/Ubuntu packages cugraft's build and tests need, and only those missing:
# nothing is run (not even `apt-get update`) when all are there. As root it calls apt-get, else
# sudo apt-get. Both quick-start commands of README.md and .ci/run start with it.
# usage: tools/setup-deps.sh [--list]    --list: print the packages and exit
set -eu

# The one list: compilers (nvcc needs g++ for .cu programs), the build tools, python3 (tests,
# benchmarks), binutils (nm makes the default-deny trampolines from the stub libcuda), the
# optional libraries: libunwind (backtraces in the report), cmocka (unit tests), and the pip
# route that tests/install checks: python3-mesonpy (the wheel's build backend) and python3-venv
# (virtual environments, with pip from python3-pip-whl, which it brings).
packages="meson ninja-build pkg-config python3 binutils gcc g++ libc6-dev libcmocka-dev libunwind-dev python3-mesonpy python3-venv"

if [ "${1:-}" = --list ]; then
  echo "$packages"
  exit 0
fi

if ! command -v dpkg-query > /dev/null 2>&1; then
  echo "setup-deps: not a Debian/Ubuntu system (no dpkg-query): install by hand: $packages" >&2
  exit 1
fi

missing=
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q ' installed$' || missing="$missing $p"
done

if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    as_root=
  elif command -v sudo > /dev/null 2>&1; then
    as_root=sudo
  else
    echo "setup-deps: missing packages:$missing; run as root or install sudo" >&2
    exit 1
  fi
  echo "setup-deps: installing$missing"
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086 # one word per package
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi

# Meson 1.0 or newer (meson.build): older releases (Ubuntu 22.04 has 0.61) cannot build this.
v=$(meson --version 2> /dev/null || echo 0)
case $v in
  0.*|'') echo "setup-deps: meson $v is older than 1.0; get a newer one, e.g. python3 -m pip install --user 'meson>=1.0'" >&2
          exit 1 ;;
esac

# The CUDA toolkit is not a distribution package here: say so early rather than leave it to the
# build's error (meson's -Dtoolkit= or CUDA_HOME may point elsewhere, so this only warns).
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -f "$cuda/include/cuda.h" ] ||
  echo "setup-deps: no CUDA toolkit at $cuda (set CUDA_HOME or pass -Dtoolkit= to meson setup)" >&2
exit 0
