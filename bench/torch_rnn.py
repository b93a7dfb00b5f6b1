"""PyTorch's side of bench/bench_rnn.c: nn.LSTM / nn.GRU forward + backward through time
on one CPU thread, for the shapes bench_rnn passes (kind:in:hidden:T:B). Prints one line
per shape, "RNN <index> <forward seconds> <forward+backward seconds>", each the fastest of
5 x --repeats runs (each at least 30 ms) in CPU time of the calling thread
(time.thread_time, as bench_rnn: the machine is shared); the forward alone under
torch.no_grad(), as an acting policy runs it.

The whole sequence goes through one nn.LSTM / nn.GRU call (PyTorch's fastest CPU path,
the input products of all steps in one matrix product), without episode-start resets:
CleanRL's ppo_atari_lstm steps the cell one timestep at a time to apply them, which is
slower, so this is the stronger baseline.
"""
import argparse
import time

import torch


def best_of(fn, repeats: int) -> float:
    fn()
    t0 = time.thread_time()
    fn()
    single = time.thread_time() - t0
    reps = 1 if single > 0.03 else int(0.03 / max(single, 1e-6)) + 1
    best = float("inf")
    for _ in range(5 * repeats):
        t0 = time.thread_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.thread_time() - t0) / reps)
    return best


def time_shape(kind: str, n_in: int, hidden: int, T: int, B: int,
               repeats: int) -> tuple[float, float]:
    torch.manual_seed(0)
    cell = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(n_in, hidden)
    x = torch.rand(T, B, n_in) * 2 - 1
    x.requires_grad_(True)
    h0 = torch.rand(1, B, hidden) - 0.5
    state = (h0, torch.rand(1, B, hidden) - 0.5) if kind == "lstm" else h0
    dy = (torch.rand(T, B, hidden) * 2 - 1) * 1e-3

    def fwd() -> None:
        with torch.no_grad():
            cell(x, state)

    def once() -> None:
        cell.zero_grad(set_to_none=True)
        x.grad = None
        y, _ = cell(x, state)
        y.backward(dy)

    return best_of(fwd, repeats), best_of(once, repeats)


def blas_loaded() -> str:
    """The BLAS library this process mapped (Debian's torch calls the libblas.so.3 that
    the dynamic linker finds: netlib's reference BLAS by default, OpenBLAS when it is
    installed or put first on LD_LIBRARY_PATH)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "blas" in path.lower() and ".so" in path:
                return path
    return "none found"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("shapes", nargs="+", help="kind:in:hidden:T:B, kind lstm or gru")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.ones(4, 4) @ torch.ones(4, 4)  # loads the BLAS
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, BLAS {blas_loaded()}",
          flush=True)
    for k, spec in enumerate(args.shapes):
        kind, n_in, hidden, T, B = spec.split(":")
        fwd, fb = time_shape(kind, int(n_in), int(hidden), int(T), int(B), args.repeats)
        print(f"RNN {k} {fwd:.9f} {fb:.9f}", flush=True)


if __name__ == "__main__":
    main()
