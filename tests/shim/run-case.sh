#!/bin/bash
# Shim tests against the CPU fake driver: each case (cases/CASE.sh) runs a real program without
# and with libcugraft.so preloaded and compares what the program computed, what the fake executed,
# and what the shim reported. This runs one case: the environment, the helpers (lib.sh), the case;
# exit 0 when every check held, 1 when one failed, 77 when the case skipped itself.
# usage: run-case.sh CASE LIBCUGRAFT FAKEDIR PROGDIR
# CASE fault-NAME runs cases/fault.sh, oom-NAME cases/oom.sh: the fault and allocation failure
# matrices, whose settings tests/shim/meson.build passes in the environment.
set -u
case_name=$1 lib=$2 fakedir=$3 progs=$4
here=$(cd "$(dirname "$0")" && pwd)
case $case_name in
fault-*) case_file=$here/cases/fault.sh ;;
oom-*) case_file=$here/cases/oom.sh ;;
*) case_file=$here/cases/$case_name.sh ;;
esac
[ -f "$case_file" ] || { echo "unknown case $case_name (no $case_file)"; exit 2; }
export LD_LIBRARY_PATH=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# A sanitized build's runtime comes first in LD_PRELOAD (tests/meson.build sets CG_SANITIZER_RT).
rt=${CG_SANITIZER_RT:+$CG_SANITIZER_RT:}
# The deferral controller decides from wall time, which on the CPU fake is noise: every case
# counts what the policy does with it off, unless it sets it (control-*: wall time made to differ).
export CUGRAFT_MEASURE=${CUGRAFT_MEASURE:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
. "$here/lib.sh"
. "$case_file"
[ $status = 0 ] && echo "ok [$case_name]"
exit $status
