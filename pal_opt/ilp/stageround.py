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

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..cost import (
    best_stage_order,
    cost_terms,
    evaluate,
    left_out_charge,
    pace_factor,
    relative_gap,
    stages_mapped_best,
)
from ..errors import BackendError, InstanceError, OptionError, TimeLimitReached
from ..gputypes import type_groups
from ..model import GpuState, Job, JobId, Level, RoundInstance, keeps_placement
from ..result import PlacementResult, Status, priced_result
from .backends import BackendSolution, SolveOptions, SolverStatus, get_backend
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
    "start_placement",
]

#: Column kinds of the program (``KIND_DROP``: an optional running job's drop variable;
#: ``KIND_KEEP``: a running job's keep variable, when moving it is charged).
KIND_MODE, KIND_STAGE, KIND_SERVER, KIND_DROP, KIND_KEEP = 0, 1, 2, 3, 4
_META = ("kind", "job", "group", "gtype", "node", "span")


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
        ``KIND_KEEP``, the job's index in
        ``admitted``, the stage group, the GPU type, the server (mode columns: the server or rack
        position, ``-1`` anywhere) and the mode's span (:class:`~pal_opt.model.Level`).
    pace
        Per column: the mode's pace (``nan`` for other columns).
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


class _Mode(NamedTuple):
    """One way a job may run: its pace, span, node (server or rack position, -1 anywhere), the
    servers it covers, the cells it may draw from (its usable GPU types: one, or several if it
    mixes) and which of its type groups that is."""

    pace: float
    span: int
    node: int
    servers: np.ndarray
    cells: np.ndarray
    tgroup: int


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


def _nodes(instance: RoundInstance, demand: int) -> list[tuple[int, int, np.ndarray]]:
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
    return out


def _modes(job: Job, paces: np.ndarray, counts: np.ndarray, nodes: list[tuple[int, int, np.ndarray]],
           type_cells: Sequence[np.ndarray]) -> list[_Mode]:
    """Feasible modes of one job in isolation, per type group (``type_cells``): at pace ``π`` the
    slowest ``i + 1`` stage groups together need no more GPUs of the type group than the node has
    at or under their thresholds (the thresholds are nested, so this is exact for the job alone)."""
    groups = stage_groups(job)
    need = np.cumsum([r for _, _, r in groups])
    out = []
    for t, cells in enumerate(type_cells):
        mine = counts * cells[None, :]
        for pace in np.unique(paces[:, cells]).tolist():
            allowed = paces <= pace  # (stage groups, cells); each row contains the row above it
            for span, node, servers in nodes:
                have = (allowed * mine[servers].sum(axis=0)[None, :]).sum(axis=1)
                if np.all(have >= need):
                    out.append(_Mode(pace, span, node, servers, cells, t))
    return out


def build_stage_round(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray], *,
                      optional: Sequence[int] = ()) -> StageRound:
    """The program for the ``admitted`` jobs (indices into ``instance.jobs``) under ``factors``.

    ``optional``: admitted running jobs that may be left out (preempted, ``ilp-preempt``): each
    gets a drop column ``u[j]`` in its ``mode`` row and, times ``r_k``, in its ``stage`` rows, of
    cost the cost terms' ``preempted`` charge (less the move charge, when moving is charged).  The
    running jobs not admitted pay that charge in the objective's constant
    (:func:`pal_opt.cost.left_out_charge`).  When moving a running job is charged, each admitted
    running job that can keep its GPUs gets a keep column ``k[j]`` the same way (module
    docstring), and every admitted running job pays the move charge in the constant.

    Raises
    ------
    OptionError
        ``optional`` names a job that is not an admitted running job.
    InstanceError
        A job of two or more GPUs whose locality penalties decrease with the level.
    """
    _check_round(instance, admitted, optional)
    gpus = _gpu_types(instance, factors, admitted)
    charged = moving_is_charged(instance)
    b = ProgramBuilder(_META)
    paces: list[float] = []
    costs: list[np.ndarray] = []
    rows = _Rows()
    kept: list[int] = []
    for a, i in enumerate(admitted):
        job = instance.jobs[i]
        values = gpus.type_values[job.perfclass]
        table = _paces(job, values)
        modes = _modes(job, table, gpus.cnt, _nodes(instance, job.demand), _type_cells(instance, job, gpus))
        if not modes:
            raise OptionError(f"job {job.id!r} cannot be placed on the free GPUs")
        home = _home(instance, i, gpus) if charged else None
        _add_job(b, rows, a, job, table, modes, gpus, i in optional, home)
        kept += [i] if home is not None else []
        paces += [m[0] for m in modes]
        costs.append(_mode_costs(job, modes))
    rows.capacity(b, gpus.cnt)
    c, constant = _objective(b, instance, factors, admitted, costs, charged)
    program, meta = b.finish(c, constant)
    pace = np.full(b.ncol, np.nan)
    pace[b.meta("kind") == KIND_MODE] = paces
    return StageRound(program, instance, factors, tuple(admitted), gpus.gpu_type, pace=pace,
                      optional=tuple(sorted(optional)), kept=tuple(kept), **meta)


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
    terms = cost_terms()
    c = np.zeros(b.ncol)
    kind, job_of = b.meta("kind"), b.meta("job")
    c[kind == KIND_MODE] = np.concatenate(costs) if costs else []
    drops = np.flatnonzero(kind == KIND_DROP)
    c[drops] = [_drop_cost(instance, instance.jobs[admitted[a]], charged) for a in job_of[drops].tolist()]
    keeps = np.flatnonzero(kind == KIND_KEEP)
    c[keeps] = [_keep_cost(instance, factors, admitted[a]) for a in job_of[keeps].tolist()]
    constant = left_out_charge(instance, {instance.jobs[i].id for i in admitted})
    if charged:
        constant += sum(t.moved(instance, instance.jobs[i]) for i in admitted if instance.jobs[i].placement is not None
                        for t in terms)
    return c, constant


def _keep_cost(instance: RoundInstance, factors: Mapping[str, np.ndarray], i: int) -> float:
    """What the terms charge running job ``i`` on its GPUs in its stage map
    (:func:`pal_opt.cost.pace_factor`), less what they charge for moving it."""
    job = instance.jobs[i]
    pos = instance.cluster.positions(job.placement or ())
    level = int(instance.cluster.span_level_pos(pos))
    top = pace_factor(job, np.asarray(factors[job.perfclass])[pos])
    return sum(t.placed(instance, job, pos, level, top) - t.moved(instance, job) for t in cost_terms())


def _check_round(instance: RoundInstance, admitted: Sequence[int], optional: Sequence[int]) -> None:
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


def _mode_costs(job: Job, modes: list[_Mode]) -> np.ndarray:
    values = np.array([m[0] for m in modes])
    span = np.array([m[1] for m in modes], dtype=np.int64)
    total = np.zeros(values.size)
    for term in cost_terms():
        total = total + term.slots(job.perfclass, job.demand, job.locality, values, span)
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
             modes: list[_Mode], gpus: _Gpus, optional: bool = False, home: np.ndarray | None = None) -> None:
    """One job's columns and rows (module docstring); with ``optional``, its drop column too;
    with ``home`` (the capacity cells of the GPUs it runs on, :func:`_home`), its keep column."""
    groups = stage_groups(job)
    ngroups, ntypes = table.shape
    # (the whole cluster's node is -1: no number, "-" is not a CPLEX-LP name character)
    names = [f"m_j{a}_{('s', 'r', 'c')[x.span]}{x.node if x.node >= 0 else ''}_p{k}" for k, x in enumerate(modes)]
    m = b.add_cols(names, lo=0, hi=1, integer=True, kind=KIND_MODE, job=a,
                   node=[x.node for x in modes], span=[x.span for x in modes], group=[x.tgroup for x in modes])
    u = b.add_cols([f"u_j{a}"], lo=0, hi=1, integer=True, kind=KIND_DROP, job=a) if optional else m[:0]
    if home is not None:  # a drop column and a keep column stand for the job alike: one more "u"
        u = np.concatenate((u, _add_keep(b, rows, a, home)))
    b.add_rows([f"mode_j{a}"], 1, 1, np.zeros(m.size + u.size, dtype=np.int64), np.concatenate((m, u)),
               np.ones(m.size + u.size))
    # stage columns c[k, g] and their count and threshold rows (Σ_g c[k, g] + r_k (u + k) = r_k)
    cells = np.column_stack([x.cells for x in modes])  # (cells, modes): where each mode may draw
    usable = np.flatnonzero((gpus.cnt.sum(axis=0) > 0) & cells.any(axis=1))
    kk = np.repeat(np.arange(ngroups), usable.size)
    gg = np.tile(usable, ngroups)
    reps = np.array([r for _, _, r in groups])
    c = b.add_cols([f"c_j{a}_k{k}_g{g}" for k, g in zip(kk.tolist(), gg.tolist(), strict=True)], lo=0,
                   hi=reps[kk], integer=True, kind=KIND_STAGE, job=a, group=kk, gtype=gg)
    ku = np.tile(np.arange(ngroups), u.size)  # (each of u's columns in every stage row, times r_k)
    b.add_rows([f"stage_j{a}_k{k}" for k in range(ngroups)], reps, reps, np.concatenate((kk, ku)),
               np.concatenate((c, np.repeat(u, ngroups))), np.concatenate((np.ones(c.size), reps[ku])))
    mode_pace = np.array([x.pace for x in modes])
    allow = (table[kk, gg][:, None] <= mode_pace[None, :]) & cells[gg]  # (stage columns, modes)
    r_idx, m_idx = np.nonzero(allow)
    n = c.size
    b.add_rows([f"pace_j{a}_k{k}_g{g}" for k, g in zip(kk.tolist(), gg.tolist(), strict=True)], -np.inf, 0,
               np.concatenate((np.arange(n), r_idx)), np.concatenate((c, m[m_idx])),
               np.concatenate((np.ones(n), -reps[kk][r_idx].astype(float))))
    _add_servers(b, rows, a, job, m, modes, c, gg, usable, gpus)


def _add_keep(b: ProgramBuilder, rows: _Rows, a: int, home: np.ndarray) -> np.ndarray:
    """The keep column ``k[j]`` of a running job whose GPUs lie in the capacity cells ``home``:
    it takes their count of each cell (its ``mode`` and ``stage`` entries are the caller's, as a
    drop column's; which GPUs of a cell it holds is decoding's business)."""
    used, count = np.unique(home, return_counts=True)
    k = b.add_cols([f"k_j{a}"], lo=0, hi=1, integer=True, kind=KIND_KEEP, job=a)
    rows.add(np.full(used.size, int(k[0])), used, count.astype(np.float64))
    return k


def _add_servers(b: ProgramBuilder, rows: _Rows, a: int, job: Job, m: np.ndarray,
                 modes: list[_Mode], c: np.ndarray, gg: np.ndarray,
                 usable: np.ndarray, gpus: _Gpus) -> None:
    """Server columns ``b[s, g]``: the link rows to the stage columns, the locality rows to the
    modes, and the capacity entries."""
    servers = np.unique(np.concatenate([x.servers for x in modes]))
    ss, sg = np.nonzero(gpus.cnt[servers][:, usable] > 0)
    ss, sg = servers[ss], usable[sg]
    bcols = b.add_cols([f"b_j{a}_s{s}_g{g}" for s, g in zip(ss.tolist(), sg.tolist(), strict=True)], lo=0,
                       hi=np.minimum(gpus.cnt[ss, sg], job.demand), integer=True, kind=KIND_SERVER, job=a,
                       gtype=sg, node=ss)
    # link: Σ_s b[s, g] − Σ_k c[k, g] = 0 per type
    tpos = {g: i for i, g in enumerate(usable.tolist())}
    b.add_rows([f"link_j{a}_g{g}" for g in usable.tolist()], 0, 0,
               np.concatenate(([tpos[g] for g in sg.tolist()], [tpos[g] for g in gg.tolist()])),
               np.concatenate((bcols, c)), np.concatenate((np.ones(bcols.size), -np.ones(c.size))))
    # locality: Σ_g b[s, g] ≤ d · Σ_{modes covering s} m
    spos = {s: i for i, s in enumerate(servers.tolist())}
    cover_r, cover_c = [], []
    for k, x in enumerate(modes):
        for s in x.servers.tolist():
            cover_r.append(spos[s])
            cover_c.append(m[k])
    b.add_rows([f"where_j{a}_s{s}" for s in servers.tolist()], -np.inf, 0,
               np.concatenate(([spos[s] for s in ss.tolist()], cover_r)),
               np.concatenate((bcols, np.asarray(cover_c, dtype=np.int64))),
               np.concatenate((np.ones(bcols.size), -float(job.demand) * np.ones(len(cover_c)))))
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
    for a, i in enumerate(sr.admitted):
        job = inst.jobs[i]
        if a in kept:
            out[job.id] = tuple(job.placement or ())
        if a in dropped or a in kept:
            continue
        mine = (sr.job == a) & (x > 0)
        by_type: dict[int, list[int]] = {}
        for col in np.flatnonzero(mine & (sr.kind == KIND_SERVER)).tolist():
            key = (int(sr.node[col]), int(sr.gtype[col]))
            take, pool[key] = pool[key][: x[col]], pool[key][x[col]:]
            by_type.setdefault(int(sr.gtype[col]), []).extend(take)
        per_group: dict[int, list[int]] = {}
        for col in np.flatnonzero(mine & (sr.kind == KIND_STAGE)).tolist():
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
    cl, x = sr.instance.cluster, np.zeros(sr.program.num_vars)
    col_of = {(int(sr.kind[c]), int(sr.job[c]), int(sr.group[c]), int(sr.gtype[c]), int(sr.node[c])): c
              for c in np.flatnonzero(sr.kind != KIND_MODE).tolist()}
    modes = {(int(sr.job[c]), float(sr.pace[c]), int(sr.span[c]), int(sr.node[c]), int(sr.group[c])): c
             for c in np.flatnonzero(sr.kind == KIND_MODE).tolist()}
    for a, i in enumerate(sr.admitted):
        job = sr.instance.jobs[i]
        if job.id not in placements:
            if (KIND_DROP, a, -1, -1, -1) not in col_of:
                return None
            x[col_of[(KIND_DROP, a, -1, -1, -1)]] = 1
            continue
        if (KIND_KEEP, a, -1, -1, -1) in col_of and keeps_placement(job, placements[job.id]):
            x[col_of[(KIND_KEEP, a, -1, -1, -1)]] = 1
            continue
        pos = cl.positions(placements[job.id])
        bounds = job.pipeline.slices() if job.pipeline is not None else [(0, job.demand)]
        group_of = {s: k for k, (_, members, _) in enumerate(stage_groups(job)) for s in members}
        values = np.asarray(sr.factors[job.perfclass])
        top = stage_groups(job)[0][0]
        times = job.pipeline.stage_times if job.pipeline is not None else (1.0,)
        pace = max(times[s] * float(values[pos[lo:hi]].max()) / top for s, (lo, hi) in enumerate(bounds))
        span = int(cl.span_level_pos(pos))
        servers = {int(cl.server_of[p]) for p in pos.tolist()}
        node = next(iter(servers)) if span == Level.SERVER else (
            int(cl.rack_of_server[next(iter(servers))]) if span == Level.RACK else -1)
        key = (a, pace, span, node, _type_group(cl, job, pos))
        if key not in modes or np.any(sr.gpu_type[pos] < 0):
            return None
        x[modes[key]] = 1
        for s, (lo, hi) in enumerate(bounds):
            for p in pos[lo:hi].tolist():
                g = int(sr.gpu_type[p])
                x[col_of[(KIND_STAGE, a, group_of[s], g, -1)]] += 1
                x[col_of[(KIND_SERVER, a, -1, g, int(cl.server_of[p]))]] += 1
    return x


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
                   own: dict[JobId, tuple[int, ...]] | None) -> dict[JobId, tuple[int, ...]] | None:
    """``given`` (checked: a placement of exactly the admitted jobs, on distinct GPUs, that the
    program encodes) when it costs no more than ``own``, else ``own``."""
    if given is None:
        return own
    placement = {jid: tuple(int(g) for g in gids) for jid, gids in given.items()}
    used = [g for gids in placement.values() for g in gids]
    jobs = {sr.instance.jobs[i].id: sr.instance.jobs[i] for i in sr.admitted}
    ok = set(placement) == set(jobs) and len(set(used)) == len(used) and all(
        len(gids) == jobs[jid].demand and all(g in sr.instance.cluster.position for g in gids)
        for jid, gids in placement.items())
    if not ok or encode_stage_round(sr, placement) is None:
        raise OptionError("start is not a placement of the admitted jobs (with every pipeline's GPUs in stage order)")
    if own is None or evaluate(sr.instance, placement, sr.factors).cost <= evaluate(sr.instance, own, sr.factors).cost:
        return placement
    return own


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

    Raises
    ------
    BackendError
        The solver stopped (or could not start) without any solution and there is no start
        placement.
    OptionError
        ``start`` is not a placement of the admitted jobs.
    """
    t0 = time.perf_counter()
    sr = build_stage_round(instance, admitted, factors)
    start = _cheaper_start(sr, start, start_placement(instance, admitted, factors))
    built = time.perf_counter() - t0
    cls = get_backend(backend)
    vector = encode_stage_round(sr, start) if warm_start and start is not None and cls.supports_warm_start else None
    details = {**(info or {}), "program": "stage", "num_vars": sr.program.num_vars, "num_rows": sr.program.num_rows,
               "nnz": int(sr.program.A.nnz)}
    try:
        sol = cls().solve(sr.program, options or SolveOptions(), start=vector)
    except TimeLimitReached as exc:  # the deadline came before the solver could run
        details["time_limit_reached"] = exc.stage
        sol = BackendSolution(SolverStatus.NO_SOLUTION, None, None, None, 0.0, message=str(exc))
    details.update(sol.info)  # the solver's figures (nodes, iterations; HiGHS: crashes survived)
    details.update(solver_status=str(sol.status), solver_message=sol.message, warm_start=vector is not None)
    common: dict[str, Any] = dict(method="ilp", admission=admission, solve_seconds=sol.seconds, build_seconds=built,
                                  bound=sol.bound, backend=cls.name, backend_version=cls.version(), info=details)
    if sol.values is None:
        if start is None:
            raise BackendError(f"{cls.name} found no solution of the stage program ({sol.status}: {sol.message})")
        why = sol.message if "time_limit_reached" in details else f"{cls.name}: {sol.status}"
        return priced_result(instance, start, factors, status=Status.FALLBACK,
                             message=f"{why}; the start placement (PAL's, or the start given) is returned",
                             **common)
    status = Status.OPTIMAL if sol.status == SolverStatus.OPTIMAL else Status.FEASIBLE
    res = priced_result(instance, decode_stage_round(sr, sol.values), factors, status=status, **common)
    if start is not None:
        fallback = priced_result(instance, start, factors, status=Status.FEASIBLE, **common)
        if fallback.objective < res.objective - 1e-9:  # a solver that ignored the start and stopped early
            res = fallback
    demand = sum(instance.jobs[i].demand for i in admitted)
    bound = sol.bound  # (the running jobs left out are in the program's constant)
    res.bound = bound
    res.gap = relative_gap(res.objective, bound, demand)
    if res.status == Status.OPTIMAL and (res.gap is None or res.gap > 1e-6):
        res.status = Status.FEASIBLE  # pragma: no cover - the program prices every job at its pace
    return res
