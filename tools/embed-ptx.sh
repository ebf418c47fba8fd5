#!/bin/sh
# Compile a .cu file of extern "C" kernels to PTX and embed it as a C string, so driver-API
# programs can cuModuleLoadData() it on a GPU; the CPU fake driver ignores the image and maps
# kernel names to its built-in host implementations.
# usage: embed-ptx.sh NVCC INPUT.cu OUTPUT.c SYMBOL
set -eu
nvcc=$1; in=$2; out=$3; sym=$4
tmp="$out.ptx"
"$nvcc" -ptx -arch=compute_80 -o "$tmp" "$in"
{
  printf '/* generated from %s by embed-ptx.sh */\n' "$(basename "$in")"
  printf 'const char %s[] =\n' "$sym"
  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$/\\n"/' "$tmp"
  printf ';\n'
} > "$out"
rm -f "$tmp"
