"""One helper for seeds: every random choice in pal-opt goes through :func:`make_rng`."""

from __future__ import annotations

import numpy as np

from .options import check_seed

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
    check_seed(seed)  # numpy's own messages ("expected non-negative integer") name no seed
    return np.random.default_rng(0 if seed is None else int(seed))
