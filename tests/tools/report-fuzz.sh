#!/bin/sh
# 210 seeded mutations of valid reports (tests/stress/report-fuzz.py, 30 per category) through
# `cugraft report` and `--json`: no crash, no hang, strict JSON, right merged totals. The same
# inputs every run; the on-demand stress run is the script itself with more and unseeded.
# usage: report-fuzz.sh CUGRAFT SRCDIR BUILDDIR
set -u
command -v python3 > /dev/null || { echo "python3 missing"; exit 77; }
exec python3 "$2/tests/stress/report-fuzz.py" "$1" --count 210 --seed 17 --timeout 30 --max-seconds 200
