"""torch_conv.py: PyTorch's CPU kernels on one thread on bench_conv's shapes and batches.

MinAtar's network (10x10xC, C in {4, 6, 7, 10}; Conv2d(C, 16, 3, stride 1, padding 0
or 1); Linear(1024 or 1600, 128)), forward+backward through autograd, timed in this
thread's CPU seconds like bench/bench_conv.c, with the same columns. `--peak G` (GFLOP/s,
what `bench_conv --peak` measured) adds each rate's fraction of it.
Run: /usr/bin/python3 bench/torch_conv.py [--peak G]  (Debian's python3-torch).
"""
import argparse
import os
import time

import torch

RUNS = 9


def best_time(fn) -> tuple[float, float]:
    """CPU seconds per call of fn: best and median of RUNS runs of >= 20 ms each."""
    fn()
    reps = 1
    while True:
        t0 = time.thread_time()
        for _ in range(reps):
            fn()
        if time.thread_time() - t0 >= 0.02 or reps >= 1 << 20:
            break
        reps *= 2
    times = []
    for _ in range(RUNS):
        t0 = time.thread_time()
        for _ in range(reps):
            fn()
        times.append((time.thread_time() - t0) / reps)
    times.sort()
    return times[0], times[RUNS // 2]


def column(flop: float, best: float, median: float, peak: float | None) -> str:
    frac = f" {100 * flop / best / (peak * 1e9):3.0f}%" if peak else ""
    return f"{flop / best * 1e-9:5.1f} ({flop / median * 1e-9:5.1f}){frac}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peak", type=float, default=None,
                        help="this core's FMA peak in GFLOP/s (bench_conv --peak)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    print(f"torch {torch.__version__}, 1 thread, mkldnn {torch.backends.mkldnn.is_available()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"GFLOP/s (per CPU second) of forward+backward, best (median) of {RUNS} runs, "
          "and the best's fraction of peak")
    print(f"{'shape':<26} {'batch':>5}  {'conv f+b (no dX)':<20} {'conv f+b+dX':<20} "
          f"{'fc f+b+dX':<20}")
    for c in (4, 6, 7, 10):
        for pad in (0, 1):
            for batch in (128, 512, 2048):
                conv = torch.nn.Conv2d(c, 16, 3, stride=1, padding=pad)
                x = torch.rand(batch, c, 10, 10) * 2 - 1
                out = 10 + 2 * pad - 2
                dy = (torch.rand(batch, 16, out, out) * 2 - 1) * 1e-3
                xg = x.clone().requires_grad_(True)

                def conv_fb(inp=x) -> None:
                    conv.weight.grad = None
                    conv.bias.grad = None
                    if inp.grad is not None:
                        inp.grad = None
                    conv(inp).backward(dy)

                conv_flop = 2.0 * batch * out * out * 9 * c * 16
                b1, m1 = best_time(conv_fb)
                b2, m2 = best_time(lambda: conv_fb(xg))

                fin = out * out * 16
                lin = torch.nn.Linear(fin, 128)
                fx = (torch.rand(batch, fin) * 2 - 1).requires_grad_(True)
                fdy = (torch.rand(batch, 128) * 2 - 1) * 1e-3

                def fc_fb() -> None:
                    lin.weight.grad = None
                    lin.bias.grad = None
                    fx.grad = None
                    lin(fx).backward(fdy)

                fc_flop = 3 * 2.0 * batch * fin * 128
                b3, m3 = best_time(fc_fb)
                shape = f"10x10x{c} p{pad} -> {out}x{out}x16 -> 128"
                print(f"{shape:<26} {batch:5d}  {column(2 * conv_flop, b1, m1, args.peak):<20} "
                      f"{column(3 * conv_flop, b2, m2, args.peak):<20} "
                      f"{column(fc_flop, b3, m3, args.peak):<20}", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
