"""Packed placement, variability-blind: as few servers as possible (Blox's consolidated policy).

For a job of demand *d* (the artifact's ``_consolidated_placement`` in
``placement/packing_nonsticky.py`` and ``placement/packing_sticky.py``):

1. the first server (server order) with exactly *d* free GPUs;
2. else the server with the fewest free GPUs among those with ≥ *d* (first on ties), taking its
   first *d* free GPUs;
3. else, if ≥ *d* GPUs are free in all, spill: repeatedly take the server with the most free
   GPUs left (first in server order on ties, as ``Counter.most_common``) and its first free GPUs
   until *d* are taken.

Free GPUs of a server are taken in GPU position order.

Two queue rules:

``packed`` (non-sticky, admission ``"queue-order"``)
    Running jobs are freed; jobs are placed in queue order, stopping at the first that does not
    fit.
``packed-sticky`` (admission ``"sticky"``)
    Running jobs keep their GPUs (a running job on a GPU that failed or was taken since must
    move: it is terminated and waits in its queue place like a new job).  Waiting jobs are placed in queue order; when one does not
    fit, running jobs are preempted from the back of the queue (lowest priority first), one at
    a time, until it fits; placement stops at the first job that still does not fit.  A job
    preempted this way waits like any other when its turn comes (as in the artifact), but it
    never fits then: the preempted jobs are always the running jobs behind some point of the
    queue, and when the frontmost of them is reached fewer GPUs are free than it needs (otherwise
    the last preemption would not have been necessary), with nothing behind it left to preempt.
    So every preempted job is in ``jobs_to_terminate`` and not placed.  The argument needs the
    round to end at the first job that does not fit and every GPU to fit every job: with
    ``backfill`` a smaller preempted job behind a skipped one may fit, and with GPU types a job
    preempted to make room on one type may fit another.  Such a job is placed when its turn
    comes, on other GPUs (terminated, and started again).

Deviation: the artifact seeds step 2 with a cap of 256 free GPUs, so a server with 256 or more
free GPUs is never chosen there; no cap here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..model import GpuState, RoundInstance
from ..seeds import SeedLike
from .base import (
    FreeGpus,
    GreedyPlacement,
    Select,
    admission_label,
    initial_free,
    jobs_to_terminate,
    place_in_order,
    running_positions,
    to_ids,
    typed_select,
)

__all__ = ["packed_select", "packed_job_select", "place", "place_sticky"]


def packed_select(state: FreeGpus, demand: int) -> np.ndarray | None:
    """The consolidated choice for ``demand`` GPUs (see the module docstring), or None."""
    fc = state.server_free
    if demand <= 0 or state.num_free < demand:
        return None
    exact = np.flatnonzero(fc == demand)
    if exact.size:
        return state.free_on_server(int(exact[0]))
    roomy = fc >= demand
    if roomy.any():
        s = int(np.argmin(np.where(roomy, fc, np.iinfo(np.int64).max)))
        return state.free_on_server(s)[:demand]
    order = np.argsort(-fc, kind="stable")
    cum = np.cumsum(fc[order])
    k = int(np.searchsorted(cum, demand)) + 1
    parts = [state.free_on_server(int(s)) for s in order[:k]]
    parts[-1] = parts[-1][: demand - (int(cum[k - 2]) if k > 1 else 0)]
    return np.concatenate(parts)


def packed_job_select(instance: RoundInstance, factors: Mapping[str, np.ndarray], respect_types: bool = True) -> Select:
    """The consolidated choice for job ``i`` of ``instance``, within its GPU types unless
    ``respect_types`` is False (:func:`~pal_opt.policies.base.typed_select`)."""
    jobs = instance.jobs

    def select(state: FreeGpus, i: int) -> np.ndarray | None:
        return packed_select(state, jobs[i].demand)

    return typed_select(instance, factors, select) if respect_types else select


def place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None, backfill: bool = False,
    respect_types: bool = True,
) -> GreedyPlacement:
    """Non-sticky packed placement in queue order (``seed`` is unused; ``factors`` only choose
    among a job's GPU types); with ``backfill`` a job that does not fit is skipped instead of
    ending the round; ``respect_types=False`` ignores GPU types.

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.from_arrays(range(7), [0, 0, 0, 0, 1, 1, 1], {"classA": [1.0] * 7})
    >>> jobs = (Job("a", 3, "classA", 0), Job("b", 2, "classA", 1), Job("c", 2, "classA", 2))
    >>> place(RoundInstance(c, jobs), c.factors).placements
    {'a': (4, 5, 6), 'b': (0, 1), 'c': (2, 3)}
    """
    jobs = instance.jobs
    out = place_in_order(instance, factors, range(len(jobs)), lambda state, i: packed_select(state, jobs[i].demand),
                         backfill=backfill, classes=False, respect_types=respect_types)
    return GreedyPlacement(out, jobs_to_terminate(instance, out), admission_label("queue-order", backfill))


def place_sticky(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None, backfill: bool = False,
    respect_types: bool = True,
) -> GreedyPlacement:
    """Sticky packed placement with preemption from the back of the queue.

    A running job keeps its GPUs unless one of them has failed or been taken (state ``FAILED`` or
    ``BUSY``): such a job must move, and waits in its queue place like a new job.
    ``seed`` is unused; ``factors`` only choose among a job's GPU types.  With ``backfill`` a
    waiting job that does not fit, even after preempting every running job behind it, is
    skipped instead of ending the round, and the jobs preempted for it keep their GPUs; without
    it the round ends there and they stay preempted, as in the artifact (their GPUs may then stay
    idle this round).  ``respect_types=False`` ignores GPU types.

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(2, 2, {"classA": [1.0] * 4})
    >>> jobs = (Job("new", 3, "classA", 0), Job("old", 2, "classA", 1, placement=(0, 1)))
    >>> g = place_sticky(RoundInstance(c, jobs), c.factors)
    >>> g.placements, g.jobs_to_terminate
    ({'new': (0, 1, 2)}, ('old',))
    """
    cl = instance.cluster
    jobs = instance.jobs
    free = initial_free(instance)
    held: dict[int, np.ndarray] = {}
    for i, job in enumerate(jobs):
        if job.placement is not None:
            now = running_positions(instance, i)
            if (cl.state[now] == GpuState.FREE).all():  # else a GPU failed or was taken: it must move
                held[i] = now
                free[now] = False
    state = FreeGpus(cl, free)
    select = packed_job_select(instance, factors, respect_types)
    placed: dict[int, np.ndarray] = {}
    for i in range(len(jobs)):
        if i in held:
            continue
        pos = select(state, i)
        if pos is None:
            victims: dict[int, np.ndarray] = {}
            for k in range(len(jobs) - 1, i, -1):
                victim = held.pop(k, None)
                if victim is None:
                    continue
                victims[k] = victim
                state.release(victim)
                pos = select(state, i)
                if pos is not None:
                    break
            if pos is None and backfill:  # the job is skipped: preempting for it would gain nothing
                for k, victim in victims.items():
                    state.take(victim)
                    held[k] = victim
        if pos is None:
            if backfill:
                continue
            break
        state.take(pos)
        placed[i] = pos
    # report in queue order: jobs that kept their GPUs and jobs placed this round
    keep = {**held, **placed}
    out = {jobs[i].id: to_ids(cl, keep[i]) for i in sorted(keep)}
    return GreedyPlacement(out, jobs_to_terminate(instance, out), admission_label("sticky", backfill))
