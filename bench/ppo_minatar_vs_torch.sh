#!/usr/bin/env bash
# ppo_minatar_vs_torch.sh: PPO with MinAtar's conv net on MinAtar/Breakout-v0 (issue 37's
# section 2), calf against PyTorch in one run: `calf train` on bench/ppo_minatar_breakout.gin
# (PureJaxRL's MinAtar settings: 64 envs x 128 steps, 4 epochs of 8 minibatches) on one
# process and with --nproc 2, then bench/torch_ppo_minatar.py (the same PPO work in PyTorch
# on one thread, Debian's python3-torch) on the same calf envs, alternated in every repeat.
# Prints each run's env steps per second of wall time and per CPU second (user + system
# of the whole job, its worker processes included), then the medians and ranges, and
# calf's ratio to torch (the median of the per-repeat ratios).
# Usage: bench/ppo_minatar_vs_torch.sh [BUILD_DIR] [REPEATS] [CALF_ITERATIONS] [TORCH_ITERATIONS]
#   defaults build, 3, 8, 2 (an iteration is 8,192 env steps; torch runs at a few hundred
#   steps/s with Debian's default BLAS, so it trains fewer iterations; steps/s is per step).
# TORCH_BLAS_DIR=DIR also runs torch with DIR's libblas.so.3 (OpenBLAS, one thread) first
# on LD_LIBRARY_PATH, as bench/layers_vs_torch.sh does.
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
calf_iters=${3:-8}
torch_iters=${4:-2}
here=$(cd "$(dirname "$0")" && pwd)
conf=$here/ppo_minatar_breakout.gin
work=$(mktemp -d /tmp/calf_ppo_minatar.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# one calf run: "wall_rate cpu_rate"
calf_run() {
  local nproc=$1 root=$work/run.$1.$RANDOM
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$build/calf" train --quiet --root_dir "$root" \
    --conf "$conf" --conf_param "TrainerConfig.num_iterations=$calf_iters" --nproc "$nproc" \
    >/dev/null
  rm -rf "$root"
  awk -v s=$((calf_iters * 8192)) '{printf "%.0f %.0f\n", s / $1, s / ($2 + $3)}' "$work/time"
}

# one torch run: "wall_rate cpu_rate"
torch_run() {
  local out
  if [ -n "${1:-}" ]; then
    out=$(OPENBLAS_NUM_THREADS=1 LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      PYTHONPATH="$build/python" /usr/bin/python3 "$here/torch_ppo_minatar.py" \
      --iterations "$torch_iters")
  else
    out=$(PYTHONPATH="$build/python" /usr/bin/python3 "$here/torch_ppo_minatar.py" \
      --iterations "$torch_iters")
  fi
  echo "$out" | sed -n 's/^env steps\/s: \([0-9]*\) (wall), \([0-9]*\) (per CPU second).*/\1 \2/p'
}

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "calf: $("$build/calf" --version | grep -i kernels || true)"
kinds="calf1 calf2 torch"
[ -n "${TORCH_BLAS_DIR:-}" ] && kinds="$kinds torch_ob"
: >"$work/results"
for r in $(seq 1 "$repeats"); do
  for k in $kinds; do
    case $k in
      calf1) v=$(calf_run 1) ;;
      calf2) v=$(calf_run 2) ;;
      torch) v=$(torch_run) ;;
      torch_ob) v=$(torch_run "$TORCH_BLAS_DIR") ;;
    esac
    echo "repeat $r $k: env steps/s $v (wall, per CPU second); load $(cut -d' ' -f1 /proc/loadavg)"
    echo "$r $k $v" >>"$work/results"
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, k, w, c in rows:
    by.setdefault(k, {})[int(r)] = (float(w), float(c))
names = {"calf1": "calf, 1 process", "calf2": "calf, --nproc 2", "torch": "torch, 1 thread",
         "torch_ob": "torch + OpenBLAS, 1 thread"}
print("| run | env steps/s (wall): median (min-max) | per CPU second: median (min-max) |")
print("|---|---|---|")
for k, v in by.items():
    w = [x[0] for x in v.values()]
    c = [x[1] for x in v.values()]
    print(f"| {names[k]} | {statistics.median(w):.0f} ({min(w):.0f}-{max(w):.0f}) | "
          f"{statistics.median(c):.0f} ({min(c):.0f}-{max(c):.0f}) |")
for base in ("torch", "torch_ob"):
    if base not in by:
        continue
    for k in ("calf1", "calf2"):
        common = sorted(set(by[k]) & set(by[base]))
        rw = [by[k][r][0] / by[base][r][0] for r in common]
        rc = [by[k][r][1] / by[base][r][1] for r in common]
        print(f"{names[k]} / {names[base]}: {statistics.median(rw):.1f}x wall "
              f"({min(rw):.1f}-{max(rw):.1f}), {statistics.median(rc):.1f}x per CPU second "
              f"({min(rc):.1f}-{max(rc):.1f})")
PY
