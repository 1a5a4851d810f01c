"""Random placement: a variability- and locality-blind baseline.

Running jobs are freed; jobs are placed in queue order, each on ``demand`` GPUs drawn uniformly
without replacement from the free GPUs, stopping at the first job that does not fit (the
artifact's ``placement/random_nonsticky.py``).  Draws come from
:func:`pal_opt.seeds.make_rng`, so a seed fixes the placement.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..model import JobId, RoundInstance
from ..seeds import SeedLike, make_rng
from .base import GreedyPlacement, initial_free, jobs_to_terminate, to_ids

__all__ = ["place"]


def place(instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None) -> GreedyPlacement:
    """Random placement of one round (``factors`` is unused).

    Parameters
    ----------
    instance
        The round.
    factors
        Unused; part of the policy signature.
    seed
        An int, a numpy Generator or None (= seed 0).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(2, 4, {"classA": [1.0] * 8})
    >>> inst = RoundInstance(c, (Job("a", 3, "classA"),))
    >>> place(inst, c.factors, seed=7) == place(inst, c.factors, seed=7)
    True
    """
    rng = make_rng(seed)
    cl = instance.cluster
    free = initial_free(instance)
    out: dict[JobId, tuple[int, ...]] = {}
    for job in instance.jobs:
        avail = np.flatnonzero(free)
        if job.demand <= 0 or job.demand > avail.size:
            break
        pos = avail[rng.choice(avail.size, size=job.demand, replace=False)]
        free[pos] = False
        out[job.id] = to_ids(cl, pos)
    return GreedyPlacement(out, jobs_to_terminate(instance, out), "queue-order")
