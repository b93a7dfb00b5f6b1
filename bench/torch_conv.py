"""torch_conv.py: PyTorch's side of bench/bench_conv.c: Conv2d and Linear on one CPU thread.

MinAtar's network on the shapes bench_conv passes (C:B): Conv2d(C, 16, 3, stride 1, no
padding) on (B, C, 10, 10), then Linear(1024, 128). Four columns, as bench_conv's: the
conv forward; the conv forward + backward without dX (a first layer: weight and bias
gradients only); the fc forward; the fc forward + backward with dX. Timed in this
thread's CPU seconds (time.thread_time; the machine is shared), runs of >= 3 ms, the best
and the median of 31. Prints "CONV <shape index> <column> <best s> <median s>" per cell
(bench_conv --torch reads them) after a line naming torch and its BLAS.
Run: /usr/bin/python3 bench/torch_conv.py 4:64 4:1024 ...  (Debian's python3-torch).
"""
import argparse
import time

import torch

RUNS = 31


def best_time(fn) -> tuple[float, float]:
    """CPU seconds per call of fn: best and median of RUNS runs of >= 3 ms each."""
    fn()
    reps = 1
    while True:
        t0 = time.thread_time()
        for _ in range(reps):
            fn()
        if time.thread_time() - t0 >= 0.003 or reps >= 1 << 20:
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


def blas_loaded() -> str:
    """The BLAS library this process mapped (Debian's torch calls the libblas.so.3 the
    dynamic linker finds: netlib's reference BLAS by default, OpenBLAS when installed or
    first on LD_LIBRARY_PATH)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "blas" in path.lower() and ".so" in path:
                return path
    return "none found"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="+", help="C:B, channels and batch")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    torch.ones(4, 4) @ torch.ones(4, 4)  # loads the BLAS
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, mkldnn "
          f"{torch.backends.mkldnn.is_available()}, BLAS {blas_loaded()}", flush=True)
    for k, spec in enumerate(args.shapes):
        c, batch = (int(v) for v in spec.split(":"))
        conv = torch.nn.Conv2d(c, 16, 3, stride=1, padding=0)
        x = (torch.rand(batch, c, 10, 10) < 0.1).float()  # MinAtar's 0/1 cells
        dy = (torch.rand(batch, 16, 8, 8) * 2 - 1) * 1e-3

        def conv_f() -> None:
            with torch.no_grad():
                conv(x)

        def conv_fb() -> None:
            conv.weight.grad = None
            conv.bias.grad = None
            conv(x).backward(dy)

        lin = torch.nn.Linear(1024, 128)
        fx = (torch.rand(batch, 1024) * 2 - 1).requires_grad_(True)
        fdy = (torch.rand(batch, 128) * 2 - 1) * 1e-3

        def fc_f() -> None:
            with torch.no_grad():
                lin(fx)

        def fc_fb() -> None:
            lin.weight.grad = None
            lin.bias.grad = None
            fx.grad = None
            lin(fx).backward(fdy)

        for col, fn in enumerate((conv_f, conv_fb, fc_f, fc_fb)):
            best, median = best_time(fn)
            print(f"CONV {k} {col} {best:.9f} {median:.9f}", flush=True)


if __name__ == "__main__":
    main()
