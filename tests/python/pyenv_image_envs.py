"""Python environments with image and Dict observations for test_pyenv_spaces.py, and
stand-ins for Gymnasium's Dict, Tuple and Text spaces (printed and laid out as
Gymnasium's: a Dict's keys sorted), so Gymnasium need not be installed."""

from __future__ import annotations

import numpy as np

import calf


class Dict:
    """Gymnasium's Dict as calf reads it: ``spaces``, the parts in sorted key order."""

    def __init__(self, spaces: dict) -> None:
        self.spaces = dict(sorted(spaces.items()))

    def __repr__(self) -> str:
        return "Dict(" + ", ".join(f"{k!r}: {v!r}" for k, v in self.spaces.items()) + ")"


class Tuple:
    def __init__(self, spaces: tuple) -> None:
        self.spaces = spaces

    def __repr__(self) -> str:
        return "Tuple(" + ", ".join(repr(s) for s in self.spaces) + ")"


class Text:
    def __repr__(self) -> str:
        return "Text(1, 8, charset=abc)"


class Painter:
    """A (6, 5, 3) uint8 image: the cell at the painter's place is lit with its step
    count; actions move it along the rows. With high=3 its Box says values 0..3, and
    bad=True makes it write 7 from step 4 on (out of its space)."""

    SHAPE = (6, 5, 3)

    def __init__(self, high: int = 255, bad: bool = False, flat: bool = False) -> None:
        self.high, self.bad, self.flat = high, bad, flat
        self.observation_space = calf.Box(0, high, self.SHAPE, np.uint8)
        self.action_space = calf.Discrete(2)
        self.rng: np.random.Generator | None = None
        self.pos = self.t = 0

    def _obs(self):
        img = np.zeros(self.SHAPE, np.uint8)
        v = 7 if self.bad and self.t >= 4 else min(self.t, self.high)
        img[self.pos // 5, self.pos % 5, self.t % 3] = v
        img[0, 0, 0] = min(self.high, 200)
        return img.reshape(6, 15) if self.flat else img

    def reset(self, seed=None, options=None):
        if seed is not None or self.rng is None:
            self.rng = np.random.default_rng(seed)
        self.pos, self.t = int(self.rng.integers(30)), 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.pos = (self.pos + (1 if int(action) == 1 else 29)) % 30
        done = self.pos == 29
        return self._obs(), (1.0 if done else -0.05), done, self.t >= 30, {}


class Rover:
    """A Dict observation of two Boxes, "pos" (2,) float32 and "map" (2, 3) uint8, given
    here in unsorted key order (the Dict space sorts them: "map" comes first)."""

    def __init__(self) -> None:
        self.observation_space = Dict({
            "pos": calf.Box(-1.0, 1.0, (2,), np.float32),
            "map": calf.Box(0, 255, (2, 3), np.uint8),
        })
        self.action_space = calf.Discrete(3)
        self.rng: np.random.Generator | None = None
        self.x = 0.0
        self.t = 0

    def _obs(self):
        m = np.arange(6, dtype=np.uint8).reshape(2, 3) * np.uint8(self.t % 7)
        return {"pos": np.array([self.x, self.t / 20.0], np.float32), "map": m}

    def reset(self, seed=None, options=None):
        if seed is not None or self.rng is None:
            self.rng = np.random.default_rng(seed)
        self.x, self.t = float(self.rng.uniform(-0.5, 0.5)), 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.x = float(np.clip(self.x + (int(action) - 1) * 0.1, -1, 1))
        done = self.x >= 0.99
        return self._obs(), (1.0 if done else -0.01), done, self.t >= 20, {}


class ByteRover(Rover):
    """Rover whose parts are both uint8: the whole kept as bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = Dict({
            "pos": calf.Box(0, 9, (2,), np.uint8),
            "map": calf.Box(0, 255, (2, 3), np.uint8),
        })

    def _obs(self):
        o = super()._obs()
        o["pos"] = np.array([self.t % 10, 3], np.uint8)
        return o


def make_painter():
    return Painter()


def make_small_painter():
    return Painter(high=3)


def make_bad_painter():
    return Painter(high=3, bad=True)


def make_rover():
    return Rover()


def make_byte_rover():
    return ByteRover()
