"""calf's minimal spaces, ``Box``, ``Discrete``, ``MultiDiscrete`` and ``Dict``: what a
``VecEnv`` carries when Gymnasium is not installed, with the attributes of Gymnasium's
spaces (``shape``, ``dtype``, ``low``/``high``, ``n``, ``nvec``, ``spaces``,
``sample()``, ``seed()``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


class _Space:
    """What calf's minimal spaces share: shape, dtype and a seedable generator."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __init__(self, shape: tuple[int, ...], dtype: Any, seed: int | None = None) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        # As Gymnasium's spaces: no generator until one is asked for, so an unseeded
        # space holds no entropy (and pickles to the same bytes in every process).
        self._np_random: np.random.Generator | None = None
        if seed is not None:
            self.seed(seed)

    @property
    def np_random(self) -> np.random.Generator:
        """The generator ``sample()`` draws from; made from OS entropy when first used
        unless ``seed()`` made it."""
        if self._np_random is None:
            self._np_random = np.random.default_rng()
        return self._np_random

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Reseed the generator that ``sample()`` draws from."""
        self._np_random = np.random.default_rng(seed)
        return [seed]

    def __contains__(self, x: Any) -> bool:
        return self.contains(x)

    def contains(self, x: Any) -> bool:  # pragma: no cover - every space overrides it
        raise NotImplementedError


class Box(_Space):
    """A box of reals: ``low <= x <= high`` elementwise, of ``shape`` and ``dtype``.

    ``low``, ``high``: arrays of ``shape`` and ``dtype`` (float32 in calf); infinite
    bounds are allowed.
    """

    def __init__(
        self,
        low: Any,
        high: Any,
        shape: tuple[int, ...] | None = None,
        dtype: Any = np.float32,
        seed: int | None = None,
    ) -> None:
        if shape is None:
            shape = np.shape(low)
        super().__init__(shape, dtype, seed)
        self.low = np.broadcast_to(np.asarray(low, dtype=self.dtype), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=self.dtype), self.shape).copy()

    def sample(self) -> np.ndarray:
        """A point of the box: uniform where both bounds are finite, else normal
        (shifted exponential on a half-bounded side), as Gymnasium draws."""
        low = self.low.astype(np.float64)
        high = self.high.astype(np.float64)
        out = self.np_random.normal(size=self.shape)
        lo_fin, hi_fin = np.isfinite(low), np.isfinite(high)
        both = lo_fin & hi_fin
        out[both] = self.np_random.uniform(low[both], high[both])
        lower_only = lo_fin & ~hi_fin
        out[lower_only] = low[lower_only] + self.np_random.exponential(size=lower_only.sum())
        upper_only = ~lo_fin & hi_fin
        out[upper_only] = high[upper_only] - self.np_random.exponential(size=upper_only.sum())
        return np.clip(out, low, high).astype(self.dtype)

    def contains(self, x: Any) -> bool:
        """Whether x has this shape and lies within the bounds."""
        x = np.asarray(x)
        return bool(
            x.shape == self.shape
            and np.can_cast(x.dtype, self.dtype)
            and np.all(x >= self.low)
            and np.all(x <= self.high)
        )

    def __repr__(self) -> str:
        return f"Box({self.low.min()}, {self.high.max()}, {self.shape}, {self.dtype})"


class Discrete(_Space):
    """The integers ``0 .. n-1`` (dtype int64, shape ``()``)."""

    def __init__(self, n: int, seed: int | None = None) -> None:
        super().__init__((), np.int64, seed)
        self.n = int(n)
        self.start = 0

    def sample(self) -> np.int64:
        """A uniformly drawn integer in ``0 .. n-1``."""
        return np.int64(self.np_random.integers(self.n))

    def contains(self, x: Any) -> bool:
        """Whether x is an integer in ``0 .. n-1``."""
        x = np.asarray(x)
        return bool(x.shape == () and x.dtype.kind in "iu" and 0 <= int(x) < self.n)

    def __repr__(self) -> str:
        return f"Discrete({self.n})"


class MultiDiscrete(_Space):
    """A vector of integers, element i in ``0 .. nvec[i]-1`` (dtype int64)."""

    def __init__(self, nvec: Any, seed: int | None = None) -> None:
        self.nvec = np.asarray(nvec, dtype=np.int64)
        super().__init__(self.nvec.shape, np.int64, seed)
        self.start = np.zeros_like(self.nvec)

    def sample(self) -> np.ndarray:
        """A uniformly drawn vector, shape ``nvec.shape``, int64."""
        return self.np_random.integers(self.nvec).astype(np.int64)

    def contains(self, x: Any) -> bool:
        """Whether x has this shape and each element lies in its range."""
        x = np.asarray(x)
        return bool(
            x.shape == self.shape
            and x.dtype.kind in "iu"
            and np.all(x >= 0)
            and np.all(x < self.nvec)
        )

    def __repr__(self) -> str:
        return f"MultiDiscrete({self.nvec})"


class Dict(_Space):
    """Named spaces (calf's: Boxes), in the order given: a Dict observation's parts.
    ``shape`` and ``dtype`` are None, as Gymnasium's Dict has them."""

    def __init__(self, spaces: Mapping[Any, _Space], seed: int | None = None) -> None:
        self.spaces: dict[Any, _Space] = dict(spaces)
        super().__init__((), np.float32, None)
        self.shape = None  # type: ignore[assignment]
        self.dtype = None  # type: ignore[assignment]
        if seed is not None:
            self.seed(seed)

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Reseed each part's generator (part k from seed + k, or all from entropy)."""
        for k, space in enumerate(self.spaces.values()):
            space.seed(None if seed is None else seed + k)
        return [seed]

    def sample(self) -> dict[Any, Any]:
        """A point of each part, by key."""
        return {key: space.sample() for key, space in self.spaces.items()}

    def contains(self, x: Any) -> bool:
        """Whether x is a mapping of exactly these keys, each value in its part."""
        return (isinstance(x, Mapping) and set(x) == set(self.spaces)
                and all(space.contains(x[key]) for key, space in self.spaces.items()))

    def __getitem__(self, key: Any) -> _Space:
        return self.spaces[key]

    def __repr__(self) -> str:
        return "Dict(" + ", ".join(f"{k!r}: {v!r}" for k, v in self.spaces.items()) + ")"
