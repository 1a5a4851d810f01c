"""One helper for seeds: every random choice in pal-opt goes through :func:`make_rng`."""

from __future__ import annotations

import numpy as np

from .errors import OptionError

__all__ = ["SeedLike", "make_rng"]

SeedLike = int | np.random.Generator | None


def make_rng(seed: SeedLike = None) -> np.random.Generator:
    """A numpy Generator from an int, an existing Generator (returned as is) or None (seed 0).

    ``None`` means seed 0, not entropy: pal-opt is deterministic unless told otherwise.

    >>> int(make_rng(3).integers(100)) == int(make_rng(3).integers(100))
    True
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        seed = 0
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, a numpy Generator or None, got {type(seed).__name__}")
    if seed < 0:  # numpy's own message ("expected non-negative integer") names no seed
        raise OptionError(f"seed must be an integer >= 0, a numpy.random.Generator or None, got {seed!r}")
    return np.random.default_rng(int(seed))
