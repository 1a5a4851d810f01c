"""Queue rules: which jobs a round places, and in which order.

``pal-order`` (the greedy policies' default, as the PAL artifact does it)
    Running jobs are freed.  The queue is cut at the longest prefix whose total demand fits the
    cluster's total GPU count (busy and failed GPUs included).  That prefix is stable-sorted by
    class (classA < classB < classC < classD < any other), the rest follow in queue order, and
    placement stops at the first job that cannot be placed.
``prefix`` (integer programs)
    The longest queue prefix whose total demand fits the GPUs that are free this round; every
    admitted job must be placed.  Always feasible, since any gang may span the cluster.
``backfill`` (integer programs)
    Lexicographic in queue order: walk the queue and admit each job that still fits the free
    GPUs left.  Because any set whose total demand fits the free GPUs can be placed, this greedy
    walk is exactly the lexicographic maximum, so a later job never displaces an earlier one.

With GPU types (:func:`pal_opt.gputypes.has_types`) "fits" is counted per type: each admitted
job claims its demand from the free GPUs of one of its type groups
(:func:`pal_opt.gputypes.claim_types`, best fit), so the admitted set always has a placement
(any gang may span a type's GPUs) and the round program stays feasible.  The claim is greedy:
with jobs of several usable types it may leave out a job that a cleverer split would fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .errors import OptionError, counted
from .gputypes import (
    claim_all,
    claim_types,
    free_per_type,
    has_types,
    service_problem,
    type_groups,
    type_problem,
)
from .model import PAL_CLASSES, GpuState, JobId, RoundInstance

__all__ = ["ADMISSION_MODES", "class_rank", "pal_order", "admit", "claim_placement", "unplaceable"]

ADMISSION_MODES: tuple[str, ...] = ("prefix", "backfill")


def unplaceable(instance: RoundInstance, *, types: bool = True) -> dict[JobId, str]:
    """Jobs no placement of this round can ever serve, with the reason (queue order).

    Such a job is a fact of the queue, not bad input: the PAL artifact keeps it.  Prefix
    admission and PAL's order stop at it; backfill skips it.  With GPU types a job is also
    unplaceable when its types hold fewer GPUs than its demand (:func:`pal_opt.gputypes.type_problem`)
    or fewer in service (:func:`pal_opt.gputypes.service_problem`); ``types=False`` (a placement
    that ignores types) leaves those out.

    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(2, 2, {"classA": [1.0] * 4}, state=[0, 0, 0, 2])
    >>> unplaceable(RoundInstance(c, (Job("big", 10000, "classA"), Job("b", 4, "classA", 1))))
    {'big': 'needs 10000 GPUs; the cluster has 4', 'b': 'needs 4 GPUs; 3 are in service (1 failed)'}
    """
    cl = instance.cluster
    total = cl.num_gpus
    failed = int((cl.state == GpuState.FAILED).sum())
    typed = has_types(instance)
    out: dict[JobId, str] = {}
    for j in instance.jobs:
        if j.demand > total:
            out[j.id] = f"needs {counted(j.demand, 'GPU')}; the cluster has {total}"
        elif j.demand > total - failed:
            out[j.id] = f"needs {counted(j.demand, 'GPU')}; {total - failed} are in service ({failed} failed)"
        elif typed and types:
            problem = type_problem(cl, j)
            why = problem[1] if problem is not None else service_problem(cl, j)
            if why is not None:
                out[j.id] = why
    return out


def class_rank(perfclass: str) -> int:
    """PAL's class sort key: classA..classD -> 0..3, anything else -> 4."""
    try:
        return PAL_CLASSES.index(perfclass)
    except ValueError:
        return len(PAL_CLASSES)


def pal_order(instance: RoundInstance, capacity: int | None = None) -> list[int]:
    """Job indices in the order the PAL artifact tries them (see module docstring).

    ``capacity`` defaults to the cluster's total GPU count.
    """
    cap = instance.cluster.num_gpus if capacity is None else capacity
    cum = _clipped_cumsum(instance, cap)
    cut = int(np.searchsorted(cum, cap, side="right"))
    head = sorted(range(cut), key=lambda i: class_rank(instance.jobs[i].perfclass))
    return head + list(range(cut, len(instance.jobs)))


def _clipped_cumsum(instance: RoundInstance, cap: int) -> np.ndarray:
    """The running total of the queue's demands, each cut to ``cap + 1``: past ``cap`` exactly
    where the true total is, and never overflowing int64 (a demand may be up to 2**63 - 1)."""
    cut = cap + 1
    demands = np.fromiter((min(j.demand, cut) for j in instance.jobs), dtype=np.int64, count=len(instance.jobs))
    return np.cumsum(demands)


def admit(instance: RoundInstance, mode: str = "prefix") -> list[int]:
    """Indices (queue order) of the jobs an integer program must place this round."""
    if mode in ADMISSION_MODES and has_types(instance):
        return _admit_typed(instance, mode)
    free = instance.free_gpus
    demands = [j.demand for j in instance.jobs]
    if mode == "prefix":
        return list(range(int(np.searchsorted(_clipped_cumsum(instance, free), free, side="right"))))
    if mode == "backfill":
        out = []
        left = free
        for i, d in enumerate(demands):
            if d <= left:
                out.append(i)
                left -= d
        return out
    raise OptionError(f"unknown admission mode {mode!r}; choose one of {', '.join(ADMISSION_MODES)}")


def _admit_typed(instance: RoundInstance, mode: str) -> list[int]:
    """:func:`admit` counted per GPU type (module docstring)."""
    return list(_typed_claims(instance, range(len(instance.jobs)), prefix=mode == "prefix"))


def _typed_claims(instance: RoundInstance, candidates: Iterable[int], *, prefix: bool) -> dict[int, np.ndarray]:
    """The jobs of ``candidates`` (indices, in order) admitted per GPU type, each with the free
    GPUs per type it claims.

    A job is admitted if it can claim its GPUs from what the admitted jobs left; failing that, if
    the admitted jobs and it can all claim theirs afresh, the most constrained first
    (:func:`pal_opt.gputypes.claim_all`).  With ``prefix`` the walk stops at the first job that
    is not admitted.
    """
    cl = instance.cluster
    start = free_per_type(cl, cl.free_mask)
    free = start.copy()
    order = list(candidates)
    groups = {i: type_groups(cl, instance.jobs[i]) for i in order}
    out: dict[int, np.ndarray] = {}
    for i in order:
        before = free.copy()
        if claim_types(groups[i], instance.jobs[i].demand, free):
            out[i] = before - free
            continue
        tried = [*out, i]
        again = claim_all({k: groups[k] for k in tried}, {k: instance.jobs[k].demand for k in tried}, start)
        if again is not None:
            out = {k: again[k] for k in tried}  # queue order kept
            free = start - np.sum(list(again.values()), axis=0)
        elif prefix:
            break
    return out


def claim_placement(instance: RoundInstance, admitted: Sequence[int]) -> dict[JobId, tuple[int, ...]] | None:
    """A placement of the ``admitted`` jobs (indices) that honours GPU types, built from the
    claims that admitted them (:func:`admit`): each job gets the GPUs per type it claimed, its
    current GPUs first, then the free GPUs of the servers with the most of that type left.  None
    if the jobs cannot all claim their GPUs (a set given by id may not fit together).

    It ignores variability and locality beyond packing: it is the start placement of last resort
    for a round program, when greedy placers that do not count per type leave a job out.

    >>> from pal_opt.model import Cluster, Job
    >>> c = Cluster.from_arrays(range(6), [0, 0, 1, 1, 1, 1], {"classA": [1.0] * 6},
    ...                         gpu_types=["aws"] * 2 + ["rtx"] * 4)
    >>> inst = RoundInstance(c, (Job("a", 3, "classA"), Job("b", 2, "classA", gpu_type="aws")))
    >>> claim_placement(inst, admit(inst))
    {'a': (2, 3, 4), 'b': (0, 1)}
    """
    claims = _typed_claims(instance, admitted, prefix=False)
    if len(claims) != len(admitted):
        return None
    cl = instance.cluster
    taken = ~cl.free_mask
    need = {i: claims[i].copy() for i in admitted}
    got: dict[int, list[int]] = {i: [] for i in admitted}
    for i in admitted:  # current GPUs first: a job that keeps them does not restart
        current = instance.jobs[i].placement
        if current is None:
            continue
        for p in cl.positions(current).tolist():
            t = int(cl.type_of[p])
            if not taken[p] and need[i][t] > 0:
                taken[p] = True
                need[i][t] -= 1
                got[i].append(p)
    for i in admitted:
        for t in np.flatnonzero(need[i]).tolist():
            pos = np.flatnonzero(~taken & (cl.type_of == t))
            left = np.bincount(cl.server_of[pos], minlength=cl.num_servers)
            # the servers with the most GPUs of this type left first, then by position
            order = np.lexsort((pos, -left[cl.server_of[pos]]))
            pick = pos[order[: int(need[i][t])]]
            taken[pick] = True
            got[i].extend(pick.tolist())
    ids = cl.gpu_ids
    return {instance.jobs[i].id: tuple(sorted(int(ids[p]) for p in got[i])) for i in admitted}
