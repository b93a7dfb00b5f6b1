#!/usr/bin/env bash
# layers_vs_torch.sh: issue 36's layer speed in one run: bench_conv (MinAtar's conv 16 3x3
# on 10x10xC, C = 4, 7, 10, and the fc 1024 -> 128 after it, at 64 acting rows and 1,024
# minibatch rows) and bench_rnn (the LSTM at ppo_atari_lstm's and the NoVel example's
# shapes), each beside PyTorch on one thread (bench/torch_conv.py, bench/torch_rnn.py,
# Debian's python3-torch at /usr/bin/python3) in the same run, with calf's fraction of
# this core's FMA peak measured by the same program.
# Usage: bench/layers_vs_torch.sh [BUILD_DIR] [RNN_REPEATS]  (defaults build, 3)
# Debian's python3-torch calls whatever libblas.so.3 the system selects (the reference
# BLAS when no other is installed, ~3 GFLOP/s on the fc); with TORCH_BLAS_DIR set to a
# directory holding OpenBLAS's libblas.so.3, or with libopenblas0-pthread installed, torch
# also runs on OpenBLAS (one thread), the baseline that matters. To get it without
# changing the system's BLAS:
#   apt-get download libopenblas0-pthread && dpkg -x libopenblas0-pthread_*.deb ob &&
#   TORCH_BLAS_DIR=$PWD/ob/usr/lib/x86_64-linux-gnu/openblas-pthread bench/layers_vs_torch.sh
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
blas=${TORCH_BLAS_DIR:-}
if [ -z "$blas" ] && [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]; then
  blas=/usr/lib/x86_64-linux-gnu/openblas-pthread
fi
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== conv2d and the fc after it: torch with $([ -n "$blas" ] && echo "OpenBLAS from $blas" || echo "the system's libblas.so.3 ($(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3))")"
if [ -n "$blas" ]; then
  "$build/bench_conv" --torch "$here/torch_conv.py" --openblas "$blas"
else
  "$build/bench_conv" --torch "$here/torch_conv.py"
fi
echo
echo "== LSTM: torch with the system's BLAS$([ -n "$blas" ] && echo " and with OpenBLAS")"
if [ -n "$blas" ]; then
  "$build/bench_rnn" "$repeats" --torch "$here/torch_rnn.py" --openblas "$blas"
else
  "$build/bench_rnn" "$repeats" --torch "$here/torch_rnn.py"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
