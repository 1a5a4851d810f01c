"""The Sia round program: which configuration (GPU type and count) each job gets this round.

The program (``formulations/sia_round.md``; SIA_MODEL.md B.6), with ``A`` the cost matrix of
:func:`pal_opt.hetero.configs.fairness_costs` (two decimals, ``p < 0``)::

    minimise   Σ_j Σ_k A[j,k] x[j,k] + Σ_r Σ_c A^R[r,c] y[r,c] + λ_n (N − Σ x − Σ y)
    subject to Σ_k x[j,k] ≤ 1, Σ_c y[r,c] ≤ 1                      (one configuration per job)
               Σ_{k of type c} n_k x[·,k] + Σ_r g_r y[r,c] ≤ N_c g_c   (GPUs of each type)
               x[j,k0(j)] = 1 (y[r,c0(r)] = 1) for a job still restarting (pinned)
               x, y binary

It is solved as a sparse MILP by any backend of :mod:`pal_opt.ilp.backends` (HiGHS, CP-SAT,
CBC).  The objective is built in hundredths (:data:`OBJECTIVE_SCALE`): ``A`` has two decimals
and ``λ_n = 1.1``, so every coefficient ``round(100·A) − 100·λ_n`` is an integer and CP-SAT is
exact; :attr:`RoundDecision.objective` is given back in the program's own units.

Columns that cannot be in an optimum are left out: a column with a positive coefficient
(``A > λ_n``: allocating costs more than leaving the job out) and a column with coefficient 0
(``A = λ_n``: a tie with leaving the job out, decided here for leaving it out), unless pinned.
A configuration of a job that another configuration of the same job and GPU type matches or
beats with fewer GPUs is dominated (the totals rows only count GPUs) and left out too, unless
pinned; the optimum value is unchanged.

:func:`solve_round_dp` solves the same program by a dynamic program over the GPUs used per type
(a multiple-choice knapsack): the exact oracle of the tests, usable when the product of the
types' GPU counts is small.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ..errors import BackendError, OptionError
from .configs import FLOOR, ConfigSet, GpuType, enumerate_configs, fairness_costs

if TYPE_CHECKING:
    from ..ilp.program import Program

__all__ = [
    "OBJECTIVE_SCALE",
    "LAMBDA_N",
    "RoundInput",
    "RoundProgram",
    "RoundDecision",
    "build_round_program",
    "solve_round",
    "solve_round_dp",
    "round_objective",
    "synthetic_round",
]

logger = logging.getLogger(__name__)

#: Objective coefficients are built in units of 1/OBJECTIVE_SCALE (two decimals → integers).
OBJECTIVE_SCALE = 100
#: Sia's no-allocation penalty λ_n (the artifact's default).
LAMBDA_N = 1.1
#: Largest number of states :func:`solve_round_dp` accepts.
MAX_DP_STATES = 2_000_000


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
    """

    configs: ConfigSet
    adaptive_costs: np.ndarray
    rigid_costs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    rigid_gpus: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pinned_adaptive: np.ndarray | None = None
    pinned_rigid: np.ndarray | None = None
    lambda_n: float = LAMBDA_N

    def __post_init__(self) -> None:
        na, k = np.shape(self.adaptive_costs)
        ntypes = len(self.configs.types)
        nr = len(self.rigid_gpus)
        if k != len(self.configs):
            raise OptionError(f"adaptive_costs has {k} columns, the cluster {len(self.configs)} configurations")
        if nr and np.shape(self.rigid_costs) != (nr, ntypes):
            raise OptionError(f"rigid_costs must have shape ({nr}, {ntypes}), got {np.shape(self.rigid_costs)}")
        if not math.isfinite(self.lambda_n) or self.lambda_n <= 0:
            raise OptionError(f"lambda_n must be positive and finite, got {self.lambda_n}")
        for name, pins, rows, width in (
            ("pinned_adaptive", self.pinned_adaptive, na, k),
            ("pinned_rigid", self.pinned_rigid, nr, ntypes),
        ):
            if pins is not None and (len(pins) != rows or np.any(np.asarray(pins) >= width)):
                raise OptionError(f"{name} must give one index below {width} (or -1) per job")

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


@dataclass(frozen=True, eq=False)
class RoundProgram:
    """The round program as solver-neutral arrays (``min c·z + obj_offset``), with decoding data.

    Attributes
    ----------
    c, obj_offset, A, row_lo, row_hi, col_lo, col_hi, integrality, var_names, row_names
        The program in units of ``1 / scale``.
    col_job
        Job of each column: adaptive jobs 0..Na-1, then rigid jobs Na..Na+Nr-1.
    col_choice
        Configuration index (adaptive) or type index (rigid) of each column.
    col_gpus, col_type
        GPUs and GPU type of each column.
    scale
        Units per objective unit (:data:`OBJECTIVE_SCALE`).
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
    col_job: np.ndarray
    col_choice: np.ndarray
    col_gpus: np.ndarray
    col_type: np.ndarray
    num_adaptive: int
    num_rigid: int
    scale: int = OBJECTIVE_SCALE

    @property
    def num_vars(self) -> int:
        return int(self.c.size)

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

    def to_program(self) -> Program:
        """The :class:`pal_opt.ilp.program.Program` every backend solves."""
        from ..ilp.program import Program

        return Program.from_arrays(
            c=self.c,
            A=self.A,
            row_lo=self.row_lo,
            row_hi=self.row_hi,
            col_lo=self.col_lo,
            col_hi=self.col_hi,
            integrality=self.integrality,
            obj_offset=self.obj_offset,
            var_names=self.var_names,
            row_names=self.row_names,
        )

    def subset(self, keep: np.ndarray) -> RoundProgram:
        """The program restricted to the columns in mask ``keep`` (rows unchanged)."""
        idx = np.flatnonzero(keep)
        return RoundProgram(
            c=self.c[idx], obj_offset=self.obj_offset, A=self.A[:, idx].tocsr(), row_lo=self.row_lo,
            row_hi=self.row_hi, col_lo=self.col_lo[idx], col_hi=self.col_hi[idx],
            integrality=self.integrality[idx], var_names=tuple(self.var_names[i] for i in idx.tolist()),
            row_names=self.row_names, col_job=self.col_job[idx], col_choice=self.col_choice[idx],
            col_gpus=self.col_gpus[idx], col_type=self.col_type[idx], num_adaptive=self.num_adaptive,
            num_rigid=self.num_rigid, scale=self.scale,
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


@dataclass(frozen=True)
class RoundDecision:
    """A solved round.

    Attributes
    ----------
    adaptive, rigid
        Chosen configuration per adaptive job, type per rigid job (-1: no allocation).
    objective
        The program's objective (in the units of ``A``).
    status
        The solver's status (``optimal`` when proven).
    seconds
        Wall time of the solve.
    backend
        Who solved it.
    """

    adaptive: np.ndarray
    rigid: np.ndarray
    objective: float
    status: str
    seconds: float
    backend: str


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
    cap = np.array([t.total_gpus for t in cs.types], dtype=np.int64)
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
    cs = inp.configs
    cols = _candidate_columns(inp, scale, prune)
    n = cols["job"].size
    num_jobs = inp.num_adaptive + inp.num_rigid
    nt = len(cs.types)
    cap = np.array([t.total_gpus for t in cs.types], dtype=np.float64)
    rows = np.concatenate([cols["job"], num_jobs + cols["type"]])
    data = np.concatenate([np.ones(n), cols["gpus"].astype(np.float64)])
    A = sp.csr_matrix((data, (rows, np.tile(np.arange(n), 2))), shape=(num_jobs + nt, n))
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


#: Programs with more columns than this go through :mod:`pal_opt.hetero.bounds` first (all of
#: them: even on the paper's cluster, three rounds in four are then proven without a MIP, and
#: the rest go to the backend as a smaller core).
DECOMPOSE_COLUMNS = 0


def solve_round(
    inp: RoundInput,
    *,
    backend: str | None = "highs",
    time_limit: float | None = None,
    prune: bool = True,
    decompose: bool | None = None,
) -> RoundDecision:
    """Solve one round to proven optimality (unless the time limit stops the backend first).

    With ``decompose`` (default: programs of more than :data:`DECOMPOSE_COLUMNS` columns)
    the LP relaxation, Lagrangian knapsack bounds and knapsack repairs of
    :mod:`pal_opt.hetero.bounds` come first: when the repaired solution meets the best bound it
    is returned (status ``optimal``, backend ``bounds``); otherwise the columns that cannot beat
    it are dropped and ``backend`` (a :mod:`pal_opt.ilp.backends` backend) solves the rest from
    it.  Without it the whole program goes to the backend.

    Raises
    ------
    BackendError
        The solver found no solution (the program always has one: nothing but the pinned jobs).
    """
    from .bounds import core_program, relax, solve_large_round

    t0 = time.perf_counter()
    prog = build_round_program(inp, prune=prune)
    if decompose is None:
        decompose = prog.num_vars > DECOMPOSE_COLUMNS
    relaxation = relax(prog) if decompose else None
    if relaxation is None:
        values, status, name = _solve_backend(prog, backend, time_limit, None)
        assert values is not None
        return _decision(prog, values, status, name, t0)
    found = solve_large_round(prog, relaxation)
    if found.proven:
        return _decision(prog, found.values, "optimal", "bounds", t0)
    # any better solution costs at most z − 1 (integral objective): search only there
    z = float(prog.c @ found.values) + prog.obj_offset
    core, keep = core_program(prog, relaxation, z - (1.0 if prog.integral_objective() else 0.0))
    values, status, name = _solve_backend(core, backend, time_limit, None)
    best = found.values
    if values is None:  # no solution below the incumbent: it is optimal
        status = "optimal"
    else:
        full = np.zeros(prog.num_vars)
        full[keep] = values
        if float(prog.c @ full) < float(prog.c @ best):
            best = full
    return _decision(prog, best, status, name, t0)


def _decision(prog: RoundProgram, values: np.ndarray, status: str, name: str, t0: float) -> RoundDecision:
    adaptive, rigid = prog.decode(values)
    obj = float(prog.c @ np.rint(values) + prog.obj_offset) / prog.scale
    return RoundDecision(adaptive, rigid, obj, status, time.perf_counter() - t0, name)


def _solve_backend(
    prog: RoundProgram, backend: str | None, time_limit: float | None, start: np.ndarray | None
) -> tuple[np.ndarray | None, str, str]:
    """(values, status, backend name) from a :mod:`pal_opt.ilp.backends` backend; values None
    when the program is infeasible (status ``infeasible``).

    Raises
    ------
    BackendError
        The solver stopped without a solution or a proof of infeasibility.
    """
    from ..ilp.backends import SolveOptions, get_backend

    cls = get_backend(backend)
    sol = cls().solve(prog.to_program(), SolveOptions(time_limit=time_limit, abs_gap=0.0, threads=1), start=start)
    if sol.values is None:
        if str(sol.status) == "infeasible":
            return None, "infeasible", cls.name
        raise BackendError(f"{cls.name} found no solution of the Sia round program ({sol.status}: {sol.message})")
    return np.rint(sol.values), str(sol.status), cls.name


def _dp_options(prog: RoundProgram, job: int) -> list[tuple[float, int, int, int]]:
    """(scaled cost, type, GPUs, column) of each choice of a job; column -1 is "nothing"."""
    sel = np.flatnonzero(prog.col_job == job).tolist()
    opts = [(float(prog.c[i]), int(prog.col_type[i]), int(prog.col_gpus[i]), i) for i in sel]
    if any(prog.col_lo[i] >= 0.5 for i in sel):
        return opts  # a pinned job has its pinned column only
    return [(0.0, -1, 0, -1), *opts]


def _dp_step(best: np.ndarray, opts: list[tuple[float, int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """One job added to the table: the new best table and the option chosen per state."""
    shape = best.shape
    new = np.full(shape, np.inf)
    arg = np.full(shape, -1, dtype=np.int64)
    for o, (cost, t, g, _) in enumerate(opts):
        cand = np.full(shape, np.inf)
        if t < 0:
            cand[...] = best
        else:
            src = [slice(None)] * best.ndim
            dst = [slice(None)] * best.ndim
            src[t] = slice(0, shape[t] - g)
            dst[t] = slice(g, shape[t])
            cand[tuple(dst)] = best[tuple(src)]
        cand += cost
        better = cand < new
        new[better] = cand[better]
        arg[better] = o
    return new, arg


def solve_round_dp(inp: RoundInput, *, prune: bool = True) -> RoundDecision:
    """Solve one round exactly by dynamic programming over the GPUs used per type.

    The state is the GPUs used of each type (``Π (N_c g_c + 1)`` states, at most
    :data:`MAX_DP_STATES`); each job adds one of its columns or nothing.

    Raises
    ------
    OptionError
        Too many states.
    """
    t0 = time.perf_counter()
    prog = build_round_program(inp, prune=prune)
    shape = tuple(t.total_gpus + 1 for t in inp.configs.types)
    if math.prod(shape) > MAX_DP_STATES:
        raise OptionError(f"the dynamic program needs {math.prod(shape):,} states (limit {MAX_DP_STATES:,})")
    num_jobs = inp.num_adaptive + inp.num_rigid
    best = np.full(shape, np.inf)
    best[(0,) * len(shape)] = 0.0
    options = [_dp_options(prog, j) for j in range(num_jobs)]
    picks = []
    for opts in options:
        best, arg = _dp_step(best, opts)
        picks.append(arg)
    state = list(np.unravel_index(int(np.argmin(best)), shape))
    value = float(best[tuple(state)])
    values = np.zeros(prog.num_vars)
    for j in range(num_jobs - 1, -1, -1):
        _, t, g, col = options[j][int(picks[j][tuple(state)])]
        if col >= 0:
            values[col] = 1.0
            state[t] -= g
    adaptive, rigid = prog.decode(values)
    obj = (value + prog.obj_offset) / prog.scale
    return RoundDecision(adaptive, rigid, obj, "optimal", time.perf_counter() - t0, "dp")


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
