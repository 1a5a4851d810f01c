"""The Sia round program as data: its input, and the sparse MILP every backend solves.

The program (``formulations/sia_round.md``; SIA_MODEL.md B.6), with ``A`` the cost matrix of
:func:`pal_opt.hetero.configs.fairness_costs` (two decimals, ``p < 0``)::

    minimise   Σ_j Σ_k A[j,k] x[j,k] + Σ_r Σ_c A^R[r,c] y[r,c] + λ_n (N − Σ x − Σ y)
    subject to Σ_k x[j,k] ≤ 1, Σ_c y[r,c] ≤ 1                      (one configuration per job)
               Σ_{k of type c} n_k x[·,k] + Σ_r g_r y[r,c] ≤ N_c g_c   (GPUs of each type)
               x[j,k0(j)] = 1 (y[r,c0(r)] = 1) for a job still restarting (pinned)
               x, y binary

The objective is built in hundredths (:data:`OBJECTIVE_SCALE`): ``A`` has two decimals and
``λ_n = 1.1``, so every coefficient ``round(100·A) − 100·λ_n`` is an integer and CP-SAT is exact.

Columns that cannot be in an optimum are left out: a column with a positive coefficient
(``A > λ_n``: allocating costs more than leaving the job out) and a column with coefficient 0
(``A = λ_n``: a tie with leaving the job out, decided here for leaving it out), unless pinned.
A configuration of a job that another configuration of the same job and GPU type matches or
beats with fewer GPUs is dominated (the totals rows only count GPUs) and left out too, unless
pinned; the optimum value is unchanged.  :mod:`pal_opt.hetero.round` solves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from ..errors import OptionError
from ..ilp.program import Program
from ..options import check_count, check_finite, number_array, require_type
from .configs import CONFIGS_HINT, FLOOR, ConfigSet, GpuType, enumerate_configs, fairness_costs

__all__ = [
    "OBJECTIVE_SCALE",
    "LAMBDA_N",
    "RoundInput",
    "RoundProgram",
    "type_gpus",
    "build_round_program",
    "round_objective",
    "synthetic_round",
]

#: Objective coefficients are built in units of 1/OBJECTIVE_SCALE (two decimals → integers).
OBJECTIVE_SCALE = 100
#: Sia's no-allocation penalty λ_n (the artifact's default).
LAMBDA_N = 1.1


def type_gpus(configs: ConfigSet, capacity: np.ndarray | None) -> np.ndarray:
    """GPUs each type has for a round: ``capacity`` (those in service), or every GPU; int array."""
    if capacity is not None:
        return np.asarray(capacity, dtype=np.int64)
    return np.array([t.total_gpus for t in configs.types], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class RoundInput:
    """One round's data.

    Attributes
    ----------
    configs
        The configurations (columns of ``adaptive_costs``) and the cluster's GPU types.
    adaptive_costs
        (jobs, configurations) float array: ``A[j, k]`` of the adaptive (and strong-scaling) jobs.
    rigid_costs
        (rigid jobs, types) float array: ``A^R[r, c]``.
    rigid_gpus
        GPUs each rigid job uses on any type (int array).
    pinned_adaptive, pinned_rigid
        Per job the configuration (type for rigid jobs) it must keep, or -1.
    lambda_n
        The no-allocation penalty.
    capacity
        GPUs in service per type (int array), or None: every GPU of every type.  GPUs out of
        service (failed, drained: :class:`pal_opt.hetero.scheduler.TypedScheduler.fail`) are
        left out of it.
    """

    configs: ConfigSet
    adaptive_costs: np.ndarray
    rigid_costs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    rigid_gpus: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pinned_adaptive: np.ndarray | None = None
    pinned_rigid: np.ndarray | None = None
    lambda_n: float = LAMBDA_N
    capacity: np.ndarray | None = None

    def type_gpus(self) -> np.ndarray:
        """GPUs each type has for this round (:attr:`capacity`, or every GPU), int array."""
        return type_gpus(self.configs, self.capacity)

    def __post_init__(self) -> None:
        require_type(self.configs, ConfigSet, "configs", CONFIGS_HINT)
        costs = number_array(self.adaptive_costs, "adaptive_costs")
        if costs.ndim != 2:
            raise OptionError(f"adaptive_costs must be a jobs x configurations array, got shape {costs.shape}")
        na, k = costs.shape
        ntypes = len(self.configs.types)
        nr = len(number_array(self.rigid_gpus, "rigid_gpus", "iu"))
        number_array(self.rigid_costs, "rigid_costs")
        for name in ("pinned_adaptive", "pinned_rigid"):
            if getattr(self, name) is not None:
                number_array(getattr(self, name), name, "iu")
        check_finite(self.lambda_n, "lambda_n", strict=True)
        if k != len(self.configs):
            raise OptionError(f"adaptive_costs has {k} columns, the cluster {len(self.configs)} configurations")
        if nr and np.shape(self.rigid_costs) != (nr, ntypes):
            raise OptionError(f"rigid_costs must have shape ({nr}, {ntypes}), got {np.shape(self.rigid_costs)}")
        for name, pins, rows, width in (
            ("pinned_adaptive", self.pinned_adaptive, na, k),
            ("pinned_rigid", self.pinned_rigid, nr, ntypes),
        ):
            if pins is not None and (len(pins) != rows or np.any(np.asarray(pins) >= width)):
                raise OptionError(f"{name} must give one index below {width} (or -1) per job")
        if self.capacity is not None:
            cap = np.asarray(self.capacity)
            totals = [t.total_gpus for t in self.configs.types]
            if cap.shape != (ntypes,) or np.any(cap < 0) or np.any(cap > totals):
                raise OptionError(f"capacity must give 0..GPUs of each of the {ntypes} types, got {cap.tolist()}")

    @property
    def num_adaptive(self) -> int:
        return int(np.shape(self.adaptive_costs)[0])

    @property
    def num_rigid(self) -> int:
        return len(self.rigid_gpus)

    def pins(self) -> tuple[np.ndarray, np.ndarray]:
        """(pinned_adaptive, pinned_rigid) with -1 where a job is free."""
        pa = np.full(self.num_adaptive, -1, dtype=np.int64) if self.pinned_adaptive is None else np.asarray(self.pinned_adaptive, dtype=np.int64)
        pr = np.full(self.num_rigid, -1, dtype=np.int64) if self.pinned_rigid is None else np.asarray(self.pinned_rigid, dtype=np.int64)
        return pa, pr


@dataclass(frozen=True, eq=False, kw_only=True, repr=False)  # Program.__repr__: its size
class RoundProgram(Program):
    """The round program: a :class:`~pal_opt.ilp.program.Program` (``min c·z + obj_offset``, in
    units of ``1 / scale``) that every backend solves, plus what decoding needs.

    Attributes
    ----------
    col_job
        Job of each column: adaptive jobs 0..Na-1, then rigid jobs Na..Na+Nr-1.
    col_choice
        Configuration index (adaptive) or type index (rigid) of each column.
    col_gpus, col_type
        GPUs and GPU type of each column.
    num_adaptive, num_rigid
        Jobs of each block.
    scale
        Units per objective unit (:data:`OBJECTIVE_SCALE`).
    """

    col_job: np.ndarray
    col_choice: np.ndarray
    col_gpus: np.ndarray
    col_type: np.ndarray
    num_adaptive: int
    num_rigid: int
    scale: int = OBJECTIVE_SCALE

    @property
    def num_types(self) -> int:
        """GPU types (the last rows are their GPU totals)."""
        return int(self.row_hi.size) - self.num_adaptive - self.num_rigid

    @property
    def type_capacity(self) -> np.ndarray:
        """GPUs of each type."""
        return self.row_hi[self.row_hi.size - self.num_types :]

    def integral_objective(self) -> bool:
        """Whether every objective value is an integer (in program units)."""
        return bool(np.all(self.c == np.rint(self.c)) and self.obj_offset == round(self.obj_offset))

    def subset(self, keep: np.ndarray) -> RoundProgram:
        """The program restricted to the columns in mask ``keep`` (rows unchanged)."""
        idx = np.flatnonzero(keep)
        return replace(
            self, c=self.c[idx], A=self.A[:, idx].tocsr(), col_lo=self.col_lo[idx], col_hi=self.col_hi[idx],
            integrality=self.integrality[idx], var_names=tuple(self.var_names[i] for i in idx.tolist()),
            col_job=self.col_job[idx], col_choice=self.col_choice[idx], col_gpus=self.col_gpus[idx],
            col_type=self.col_type[idx],
        )

    def decode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Chosen configuration per adaptive job and type per rigid job (-1: none)."""
        chosen = np.flatnonzero(np.asarray(values) >= 0.5)
        adaptive = np.full(self.num_adaptive, -1, dtype=np.int64)
        rigid = np.full(self.num_rigid, -1, dtype=np.int64)
        for col in chosen.tolist():
            j = int(self.col_job[col])
            if j < self.num_adaptive:
                adaptive[j] = self.col_choice[col]
            else:
                rigid[j - self.num_adaptive] = self.col_choice[col]
        return adaptive, rigid


def _scaled_costs(costs: np.ndarray, lambda_n: float, scale: int) -> np.ndarray:
    """``round(scale·A) − scale·λ_n`` (A is stored in float32 with two decimals: round it)."""
    lam = scale * lambda_n
    lam = round(lam) if abs(lam - round(lam)) < 1e-9 else lam
    return np.rint(np.asarray(costs, dtype=np.float64) * scale) - lam


def _dominated(cost: np.ndarray, gpus: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Mask of entries matched or beaten by an entry of the same group with fewer GPUs.

    GPU counts are distinct within a group (one configuration per count and type).  Groups are
    visited in decreasing order, each offset by ``group · big``, so one running minimum over the
    whole sequence never crosses into the next group.
    """
    if cost.size == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((gpus, -groups))
    g = groups[order].astype(np.float64)
    big = float(np.ptp(cost)) + 1.0
    v = cost[order] + g * big
    prev = np.concatenate([[np.inf], np.minimum.accumulate(v)[:-1]])
    first = np.concatenate([[True], g[1:] != g[:-1]])
    out = np.zeros(cost.size, dtype=bool)
    out[order] = ~first & (v >= prev)
    return out


def _candidate_columns(inp: RoundInput, scale: int, prune: bool) -> dict[str, np.ndarray]:
    """Per candidate column: job, choice, GPUs, type, scaled cost and pinned flag."""
    cs = inp.configs
    na, k = inp.num_adaptive, len(cs)
    nt = len(cs.types)
    pa, pr = inp.pins()
    job = np.concatenate([np.repeat(np.arange(na), k), na + np.repeat(np.arange(inp.num_rigid), nt)])
    choice = np.concatenate([np.tile(np.arange(k), na), np.tile(np.arange(nt), inp.num_rigid)])
    gpus = np.concatenate([np.tile(cs.num_gpus, na), np.repeat(np.asarray(inp.rigid_gpus, dtype=np.int64), nt)])
    gtype = np.concatenate([np.tile(cs.type_index, na), np.tile(np.arange(nt), inp.num_rigid)])
    cost = np.concatenate([
        _scaled_costs(np.asarray(inp.adaptive_costs).reshape(-1), inp.lambda_n, scale),
        _scaled_costs(np.asarray(inp.rigid_costs).reshape(-1), inp.lambda_n, scale),
    ])
    pin_of_job = np.concatenate([pa, pr])
    pinned = pin_of_job[job] == choice
    free_job = pin_of_job[job] < 0  # a pinned job keeps only its pinned column
    cap = inp.type_gpus()
    keep = (gpus <= cap[gtype]) & np.isfinite(cost) & free_job
    if prune:
        keep &= cost < 0
        dom = np.zeros(cost.size, dtype=bool)
        sel = np.flatnonzero(keep)
        dom[sel] = _dominated(cost[sel], gpus[sel], job[sel] * nt + gtype[sel])
        keep &= ~dom
    keep |= pinned
    return {"job": job[keep], "choice": choice[keep], "gpus": gpus[keep], "type": gtype[keep],
            "cost": cost[keep], "pinned": pinned[keep]}


def build_round_program(inp: RoundInput, *, scale: int = OBJECTIVE_SCALE, prune: bool = True) -> RoundProgram:
    """The sparse MILP of ``inp`` (module docstring); ``prune=False`` keeps every column.

    Raises
    ------
    OptionError
        A pinned configuration that needs more GPUs than its type has.
    """
    require_type(inp, RoundInput, "inp", " (a RoundInput)")
    check_count(scale, "scale")
    require_type(prune, bool, "prune")
    cs = inp.configs
    cols = _candidate_columns(inp, scale, prune)
    n = cols["job"].size
    num_jobs = inp.num_adaptive + inp.num_rigid
    nt = len(cs.types)
    cap = inp.type_gpus().astype(np.float64)
    rows = np.concatenate([cols["job"], num_jobs + cols["type"]])
    data = np.concatenate([np.ones(n), cols["gpus"].astype(np.float64)])
    A = sp.csr_matrix((data, (rows, np.tile(np.arange(n), 2))), shape=(num_jobs + nt, n))
    A.sort_indices()
    col_lo = cols["pinned"].astype(np.float64)
    if np.any(cols["gpus"][cols["pinned"]] > cap[cols["type"][cols["pinned"]]]):
        raise OptionError("a pinned configuration needs more GPUs than its type has")
    names = tuple(
        f"x_{j}_{k}" if j < inp.num_adaptive else f"y_{j - inp.num_adaptive}_{k}"
        for j, k in zip(cols["job"].tolist(), cols["choice"].tolist(), strict=True)
    )
    lam = _scaled_costs(np.zeros(1), inp.lambda_n, scale)[0]
    return RoundProgram(
        c=cols["cost"].astype(np.float64),
        obj_offset=float(-lam * num_jobs),
        A=A,
        row_lo=np.full(num_jobs + nt, -np.inf),
        row_hi=np.concatenate([np.ones(num_jobs), cap]),
        col_lo=col_lo,
        col_hi=np.ones(n),
        integrality=np.ones(n, dtype=bool),
        var_names=names,
        row_names=tuple([f"one_{j}" for j in range(num_jobs)] + [f"gpus_{t.name}" for t in cs.types]),
        col_job=cols["job"],
        col_choice=cols["choice"],
        col_gpus=cols["gpus"],
        col_type=cols["type"],
        num_adaptive=inp.num_adaptive,
        num_rigid=inp.num_rigid,
        scale=scale,
    )


def round_objective(inp: RoundInput, adaptive: Sequence[int], rigid: Sequence[int] = ()) -> float:
    """The objective of a decision (configuration per adaptive job, type per rigid job, -1 none),
    in the units of ``A`` (each cost rounded to two decimals as the program sees it)."""
    scale = OBJECTIVE_SCALE
    lam = _scaled_costs(np.zeros(1), inp.lambda_n, scale)[0]
    total = -lam * (inp.num_adaptive + inp.num_rigid)
    for j, k in enumerate(adaptive):
        if k >= 0:
            total += _scaled_costs(np.asarray([inp.adaptive_costs[j][k]]), inp.lambda_n, scale)[0]
    for r, c in enumerate(rigid):
        if c >= 0:
            total += _scaled_costs(np.asarray([inp.rigid_costs[r][c]]), inp.lambda_n, scale)[0]
    return float(total) / scale


def synthetic_round(cluster: Sequence[GpuType], jobs: int, seed: int = 0) -> RoundInput:
    """A random Sia-style round for tests and benchmarks: per job and type a goodput that grows
    as ``speed · n^α`` up to a GPU cap (floor beyond), normalised to the job's least useful entry,
    then the fairness power (p = −0.5), two-decimal rounding and clip, in float32.

    >>> from pal_opt.hetero.configs import PAPER_CLUSTER
    >>> inp = synthetic_round(PAPER_CLUSTER, 5)
    >>> inp.adaptive_costs.shape, float(inp.adaptive_costs.min()) > 0
    ((5, 19), True)
    """
    rng = np.random.default_rng(seed)
    cs = enumerate_configs(cluster)
    nt = len(cs.types)
    speed = rng.uniform(0.5, 3.0, (jobs, nt))
    alpha = rng.uniform(0.3, 0.95, jobs)
    cap = rng.choice([1, 2, 4, 8, 16, 32, 64], jobs)
    n = cs.num_gpus[None, :].astype(np.float64)
    g = speed[:, cs.type_index] * n ** alpha[:, None]
    g = np.where(n <= cap[:, None], g, FLOOR)
    g = g / np.where(g > FLOOR, g, np.inf).min(axis=1, keepdims=True)
    g[g <= FLOOR] = FLOOR
    return RoundInput(cs, fairness_costs(g.astype(np.float32)))
