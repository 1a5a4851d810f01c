"""The round integer program, built once in solver-neutral sparse form.

The program (see ``formulations/round_ilp.md`` for the mathematics) places every admitted job
on exactly ``demand`` free GPUs at least cost under :mod:`pal_opt.cost`.  It is *aggregated*:
it never has a variable per (job, GPU).

* **Job types** *t*: admitted jobs with equal (class, demand, locality penalties, lanes);
  ``n_t`` jobs.
* **Lanes** (GPU types, :mod:`pal_opt.ilp.typelanes`): the type groups a job may be drawn from;
  a round without GPU types has one lane, every GPU.  A job type has slot columns per lane.
* **Profiles** *p*: (class, lane) pairs whose factor levels partition the free GPUs identically
  (same level index on every free GPU); they share flow variables.  Level *v* of a profile is
  the *v*-th smallest distinct binned factor over the lane's free GPUs (other GPUs: no level).
* **GPU classes** *g* (``gpu_type`` in the code; not the hardware types): the tuple of level
  indices over the profiles; only counts of free GPUs per (server, GPU class) matter.
* **Slot variables** (integer) ``x[t,v,s]`` / ``y[t,v,r]`` / ``z[t,v]``: how many type-*t* jobs
  run inside server *s* / inside rack *r* / anywhere, on GPUs of level ≤ *v*.  Cost
  ``d_t · (ln value_c(t)[v] + ln locality_t[level])``.
* **Keep variables** (binary, only when moving a running job is charged for:
  :func:`~pal_opt.ilp.running.moving_is_charged`, e.g. ``restart_cost > 0``): running job *j*
  keeps exactly its current GPUs; cost ``d_j ln slowdown_j(current set) − ρ · d_j`` on top of
  the constant ``ρ · Σ_{running admitted} d_j``, where ``ρ`` is what moving costs per GPU
  (the restart cost converted to round-cost units, :func:`pal_opt.cost.restart.restart_units`,
  plus the migration term's ``per_gpu``; ``per_job`` alike per job).
* **Pools** ``(kind, p, v, node)``: the GPUs used by slot variables of profile *p* at level *v*
  on one node (server, rack or the cluster).  **Flow variables** ``f[pool, g] ≥ 0`` count the
  pool's GPUs of type *g*; they need no integrality (the flow part is a network matrix).
* **Rows**: one per type (``Σ slots + Σ keeps = n_t``); one balance row per pool
  (``Σ_g f − Σ_t d_t · slot = 0``); laminar capacity rows per (server, g), (rack, g), (g)
  (only where they are not implied by the rows below them); pairwise keep conflicts; and
  Chvátal–Gomory packing cuts per (server, profile, level, k).

:func:`build_formulation` runs named steps, each a short function: the round's data
(:func:`_round_data`), levels, GPU types and free counts (:func:`_levels`), job types
(:func:`_job_types`), slot variables (:func:`_add_slot_vars`), keep variables
(:func:`_add_keep_vars`), pools and flows (:func:`_add_pools_and_flows`), type, balance,
capacity and keep-conflict rows, packing cuts, and last the **objective**
(:func:`round_objective`), the one place that prices columns: every column is created without
a cost and :func:`round_objective` computes ``c`` and ``obj_offset`` from the columns'
metadata (:class:`ColumnMeta`).

Everything is numpy; the only Python loops run over job types, profiles and levels, never
over GPUs or servers.  This module imports no solver.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..admission import admit
from ..binning import binned_factors
from ..cost import CostTerm, cost_terms, left_out_charge
from ..deadline import Deadline
from ..errors import InfeasibleRoundError, InstanceError, OptionError
from ..gputypes import has_types
from ..model import Cluster, GpuState, Level, RoundInstance, require_instance
from ..options import require_items, require_mapping, require_type
from .builder import ProgramBuilder
from .program import Program, read_only
from .running import keep_positions, moving_is_charged
from .typelanes import Lane, lane_levels, lane_order, round_lanes

__all__ = [
    "KIND_X",
    "KIND_Y",
    "KIND_Z",
    "KIND_KEEP",
    "KIND_FLOW",
    "KIND_DROP",
    "KIND_NAMES",
    "JobType",
    "Profile",
    "ColumnMeta",
    "Formulation",
    "build_formulation",
    "estimated_build_seconds",
    "round_objective",
]

#: Variable kinds.  The slot kinds equal the :class:`~pal_opt.model.Level` they pay for.
KIND_X, KIND_Y, KIND_Z, KIND_KEEP, KIND_FLOW, KIND_DROP = 0, 1, 2, 3, 4, 5
KIND_NAMES: tuple[str, ...] = ("x", "y", "z", "keep", "flow", "drop")
_POOL_TAG = ("s", "r", "c")


@dataclass(frozen=True)
class JobType:
    """Admitted jobs that are interchangeable in the program.

    Attributes
    ----------
    perfclass, demand, locality
        What the jobs share.
    profile
        Index of the class's :class:`Profile` (of its first lane).
    jobs
        Indices into ``instance.jobs`` (queue order).
    lanes
        With GPU types and several lanes: the :class:`Profile` of each lane (``profile`` first);
        empty otherwise.
    """

    perfclass: str
    demand: int
    locality: tuple[float, float, float]
    profile: int
    jobs: tuple[int, ...]
    lanes: tuple[int, ...] = ()

    @property
    def count(self) -> int:
        return len(self.jobs)

    @property
    def profiles(self) -> tuple[int, ...]:
        """The profile of each of the type's lanes."""
        return self.lanes or (self.profile,)


@dataclass(frozen=True)
class Profile:
    """Classes whose factor levels order the free GPUs identically.

    Attributes
    ----------
    classes
        Class names sharing the profile.
    values
        ``{class: ascending distinct binned factors over the free GPUs}`` (one per level).
    """

    classes: tuple[str, ...]
    values: Mapping[str, np.ndarray]

    @property
    def num_levels(self) -> int:
        return int(next(iter(self.values.values())).size)


@dataclass(frozen=True)
class ColumnMeta:
    """Per-column metadata of the round program: what :func:`round_objective` prices by.

    Attributes
    ----------
    kind
        ``KIND_*`` per column.
    type
        Job type (slot and keep columns), else ``-1``.
    level
        Factor level index (slot and flow columns), else ``-1``.
    span
        :class:`~pal_opt.model.Level` the column's jobs span: a slot column's kind, the span of
        a keep column's current GPUs; ``-1`` for flows.
    job
        Job index into ``instance.jobs`` (keep columns), else ``-1``.
    profile
        :class:`Profile` of slot columns (their lane's), else ``-1``; None: each job type's
        ``profile``.
    """

    kind: np.ndarray
    type: np.ndarray
    level: np.ndarray
    span: np.ndarray
    job: np.ndarray
    profile: np.ndarray | None = None


@dataclass(frozen=True, eq=False, kw_only=True, repr=False)  # Program.__repr__: its size
class Formulation(Program):
    """The round program: a :class:`~pal_opt.ilp.program.Program` plus what decoding needs.

    The program is ``min c·x + obj_offset`` subject to ``row_lo ≤ A x ≤ row_hi``,
    ``col_lo ≤ x ≤ col_hi`` and ``x_i`` integer where ``integrality[i]``.  Infinite bounds are
    ``±inf``.  Every coefficient of ``A`` and every finite bound is an integer; only ``c`` and
    ``obj_offset`` are real.  ``col_group`` is the job type of slot and keep columns and
    ``group_limit`` the number of jobs of each type (their sum in every solution).

    Attributes
    ----------
    c, obj_offset, A, row_lo, row_hi, col_lo, col_hi, integrality, var_names, row_names
        The program (:class:`~pal_opt.ilp.program.Program`).
    instance, factors, admitted, total_demand
        The round, the per-class factors used, the admitted job indices (queue order) and
        Σ demand over them.
    optional
        The admitted running jobs that may be left out (preempted; a drop variable each,
        :mod:`pal_opt.ilp.preempt`), queue order; empty for the ordinary round program.
    types, profiles
        :class:`JobType` and :class:`Profile` lists.
    gpu_type
        GPU type per GPU position (``-1`` for GPUs not free).
    type_levels
        Level index of each GPU type per profile, shape (num GPU types, num profiles).
    var_kind, var_type, var_level, var_span, var_node, var_job, var_pool, var_gtype, var_profile
        Per variable: kind (``KIND_*``), job type, level, span (:class:`ColumnMeta`), node
        (server or rack position, ``-1`` for the cluster), job index (keep and drop variables), pool and
        GPU type (flows), profile (slots); ``-1`` where not applicable.
    pool_kind, pool_profile, pool_level, pool_node
        Per pool: slot kind, profile, level and node.
    """

    instance: RoundInstance
    factors: Mapping[str, np.ndarray]
    admitted: tuple[int, ...]
    total_demand: int
    types: tuple[JobType, ...]
    profiles: tuple[Profile, ...]
    gpu_type: np.ndarray
    type_levels: np.ndarray
    var_kind: np.ndarray
    var_type: np.ndarray
    var_level: np.ndarray
    var_span: np.ndarray
    var_node: np.ndarray
    var_job: np.ndarray
    var_pool: np.ndarray
    var_gtype: np.ndarray
    pool_kind: np.ndarray
    pool_profile: np.ndarray
    pool_level: np.ndarray
    pool_node: np.ndarray
    var_profile: np.ndarray | None = None
    optional: tuple[int, ...] = ()
    # decode's lookups (:func:`pal_opt.ilp.decode._lookups`, built there, so not a cached_property here)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def num_pools(self) -> int:
        return int(self.pool_kind.size)

    def summary(self) -> dict[str, Any]:
        """Model size figures (for ``PlacementResult.info``)."""
        kinds = np.bincount(self.var_kind, minlength=len(KIND_NAMES))
        return {
            "num_vars": self.num_vars,
            "num_int_vars": int(self.integrality.sum()),
            "num_rows": self.num_rows,
            "nnz": int(self.A.nnz),
            "vars_by_kind": {KIND_NAMES[k]: int(kinds[k]) for k in range(len(KIND_NAMES))},
            "num_job_types": len(self.types),
            "num_profiles": len(self.profiles),
            "num_gpu_types": int(self.type_levels.shape[0]),
            "num_pools": self.num_pools,
            "levels": {c: int(p.values[c].size) for p in self.profiles for c in p.classes},
        }


# --------------------------------------------------------------------------- building
#: Per-column metadata the builder keeps (``Formulation.var_*``).
_META = ("kind", "type", "level", "span", "node", "job", "pool", "gtype", "profile")


@dataclass(frozen=True)
class _RoundData:
    """The checked inputs of one build."""

    factors: Mapping[str, np.ndarray]
    admitted: tuple[int, ...]
    total: int
    free_pos: np.ndarray
    locs: dict[int, tuple[float, float, float]]
    lanes: dict[int, tuple[Lane, ...]]
    optional: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Levels:
    """Profiles, GPU types and free-GPU counts: per (server, type), (rack, type) and type, and per
    profile by level (``lev_*``) and cumulated over levels ≤ v (``cum_*``)."""

    profiles: tuple[Profile, ...]
    class_profile: dict[tuple[str, Lane], int]
    type_levels: np.ndarray
    gpu_type: np.ndarray
    cnt: np.ndarray
    cntr: np.ndarray
    tot: np.ndarray
    lev_s: list[np.ndarray]
    cum_s: list[np.ndarray]
    lev_r: list[np.ndarray]
    cum_r: list[np.ndarray]
    lev_c: list[np.ndarray]
    cum_c: list[np.ndarray]

    @property
    def nlev(self) -> list[int]:
        return [p.num_levels for p in self.profiles]

    @property
    def ntypes(self) -> int:
        return int(self.type_levels.shape[0])

    @property
    def server_free(self) -> np.ndarray:
        return self.cnt.sum(axis=1)


@dataclass(frozen=True)
class _Slots:
    """The slot columns (the first columns of the program) and their metadata."""

    idx: np.ndarray
    kind: np.ndarray
    type: np.ndarray
    level: np.ndarray
    node: np.ndarray
    profile: np.ndarray
    demand: np.ndarray


@dataclass(frozen=True)
class _Keeps:
    """The keep columns: column index, job type and current GPU positions of each."""

    idx: list[int] = field(default_factory=list)
    type: list[int] = field(default_factory=list)
    pos: list[np.ndarray] = field(default_factory=list)


@dataclass(frozen=True)
class _Drops:
    """The drop columns: column index, job type and job index of each."""

    idx: list[int] = field(default_factory=list)
    type: list[int] = field(default_factory=list)
    job: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Pools:
    """Pools ``(kind, profile, level, node)``, the pool of each slot column and the flow columns."""

    kind: np.ndarray
    profile: np.ndarray
    level: np.ndarray
    node: np.ndarray
    tag: list[str]
    slot_pool: np.ndarray
    f_idx: np.ndarray
    f_pool: np.ndarray
    f_g: np.ndarray

    @property
    def f_kind(self) -> np.ndarray:
        return self.kind[self.f_pool]

    @property
    def f_node(self) -> np.ndarray:
        return self.node[self.f_pool]


def _check_locality(instance: RoundInstance, idx: int) -> tuple[float, float, float]:
    job = instance.jobs[idx]
    loc = tuple(float(x) for x in job.locality)
    path = f"jobs[{idx}].locality"
    if len(loc) != 3 or not all(math.isfinite(x) and x > 0 for x in loc):
        raise InstanceError(f"locality penalties must be three finite positive numbers, got {job.locality!r}",
                            path=path)
    if job.demand >= 2:
        racked = instance.cluster.racked
        ok = loc[0] <= loc[1] <= loc[2] if racked else loc[0] <= loc[2]
        if not ok:
            raise InstanceError(
                "the integer program needs locality penalties that do not decrease with the level "
                f"(server <= rack <= cluster), got {job.locality!r}",
                path=path,
            )
    return loc  # type: ignore[return-value]


def build_formulation(
    instance: RoundInstance,
    admitted: Sequence[int] | None = None,
    *,
    factors: Mapping[str, np.ndarray] | None = None, binning: str | None = None, cuts: bool = True,
    deadline: Deadline | None = None, optional: Sequence[int] = (),
) -> Formulation:
    """Build the round program for the ``admitted`` jobs.

    Parameters
    ----------
    instance
        The round.
    admitted
        Indices into ``instance.jobs`` that must all be placed; default: the ``"prefix"``
        admission (:func:`pal_opt.admission.admit`).
    factors
        ``{class: per-GPU factors}``; default: ``binned_factors(instance.cluster, binning)``.
    binning
        Binning mode when ``factors`` is not given (default ``instance.params.binning``).
    cuts
        Add the Chvátal–Gomory server packing cuts and, on rounds with GPU types, the fill cuts
        (valid inequalities that tighten the LP relaxation; they never cut off a placement).
    deadline
        Give up (:class:`~pal_opt.errors.TimeLimitReached`) when the build cannot end before it:
        before starting, when :func:`estimated_build_seconds` exceeds the time left, and between
        steps, once it has passed.
    optional
        Running jobs among ``admitted`` that may be left out (drop variables, ``formulations/preemption.md``).

    Returns
    -------
    Formulation

    Raises
    ------
    InfeasibleRoundError
        If the admitted jobs (but the optional ones) need more GPUs than are free.
    InstanceError
        For locality penalties the program cannot price (non-positive, non-finite, or
        decreasing with the level for a multi-GPU job) or a negative restart cost.
    TimeLimitReached
        When ``deadline`` comes first.
    OptionError
        For repeated or out-of-range job indices in ``admitted``.

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance, RoundParams
    >>> c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0, 1.2, 1.0, 1.0]})
    >>> inst = RoundInstance(c, (Job(1, 2, "classA"), Job(2, 1, "classA")), RoundParams(binning="none"))
    >>> f = build_formulation(inst)
    >>> f.num_vars, f.num_rows, f.total_demand
    (14, 10, 3)
    """
    _check_build_arguments(instance, admitted, factors, cuts, deadline, optional)
    cl = instance.cluster
    data = _round_data(instance, admitted, factors, binning, optional)
    kinds = _gpu_kinds(instance, data)
    step = _steps_before(deadline, cl, kinds)
    lv = _levels(instance, data, kinds)
    types = _job_types(instance, data, lv.class_profile)
    b = ProgramBuilder(_META)
    slots = _add_slot_vars(b, cl, types, lv)
    keeps = _add_keep_vars(b, instance, data.admitted, types)
    drops = _add_drop_vars(b, data.optional, types, keeps)
    step()
    pools = _add_pools_and_flows(b, cl, slots, lv)
    step()
    _add_type_rows(b, types, slots, keeps, drops)
    _add_balance_rows(b, slots, pools)
    _add_capacity_rows(b, cl, lv, pools, keeps)
    _add_keep_conflict_rows(b, cl, keeps)
    if cuts:
        _add_cuts(b, instance, lv, slots, pools)
    step()
    cols = ColumnMeta(**{k: b.meta(k) for k in ("kind", "type", "level", "span", "job", "profile")})
    c, offset = round_objective(instance, data.factors, data.admitted, types, lv.profiles, cols)
    program, meta = b.finish(c, offset, {"pool": (slots.idx, pools.slot_pool)})
    return _assemble(instance, data, lv, types, pools, program, meta)


def _check_build_arguments(instance: Any, admitted: Any, factors: Any, cuts: Any, deadline: Any,
                           optional: Any) -> None:
    """:func:`build_formulation`'s arguments, each an error naming it (a wrong object failed deep
    inside: ``'Deadline' object has no attribute 'check'``, ``... is not iterable``)."""
    require_instance(instance)
    if admitted is not None:
        require_items(admitted, "admitted", "a list of job indices", of=(int, np.integer))
    if factors is not None:
        require_mapping(factors, "factors", "a mapping of classes to per-GPU factors (pal_opt.binned_factors)")
    require_type(cuts, bool, "cuts")
    if deadline is not None:
        require_type(deadline, Deadline, "deadline", " (pal_opt.deadline.Deadline)")
    require_items(optional, "optional", "a list of job indices", of=(int, np.integer))


# ---- step: data
def _round_data(
    instance: RoundInstance,
    admitted: Sequence[int] | None,
    factors: Mapping[str, np.ndarray] | None,
    binning: str | None,
    optional: Sequence[int] = (),
) -> _RoundData:
    """The factors, the checked admitted set (all but the optional jobs must fit the free GPUs)
    and the checked restart cost and locality penalties."""
    cl = instance.cluster
    if factors is None:
        factors = binned_factors(cl, binning or instance.params.binning)
    adm = tuple(sorted(int(i) for i in (admit(instance, "prefix") if admitted is None else admitted)))
    if len(set(adm)) != len(adm) or (adm and not 0 <= adm[0] <= adm[-1] < len(instance.jobs)):
        raise OptionError(f"admitted must list distinct job indices in 0..{len(instance.jobs) - 1}, got {adm}")
    rc = float(instance.params.restart_cost)
    if not (math.isfinite(rc) and rc >= 0):
        raise InstanceError(f"restart cost must be a finite number >= 0, got {rc!r}", path="params.restart_cost")
    opt = tuple(sorted(int(i) for i in optional))
    if not set(opt) <= set(adm) or len(set(opt)) != len(opt) or any(instance.jobs[i].placement is None for i in opt):
        raise OptionError(f"optional must list distinct admitted running jobs, got {opt}")
    jobs = [instance.jobs[i] for i in adm]
    total = int(sum(j.demand for j in jobs))
    free_pos = np.flatnonzero(cl.state == GpuState.FREE)
    nfree = int(free_pos.size)
    if total - sum(instance.jobs[i].demand for i in opt) > nfree:
        raise InfeasibleRoundError(
            f"the admitted jobs need {total} GPUs but only {nfree} are free", tuple(j.id for j in jobs)
        )
    locs = {i: _check_locality(instance, i) for i in adm}
    return _RoundData(factors, adm, total, free_pos, locs, round_lanes(instance, adm, free_pos), opt)


#: The build's time model (:func:`estimated_build_seconds`): seconds, and seconds per unit of
#: (servers + GPUs) × GPU types, the size of its largest steps.  Measured on generated rounds on
#: two busy cores (8,192 GPUs: 3,314 types, 4.5 s), with room to spare.
BUILD_BASE_SECONDS = 0.1
BUILD_SECONDS_PER_UNIT = 2.5e-7


def estimated_build_seconds(num_servers: int, num_gpus: int, num_types: int) -> float:
    """How long :func:`build_formulation` may take for a round of ``num_gpus`` GPUs on
    ``num_servers`` servers whose free GPUs fall into ``num_types`` GPU types (distinct tuples of
    factor levels over the admitted classes): its pool and capacity steps work on (servers +
    pools) × types arrays.  About 0.3 s at 2,048 GPUs, 7 s at 8,192, 200 s at 32,768 (23,000
    types), 1,000 s at 65,536.

    >>> round(estimated_build_seconds(256, 2048, 348), 2)
    0.3
    """
    return BUILD_BASE_SECONDS + BUILD_SECONDS_PER_UNIT * (num_servers + num_gpus) * num_types


def _steps_before(deadline: Deadline | None, cl: Cluster, kinds: _Kinds) -> Callable[[], None]:
    """With a deadline: check that the build's estimate fits, and return the check made between
    steps (:class:`~pal_opt.errors.TimeLimitReached` once the deadline has passed)."""
    if deadline is None:
        return lambda: None
    deadline.check("building the program",
                   need=estimated_build_seconds(cl.num_servers, cl.num_gpus, int(kinds[3].shape[0])))
    return lambda: deadline.check("building the program")


# ---- step: GPU kinds (profiles and GPU types)
_Kinds = tuple[tuple[Profile, ...], dict[tuple[str, Lane], int], list[np.ndarray], np.ndarray, np.ndarray]


def _gpu_kinds(instance: RoundInstance, data: _RoundData) -> _Kinds:
    """The profiles of the admitted classes, each class's profile, each profile's level per free
    GPU, the level tuple of each GPU type and each GPU's type (:func:`_profiles`, :func:`_gpu_types`)."""
    profiles, class_profile, prof_inv = _profiles(instance, data)
    type_levels, gpu_type = _gpu_types(instance.cluster, data.free_pos, prof_inv)
    return profiles, class_profile, prof_inv, type_levels, gpu_type


# ---- step: levels (free counts)
def _levels(instance: RoundInstance, data: _RoundData, kinds: _Kinds) -> _Levels:
    """The free-GPU counts every later step uses, per GPU type and per profile level."""
    cl = instance.cluster
    profiles, class_profile, _, type_levels, gpu_type = kinds
    ntypes = int(type_levels.shape[0])
    gt = gpu_type[data.free_pos]
    cnt = np.zeros((cl.num_servers, ntypes), dtype=np.int64)
    np.add.at(cnt, (cl.server_of[data.free_pos], gt), 1)
    cntr = np.zeros((len(cl.rack_ids), ntypes), dtype=np.int64)
    if cl.racked:
        np.add.at(cntr, cl.rack_of_server, cnt)
    tot = cnt.sum(axis=0)
    per: dict[str, list[np.ndarray]] = {k: [] for k in ("lev_s", "cum_s", "lev_r", "cum_r", "lev_c", "cum_c")}
    srv = cl.server_of[data.free_pos]
    racks = len(cl.rack_ids)
    for p, prof in enumerate(profiles):
        # free GPUs per (node, level of profile p), counted over the GPUs: the same as the type
        # counts times a one-hot (types × levels) matrix, without that matrix's size
        nl = prof.num_levels
        level = type_levels[gt, p]
        # with GPU types, a GPU outside a lane's types has level nl, which no slot reaches: not counted
        inside = level < nl
        level, on = level[inside], srv[inside]
        counts = {
            "s": np.bincount(on * nl + level, minlength=cl.num_servers * nl).reshape(-1, nl),
            "r": (np.bincount(cl.rack_of_server[on] * nl + level, minlength=racks * nl).reshape(-1, nl)
                  if cl.racked else np.zeros((racks, nl), dtype=np.int64)),  # not racked: no rack counts
            "c": np.bincount(level, minlength=nl),
        }
        for tag, lev in counts.items():
            lev = lev.astype(np.int64)
            per[f"lev_{tag}"].append(lev)
            per[f"cum_{tag}"].append(np.cumsum(lev, axis=-1))
    return _Levels(profiles, class_profile, type_levels, gpu_type, cnt, cntr, tot, **per)


def _profiles(
    instance: RoundInstance, data: _RoundData
) -> tuple[tuple[Profile, ...], dict[tuple[str, Lane], int], list[np.ndarray]]:
    """(Class, lane) pairs of the admitted jobs grouped by identical level partitions of the free
    GPUs: the profiles, the profile of each pair and each profile's level per free GPU."""
    cl = instance.cluster
    present: dict[str, set[Lane]] = {}
    for i in data.admitted:
        present.setdefault(instance.jobs[i].perfclass, set()).update(data.lanes[i])
    prof_key: dict[tuple[int, bytes], int] = {}
    prof_classes: list[list[str]] = []
    prof_values: list[dict[str, np.ndarray]] = []
    prof_inv: list[np.ndarray] = []
    class_profile: dict[tuple[str, Lane], int] = {}
    for cname, lane in ((c, g) for c in cl.classes if c in present for g in sorted(present[c], key=lane_order)):
        vals = np.asarray(data.factors[cname], dtype=np.float64)[data.free_pos]
        lv, inv = lane_levels(instance, vals, lane, data.free_pos)
        # keyed by the level count too: a lane's GPUs off its types have level len(lv), so a
        # one-type lane ([aws: 1, rtx: 0], one level) and a mixed lane of the same class
        # ([aws: 1, rtx: 0], two levels) have equal level arrays but are not the same profile
        key = (int(lv.size), inv.tobytes())
        p = prof_key.get(key)
        if p is None:
            p = prof_key[key] = len(prof_classes)
            prof_classes.append([])
            prof_values.append({})
            prof_inv.append(inv)
        if cname not in prof_values[p]:
            prof_classes[p].append(cname)
        lv.setflags(write=False)
        prof_values[p][cname] = lv
        class_profile[(cname, lane)] = p
    profiles = tuple(Profile(tuple(cs), dict(vs)) for cs, vs in zip(prof_classes, prof_values, strict=True))
    return profiles, class_profile, prof_inv


def _gpu_types(cl: Cluster, free_pos: np.ndarray, prof_inv: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The level tuple of each GPU type, shape (types, profiles), and the type of each GPU
    (``-1`` off the free set)."""
    nfree = int(free_pos.size)
    if prof_inv:
        type_levels, gt = np.unique(np.column_stack(prof_inv), axis=0, return_inverse=True)
        gt = gt.reshape(-1).astype(np.int64)
    else:
        type_levels, gt = np.zeros((1 if nfree else 0, 0), dtype=np.int64), np.zeros(nfree, dtype=np.int64)
    gpu_type = np.full(cl.num_gpus, -1, dtype=np.int64)
    gpu_type[free_pos] = gt
    return type_levels.astype(np.int64), gpu_type


# ---- step: job types
def _job_types(
    instance: RoundInstance, data: _RoundData, class_profile: Mapping[tuple[str, Lane], int]
) -> tuple[JobType, ...]:
    """Admitted jobs grouped by (class, demand, locality penalties, lanes' profiles), in order of
    first appearance."""
    tkey: dict[tuple[Any, ...], int] = {}
    tjobs: list[list[int]] = []
    tinfo: list[tuple[str, int, tuple[float, float, float], tuple[int, ...]]] = []
    for i in data.admitted:
        j = instance.jobs[i]
        lanes = tuple(dict.fromkeys(class_profile[(j.perfclass, g)] for g in data.lanes[i]))
        key = (j.perfclass, int(j.demand), data.locs[i], lanes)
        t = tkey.get(key)
        if t is None:
            t = tkey[key] = len(tjobs)
            tjobs.append([])
            tinfo.append(key)  # type: ignore[arg-type]
        tjobs[t].append(i)
    return tuple(
        JobType(c, d, loc, lanes[0], tuple(js), lanes if len(lanes) > 1 else ())
        for (c, d, loc, lanes), js in zip(tinfo, tjobs, strict=True)
    )


# ---- step: slot variables x / y / z
def _add_slot_vars(b: ProgramBuilder, cl: Cluster, types: Sequence[JobType], lv: _Levels) -> _Slots:
    """``x[t,v,s]``, ``y[t,v,r]`` and ``z[t,v]`` per job type and lane, pruned as ``round_ilp.md``
    §2 says (a type of several lanes tags its columns ``t{t}h{lane}``)."""
    for t, jt in enumerate(types):
        for h, p in enumerate(jt.profiles):
            _add_lane_slots(b, cl, t if len(jt.profiles) == 1 else f"{t}h{h}", t, jt, p, lv)
    # the slot variables are the first columns; their metadata sits in the builder
    s_t = b.meta("type")
    return _Slots(
        idx=np.arange(b.ncol, dtype=np.int64),
        kind=b.meta("kind"),
        type=s_t,
        level=b.meta("level"),
        node=b.meta("node"),
        profile=b.meta("profile"),
        demand=np.asarray([jt.demand for jt in types], dtype=np.int64)[s_t],
    )


def _add_lane_slots(b: ProgramBuilder, cl: Cluster, tag: int | str, t: int, jt: JobType, p: int, lv: _Levels) -> None:
    """The slot columns of job type ``t`` on the lane of profile ``p``."""
    d = jt.demand
    # x: within one server; level v present on the server and >= d GPUs of level <= v
    _add_node_slots(b, tag, t, jt, p, KIND_X, (lv.cum_s[p] >= d) & (lv.lev_s[p] > 0), lv.cum_s[p])
    if d < 2:
        return
    # y: within one rack, across >= 2 servers holding compatible GPUs
    if cl.racked:
        nserv = np.zeros((len(cl.rack_ids), lv.cum_s[p].shape[1]), dtype=np.int64)
        np.add.at(nserv, cl.rack_of_server, (lv.cum_s[p] > 0).astype(np.int64))
        m = (lv.cum_r[p] >= d) & (lv.lev_r[p] > 0) & (nserv >= 2)
        _add_node_slots(b, tag, t, jt, p, KIND_Y, m, lv.cum_r[p])
        spread = (lv.cum_r[p] > 0).sum(axis=0)
    else:
        spread = (lv.cum_s[p] > 0).sum(axis=0)
    # z: across the cluster (servers of a flat cluster, racks of a racked one)
    v_i = np.flatnonzero((lv.cum_c[p] >= d) & (lv.lev_c[p] > 0) & (spread >= 2))
    b.add_cols([f"z_t{tag}_v{v}" for v in v_i.tolist()], lo=0, hi=np.minimum(lv.cum_c[p][v_i] // d, jt.count),
               integer=True, kind=KIND_Z, type=t, level=v_i, span=Level.CLUSTER, node=-1, profile=p)


def _add_node_slots(b: ProgramBuilder, tag: int | str, t: int, jt: JobType, p: int, kind: int, mask: np.ndarray,
                    cum: np.ndarray) -> None:
    """Slot columns of type ``t`` (named ``tag``), profile ``p`` and ``kind`` (x or y) for every
    (node, level) in ``mask``, bounded by the jobs that fit the node's GPUs of level ≤ v."""
    v_i, n_i = np.nonzero(mask.T)
    ub = np.minimum(cum[n_i, v_i] // jt.demand, jt.count)
    fmt = f"{KIND_NAMES[kind]}_t{tag}_v{{}}_{_POOL_TAG[kind]}{{}}"
    names = [fmt.format(v, n) for v, n in zip(v_i.tolist(), n_i.tolist(), strict=True)]
    b.add_cols(names, lo=0, hi=ub, integer=True, kind=kind, type=t, level=v_i, span=kind, node=n_i, profile=p)


# ---- step: keep variables
def _add_keep_vars(b: ProgramBuilder, instance: RoundInstance, admitted: Sequence[int], types: Sequence[JobType]) -> _Keeps:
    """``k[j]`` for every admitted running job that could keep its GPUs, when moving is charged."""
    keeps = _Keeps()
    if not moving_is_charged(instance):
        return keeps
    job_type = {i: t for t, jt in enumerate(types) for i in jt.jobs}
    for i in admitted:
        pos = keep_positions(instance, i)
        if pos is None:
            continue
        idx = b.add_cols([f"k_j{i}"], lo=0, hi=1, integer=True, kind=KIND_KEEP, type=job_type[i], job=i,
                         span=int(instance.cluster.span_level_pos(pos)))
        keeps.idx.append(int(idx[0]))
        keeps.type.append(job_type[i])
        keeps.pos.append(pos)
    return keeps


# ---- step: drop variables
def _add_drop_vars(b: ProgramBuilder, optional: Sequence[int], types: Sequence[JobType], keeps: _Keeps) -> _Drops:
    """``u[j]`` for every optional running job: 1 when it is left out (preempted); and the rows
    ``k[j] + u[j] ≤ 1`` (:func:`_add_keep_drop_rows`)."""
    drops = _Drops()
    job_type = {i: t for t, jt in enumerate(types) for i in jt.jobs}
    for i in optional:
        idx = b.add_cols([f"u_j{i}"], lo=0, hi=1, integer=True, kind=KIND_DROP, type=job_type[i], job=i)
        drops.idx.append(int(idx[0]))
        drops.type.append(job_type[i])
        drops.job.append(i)
    _add_keep_drop_rows(b, keeps, drops)
    return drops


# ---- step: pools and flows
def _add_pools_and_flows(b: ProgramBuilder, cl: Cluster, slots: _Slots, lv: _Levels) -> _Pools:
    """One pool per (slot kind, profile, level, node) and one flow column per (pool, compatible
    GPU type present under the pool's node)."""
    if slots.idx.size:
        pool_keys = np.column_stack([slots.kind, slots.profile, slots.level, slots.node])
        pools, slot_pool = np.unique(pool_keys, axis=0, return_inverse=True)
        slot_pool = slot_pool.reshape(-1)
    else:
        pools, slot_pool = np.zeros((0, 4), dtype=np.int64), np.zeros(0, dtype=np.int64)
    pk, pp, pv, pn = (pools[:, k].astype(np.int64) for k in range(4))
    S, R = cl.num_servers, len(cl.rack_ids)
    # availability per pool node: rows [servers | racks | cluster] x GPU type
    avail = np.vstack([lv.cnt, lv.cntr, lv.tot[None, :]])
    node_row = np.where(pk == KIND_X, pn, np.where(pk == KIND_Y, S + pn, S + R))
    if lv.profiles:
        compat = lv.type_levels.T[pp] <= pv[:, None]
    else:
        compat = np.zeros((pk.size, lv.ntypes), dtype=bool)
    f_pool, f_g = np.nonzero(compat & (avail[node_row] > 0))
    tag = [_POOL_TAG[k] + (str(n) if k != KIND_Z else "") for k, n in zip(pk.tolist(), pn.tolist(), strict=True)]
    f_names = [f"f_{tag[q]}_p{pp[q]}_v{pv[q]}_g{g}" for q, g in zip(f_pool.tolist(), f_g.tolist(), strict=True)]
    f_idx = b.add_cols(f_names, lo=0, hi=avail[node_row[f_pool], f_g], integer=False, kind=KIND_FLOW,
                       pool=f_pool, gtype=f_g, level=pv[f_pool], node=pn[f_pool])
    return _Pools(pk, pp, pv, pn, tag, slot_pool, f_idx, f_pool, f_g)


# ---- step: type rows  Σ slots + Σ keeps + Σ drops = n_t
def _add_type_rows(b: ProgramBuilder, types: Sequence[JobType], slots: _Slots, keeps: _Keeps, drops: _Drops) -> None:
    counts = [jt.count for jt in types]
    rows = np.concatenate([slots.type, np.asarray(keeps.type, dtype=np.int64), np.asarray(drops.type, dtype=np.int64)])
    cols = np.concatenate([slots.idx, np.asarray(keeps.idx, dtype=np.int64), np.asarray(drops.idx, dtype=np.int64)])
    b.add_rows([f"n_t{t}" for t in range(len(types))], counts, counts, rows, cols, np.ones(cols.size))


# ---- step: balance rows  Σ_g f[pool, g] − Σ_t d_t slot = 0
def _add_balance_rows(b: ProgramBuilder, slots: _Slots, pools: _Pools) -> None:
    b.add_rows(
        [f"bal_{pools.tag[q]}_p{pools.profile[q]}_v{pools.level[q]}" for q in range(pools.kind.size)], 0.0, 0.0,
        np.concatenate([pools.f_pool, pools.slot_pool]), np.concatenate([pools.f_idx, slots.idx]),
        np.concatenate([np.ones(pools.f_idx.size), -slots.demand.astype(np.float64)]),
    )


# ---- step: capacity rows per (server, g), (rack, g), (g)
def _add_capacity_rows(b: ProgramBuilder, cl: Cluster, lv: _Levels, pools: _Pools, keeps: _Keeps) -> None:
    """Laminar capacity rows: every (server, type); (rack, type) and (type) only where a rack or
    cluster pool draws on them (elsewhere they are implied by the rows below)."""
    nt = lv.ntypes
    kc = np.concatenate([np.full(pos.size, k) for k, pos in zip(keeps.idx, keeps.pos, strict=True)]
                        ).astype(np.int64) if keeps.idx else np.zeros(0, dtype=np.int64)
    kcell = np.concatenate([cl.server_of[pos] * nt + lv.gpu_type[pos] for pos in keeps.pos]
                           ).astype(np.int64) if keeps.pos else np.zeros(0, dtype=np.int64)
    f_kind, f_node, f_g, f_idx = pools.f_kind, pools.f_node, pools.f_g, pools.f_idx
    # server level: every cell (s, g)
    xf = f_kind == KIND_X
    rows = np.concatenate([f_node[xf] * nt + f_g[xf], kcell])
    cols = np.concatenate([f_idx[xf], kc])
    cells = np.flatnonzero(lv.cnt.ravel() > 0)
    names = [f"cap_s{c // nt}_g{c % nt}" for c in cells.tolist()]
    _add_cell_rows(b, names, cells, lv.cnt.ravel(), rows, cols)
    # rack level: only (r, g) holding rack-pool flows; the rest is implied by the server rows
    if cl.racked:
        yf = f_kind == KIND_Y
        ros = cl.rack_of_server
        k_rack_cell = ros[kcell // nt] * nt + kcell % nt if kcell.size else kcell
        rows = np.concatenate([ros[f_node[xf]] * nt + f_g[xf], f_node[yf] * nt + f_g[yf], k_rack_cell])
        cols = np.concatenate([f_idx[xf], f_idx[yf], kc])
        cells = np.unique(f_node[yf] * nt + f_g[yf])
        names = [f"cap_r{c // nt}_g{c % nt}" for c in cells.tolist()]
        _add_cell_rows(b, names, cells, lv.cntr.ravel(), rows, cols)
    # cluster level: only GPU types holding cluster-pool flows
    gs = np.unique(f_g[f_kind == KIND_Z])
    rows = np.concatenate([f_g, kcell % nt if kcell.size else kcell])
    _add_cell_rows(b, [f"cap_g{g}" for g in gs.tolist()], gs, lv.tot, rows, np.concatenate([f_idx, kc]))


def _add_cell_rows(b: ProgramBuilder, names: list[str], cells: np.ndarray, cap: np.ndarray, rows: np.ndarray,
                   cols: np.ndarray) -> None:
    """``Σ cols ≤ cap[cell]`` for each of ``cells`` (indices into ``cap``); ``rows`` gives each
    entry's cell, entries outside ``cells`` are dropped."""
    row_of = np.full(cap.size, -1, dtype=np.int64)
    row_of[cells] = np.arange(cells.size)
    sel = row_of[rows] >= 0
    b.add_le_rows(names, cap[cells], row_of[rows[sel]], cols[sel], np.ones(int(sel.sum())))


# ---- step: keep conflicts (two running jobs cannot both keep a shared GPU)
def _add_keep_conflict_rows(b: ProgramBuilder, cl: Cluster, keeps: _Keeps) -> None:
    if not keeps.pos:
        return
    uniq, counts = np.unique(np.concatenate(keeps.pos), return_counts=True)
    shared = uniq[counts > 1]
    if not shared.size:
        return
    srow = {int(g): k for k, g in enumerate(shared.tolist())}
    rr, cc = [], []
    for kidx, pos in zip(keeps.idx, keeps.pos, strict=True):
        for g in pos.tolist():
            if g in srow:
                rr.append(srow[g])
                cc.append(kidx)
    b.add_le_rows([f"keep_gpu{int(cl.gpu_ids[g])}" for g in shared.tolist()], np.ones(shared.size),
                  np.asarray(rr), np.asarray(cc), np.ones(len(rr)))


# ---- step: a dropped job does not keep its GPUs  k[j] + u[j] ≤ 1
def _add_keep_drop_rows(b: ProgramBuilder, keeps: _Keeps, drops: _Drops) -> None:
    job_of = b.meta("job")
    keep_col = {int(job_of[k]): k for k in keeps.idx}
    pairs = [(keep_col[j], u, j) for u, j in zip(drops.idx, drops.job, strict=True) if j in keep_col]
    if not pairs:
        return
    n = len(pairs)
    rows = np.repeat(np.arange(n), 2)
    cols = np.asarray([c for k, u, _ in pairs for c in (k, u)], dtype=np.int64)
    b.add_le_rows([f"drop_keep_j{j}" for _, _, j in pairs], np.ones(n), rows, cols, np.ones(2 * n))


# ---- step: cuts
def _add_cuts(b: ProgramBuilder, instance: RoundInstance, lv: _Levels, slots: _Slots, pools: _Pools) -> None:
    """The Chvátal–Gomory packing cuts and, on rounds with GPU types, the fill cuts."""
    _add_packing_cuts(b, lv, slots)
    if has_types(instance):
        _add_fill_cuts(b, lv, slots, pools)


# ---- step: Chvátal–Gomory packing cuts on servers
def _add_packing_cuts(b: ProgramBuilder, lv: _Levels, slots: _Slots) -> None:
    """Chvátal–Gomory cuts ``Σ ⌊d_t/k⌋ x ≤ ⌊cap/k⌋`` on each server.

    The jobs counted by ``x[t, v', s]`` (profile p, v' ≤ v) use disjoint GPUs of server s with
    level ≤ v, so ``Σ d_t x ≤ cum_p(s, v)``; dividing by k and rounding down both sides is valid
    for integer x.  Rows are only added when ``cap`` is not a multiple of ``k`` (otherwise the
    cut is implied by the capacity rows) and when the column bounds do not imply them.  A second
    family uses all profiles together with the server's free GPU count.
    """
    xs = slots.kind == KIND_X
    if not xs.any():
        return
    x = _Slots(slots.idx[xs], slots.kind[xs], slots.type[xs], slots.level[xs], slots.node[xs], slots.profile[xs],
               slots.demand[xs])
    for p in range(len(lv.profiles)):
        _add_profile_cuts(b, lv, x, p)
    if len(lv.profiles) < 2:
        return
    server_free = lv.server_free
    S = server_free.size
    for k in range(2, int(x.demand.max()) + 1):
        w = x.demand // k
        use = w > 0
        cand = (server_free >= k) & (server_free % k != 0)
        if not use.any() or not cand.any():
            continue
        cs = np.flatnonzero(cand)
        sid = np.full(S, -1, dtype=np.int64)
        sid[cs] = np.arange(cs.size)
        rid = sid[x.node[use]]
        ok = rid >= 0
        b.add_le_rows([f"cg_s{s}_k{k}" for s in cs.tolist()], server_free[cs] // k, rid[ok], x.idx[use][ok],
                      w[use][ok].astype(np.float64))


def _add_profile_cuts(b: ProgramBuilder, lv: _Levels, x: _Slots, p: int) -> None:
    """The cuts of profile ``p``, per (server, level v, k), on its ``x`` columns of level ≤ v."""
    mp = x.profile == p
    if not mp.any():
        return
    cap = lv.cum_s[p]
    S, L = cap.shape
    for k in range(2, int(x.demand[mp].max()) + 1):
        w = x.demand // k
        use = mp & (w > 0)
        if not use.any():
            continue
        cand = (lv.lev_s[p] > 0) & (cap >= k) & (cap % k != 0)
        if not cand.any():
            continue
        cs, cv = np.nonzero(cand)
        cid = np.full((S, L), -1, dtype=np.int64)
        cid[cs, cv] = np.arange(cs.size)
        rr, cc, vv = [], [], []
        u_s, u_v, u_idx, u_w = x.node[use], x.level[use], x.idx[use], w[use]
        for v in range(L):
            m = u_v <= v
            rid = cid[u_s[m], v]
            ok = rid >= 0
            rr.append(rid[ok])
            cc.append(u_idx[m][ok])
            vv.append(u_w[m][ok].astype(np.float64))
        names = [f"cg_s{s}_p{p}_v{v}_k{k}" for s, v in zip(cs.tolist(), cv.tolist(), strict=True)]
        b.add_le_rows(names, cap[cs, cv] // k, np.concatenate(rr), np.concatenate(cc), np.concatenate(vv))


# ---- step: fill cuts on server pools (rounds with GPU types)
def _add_fill_cuts(b: ProgramBuilder, lv: _Levels, slots: _Slots, pools: _Pools) -> None:
    """Fill cuts ``Σ_{γ∈Γ} f[q,γ] ≥ Σ_{t in q} max(0, a_Γ − A_q + d_t) · x[t]`` on every server
    pool ``q`` (``formulations/round_ilp.md`` §10): a job of the pool lies on ``d_t`` of the pool's
    ``A_q`` eligible GPUs of its server, so at least ``d_t − (A_q − a_Γ)`` of them are in any
    set ``Γ`` of them.  The sets: for every profile ``p'`` and level ``w``, the pool's GPUs of
    level ≤ ``w`` in ``p'`` (the GPUs another pool, or a faster slot, would want), when they are
    a proper subset and some job of the pool cannot avoid them.  Rows ``fill_s{s}_p{p}_v{v}_{m}``."""
    xf = np.flatnonzero(pools.f_kind == KIND_X)
    xs = np.flatnonzero(slots.kind == KIND_X)
    if xf.size == 0 or xs.size == 0:
        return
    xf = xf[np.lexsort((pools.f_g[xf], pools.f_pool[xf]))]
    fp, fg = pools.f_pool[xf], pools.f_g[xf]
    fa = lv.cnt[pools.node[fp], fg]
    xs = xs[np.argsort(pools.slot_pool[xs], kind="stable")]
    sp = pools.slot_pool[xs]
    first = np.flatnonzero(np.r_[True, fp[1:] != fp[:-1]])
    last = np.r_[first[1:], fp.size]
    names: list[str] = []
    ents: list[tuple[np.ndarray, np.ndarray]] = []
    for lo, hi in zip(first.tolist(), last.tolist(), strict=True):
        q = int(fp[lo])
        sl = xs[np.searchsorted(sp, q):np.searchsorted(sp, q, side="right")]
        if hi - lo < 2 or sl.size == 0:
            continue
        for inside, a_in in _fill_sets(lv.type_levels[fg[lo:hi]], fa[lo:hi], int(slots.demand[sl].max())):
            coef = np.maximum(0, a_in - int(fa[lo:hi].sum()) + slots.demand[sl])
            on = coef > 0
            names.append(f"fill_{pools.tag[q]}_p{pools.profile[q]}_v{pools.level[q]}_{len(names)}")
            ents.append((np.r_[pools.f_idx[xf[lo:hi][inside]], slots.idx[sl[on]]],
                         np.r_[-np.ones(int(inside.sum())), coef[on].astype(np.float64)]))
    if names:
        r = np.concatenate([np.full(c.size, k) for k, (c, _) in enumerate(ents)])
        b.add_rows(names, -np.inf, 0.0, r, np.concatenate([c for c, _ in ents]), np.concatenate([v for _, v in ents]))


def _fill_sets(levels: np.ndarray, a: np.ndarray, dmax: int) -> list[tuple[np.ndarray, int]]:
    """The sets of a fill cut on one pool (:func:`_add_fill_cuts`): ``levels`` (the pool's GPU
    types × profiles), ``a`` the pool's GPUs of each type on its server, ``dmax`` its largest
    demand; each set as a mask over the types and its GPU count, without repeats."""
    total = int(a.sum())
    out: list[tuple[np.ndarray, int]] = []
    seen: set[bytes] = set()
    for p2 in range(levels.shape[1]):
        col = levels[:, p2]
        for w in np.unique(col)[:-1].tolist():
            inside = col <= w
            a_in = int(a[inside].sum())
            key = inside.tobytes()
            if a_in - total + dmax > 0 and key not in seen:
                seen.add(key)
                out.append((inside, a_in))
    return out


# ---- step: the objective
def round_objective(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    admitted: Sequence[int],
    types: Sequence[JobType],
    profiles: Sequence[Profile],
    cols: ColumnMeta,
) -> tuple[np.ndarray, float]:
    """The round program's objective: the cost of every column and the constant.

    Parameters
    ----------
    instance, factors
        The round and its per-class (binned) factors.
    admitted
        The admitted job indices (queue order).
    types, profiles
        The program's job types and profiles.
    cols
        Every column's metadata (:class:`ColumnMeta`).

    Returns
    -------
    (c, obj_offset)
        ``c`` (read-only, one cost per column; 0 for flows) and the constant.

    Notes
    -----
    Every registered cost term (:mod:`pal_opt.cost`) adds its block: (a) a slot column of type
    *t*, level *v* and span *L* costs what each term charges each job it counts on GPUs of factor
    level *v* spanning *L* (``CostTerm.slots``; variability and locality give the
    ``d ln(slowdown)`` of :mod:`pal_opt.cost`); (b) a keep column costs what the terms charge its
    job where it runs now (``CostTerm.placed``) less what they charge for moving it
    (``CostTerm.moved``); (c) the constant is what every running admitted job pays for moving,
    unless it keeps its GPUs.  (b) and (c) apply when
    :func:`~pal_opt.ilp.running.moving_is_charged`.
    """
    terms = cost_terms()
    c = np.zeros(cols.kind.size, dtype=np.float64)
    slot = cols.kind <= KIND_Z
    for t, jt in enumerate(types):  # (a) slot columns, lane by lane
        for p in jt.profiles:
            m = slot & (cols.type == t)
            if len(jt.profiles) > 1 and cols.profile is not None:
                m &= cols.profile == p
            values = profiles[p].values[jt.perfclass][cols.level[m]]
            span = cols.span[m]
            c[m] = sum((term.slots(instance, jt.perfclass, jt.demand, jt.locality, values, span) for term in terms),
                       np.zeros(values.size))
    offset = 0.0
    if moving_is_charged(instance):
        for k in np.flatnonzero(cols.kind == KIND_KEEP).tolist():  # (b) keep columns
            c[k] = _keep_cost(instance, factors, int(cols.job[k]), terms)
        for i in admitted:  # (c) every running admitted job pays for moving unless it keeps its GPUs
            job = instance.jobs[i]
            if job.placement is not None:
                offset += sum(term.moved(instance, job) for term in terms)
    offset += left_out_charge(instance, {instance.jobs[i].id for i in admitted})  # (d) running jobs left out
    for k in np.flatnonzero(cols.kind == KIND_DROP).tolist():  # (e) drop columns: preempted, not moved
        job = instance.jobs[int(cols.job[k])]
        moving = sum(term.moved(instance, job) for term in terms) if moving_is_charged(instance) else 0.0
        c[k] = sum(term.preempted(instance, job) for term in terms) - moving
    c.setflags(write=False)
    return c, offset


def _keep_cost(instance: RoundInstance, factors: Mapping[str, np.ndarray], i: int, terms: Sequence[CostTerm]) -> float:
    """What the terms charge job ``i`` where it runs now, less what they charge for moving it."""
    job = instance.jobs[i]
    pos = keep_positions(instance, i)
    assert pos is not None  # keep columns exist only for jobs that can keep their GPUs
    level = int(instance.cluster.span_level_pos(pos))
    top = float(np.asarray(factors[job.perfclass])[pos].max())
    return sum(term.placed(instance, job, pos, level, top) - term.moved(instance, job) for term in terms)


# ---- the result
def _assemble(
    instance: RoundInstance,
    data: _RoundData,
    lv: _Levels,
    types: tuple[JobType, ...],
    pools: _Pools,
    program: Program,
    meta: dict[str, np.ndarray],
) -> Formulation:
    """The :class:`Formulation`: the built ``program``, its column metadata and the round's."""
    kind = meta["kind"].astype(np.int8)
    arrays: dict[str, np.ndarray] = dict(
        gpu_type=lv.gpu_type, type_levels=lv.type_levels, pool_kind=pools.kind, pool_profile=pools.profile,
        pool_level=pools.level, pool_node=pools.node, var_kind=kind,
        col_group=np.where(kind == KIND_FLOW, -1, meta["type"]),
        group_limit=np.asarray([jt.count for jt in types], dtype=np.float64),
        **{f"var_{k}": v for k, v in meta.items() if k != "kind"},
    )
    kw: dict[str, Any] = {f.name: getattr(program, f.name) for f in fields(Program) if f.name not in arrays}
    kw.update({k: read_only(v) for k, v in arrays.items()})
    return Formulation(**kw, instance=instance, factors=data.factors, admitted=data.admitted,
                       total_demand=data.total, types=types, profiles=lv.profiles, optional=data.optional)
