"""Pricing a placement: the round cost as the sum of the registered terms, and slowdowns."""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputTypeError, InstanceError
from ..model import (
    Cluster,
    Job,
    JobId,
    Level,
    RoundInstance,
    is_id_collection,
    keeps_placement,
    non_integer_at,
    require_gpu_ids,
    require_instance,
)
from ..options import (
    check_count,
    is_finite_number,
    number_array,
    require_items,
    require_mapping,
    require_type,
    shown_number,
)
from .registry import cost_terms, validate_cost_params

__all__ = [
    "pace_factor",
    "best_stage_order",
    "stages_mapped_best",
    "job_slowdown",
    "job_slowdown_pos",
    "CostSummary",
    "evaluate",
    "left_out_charge",
    "left_out_charges",
    "geomean_slowdown",
    "relative_gap",
]


def pace_factor(job: Job, values: np.ndarray) -> float:
    """The factor ``job`` runs at on GPUs whose factors are ``values`` (in the job's GPU order):
    the largest for a gang; for a pipeline job (:class:`~pal_opt.model.Pipeline`), whose GPUs are
    listed stage by stage, its slowest stage's (:meth:`~pal_opt.model.Pipeline.effective_factor`)."""
    if not (isinstance(job, Job) and isinstance(values, np.ndarray)):  # the fast path checks two types
        require_type(job, Job, "job", JOB_HINT)
        values = number_array(values, "values")
    if job.pipeline is None:
        return float(values.max())
    return job.pipeline.effective_factor([float(values[a:b].max()) for a, b in job.pipeline.slices()])


def best_stage_order(job: Job, gpu_ids: Sequence[int], factors: np.ndarray, position: Mapping[int, int]) -> tuple[int, ...]:
    """``gpu_ids`` in the stage order that makes ``job`` fastest: the slowest stages get the
    fastest GPUs (for nested thresholds this is optimal).  ``factors`` are the job's class factors
    by GPU position; ties keep the given order.  A gang's list is returned as it is."""
    require_type(job, Job, "job", JOB_HINT)
    if not isinstance(gpu_ids, tuple | list | np.ndarray):
        gpu_ids = require_items(gpu_ids, "gpu_ids", "a list of GPU ids")
    if not isinstance(factors, np.ndarray):
        factors = number_array(factors, "factors")
    require_mapping(position, "position", "a mapping of GPU ids to positions (cluster.position)")
    pipe = job.pipeline
    if pipe is None:
        return tuple(gpu_ids)
    by_speed = sorted(gpu_ids, key=lambda g: factors[position[g]])  # stable: ties keep the order
    order = sorted(range(len(pipe.stage_times)), key=lambda k: -pipe.stage_times[k])
    given: dict[int, list[int]] = {}
    at = 0
    for k in order:
        given[k] = by_speed[at:at + pipe.replicas[k]]
        at += pipe.replicas[k]
    return tuple(g for k in range(len(pipe.stage_times)) for g in given[k])


def stages_mapped_best(instance: RoundInstance, factors: Mapping[str, np.ndarray],
                       placements: Mapping[JobId, Sequence[int]]) -> dict[JobId, tuple[int, ...]]:
    """``placements`` ({job id: GPU ids}) with every pipeline job's GPUs in its best stage order
    (:func:`best_stage_order`; the greedy placements and the integer programs' starts map a
    pipeline's stages this way); gangs' lists as given.

    >>> from pal_opt.model import Cluster, Job, Pipeline, RoundInstance
    >>> c = Cluster.uniform(1, 3, {"classA": [1.5, 1.0, 1.0]})
    >>> p = Job("p", 3, "classA", pipeline=Pipeline((1.0, 2.0), (1, 2)))
    >>> stages_mapped_best(RoundInstance(c, (p,)), c.factors, {"p": (0, 1, 2)})  # GPU 0 on the slack stage
    {'p': (0, 1, 2)}
    >>> stages_mapped_best(RoundInstance(c, (p,)), c.factors, {"p": (1, 2, 0)})
    {'p': (0, 1, 2)}

    A running pipeline placed again on its own GPUs keeps its stage map when no other runs
    faster (here GPUs 1 and 2 are equally fast, so swapping them would change nothing but force
    a restart):

    >>> q = Job("q", 3, "classA", pipeline=Pipeline((2.0, 1.0), (1, 2)), placement=(2, 0, 1))
    >>> stages_mapped_best(RoundInstance(c, (q,)), c.factors, {"q": (0, 1, 2)})
    {'q': (2, 0, 1)}
    """
    require_instance(instance)
    _require_factors(factors)
    require_mapping(placements, "placements", "a mapping of job ids to GPU ids")
    pos = instance.cluster.position
    jobs = instance.job_by_id
    return {jid: _mapped_best(jobs[jid], gids, np.asarray(factors[jobs[jid].perfclass]), pos)
            for jid, gids in placements.items()}


def _mapped_best(job: Job, gids: Sequence[int], values: np.ndarray, pos: Mapping[int, int]) -> tuple[int, ...]:
    """:func:`best_stage_order`, except that a running pipeline placed again on its own GPUs keeps
    its stage map when that runs as fast: a re-map at equal pace would only cost a restart."""
    best = best_stage_order(job, gids, values, pos)
    held = job.placement
    if job.pipeline is None or held is None or len(held) != len(gids) or set(held) != set(gids):
        return best
    def pace(order: Sequence[int]) -> float:
        return pace_factor(job, values[[pos[g] for g in order]])
    return tuple(held) if pace(held) <= pace(best) else best


def job_slowdown_pos(cluster: Cluster, factors: np.ndarray, job: Job, pos: np.ndarray) -> float:
    """Slowdown of ``job`` on the GPUs at positions ``pos``, given its class's factor array:
    the slowest GPU's factor (a pipeline's: :func:`pace_factor`) times the job's locality penalty
    for the level the GPUs span."""
    if not (isinstance(cluster, Cluster) and isinstance(factors, np.ndarray) and isinstance(pos, np.ndarray)):
        require_type(cluster, Cluster, "cluster", " (instance.cluster)")
        factors = number_array(factors, "factors")
        pos = number_array(pos, "pos", "iu")
    level = cluster.span_level_pos(pos)
    return pace_factor(job, factors[pos]) * float(job.locality[level])


def job_slowdown(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], job: Job, gpu_ids: tuple[int, ...]
) -> float:
    """Slowdown of ``job`` on GPUs given by id, with per-class ``factors``.

    The factors come before the job here and after the placements in :func:`evaluate`; named
    arguments need no order: ``job_slowdown(instance, job=job, gpu_ids=gpus, factors=factors)``
    (and ``evaluate(instance, placements=..., factors=...)``).  Given in the other's order (a
    :class:`~pal_opt.model.Job` as ``factors`` or ``gpu_ids``, or a mapping as ``gpu_ids``) the
    error says both orders.

    Raises
    ------
    InstanceError
        No GPU ids, a GPU id that is not an integer (``1.5``, ``True``, ``"0"``, ``2.0``; numpy
        integers are ids) or not in the round, no factors for the job's class, or the arguments
        in another order.
    """
    require_instance(instance)
    if not isinstance(job, Job) or (isinstance(gpu_ids, Mapping) and not isinstance(factors, Mapping)):
        _require_in_order(job, factors, gpu_ids)
    _require_factors(factors)
    ids = _gpu_list(gpu_ids, "gpu_ids")
    if len(ids) == 0:  # numpy's "zero-size array to reduction operation maximum" otherwise
        raise InstanceError(f"job {job.id!r}: no GPUs given", path="gpu_ids")
    try:
        pos = instance.cluster.positions(ids)
    except (KeyError, TypeError, ValueError):
        raise _unknown_gpu(instance, ids, "gpu_ids") from None
    if job.perfclass not in factors:
        raise InstanceError(f"no factors for class {job.perfclass!r}; the factors have "
                            f"{', '.join(map(repr, factors)) or 'no class'}", path="factors")
    column = _factor_column(instance, factors, job.perfclass)
    return job_slowdown_pos(instance.cluster, column, job, pos)


#: Where a :class:`~pal_opt.model.Job` comes from, for the message about an argument that is not one.
JOB_HINT = " (instance.job_by_id[job_id])"

#: The end of the message about arguments given to :func:`job_slowdown` or :func:`evaluate` in
#: the other's order.
ORDER_HINT = ("the orders are evaluate(instance, placements, factors) and job_slowdown(instance, factors, job, "
              "gpu_ids); named arguments need none (factors=...)")


def _require_in_order(job: Any, factors: Any, gpu_ids: Any) -> None:
    """:func:`job_slowdown`'s error when ``job`` is not a :class:`~pal_opt.model.Job` (a job
    id: an ``AttributeError`` 'perfclass' deep inside otherwise) or ``gpu_ids`` is a mapping and
    ``factors`` not; one that names both functions' orders when the Job or the factors came in
    another place (as in :func:`evaluate`, the factors last)."""
    if isinstance(factors, Job) or isinstance(gpu_ids, Job):
        where = "factors" if isinstance(factors, Job) else "gpu_ids"
        raise InstanceError(f"must be a Job, got {type(job).__name__}; the Job was given as {where}: {ORDER_HINT}",
                            path="job")
    if not isinstance(job, Job):
        raise InstanceError(f"must be a Job{JOB_HINT}, got {type(job).__name__} {job!r:.60}", path="job")
    raise InstanceError(f"must be a sequence of GPU ids, got {type(gpu_ids).__name__} (the factors?): {ORDER_HINT}",
                        path="gpu_ids")


def _require_factors(factors: Any) -> None:
    """An :class:`InstanceError` at ``factors`` unless they map classes to arrays (a list, an
    array or a :class:`~pal_opt.model.Cluster` failed deep inside)."""
    if not isinstance(factors, Mapping):
        raise InstanceError("must map class names to per-GPU factor arrays (pal_opt.binned_factors(instance.cluster) "
                            f"or instance.cluster.factors), got {type(factors).__name__}", path="factors")


def _gpu_list(gpu_ids: Any, path: str) -> Sequence[Any]:
    """``gpu_ids`` as a sequence; an :class:`InstanceError` at ``path`` if it is not one of GPU
    ids (None, one id, a string)."""
    if not is_id_collection(gpu_ids):
        raise InstanceError(f"must be a sequence of GPU ids, got {type(gpu_ids).__name__} {gpu_ids!r}", path=path)
    return gpu_ids if isinstance(gpu_ids, Sequence | np.ndarray) else list(gpu_ids)  # type: ignore[return-value]


def _unknown_gpu(instance: RoundInstance, gpu_ids: Sequence[Any], path: str) -> InstanceError:
    """The error of the first of ``gpu_ids`` that is not a GPU id of the round: one that is not
    an integer (``1.5``, ``True``, ``"0"``, ``2.0``: :func:`~pal_opt.model.require_gpu_ids`) at
    ``path[k]``, else one the cluster does not have."""
    try:
        require_gpu_ids(gpu_ids, path)
    except InstanceError as exc:
        return exc
    where = instance.cluster.position
    for g in gpu_ids:
        if g not in where:
            return InstanceError(f"GPU {g!r} is not in the round's cluster", path=path)
    return InstanceError("GPU ids the round's cluster does not have", path=path)  # pragma: no cover


def _factor_column(instance: RoundInstance, factors: Mapping[str, Any], c: str, path: str = "factors") -> np.ndarray:
    """Class ``c``'s factors as the float array of one per GPU position; an :class:`InstanceError`
    at ``factors.<class>`` if they are not."""
    g = instance.cluster.num_gpus
    try:
        column = np.asarray(factors[c], dtype=np.float64)
    except (TypeError, ValueError):
        column = None
    if column is None or column.shape != (g,):
        got = f"shape {column.shape}" if column is not None and column.ndim else repr(factors[c])[:60]
        raise InstanceError(f"must be {g} numbers, one per GPU of the cluster, got {got}", path=f"{path}.{c}")
    return column


def _unknown(instance: RoundInstance, placements: Mapping[Any, Sequence[int]], factors: Mapping[str, np.ndarray],
             exc: Exception) -> Exception:
    """The :class:`InstanceError` naming what an error while pricing ``placements`` was about (a
    job, GPU or class the round does not have, GPU ids that are not a sequence of them, a class's
    factors that are not one number per GPU); ``exc`` itself if none of those."""
    jobs, where = instance.job_by_id, instance.cluster.position
    for jid, gids in placements.items():
        if jid not in jobs:
            swapped = isinstance(jid, str) and jid in instance.cluster.factors  # evaluate(inst, factors, placements)
            hint = f" (a class: {ORDER_HINT})" if swapped else ""
            return InstanceError(f"job {jid!r} is not in the round{hint}", path="placements")
        gids = _gpu_list(gids, f"placements.{jid}")
        if non_integer_at(gids) is not None or any(g not in where for g in gids):
            return _unknown_gpu(instance, gids, f"placements.{jid}")
        if jobs[jid].perfclass not in factors:
            return InstanceError(f"no factors for class {jobs[jid].perfclass!r} (job {jid!r}); the factors have "
                                 f"{', '.join(map(repr, factors)) or 'no class'}", path="factors")
    for c in dict.fromkeys(jobs[jid].perfclass for jid in placements):
        _factor_column(instance, factors, c)
    return exc


def _require_cost(cost: Any, arg: str) -> None:
    """An error naming ``arg`` unless ``cost`` is a round cost: a real number (numpy's too, not a
    bool), inf allowed (a term priced past the floats), NaN and -inf not."""
    if isinstance(cost, bool) or not isinstance(cost, numbers.Real):
        raise InputTypeError(f"must be a number (a round cost), got {type(cost).__name__} {cost!r:.60}", path=arg)
    if not (is_finite_number(cost) or cost == math.inf):  # 10**400 as NaN (math.isnan raised OverflowError)
        raise InstanceError(f"must be a number or inf (a round cost), got {shown_number(cost)}", path=arg)


def geomean_slowdown(cost: float, gpus: int) -> float:
    """exp(cost / gpus); 1.0 for an empty placement; inf past the floats (a cost term priced
    in thousands per GPU, such as a migration cost meant as "never").

    >>> round(geomean_slowdown(4 * math.log(1.1), 4), 12)
    1.1
    >>> geomean_slowdown(5000.0, 1)
    inf

    Raises
    ------
    InstanceError
        ``cost`` is not a number, or is NaN or -inf (no placement costs that).
    OptionError
        ``gpus`` is not an integer >= 0.
    """
    _require_cost(cost, "cost")
    if check_count(gpus, "gpus", 0) == 0:
        return 1.0
    try:
        return math.exp(cost / gpus)
    except OverflowError:
        return math.inf


def relative_gap(objective: float, bound: float | None, gpus: int) -> float | None:
    """Relative gap of the geometric-mean slowdown: gm(objective) / gm(bound) − 1 (≥ 0).

    >>> relative_gap(1.0, 1.0, 8)
    0.0

    Raises
    ------
    InstanceError
        ``objective`` is not a number, or is NaN or -inf, or ``bound`` is not None or a number.
    OptionError
        ``gpus`` is not an integer >= 0.
    """
    _require_cost(objective, "objective")
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, numbers.Real)):
        raise InputTypeError(f"must be None or a number, got {type(bound).__name__} {bound!r:.60}", path="bound")
    check_count(gpus, "gpus", 0)
    if bound is None or gpus <= 0 or not is_finite_number(bound):  # 10**400 as NaN: no bound
        return None if bound is None or not is_finite_number(bound) else 0.0
    try:
        return max(0.0, math.expm1((objective - bound) / gpus))
    except OverflowError:  # a gap past the floats: as good as none proven
        return math.inf


@dataclass(frozen=True)
class CostSummary:
    """The price of a placement.

    Attributes
    ----------
    cost
        Round cost: the sum of every registered term over the placed jobs and the moved ones.
    gpus
        GPUs placed (Σ d_j over placed jobs, for jobs of one count).
    geomean
        exp(placed cost / gpus): the cost of the placed jobs (their moved charges included), without
        the preemption charges of running jobs left out, per GPU placed.
    slowdown
        Per job: its slowdown (slowest GPU's factor × locality penalty).
    level
        Per job: the topology level its set spans (0 server, 1 rack, 2 cluster).
    moved
        Running jobs given a different GPU set, or (pipelines) a different stage map of it.
    by_term
        The cost split by term name.
    """

    cost: float
    gpus: int
    geomean: float
    slowdown: dict[JobId, float]
    level: dict[JobId, int]
    moved: tuple[JobId, ...]
    by_term: dict[str, float] = field(default_factory=dict)

    @property
    def spanning(self) -> int:
        """Jobs whose GPUs lie on more than one server."""
        return sum(1 for v in self.level.values() if v > 0)


def evaluate(
    instance: RoundInstance,
    placements: Mapping[JobId, tuple[int, ...] | list[int]],
    factors: Mapping[str, np.ndarray],
) -> CostSummary:
    """Price ``placements`` ({job id: GPU ids}) under ``factors`` ({class: per-GPU array}) with
    every registered cost term (:mod:`pal_opt.cost.registry`).

    A running job placed on other GPUs than it holds (a pipeline also on the same GPUs with its
    stages re-mapped, :func:`~pal_opt.model.keeps_placement`) pays each term's ``moved`` charge, and a
    running job left out pays each term's ``preempted`` charge (:func:`left_out_charge`); the
    geometric mean (``CostSummary.geomean``) is of the placed jobs' costs, without the
    preemption charges.  Validity is not checked here; see :mod:`pal_opt.check`.  GPU ids are
    integers (Python's or numpy's): ``1.5``, ``True``, ``"0"`` or ``2.0`` is an
    :class:`~pal_opt.errors.InstanceError` at ``placements.<job>[k]``.

    The factors come last here and before the job in :func:`job_slowdown`; named arguments need
    no order (``evaluate(instance, factors=factors, placements=placements)``).  Given in
    ``job_slowdown``'s order (the factors second), the error names a class as a job not in the
    round and says both orders.
    """
    require_instance(instance)
    if not isinstance(placements, Mapping):  # a PlacementResult, a list: AttributeError 'items' inside
        hint = " (its .placements)" if hasattr(placements, "placements") else ""
        raise InstanceError(f"must map job ids to GPU ids, got {type(placements).__name__}{hint}", path="placements")
    _require_factors(factors)
    text = next((jid for jid, gids in placements.items()  # tuples and lists first: the Mapping test is slower
                 if not isinstance(gids, tuple | list) and isinstance(gids, str | bytes | Mapping)), None)
    if text is not None:  # "01" iterates as GPU ids "0" and "1": priced without a word otherwise
        _gpu_list(placements[text], f"placements.{text}")
    validate_cost_params(instance)
    try:
        return _evaluate(instance, placements, factors)
    except (KeyError, TypeError, ValueError, IndexError) as exc:  # say which job, GPU or class
        raise _unknown(instance, placements, factors, exc) from None


def _evaluate(
    instance: RoundInstance,
    placements: Mapping[JobId, tuple[int, ...] | list[int]],
    factors: Mapping[str, np.ndarray],
) -> CostSummary:
    terms = cost_terms()
    jobs = instance.job_by_id
    by_term = dict.fromkeys((t.name for t in terms), 0.0)
    gpus = 0
    slow: dict[JobId, float] = {}
    lev: dict[JobId, int] = {}
    moved: list[JobId] = []
    for jid, gids, pos, level, top in _placed(instance, placements, factors):
        job = jobs[jid]
        if job.pipeline is not None:  # its slowest stage sets its pace
            top = pace_factor(job, factors[job.perfclass][pos])
        slow[jid] = top * float(job.locality[level])
        lev[jid] = level
        gpus += int(pos.size)
        for t in terms:
            by_term[t.name] += t.placed(instance, job, pos, level, top)
        if job.placement is not None and not keeps_placement(job, gids):
            moved.append(jid)
            for t in terms:
                by_term[t.name] += t.moved(instance, job)
    out = left_out_charges(instance, placements)
    for name, v in out.items():
        by_term[name] += v
    cost = math.fsum(by_term.values())
    placed_cost = cost - math.fsum(out.values())
    return CostSummary(cost, gpus, geomean_slowdown(placed_cost, gpus), slow, lev, tuple(moved), by_term)


def left_out_charges(instance: RoundInstance, placed: Collection[JobId]) -> dict[str, float]:
    """What each registered term charges for the running jobs of ``instance`` not in ``placed``
    (``CostTerm.preempted``), by term name (terms that charge nothing are left out)."""
    require_instance(instance)
    out: dict[str, float] = {}
    for j in instance.jobs:
        if j.placement is None or j.id in placed:
            continue
        for t in cost_terms():
            v = t.preempted(instance, j)
            if v:
                out[t.name] = out.get(t.name, 0.0) + v
    return out


def left_out_charge(instance: RoundInstance, placed: Collection[JobId]) -> float:
    """The total of :func:`left_out_charges`: what leaving out the running jobs not in
    ``placed`` costs (a set, list or mapping of job ids: ``None`` or a str was taken where no job
    ran, and a str matched job ids as substrings where one did)."""
    if isinstance(placed, str | bytes) or not isinstance(placed, Collection):
        raise InputTypeError(f"must be a collection of job ids (a set, list or mapping), got {type(placed).__name__} "
                             f"{placed!r:.60}", path="placed")
    return math.fsum(left_out_charges(instance, placed).values())


def _placed(
    instance: RoundInstance,
    placements: Mapping[JobId, tuple[int, ...] | list[int]],
    factors: Mapping[str, np.ndarray],
) -> Iterator[tuple[JobId, tuple[int, ...] | list[int], np.ndarray, int, float]]:
    """Per placed job, in order: its id, GPU ids, positions, the level they span and the slowest
    GPU's factor -- computed for all jobs at once (a round of 65,536 GPUs places 10,000 jobs)."""
    cl = instance.cluster
    jobs = instance.job_by_id
    items = list(placements.items())
    sizes = np.fromiter((len(g) for _, g in items), dtype=np.int64, count=len(items))
    if not items or not sizes.all():  # an empty GPU set (invalid, but priceable): one by one
        for jid, gids in items:
            pos = cl.positions(gids)
            yield jid, gids, pos, int(cl.span_level_pos(pos)), float(factors[jobs[jid].perfclass][pos].max())
        return
    pos = cl.positions(itertools.chain.from_iterable(g for _, g in items))
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    srv = cl.server_of[pos]
    same = np.minimum.reduceat(srv, starts) == np.maximum.reduceat(srv, starts)
    level = np.where(same, int(Level.SERVER), int(Level.CLUSTER))
    if cl.racked:
        rk = cl.rack_of_server[srv]
        level[~same & (np.minimum.reduceat(rk, starts) == np.maximum.reduceat(rk, starts))] = int(Level.RACK)
    value = np.empty(pos.size, dtype=np.float64)
    klass = np.repeat(np.asarray([jobs[jid].perfclass for jid, _ in items], dtype=object), sizes)
    for c in dict.fromkeys(jobs[jid].perfclass for jid, _ in items):
        on = klass == c
        value[on] = np.asarray(factors[c], dtype=np.float64)[pos[on]]
    top = np.maximum.reduceat(value, starts)
    bounds = np.append(starts, pos.size).tolist()
    for k, ((jid, gids), lv, t) in enumerate(zip(items, level.tolist(), top.tolist(), strict=True)):
        yield jid, gids, pos[bounds[k] : bounds[k + 1]], lv, t
