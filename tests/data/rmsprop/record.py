#!/usr/bin/python3
"""Records torch.optim.RMSprop's bits for tests/test_rmsprop.c: for each setting, one
parameter tensor of N floats stepped STEPS times under recorded gradients, and after every
step the parameters, square_avg and grad_avg, each float as its 32 bits in hex.

Run beside the project, never by the tests (they read torch.txt):
    /usr/bin/python3 tests/data/rmsprop/record.py > tests/data/rmsprop/torch.txt
Debian's python3-torch 1.13 on an x86-64 CPU with AVX2 and FMA wrote the file.
"""
import numpy as np
import torch

N, STEPS = 21, 12  # 21: two 8-float vectors and a tail of 5
SETTINGS = [  # lr, alpha, eps, centered
    (2.5e-4, 0.95, 0.01, True),   # the MinAtar paper's DQN
    (1e-2, 0.99, 1e-8, False),    # PyTorch's defaults
    (1e-3, 0.9, 1e-6, True),
]


def hexes(a):
    return " ".join(f"{w:08x}" for w in np.asarray(a, np.float32).view(np.uint32))


def main():
    torch.set_num_threads(1)
    rs = np.random.RandomState(37)
    print(f"# torch {torch.__version__}: N STEPS, then per setting a line 'setting lr alpha eps "
          "centered', 'p0', and per step 'g', then 'p', 'v' (square_avg), 'm' (grad_avg; 0 "
          "when not centered)")
    print(N, STEPS)
    for lr, alpha, eps, centered in SETTINGS:
        print("setting", repr(lr), repr(alpha), repr(eps), int(centered))
        p0 = (rs.randn(N) * 0.5).astype(np.float32)
        p = torch.nn.Parameter(torch.from_numpy(p0.copy()))
        opt = torch.optim.RMSprop([p], lr=lr, alpha=alpha, eps=eps, centered=centered)
        print("p0", hexes(p0))
        for _ in range(STEPS):
            # gradients over six orders of magnitude, some of them 0
            g = (rs.randn(N) * rs.choice([0.0, 1e-3, 1.0, 30.0], size=N)).astype(np.float32)
            p.grad = torch.from_numpy(g.copy())
            opt.step()
            st = opt.state[p]
            print("g", hexes(g))
            print("p", hexes(p.detach().numpy()))
            print("v", hexes(st["square_avg"].numpy()))
            print("m", hexes(st["grad_avg"].numpy() if centered else np.zeros(N, np.float32)))


if __name__ == "__main__":
    main()
