"""The round program for rounds with pipeline jobs: it places every stage, not only the gang.

A pipeline job (:class:`~pal_opt.model.Pipeline`) runs at the pace of its slowest stage: stage
``k`` takes ``τ_k`` times the largest factor among its own GPUs (:func:`pal_opt.cost.pace_factor`).
A slow GPU costs nothing on a stage with slack, so *which* GPUs run *which* stage matters, and the
round program (:mod:`pal_opt.ilp.formulation`), which prices a job by its slowest GPU, cannot see
it.  This program does: every admitted job is a pipeline (a gang is one stage of ``demand``
replicas) and it chooses, per job, a *mode* -- its pace ``π`` and where it runs (one server, one
rack, anywhere) -- and how many GPUs of each GPU type each stage gets on each server.
``formulations/pipeline_round.md`` gives the mathematics; in short, per admitted job ``j``:

* ``m[j, μ]`` (binary): the job runs in mode ``μ = (π, span, node)``; exactly one.  Its cost is
  what every registered cost term charges a job of slowdown factor ``π`` spanning ``span``
  (``CostTerm.slots``: ``d ln π + d ln locality[span]`` for the built-in terms).
* ``c[j, k, g]`` (integer): GPUs of type ``g`` on stage group ``k`` (stages of equal relative time
  share a group); ``Σ_g c = r_k``, and only where ``τ_k · value_j(g) ≤ π`` for the chosen mode.
* ``b[j, s, g]`` (integer): GPUs of type ``g`` on server ``s``; ``Σ_s b = Σ_k c`` per type, only
  on servers the chosen mode covers, and ``Σ_j b[j, s, g] ≤`` the free GPUs of type ``g`` on ``s``.

The candidate paces are the products ``τ_k · value_j(g)``, so the least feasible pace of any
placement is a candidate and the optimum prices every job at its true pace: the program's
optimum is the least round cost over placements and stage maps.  A round of gangs gives the round
program's optimum (the tests compare them).

:func:`solve_stage_round` solves it on any backend and returns a priced
:class:`~pal_opt.result.PlacementResult` whose GPU lists (and ``stages``) are in stage order;
:func:`pal_opt.ilp.solve_ilp` calls it when an admitted job has a pipeline.
:func:`best_stage_order` (from :mod:`pal_opt.cost`) is the best stage map of a fixed GPU set (sort), for
comparisons and the greedy placements.

``ilp-preempt`` (:mod:`pal_opt.ilp.preempt`) builds the same program with ``optional=`` running
jobs: each gets a drop variable ``u[j]`` that stands for all its modes and stages (it is then
left out, preempted) and is priced by the cost terms' ``preempted`` charge
(``formulations/preemption.md`` §6).  Running jobs left out of the program altogether pay that
charge in the objective's constant, so every solution is priced at its round cost.

When a cost term charges for moving a running job (the restart or migration cost,
:func:`~pal_opt.ilp.running.moving_is_charged`), every admitted running job that can keep its GPUs
(:func:`~pal_opt.ilp.running.keep_positions`) gets a keep variable ``k[j]`` in its ``mode`` row
and, times ``r_k``, in its ``stage`` rows: at 1 the job runs on exactly its current GPUs in its
current stage map (:func:`~pal_opt.model.keeps_placement`), takes them in the ``cap`` rows and is
priced where it runs less the move charge; every admitted running job pays the move charge in the
objective's constant, so any other way of placing it pays it (``formulations/pipeline_round.md`` §7).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from .. import progress
from ..check import checked_start
from ..cost import (
    best_stage_order,
    cost_terms,
    evaluate,
    left_out_charge,
    pace_factor,
    relative_gap,
    stages_mapped_best,
    unseen_terms,
)
from ..deadline import FINISH_SECONDS, Deadline
from ..errors import BackendError, InstanceError, OptionError, SolveInterrupted, TimeLimitReached
from ..gputypes import type_groups
from ..model import GpuState, Job, JobId, Level, RoundInstance, keeps_placement
from ..result import OPTIMALITY_TOL, PlacementResult, Status, priced_result
from .backends import BackendSolution, SolveOptions, SolverStatus, get_backend
from .backends.base import Backend, BackendAbandoned, BackendInterrupted
from .builder import ProgramBuilder
from .program import Program
from .running import keep_positions, moving_is_charged

__all__ = [
    "StageRound",
    "stage_groups",
    "build_stage_round",
    "solve_stage_round",
    "best_stage_order",
    "decode_stage_round",
    "encode_stage_round",
    "has_pipelines",
    "check_stage_round",
    "start_placement",
    "alone_bound",
    "alone_bound_in_time",
    "bounded",
    "BOUND_SECONDS_PER_GPU",
    "PROVEN_GAP",
    "START_MEETS_BOUND",
    "start_meets_bound",
]

#: Column kinds of the program (``KIND_DROP``: an optional running job's drop variable;
#: ``KIND_KEEP``: a running job's keep variable, when moving it is charged).
KIND_MODE, KIND_STAGE, KIND_SERVER, KIND_DROP, KIND_KEEP = 0, 1, 2, 3, 4
#: Auxiliary columns (``formulations/pipeline_round.md`` §4): ``KIND_LEVEL`` a pace level ``y``,
#: ``KIND_SPREAD`` a rack's or the cluster's mode total ``z``; each the sum of some mode columns.
KIND_LEVEL, KIND_SPREAD = 5, 6
_META = ("kind", "job", "group", "gtype", "node", "span")
#: The jobs-alone bound (:func:`alone_bound_in_time`) is computed only with this many seconds per
#: free GPU left (beside the finish reserve): it took 0.03-0.2 s at 2,048 GPUs with PAL's binning
#: and 0.6 s with ``binning="none"`` (every distinct factor a cell), on the shared machine under
#: load 1-8; 2 ms at 256 GPUs, where the build took 50 ms (``benchmarks/stage_scale.py``'s round).
BOUND_SECONDS_PER_GPU = 5e-4
#: A gap to the bound at or under which an answer is proven optimal: the package's one tolerance,
#: :data:`pal_opt.result.OPTIMALITY_TOL`, as the round program's.
PROVEN_GAP = OPTIMALITY_TOL
#: ``info["solver_status"]`` of an answer whose start the jobs-alone bound proved optimal, so that
#: the stage program was neither built nor solved (:func:`solve_stage_round`).
START_MEETS_BOUND = "not run: the start placement meets the jobs-alone bound"


def has_pipelines(instance: RoundInstance, admitted: Sequence[int]) -> bool:
    """Whether one of the admitted jobs has pipeline stages."""
    return any(instance.jobs[i].pipeline is not None for i in admitted)


def stage_groups(job: Job) -> list[tuple[float, tuple[int, ...], int]]:
    """The job's stages grouped by time: ``(time, stage indices, replicas)`` per distinct stage
    time, slowest first.  A gang is one group ``(1.0, (0,), demand)``."""
    if job.pipeline is None:
        return [(1.0, (0,), job.demand)]
    times, reps = job.pipeline.stage_times, job.pipeline.replicas
    out = []
    for t in sorted(set(times), reverse=True):
        members = tuple(k for k, x in enumerate(times) if x == t)
        out.append((t, members, sum(reps[k] for k in members)))
    return out


def _paces(job: Job, values: np.ndarray) -> np.ndarray:
    """``paces[k, g]``: the factor the job runs at if stage group ``k``'s slowest GPU has factor
    ``values[g]`` (the same float operations as :func:`pal_opt.cost.pace_factor`)."""
    groups = stage_groups(job)
    top = groups[0][0]
    return np.array([[t * v / top for v in values.tolist()] for t, _, _ in groups])


# --------------------------------------------------------------------------- the program
@dataclass(frozen=True, eq=False)
class StageRound:
    """The program of one round with pipeline jobs, and what decoding it needs.

    Attributes
    ----------
    program
        The :class:`~pal_opt.ilp.program.Program`.
    instance, factors, admitted
        The round, the (binned) per-class factors, the admitted job indices (queue order).
    gpu_type
        GPU type per GPU position (``-1`` for GPUs not free): GPUs of one type have equal
        factors in every class of the admitted jobs.
    kind, job, group, gtype, node, span
        Per column: ``KIND_MODE`` / ``KIND_STAGE`` / ``KIND_SERVER`` / ``KIND_DROP`` /
        ``KIND_KEEP`` / ``KIND_LEVEL`` / ``KIND_SPREAD``, the job's index in
        ``admitted``, the stage group (mode and level columns: the type group), the GPU type, the
        server (mode and spread columns: the server or rack position, ``-1`` anywhere) and the
        mode's span (:class:`~pal_opt.model.Level`).
    pace
        Per column: the mode's or the level's pace (``nan`` for other columns).
    optional
        The admitted running jobs that may be left out (a drop column each, ``KIND_DROP``).
    kept
        The admitted running jobs that have a keep column (``KIND_KEEP``): moving is charged
        and they can keep their GPUs.
    """

    program: Program
    instance: RoundInstance
    factors: Mapping[str, np.ndarray]
    admitted: tuple[int, ...]
    gpu_type: np.ndarray
    kind: np.ndarray
    job: np.ndarray
    group: np.ndarray
    gtype: np.ndarray
    node: np.ndarray
    span: np.ndarray
    pace: np.ndarray
    optional: tuple[int, ...] = ()
    kept: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Gpus:
    """Free GPUs by cell (GPUs of one GPU type with equal factors): ``type_values[class]`` per
    cell, ``cnt[s, g]`` per server, ``kind[g]`` the cell's GPU type (0 on an untyped cluster)."""

    gpu_type: np.ndarray
    type_values: dict[str, np.ndarray]
    cnt: np.ndarray
    kind: np.ndarray


class _Nodes(NamedTuple):
    """Where a job may run: per entry its ``span``, ``node`` (server or rack position, -1 the
    whole cluster) and ``servers``; ``member`` is the sparse (entries × servers) 0/1 matrix of
    the servers each entry holds."""

    span: np.ndarray
    node: np.ndarray
    servers: list[np.ndarray]
    member: sp.csr_matrix


class _Modes(NamedTuple):
    """A job's feasible modes, one entry per mode in every array: its ``pace``, where it runs
    (``entry``: an index into ``nodes``) and which of its type groups it draws from (``tgroup``;
    ``type_cells[t]`` masks the cells of group ``t``: one usable GPU type, or several if the job
    mixes)."""

    pace: np.ndarray
    entry: np.ndarray
    tgroup: np.ndarray
    nodes: _Nodes
    type_cells: Sequence[np.ndarray]

    @property
    def span(self) -> np.ndarray:
        return self.nodes.span[self.entry]

    @property
    def node(self) -> np.ndarray:
        return self.nodes.node[self.entry]


def _gpu_types(instance: RoundInstance, factors: Mapping[str, np.ndarray], admitted: Sequence[int]) -> _Gpus:
    cl = instance.cluster
    free = np.flatnonzero(cl.state == GpuState.FREE)
    classes = sorted({instance.jobs[i].perfclass for i in admitted})
    if not classes:  # nothing to place
        none = np.zeros(0, dtype=np.int64)
        return _Gpus(np.full(cl.num_gpus, -1, dtype=np.int64), {}, np.zeros((cl.num_servers, 0), dtype=np.int64), none)
    # the GPU type first (a cell never spans two types), then the factors (untyped: all type 0)
    cols = np.column_stack([cl.type_of[free].astype(np.float64)]
                           + [np.asarray(factors[c], dtype=np.float64)[free] for c in classes])
    rows, inverse = np.unique(cols, axis=0, return_inverse=True)
    gpu_type = np.full(cl.num_gpus, -1, dtype=np.int64)
    gpu_type[free] = inverse.reshape(-1)
    cnt = np.zeros((cl.num_servers, rows.shape[0]), dtype=np.int64)
    np.add.at(cnt, (cl.server_of[free], inverse.reshape(-1)), 1)
    return _Gpus(gpu_type, {c: rows[:, i + 1] for i, c in enumerate(classes)}, cnt, rows[:, 0].astype(np.int64))


def _type_cells(instance: RoundInstance, job: Job, gpus: _Gpus) -> list[np.ndarray]:
    """Per type group the job may be drawn from (:func:`pal_opt.gputypes.type_groups`: each usable
    type alone, or all together if it mixes), the mask of the cells of those types; one group of
    every cell on an untyped cluster."""
    cl = instance.cluster
    if not cl.typed:
        return [np.ones(gpus.kind.size, dtype=bool)]
    return [np.isin(gpus.kind, np.asarray(group, dtype=np.int64)) for group in type_groups(cl, job)]


def _nodes(instance: RoundInstance, demand: int) -> _Nodes:
    """Where a job of ``demand`` GPUs may run: ``(span, node, servers)`` for every server, every
    rack of at least two servers (racked clusters) and the whole cluster (``demand >= 2``)."""
    cl = instance.cluster
    out = [(int(Level.SERVER), s, np.array([s])) for s in range(cl.num_servers)]
    if demand >= 2 and cl.num_servers >= 2:
        if cl.racked:
            for r in range(len(cl.rack_ids)):
                members = np.flatnonzero(cl.rack_of_server == r)
                if members.size >= 2:
                    out.append((int(Level.RACK), r, members))
        out.append((int(Level.CLUSTER), -1, np.arange(cl.num_servers)))
    sizes = [x[2].size for x in out]
    member = sp.csr_matrix((np.ones(sum(sizes)), (np.repeat(np.arange(len(out)), sizes),
                                                  np.concatenate([x[2] for x in out]))),
                           shape=(len(out), cl.num_servers))
    return _Nodes(np.array([x[0] for x in out], dtype=np.int64), np.array([x[1] for x in out], dtype=np.int64),
                  [x[2] for x in out], member)


def _modes(job: Job, paces: np.ndarray, counts: np.ndarray, nodes: _Nodes,
           type_cells: Sequence[np.ndarray]) -> _Modes:
    """Feasible modes of one job in isolation, per type group (``type_cells``): at pace ``π`` the
    slowest ``i + 1`` stage groups together need no more GPUs of the type group than the node has
    at or under their thresholds (the thresholds are nested, so this is exact for the job alone).
    Modes are listed by type group, then pace (ascending), then node (servers, racks, cluster)."""
    groups = stage_groups(job)
    need = np.cumsum([r for _, _, r in groups])
    pace, entry, tgroup = [], [], []
    for t, cells in enumerate(type_cells):
        levels = np.unique(paces[:, cells])
        # allowed[p, k, g]: cell g may serve stage group k at pace levels[p] (nested in k)
        allowed = (paces[None, :, :] <= levels[:, None, None]).reshape(-1, paces.shape[1])
        per_server = (counts * cells[None, :]).astype(np.float64) @ allowed.T.astype(np.float64)
        have = np.asarray(nodes.member @ per_server).reshape(len(nodes.servers), levels.size, need.size)
        fits = np.all(have >= need[None, None, :] - 0.5, axis=2)  # (nodes, levels); counts are exact
        p, n = np.nonzero(fits.T)
        pace.append(levels[p])
        entry.append(n)
        tgroup.append(np.full(p.size, t, dtype=np.int64))
    cat = lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dtype=dt)  # noqa: E731
    return _Modes(cat(pace, np.float64), cat(entry, np.int64), cat(tgroup, np.int64), nodes, type_cells)


#: Decoding a solution, and encoding the start (to check it and for the warm start), each take
#: at most about this share of the build's time (measured 0.01-0.06: 0.08 s and 0.24 s after a
#: 5.8 s build at 2,048 GPUs, ``benchmarks/stage_scale.py``).
DECODE_PER_BUILD = 0.25
ENCODE_PER_BUILD = 0.25
#: The build gives up (:class:`~pal_opt.errors.TimeLimitReached`) once the time it has taken per
#: job so far, times the jobs left and this factor (the matrix is assembled at the end), no
#: longer fits before its deadline.
BUILD_PROJECTION = 1.3


def build_stage_round(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray], *,
                      optional: Sequence[int] = (), deadline: Deadline | None = None) -> StageRound:
    """The program for the ``admitted`` jobs (indices into ``instance.jobs``) under ``factors``.

    ``optional``: admitted running jobs that may be left out (preempted, ``ilp-preempt``): each
    gets a drop column ``u[j]`` in its ``mode`` row and, times ``r_k``, in its ``stage`` rows, of
    cost the cost terms' ``preempted`` charge (less the move charge, when moving is charged).  The
    running jobs not admitted pay that charge in the objective's constant
    (:func:`pal_opt.cost.left_out_charge`).  When moving a running job is charged, each admitted
    running job that can keep its GPUs gets a keep column ``k[j]`` the same way (module
    docstring), and every admitted running job pays the move charge in the constant.

    ``deadline``: the build checks it after every job and gives up as soon as the time taken per
    job so far, projected over the jobs left (:data:`BUILD_PROJECTION`), no longer fits.

    Raises
    ------
    OptionError
        ``optional`` names a job that is not an admitted running job.
    TimeLimitReached
        The build would not end before ``deadline``.
    InstanceError
        A job of two or more GPUs whose locality penalties decrease with the level.
    """
    check_stage_round(instance, admitted, optional)
    gpus = _gpu_types(instance, factors, admitted)
    charged = moving_is_charged(instance)
    b = ProgramBuilder(_META)
    paces: list[np.ndarray] = []
    costs: list[np.ndarray] = []
    rows = _Rows()
    kept: list[int] = []
    level_cols: list[np.ndarray] = []
    level_paces: list[np.ndarray] = []
    nodes = {spread: _nodes(instance, 2 if spread else 1) for spread in (False, True)}
    t0 = time.perf_counter()
    for a, i in enumerate(admitted):
        if deadline is not None and deadline.limited:  # (the rate is read once a few jobs are built)
            rate = (time.perf_counter() - t0) / a if a >= 4 else 0.0
            deadline.check("building the stage program", need=BUILD_PROJECTION * rate * (len(admitted) - a))
        job = instance.jobs[i]
        values = gpus.type_values[job.perfclass]
        table = _paces(job, values)
        modes = _modes(job, table, gpus.cnt, nodes[job.demand >= 2], _type_cells(instance, job, gpus))
        if not modes.pace.size:
            raise OptionError(f"job {job.id!r} cannot be placed on the free GPUs")
        home = _home(instance, i, gpus) if charged else None
        levels = _add_job(b, rows, a, job, table, modes, gpus, i in optional, home)
        level_cols += levels.cols.values()
        level_paces += levels.paces.values()
        kept += [i] if home is not None else []
        paces.append(modes.pace)
        costs.append(_mode_costs(instance, job, modes))
    rows.capacity(b, gpus.cnt)
    c, constant = _objective(b, instance, factors, admitted, costs, charged)
    program, meta = b.finish(c, constant)
    pace = np.full(b.ncol, np.nan)
    pace[b.meta("kind") == KIND_MODE] = np.concatenate(paces) if paces else []
    if level_cols:
        pace[np.concatenate(level_cols)] = np.concatenate(level_paces)
    return StageRound(program, instance, factors, tuple(admitted), gpus.gpu_type, pace=pace,
                      optional=tuple(sorted(optional)), kept=tuple(kept), **meta)


def alone_bound(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                optional: Sequence[int] = ()) -> float | None:
    """A valid lower bound of the round cost of every placement of the ``admitted`` jobs: each
    job priced at its cheapest mode *alone* on the free GPUs (the capacity rows shared by the jobs
    dropped), plus the program's constant (``formulations/pipeline_round.md`` §6, *A bound
    without the program*).  Any placement is a solution of the stage program at its round cost,
    each job in one of its modes (or, kept, at its keep column's cost), so the sum of each job's
    least is at most it.  ``optional``: admitted running jobs that may be left out (``ilp-preempt``,
    :func:`build_stage_round`'s ``optional``), each either placed (at that least) or dropped (its
    drop column's cost: the ``preempted`` charge, less the move charge when moving is charged),
    the jobs placed holding at most the free GPUs: the sum of the capacity rows, which every
    solution meets (:func:`_with_victims`, ``formulations/preemption.md`` §6).  Weak: every job
    may take the fastest GPUs at once.  Jobs of one shape (class, demand, locality, stage groups,
    usable cells) are priced once.  None when a job that must be placed has no mode (not expected:
    the caller has a placement of every admitted job).

    Raises
    ------
    InstanceError
        As :func:`build_stage_round`: locality penalties that decrease with the level.
    """
    check_stage_round(instance, admitted, optional)
    gpus = _gpu_types(instance, factors, admitted)
    charged = moving_is_charged(instance)
    dropped = set(optional)
    nodes = {spread: _nodes(instance, 2 if spread else 1) for spread in (False, True)}
    least: dict[tuple[Any, ...], float] = {}
    total, room, victims = 0.0, int(gpus.cnt.sum()), []
    for i in admitted:
        job = instance.jobs[i]
        cells = _type_cells(instance, job, gpus)
        key = (job.perfclass, job.demand, job.locality, tuple((t, r) for t, _, r in stage_groups(job)),
               tuple(c.tobytes() for c in cells))
        if key not in least:
            least[key] = _least_mode_cost(instance, job, _paces(job, gpus.type_values[job.perfclass]), gpus.cnt,
                                          nodes[job.demand >= 2], cells)
        cost = least[key]
        if charged and _home(instance, i, gpus) is not None:  # its keep column
            cost = min(cost, _keep_cost(instance, factors, i))
        if i in dropped:  # its drop column
            victims.append((cost, _drop_cost(instance, job, charged), job.demand))
            continue
        if not math.isfinite(cost):
            return None
        total, room = total + cost, room - job.demand
    return total + _with_victims(victims, room) + _constant(instance, admitted, charged)


def _with_victims(victims: Sequence[tuple[float, float, int]], room: int) -> float:
    """The least total cost of the optional jobs ``victims`` (each: placed alone, dropped, its
    GPUs), each placed or dropped, those placed holding at most ``room`` GPUs: a 0/1 knapsack of
    the savings ``dropped − placed`` by dynamic programming over the GPUs (``best[r]``: the most
    saved placing jobs of at most ``r`` GPUs in all)."""
    best = np.zeros(max(room, 0) + 1)
    for placed, dropped, demand in victims:
        if dropped - placed > 0 and demand < best.size:  # (a job with no mode: placed is inf)
            best[demand:] = np.maximum(best[demand:], best[:best.size - demand] + (dropped - placed))
    return sum(v[1] for v in victims) - float(best[-1])


def alone_bound_in_time(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                        deadline: float | None, optional: Sequence[int] = ()) -> float | None:
    """:func:`alone_bound` (with ``optional``), when :data:`BOUND_SECONDS_PER_GPU` per free GPU
    fits before ``deadline`` (a ``time.monotonic()`` value, None: none) less the finish reserve;
    else None (no bound).  The stage search's bound, the whole stage program's beside its
    solver's, and ``ilp-preempt``'s stage program's."""
    clock = Deadline(deadline) if deadline is not None else Deadline.none()
    free = int(np.count_nonzero(instance.cluster.state == GpuState.FREE))
    if clock.left() - FINISH_SECONDS < BOUND_SECONDS_PER_GPU * free:
        return None
    return alone_bound(instance, admitted, factors, optional)


def bounded(cost: float, demand: int, status: Status,
            bounds: Sequence[float | None]) -> tuple[float | None, float | None, Status]:
    """The answer's bound, gap and status from the lower ``bounds`` known of a placement of
    round cost ``cost`` (``demand``: the admitted jobs' GPUs): the largest bound (at most
    ``cost``; None if none is known), its relative gap, and ``status`` made honest by it: OPTIMAL
    when the gap is closed (:data:`PROVEN_GAP`) and every cost term is bounded (no
    :func:`~pal_opt.cost.unseen_terms`), an OPTIMAL ``status`` whose gap is not closed lowered to
    FEASIBLE, else ``status`` as given (FEASIBLE, FALLBACK)."""
    known = [b for b in bounds if b is not None]
    bound = min(max(known), cost) if known else None
    gap = relative_gap(cost, bound, demand)
    closed = gap is not None and gap <= PROVEN_GAP
    if closed and not unseen_terms():
        return bound, gap, Status.OPTIMAL
    return bound, gap, Status.FEASIBLE if status == Status.OPTIMAL and not closed else status


def _least_mode_cost(instance: RoundInstance, job: Job, paces: np.ndarray, counts: np.ndarray, nodes: _Nodes,
                     type_cells: Sequence[np.ndarray]) -> float:
    """The least cost of the job's modes (:func:`_modes`, the same set) without listing them:
    a node fits the job at pace ``π`` iff, for every stage group ``k``, its ``need[k]``-th
    fastest GPU (of the type group) has ``paces[k] ≤ π``, so the node's least pace is the largest
    of those; every pace level from there on fits too.  A mode's cost depends only on its pace
    and span, so each span is priced at every level from the least pace of its nodes on (inf
    with no mode)."""
    need = np.cumsum([r for _, _, r in stage_groups(job)])
    spans, values = [], []
    for cells in type_cells:
        idx = np.flatnonzero(cells)
        if not idx.size:
            continue
        order = idx[np.argsort(paces[-1, idx], kind="stable")]  # fastest first (every row orders alike)
        have = np.cumsum(np.asarray(nodes.member @ counts[:, order]), axis=1)  # (nodes, cells)
        least = np.full(have.shape[0], -np.inf)
        for k, n in enumerate(need.tolist()):
            enough = have[:, -1] >= n
            at = np.argmax(have >= n, axis=1)
            least = np.where(enough, np.maximum(least, paces[k, order[at]]), np.inf)
        levels = np.unique(paces[:, idx])
        for span in np.unique(nodes.span).tolist():
            lowest = least[nodes.span == span].min()
            if np.isfinite(lowest):
                fit = levels[levels >= lowest]
                spans.append(np.full(fit.size, span))
                values.append(fit)
    if not values:
        return math.inf
    total = np.zeros(sum(v.size for v in values))
    pace, span_of = np.concatenate(values), np.concatenate(spans)
    for term in cost_terms():
        total = total + term.slots(instance, job.perfclass, job.demand, job.locality, pace, span_of)
    return float(total.min())


def _home(instance: RoundInstance, i: int, gpus: _Gpus) -> np.ndarray | None:
    """The capacity cells (``server × cells + cell``) of the GPUs running job ``i`` holds, one
    per GPU, when it can keep them (:func:`~pal_opt.ilp.running.keep_positions`); else None."""
    pos = keep_positions(instance, i)
    if pos is None:
        return None
    return instance.cluster.server_of[pos] * gpus.cnt.shape[1] + gpus.gpu_type[pos]


def _objective(b: ProgramBuilder, instance: RoundInstance, factors: Mapping[str, np.ndarray],
               admitted: Sequence[int], costs: list[np.ndarray], charged: bool) -> tuple[np.ndarray, float]:
    """Every column's cost and the constant: modes priced by ``slots``; a drop column by the
    ``preempted`` charge, a keep column where its job runs now (``placed``), each less the move
    charge when moving is charged; the constant is what the running jobs not admitted pay for
    being left out and, when moving is charged, what the admitted running jobs pay for moving."""
    c = np.zeros(b.ncol)
    kind, job_of = b.meta("kind"), b.meta("job")
    c[kind == KIND_MODE] = np.concatenate(costs) if costs else []
    drops = np.flatnonzero(kind == KIND_DROP)
    c[drops] = [_drop_cost(instance, instance.jobs[admitted[a]], charged) for a in job_of[drops].tolist()]
    keeps = np.flatnonzero(kind == KIND_KEEP)
    c[keeps] = [_keep_cost(instance, factors, admitted[a]) for a in job_of[keeps].tolist()]
    return c, _constant(instance, admitted, charged)


def _constant(instance: RoundInstance, admitted: Sequence[int], charged: bool) -> float:
    """The objective's constant: what the running jobs not admitted pay for being left out and,
    when moving is ``charged``, what the admitted running jobs pay for moving."""
    constant = left_out_charge(instance, {instance.jobs[i].id for i in admitted})
    if charged:
        constant += sum(t.moved(instance, instance.jobs[i]) for i in admitted if instance.jobs[i].placement is not None
                        for t in cost_terms())
    return constant


def _keep_cost(instance: RoundInstance, factors: Mapping[str, np.ndarray], i: int) -> float:
    """What the terms charge running job ``i`` on its GPUs in its stage map
    (:func:`pal_opt.cost.pace_factor`), less what they charge for moving it."""
    job = instance.jobs[i]
    pos = instance.cluster.positions(job.placement or ())
    level = int(instance.cluster.span_level_pos(pos))
    top = pace_factor(job, np.asarray(factors[job.perfclass])[pos])
    return sum(t.placed(instance, job, pos, level, top) - t.moved(instance, job) for t in cost_terms())


def check_stage_round(instance: RoundInstance, admitted: Sequence[int], optional: Sequence[int] = ()) -> None:
    """What :func:`build_stage_round` refuses (its Raises)."""
    if any(i not in admitted or instance.jobs[i].placement is None for i in optional) or len(set(optional)) < len(optional):
        raise OptionError(f"optional must list distinct admitted running jobs, got {tuple(optional)}")
    for i in admitted:
        loc, job = instance.jobs[i].locality, instance.jobs[i]
        if job.demand >= 2 and not (loc[0] <= loc[1] <= loc[2] if instance.cluster.racked else loc[0] <= loc[2]):
            raise InstanceError("the stage program needs locality penalties that do not decrease with the level "
                                f"(server <= rack <= cluster), got {job.locality!r}", path=f"jobs[{i}].locality")


def _drop_cost(instance: RoundInstance, job: Job, charged: bool) -> float:
    """What leaving out running ``job`` costs: every term's ``preempted`` charge, less the move
    charge when moving is ``charged`` (the constant holds it; a job left out does not pay it)."""
    moving = sum(term.moved(instance, job) for term in cost_terms()) if charged else 0.0
    return sum(term.preempted(instance, job) for term in cost_terms()) - moving


def _mode_costs(instance: RoundInstance, job: Job, modes: _Modes) -> np.ndarray:
    values, span = modes.pace, modes.span
    total = np.zeros(values.size)
    for term in cost_terms():
        total = total + term.slots(instance, job.perfclass, job.demand, job.locality, values, span)
    return total


class _Rows:
    """The per-(server, type) capacity entries, collected over the jobs: server columns take one
    GPU of their cell each, a keep column the GPUs of each cell its job holds."""

    def __init__(self) -> None:
        self.cols: list[np.ndarray] = []
        self.cells: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []

    def add(self, cols: np.ndarray, cells: np.ndarray, vals: np.ndarray | None = None) -> None:
        self.cols.append(cols)
        self.cells.append(cells)
        self.vals.append(np.ones(cols.size) if vals is None else vals)

    def capacity(self, b: ProgramBuilder, cnt: np.ndarray) -> None:
        if not self.cols:
            return
        cols, cells, vals = np.concatenate(self.cols), np.concatenate(self.cells), np.concatenate(self.vals)
        used, local = np.unique(cells, return_inverse=True)
        s, g = np.divmod(used, cnt.shape[1])
        b.add_le_rows([f"cap_s{x}_g{y}" for x, y in zip(s.tolist(), g.tolist(), strict=True)],
                      cnt[s, g].astype(float), local.reshape(-1), cols, vals)


def _add_job(b: ProgramBuilder, rows: _Rows, a: int, job: Job, table: np.ndarray,
             modes: _Modes, gpus: _Gpus, optional: bool = False, home: np.ndarray | None = None) -> _Levels:
    """One job's columns and rows (module docstring); with ``optional``, its drop column too;
    with ``home`` (the capacity cells of the GPUs it runs on, :func:`_home`), its keep column.
    Returns its pace levels (:func:`_add_pace_levels`)."""
    groups = stage_groups(job)
    ngroups, ntypes = table.shape
    # (the whole cluster's node is -1: no number, "-" is not a CPLEX-LP name character)
    span, node = modes.span, modes.node
    names = [f"m_j{a}_{'src'[x]}{y if y >= 0 else ''}_p{k}"
             for k, (x, y) in enumerate(zip(span.tolist(), node.tolist(), strict=True))]
    m = b.add_cols(names, lo=0, hi=1, integer=True, kind=KIND_MODE, job=a, node=node, span=span, group=modes.tgroup)
    u = b.add_cols([f"u_j{a}"], lo=0, hi=1, integer=True, kind=KIND_DROP, job=a) if optional else m[:0]
    if home is not None:  # a drop column and a keep column stand for the job alike: one more "u"
        u = np.concatenate((u, _add_keep(b, rows, a, home)))
    b.add_rows([f"mode_j{a}"], 1, 1, np.zeros(m.size + u.size, dtype=np.int64), np.concatenate((m, u)),
               np.ones(m.size + u.size))
    # stage columns c[k, g] and their count and threshold rows (Σ_g c[k, g] + r_k (u + k) = r_k)
    drawn = np.logical_or.reduce([modes.type_cells[t] for t in np.unique(modes.tgroup).tolist()])
    usable = np.flatnonzero((gpus.cnt.sum(axis=0) > 0) & drawn)  # cells some mode may draw from
    kk = np.repeat(np.arange(ngroups), usable.size)
    gg = np.tile(usable, ngroups)
    reps = np.array([r for _, _, r in groups])
    c = b.add_cols([f"c_j{a}_k{k}_g{g}" for k, g in zip(kk.tolist(), gg.tolist(), strict=True)], lo=0,
                   hi=reps[kk], integer=True, kind=KIND_STAGE, job=a, group=kk, gtype=gg)
    ku = np.tile(np.arange(ngroups), u.size)  # (each of u's columns in every stage row, times r_k)
    b.add_rows([f"stage_j{a}_k{k}" for k in range(ngroups)], reps, reps, np.concatenate((kk, ku)),
               np.concatenate((c, np.repeat(u, ngroups))), np.concatenate((np.ones(c.size), reps[ku])))
    levels = _add_pace_levels(b, a, modes, m)
    rows_e, cols_e, vals_e = _pace_entries(table[kk, gg], gg, modes, levels)
    n = c.size
    b.add_rows([f"pace_j{a}_k{k}_g{g}" for k, g in zip(kk.tolist(), gg.tolist(), strict=True)], -np.inf, 0,
               np.concatenate((np.arange(n), rows_e)), np.concatenate((c, cols_e)),
               np.concatenate((np.ones(n), -reps[kk][rows_e].astype(float) * vals_e)))
    _add_servers(b, rows, a, job, m, modes, c, gg, usable, gpus)
    return levels


def _covers(b: ProgramBuilder, a: int, modes: _Modes, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(servers, columns)`` entries whose sum over the entries of server ``s`` is the share of
    the job's modes that may use ``s``: a one-server mode's own column; per rack or cluster node,
    the column ``z = Σ_{modes at that node} m`` (binary, as the levels are; a ``spread`` row), so a
    mode spanning many servers enters one row, not one per server and pace."""
    alone = modes.span == Level.SERVER
    servers, cols = [modes.node[alone]], [m[alone]]
    for e in np.unique(modes.entry[~alone]).tolist():
        span, node = int(modes.nodes.span[e]), int(modes.nodes.node[e])
        members = m[modes.entry == e]
        tag = f"{'src'[span]}{node if node >= 0 else ''}"
        z = b.add_cols([f"z_j{a}_{tag}"], lo=0, hi=1, integer=True, kind=KIND_SPREAD, job=a, span=span, node=node)
        b.add_rows([f"spread_j{a}_{tag}"], 0, 0, np.zeros(members.size + 1, dtype=np.int64),
                   np.concatenate((z, members)), np.concatenate(([1.0], -np.ones(members.size))))
        servers.append(modes.nodes.servers[e])
        cols.append(np.full(modes.nodes.servers[e].size, int(z[0]), dtype=np.int64))
    return np.concatenate(servers), np.concatenate(cols)


class _Levels(NamedTuple):
    """A job's pace-level columns ``y[t, i]`` (``formulations/pipeline_round.md`` §4): per type
    group ``t`` its distinct mode paces ascending (``paces[t]``) and their columns (``cols[t]``)."""

    paces: dict[int, np.ndarray]
    cols: dict[int, np.ndarray]


def _add_pace_levels(b: ProgramBuilder, a: int, modes: _Modes, m: np.ndarray) -> _Levels:
    """Per type group ``t`` and distinct mode pace ``P_i`` (ascending), the column
    ``y[t, i] = Σ_{modes of t, pace ≥ P_i} m`` (binary), defined by the chain rows
    ``y[t, i] − y[t, i + 1] − Σ_{modes of t at P_i} m = 0``.  A ``pace`` row then needs one entry
    per type group instead of one per mode: the program's size grew with stage columns × modes
    (2.2 million of the 2.5 million entries of a 512-GPU round), now with their sum.  Integer,
    though implied so: with continuous levels HiGHS 1.14.0's MIP presolve returned suboptimal
    answers as optimal, and invalid bounds, on about 1 small round in 100 (CBC and CP-SAT did not)."""
    mode_pace, mode_group = modes.pace, modes.tgroup
    paces: dict[int, np.ndarray] = {}
    cols: dict[int, np.ndarray] = {}
    for t in np.unique(mode_group).tolist():
        mine = np.flatnonzero(mode_group == t)
        levels, level_of = np.unique(mode_pace[mine], return_inverse=True)
        y = b.add_cols([f"y_j{a}_t{t}_p{i}" for i in range(levels.size)], lo=0, hi=1, integer=True,
                       kind=KIND_LEVEL, job=a, group=t)
        q = levels.size
        nxt = np.arange(q - 1)  # y[i] − y[i + 1] − Σ m = 0; the last level has no y[i + 1]
        b.add_rows([f"level_j{a}_t{t}_p{i}" for i in range(q)], 0, 0,
                   np.concatenate((np.arange(q), nxt, level_of.reshape(-1))),
                   np.concatenate((y, y[1:], m[mine])),
                   np.concatenate((np.ones(q), -np.ones(q - 1), -np.ones(mine.size))))
        paces[t], cols[t] = levels, y
    return _Levels(paces, cols)


def _pace_entries(threshold: np.ndarray, gg: np.ndarray, modes: _Modes,
                  levels: _Levels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``pace`` rows' level entries: stage column ``n`` (threshold ``p_j[k, g]``, cell ``g``)
    may draw from the modes of every type group ``t`` holding ``g`` whose pace is at least the
    threshold, which is ``y[t, i]`` for the first level ``P_i ≥ p_j[k, g]`` (none: no entry, the
    column is held at 0).  Returns (row, column, 1) triples, the caller scales them by ``r_k``."""
    cells_of = modes.type_cells
    rows_e: list[np.ndarray] = []
    cols_e: list[np.ndarray] = []
    for t, pace in levels.paces.items():
        held = np.flatnonzero(cells_of[t][gg])
        first = np.searchsorted(pace, threshold[held], side="left")
        ok = first < pace.size
        rows_e.append(held[ok])
        cols_e.append(levels.cols[t][first[ok]])
    r = np.concatenate(rows_e) if rows_e else np.zeros(0, dtype=np.int64)
    return r, (np.concatenate(cols_e) if cols_e else r), np.ones(r.size)


def _add_keep(b: ProgramBuilder, rows: _Rows, a: int, home: np.ndarray) -> np.ndarray:
    """The keep column ``k[j]`` of a running job whose GPUs lie in the capacity cells ``home``:
    it takes their count of each cell (its ``mode`` and ``stage`` entries are the caller's, as a
    drop column's; which GPUs of a cell it holds is decoding's business)."""
    used, count = np.unique(home, return_counts=True)
    k = b.add_cols([f"k_j{a}"], lo=0, hi=1, integer=True, kind=KIND_KEEP, job=a)
    rows.add(np.full(used.size, int(k[0])), used, count.astype(np.float64))
    return k


def _add_servers(b: ProgramBuilder, rows: _Rows, a: int, job: Job, m: np.ndarray,
                 modes: _Modes, c: np.ndarray, gg: np.ndarray,
                 usable: np.ndarray, gpus: _Gpus) -> None:
    """Server columns ``b[s, g]``: the link rows to the stage columns, the locality rows to the
    modes, and the capacity entries."""
    servers = np.unique(np.concatenate([modes.nodes.servers[e] for e in np.unique(modes.entry).tolist()]))
    ss, sg = np.nonzero(gpus.cnt[servers][:, usable] > 0)
    ss, sg = servers[ss], usable[sg]
    bcols = b.add_cols([f"b_j{a}_s{s}_g{g}" for s, g in zip(ss.tolist(), sg.tolist(), strict=True)], lo=0,
                       hi=np.minimum(gpus.cnt[ss, sg], job.demand), integer=True, kind=KIND_SERVER, job=a,
                       gtype=sg, node=ss)
    # link: Σ_s b[s, g] − Σ_k c[k, g] = 0 per type
    b.add_rows([f"link_j{a}_g{g}" for g in usable.tolist()], 0, 0,
               np.concatenate((np.searchsorted(usable, sg), np.searchsorted(usable, gg))),
               np.concatenate((bcols, c)), np.concatenate((np.ones(bcols.size), -np.ones(c.size))))
    # locality: Σ_g b[s, g] ≤ d · (Σ_{modes on server s} m + Σ_{rack and cluster nodes holding s} z)
    cover_s, cover_c = _covers(b, a, modes, m)
    b.add_rows([f"where_j{a}_s{s}" for s in servers.tolist()], -np.inf, 0,
               np.concatenate((np.searchsorted(servers, ss), np.searchsorted(servers, cover_s))),
               np.concatenate((bcols, cover_c)),
               np.concatenate((np.ones(bcols.size), -float(job.demand) * np.ones(cover_c.size))))
    rows.add(bcols, ss * gpus.cnt.shape[1] + sg)


# --------------------------------------------------------------------------- decoding
def decode_stage_round(sr: StageRound, values: np.ndarray) -> dict[JobId, tuple[int, ...]]:
    """Placements from a solution: each job's GPUs in stage order (lowest positions first among
    equals, jobs in queue order); an optional job whose drop column is 1 is left out; a job whose
    keep column is 1 gets exactly the GPU list it runs on (its stage map), and the others are
    dealt the rest.  A running pipeline job given exactly the GPUs it runs on keeps its own stage
    order when that is no slower (:func:`_running_order`): its stages do not change for nothing.

    Raises
    ------
    BackendError
        The solution does not give every job its GPUs.
    """
    inst = sr.instance
    x = np.rint(np.asarray(values)).astype(np.int64)
    pool: dict[tuple[int, int], list[int]] = {}
    for p in np.flatnonzero(sr.gpu_type >= 0).tolist():
        pool.setdefault((int(inst.cluster.server_of[p]), int(sr.gpu_type[p])), []).append(p)
    ids = inst.cluster.gpu_ids
    dropped = set(sr.job[(sr.kind == KIND_DROP) & (x > 0)].tolist())
    kept = set(sr.job[(sr.kind == KIND_KEEP) & (x > 0)].tolist())
    for a in kept:  # their GPUs first, out of the cells' pools
        for p in inst.cluster.positions(inst.jobs[sr.admitted[a]].placement or ()).tolist():
            pool[(int(inst.cluster.server_of[p]), int(sr.gpu_type[p]))].remove(p)
    out: dict[JobId, tuple[int, ...]] = {}
    columns = _job_columns(sr)
    for a, i in enumerate(sr.admitted):
        job = inst.jobs[i]
        if a in kept:
            out[job.id] = tuple(job.placement or ())
        if a in dropped or a in kept:
            continue
        mine = columns[a][x[columns[a]] > 0]
        by_type: dict[int, list[int]] = {}
        for col in mine[sr.kind[mine] == KIND_SERVER].tolist():
            key = (int(sr.node[col]), int(sr.gtype[col]))
            take, pool[key] = pool[key][: x[col]], pool[key][x[col]:]
            by_type.setdefault(int(sr.gtype[col]), []).extend(take)
        per_group: dict[int, list[int]] = {}
        for col in mine[sr.kind[mine] == KIND_STAGE].tolist():
            g, n = int(sr.gtype[col]), int(x[col])
            per_group.setdefault(int(sr.group[col]), []).extend(by_type[g][:n])
            by_type[g] = by_type[g][n:]
        gpus = _in_stage_order(job, per_group)
        if len(gpus) != job.demand or len(set(gpus)) != job.demand:
            raise BackendError(f"the stage program's answer does not give job {job.id!r} its {job.demand} GPUs")
        out[job.id] = tuple(int(ids[p]) for p in _running_order(sr, job, gpus))
    return out


def _running_order(sr: StageRound, job: Job, gpus: list[int]) -> list[int]:
    """``gpus`` (positions in stage order), or the running job's own list when it holds exactly
    these GPUs in an order whose pace is no slower (:func:`pal_opt.cost.pace_factor`)."""
    if job.pipeline is None or job.placement is None:
        return gpus
    own = sr.instance.cluster.positions(job.placement)
    if sorted(own.tolist()) != sorted(gpus):
        return gpus
    values = np.asarray(sr.factors[job.perfclass])
    return own.tolist() if pace_factor(job, values[own]) <= pace_factor(job, values[gpus]) else gpus


def _in_stage_order(job: Job, per_group: Mapping[int, list[int]]) -> list[int]:
    """GPU positions stage by stage: each group's GPUs dealt to its stages in stage order."""
    stages: dict[int, list[int]] = {}
    for k, (_, members, _) in enumerate(stage_groups(job)):
        got = sorted(per_group.get(k, []))
        for s in members:
            r = job.pipeline.replicas[s] if job.pipeline is not None else job.demand
            stages[s], got = got[:r], got[r:]
    return [p for s in sorted(stages) for p in stages[s]]


def encode_stage_round(sr: StageRound, placements: Mapping[JobId, Sequence[int]]) -> np.ndarray | None:
    """A placement (GPU lists in stage order) as a vector of the program, for a warm start; None
    when a job's pace or span has no column (it then cannot be a start), or when it leaves out an
    admitted job that is not optional (a job it leaves out is dropped).  A running job with a
    keep column that keeps its placement (:func:`~pal_opt.model.keeps_placement`) is kept."""
    x = np.zeros(sr.program.num_vars)
    for a, mine in enumerate(_job_columns(sr)):
        job = sr.instance.jobs[sr.admitted[a]]
        kind = sr.kind[mine]
        drop, keep = mine[kind == KIND_DROP], mine[kind == KIND_KEEP]
        if job.id not in placements:
            if not drop.size:
                return None
            x[drop] = 1
        elif keep.size and keeps_placement(job, placements[job.id]):
            x[keep] = 1
        elif not _encode_job(sr, job, mine, sr.instance.cluster.positions(placements[job.id]), x):
            return None
    return x


def _encode_job(sr: StageRound, job: Job, mine: np.ndarray, pos: np.ndarray, x: np.ndarray) -> bool:
    """Set job ``job``'s columns (``mine``) in ``x`` for its GPUs at ``pos`` (stage order): its
    mode, the levels and spread column the mode implies, its stage and server counts.  False if
    the program has no mode for it."""
    cl = sr.instance.cluster
    if np.any(sr.gpu_type[pos] < 0):
        return False
    bounds = job.pipeline.slices() if job.pipeline is not None else [(0, job.demand)]
    values = np.asarray(sr.factors[job.perfclass])
    top = stage_groups(job)[0][0]
    times = job.pipeline.stage_times if job.pipeline is not None else (1.0,)
    pace = max(times[s] * float(values[pos[lo:hi]].max()) / top for s, (lo, hi) in enumerate(bounds))
    span = int(cl.span_level_pos(pos))
    first = int(cl.server_of[pos[0]])
    node = first if span == Level.SERVER else (int(cl.rack_of_server[first]) if span == Level.RACK else -1)
    group = _type_group(cl, job, pos)
    kind, at = sr.kind[mine], (sr.span[mine] == span) & (sr.node[mine] == node)
    mode = mine[(kind == KIND_MODE) & (sr.pace[mine] == pace) & at & (sr.group[mine] == group)]
    if mode.size != 1:
        return False
    x[mode] = 1
    x[mine[(kind == KIND_LEVEL) & (sr.group[mine] == group) & (sr.pace[mine] <= pace)]] = 1
    x[mine[(kind == KIND_SPREAD) & at]] = 1
    cells = sr.gpu_type[pos]
    group_of = {s: k for k, (_, members, _) in enumerate(stage_groups(job)) for s in members}
    stage_group = np.repeat([group_of[s] for s in range(len(bounds))], [hi - lo for lo, hi in bounds])
    ncell = int(sr.gpu_type.max()) + 1
    for want, cols, key in ((stage_group * ncell + cells, mine[kind == KIND_STAGE], sr.group),
                            (cl.server_of[pos] * ncell + cells, mine[kind == KIND_SERVER], sr.node)):
        have = key[cols] * ncell + sr.gtype[cols]
        order = np.argsort(have)
        hit = order[np.minimum(np.searchsorted(have, want, sorter=order), order.size - 1)]
        if not order.size or np.any(have[hit] != want):  # (a mode's GPUs always have their columns)
            return False
        np.add.at(x, cols[hit], 1)
    return True


def _job_columns(sr: StageRound) -> list[np.ndarray]:
    """Per admitted job (its index in ``sr.admitted``), its columns in ascending order."""
    order = np.argsort(sr.job, kind="stable")
    cut = np.searchsorted(sr.job[order], np.arange(len(sr.admitted) + 1))
    return [order[cut[a]:cut[a + 1]] for a in range(len(sr.admitted))]


def _type_group(cl: Any, job: Job, pos: np.ndarray) -> int:
    """Which of the job's type groups (:func:`_type_cells`) the GPUs at ``pos`` are drawn from
    (-1: none, so the placement has no mode)."""
    if not cl.typed:
        return 0
    used = set(cl.type_of[pos].tolist())
    return next((t for t, group in enumerate(type_groups(cl, job)) if used <= set(group)), -1)


# --------------------------------------------------------------------------- solving
def start_placement(instance: RoundInstance, admitted: Sequence[int],
                    factors: Mapping[str, np.ndarray]) -> dict[JobId, tuple[int, ...]] | None:
    """PAL's placement of the admitted jobs with every pipeline's stages mapped best
    (:func:`best_stage_order`): the warm start and the fallback (None if PAL places not all).
    When moving a running job is charged, also PAL's placement of the others around the running
    jobs kept where they run (:func:`_keeping_start`), and the cheaper of the two (the keeping
    one on a tie)."""
    from .heuristic import pal_greedy

    placed = pal_greedy(instance, factors, admitted)
    pal = None if placed is None or len(placed) != len(admitted) else stages_mapped_best(instance, factors, placed)
    keeping = _keeping_start(instance, admitted, factors) if moving_is_charged(instance) else None
    if keeping is None or pal is None:
        return pal if keeping is None else keeping
    return keeping if evaluate(instance, keeping, factors).cost <= evaluate(instance, pal, factors).cost else pal


def _keeping_start(instance: RoundInstance, admitted: Sequence[int],
                   factors: Mapping[str, np.ndarray]) -> dict[JobId, tuple[int, ...]] | None:
    """Every admitted running job that can keep its GPUs on them, in its stage map; the other
    admitted jobs placed by PAL (class-sorted) on the GPUs left, stages mapped best (None if PAL
    places not all)."""
    from .heuristic import pal_greedy

    jobs, cl = instance.jobs, instance.cluster
    free = cl.state == GpuState.FREE
    kept: dict[JobId, tuple[int, ...]] = {}
    for i in admitted:
        if keep_positions(instance, i) is not None:
            free[cl.positions(jobs[i].placement or ())] = False
            kept[jobs[i].id] = tuple(jobs[i].placement or ())
    rest = [i for i in admitted if jobs[i].id not in kept]
    placed = pal_greedy(instance, factors, rest, free_mask=free) if rest else {}
    if placed is None or len(placed) != len(rest):
        return None
    both = {**kept, **stages_mapped_best(instance, factors, placed)}
    return {jobs[i].id: both[jobs[i].id] for i in admitted}


def _cheaper_start(sr: StageRound, given: Mapping[JobId, Sequence[int]] | None,
                   own: dict[JobId, tuple[int, ...]] | None) -> tuple[dict[JobId, tuple[int, ...]] | None,
                                                                  np.ndarray | None]:
    """``given`` (checked: a placement of exactly the admitted jobs, on distinct GPUs, that the
    program encodes) when it costs no more than ``own``, else ``own``; with its vector
    (:func:`encode_stage_round`, encoded once)."""
    if given is None:
        return own, (None if own is None else encode_stage_round(sr, own))
    placement = {jid: tuple(int(g) for g in gids) for jid, gids in given.items()}
    used = [g for gids in placement.values() for g in gids]
    jobs = {sr.instance.jobs[i].id: sr.instance.jobs[i] for i in sr.admitted}
    ok = set(placement) == set(jobs) and len(set(used)) == len(used) and all(
        len(gids) == jobs[jid].demand and all(g in sr.instance.cluster.position for g in gids)
        for jid, gids in placement.items())
    vector = encode_stage_round(sr, placement) if ok else None
    if vector is None:
        raise OptionError("start is not a placement of the admitted jobs (with every pipeline's GPUs in stage order)")
    if own is None or evaluate(sr.instance, placement, sr.factors).cost <= evaluate(sr.instance, own, sr.factors).cost:
        return placement, vector
    return own, encode_stage_round(sr, own)


def _source(start: Mapping[JobId, Sequence[int]] | None, own: Mapping[JobId, Sequence[int]] | None,
            label: str) -> str:
    """What the start placement is, for messages: PAL's, or the start given (``label``)."""
    if start is None:
        return "none"
    return "PAL's" if start is own else label


def _cheaper_checked(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                     given: Mapping[JobId, Sequence[int]] | None,
                     own: dict[JobId, tuple[int, ...]] | None) -> dict[JobId, tuple[int, ...]] | None:
    """The cheaper of PAL's start placement ``own`` and the start ``given`` (``given`` on a tie,
    as :func:`_cheaper_start` chooses), without the program: ``given`` checked as
    :func:`pal_opt.check` checks an answer (an :class:`~pal_opt.errors.OptionError` if it is not a
    placement of the admitted jobs); None if neither exists."""
    if given is None:
        return own
    placement = checked_start(instance, admitted, given, " (with every pipeline's GPUs in stage order)")
    if own is None or evaluate(instance, placement, factors).cost <= evaluate(instance, own, factors).cost:
        return placement
    return own


def start_meets_bound(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                      alone: float | None, start: Mapping[JobId, Sequence[int]] | None = None,
                      own: dict[JobId, tuple[int, ...]] | None = None) -> dict[JobId, tuple[int, ...]] | None:
    """The start placement of :func:`solve_stage_round` (the cheaper of PAL's, ``own`` if the
    caller has it, else :func:`start_placement`, and ``start``) when the jobs-alone bound ``alone``
    (:func:`alone_bound`) proves it optimal as :func:`bounded` proves an answer (its gap at most
    :data:`PROVEN_GAP`, every cost term with ``slots``): then no program can do better.  Else
    None (also when ``alone`` is None or there is no start placement)."""
    if alone is None:
        return None
    if own is None:
        own = start_placement(instance, admitted, factors)
    placement = _cheaper_checked(instance, admitted, factors, start, own)
    if placement is None:
        return None
    demand = sum(instance.jobs[i].demand for i in admitted)
    closed = bounded(evaluate(instance, placement, factors).cost, demand, Status.FEASIBLE, [alone])[2]
    return placement if closed == Status.OPTIMAL else None


def _start_proven(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                  labelled: tuple[Mapping[JobId, Sequence[int]] | None, str], own: dict[JobId, tuple[int, ...]] | None,
                  common: dict[str, Any]) -> PlacementResult | None:
    """The answer without the program when the jobs-alone bound (``info["alone_bound"]``) proves
    the start placement optimal (:func:`start_meets_bound`): that start, status OPTIMAL,
    ``info["solver_status"]`` and the message saying that the program was not built; else None."""
    details = common["info"]
    start = start_meets_bound(instance, admitted, factors, details.get("alone_bound"), labelled[0], own)
    if start is None:
        return None
    details.update(start=_source(start, own, labelled[1]), solver_status=START_MEETS_BOUND)
    fields = _with_bound(instance, admitted, factors, start, Status.OPTIMAL, [], details)
    return priced_result(instance, start, factors, **fields, **common, solve_seconds=0.0,
                         message=f"the start placement ({details['start']}) meets the jobs-alone bound: "
                                 "the stage program was not needed")


def _unbuilt(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
             labelled: tuple[Mapping[JobId, Sequence[int]] | None, str], own: dict[JobId, tuple[int, ...]] | None,
             why: str, common: dict[str, Any]) -> PlacementResult:
    """The answer when the deadline comes before the stage program is built (or its start
    encoded): the cheaper of
    the start placement and the start given (``labelled``: it and its label; checked as
    :func:`pal_opt.check` checks an answer, as the program cannot encode it), status FALLBACK, no
    bound; nothing placed if neither exists."""
    given, label = labelled
    start = _cheaper_checked(instance, admitted, factors, given, own)
    kwargs = dict(common, solve_seconds=0.0)
    common["info"]["start"] = _source(start, own, label)
    if start is None:
        return priced_result(instance, {}, factors, status=Status.FALLBACK, **kwargs,
                             message=f"{why}; no start placement of every admitted job was found: none is placed")
    fields = _with_bound(instance, admitted, factors, start, Status.FALLBACK, [], common["info"])
    return priced_result(instance, start, factors, **fields, **kwargs,
                         message=f"{why}; the start placement ({_source(start, own, label)}) is returned"
                                 + _bound_note(fields, None))


def _with_bound(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                placement: Mapping[JobId, Sequence[int]], status: Status, bounds: Sequence[float | None],
                details: Mapping[str, Any]) -> dict[str, Any]:
    """The :func:`~pal_opt.result.priced_result` fields of ``placement`` (of every admitted job)
    with the best of ``bounds`` and the jobs-alone bound the caller gave (``details["alone_bound"]``):
    ``summary``, ``bound``, ``gap`` and the ``status`` they prove (:func:`bounded`)."""
    summary = evaluate(instance, {jid: tuple(gids) for jid, gids in placement.items()}, factors)
    demand = sum(instance.jobs[i].demand for i in admitted)
    bound, gap, status = bounded(summary.cost, demand, status, [*bounds, details.get("alone_bound")])
    return dict(summary=summary, bound=bound, gap=gap, status=status)


def _bound_note(fields: Mapping[str, Any], solver_bound: float | None) -> str:
    """What a message adds when the answer's bound is the jobs-alone one (above the solver's, by
    more than rounding: at 256 GPUs HiGHS's bound and it were the same number to 3e-15)."""
    bound = fields["bound"]
    if bound is None or (solver_bound is not None and bound <= solver_bound + 1e-9 * max(1.0, abs(solver_bound))):
        return ""
    return "; bound: each job alone on the free GPUs"


def _own_start(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
               own: dict[JobId, tuple[int, ...]] | None = None) -> tuple[dict[JobId, tuple[int, ...]] | None, float]:
    """:func:`start_placement` (``own`` if the caller made it already) and the seconds to keep for
    the end (pricing and writing the answer: the finish reserve and twice the time its pricing took)."""
    own = start_placement(instance, admitted, factors) if own is None else own
    t1 = time.perf_counter()
    if own is not None:
        evaluate(instance, own, factors)
    return own, FINISH_SECONDS + 2 * (time.perf_counter() - t1)


def stage_backend_params(cls: type[Backend], options: SolveOptions | None) -> dict[str, Any]:
    """The solver parameters of the stage program: the backend's own
    (:attr:`~pal_opt.ilp.backends.base.Backend.stage_params`) under the caller's ``backend_params``."""
    return {**cls.stage_params, **(options.backend_params if options is not None else {})}


def solve_stage_round(
    instance: RoundInstance,
    admitted: Sequence[int],
    factors: Mapping[str, np.ndarray],
    *,
    backend: str | None = None,
    options: SolveOptions | None = None,
    admission: str = "given",
    info: Mapping[str, Any] | None = None,
    start: Mapping[JobId, Sequence[int]] | None = None,
    warm_start: bool = True,
    start_label: str = "the start given",
    alone: float | None = None,
    own: dict[JobId, tuple[int, ...]] | None = None,
) -> PlacementResult:
    """Place the ``admitted`` jobs of ``instance`` with the stage program (module docstring).

    The solver starts from the cheaper of :func:`start_placement` and ``start`` (a placement of
    exactly the admitted jobs, GPU lists in stage order: ``solve_ilp(start=...)``, e.g. a
    repair's answer that keeps the unaffected jobs) where it takes a start.  Returns a result
    priced by :func:`pal_opt.result.priced_result` (method ``"ilp"``): OPTIMAL when the solver
    proved its optimum, FEASIBLE with the gap otherwise, FALLBACK (the start placement) when it
    stopped without a solution, or when ``options.deadline`` left no time to run it
    (``info["time_limit_reached"]`` then names the step).  Never worse than the start placement.
    ``warm_start=False``: the solver is not given the start (it stays the fallback).
    ``start_label`` names ``start`` in messages (``info["start"]``).  ``alone``: the jobs-alone
    bound (:func:`alone_bound_in_time`), if the caller has it (``info["alone_bound"]``): the
    answer's bound is the larger of it and the solver's (:func:`bounded`), also when it has none;
    a start it proves optimal (:func:`start_meets_bound`) is the answer, OPTIMAL, with no program
    built (``info["solver_status"]`` is :data:`START_MEETS_BOUND`).  ``own``: the caller's :func:`start_placement`.

    Raises
    ------
    BackendError
        The solver stopped (or could not start) without any solution and there is no start.
    OptionError
        ``start`` is not a placement of the admitted jobs.
    """
    t0 = time.perf_counter()
    options = options or SolveOptions()
    clock = Deadline.after(None) if options.deadline is None else Deadline(options.deadline)
    cls = get_backend(backend)
    details = {**(info or {}), "program": "stage", **({} if alone is None else {"alone_bound": alone})}
    common: dict[str, Any] = dict(method="ilp", admission=admission, backend=cls.name, backend_version=cls.version(),
                                  info=details)
    own, reserve = _own_start(instance, admitted, factors, own)
    if (proven := _start_proven(instance, admitted, factors, (start, start_label), own,
                                dict(common, build_seconds=time.perf_counter() - t0))) is not None:
        return proven
    progress.report(stage="building the stage program", backend=cls.name)
    try:
        sr = build_stage_round(instance, admitted, factors, deadline=clock.sooner(reserve))
    except TimeLimitReached as exc:
        details["time_limit_reached"] = exc.stage
        common["build_seconds"] = time.perf_counter() - t0
        return _unbuilt(instance, admitted, factors, (start, start_label), own, str(exc), common)
    built = time.perf_counter() - t0
    if clock.limited and clock.left() - reserve < ENCODE_PER_BUILD * built:
        details["time_limit_reached"] = "encoding the start"
        common["build_seconds"] = built
        why = TimeLimitReached("encoding the start", need=ENCODE_PER_BUILD * built, left=clock.left() - reserve)
        return _unbuilt(instance, admitted, factors, (start, start_label), own, str(why), common)
    start, encoded = _cheaper_start(sr, start, own)
    details["start"] = _source(start, own, start_label)
    vector = encoded if warm_start and cls.supports_warm_start else None
    details.update(num_vars=sr.program.num_vars, num_rows=sr.program.num_rows, nnz=int(sr.program.A.nnz))
    options = _solver_options(cls, options, clock, reserve + DECODE_PER_BUILD * built, details)
    try:
        sol = cls().solve(sr.program, options, start=vector)
    except TimeLimitReached as exc:  # the deadline came before the solver could run
        details["time_limit_reached"] = exc.stage
        sol = BackendSolution(SolverStatus.NO_SOLUTION, None, None, None, 0.0, message=str(exc))
    except BackendAbandoned:  # a solver that did not stop on a Ctrl-C
        raise KeyboardInterrupt from None
    except KeyboardInterrupt as exc:  # BackendInterrupted, or a Ctrl-C while the program was translated
        raise _interrupted(sr, exc, start, {**common, "build_seconds": built}) from None
    details.update(sol.info)  # the solver's figures (nodes, iterations; HiGHS: crashes survived)
    details.update(solver_status=str(sol.status), solver_message=sol.message, warm_start=vector is not None)
    common.update(solve_seconds=sol.seconds, build_seconds=built)
    return _solved(sr, sol, start, common)


def _solver_options(cls: type[Backend], options: SolveOptions, clock: Deadline, reserve: float,
                    details: dict[str, Any]) -> SolveOptions:
    """The stage program's solver options: under a deadline, one ``reserve`` seconds sooner (to
    decode, estimated from the build, and finish); the backend's own parameters under the
    caller's, recorded in ``details["backend_params"]`` (as ilp-preempt records them)."""
    if clock.limited:
        options = replace(options, deadline=clock.sooner(reserve).at)
    options = replace(options, backend_params=stage_backend_params(cls, options))
    if options.backend_params:
        details["backend_params"] = dict(options.backend_params)
    return options


def _interrupted(sr: StageRound, exc: KeyboardInterrupt, start: dict[JobId, tuple[int, ...]] | None,
                 common: dict[str, Any]) -> SolveInterrupted:
    """A Ctrl-C while the stage program was solved: :class:`~pal_opt.errors.SolveInterrupted`
    with the solver's incumbent (decoded, or the start when cheaper), else the start placement
    (FALLBACK), flagged ``info["interrupted"]``; with no result when there is neither."""
    common["info"]["interrupted"] = True
    sol = exc.solution if isinstance(exc, BackendInterrupted) else None
    if sol is not None and sol.values is not None:
        common.update(solve_seconds=sol.seconds)
        res = _solved(sr, sol, start, common)
        res.message = f"interrupted: {res.message}" if res.message else "interrupted"
        return SolveInterrupted(res)
    if start is None:
        return SolveInterrupted(None)
    common.update(solve_seconds=0.0)
    fields = _with_bound(sr.instance, sr.admitted, sr.factors, start, Status.FALLBACK, [], common["info"])
    return SolveInterrupted(priced_result(
        sr.instance, start, sr.factors, **fields, **common,
        message=f"interrupted while {common['backend']} solved the stage program; "
                f"the start placement ({common['info'].get('start')}) is returned" + _bound_note(fields, None)))


def _solved(sr: StageRound, sol: BackendSolution, start: dict[JobId, tuple[int, ...]] | None,
            common: dict[str, Any]) -> PlacementResult:
    """The priced answer from the solver's ``sol``: its decoded solution, or the start placement
    when that is cheaper or the solver has none (:func:`solve_stage_round`); its bound the larger
    of the solver's and the jobs-alone bound given (:func:`_with_bound`)."""
    instance, factors, details = sr.instance, sr.factors, common["info"]
    if sol.values is None:
        if start is None and "time_limit_reached" in details:  # (no bound: nothing is placed)
            return priced_result(instance, {}, factors, status=Status.FALLBACK, **common,
                                 message=f"{sol.message}; no start placement of every admitted job was found: "
                                 "none is placed")
        if start is None:
            raise BackendError(f"{common['backend']} found no solution of the stage program ({sol.status}: {sol.message})")
        why = sol.message if "time_limit_reached" in details else f"{common['backend']}: {sol.status}"
        fields = _with_bound(instance, sr.admitted, factors, start, Status.FALLBACK, [sol.bound], details)
        return priced_result(instance, start, factors, **fields, **common,
                             message=f"{why}; the start placement ({details['start']}) is returned"
                                     + _bound_note(fields, sol.bound))
    placement = decode_stage_round(sr, sol.values)
    if start is not None and evaluate(instance, start, factors).cost < evaluate(instance, placement, factors).cost - 1e-9:
        placement = start  # a solver that ignored the start and stopped early
    status = Status.OPTIMAL if sol.status == SolverStatus.OPTIMAL else Status.FEASIBLE
    fields = _with_bound(instance, sr.admitted, factors, placement, status, [sol.bound], details)
    message = ""
    if sol.status != SolverStatus.OPTIMAL or fields["status"] != Status.OPTIMAL:  # why the solver proved nothing
        message = f"{common['backend']}: {sol.message}" + _bound_note(fields, sol.bound)  # (a time limit, ...)
    return priced_result(instance, placement, factors, **fields, **common, message=message)
