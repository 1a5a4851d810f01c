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
the cluster).  A pipeline job (:attr:`pal_opt.model.Job.pipeline`) counts as its demand, its GPUs
in all: it is admitted, kept or made optional as a gang is; only its placement differs (its
stages mapped best on its GPUs, or placed by the stage program), with GPU types too.

**With GPU types** (:func:`pal_opt.gputypes.has_types`) the GPUs are counted per type and per
``(priority, type)`` *cell* (the GPUs of that type held by running jobs of that priority), and a
job may take GPUs only within one of its type groups (:func:`pal_opt.gputypes.type_groups`: one
of its usable types, or all of them together if it mixes types; a guaranteed job's one type):

* a running job on another of its allowed counts than its demand is *pinned*: the round program
  places a job on its demand, so it is not resized; its GPUs count in its priority's cells, after
  those of the priority's other running jobs (they are claimed last), and if the walk claims one
  of them the plan preempts it (:attr:`PreemptPlan.evicted`), else it stays on its GPUs outside
  the program (:attr:`PreemptPlan.pinned`; the greedy comparator keeps or evicts it as any other);
* each waiting job (and each running job that must move) claims its demand from one group: from
  the GPUs no running job holds first (types with the most such GPUs first), then from the cells
  of lower priorities, lowest priority first; of the groups that can hold it, it takes the one
  that preempts the lowest priority, then the fewest GPUs, then (best fit) leaves the fewest free
  GPUs, then the first; a job no group can hold is skipped (backfill);
* the running jobs (not pinned) that hold a GPU of a claimed cell are optional; the others stay
  placed.

This rule is **sound**: the claims are disjoint counts of GPUs per type, each inside one group of
its job, so the kept jobs on their own GPUs and the admitted jobs on their claims are a placement
by counts, and any such counts have a placement (a gang may span the GPUs of its group): the
round program over the plan is always feasible, and its greedy start always places the plan
(:class:`pal_opt.gputypes.TypeBudget` starts from these claims).  It is **conservative**: exact
feasibility per type is a bin-packing problem, and the walk takes each job's group greedily and
never revisits an earlier claim, so it may skip a waiting job that another choice of groups would
have fit, or mark optional a cell a cleverer split would not have needed; the round program then
chooses among the optional jobs (preempting none it need not, since preemption is priced), and
the leftover GPUs are backfilled.  Every optional job (and every pinned job the plan preempts)
holds a GPU of a type that a waiting job of a higher priority admitted by the walk claimed, which
the checker verifies of every preempted job (:mod:`pal_opt.check`).  The greedy comparator evicts per type too (:func:`evict_for_types`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .gputypes import fits_types, free_per_type, has_types, type_groups
from .model import GpuState, RoundInstance

__all__ = ["PreemptPlan", "homeless", "admission_order", "victim_order", "evict_for", "evict_for_types",
           "held_types", "resized", "preempt_plan"]


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
        Running jobs that may be preempted: those of the priorities whose GPUs the walk claimed
        (with GPU types: those holding a GPU of a claimed ``(priority, type)`` cell).
    claims
        With GPU types: the GPUs per type each admitted waiting job claimed in the walk, a
        witness that the plan has a placement (module docstring); empty without types.
    pinned
        With GPU types: the running jobs on another of their allowed counts than their demand
        that stay on their GPUs, outside the program (module docstring); empty without types.
    evicted
        With GPU types: the running jobs on another of their allowed counts whose GPUs the walk
        claimed: preempted by the plan itself (the program could only re-place them at their
        demand); empty without types.
    """

    waiting: tuple[int, ...]
    kept: tuple[int, ...]
    optional: tuple[int, ...]
    claims: Mapping[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    pinned: tuple[int, ...] = field(default=(), repr=False)
    evicted: tuple[int, ...] = field(default=(), repr=False)

    @property
    def admitted(self) -> tuple[int, ...]:
        """Every job the program sees, in queue order."""
        return tuple(sorted((*self.waiting, *self.kept, *self.optional)))


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
    docstring); GPUs counted only, per type with GPU types.

    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(2, 2, {"classA": [1.0] * 4})
    >>> jobs = (Job("lo1", 2, "classA", placement=(0, 1)), Job("lo2", 2, "classA", placement=(2, 3)),
    ...         Job("hi", 1, "classA", priority=1), Job("lo3", 1, "classA"))
    >>> preempt_plan(RoundInstance(c, jobs))
    PreemptPlan(waiting=(2,), kept=(), optional=(0, 1))
    """
    if has_types(instance):
        return _typed_plan(instance)
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



# --------------------------------------------------------------------------- GPU types
def held_types(instance: RoundInstance, idx: int) -> np.ndarray:
    """GPUs per type (``cluster.type_names`` order) that running job ``instance.jobs[idx]``
    holds (zeros for a waiting job)."""
    cl = instance.cluster
    job = instance.jobs[idx]
    if job.placement is None:
        return np.zeros(cl.num_types, dtype=np.int64)
    return np.bincount(cl.type_of[cl.positions(job.placement)], minlength=cl.num_types).astype(np.int64)


def evict_for_types(groups: Sequence[Sequence[int]], demand: int, free: np.ndarray, candidates: Sequence[int],
                    held: Mapping[int, np.ndarray]) -> list[int] | None:
    """:func:`evict_for` per GPU type: the running jobs (from ``candidates``, in eviction order;
    ``held[i]`` their GPUs per type) to evict so that ``demand`` GPUs of one of the type
    ``groups`` are free (``free``: free GPUs per type).  Evicted in order until one group holds
    the demand, then each but the last given back, in reverse, when it still does; a victim on
    no type of the groups is thus always given back.  None if evicting all is not enough.

    >>> held = {0: np.array([0, 4]), 1: np.array([2, 0]), 2: np.array([2, 0])}
    >>> evict_for_types([(0,)], 3, np.array([0, 0]), [0, 1, 2], held)   # 0 (other type) given back
    [1, 2]
    >>> evict_for_types([(0,)], 5, np.array([0, 0]), [0, 1, 2], held) is None
    True
    """
    total = free + sum((held[i] for i in candidates), np.zeros_like(free))
    if not fits_types(groups, demand, total):
        return None
    left = np.array(free, dtype=np.int64)
    victims: list[int] = []
    for i in candidates:
        if fits_types(groups, demand, left):
            break
        victims.append(i)
        left = left + held[i]
    for i in reversed(victims[:-1]):
        if fits_types(groups, demand, left - held[i]):
            victims.remove(i)
            left = left - held[i]
    return victims


def _typed_plan(instance: RoundInstance) -> PreemptPlan:
    """:func:`preempt_plan` with GPU types (module docstring): claims per type and per cell,
    ``(priority, pinned, type)``; a priority's pinned jobs' GPUs are claimed after its others'."""
    cl = instance.cluster
    jobs = instance.jobs
    moving = set(homeless(instance))
    pinned = set(resized(instance))
    running = [i for i, j in enumerate(jobs) if j.placement is not None and i not in moving]
    free = free_per_type(cl, cl.state == GpuState.FREE).astype(np.int64)
    held: dict[tuple[int, int], np.ndarray] = {}
    for i in running:
        cell = (jobs[i].priority, int(i in pinned))
        held[cell] = held.get(cell, np.zeros_like(free)) + held_types(instance, i)
    free -= sum(held.values(), np.zeros_like(free))
    claims: dict[int, np.ndarray] = {}
    claimed: set[tuple[int, int, int]] = set()
    waiting: list[int] = []
    for i in admission_order(instance, moving=True):
        took = _claim_below(type_groups(cl, jobs[i]), jobs[i].demand, jobs[i].priority, free, held)
        if took is None:
            continue
        waiting.append(i)
        own, lower = took
        free -= own
        for q, v in lower.items():
            held[q] = held[q] - v
            claimed.update((*q, int(k)) for k in np.flatnonzero(v))
        claims[i] = own + sum(lower.values(), np.zeros_like(free))
    hit = [i for i in running if any((jobs[i].priority, int(i in pinned), int(k)) in claimed
                                     for k in np.flatnonzero(held_types(instance, i)))]
    return PreemptPlan(tuple(waiting), tuple(i for i in running if i not in hit and i not in pinned),
                       tuple(i for i in hit if i not in pinned), claims,
                       tuple(i for i in running if i in pinned and i not in hit),
                       tuple(i for i in hit if i in pinned))


def resized(instance: RoundInstance) -> list[int]:
    """The running jobs on another of their allowed counts than their demand, on GPUs all still
    free, in queue order: with GPU types the plan pins them (module docstring)."""
    moving = set(homeless(instance))
    return [i for i, j in enumerate(instance.jobs)
            if j.placement is not None and len(j.placement) != j.demand and i not in moving]


def _claim_below(groups: Sequence[Sequence[int]], demand: int, priority: int, free: np.ndarray,
                 held: Mapping[tuple[int, int], np.ndarray]
                 ) -> tuple[np.ndarray, dict[tuple[int, int], np.ndarray]] | None:
    """The claim of a job of ``priority`` (module docstring): GPUs per type from ``free`` and from
    the cells ``held`` (keyed ``(priority, pinned)``) of each lower priority, lowest first, a
    priority's pinned jobs last; in the group that preempts least; None if no group holds
    ``demand``.  Nothing is changed."""
    lower = sorted(q for q in held if q[0] < priority)
    best: tuple[tuple[int, int, int, int], np.ndarray, dict[tuple[int, int], np.ndarray]] | None = None
    for n, group in enumerate(groups):
        g = list(group)
        if int(free[g].sum()) + sum(int(held[q][g].sum()) for q in lower) < demand:
            continue
        own = np.zeros_like(free)
        left = demand
        for k in sorted(g, key=lambda k: (-int(free[k]), k)):
            own[k] = min(left, int(free[k]))
            left -= int(own[k])
        taken: dict[tuple[int, int], np.ndarray] = {}
        for q in lower:
            if not left:
                break
            v = np.zeros_like(free)
            for k in sorted(g, key=lambda k: (-int(held[q][k]), k)):
                v[k] = min(left, int(held[q][k]))
                left -= int(v[k])
            if v.any():
                taken[q] = v
        key = (max((q[0] for q in taken), default=-1), demand - int(own.sum()), int(free[g].sum()), n)
        if best is None or key < best[0]:
            best = (key, own, taken)
    return None if best is None else (best[1], best[2])
