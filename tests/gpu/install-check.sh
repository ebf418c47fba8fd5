#!/bin/sh
# By hand, on a GPU machine: the pip route and CUGRAFT_NVTX on a real PyTorch loop
# (docs/install.md, docs/nvtx.md). Run from the source tree; PyTorch's python3 first on PATH.
#  1. the wheel, built with pip (meson-python from the distribution, no index) and installed
#     into a fresh virtual environment, or, where there is no meson-python or venv, unpacked by
#     hand into a folder laid out as pip would (it is only files); readelf -d of its ELF files;
#     `cugraft demo` from it;
#  2. bench/train_torch.py (mlp, transformer) eager and under that install's `cugraft run`: the
#     per-step losses must be bitwise equal;
#  3. the transformer under CUGRAFT_NVTX=1 with the recording injection library
#     (tests/nvtxrec, compiled here with cc): check-nvtx.py holds its ranges against the report;
#  4. step times, rounds interleaved: CUGRAFT_NVTX unset, =1 with no tool, =1 with the recorder
#     (medians of 5).
# usage: tests/gpu/install-check.sh [WORKDIR]   (default /tmp/cugraft-install-check)
set -u
W=${1:-/tmp/cugraft-install-check}
SRC=$(pwd)
[ -f "$SRC/pyproject.toml" ] || { echo "run from the source tree"; exit 2; }
TORCHPY=$(command -v python3)
"$TORCHPY" -c 'import torch; assert torch.cuda.is_available()' || { echo "no PyTorch with CUDA"; exit 77; }
rm -rf "$W" && mkdir -p "$W" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

echo "== 1. the wheel"
PY=/usr/bin/python3
P=$W/env
if $PY -c 'import mesonpy, ensurepip' 2> /dev/null && $PY -m venv --system-site-packages "$P"; then
	"$P/bin/pip" --disable-pip-version-check wheel --no-build-isolation --no-index --no-deps \
		-w "$W/wheel" "$SRC" > "$W/wheel.log" 2>&1 || { tail -30 "$W/wheel.log"; exit 1; }
	"$P/bin/pip" --disable-pip-version-check install --no-index --no-deps "$W"/wheel/*.whl \
		> "$W/install.log" 2>&1 || { cat "$W/install.log"; exit 1; }
else
	echo "(no meson-python or venv for $PY: building with meson as meson-python would, and" \
	     "laying the wheel's files out by hand)"
	meson setup "$W/build" "$SRC" -Dtests=disabled -Dbench=disabled -Dlibunwind=disabled \
		-Dwheel_layout=true -Ddebug=false -Doptimization=2 > "$W/wheel.log" 2>&1 &&
	meson compile -C "$W/build" >> "$W/wheel.log" 2>&1 &&
	meson install -C "$W/build" --destdir "$W/stage" >> "$W/wheel.log" 2>&1 ||
		{ tail -30 "$W/wheel.log"; exit 1; }
	prefix=$(meson introspect "$W/build" --buildoptions |
	         "$TORCHPY" -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
	mkdir -p "$P/bin" && cp "$W/stage$prefix/bin/cugraft" "$P/bin/" &&
		cp -r "$W/stage$prefix/share/"* "$P/" || exit 1   # {datadir}: the wheel's data/
fi
ls "$W"/wheel/*.whl 2> /dev/null
find "$P/bin/cugraft" "$P/lib" "$P/libexec" "$P/share" -type f -newer "$SRC/pyproject.toml" 2> /dev/null |
	grep -v python3 | sort
for f in "$P/bin/cugraft" "$P/lib/libcugraft.so"; do
	echo "$f: $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
	echo "  highest glibc symbol: $(objdump -T "$f" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
done
CG=$P/bin/cugraft
(cd "$W" && "$CG" demo) || bad "cugraft demo"

echo "== 2. PyTorch eager vs cugraft run (bitwise)"
for m in mlp transformer; do
	"$TORCHPY" "$SRC/bench/train_torch.py" --model $m --steps 200 --out "$W/$m.eager.loss" |
		grep step_ms | sed "s/^/$m eager   /"
	(cd "$W" && "$CG" run --report "$W/$m.jsonl" -- "$TORCHPY" "$SRC/bench/train_torch.py" \
		--model $m --steps 200 --out "$W/$m.cugraft.loss") | grep step_ms | sed "s/^/$m cugraft /"
	cmp -s "$W/$m.eager.loss" "$W/$m.cugraft.loss" && echo "$m: losses bitwise equal" ||
		bad "$m: losses differ"
	"$CG" report "$W/$m.jsonl" | head -12
done

echo "== 3. CUGRAFT_NVTX=1 under the recording injection library"
cc -shared -fPIC -O2 -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$W/libnvtxrec.so" \
	"$SRC/tests/nvtxrec/nvtxrec.c" -lpthread || exit 1
nvtx_run() {   # $1: NVTX setting (unset/on/tool), $2: tag
	case $1 in
	unset) set -- env -u CUGRAFT_NVTX ;;
	on) set -- env CUGRAFT_NVTX=1 ;;
	tool) set -- env CUGRAFT_NVTX=1 NVTX_INJECTION64_PATH="$W/libnvtxrec.so" NVTXREC_OUT="$W/nvtx.txt" ;;
	esac
	(cd "$W" && "$@" "$CG" run --report "$W/nvtx.jsonl" -- "$TORCHPY" "$SRC/bench/train_torch.py" \
		--model transformer --steps 200 --out "$W/nvtx.loss") | sed -n 's/^step_ms //p'
}
rm -f "$W/nvtx.txt" "$W/nvtx.jsonl"
nvtx_run tool > /dev/null
"$TORCHPY" "$SRC/tests/nvtxrec/check-nvtx.py" "$W/nvtx.txt" "$W/nvtx.jsonl" "$SRC/policy/reason.h" ||
	bad "NVTX ranges against the report"
cmp -s "$W/nvtx.loss" "$W/transformer.eager.loss" || bad "losses differ under CUGRAFT_NVTX=1"
awk '$1 == "push" || $1 == "mark" { n = $4 " " $5; sub(/ chunk=.*| ops=.*/, "", n); c[$1 " " n]++ }
     END { for (k in c) print c[k], k }' "$W/nvtx.txt" | sort -rn | head -20

echo "== 4. step_ms, transformer, 5 interleaved rounds (order reversed every other round): NVTX"
echo "   unset, on without a tool, recorded"
for r in 1 2 3 4 5; do
	order="unset on tool"
	[ $((r % 2)) = 0 ] && order="tool on unset"
	for k in $order; do
		rm -f "$W/nvtx.txt" "$W/nvtx.jsonl"
		echo "$k $(nvtx_run $k)"
	done
done > "$W/times.txt"
for k in unset on tool; do
	echo "$k median $(awk -v k=$k '$1 == k { print $2 }' "$W/times.txt" | sort -n | sed -n 3p) ms"
done
[ "$fail" -eq 0 ] && echo "ALL PASS" || echo "SOME CHECKS FAILED"
exit $fail
