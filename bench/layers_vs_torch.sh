#!/usr/bin/env bash
# layers_vs_torch.sh: bench_conv and bench/torch_conv.py in one go, the same columns, the
# fractions of the peak bench_conv measured. Usage: bench/layers_vs_torch.sh [BUILD_DIR]
# Debian's python3-torch calls whatever libblas.so.3 the system selects (the reference
# BLAS when no other is installed, ~3 GFLOP/s on a 1600x128 product); with
# TORCH_BLAS_DIR set to a directory holding OpenBLAS's libblas.so.3, or with
# libopenblas0-pthread installed, torch runs on OpenBLAS (one thread) instead. To get it
# without changing the system's BLAS:
#   apt-get download libopenblas0-pthread && dpkg -x libopenblas0-pthread_*.deb ob &&
#   TORCH_BLAS_DIR=$PWD/ob/usr/lib/x86_64-linux-gnu/openblas-pthread bench/layers_vs_torch.sh
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
out=$("$build/bench_conv")
echo "$out"
peak=$(echo "$out" | sed -n 's/^calf: peak \([0-9.]*\) GFLOP.*/\1/p')
blas=${TORCH_BLAS_DIR:-}
if [ -z "$blas" ] && [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]; then
  blas=/usr/lib/x86_64-linux-gnu/openblas-pthread
fi
echo
if [ -n "$blas" ]; then
  echo "torch's BLAS: OpenBLAS from $blas, one thread"
  OPENBLAS_NUM_THREADS=1 LD_LIBRARY_PATH="$blas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    /usr/bin/python3 "$here/torch_conv.py" --peak "$peak"
else
  echo "torch's BLAS: the system's libblas.so.3 ($(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3))"
  /usr/bin/python3 "$here/torch_conv.py" --peak "$peak"
fi
