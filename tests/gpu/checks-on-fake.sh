#!/bin/bash
# CPU test of gpu-checks.sh itself: its fourway check run on the CPU fake driver (a stand-in
# nvidia-smi lets it start) passes with the build's libcugraft.so, and fails in a build folder
# whose library is missing, as the first gpu run on the H200 was (the programs ran, no shim).
# usage: checks-on-fake.sh BUILD_DIR FAKECUDA_DIR
set -u
build=$1 fakedir=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
mkdir -p "$tmp/bin" "$tmp/nolib/tests" "$tmp/nolib/shim"
printf '#!/bin/sh\necho "GPU 0: stand-in"\n' > "$tmp/bin/nvidia-smi"; chmod +x "$tmp/bin/nvidia-smi"
ln -s "$(cd "$build" && pwd)/tests/programs" "$tmp/nolib/tests/programs"
checks() { PATH=$tmp/bin:$PATH LD_LIBRARY_PATH=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  "$here/gpu-checks.sh" "$@" > "$tmp/out.txt" 2>&1; }

checks "$build" "$tmp/with" fourway
rc=$?
[ $rc = 0 ] && grep -q '^ok fourway: identical' "$tmp/out.txt" ||
  { echo "FAIL: with the shim, exit $rc: $(cat "$tmp/out.txt")"; status=1; }
# the same output folder: the earlier run's report must not vouch for this one
cp -r "$tmp/with" "$tmp/without"
checks "$tmp/nolib" "$tmp/without" fourway
rc=$?
[ $rc != 0 ] && grep -q '^FAIL fourway: no report' "$tmp/out.txt" ||
  { echo "FAIL: without libcugraft.so, exit $rc: $(cat "$tmp/out.txt")"; status=1; }
exit $status
