"""Gymnasium-API environments written in Python for the tests of calf's Python-env
bridge (test_pyenv.py). They use calf's own minimal spaces, so Gymnasium need not be
installed; each is deterministic given its reset seed."""

from __future__ import annotations

import math
import os

import numpy as np

import calf

SEEDS: list[int | None] = []  # every reset's seed in this process, in call order


class Corridor:
    """Walk right to the exit: obs (x, t/50); actions left/right; 50-step limit of its own."""

    def __init__(self, fail_at: int | None = None, bad: str | None = None) -> None:
        self.observation_space = calf.Box(low=-10.0, high=10.0, shape=(2,), dtype=np.float32)
        self.action_space = calf.Discrete(2)
        self.rng: np.random.Generator | None = None
        self.fail_at, self.bad = fail_at, bad
        self.x, self.t = 0.0, 0

    def reset(self, seed: int | None = None, options: dict | None = None):
        SEEDS.append(seed)
        if seed is not None or self.rng is None:
            self.rng = np.random.default_rng(seed)
        self.x, self.t = float(self.rng.uniform(-1.0, 1.0)), 0
        return np.array([self.x, 0.0]), {}

    def step(self, action):
        self.t += 1
        if self.fail_at is not None and self.t == self.fail_at:
            raise ValueError(f"corridor broke at step {self.t}")
        self.x += 0.1 if int(action) == 1 else -0.1
        self.x += float(self.rng.normal(0.0, 0.01))
        term = self.x > 1.0
        obs = np.array([self.x, self.t / 50.0])
        if self.bad == "shape":
            obs = np.zeros(3)
        elif self.bad == "nan":
            obs[0] = math.nan
        elif self.bad == "tuple":
            return obs, 0.0, term, False
        elif self.bad == "exit":
            raise SystemExit(3)
        return obs, (1.0 if term else -0.01), term, self.t >= 50, {}

    def close(self) -> None:
        pass


class Swing:
    """A continuous pendulum-like task: obs (cos, sin, velocity); a torque in [-2, 2]."""

    def __init__(self) -> None:
        self.observation_space = calf.Box(low=-8.0, high=8.0, shape=(3,), dtype=np.float32)
        self.action_space = calf.Box(low=-2.0, high=2.0, shape=(1,), dtype=np.float32)
        self.rng: np.random.Generator | None = None
        self.th = self.dth = 0.0

    def _obs(self):
        return np.array([math.cos(self.th), math.sin(self.th), self.dth], dtype=np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None or self.rng is None:
            self.rng = np.random.default_rng(seed)
        self.th, self.dth = self.rng.uniform(-math.pi, math.pi), self.rng.uniform(-1, 1)
        return self._obs(), {}

    def step(self, u):
        u = float(np.clip(u, -2.0, 2.0)[0])
        cost = self.th**2 + 0.1 * self.dth**2 + 0.001 * u**2
        self.dth = float(np.clip(self.dth + (3 * 9.8 / 2 * math.sin(self.th) + 3.0 * u) * 0.05, -8, 8))
        self.th = (self.th + self.dth * 0.05 + math.pi) % (2 * math.pi) - math.pi
        return self._obs(), -cost, False, False, {}

    def close(self) -> None:
        pass


class Unpicklable(Corridor):
    """A Corridor holding a lambda: pickle refuses it."""

    def __init__(self) -> None:
        super().__init__()
        self.hook = lambda: None


def make_corridor() -> Corridor:
    return Corridor()


def make_swing() -> Swing:
    return Swing()


def make_unpicklable() -> Unpicklable:
    return Unpicklable()


class Faulty(Corridor):
    """A Corridor that misbehaves in one env only (told apart by its first reset's seed)
    at its 20th step overall: `mode` None raises, "shape", "nan" and "tuple" return a
    wrong value, "exit" raises SystemExit. The tests set the class attributes."""

    target_seed = -1
    mode: str | None = None

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.armed, self.total = seed == Faulty.target_seed, 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.total += 1
        if self.armed and self.total == 20:
            self.fail_at, self.bad = (self.t + 1 if Faulty.mode is None else None), Faulty.mode
        return super().step(action)


def make_faulty() -> Faulty:
    return Faulty()


def _launcher_rank() -> int:
    """This process's rank as mpirun tells it (0 outside mpirun)."""
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


class RankSized(Corridor):
    """A Corridor whose pickle is far larger on MPI rank 1 than on rank 0, so ranks that
    size its checkpoint slot from a fresh pickle each (register_env) disagree."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = bytes(40000 if _launcher_rank() == 1 else 10)


def make_rank_sized() -> RankSized:
    return RankSized()


class Clock:
    """obs (t, seed); reward 10 * seed + t; the env of seed 0 terminates at t = 3,
    and the env of seed NAN_SEED gives a NaN observation there."""

    NAN_SEED = 1

    def __init__(self) -> None:
        self.observation_space = calf.Box(low=-100.0, high=100.0, shape=(2,), dtype=np.float32)
        self.action_space = calf.Discrete(2)
        self.seed, self.t = 0, 0

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.seed = seed
        self.t = 0
        return np.array([0.0, self.seed]), {}

    def step(self, action):
        self.t += 1
        obs = np.array([self.t, self.seed], dtype=np.float64)
        if self.seed == Clock.NAN_SEED and self.t == 3:
            obs[0] = math.nan
        return obs, 10.0 * self.seed + self.t, self.seed == 0 and self.t == 3, False, {}

    def close(self) -> None:
        pass


def make_clock() -> Clock:
    return Clock()


class Growing(Corridor):
    """A Corridor whose pickle grows by 300 bytes a step: it outgrows a 4 KiB slot."""

    def __init__(self) -> None:
        super().__init__()
        self.trail = b""

    def step(self, action):
        self.trail += b"x" * 300
        return super().step(action)


def make_growing() -> Growing:
    return Growing()


class Padded(Corridor):
    """A Corridor whose fresh pickle is PADDED_SIZE bytes longer (default 1000; the tests
    change it, as a new version of an env's code would)."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = bytes(int(os.environ.get("PADDED_SIZE", "1000")))


def make_padded() -> Padded:
    return Padded()


class Tagged(Corridor):
    """A Corridor holding a set of strings, which pickles in hash order."""

    def __init__(self) -> None:
        super().__init__()
        self.tags = {"left", "right", "exit", "wall", "floor"}
        self.counts = {1, 2, 3}  # a set of ints pickles the same in every process


def make_tagged() -> Tagged:
    return Tagged()
