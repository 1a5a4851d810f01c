"""The greedy preemption comparator (``preempt-greedy``): evict by priority, then by start time.

Kueue's and Volcano's rule, with PAL's placement:

1. every running job keeps its GPUs (a job whose GPUs are no longer all free waits instead);
2. waiting jobs are taken highest priority first, then in queue order
   (:func:`pal_opt.priority.admission_order`).  A job that fits the free GPUs is admitted.  One
   that does not is admitted if it fits once every running job of a *lower* priority still
   running is evicted: the candidates are evicted in :func:`pal_opt.priority.victim_order`
   (lowest priority first, then the most recently started) until it fits, and then, as Kueue's
   minimal preemption does, each victim but the last is given back its GPUs, in reverse order,
   if the job still fits without them.  A job that does not fit even so is skipped;
3. the admitted jobs are placed with PAL's rules (:func:`pal_opt.policies.pal.place_sequence`)
   in admission order on the GPUs the kept jobs do not hold.

The result's queue rule is ``"preempt"`` (:mod:`pal_opt.check`); the evicted jobs are in
``jobs_to_terminate``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..model import GpuState, JobId, RoundInstance
from ..priority import admission_order, check_preemptible, evict_for, victim_order
from ..seeds import SeedLike
from .base import GreedyPlacement, jobs_to_terminate, running_positions, to_ids
from .pal import place_sequence

__all__ = ["place", "evict_for"]


def place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None, respect_types: bool = True,
) -> GreedyPlacement:
    """The greedy preemption comparator on one round (module docstring; ``seed`` and
    ``respect_types`` are unused: rounds with GPU types are not supported yet).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    >>> jobs = (Job("old", 2, "classA", placement=(0, 1), started=0.0),
    ...         Job("new", 2, "classA", placement=(2, 3), started=360.0), Job("hi", 2, "classA", priority=1))
    >>> g = place(RoundInstance(c, jobs), c.factors)
    >>> g.placements, g.jobs_to_terminate
    ({'old': (0, 1), 'hi': (2, 3)}, ('new',))
    """
    check_preemptible(instance)
    cl = instance.cluster
    jobs = instance.jobs
    order = admission_order(instance, moving=True)  # a running job that must move: first among its priority
    moving = set(order)
    kept = {i: running_positions(instance, i) for i, j in enumerate(jobs) if j.placement is not None and i not in moving}
    free = instance.free_gpus - sum(p.size for p in kept.values())
    admitted: list[int] = []
    for i in order:
        lower = victim_order(instance, [k for k in kept if jobs[k].priority < jobs[i].priority])
        victims = evict_for(instance, jobs[i].demand, free, lower)
        if victims is None:
            continue
        for k in victims:
            free += kept.pop(k).size
        free -= jobs[i].demand
        admitted.append(i)
    mask = cl.state == GpuState.FREE
    for pos in kept.values():
        mask[pos] = False
    new = place_sequence(instance, factors, admitted, free_mask=mask, backfill=True)
    out: dict[JobId, tuple[int, ...]] = {jobs[i].id: to_ids(cl, kept[i]) for i in sorted(kept)}
    out.update(new)
    return GreedyPlacement(out, jobs_to_terminate(instance, out), "preempt")
