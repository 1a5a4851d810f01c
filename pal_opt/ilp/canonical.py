"""One representative of an optimal placement, whichever backend found it.

A round's optimum usually has ties: a job's cost depends only on the slowest of its GPUs (its
class's binned factor there, one of a few levels) and on how far its GPUs spread (one server,
one rack, the cluster), so a job of eight GPUs at level 1.0025 costs the same on any server
with eight such GPUs free, and two identical jobs cost the same either way round.  HiGHS,
CP-SAT and CBC each prove their own program vector optimal, and the decoded placements then
differ on the same round although their costs are equal (and ``ilp-preempt``'s backfill,
placed on the GPUs the program left, then differs in cost too).

Where they come from (measured on 360 generated rounds of 16-128 GPUs, every one proven optimal
by all three: the placements agreed on 51%, on 20% under ``ilp-preempt``): a job with a choice
of equally good servers (the most common), identical jobs swapped, a running job kept or moved
where moving is free, a job across racks or within one when the penalties are equal, a job of
one GPU on either of two types, then every GPU the backfill sees.

:func:`canonical_optimum` maps a placement to one that depends only on what its cost depends
on, the *pattern* of the placement:

* the jobs that stay put: any the caller pins, and running jobs kept on their GPUs (a pipeline
  on its stage map) where moving them is charged for (:func:`~pal_opt.model.keeps_placement`);
  where it is not, every running job whose own GPUs meet its requirement stays (then none, then
  those the placement keeps, should the rest not fit);
* for every other placed job: how many GPUs, the GPU type group they are drawn from
  (:func:`~pal_opt.gputypes.type_groups`), their slowest binned factor for the job's class (its
  *cap*) and the widest level it may span at the same locality penalty
  (:class:`~pal_opt.model.Level`; with PAL's penalties a job across racks costs what a job
  across servers of one rack does); a job of one GPU may take any of its GPU types; identical
  waiting jobs (same class, demand, locality, types and stages) share their requirements out in
  queue order;
* for a pipeline job (:class:`~pal_opt.model.Pipeline`) a cap per stage instead of one: its cost
  depends on its pace, the largest ``stage_times[k] * (stage k's slowest factor)``, so stage
  ``k`` may get any GPU whose factor ``f`` keeps ``stage_times[k] * f`` within that pace
  (:func:`_stage_caps`; a stage with slack takes slower GPUs).  The caps are nested (a slower
  stage's is tighter), so which server holds the pipeline and which GPU runs which stage are
  both fixed by the pattern: its GPUs are chosen stage by stage, the tightest first, and listed
  stage by stage, each stage's by id.

From the pattern alone it places the jobs again, deterministically.  First a greedy
(:func:`_realise`): jobs on one server first, then on one rack, then across the cluster, each by
decreasing size, tightest cap first; a job takes the GPUs within its cap (a pipeline's stages
within theirs, the tightest stage first) that the jobs still to come need least (then the
slowest, then the first), on the server (rack) with the fewest such GPUs that holds it.  When
the greedy misses, an exact search with a budget (:func:`pal_opt.ilp.tieflow.realise_by_flow`:
servers and racks chosen one job at a time, each choice checked by a maximum flow, a pipeline's
stages routed each to the GPUs of its cap).  Every job lies on GPUs no slower than its cap
(every stage its own) within its level, so the new placement costs at most as much; at an
optimum exactly as much.  Two placements with the same pattern give the same answer.

The new placement is priced (:func:`pal_opt.cost.evaluate`) and kept only when it costs no
more than the given one (:data:`COST_TOL`); when neither finds the pattern a placement, or a cost
term prices something else than the slowest GPU and the level (a term registered from outside),
the given placement is returned unchanged.  Nothing here reads the program or the solver: the
integer programs and their exports are those of before.  It is opt-in (the option
``canonical=True``, ``pal-opt solve --canonical``): ``ilp`` then applies it to every proven
optimum (``info["canonical"]``: what :func:`canonicalise` did), ``ilp-preempt`` to the
program's proven optimum before its backfill; by default both keep the solver's own optimum,
as the committed simulations were run (``docs/determinism.md``).

Before the pattern is read, the choice among some patterns of equal cost is made canonical too
(:func:`_chosen`): jobs interchangeable in cost (the same class, size, locality, types and
stages; running or waiting) hold *roles* -- left out at a preemption charge (``ilp-preempt``'s
victims, ``optional=``), kept on their own GPUs where moving is charged for, moved, or placed
on GPUs of some pattern -- and these roles are given out again from the roles alone, in queue
order (:func:`_assigned`): the earlier jobs kept where they run when their GPUs' pattern is
among those held, the later ones left out, running jobs on a pattern their GPUs meet.  The
result is priced and kept only at no higher cost.  So which of two equal victims is preempted,
and which of a running job free to move and a waiting job of its kind gets which GPUs, no
longer depends on the backend.  A second pass does the same among jobs alike but for their GPU
types (:func:`_typeless_key`: a rigid job and one guaranteed a type), its patterns naming the
types of the GPUs themselves: each job is handed only roles its types allow, every choice the
first that leaves each other job a role it may take (:class:`_HandOut`, a bipartite matching),
so which of them is preempted when the earlier in the queue may not run on the later one's GPUs
is canonical too.  It is kept only where every job may run on the GPUs it then gets
(:func:`_types_held`: a newly kept job's GPUs are replaced by free ones) and at no higher cost.

Then, from the pattern, the caps of each class's gangs are dealt again and the type of a job
that may take either of several is chosen (:func:`_dealt`): a gang's cost is its GPU count
times the log of its cap (and its locality, which stays), so jobs of one class that keep as
many GPUs at each cap as before cost the same whichever holds which cap -- a job of six GPUs on
the fast level and six jobs of one GPU on the slow, or the other way round.  The caps are dealt
by an exact search (:func:`pal_opt.ilp.leveldeal.deal_levels`: a running job first its own
GPUs' cap, then in queue order the fastest that leaves the rest dealable), each job's type
group in a fixed order (its own GPUs' first, then in type order), and the first such option
that the greedy (else the budgeted search) places is taken, class by class; the pattern as
given when none is placed.  The result is priced and kept only at no higher cost, as before.
Where moving is charged for, which of equal running jobs keeps its GPUs is a role of the same
hand-out (the earlier in the queue keeps them whenever the rest can still be given roles), so
a level trade coupled with which of them moves maps to one placement too (among jobs alike but
for their types, a job may also keep its GPUs in a role of GPUs of another type, at the same
price).  Last, among jobs alike but for their types, the roles are given out once more by
their price alone (:func:`_repriced`: patterns without their GPU types), the kept jobs then stay
on their own GPUs and the others are placed again with their roles' levels dealt by the GPUs
their types may use (the last kept job moving instead while that finds no GPUs); so a level
traded between a kept job and a waiting (or moved) one of other type constraints, which would
need the other one on GPUs of another type than the role it traded into, maps to one placement
too (every optimum of 1,779 enumerated small typed rounds with a restart cost to one placement:
``docs/determinism.md``).  In that hand-out a move's charge does not depend on the pattern the
job moves to, so the moves are laid on the roles' patterns from the patterns alone
(:func:`_pooled`: the running jobs that may keep their GPUs first, in queue order, their own
GPUs' patterns), and optima that differ in which levels their moved jobs took map to one
placement too, the earlier running job keeping its GPUs.  It is priced and kept only at no
higher cost, as before.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import replace

import numpy as np

from ..cost import cost_terms, evaluate
from ..gputypes import type_groups, usable_types
from ..model import (
    Cluster,
    GpuState,
    Job,
    JobId,
    Level,
    Pipeline,
    RoundInstance,
    keeps_placement,
    placement_type_error,
)
from .leveldeal import deal_levels
from .running import keep_positions
from .tieflow import FlowBudget, Need, realise_by_flow

__all__ = ["canonical_optimum", "canonicalise", "COST_TOL", "CANONICAL_MAX_CELLS", "CHANGED", "ALREADY", "OUT_OF_TIME",
           "NOT_FOUND"]

#: How much more than the given placement the canonical one may cost (float rounding only: both
#: are sums of the same terms).
COST_TOL = 1e-9
#: Rounds whose GPUs × placed jobs exceed this are returned as they are (the greedy works on
#: one GPU mask per job: 100 million cells is about a second).
CANONICAL_MAX_CELLS = 100_000_000
#: The most options (caps dealt, type groups) of one class's jobs the greedy tries (:func:`_dealt`).
CLASS_TRIES = 8
#: The most flows the exact searches of those tries solve in all (after it, only the greedy).
DEAL_FLOWS = 200
#: Rounds of more jobs to place than this keep the caps and type groups their optimum gave
#: (their tries cost 0.7-1.0 s on a 512-GPU round of 84 jobs, whose pattern was not placed either way).
DEAL_MAX_JOBS = 64

#: What :func:`canonicalise` did (``info["canonical"]``): the placement was replaced, ...
CHANGED = "changed"
#: ... it was its own representative, ...
ALREADY = "already canonical"
#: ... the deadline passed first (the given placement kept), ...
OUT_OF_TIME = "kept: out of time"
#: ... or neither the greedy nor the budgeted search placed the pattern (the given one kept).
NOT_FOUND = "kept: no placement of the pattern found within the search budget"


def canonical_optimum(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]],
                      factors: Mapping[str, np.ndarray], *, pinned: Collection[JobId] = ()
                      ) -> dict[JobId, tuple[int, ...]]:
    """The canonical representative of ``placements`` (module docstring): the same for every
    placement with the same pattern, never costlier than ``placements``.

    Parameters
    ----------
    instance, factors
        The round and the per-class factors the placement is priced with.
    placements
        ``{job id: GPU ids}``, a valid placement of the round.
    pinned
        Job ids that keep the GPUs ``placements`` gives them (as running jobs kept where moving
        is charged for do; a pipeline its stage map too).

    Returns
    -------
    dict
        ``{job id: GPU ids}`` with the same keys in the same order; ``placements`` itself (as a
        new dict) when the canonical one cannot be built or would cost more.

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance, RoundParams
    >>> c = Cluster.from_arrays(range(6), [0, 0, 1, 1, 2, 2], {"classA": [1.0] * 6})
    >>> inst = RoundInstance(c, (Job("a", 2, "classA"), Job("b", 1, "classA")), RoundParams(binning="none"))
    >>> canonical_optimum(inst, {"a": (4, 5), "b": (3,)}, c.factors)
    {'a': (0, 1), 'b': (2,)}
    >>> canonical_optimum(inst, {"a": (2, 3), "b": (0,)}, c.factors)
    {'a': (0, 1), 'b': (2,)}
    """
    return canonicalise(instance, placements, factors, pinned=pinned)[0]


def canonicalise(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]],
                 factors: Mapping[str, np.ndarray], *, pinned: Collection[JobId] = (),
                 optional: Collection[JobId] = (), deadline: float | None = None
                 ) -> tuple[dict[JobId, tuple[int, ...]], str]:
    """:func:`canonical_optimum`, and what was done: :data:`CHANGED`, :data:`ALREADY`,
    :data:`OUT_OF_TIME`, :data:`NOT_FOUND`, or why the given placement was kept (a round too
    large, a canonical placement that would cost more).  ``deadline``: a ``time.monotonic()``
    value by which to give up and keep the given placement (the search is checked between
    steps; a pattern found is still priced).  ``optional``: running jobs that may be left out
    at their preemption charge (``ilp-preempt``'s victims): which of several equal ones are left
    out is chosen canonically too (:func:`_chosen`)."""
    cl = instance.cluster
    given = dict(placements)
    if cl.num_gpus * len(placements) <= CANONICAL_MAX_CELLS:
        placements = _chosen(instance, placements, factors, pinned, optional) or placements
        placements = _chosen(instance, placements, factors, pinned, optional, _typeless_key) or placements
        placements = _repriced(instance, factors, placements, pinned, optional) or placements
    hard = _fixed(instance, placements, pinned)
    needs = _needs(instance, placements, factors, hard)
    if not needs:  # (every job stays: the roles given out again, if they moved any, are the answer)
        return dict(placements), ALREADY if placements == given else CHANGED
    if cl.num_gpus * len(needs) > CANONICAL_MAX_CELLS:
        return given, f"kept: {cl.num_gpus:,} GPUs x {len(needs):,} jobs is above {CANONICAL_MAX_CELLS:,}"
    dealt = _dealt(instance, factors, placements, hard, needs, deadline) if len(needs) <= DEAL_MAX_JOBS else needs
    found = _first_placed(instance, placements, factors, [dealt, needs] if dealt != needs else [needs], hard, deadline)
    if found is None:
        return given, OUT_OF_TIME if deadline is not None and time.monotonic() >= deadline else NOT_FOUND
    out = {jid: found[jid] for jid in placements}
    if evaluate(instance, out, factors).cost > evaluate(instance, given, factors).cost + COST_TOL:
        return given, "kept: the canonical placement would cost more (a cost term prices more than the slowest GPU and the level)"
    return out, (ALREADY if out == given else CHANGED)


def _first_placed(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]],
                  factors: Mapping[str, np.ndarray], patterns: Sequence[Sequence[Need]], hard: Collection[JobId],
                  deadline: float | None) -> dict[JobId, tuple[int, ...]] | None:
    """The first of ``patterns`` (each a list of needs) placed, with the running jobs that stay
    tried in :func:`_stays`'s order; None if none is, or once ``deadline`` passes."""
    for needs in patterns:
        for stay in _stays(instance, placements, factors, needs, hard):
            if deadline is not None and time.monotonic() >= deadline:
                return None
            rest = [n for n in needs if instance.jobs[n.index].id not in stay]
            found = _placed(instance, factors, rest, {**_held(placements, hard), **stay}, deadline)
            if found is not None:
                return found
    return None


def _held(placements: Mapping[JobId, tuple[int, ...]], jids: Collection[JobId]) -> dict[JobId, tuple[int, ...]]:
    return {jid: tuple(placements[jid]) for jid in jids}


def _placed(instance: RoundInstance, factors: Mapping[str, np.ndarray], needs: Sequence[Need],
            fixed: Mapping[JobId, tuple[int, ...]], deadline: float | None = None
            ) -> dict[JobId, tuple[int, ...]] | None:
    """``fixed`` and ``needs`` placed on the GPUs ``fixed`` leaves (the greedy, else the search)."""
    cl = instance.cluster
    avail = cl.state == GpuState.FREE
    for gids in fixed.values():
        avail[cl.positions(gids)] = False
    found = _realise(instance, factors, needs, avail.copy()) if needs else {}
    if found is None:
        found = realise_by_flow(cl, needs, _kind_masks(instance, factors, needs, avail), deadline=deadline)
    if found is None:
        return None
    return {**fixed, **{instance.jobs[i].id: g for i, g in found.items()}}


def _stays(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]], factors: Mapping[str, np.ndarray],
           needs: Sequence[Need], hard: Collection[JobId]) -> list[dict[JobId, tuple[int, ...]]]:
    """Which running jobs stay on their GPUs, in the order tried: every one that moving would
    not charge for whose GPUs meet its requirement and are free (a function of the pattern),
    then none, then those ``placements`` keeps."""
    cl = instance.cluster
    free = cl.state == GpuState.FREE
    for jid in hard:
        free[cl.positions(placements[jid])] = False
    could: dict[JobId, tuple[int, ...]] = {}
    kept: dict[JobId, tuple[int, ...]] = {}
    for n in needs:
        job = instance.jobs[n.index]
        pos = keep_positions(instance, n.index)
        if pos is None or pos.size != n.count or job.placement is None:
            continue
        if keeps_placement(job, placements[job.id]):
            kept[job.id] = job.placement
        if free[pos].all() and _holds(cl, factors, job, n, job.placement) and cl.span_level_pos(pos) <= n.level:
            could[job.id] = job.placement
    return [dict(s) for s in {tuple(s.items()): s for s in (could, {}, kept)}]


def _indices(instance: RoundInstance) -> dict[JobId, int]:
    """Each job's index in ``instance.jobs``."""
    return {j.id: i for i, j in enumerate(instance.jobs)}


def _fixed(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]],
           pinned: Collection[JobId]) -> set[JobId]:
    """The jobs that stay where ``placements`` puts them: pinned, and running jobs kept on their
    GPUs (a pipeline on its stage map) that moving would charge for."""
    jobs = instance.job_by_id
    terms = cost_terms()
    return {jid for jid, gids in placements.items()
            if jid in pinned
            or keeps_placement(jobs[jid], gids) and any(t.moved(instance, jobs[jid]) > 0 for t in terms)}


def _twin_key(job: Job) -> tuple[object, ...] | None:
    """Waiting jobs with equal keys are interchangeable (None: a running job, never).  Priority
    is not part of it: a placed job's price does not depend on it, nor does which jobs are placed."""
    if job.placement is not None:
        return None
    return (job.perfclass, job.demand, job.locality, job.kind, job.gpu_type, job.allowed_types,
            job.allowed_counts, job.mix_types, job.pipeline)


def _needs(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]], factors: Mapping[str, np.ndarray],
           fixed: Collection[JobId]) -> list[Need]:
    """The pattern of the jobs not fixed, identical waiting jobs' requirements in queue order."""
    index = _indices(instance)
    own = [_need_on(instance, factors, index[jid], gids) for jid, gids in placements.items() if jid not in fixed]
    twins: dict[object, list[Need]] = {}
    for n in own:
        key = _twin_key(instance.jobs[n.index])
        twins.setdefault(key if key is not None else ("job", n.index), []).append(n)
    out: list[Need] = []
    for group_needs in twins.values():
        order = sorted(n.index for n in group_needs)
        shapes = sorted((n.level, n.cap, n.group, n.count, n.stages) for n in group_needs)
        out.extend(Need(i, count, grp, cap, level, stages)
                   for i, (level, cap, grp, count, stages) in zip(order, shapes, strict=True))
    return _in_order(instance, out)


def _in_order(instance: RoundInstance, needs: Sequence[Need]) -> list[Need]:
    """``needs`` in the order the greedy places them (module docstring)."""
    return sorted(needs, key=lambda n: (n.level, -n.count, min(c for _, c in n.parts), n.cap,
                                        instance.jobs[n.index].perfclass, n.group, n.stages, n.index))


def _dealt(instance: RoundInstance, factors: Mapping[str, np.ndarray], placements: Mapping[JobId, tuple[int, ...]],
           hard: Collection[JobId], needs: Sequence[Need], deadline: float | None = None) -> list[Need]:
    """``needs`` with the caps of each class's gangs given out again, and the type groups of
    those that may take several (:func:`_class_options`), class by class (the class of the
    largest job first, then in queue order of their first job): the first option, of at most
    :data:`CLASS_TRIES`, that the greedy (else the exact search, :data:`DEAL_FLOWS` flows for
    them all) places with the classes before it as chosen, the jobs not dealt (pipelines) and
    the classes after it loosened (:func:`_loosened`); a class none of whose tries is placed
    keeps its needs.  The options depend on the pattern alone, so optima that differ only in
    which job of a class holds which cap, or which type a job takes, give one answer."""
    cl = instance.cluster
    avail = cl.state == GpuState.FREE
    for jid in hard:
        avail[cl.positions(placements[jid])] = False
    chosen = {n.index: n for n in needs if n.stages}
    classes: dict[str, list[Need]] = {}
    for n in sorted(needs, key=lambda n: n.index):
        if not n.stages:
            classes.setdefault(instance.jobs[n.index].perfclass, []).append(n)
    classes = dict(sorted(classes.items(), key=lambda kv: (-max(n.count for n in kv[1]), kv[1][0].index)))
    loose = {k: _loosened(instance, members) for k, members in classes.items()}
    budget = FlowBudget(DEAL_FLOWS)
    for klass, members in classes.items():
        del loose[klass]
        options = list(itertools.islice(_class_options(instance, factors, members, avail), CLASS_TRIES))
        if len(options) < 2:  # (one option or none: nothing to choose)
            chosen.update({n.index: n for n in (options[0] if options else members)})
            continue
        later = [n for ns in loose.values() for n in ns]
        for option in options:
            trial = _in_order(instance, [*chosen.values(), *option, *later])
            if _realise(instance, factors, trial, avail.copy()) is not None or budget.left > 0 and realise_by_flow(
                    cl, trial, _kind_masks(instance, factors, trial, avail), deadline=deadline, budget=budget) is not None:
                chosen.update({n.index: n for n in option})
                break
        else:
            chosen.update({n.index: n for n in members})
    return _in_order(instance, list(chosen.values()))


def _loosened(instance: RoundInstance, members: Sequence[Need]) -> list[Need]:
    """One class's gangs as any of its options could place them: each with the class's slowest
    cap, a job that may take several type groups on all their types."""
    cap = max(n.cap for n in members)
    return [replace(n, cap=cap, group=tuple(sorted({t for g in _group_order(instance, n) for t in g}))
                    if _chooses_group(instance, n) else n.group) for n in members]


def _class_options(instance: RoundInstance, factors: Mapping[str, np.ndarray], members: Sequence[Need],
                   avail: np.ndarray) -> Iterator[list[Need]]:
    """The needs of one class's gangs (in queue order) with their caps dealt
    (:func:`~pal_opt.ilp.leveldeal.deal_levels`: as many GPUs at each cap as before, so the same
    cost; a running job first the cap of its own GPUs when they are free, then in queue order
    the fastest, each only caps under which it finds GPUs among ``avail``) and, for each
    dealing, the type groups of the jobs that may take several (:func:`_group_order`, the last
    job's changing first)."""
    held: dict[float, int] = {}
    for n in members:
        held[n.cap] = held.get(n.cap, 0) + n.count
    caps = sorted(held)
    own = [_own_cap(instance, factors, n, avail) for n in members]
    allowed = [_allowed_caps(instance, factors, n, caps, avail) for n in members]
    free = [k for k, n in enumerate(members) if _chooses_group(instance, n)]
    orders = [_group_order(instance, members[k]) for k in free]
    for dealt in deal_levels([n.count for n in members], own, held, allowed):
        for groups in itertools.product(*orders):
            new = [replace(n, cap=cap) for n, cap in zip(members, dealt, strict=True)]
            for k, g in zip(free, groups, strict=True):
                new[k] = replace(new[k], group=g)
            yield new


def _own_cap(instance: RoundInstance, factors: Mapping[str, np.ndarray], need: Need, avail: np.ndarray) -> float | None:
    """The cap of a running job's own GPUs, if it may stay there in ``need``'s place (of its
    size and level, all in ``avail``; its type group is chosen apart, :func:`_group_order`); else None."""
    job = instance.jobs[need.index]
    pos = keep_positions(instance, need.index)
    if pos is None or job.placement is None or pos.size != need.count or not avail[pos].all():
        return None
    own = _need_on(instance, factors, need.index, job.placement)
    return own.cap if own.level <= need.level else None


def _allowed_caps(instance: RoundInstance, factors: Mapping[str, np.ndarray], need: Need, caps: Sequence[float],
                  avail: np.ndarray) -> set[float]:
    """The ``caps`` under which ``need`` would find its GPUs among ``avail`` alone (in one node of
    its level, in one of its type groups: any group it may take if :func:`_dealt` chooses it)."""
    cl = instance.cluster
    job = instance.jobs[need.index]
    groups = _group_order(instance, need) if _chooses_group(instance, need) else [need.group]
    node = (cl.server_of if need.level == Level.SERVER else cl.rack_of_server[cl.server_of]
            if need.level == Level.RACK else np.zeros(cl.num_gpus, dtype=np.int64))
    out: set[float] = set()
    for cap in caps:
        for group in groups:
            ok = _eligible(cl, factors, job, group, cap) & avail
            if ok.any() and int(np.bincount(node[ok]).max()) >= need.count:
                out.add(cap)
                break
    return out


def _chooses_group(instance: RoundInstance, need: Need) -> bool:
    """Whether ``need`` is a gang of several GPUs that may take any of several type groups."""
    return need.count > 1 and not need.stages and len(type_groups(instance.cluster, instance.jobs[need.index])) > 1


def _group_order(instance: RoundInstance, need: Need) -> list[tuple[int, ...]]:
    """The type groups job ``need.index`` is tried in: its own GPUs' first if it runs (and could
    stay), then the others in type order."""
    cl = instance.cluster
    groups = list(type_groups(cl, instance.jobs[need.index]))
    pos = keep_positions(instance, need.index)
    if pos is not None and pos.size == need.count:
        own = _group(cl, instance.jobs[need.index], pos)
        if own in groups:
            groups.remove(own)
            groups.insert(0, own)
    return groups


@functools.lru_cache(maxsize=64)
def _levels(values: bytes) -> np.ndarray:
    """The distinct factors of a class (its binned levels), from the class's factors' bytes."""
    return np.unique(np.frombuffer(values, dtype=np.float64))


def _need_on(instance: RoundInstance, factors: Mapping[str, np.ndarray], i: int, gids: Sequence[int]) -> Need:
    """The pattern of job ``i`` on ``gids`` (a pipeline's stage by stage): what its cost depends on."""
    cl = instance.cluster
    job = instance.jobs[i]
    pos = cl.positions(gids)
    values = np.asarray(factors[job.perfclass], dtype=np.float64)
    stages = () if job.pipeline is None else _stage_caps(job.pipeline, values[pos], _levels(values.tobytes()))
    return Need(i, int(pos.size), _group(cl, job, pos), max((c for _, c in stages), default=float(values[pos].max())),
                _level(cl, job, pos), stages)


def _stage_caps(pipe: Pipeline, values: np.ndarray, levels: np.ndarray) -> tuple[tuple[int, float], ...]:
    """Per stage of ``pipe``, its replicas and the slowest factor among ``levels`` it may get
    without slowing the pipeline down from its pace on GPUs whose factors are ``values`` (in
    stage order): the largest ``f`` with ``stage_times[k] * f`` at most the pipeline's slowest
    stage's ``stage_times[j] * max(values of stage j)``, the products
    :meth:`~pal_opt.model.Pipeline.effective_factor` compares.  The pipeline's pace and locality
    are then all its cost depends on: any GPUs meeting every stage's cap, in one node of its
    level, cost no more.

    >>> from pal_opt.model import Pipeline
    >>> _stage_caps(Pipeline((2.0, 1.0), (2, 2)), np.array([1.0, 1.0, 1.5, 1.0]), np.array([1.0, 1.5, 2.0, 3.0]))
    ((2, 1.0), (2, 2.0))
    """
    pace = max(t * float(values[a:b].max()) for t, (a, b) in zip(pipe.stage_times, pipe.slices(), strict=True))
    return tuple((int(r), float(levels[t * levels <= pace].max())) for t, r in zip(pipe.stage_times, pipe.replicas,
                                                                                     strict=True))


def _group(cl: Cluster, job: Job, pos: np.ndarray) -> tuple[int, ...]:
    """The GPU types a job on ``pos`` may be given instead: its type group holding ``pos``; for a
    job of one GPU, any type it may use."""
    groups = type_groups(cl, job)
    if pos.size == 1 and groups:
        return tuple(sorted({k for g in groups for k in g}))
    types = set(cl.type_of[pos].tolist())
    return tuple(next((g for g in groups if types <= set(g)), tuple(sorted(types))))


def _level(cl: Cluster, job: Job, pos: np.ndarray) -> int:
    """The widest level a job on ``pos`` may span at the same locality penalty."""
    span = int(cl.span_level_pos(pos))
    levels = (Level.SERVER, Level.RACK, Level.CLUSTER) if cl.racked else (Level.SERVER, Level.CLUSTER)
    return max(int(lv) for lv in levels if lv >= span and job.locality[lv] == job.locality[span])


def _eligible(cl: Cluster, factors: Mapping[str, np.ndarray], job: Job, group: tuple[int, ...],
              cap: float) -> np.ndarray:
    """The GPUs a need (or a pipeline's stage) may use: in its type group and no slower than
    ``cap`` for the job's class."""
    ok = np.asarray(factors[job.perfclass]) <= cap
    if len(group) < cl.num_types:
        ok &= np.isin(cl.type_of, np.asarray(group, dtype=np.int64))
    return ok


def _holds(cl: Cluster, factors: Mapping[str, np.ndarray], job: Job, need: Need, gids: Sequence[int]) -> bool:
    """Whether ``gids`` (a pipeline's stage by stage) meet ``need``'s caps, part by part."""
    pos = cl.positions(gids)
    bounds = np.cumsum([0, *(count for count, _ in need.parts)]).tolist()
    return all(_eligible(cl, factors, job, need.group, cap)[pos[a:b]].all()
               for (_, cap), a, b in zip(need.parts, bounds, bounds[1:], strict=False))


def _realise(instance: RoundInstance, factors: Mapping[str, np.ndarray], needs: Sequence[Need],
             avail: np.ndarray) -> dict[int, tuple[int, ...]] | None:
    """Place ``needs`` in their order on the ``avail`` GPUs (module docstring); None if one does not fit."""
    cl = instance.cluster
    masks = [[_eligible(cl, factors, instance.jobs[n.index], n.group, cap) for _, cap in n.parts] for n in needs]
    weights = [[count / max(int((m & avail).sum()), 1) for (count, _), m in zip(n.parts, ms, strict=True)]
               for n, ms in zip(needs, masks, strict=True)]
    pressure = np.zeros(cl.num_gpus, dtype=np.float64)
    for ms, ws in zip(masks, weights, strict=True):
        for m, w in zip(ms, ws, strict=True):
            pressure[m] += w
    out: dict[int, tuple[int, ...]] = {}
    for n, ms, ws in zip(needs, masks, weights, strict=True):
        for m, w in zip(ms, ws, strict=True):
            pressure[m] -= w
        parts = _pick(cl, np.asarray(factors[instance.jobs[n.index].perfclass]), [m & avail for m in ms], pressure, n)
        if parts is None:
            return None
        for pos in parts:
            avail[pos] = False
        out[n.index] = tuple(g for pos in parts for g in sorted(int(x) for x in cl.gpu_ids[pos]))
    return out


def _pick(cl: Cluster, values: np.ndarray, oks: Sequence[np.ndarray], pressure: np.ndarray,
          need: Need) -> list[np.ndarray] | None:
    """For each part of ``need`` (a pipeline's stages, a gang whole), its GPUs of its ``oks``
    inside one node of ``need.level`` (the node with the fewest GPUs of the loosest part that
    holds every part, then the first); the tightest part chooses first, least needed by the
    jobs to come first, then the slowest, then the first."""
    cand = np.flatnonzero(np.logical_or.reduce(oks))
    if cand.size < need.count:
        return None
    tight_first = sorted(range(len(need.parts)), key=lambda k: need.parts[k][1])
    if need.level != Level.CLUSTER:
        node = cl.server_of[cand] if need.level == Level.SERVER else cl.rack_of_server[cl.server_of[cand]]
        size = int(node.max()) + 1
        counts = np.bincount(node, minlength=size)
        holds = np.ones(size, dtype=bool)
        wanted = 0
        for k in tight_first:  # the caps are nested: every part fits when each prefix does
            wanted += need.parts[k][0]
            holds &= np.bincount(node[oks[k][cand]], minlength=size) >= wanted
        fits = np.flatnonzero(holds)
        if fits.size == 0:
            return None
        best = int(fits[np.argmin(counts[fits])])  # argmin: the first of the fewest
        cand = cand[node == best]
    out: dict[int, np.ndarray] = {}
    for k in tight_first:
        c = cand[oks[k][cand]]
        if c.size < need.parts[k][0]:
            return None
        order = np.lexsort((c, -values[c], pressure[c]))
        out[k] = np.sort(c[order[:need.parts[k][0]]])
        cand = np.setdiff1d(cand, out[k], assume_unique=True)
    return [out[k] for k in range(len(need.parts))]


# --------------------------------------------------------------------------- the exact search
def _kind_masks(instance: RoundInstance, factors: Mapping[str, np.ndarray], needs: Sequence[Need],
                avail: np.ndarray) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Each need's kind per part (its class, the part's cap and the type group) and each kind's
    GPUs among ``avail``."""
    kinds: dict[tuple[str, float, tuple[int, ...]], int] = {}
    of: list[tuple[int, ...]] = []
    masks: list[np.ndarray] = []
    for n in needs:
        job = instance.jobs[n.index]
        ks: list[int] = []
        for _, cap in n.parts:
            k = kinds.setdefault((job.perfclass, cap, n.group), len(kinds))
            if k == len(masks):
                masks.append(_eligible(instance.cluster, factors, job, n.group, cap) & avail)
            ks.append(k)
        of.append(tuple(ks))
    return of, np.asarray(masks, dtype=bool).reshape(len(masks), -1)


# --------------------------------------------------------------------------- the choice among patterns
#: A need without its job (level, cap, type group, GPUs, stages), ordered as :func:`_needs`
#: gives identical jobs their needs.
_Shape = tuple[int, float, tuple[int, ...], int, tuple[tuple[int, float], ...]]
#: A job's role in a pattern (:func:`_chosen`), ``(kind, priority, shape)``: kind :data:`KEPT`, a
#: running job that moving would charge for kept on its own GPUs, whose pattern there is
#: ``shape``; :data:`PLACED`, any other job on GPUs of pattern ``shape``, but :data:`MOVED`, such
#: a running job elsewhere (charged for it); :data:`LEFT_OUT`, a running job left out at the
#: preemption charge of priority ``priority``.
_Role = tuple[int, int, _Shape]
_NO_SHAPE: _Shape = (0, 0.0, (), 0, ())
KEPT, PLACED, LEFT_OUT, MOVED = 0, 1, 2, 3


def _swap_key(instance: RoundInstance, i: int) -> tuple[object, ...]:
    """Jobs with equal keys cost the same in each other's roles: the same class, size, locality,
    types and stages (:func:`_twin_key`'s, whether waiting or running)."""
    job = instance.jobs[i]
    return (job.perfclass, job.demand, job.locality, job.kind, job.gpu_type, job.allowed_types,
            job.allowed_counts, job.mix_types, job.pipeline)


def _shape(need: Need) -> _Shape:
    """A need without its job (:data:`_Shape`)."""
    return (need.level, need.cap, need.group, need.count, need.stages)


def _untyped(shape: _Shape) -> tuple[object, ...]:
    """``shape`` without its GPU types: what its price depends on (the cost terms do not see
    the types)."""
    level, cap, _, count, stages = shape
    return (level, cap, count, stages)


def _typeless_key(instance: RoundInstance, i: int) -> tuple[object, ...]:
    """:func:`_swap_key` without the GPU types: jobs alike but for them cost the same in each
    other's roles where the GPUs are of a type both may use (which :func:`_types_held` checks)."""
    job = instance.jobs[i]
    return (job.perfclass, job.demand, job.locality, job.allowed_counts, job.mix_types, job.pipeline)


def _chosen(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]], factors: Mapping[str, np.ndarray],
            pinned: Collection[JobId], optional: Collection[JobId],
            key: Callable[[RoundInstance, int], tuple[object, ...]] | None = None) -> dict[JobId, tuple[int, ...]] | None:
    """``placements`` with the roles of interchangeable jobs (:func:`_swap_key`; a running job
    among them) given out canonically (:func:`_assigned`), at no higher cost: which of them are
    left out (``optional`` running jobs), which running job stays where it runs, which gets GPUs
    of which pattern (:func:`_relabelled`).  Optima of equal cost whose patterns differ only in
    that then have one pattern.  With another ``key`` (:func:`_typeless_key`: jobs alike but for
    their GPU types) a pattern names the types of the GPUs themselves, not the job's type group,
    and each job is given only roles its types allow.  The roles are given out up to three
    times, the first that changes them and whose placement finds GPUs at no higher cost taken:
    with any charged running job free to keep its own GPUs; with only those whose own GPUs no
    job outside its group holds (``strict`` of :func:`_assigned`); and then (with ``key``) with
    those also free to keep them in a role whose GPUs differ from theirs only in type
    (``swap``).  None when nothing changes, or when the new roles cost more (float rounding
    aside) or find no GPUs each time."""
    index = _indices(instance)
    hard = _fixed(instance, placements, pinned)
    droppable = {index[jid] for jid in optional}
    exact = key is not None
    groups = _groups(instance, placements, pinned, optional, key or _swap_key)
    tried: list[dict[int, _Role]] = []
    for strict, swap in ((False, False), (True, False), (True, exact)):
        now: dict[int, _Role] = {}
        new: dict[int, _Role] = {}
        for group in groups:
            roles = {i: _role(instance, factors, placements, hard, i, exact) for i in group}
            others = _held_outside(instance, placements, group)
            given = _assigned(instance, factors, roles, droppable, exact, others, strict, swap)
            if given is not None and given != roles:
                now.update(roles)
                new.update(given)
        if not new or new in tried:
            continue
        tried.append(new)
        out = _relabelled(instance, placements, now, new)
        if out is not None and _no_dearer(instance, factors, placements, out):
            return out
    return None


def _held_outside(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]],
                  group: Iterable[int]) -> set[int]:
    """The GPUs that the jobs outside ``group`` (job indices) hold in ``placements``."""
    ids = {instance.jobs[i].id for i in group}
    return {g for jid, gids in placements.items() if jid not in ids for g in gids}


def _no_dearer(instance: RoundInstance, factors: Mapping[str, np.ndarray],
               placements: Mapping[JobId, tuple[int, ...]], out: Mapping[JobId, tuple[int, ...]]) -> bool:
    """Whether ``out`` keeps every job on GPU types it may use (:func:`_types_held`) and costs no
    more than ``placements`` (:data:`COST_TOL`): the test a hand-out's placement passes to be taken."""
    return _types_held(instance, placements, out) and (
        evaluate(instance, out, factors).cost <= evaluate(instance, placements, factors).cost + COST_TOL)


def _groups(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]], pinned: Collection[JobId],
            optional: Collection[JobId], key: Callable[[RoundInstance, int], tuple[object, ...]]) -> list[list[int]]:
    """The jobs not pinned, placed or ``optional``, of equal ``key`` by queue position, in groups of
    two or more with a running job among them (identical waiting jobs alone: :func:`_needs`
    shares their patterns out)."""
    index = _indices(instance)
    members: dict[tuple[object, ...], list[int]] = {}
    for jid in [*(j for j in placements if j not in pinned), *(j for j in optional if j not in placements)]:
        members.setdefault(key(instance, index[jid]), []).append(index[jid])
    return [sorted(g) for g in members.values() if len(g) >= 2 and any(instance.jobs[i].placement for i in g)]


def _repriced(instance: RoundInstance, factors: Mapping[str, np.ndarray], placements: Mapping[JobId, tuple[int, ...]],
              pinned: Collection[JobId], optional: Collection[JobId]) -> dict[JobId, tuple[int, ...]] | None:
    """``placements`` with the roles of each group of jobs alike but for their GPU types
    (:func:`_typeless_key`) given out by their price alone, then placed again.  A role's pattern
    is taken without its GPU types (:func:`_assigned` with ``anytype``: a job of the group may
    take any pattern, a charged running job keep its GPUs in any role of their price, if no job
    outside the group holds them; which patterns the moves take is chosen from the patterns
    alone, :func:`_pooled`); the jobs given a kept role then stay on their own GPUs, those
    given a leaving out are dropped, and the others are placed again with their roles' caps and
    levels in their own type groups (:func:`_placed_in_roles`), beside the jobs outside the groups
    (and of groups whose roles cannot be given out) where ``placements`` has them.  While that
    finds no GPUs (the hand-out does not see the types), the last kept job in the queue is barred
    from keeping its GPUs (it moves) and the roles are given out again.  The roles given out, and
    each retry, depend on the patterns' prices and the GPUs alone, so optima
    that differ in which of a kept job and a waiting (or moved) one of other types holds which
    level -- the other one then on GPUs of another type than the role it traded into, which the
    typed hand-out cannot give it -- give one answer.  Why it costs no more: the hand-out is a
    matching of roles of equal price (:class:`_HandOut`), and each job placed lies on GPUs within
    its role's cap and level; the result is priced.  None when nothing is given out, or the
    placement finds no GPUs, breaks a job's types or costs more."""
    if not instance.cluster.typed:
        return None
    index = _indices(instance)
    hard = _fixed(instance, placements, pinned)
    droppable = {index[jid] for jid in optional}
    groups = _groups(instance, placements, pinned, optional, _typeless_key)
    barred: set[int] = set()
    for _ in range(sum(len(g) for g in groups) + 1):
        now: dict[int, _Role] = {}
        new: dict[int, _Role] = {}
        for group in groups:
            roles = {i: _role(instance, factors, placements, hard, i, True, True) for i in group}
            others = _held_outside(instance, placements, group)
            given = next((g for r in (_pooled(instance, factors, roles, others, barred), roles) if (
                g := _assigned(instance, factors, r, droppable, True, others, True, False, True, barred)) is not None),
                None)
            if given is not None:
                now.update(roles)
                new.update(given)
        kept = [i for i, r in new.items() if r[0] == KEPT and i not in barred]
        out = _placed_in_roles(instance, factors, placements, now, new) if new else None
        if out is not None or not kept:
            return out
        barred.add(max(kept))  # (the last kept job in the queue moves instead, and the roles are given out again)
    return None


def _pooled(instance: RoundInstance, factors: Mapping[str, np.ndarray], roles: Mapping[int, _Role],
            others: Set[int], barred: Collection[int]) -> dict[int, _Role]:
    """``roles`` (of one group of :func:`_repriced`, patterns without their types) with the move
    charges laid on patterns chosen from the roles' patterns and counts alone.  Within the group a
    move's charge does not depend on the pattern it is made to (the jobs are of one size), so
    roles ``(moved, p), (placed, q)`` cost what ``(placed, p), (moved, q)`` do: only how many
    jobs move and the patterns held count.  As many patterns as jobs were kept are set aside
    for the running jobs that moving charges for and that may keep their GPUs (as
    :class:`_HandOut` has them: no job outside the group on them, not ``barred``), in queue
    order, each the pattern of its own GPUs while one is left; the smallest of the other
    patterns go to the jobs placed without a charge, the rest are moves.  So optima that differ
    in which patterns the moved jobs took (a kept job trading its level with a moved one, the
    earlier one then free to keep its GPUs) give :func:`_assigned` one set of roles.  ``roles``
    themselves when too few such running jobs' own patterns are among them."""
    kept = sum(r[0] == KEPT for r in roles.values())
    placed = kept + sum(r[0] == PLACED for r in roles.values())
    pool = sorted(r[2] for r in roles.values() if r[0] != LEFT_OUT)
    marked: list[_Shape] = []
    for i in sorted(roles):
        job = instance.jobs[i]
        if len(marked) == kept:
            break
        if (job.placement is None or not _charged(instance, job) or keep_positions(instance, i) is None
                or i in barred or not others.isdisjoint(job.placement)):
            continue
        own = _shape_on(instance, factors, i, job.placement, True, True)
        if own in pool:
            pool.remove(own)
            marked.append(own)
    if len(marked) < kept:
        return dict(roles)
    new = sorted([*((PLACED, 0, s) for s in [*marked, *pool[:placed - kept]]), *((MOVED, 0, s) for s in pool[placed - kept:]),
                  *(r for r in roles.values() if r[0] == LEFT_OUT)])
    return dict(zip(sorted(roles), new, strict=True))


def _placed_in_roles(instance: RoundInstance, factors: Mapping[str, np.ndarray],
                     placements: Mapping[JobId, tuple[int, ...]], now: Mapping[int, _Role],
                     new: Mapping[int, _Role]) -> dict[JobId, tuple[int, ...]] | None:
    """:func:`_repriced`'s placement of the jobs of ``now`` in their ``new`` roles (patterns
    without their types), the other jobs where ``placements`` has them: the kept jobs on their
    own GPUs, the others with the caps of each group's roles dealt among them by the GPUs their
    types may use (:func:`_class_options`: as many GPUs at each cap as the roles hold, so the
    same price), the first of at most :data:`CLASS_TRIES` options placed (:func:`_placed`).  None
    if none finds GPUs, or it breaks a job's types or costs more."""
    jobs = instance.jobs
    cl = instance.cluster
    fixed = {jid: tuple(gids) for jid, gids in placements.items() if jid not in {jobs[i].id for i in now}}
    fixed.update({jobs[i].id: tuple(jobs[i].placement or ()) for i, r in new.items() if r[0] == KEPT})
    avail = cl.state == GpuState.FREE
    for gids in fixed.values():
        avail[cl.positions(gids)] = False
    groups: dict[tuple[object, ...], list[Need]] = {}
    for i, (kind, _, (level, cap, _, count, stages)) in sorted(new.items()):
        if kind in (PLACED, MOVED):
            need = Need(i, count, (), cap, level, stages)
            choices = _group_order(instance, need)  # (one GPU: any type it may use)
            if not choices:
                return None
            need = replace(need, group=tuple(sorted({t for g in choices for t in g})) if count == 1 else choices[0])
            groups.setdefault(_typeless_key(instance, i), []).append(need)
    options = [list(itertools.islice(_class_options(instance, factors, members, avail), CLASS_TRIES)) or [members]
               for members in groups.values()]
    for option in itertools.islice(itertools.product(*options), CLASS_TRIES):
        found = _placed(instance, factors, _in_order(instance, [n for ns in option for n in ns]), fixed)
        if found is None:
            continue
        out = {j.id: found[j.id] for j in jobs if j.id in found}
        if _no_dearer(instance, factors, placements, out):
            return out
    return None


def _types_held(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]],
                out: Mapping[JobId, tuple[int, ...]]) -> bool:
    """Whether every job whose GPUs ``out`` changed may run on them (its GPU types, one type
    unless it mixes them: :func:`~pal_opt.model.placement_type_error`).  The roles are given out
    by type (:func:`_assigned`), but the GPUs a newly kept job takes back are replaced by GPUs
    left free, which may be of another type; the round's cost does not see the types (such a
    placement could cost less than the optimum)."""
    jobs = instance.job_by_id
    return all(placement_type_error(instance.cluster, replace(jobs[jid], placement=gids)) is None
               for jid, gids in out.items() if gids != placements.get(jid))


def _shape_on(instance: RoundInstance, factors: Mapping[str, np.ndarray], i: int, gids: Sequence[int],
              exact: bool, anytype: bool = False) -> _Shape:
    """The pattern of job ``i`` on ``gids`` (:data:`_Shape`); ``exact``: its type group the types
    of ``gids`` themselves (so a job of one GPU on a type it alone may use is not in the pattern
    of one on a type both may); ``anytype``: every type (a pattern by its price alone, which
    does not see the types)."""
    need = _need_on(instance, factors, i, gids)
    cl = instance.cluster
    if anytype:
        need = replace(need, group=tuple(range(cl.num_types)))
    elif exact and cl.typed:
        need = replace(need, group=tuple(sorted(set(cl.type_of[cl.positions(gids)].tolist()))))
    return _shape(need)


def _role(instance: RoundInstance, factors: Mapping[str, np.ndarray], placements: Mapping[JobId, tuple[int, ...]],
          hard: Collection[JobId], i: int, exact: bool = False, anytype: bool = False) -> _Role:
    """Job ``i``'s role in ``placements`` (:data:`_Role`; ``exact``, ``anytype``: :func:`_shape_on`'s)."""
    job = instance.jobs[i]
    if job.id not in placements:
        return (LEFT_OUT, job.priority, _NO_SHAPE)
    shape = _shape_on(instance, factors, i, placements[job.id], exact, anytype)
    if job.id in hard:
        return (KEPT, 0, shape)
    return (MOVED if _charged(instance, job) else PLACED, 0, shape)


def _charged(instance: RoundInstance, job: Job) -> bool:
    """Whether ``job`` runs and moving it is charged for."""
    return job.placement is not None and any(t.moved(instance, job) > 0 for t in cost_terms())


class _HandOut:
    """Roles given to jobs one at a time (:func:`_assigned`), each only while the jobs left can
    still all be given one of the roles left (a perfect matching of jobs to roles they may
    take: a role of leaving out to an ``optional`` job of its priority; to a running job that
    moving charges for, a move, or GPUs of the pattern of its own GPUs, which it then keeps
    (:data:`KEPT`; with ``swap``, if no job outside the group holds them, also GPUs of a pattern
    that differs from its own GPUs' only in their type); GPUs of a pattern to any other job;
    each on GPU types it may use, unless ``anytype``: the roles' patterns are then taken without
    their types, :func:`_repriced` finds the GPUs).

    Why any perfect matching costs what the roles given cost: the round's cost is a sum over
    jobs, and within a group of interchangeable jobs (:func:`_swap_key`, or
    :func:`_typeless_key` on GPUs of types both may use) a job's share depends on its role
    alone -- a pattern's price on the pattern (its class, GPUs, cap and level, which the jobs
    share), a move's charge on the job's size (the same) and on moving being charged at all
    (:meth:`fits` gives moves to charged jobs only), a leaving out's on its size and priority
    (:meth:`fits`: the role's priority) -- and a kept job pays the pattern of its own GPUs and
    no charge, which is what a job placed on GPUs of that pattern pays (with ``swap``, of a
    pattern that differs only in the GPUs' type: the price of a pattern does not depend on the
    type, the cost terms see only the class's factors of the GPUs, their count, cap and level;
    the GPUs of the other type are left free instead, and :func:`_types_held` checks that every
    job's types hold).  So which charged job
    keeps its GPUs and which moves (or which of a kept job and a waiting one holds which
    pattern) is a choice among placements of equal cost, made here in queue order.  (A cost term
    registered from outside may price more than that: :func:`_chosen` prices the placement the
    roles give and keeps it only at no higher cost.)"""

    def __init__(self, instance: RoundInstance, factors: Mapping[str, np.ndarray], optional: Collection[int],
                 jobs: Sequence[int], roles: Sequence[_Role], exact: bool, others: Set[int], strict: bool,
                 swap: bool, anytype: bool = False, barred: Collection[int] = ()) -> None:
        self.instance, self.optional, self.swap, self.anytype = instance, optional, swap, anytype
        self.jobs, self.roles = list(jobs), list(roles)
        self.charged = {i: _charged(instance, instance.jobs[i]) for i in jobs}
        runs = {i: instance.jobs[i].placement or () for i in jobs}
        #: each charged job's pattern on its own GPUs, if it may keep them (``strict``: none held
        #: by ``others``, the jobs outside the group)
        self.own = {i: _shape_on(instance, factors, i, runs[i], exact, anytype) for i in jobs if self.charged[i]
                    and keep_positions(instance, i) is not None and (not strict or others.isdisjoint(runs[i]))
                    and i not in barred}
        #: those whose own GPUs no job outside the group holds
        self.clear = {i for i in self.own if others.isdisjoint(runs[i])}
        self.out: dict[int, _Role] = {}

    def fits(self, i: int, role: _Role) -> bool:
        """Whether job ``i`` may take ``role``."""
        kind, priority, shape = role
        job = self.instance.jobs[i]
        if kind == LEFT_OUT:
            return i in self.optional and job.priority == priority
        if self.charged[i] and kind == PLACED:
            return self.keeps(i, shape)  # (a charged job placed is a job kept on its own GPUs)
        cl = self.instance.cluster
        return (kind != MOVED or self.charged[i]) and (
            self.anytype or not cl.typed or set(shape[2]) <= set(usable_types(cl, job)))

    def keeps(self, i: int, shape: _Shape) -> bool:
        """Whether charged job ``i`` may keep its own GPUs in a role of pattern ``shape``: the
        pattern of its GPUs, or (``exact``) one that differs from it only in the GPU types."""
        own = self.own.get(i)
        return own is not None and (own == shape or self.swap and i in self.clear and _untyped(own) == _untyped(shape))

    def dealable(self, jobs: Sequence[int], roles: Sequence[_Role]) -> bool:
        """Whether each of ``jobs`` may be given one of ``roles``, all of them."""
        if len(jobs) != len(roles):
            return False
        if not jobs:
            return True
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import maximum_bipartite_matching

        may = csr_matrix(np.array([[self.fits(i, r) for r in roles] for i in jobs], dtype=np.int8))
        return bool((maximum_bipartite_matching(may, perm_type="column") >= 0).all())

    def give(self, i: int, role: _Role) -> bool:
        """Give ``role`` to job ``i`` (a charged job placed: :data:`KEPT`, on its own GPUs,
        recorded with the pattern of the role it took) if the rest stay :meth:`dealable`."""
        jobs = [j for j in self.jobs if j != i]
        roles = list(self.roles)
        roles.remove(role)
        if not self.dealable(jobs, roles):
            return False
        kind, priority, shape = role
        self.jobs, self.roles = jobs, roles
        self.out[i] = (KEPT, priority, shape) if kind == PLACED and self.charged[i] else role
        return True

    def first(self, choices: Iterable[tuple[int, _Role]]) -> bool:
        """Give the first of ``choices`` (a job, a role) that :meth:`fits` and leaves the rest
        :meth:`dealable`; whether one did."""
        return any(self.fits(i, r) and self.give(i, r) for i, r in choices)


def _assigned(instance: RoundInstance, factors: Mapping[str, np.ndarray], now: Mapping[int, _Role],
              optional: Collection[int], exact: bool = False, others: Set[int] = frozenset(),
              strict: bool = False, swap: bool = False, anytype: bool = False,
              barred: Collection[int] = ()) -> dict[int, _Role] | None:
    """The roles ``now`` (of interchangeable jobs, by queue position) given out again from the
    roles alone (``exact``: patterns by :func:`_shape_on`'s GPU types).  Running jobs that moving
    is charged for are kept on their own GPUs first, in queue order, each whose own GPUs'
    pattern is among the patterns the jobs were placed on (``swap``: or one that differs only in
    the GPUs' type, if no job outside ``now`` holds its GPUs, ``others``), whose own GPUs no such
    job holds if ``strict``, and whose keeping leaves every other job a role it may take (a move
    goes to a charged job only, so the moves are all still made): of two equal running jobs the
    earlier keeps its GPUs and the later moves whichever the optimum kept, a job placed then
    taking the pattern of the GPUs the later one left.  Each role of leaving a job out goes
    to the last other job of the queue that may be left out at that charge (an ``optional`` job
    of that priority), so the earlier ones stay placed; as many running jobs as were moved are
    moved, the next ones, on those patterns in order; the other running jobs, in queue order,
    take the first pattern their GPUs meet (they stay); the rest, in queue order, the first
    pattern left.  Each choice is the first of those that leaves every other job a role it may
    take (:class:`_HandOut`: its GPU types too, unless ``anytype``), so the roles given out cost
    what ``now`` does.  ``barred``: charged jobs that may not keep their GPUs (:func:`_repriced`).
    None if the jobs not kept cannot all be given one."""
    jobs = instance.jobs
    left = sorted(now.values())
    hand = _HandOut(instance, factors, optional, list(now), [r if r[0] != KEPT else (PLACED, 0, r[2]) for r in left],
                    exact, others, strict, swap, anytype, barred)
    if not hand.dealable(hand.jobs, hand.roles):
        return None
    for i, own in hand.own.items():  # (in queue order; its own GPUs' pattern first)
        hand.first((i, r) for r in sorted(set(hand.roles), key=lambda r: (r[2] != own, r)) if r[0] == PLACED)
    # From here each step but the stays finds a choice: the jobs left are matched to the roles left.
    for role in [r for r in left if r[0] == LEFT_OUT]:
        hand.first((i, role) for i in reversed(hand.jobs))
    for i in [i for i in hand.jobs if hand.charged[i]]:
        hand.first((i, r) for r in sorted(set(hand.roles)) if r[0] == MOVED)
    for i in [i for i in hand.jobs if jobs[i].placement is not None]:
        hand.first((i, r) for r in sorted(set(hand.roles)) if _stays_in(instance, factors, i, r[2]))
    for i in list(hand.jobs):
        hand.first((i, r) for r in sorted(set(hand.roles)))
    return hand.out if not hand.jobs else None


def _stays_in(instance: RoundInstance, factors: Mapping[str, np.ndarray], i: int, shape: _Shape) -> bool:
    """Whether running job ``i``'s own GPUs meet the pattern ``shape`` (so it may stay there)."""
    job = instance.jobs[i]
    if job.placement is None or keep_positions(instance, i) is None:
        return False
    level, cap, group, count, stages = shape
    need = Need(i, count, group, cap, level, stages)
    own = _need_on(instance, factors, i, job.placement)
    return own.count == count and own.level <= level and _holds(instance.cluster, factors, job, need, job.placement)


def _relabelled(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]], now: Mapping[int, _Role],
                new: Mapping[int, _Role]) -> dict[JobId, tuple[int, ...]] | None:
    """``placements`` with each job of ``now`` in its ``new`` role: left out, kept on its own
    GPUs, or on the GPUs of a job whose role changed that were of that pattern (the first in
    queue order).  The GPUs a newly kept job takes from another job are replaced in that job by
    GPUs the changes left free (then by other free GPUs), in order.  None if too few are."""
    jobs = instance.jobs
    cl = instance.cluster
    held: dict[tuple[bool, _Shape], list[int]] = {}
    for i, (kind, _, shape) in now.items():
        if new[i] != now[i] and kind != LEFT_OUT:
            held.setdefault((kind == MOVED, shape), []).append(i)
    out = {jid: list(gids) for jid, gids in placements.items() if jid not in {jobs[i].id for i in now}}
    taken: set[int] = set()
    for i, (kind, _, shape) in new.items():
        if kind == LEFT_OUT:
            continue
        if new[i] == now[i]:
            out[jobs[i].id] = list(placements[jobs[i].id])
            continue
        source = held[(kind == MOVED, shape)].pop(0)
        if kind == KEPT:
            out[jobs[i].id] = list(jobs[i].placement or ())
            taken.update(out[jobs[i].id])
        else:
            out[jobs[i].id] = list(placements[jobs[source].id])
    occupied = [g for gids in out.values() for g in gids]
    if len(set(occupied)) == len(occupied):
        return {j.id: tuple(out[j.id]) for j in jobs if j.id in out}
    vacated = sorted({g for i in now if jobs[i].id in placements for g in placements[jobs[i].id]} - set(occupied))
    holes = [*vacated, *(g for g in (int(x) for x in cl.gpu_ids[cl.state == GpuState.FREE])
                         if g not in set(occupied) and g not in set(vacated))]
    kept = {jobs[i].id for i, r in new.items() if r[0] == KEPT and now[i] != r}
    if sum(g in taken for jid, gids in out.items() if jid not in kept for g in gids) > len(holes):
        return None
    fill = iter(holes)
    for jid, gids in out.items():
        if jid not in kept:
            gids[:] = [next(fill) if g in taken else g for g in gids]
    return {j.id: tuple(out[j.id]) for j in jobs if j.id in out}
