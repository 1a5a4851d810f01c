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

A pipeline job (:attr:`pal_opt.model.Job.pipeline`) counts as its demand in the walk, as a gang
does.  PAL chooses its GPUs as a gang's, and its stages are then mapped best on them
(:func:`pal_opt.cost.best_stage_order`: the slowest stages on the fastest GPUs), so its GPU list
(and the result's ``stages``) is in stage order, as ``ilp`` gives it.  A kept running job keeps
its GPU list, stage order included.  With GPU types a pipeline's GPUs come from one of its type
groups, as a gang's.

With GPU types (:func:`pal_opt.gputypes.has_types`) "fits" is counted per type: a job fits when
one of its type groups (:func:`pal_opt.gputypes.type_groups`: one usable type, or all of them if
it mixes; a guaranteed job's type) holds its demand of the GPUs no kept job holds and no job
admitted before claimed; it claims them from that group (:func:`pal_opt.gputypes.claim_types`,
best fit), or, failing that, the admitted jobs and it claim theirs afresh
(:func:`pal_opt.gputypes.claim_all`).  Otherwise the lower priorities' running jobs are evicted
per type (:func:`pal_opt.priority.evict_for_types`: in victim order until a group holds it, then
given back in reverse when not needed, so a victim always holds a GPU of a type the job may use).
The admitted jobs are then placed by :func:`place_claimed`: each job on the cheapest gang PAL
picks on one of its groups that leaves every later job room for its claim
(:class:`pal_opt.gputypes.TypeBudget`), or else on its claim itself; so every admitted job is
placed and no victim is evicted for nothing; the jobs the walk skipped are then tried once
more, one at a time, on what is left (:func:`backfill_types`).  Like the counting of :mod:`pal_opt.admission`, the
claims are greedy: a job may be skipped that a cleverer split of types would fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..cost import job_slowdown_pos, stages_mapped_best
from ..gputypes import (
    TypeBudget,
    claim_all,
    claim_types,
    fits_types,
    free_per_type,
    group_mask,
    has_types,
    type_groups,
)
from ..model import GpuState, JobId, RoundInstance
from ..priority import (
    admission_order,
    evict_for,
    evict_for_types,
    held_types,
    victim_order,
)
from ..seeds import SeedLike
from .base import GreedyPlacement, jobs_to_terminate, running_positions, to_ids
from .pal import place_sequence

__all__ = ["place", "evict_for", "place_claimed", "backfill_types"]


def place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None, respect_types: bool = True,
) -> GreedyPlacement:
    """The greedy preemption comparator on one round (module docstring; ``seed`` and
    ``respect_types`` are unused: GPU types are always respected).

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
    cl = instance.cluster
    jobs = instance.jobs
    order = admission_order(instance, moving=True)  # a running job that must move: first among its priority
    moving = set(order)
    kept = {i: running_positions(instance, i) for i, j in enumerate(jobs) if j.placement is not None and i not in moving}
    if has_types(instance):
        return _place_typed(instance, factors, order, kept)
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
    new = stages_mapped_best(instance, factors, place_sequence(instance, factors, admitted, free_mask=mask, backfill=True))
    out: dict[JobId, tuple[int, ...]] = {jobs[i].id: to_ids(cl, kept[i]) for i in sorted(kept)}
    out.update(new)
    return GreedyPlacement(out, jobs_to_terminate(instance, out), "preempt")


def _place_typed(instance: RoundInstance, factors: Mapping[str, np.ndarray], order: Sequence[int],
                 kept: dict[int, np.ndarray]) -> GreedyPlacement:
    """:func:`place` with GPU types (module docstring); ``kept``: the running jobs that need not
    move, on their GPU positions (changed: the victims leave it)."""
    cl = instance.cluster
    jobs = instance.jobs
    held = {i: held_types(instance, i) for i in kept}
    base = free_per_type(cl, cl.state == GpuState.FREE).astype(np.int64)
    base -= sum(held.values(), np.zeros_like(base))  # the GPUs no kept job holds
    claims: dict[int, np.ndarray] = {}
    for i in order:
        groups, d = type_groups(cl, jobs[i]), jobs[i].demand
        left = base - sum(claims.values(), np.zeros_like(base))
        took = _claim(groups, d, left)
        if took is None:
            tried = [*claims, i]
            again = claim_all({k: type_groups(cl, jobs[k]) for k in tried}, {k: jobs[k].demand for k in tried}, base)
            if again is not None:
                claims = again
                continue
            lower = victim_order(instance, [k for k in kept if jobs[k].priority < jobs[i].priority])
            victims = evict_for_types(groups, d, left, lower, held)
            if victims is None:
                continue
            for k in victims:
                kept.pop(k)
                base += held.pop(k)
            took = _claim(groups, d, base - sum(claims.values(), np.zeros_like(base)))
            assert took is not None  # the victims free enough GPUs of one group
        claims[i] = took
    mask = cl.state == GpuState.FREE
    for pos in kept.values():
        mask[pos] = False
    admitted = [i for i in order if i in claims]
    new = place_claimed(instance, factors, admitted, mask, claims)
    out: dict[JobId, tuple[int, ...]] = {jobs[i].id: to_ids(cl, kept[i]) for i in sorted(kept)}
    out.update(new)
    for gids in new.values():
        mask[cl.positions(gids)] = False
    out.update(backfill_types(instance, factors, [i for i in order if i not in claims], mask))
    return GreedyPlacement(out, jobs_to_terminate(instance, out), "preempt")


def backfill_types(instance: RoundInstance, factors: Mapping[str, np.ndarray], order: Sequence[int],
                   free_mask: np.ndarray) -> dict[JobId, tuple[int, ...]]:
    """The jobs of ``order`` that fit what is left, one at a time (rounds with GPU types): each
    job one of whose type groups still holds its demand of the GPUs of ``free_mask`` (changed) is
    placed there by PAL before the next is tried; a job skipped never fits later (the free GPUs
    only get fewer), so no job left out fits the GPUs left at the end.  (The placement may split
    types otherwise than the claims did, leaving room the admission walk did not count on.)"""
    cl = instance.cluster
    out: dict[JobId, tuple[int, ...]] = {}
    for i in order:
        job = instance.jobs[i]
        if not fits_types(type_groups(cl, job), job.demand, free_per_type(cl, free_mask)):
            continue
        got = place_sequence(instance, factors, [i], free_mask=free_mask)
        for jid, gids in got.items():
            free_mask[cl.positions(gids)] = False
            out[jid] = gids
    return out


def _claim(groups: Sequence[Sequence[int]], demand: int, free: np.ndarray) -> np.ndarray | None:
    """The GPUs per type :func:`~pal_opt.gputypes.claim_types` takes from ``free`` (not changed)."""
    left = np.array(free, dtype=np.int64)
    return np.asarray(free, dtype=np.int64) - left if claim_types(groups, demand, left) else None


def place_claimed(instance: RoundInstance, factors: Mapping[str, np.ndarray], order: Sequence[int],
                  free_mask: np.ndarray, claims: Mapping[int, np.ndarray]) -> dict[JobId, tuple[int, ...]]:
    """Place the jobs of ``order`` (rounds with GPU types) on the GPUs of ``free_mask``, given
    ``claims``, GPUs per type for each job that fit the free GPUs together.

    Each job, in order, takes the gang of least slowdown among PAL's choices on each of its type
    groups (:func:`~pal_opt.policies.pal.place_sequence` on the group's free GPUs) that leaves the
    later jobs room for their GPUs per type (:class:`~pal_opt.gputypes.TypeBudget`, started from
    ``claims``); if none does, the free GPUs of its claim, lowest positions first per type.  So
    every job is placed when the claims fit.
    """
    cl = instance.cluster
    jobs = instance.jobs
    mask = np.array(free_mask, dtype=bool)
    groups = {i: type_groups(cl, jobs[i]) for i in order}
    budget = TypeBudget(groups, {i: jobs[i].demand for i in order}, free_per_type(cl, mask), witness=claims)
    out: dict[JobId, tuple[int, ...]] = {}
    for i in order:
        pos = _cheapest_allowed(instance, factors, i, groups[i], mask, budget)
        if pos is None:
            own = budget.witness.get(i)
            if own is None:  # pragma: no cover - claims that do not fit the free GPUs
                continue
            pos = np.concatenate([np.flatnonzero(mask & (cl.type_of == k))[:int(n)] for k, n in enumerate(own.tolist())])
            budget.take(i, own)
        mask[pos] = False
        out[jobs[i].id] = to_ids(cl, pos)
    return out


def _cheapest_allowed(instance: RoundInstance, factors: Mapping[str, np.ndarray], i: int,
                      groups: Sequence[Sequence[int]], mask: np.ndarray, budget: TypeBudget) -> np.ndarray | None:
    """PAL's gang for job ``i`` on each of its type groups, the least slowdown first (the first
    group on ties); the first the budget allows is taken from it.  None if none is allowed."""
    cl = instance.cluster
    job = instance.jobs[i]
    options: list[tuple[float, int, np.ndarray]] = []
    for n, g in enumerate(groups):
        got = place_sequence(instance, factors, [i], free_mask=mask & group_mask(cl, g))
        if got:
            pos = cl.positions(got[job.id])
            options.append((job_slowdown_pos(cl, np.asarray(factors[job.perfclass]), job, pos), n, pos))
    for _, _, pos in sorted(options, key=lambda o: (o[0], o[1])):
        took = np.bincount(cl.type_of[pos], minlength=cl.num_types).astype(np.int64)
        if budget.allows(i, took):
            budget.take(i, took)
            return pos
    return None
