"""The round integer program, built once in solver-neutral sparse form.

The program (see ``formulations/round_ilp.md`` for the mathematics) places every admitted job
on exactly ``demand`` free GPUs at least cost under :mod:`pal_opt.cost`.  It is *aggregated*:
it never has a variable per (job, GPU).

* **Job types** *t*: admitted jobs with equal (class, demand, locality penalties); ``n_t`` jobs.
* **Profiles** *p*: classes whose factor levels partition the free GPUs identically (same level
  index on every free GPU); they share flow variables.  Level *v* of a profile is the *v*-th
  smallest distinct binned factor over the free GPUs.
* **GPU types** *g*: the tuple of level indices over the profiles; only counts of free GPUs per
  (server, GPU type) matter.
* **Slot variables** (integer) ``x[t,v,s]`` / ``y[t,v,r]`` / ``z[t,v]``: how many type-*t* jobs
  run inside server *s* / inside rack *r* / anywhere, on GPUs of level ≤ *v*.  Cost
  ``d_t · (ln value_c(t)[v] + ln locality_t[level])``.
* **Keep variables** (binary, only when ``restart_cost > 0``): running job *j* keeps exactly its
  current GPUs; cost ``d_j ln slowdown_j(current set) − restart_cost · d_j`` on top of the
  constant ``restart_cost · Σ_{running admitted} d_j``.
* **Pools** ``(kind, p, v, node)``: the GPUs used by slot variables of profile *p* at level *v*
  on one node (server, rack or the cluster).  **Flow variables** ``f[pool, g] ≥ 0`` count the
  pool's GPUs of type *g*; they need no integrality (the flow part is a network matrix).
* **Rows**: one per type (``Σ slots + Σ keeps = n_t``); one balance row per pool
  (``Σ_g f − Σ_t d_t · slot = 0``); laminar capacity rows per (server, g), (rack, g), (g)
  (only where they are not implied by the rows below them); pairwise keep conflicts; and
  Chvátal–Gomory packing cuts per (server, profile, level, k).

Everything is numpy; the only Python loops run over job types, profiles and levels, never
over GPUs or servers.  This module imports no solver.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..admission import admit
from ..binning import binned_factors
from ..cost import job_slowdown_pos
from ..errors import InfeasibleRoundError, InstanceError, OptionError
from ..model import GpuState, Level, RoundInstance

__all__ = [
    "KIND_X",
    "KIND_Y",
    "KIND_Z",
    "KIND_KEEP",
    "KIND_FLOW",
    "KIND_NAMES",
    "JobType",
    "Profile",
    "Formulation",
    "build_formulation",
]

#: Variable kinds.  The slot kinds equal the :class:`~pal_opt.model.Level` they pay for.
KIND_X, KIND_Y, KIND_Z, KIND_KEEP, KIND_FLOW = 0, 1, 2, 3, 4
KIND_NAMES: tuple[str, ...] = ("x", "y", "z", "keep", "flow")
_POOL_TAG = ("s", "r", "c")


@dataclass(frozen=True)
class JobType:
    """Admitted jobs that are interchangeable in the program.

    Attributes
    ----------
    perfclass, demand, locality
        What the jobs share.
    profile
        Index of the class's :class:`Profile`.
    jobs
        Indices into ``instance.jobs`` (queue order).
    """

    perfclass: str
    demand: int
    locality: tuple[float, float, float]
    profile: int
    jobs: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.jobs)


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


@dataclass(frozen=True, eq=False)
class Formulation:
    """The round program in solver-neutral form, plus what decoding needs.

    The program is ``min c·x + obj_offset`` subject to ``row_lo ≤ A x ≤ row_hi``,
    ``col_lo ≤ x ≤ col_hi`` and ``x_i`` integer where ``integrality[i]``.  Infinite bounds are
    ``±inf``.  Every coefficient of ``A`` and every finite bound is an integer; only ``c`` and
    ``obj_offset`` are real.

    Attributes
    ----------
    c, obj_offset, A, row_lo, row_hi, col_lo, col_hi, integrality
        The program.
    var_names, row_names
        Deterministic, LP-format-safe names.
    instance, factors, admitted, total_demand
        The round, the per-class factors used, the admitted job indices (queue order) and
        Σ demand over them.
    types, profiles
        :class:`JobType` and :class:`Profile` lists.
    gpu_type
        GPU type per GPU position (``-1`` for GPUs not free).
    type_levels
        Level index of each GPU type per profile, shape (num GPU types, num profiles).
    var_kind, var_type, var_level, var_node, var_job, var_pool, var_gtype
        Per variable: kind (``KIND_*``), job type, level, node (server or rack position,
        ``-1`` for the cluster), job index (keep variables), pool and GPU type (flows);
        ``-1`` where not applicable.
    pool_kind, pool_profile, pool_level, pool_node
        Per pool: slot kind, profile, level and node.
    """

    c: np.ndarray
    obj_offset: float
    A: sp.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    integrality: np.ndarray
    var_names: tuple[str, ...]
    row_names: tuple[str, ...]
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
    var_node: np.ndarray
    var_job: np.ndarray
    var_pool: np.ndarray
    var_gtype: np.ndarray
    pool_kind: np.ndarray
    pool_profile: np.ndarray
    pool_level: np.ndarray
    pool_node: np.ndarray
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def num_vars(self) -> int:
        return int(self.c.size)

    @property
    def num_rows(self) -> int:
        return int(self.row_lo.size)

    @property
    def num_pools(self) -> int:
        return int(self.pool_kind.size)

    def objective(self, values: np.ndarray) -> float:
        """Program objective ``c·values + obj_offset``."""
        return float(np.dot(self.c, values)) + self.obj_offset

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

    def row_activity(self, values: np.ndarray) -> np.ndarray:
        """``A @ values``."""
        return np.asarray(self.A @ values).ravel()

    def is_feasible(self, values: np.ndarray, tol: float = 1e-6) -> bool:
        """Whether ``values`` satisfies every row, bound and integrality requirement."""
        v = np.asarray(values, dtype=np.float64)
        act = self.row_activity(v)
        ok = bool(np.all(act >= self.row_lo - tol) and np.all(act <= self.row_hi + tol))
        ok &= bool(np.all(v >= self.col_lo - tol) and np.all(v <= self.col_hi + tol))
        vi = v[self.integrality]
        return ok and bool(np.all(np.abs(vi - np.round(vi)) <= tol))


# --------------------------------------------------------------------------- building
class _Builder:
    """Accumulates columns, rows and matrix entries in numpy chunks."""

    _COLS = ("cost", "lo", "hi", "integer", "kind", "type", "level", "node", "job", "pool", "gtype")

    def __init__(self) -> None:
        self.ncol = 0
        self.nrow = 0
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in self._COLS}
        self.col_names: list[str] = []
        self.row_lo: list[np.ndarray] = []
        self.row_hi: list[np.ndarray] = []
        self.row_names: list[str] = []
        self.ent: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._hi_cache: np.ndarray | None = None

    def add_cols(self, names: list[str], *, cost: Any, lo: Any, hi: Any, integer: bool, kind: int,
                 **meta: Any) -> np.ndarray:
        n = len(names)
        idx = np.arange(self.ncol, self.ncol + n, dtype=np.int64)
        full = lambda v, dt: np.broadcast_to(np.asarray(v, dtype=dt), (n,)).copy()  # noqa: E731
        self.cols["cost"].append(full(cost, np.float64))
        self.cols["lo"].append(full(lo, np.float64))
        self.cols["hi"].append(full(hi, np.float64))
        self.cols["integer"].append(full(integer, bool))
        self.cols["kind"].append(full(kind, np.int8))
        for k in ("type", "level", "node", "job", "pool", "gtype"):
            self.cols[k].append(full(meta.get(k, -1), np.int64))
        self.col_names.extend(names)
        self.ncol += n
        self._hi_cache = None
        return idx

    def meta(self, key: str) -> np.ndarray:
        """One metadata column (``kind``, ``type``, ...) of the columns added so far."""
        parts = self.cols[key]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    def col_hi(self) -> np.ndarray:
        if self._hi_cache is None:
            self._hi_cache = np.concatenate(self.cols["hi"]) if self.cols["hi"] else np.zeros(0)
        return self._hi_cache

    def add_rows(self, names: list[str], lo: Any, hi: Any, r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
        """Add rows whose entries are given with row indices local to this batch."""
        n = len(names)
        self.row_lo.append(np.broadcast_to(np.asarray(lo, dtype=np.float64), (n,)).copy())
        self.row_hi.append(np.broadcast_to(np.asarray(hi, dtype=np.float64), (n,)).copy())
        self.row_names.extend(names)
        self.ent.append((np.asarray(r, dtype=np.int64) + self.nrow, np.asarray(c, dtype=np.int64),
                         np.asarray(v, dtype=np.float64)))
        self.nrow += n

    def add_le_rows(self, names: list[str], hi: np.ndarray, r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
        """Add ``Σ v x ≤ hi`` rows (non-negative entries on non-negative columns), dropping the
        ones the column bounds already imply (``Σ v · col_hi ≤ hi``)."""
        hi = np.asarray(hi, dtype=np.float64)
        if hi.size == 0:
            return
        reach = np.bincount(r, weights=v * self.col_hi()[c], minlength=hi.size)
        keep = reach > hi + 1e-9
        if not keep.any():
            return
        new = np.full(hi.size, -1, dtype=np.int64)
        new[keep] = np.arange(int(keep.sum()))
        m = keep[r]
        kept_names = [nm for nm, k in zip(names, keep.tolist(), strict=True) if k]
        self.add_rows(kept_names, -np.inf, hi[keep], new[r[m]], c[m], v[m])

    def finish(self, patch: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None) -> dict[str, Any]:
        """The accumulated program; ``patch`` overwrites column metadata ``{key: (cols, values)}``."""
        cat = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in self.cols.items()}
        for k, (idx, val) in (patch or {}).items():
            cat[k][idx] = val
        if self.ent:
            r = np.concatenate([e[0] for e in self.ent])
            c = np.concatenate([e[1] for e in self.ent])
            v = np.concatenate([e[2] for e in self.ent])
        else:
            r = c = np.zeros(0, dtype=np.int64)
            v = np.zeros(0)
        A = sp.csr_matrix((v, (r, c)), shape=(self.nrow, self.ncol))
        A.sum_duplicates()
        A.sort_indices()
        out = dict(
            c=cat["cost"].astype(np.float64),
            A=A,
            row_lo=np.concatenate(self.row_lo) if self.row_lo else np.zeros(0),
            row_hi=np.concatenate(self.row_hi) if self.row_hi else np.zeros(0),
            col_lo=cat["lo"].astype(np.float64),
            col_hi=cat["hi"].astype(np.float64),
            integrality=cat["integer"].astype(bool),
            var_names=tuple(self.col_names),
            row_names=tuple(self.row_names),
            var_kind=cat["kind"].astype(np.int8),
        )
        for k in ("type", "level", "node", "job", "pool", "gtype"):
            out[f"var_{k}"] = cat[k].astype(np.int64)
        for arr in out.values():
            if isinstance(arr, np.ndarray):
                arr.setflags(write=False)
        return out


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


def _keep_positions(instance: RoundInstance, idx: int) -> np.ndarray | None:
    """Positions of a running job's current GPUs if it could keep them, else None."""
    job = instance.jobs[idx]
    if job.placement is None or len(job.placement) != job.demand or len(set(job.placement)) != job.demand:
        return None
    cl = instance.cluster
    try:
        pos = cl.positions(job.placement)
    except KeyError:
        return None
    if not np.all(cl.state[pos] == GpuState.FREE):
        return None
    return np.sort(pos)


def build_formulation(
    instance: RoundInstance,
    admitted: Sequence[int] | None = None,
    *,
    factors: Mapping[str, np.ndarray] | None = None,
    binning: str | None = None,
    cuts: bool = True,
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
        Add the Chvátal–Gomory server packing cuts (valid inequalities that tighten the LP
        relaxation; they never cut off an integer solution).

    Returns
    -------
    Formulation

    Raises
    ------
    InfeasibleRoundError
        If the admitted jobs need more GPUs than are free.
    InstanceError
        For locality penalties the program cannot price (non-positive, non-finite, or
        decreasing with the level for a multi-GPU job) or a negative restart cost.
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
    cl = instance.cluster
    if factors is None:
        factors = binned_factors(cl, binning or instance.params.binning)
    adm = tuple(sorted(int(i) for i in (admit(instance, "prefix") if admitted is None else admitted)))
    if len(set(adm)) != len(adm) or (adm and not 0 <= adm[0] <= adm[-1] < len(instance.jobs)):
        raise OptionError(f"admitted must list distinct job indices in 0..{len(instance.jobs) - 1}, got {adm}")
    rc = float(instance.params.restart_cost)
    if not (math.isfinite(rc) and rc >= 0):
        raise InstanceError(f"restart cost must be a finite number >= 0, got {rc!r}", path="params.restart_cost")
    jobs = [instance.jobs[i] for i in adm]
    total = int(sum(j.demand for j in jobs))
    free_pos = np.flatnonzero(cl.state == GpuState.FREE)
    nfree = int(free_pos.size)
    if total > nfree:
        raise InfeasibleRoundError(
            f"the admitted jobs need {total} GPUs but only {nfree} are free", tuple(j.id for j in jobs)
        )
    locs = {i: _check_locality(instance, i) for i in adm}

    # ---- profiles: classes with identical level partitions of the free GPUs
    present = {j.perfclass for j in jobs}
    classes = [c for c in cl.classes if c in present]
    prof_key: dict[bytes, int] = {}
    prof_classes: list[list[str]] = []
    prof_values: list[dict[str, np.ndarray]] = []
    prof_inv: list[np.ndarray] = []
    class_profile: dict[str, int] = {}
    for cname in classes:
        vals = np.asarray(factors[cname], dtype=np.float64)[free_pos]
        lv, inv = np.unique(vals, return_inverse=True)
        inv = inv.reshape(-1).astype(np.int64)
        pkey = inv.tobytes()
        p = prof_key.get(pkey)
        if p is None:
            p = prof_key[pkey] = len(prof_classes)
            prof_classes.append([])
            prof_values.append({})
            prof_inv.append(inv)
        prof_classes[p].append(cname)
        lv.setflags(write=False)
        prof_values[p][cname] = lv
        class_profile[cname] = p
    profiles = tuple(Profile(tuple(cs), dict(vs)) for cs, vs in zip(prof_classes, prof_values, strict=True))
    nprof = len(profiles)
    nlev = [p.num_levels for p in profiles]

    # ---- GPU types and free counts per (server, type), (rack, type), type
    if nprof:
        type_levels, gt = np.unique(np.column_stack(prof_inv), axis=0, return_inverse=True)
        gt = gt.reshape(-1).astype(np.int64)
    else:
        type_levels, gt = np.zeros((1 if nfree else 0, 0), dtype=np.int64), np.zeros(nfree, dtype=np.int64)
    type_levels = type_levels.astype(np.int64)
    ntypes = int(type_levels.shape[0])
    gpu_type = np.full(cl.num_gpus, -1, dtype=np.int64)
    gpu_type[free_pos] = gt
    S = cl.num_servers
    racked = cl.racked
    R = len(cl.rack_ids)
    rack_of_server = cl.rack_of_server
    cnt = np.zeros((S, ntypes), dtype=np.int64)
    np.add.at(cnt, (cl.server_of[free_pos], gt), 1)
    cntr = np.zeros((R, ntypes), dtype=np.int64)
    if racked:
        np.add.at(cntr, rack_of_server, cnt)
    tot = cnt.sum(axis=0)
    server_free = cnt.sum(axis=1)

    # per profile: counts per level and cumulative (level <= v) counts, per server / rack / cluster
    lev_s, cum_s, lev_r, cum_r, lev_c, cum_c = [], [], [], [], [], []
    for p in range(nprof):
        onehot = (type_levels[:, p][:, None] == np.arange(nlev[p])[None, :]).astype(np.int64)
        ls = cnt @ onehot
        lev_s.append(ls)
        cum_s.append(np.cumsum(ls, axis=1))
        lr = cntr @ onehot
        lev_r.append(lr)
        cum_r.append(np.cumsum(lr, axis=1))
        lc = tot @ onehot
        lev_c.append(lc)
        cum_c.append(np.cumsum(lc))

    # ---- job types
    tkey: dict[tuple[Any, ...], int] = {}
    tjobs: list[list[int]] = []
    tinfo: list[tuple[str, int, tuple[float, float, float]]] = []
    for i in adm:
        j = instance.jobs[i]
        key = (j.perfclass, int(j.demand), locs[i])
        t = tkey.get(key)
        if t is None:
            t = tkey[key] = len(tjobs)
            tjobs.append([])
            tinfo.append(key)  # type: ignore[arg-type]
        tjobs[t].append(i)
    types = tuple(
        JobType(c, d, loc, class_profile[c], tuple(js)) for (c, d, loc), js in zip(tinfo, tjobs, strict=True)
    )

    b = _Builder()
    # ---- slot variables x / y / z
    for t, jt in enumerate(types):
        p, d, n_t = jt.profile, jt.demand, jt.count
        lnv = np.log(profiles[p].values[jt.perfclass])
        lnl = np.log(np.asarray(jt.locality, dtype=np.float64))
        # x: within one server; level v present on the server and >= d GPUs of level <= v
        m = (cum_s[p] >= d) & (lev_s[p] > 0)
        v_i, s_i = np.nonzero(m.T)
        ub = np.minimum(cum_s[p][s_i, v_i] // d, n_t)
        names = [f"x_t{t}_v{v}_s{s}" for v, s in zip(v_i.tolist(), s_i.tolist(), strict=True)]
        b.add_cols(names, cost=d * (lnv[v_i] + lnl[Level.SERVER]), lo=0, hi=ub, integer=True,
                         kind=KIND_X, type=t, level=v_i, node=s_i)
        if d < 2:
            continue
        # y: within one rack, across >= 2 servers holding compatible GPUs
        if racked:
            nserv = np.zeros((R, nlev[p]), dtype=np.int64)
            np.add.at(nserv, rack_of_server, (cum_s[p] > 0).astype(np.int64))
            m = (cum_r[p] >= d) & (lev_r[p] > 0) & (nserv >= 2)
            v_i, r_i = np.nonzero(m.T)
            ub = np.minimum(cum_r[p][r_i, v_i] // d, n_t)
            names = [f"y_t{t}_v{v}_r{r}" for v, r in zip(v_i.tolist(), r_i.tolist(), strict=True)]
            b.add_cols(names, cost=d * (lnv[v_i] + lnl[Level.RACK]), lo=0, hi=ub, integer=True,
                             kind=KIND_Y, type=t, level=v_i, node=r_i)
            spread = (cum_r[p] > 0).sum(axis=0)
        else:
            spread = (cum_s[p] > 0).sum(axis=0)
        # z: across the cluster (servers of a flat cluster, racks of a racked one)
        m = (cum_c[p] >= d) & (lev_c[p] > 0) & (spread >= 2)
        v_i = np.flatnonzero(m)
        ub = np.minimum(cum_c[p][v_i] // d, n_t)
        names = [f"z_t{t}_v{v}" for v in v_i.tolist()]
        b.add_cols(names, cost=d * (lnv[v_i] + lnl[Level.CLUSTER]), lo=0, hi=ub, integer=True,
                         kind=KIND_Z, type=t, level=v_i, node=-1)

    # the slot variables are the first columns; their metadata sits in the builder
    s_idx = np.arange(b.ncol, dtype=np.int64)
    s_kind, s_t, s_v, s_node = (b.meta(k) for k in ("kind", "type", "level", "node"))
    s_p = np.asarray([jt.profile for jt in types], dtype=np.int64)[s_t]
    s_d = np.asarray([jt.demand for jt in types], dtype=np.int64)[s_t]

    # ---- keep variables (restart_cost > 0 only)
    offset = 0.0
    keep_idx: list[int] = []
    keep_t: list[int] = []
    keep_pos: list[np.ndarray] = []
    if rc > 0:
        job_type = {i: t for t, jt in enumerate(types) for i in jt.jobs}
        for i in adm:
            job = instance.jobs[i]
            if job.placement is None:
                continue
            offset += rc * job.demand
            pos = _keep_positions(instance, i)
            if pos is None:
                continue
            slow = job_slowdown_pos(cl, np.asarray(factors[job.perfclass]), job, pos)
            cost = job.demand * math.log(slow) - rc * job.demand
            idx = b.add_cols([f"k_j{i}"], cost=cost, lo=0, hi=1, integer=True, kind=KIND_KEEP,
                             type=job_type[i], job=i)
            keep_idx.append(int(idx[0]))
            keep_t.append(job_type[i])
            keep_pos.append(pos)

    # ---- pools and flows
    if s_idx.size:
        pool_keys = np.column_stack([s_kind, s_p, s_v, s_node])
        pools, slot_pool = np.unique(pool_keys, axis=0, return_inverse=True)
        slot_pool = slot_pool.reshape(-1)
    else:
        pools, slot_pool = np.zeros((0, 4), dtype=np.int64), np.zeros(0, dtype=np.int64)
    pk, pp, pv, pn = (pools[:, k].astype(np.int64) for k in range(4))
    npools = int(pk.size)
    # availability per pool node: rows [servers | racks | cluster] x GPU type
    avail = np.vstack([cnt, cntr, tot[None, :]])
    node_row = np.where(pk == KIND_X, pn, np.where(pk == KIND_Y, S + pn, S + R))
    compat = type_levels.T[pp] <= pv[:, None] if nprof else np.zeros((npools, ntypes), dtype=bool)
    fm = compat & (avail[node_row] > 0)
    f_pool, f_g = np.nonzero(fm)
    f_kind = pk[f_pool]
    f_node = pn[f_pool]
    tag = [_POOL_TAG[k] + (str(n) if k != KIND_Z else "") for k, n in zip(pk.tolist(), pn.tolist(), strict=True)]
    f_names = [f"f_{tag[q]}_p{pp[q]}_v{pv[q]}_g{g}" for q, g in zip(f_pool.tolist(), f_g.tolist(), strict=True)]
    f_idx = b.add_cols(f_names, cost=0.0, lo=0, hi=avail[node_row[f_pool], f_g], integer=False,
                       kind=KIND_FLOW, pool=f_pool, gtype=f_g, level=pv[f_pool], node=f_node)

    # ---- rows: one per job type
    nt = len(types)
    r_parts = [s_t, np.asarray(keep_t, dtype=np.int64)]
    c_parts = [s_idx, np.asarray(keep_idx, dtype=np.int64)]
    b.add_rows([f"n_t{t}" for t in range(nt)], [jt.count for jt in types], [jt.count for jt in types],
               np.concatenate(r_parts), np.concatenate(c_parts), np.ones(sum(x.size for x in c_parts)))

    # ---- rows: pool balance  Σ_g f[pool, g] − Σ_t d_t slot = 0
    b.add_rows(
        [f"bal_{tag[q]}_p{pp[q]}_v{pv[q]}" for q in range(npools)], 0.0, 0.0,
        np.concatenate([f_pool, slot_pool]), np.concatenate([f_idx, s_idx]),
        np.concatenate([np.ones(f_idx.size), -s_d.astype(np.float64)]),
    )

    # ---- rows: laminar capacity per (server, g), (rack, g), (g)
    k_cols: list[np.ndarray] = []
    k_cells: list[np.ndarray] = []
    for kidx, pos in zip(keep_idx, keep_pos, strict=True):
        k_cols.append(np.full(pos.size, kidx))
        k_cells.append(cl.server_of[pos] * ntypes + gpu_type[pos])
    kc = np.concatenate(k_cols).astype(np.int64) if k_cols else np.zeros(0, dtype=np.int64)
    kcell = np.concatenate(k_cells).astype(np.int64) if k_cells else np.zeros(0, dtype=np.int64)
    # server level: every cell (s, g)
    xf = f_kind == KIND_X
    cell_of_f = f_node * ntypes + f_g
    rows = np.concatenate([cell_of_f[xf], kcell])
    cols = np.concatenate([f_idx[xf], kc])
    cells = np.flatnonzero(cnt.ravel() > 0)
    cell_row = np.full(S * ntypes, -1, dtype=np.int64)
    cell_row[cells] = np.arange(cells.size)
    sel = cell_row[rows] >= 0
    b.add_le_rows([f"cap_s{c // ntypes}_g{c % ntypes}" for c in cells.tolist()], cnt.ravel()[cells],
                  cell_row[rows[sel]], cols[sel], np.ones(int(sel.sum())))
    # rack level: only (r, g) holding rack-pool flows; the rest is implied by the server rows
    if racked:
        yf = f_kind == KIND_Y
        rcells = np.unique(f_node[yf] * ntypes + f_g[yf])
        rrow = np.full(R * ntypes, -1, dtype=np.int64)
        rrow[rcells] = np.arange(rcells.size)
        srv_rack_cell = rack_of_server[f_node[xf]] * ntypes + f_g[xf]
        k_rack_cell = rack_of_server[kcell // ntypes] * ntypes + kcell % ntypes if kcell.size else kcell
        rows = np.concatenate([srv_rack_cell, f_node[yf] * ntypes + f_g[yf], k_rack_cell])
        cols = np.concatenate([f_idx[xf], f_idx[yf], kc])
        sel = rrow[rows] >= 0
        b.add_le_rows([f"cap_r{c // ntypes}_g{c % ntypes}" for c in rcells.tolist()], cntr.ravel()[rcells],
                      rrow[rows[sel]], cols[sel], np.ones(int(sel.sum())))
    # cluster level: only GPU types holding cluster-pool flows
    zf = f_kind == KIND_Z
    gs = np.unique(f_g[zf])
    grow = np.full(ntypes, -1, dtype=np.int64)
    grow[gs] = np.arange(gs.size)
    rows = np.concatenate([f_g, kcell % ntypes if kcell.size else kcell])
    cols = np.concatenate([f_idx, kc])
    sel = grow[rows] >= 0
    b.add_le_rows([f"cap_g{g}" for g in gs.tolist()], tot[gs], grow[rows[sel]], cols[sel], np.ones(int(sel.sum())))

    # ---- rows: two running jobs cannot both keep a shared GPU
    if keep_pos:
        allpos = np.concatenate(keep_pos)
        uniq, counts = np.unique(allpos, return_counts=True)
        shared = uniq[counts > 1]
        if shared.size:
            srow = {int(g): k for k, g in enumerate(shared.tolist())}
            rr, cc = [], []
            for kidx, pos in zip(keep_idx, keep_pos, strict=True):
                for g in pos.tolist():
                    if g in srow:
                        rr.append(srow[g])
                        cc.append(kidx)
            b.add_le_rows([f"keep_gpu{int(cl.gpu_ids[g])}" for g in shared.tolist()], np.ones(shared.size),
                          np.asarray(rr), np.asarray(cc), np.ones(len(rr)))

    # ---- rows: Chvátal–Gomory packing cuts on servers
    if cuts:
        _add_server_cuts(b, nprof, nlev, lev_s, cum_s, server_free, s_kind, s_p, s_v, s_node, s_idx, s_d)

    parts = b.finish({"pool": (s_idx, slot_pool)})
    return Formulation(
        obj_offset=offset,
        instance=instance,
        factors=factors,
        admitted=adm,
        total_demand=total,
        types=types,
        profiles=profiles,
        gpu_type=_ro(gpu_type),
        type_levels=_ro(type_levels),
        pool_kind=_ro(pk),
        pool_profile=_ro(pp),
        pool_level=_ro(pv),
        pool_node=_ro(pn),
        **parts,
    )


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def _add_server_cuts(
    b: _Builder,
    nprof: int,
    nlev: list[int],
    lev_s: list[np.ndarray],
    cum_s: list[np.ndarray],
    server_free: np.ndarray,
    s_kind: np.ndarray,
    s_p: np.ndarray,
    s_v: np.ndarray,
    s_node: np.ndarray,
    s_idx: np.ndarray,
    s_d: np.ndarray,
) -> None:
    """Chvátal–Gomory cuts ``Σ ⌊d_t/k⌋ x ≤ ⌊cap/k⌋`` on each server.

    The jobs counted by ``x[t, v', s]`` (profile p, v' ≤ v) use disjoint GPUs of server s with
    level ≤ v, so ``Σ d_t x ≤ cum_p(s, v)``; dividing by k and rounding down both sides is valid
    for integer x.  Rows are only added when ``cap`` is not a multiple of ``k`` (otherwise the
    cut is implied by the capacity rows) and when the column bounds do not imply them.  A second
    family uses all profiles together with the server's free GPU count.
    """
    xs = s_kind == KIND_X
    if not xs.any():
        return
    x_p, x_v, x_s, x_idx, x_d = s_p[xs], s_v[xs], s_node[xs], s_idx[xs], s_d[xs]
    S = server_free.size
    for p in range(nprof):
        mp = x_p == p
        if not mp.any():
            continue
        L = nlev[p]
        kmax = int(x_d[mp].max())
        for k in range(2, kmax + 1):
            w = x_d // k
            use = mp & (w > 0)
            if not use.any():
                continue
            cap = cum_s[p]
            cand = (lev_s[p] > 0) & (cap >= k) & (cap % k != 0)
            if not cand.any():
                continue
            cs, cv = np.nonzero(cand)
            cid = np.full((S, L), -1, dtype=np.int64)
            cid[cs, cv] = np.arange(cs.size)
            rr, cc, vv = [], [], []
            u_s, u_v, u_idx, u_w = x_s[use], x_v[use], x_idx[use], w[use]
            for v in range(L):
                m = u_v <= v
                rid = cid[u_s[m], v]
                ok = rid >= 0
                rr.append(rid[ok])
                cc.append(u_idx[m][ok])
                vv.append(u_w[m][ok].astype(np.float64))
            names = [f"cg_s{s}_p{p}_v{v}_k{k}" for s, v in zip(cs.tolist(), cv.tolist(), strict=True)]
            b.add_le_rows(names, cap[cs, cv] // k, np.concatenate(rr), np.concatenate(cc), np.concatenate(vv))
    if nprof < 2:
        return
    kmax = int(x_d.max())
    for k in range(2, kmax + 1):
        w = x_d // k
        use = w > 0
        cand = (server_free >= k) & (server_free % k != 0)
        if not use.any() or not cand.any():
            continue
        cs = np.flatnonzero(cand)
        sid = np.full(S, -1, dtype=np.int64)
        sid[cs] = np.arange(cs.size)
        rid = sid[x_s[use]]
        ok = rid >= 0
        b.add_le_rows([f"cg_s{s}_k{k}" for s in cs.tolist()], server_free[cs] // k, rid[ok], x_idx[use][ok],
                      w[use][ok].astype(np.float64))
