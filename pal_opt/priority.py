"""Priorities and preemption: which waiting jobs a preemptive round admits, and which running
jobs may make room for them.

The queue rule ``"preempt"`` (the preemptive methods ``ilp-preempt``, :mod:`pal_opt.ilp.preempt`,
and ``preempt-greedy``, :mod:`pal_opt.policies.preempt`) works by priority
(:attr:`pal_opt.model.Job.priority`, higher first):

* a running job keeps running (on its GPUs, or moved) unless a waiting job of a *higher*
  priority needs its GPUs; it is never preempted for a job of its own or a lower priority;
* waiting jobs are taken in :func:`admission_order` (priority, highest first, then queue
  order); one is admitted when its demand fits the GPUs still free plus those held by running
  jobs of a lower priority not yet claimed (the GPUs a job frees go to the jobs admitted after
  it); a job that does not fit is skipped, as in backfill;
* a running job one of whose GPUs failed or was taken (:func:`homeless`) must move: it is
  admitted as a waiting job of its priority is (before the waiting ones), so it too takes only
  lower priorities' GPUs; left out, it was not preempted.

:func:`preempt_plan` walks the waiting jobs counting GPUs only, claiming the lowest priorities'
GPUs first; the running jobs of every priority whose GPUs were claimed become *optional* (the
round program chooses which of them to preempt, :mod:`pal_opt.ilp.preempt`); the others must stay
placed.  The greedy comparator evicts whole jobs in :func:`victim_order` instead (lowest priority
first, then the most recently started, as Kueue and Volcano do).  Counting in GPUs is exact
without GPU types: any set of jobs whose demand fits the free GPUs can be placed (a gang may span
the cluster).  Rounds with GPU types or pipeline jobs are not supported yet.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import OptionError
from .gputypes import has_types
from .model import GpuState, RoundInstance

__all__ = ["PreemptPlan", "homeless", "admission_order", "victim_order", "evict_for", "preempt_plan", "check_preemptible"]


@dataclass(frozen=True)
class PreemptPlan:
    """What the preemptive round program places.

    Attributes
    ----------
    waiting
        The admitted waiting jobs (indices into ``instance.jobs``), in admission order, with the
        running jobs that must move (:func:`homeless`) among them.
    kept
        Running jobs that stay placed (on their GPUs or moved).
    optional
        Running jobs that may be preempted: those of the priorities whose GPUs the walk claimed.
    """

    waiting: tuple[int, ...]
    kept: tuple[int, ...]
    optional: tuple[int, ...]

    @property
    def admitted(self) -> tuple[int, ...]:
        """Every job the program sees, in queue order."""
        return tuple(sorted((*self.waiting, *self.kept, *self.optional)))


def check_preemptible(instance: RoundInstance) -> None:
    """Raise :class:`~pal_opt.errors.OptionError` for a round the preemptive methods do not
    handle yet (GPU types, pipeline jobs)."""
    if has_types(instance):
        raise OptionError("the preemptive methods do not support GPU types yet")
    if any(j.pipeline is not None for j in instance.jobs):
        raise OptionError("the preemptive methods do not support pipeline jobs yet")


def homeless(instance: RoundInstance) -> list[int]:
    """The running jobs one of whose GPUs failed or was taken since (state ``FAILED`` or
    ``BUSY``), in queue order: they must move, and are admitted as waiting jobs are."""
    state = instance.cluster.state
    cl = instance.cluster
    return [i for i, j in enumerate(instance.jobs)
            if j.placement is not None and not (state[cl.positions(j.placement)] == GpuState.FREE).all()]


def admission_order(instance: RoundInstance, *, moving: bool = False) -> list[int]:
    """The waiting jobs (no placement), highest priority first, then in queue order; with
    ``moving``, the running jobs that must move too (:func:`homeless`), each first among its
    priority.

    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    >>> admission_order(RoundInstance(c, (Job("a", 1, "classA"), Job("b", 1, "classA", priority=2))))
    [1, 0]
    """
    jobs = instance.jobs
    todo = [i for i, j in enumerate(jobs) if j.placement is None]
    if moving:
        todo += homeless(instance)
    return sorted(todo, key=lambda i: (-jobs[i].priority, jobs[i].placement is None, i))


def victim_order(instance: RoundInstance, candidates: Iterable[int]) -> list[int]:
    """``candidates`` (running job indices) in the order the greedy comparator evicts them:
    lowest priority first, then the most recently started (:attr:`~pal_opt.model.Job.started`;
    a job with no start time counts as started before every job with one), then the later in
    the queue."""
    jobs = instance.jobs

    def key(i: int) -> tuple[int, float, int]:
        started = jobs[i].started
        return jobs[i].priority, -(started if started is not None else -math.inf), -i

    return sorted(candidates, key=key)


def evict_for(instance: RoundInstance, demand: int, free: int, candidates: list[int]) -> list[int] | None:
    """The running jobs (from ``candidates``, already in eviction order) to evict so that
    ``demand`` GPUs fit ``free`` free ones: evicted in order until it fits, then each but the
    last given back, in reverse order, when the job still fits without it.  None if evicting all
    of them is not enough.

    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(3, 3, {"classA": [1.0] * 9})
    >>> jobs = tuple(Job(k, d, "classA") for k, d in enumerate((4, 3, 2)))
    >>> evict_for(RoundInstance(c, jobs), 4, 0, [2, 1, 0])   # 2 then 1: 5 GPUs; 2 is not given back
    [2, 1]
    """
    jobs = instance.jobs
    if demand > free + sum(jobs[i].demand for i in candidates):
        return None
    victims: list[int] = []
    for i in candidates:
        if free >= demand:
            break
        victims.append(i)
        free += jobs[i].demand
    for i in reversed(victims[:-1]):
        if free - jobs[i].demand >= demand:
            victims.remove(i)
            free -= jobs[i].demand
    return victims


def preempt_plan(instance: RoundInstance) -> PreemptPlan:
    """The admitted waiting jobs and the running jobs that must stay or may be preempted (module
    docstring); GPUs counted only.

    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(2, 2, {"classA": [1.0] * 4})
    >>> jobs = (Job("lo1", 2, "classA", placement=(0, 1)), Job("lo2", 2, "classA", placement=(2, 3)),
    ...         Job("hi", 1, "classA", priority=1), Job("lo3", 1, "classA"))
    >>> preempt_plan(RoundInstance(c, jobs))
    PreemptPlan(waiting=(2,), kept=(), optional=(0, 1))
    """
    check_preemptible(instance)
    jobs = instance.jobs
    moving = set(homeless(instance))  # they must move: admitted as waiting jobs are
    running = [i for i, j in enumerate(jobs) if j.placement is not None and i not in moving]
    held: dict[int, int] = {}
    for i in running:
        held[jobs[i].priority] = held.get(jobs[i].priority, 0) + jobs[i].demand
    free = instance.free_gpus - sum(held.values())  # >= 0: their GPUs are free and distinct
    claimed: set[int] = set()
    waiting: list[int] = []
    for i in admission_order(instance, moving=True):
        d, p = jobs[i].demand, jobs[i].priority
        if d > free + sum(v for q, v in held.items() if q < p):
            continue
        waiting.append(i)
        take = min(free, d)
        free -= take
        _claim(held, claimed, d - take, p)
    optional = tuple(i for i in running if jobs[i].priority in claimed)
    kept = tuple(i for i in running if jobs[i].priority not in claimed)
    return PreemptPlan(tuple(waiting), kept, optional)


def _claim(held: dict[int, int], claimed: set[int], need: int, below: int) -> int:
    """Claim ``need`` GPUs from the running jobs of priorities below ``below``, lowest first
    (``held`` per priority is lowered, the priorities touched are added to ``claimed``); the
    GPUs claimed beyond ``need`` (0 here: the caller checked the total) are returned."""
    for q in sorted(held):
        if need <= 0 or q >= below:
            break
        t = min(held[q], need)
        if t > 0:
            held[q] -= t
            need -= t
            claimed.add(q)
    return max(0, -need)

