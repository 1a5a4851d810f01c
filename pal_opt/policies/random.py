"""Random placement: a variability- and locality-blind baseline.

Running jobs are freed; jobs are placed in queue order, each on ``demand`` GPUs drawn uniformly
without replacement from the free GPUs, stopping at the first job that does not fit (the
artifact's ``placement/random_nonsticky.py``).  Draws come from
:func:`pal_opt.seeds.make_rng`, so a seed fixes the placement.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..model import RoundInstance
from ..seeds import SeedLike, make_rng
from .base import FreeGpus, GreedyPlacement, admission_label, jobs_to_terminate, place_in_order

__all__ = ["place"]


def place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None, backfill: bool = False,
    respect_types: bool = True,
) -> GreedyPlacement:
    """Random placement of one round in queue order (``factors`` is unused); with ``backfill`` a
    job that does not fit is skipped instead of ending the round.

    Parameters
    ----------
    instance
        The round.
    factors
        Unused; part of the policy signature.
    seed
        An int, a numpy Generator or None (= seed 0).
    backfill
        Skip what does not fit instead of stopping.
    respect_types
        Draw each job's GPUs from one of its usable GPU types (False: ignore types).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(2, 4, {"classA": [1.0] * 8})
    >>> inst = RoundInstance(c, (Job("a", 3, "classA"),))
    >>> place(inst, c.factors, seed=7) == place(inst, c.factors, seed=7)
    True
    """
    rng = make_rng(seed)
    jobs = instance.jobs

    def select(state: FreeGpus, i: int) -> np.ndarray | None:
        avail = np.flatnonzero(state.free)
        d = jobs[i].demand
        return avail[rng.choice(avail.size, size=d, replace=False)] if d <= avail.size else None

    out = place_in_order(instance, factors, range(len(jobs)), select, backfill=backfill, classes=False,
                         respect_types=respect_types)
    return GreedyPlacement(out, jobs_to_terminate(instance, out), admission_label("queue-order", backfill))
