"""A Gavel-like policy (OSDI'20) in the Sia simulator: type shares by throughput, no placement.

Gavel's heterogeneity-aware max-min fairness (``formulations/gavel.md``), on the simulator's jobs:

Jobs are rigid
    Every job keeps its workload row's GPU count ``s_j`` and batch (the simulator runs it as a
    rigid job: no adaptive batch, no change of count).  Its throughput ``T[j, k]`` on type ``k``
    is the measured samples/s at that count and batch (:func:`pal_opt.hetero.policy.rigid_throughputs`),
    0 where the type cannot hold the gang or the profile has no value.
Allocation (:func:`gavel_allocation`, a linear program solved by HiGHS)
    A time fraction ``X[j, k]`` per job and type: Σ_k X[j, k] <= 1 and Σ_j s_j X[j, k] <= N_k.
    It maximises the least normalised effective throughput over the jobs,
    ``s_j · Σ_k T[j, k] X[j, k] / T_eq[j]`` with ``T_eq[j] = Σ_k T[j, k] N_k / N`` (the job's
    throughput under an equal time share of every GPU of the cluster; the share's size is the
    same for every job and only scales the optimum), then, at that least value, the sum of the
    normalised throughputs (the second step is ours: it picks one of the max-min optima so
    that the jobs that are not the bottleneck are not left at the minimum).  It is recomputed
    whenever the set of active jobs changes.
Rounds (:meth:`GavelPolicy.allocate`, Gavel's mechanism)
    Gavel's own round (360 s by default, six of the simulator's 60 s rounds): between two
    decisions every job keeps its GPUs.  Per type, ``fraction[j, k]`` = rounds job j ran on k / rounds all jobs ran on k since the
    allocation was last recomputed; priority = X / fraction (X · 1e9 when the fraction is 0, 0
    where X is 0).  Each type's jobs sorted by (priority, deficit, X) descending, the types in
    cluster order one after the other; a job is scheduled on the first entry whose type still
    has ``s_j`` free GPUs, at most once.  At every recomputation each job's deficit on each type
    grows by the time it should have received under the old allocation minus what it received.
Placement (none)
    On its type, a job scheduled again keeps its GPUs if they are still free; the others take
    the first free GPUs in position order (nodes filled in order), largest gangs first.  The
    per-GPU variability factors are never looked at (the simulator still applies them).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BackendError, InstanceError, OptionError
from ..ilp.program import Program
from ..options import check_seconds, number_array
from ..simulate.fields import renamed_argument, warn_renamed
from .configs import GpuType, require_gpu_types
from .gpus import Layout
from .policy import RoundStats, rigid_problem, rigid_throughputs
from .simjob import SimJob

__all__ = ["GavelAllocation", "gavel_allocation", "gavel_program", "GavelPolicy", "gavel_policy", "UNSEEN_PRIORITY", "GAVEL_ROUND"]

#: Priority scale of a job that has not run on a type since the last recomputation (Gavel's).
UNSEEN_PRIORITY = 1e9
#: Gavel's default round, seconds.
GAVEL_ROUND = 360.0
#: Time fractions below this are treated as 0 (solver round-off).
EPS = 1e-7


@dataclass(frozen=True)
class GavelAllocation:
    """The allocation LP's answer: ``x`` (jobs × types time fractions), the max-min value
    ``level`` and each job's normalised effective throughput ``normalised``."""

    x: np.ndarray
    level: float
    normalised: np.ndarray


def _inputs(throughput: Any, scale: Any, workers: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``T``, ``s`` and ``N`` as float arrays, checked."""
    t = number_array(throughput, "throughput", dtype=np.float64)
    s = number_array(scale, "scale", dtype=np.float64)
    n = number_array(workers, "workers", dtype=np.float64)
    _check_inputs(t, s, n)
    return t, s, n


def _check_inputs(throughput: np.ndarray, scale: np.ndarray, workers: np.ndarray) -> None:
    if scale.ndim != 1 or workers.ndim != 1:
        raise OptionError(f"scale and workers must be one number per job and per type, got shapes {scale.shape} and "
                          f"{workers.shape}")
    if throughput.ndim != 2 or throughput.shape != (scale.size, workers.size):
        raise OptionError(f"throughput must be jobs x types {(scale.size, workers.size)}, got {throughput.shape}")
    if not np.all(np.isfinite(throughput)) or np.any(throughput < 0):
        raise OptionError("throughputs must be finite and >= 0")
    if np.any(scale < 1) or np.any(workers < 0):
        raise OptionError("scale factors must be >= 1 and worker counts >= 0")
    if np.any((throughput > 0).sum(axis=1) == 0):
        raise OptionError(f"job(s) {np.flatnonzero((throughput > 0).sum(axis=1) == 0).tolist()} run on no type")


def gavel_program(throughput: np.ndarray, scale: Sequence[int] | np.ndarray, workers: Sequence[int] | np.ndarray,
                  level: float | None = None) -> Program:
    """One of the allocation's two linear programs (``formulations/gavel.md``) as a
    :class:`~pal_opt.ilp.program.Program` in minimisation form.

    Columns ``x_{j}_{k}`` (``X[j, k]`` in [0, 1], fixed to 0 where ``T[j, k] = 0``, row-major)
    and ``z`` (the level); rows ``level_{j}`` (``z − s_j Σ_k T[j,k] X[j,k] / T_eq[j] ≤ 0``),
    ``one_{j}`` (``Σ_k X[j,k] ≤ 1``) and ``gpus_{k}`` (``Σ_j s_j X[j,k] ≤ N_k``).  With ``level``
    None it is program 1 (minimise ``−z``); with the level ``z*`` of program 1, program 2
    (``z ≥ z*(1 − 10⁻⁹)``, minimise ``−Σ_j s_j Σ_k T[j,k] X[j,k] / T_eq[j]``).
    :func:`gavel_allocation` solves both; public so that they can be exported
    (:func:`pal_opt.ilp.lpwriter.lp_text`; ``formulations/golden/gavel_level.lp`` and
    ``gavel_spread.lp``).  Arguments as :func:`gavel_allocation`'s (at least one job).
    """
    from scipy import sparse

    t, s, n = _inputs(throughput, scale, workers)
    m, k = t.shape
    if m == 0:
        raise ValueError("gavel_program needs at least one job")
    coef = _normalised(t, s, n)
    nv = m * k
    jj, cc = np.divmod(np.arange(nv), k)
    rows = sparse.csr_matrix(
        (np.concatenate([-coef.ravel(), np.ones(m), np.ones(nv), s[jj]]),
         (np.concatenate([jj, np.arange(m), m + jj, 2 * m + cc]),
          np.concatenate([np.arange(nv), np.full(m, nv), np.arange(nv), np.arange(nv)]))),
        shape=(2 * m + k, nv + 1),
    )
    col_hi = np.r_[np.where(t.ravel() <= 0, 0.0, 1.0), np.inf]
    col_lo = np.zeros(nv + 1)
    if level is not None:
        col_lo[nv] = level * (1 - 1e-9)
    return Program.from_arrays(
        c=np.r_[np.zeros(nv), -1.0] if level is None else np.r_[-coef.ravel(), 0.0],
        A=rows, row_lo=np.full(2 * m + k, -np.inf), row_hi=np.concatenate([np.zeros(m), np.ones(m), n]),
        col_lo=col_lo, col_hi=col_hi, integrality=np.zeros(nv + 1, dtype=bool),
        var_names=[f"x_{j}_{c}" for j, c in zip(jj.tolist(), cc.tolist(), strict=True)] + ["z"],
        row_names=[f"level_{j}" for j in range(m)] + [f"one_{j}" for j in range(m)] + [f"gpus_{c}" for c in range(k)],
    )


def _normalised(t: np.ndarray, s: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``s_j T[j, k] / T_eq[j]``: normalised effective throughput per unit of ``X[j, k]``."""
    equal = t @ (n / n.sum())
    return t * (s / equal)[:, None]


def _linprog(prog: Program) -> Any:
    """SciPy's HiGHS on a :func:`gavel_program`."""
    from scipy.optimize import linprog

    bounds = [(lo, None if math.isinf(hi) else hi) for lo, hi in zip(prog.col_lo.tolist(), prog.col_hi.tolist(), strict=True)]
    return linprog(prog.c, A_ub=prog.A, b_ub=prog.row_hi, bounds=bounds, method="highs")


def gavel_allocation(throughput: np.ndarray, scale: Sequence[int] | np.ndarray, workers: Sequence[int] | np.ndarray) -> GavelAllocation:
    """Gavel's max-min fair time fractions (module docstring), two linear programs on HiGHS
    (:func:`gavel_program`).

    Parameters
    ----------
    throughput
        ``T[j, k]`` >= 0 (0: job j cannot run on type k); every job positive somewhere.
    scale
        ``s_j``: GPUs each job uses.
    workers
        ``N_k``: GPUs of each type.

    Examples
    --------
    Two one-GPU jobs, two one-GPU types; each job is 3x faster on a different type:

    >>> a = gavel_allocation(np.array([[3.0, 1.0], [1.0, 3.0]]), [1, 1], [1, 1])
    >>> a.x.round(6).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    t, s, n = _inputs(throughput, scale, workers)
    m, k = t.shape
    if m == 0:
        return GavelAllocation(np.zeros((0, k)), 0.0, np.zeros(0))
    nv = m * k
    first = _linprog(gavel_program(t, s, n))
    if first.status != 0:
        raise BackendError(f"gavel: the max-min allocation LP failed: {first.message}")
    level = float(first.x[nv])
    second = _linprog(gavel_program(t, s, n, level))
    x = (second.x if second.status == 0 else first.x)[:nv].reshape(m, k)
    x = np.where(x < EPS, 0.0, np.minimum(x, 1.0))
    return GavelAllocation(x, level, (_normalised(t, s, n) * x).sum(axis=1))


class GavelPolicy:
    """Gavel's max-min fairness and round mechanism on GPU positions (module docstring).

    Deprecated (still working, with a :class:`DeprecationWarning` naming the new name, for this
    release): ``round_seconds=`` (give ``round_length=``, the name the rest of the package
    gives a round's length) and reading :attr:`round_seconds` (read :attr:`round_length`).

    Parameters
    ----------
    cluster
        GPU types in cluster order.
    round_length
        Gavel's round in seconds (None: its default, :data:`GAVEL_ROUND`, 360 s): the schedule
        is re-decided only when this much time has passed since the last decision; in between
        the jobs keep their GPUs (a job arriving waits, GPUs a job frees idle until the next
        decision).  Rounds as short as the simulator's 60 s time-share a contended gang every
        round and restart it every time (restart delays of up to 250 s: two 16-GPU bert jobs
        alone then never finish).
    """

    def __init__(self, cluster: Sequence[GpuType], round_length: float | None = None, *,
                 round_seconds: float | None = None) -> None:
        value, name = renamed_argument(round_seconds, round_length, "round_seconds", "round_length",
                                       "pal_opt.hetero.GavelPolicy")
        #: Gavel's round, in seconds
        self.round_length: float = check_seconds(GAVEL_ROUND if value is None else value, name)
        self.next_decision = -math.inf
        self.types = require_gpu_types(cluster)
        self.layout = Layout(self.types)
        self.workers = np.array([t.total_gpus for t in self.types], dtype=np.int64)
        self.stats = RoundStats()
        self.jobs: tuple[int, ...] = ()  # job indices of the current allocation, in order
        self.x = np.zeros((0, len(self.types)))
        self.received: dict[int, np.ndarray] = {}  # job -> rounds run per type since the reset
        self.deficit: dict[int, np.ndarray] = {}  # job -> rounds owed per type (cumulative)
        self.rounds_since_reset = 0
        self.holding: dict[int, tuple[int, ...]] = {}
        #: jobs found unplaceable while allocating (never: :meth:`unplaceable_reason` decides up front)
        self.unplaceable: dict[int, str] = {}
        #: GPUs out of service (a bool per position, or None): the shares are of the GPUs in
        #: service, and a change of them is a new decision at once
        self.out_of_service: np.ndarray | None = None

    @property
    def round_seconds(self) -> float:
        """Deprecated: Gavel's round, :attr:`round_length`."""
        warn_renamed("GavelPolicy.round_seconds", "GavelPolicy.round_length", "pal_opt.hetero.GavelPolicy",
                     stacklevel=3)
        return self.round_length

    def unplaceable_reason(self, job: SimJob) -> str | None:
        """Why no type can run the job at its requested count and batch
        (:func:`~pal_opt.hetero.policy.rigid_problem`: the row of :meth:`throughputs` would be
        all 0), or None."""
        return rigid_problem(job.app, self.types, job.spec.num_replicas, job.spec.batch_size)

    def throughputs(self, jobs: Sequence[SimJob]) -> np.ndarray:
        """``T[j, k]``: samples/s of each job at its requested count and batch per type (0: cannot run).

        Raises
        ------
        InstanceError
            A job that no type can run (naming it; the simulator leaves such jobs out, see
            :meth:`unplaceable_reason`).
        """
        rows = []
        for j in jobs:
            row = np.nan_to_num(rigid_throughputs(j.app, self.types, j.spec.num_replicas, j.spec.batch_size), nan=0.0)
            if not np.any(row > 0):
                raise InstanceError(
                    f"gavel: job {j.name} ({j.app.name}, {j.spec.num_replicas} GPUs, batch {j.spec.batch_size}) "
                    "has no measured throughput on any GPU type of the cluster"
                )
            rows.append(row)
        return np.array(rows).reshape(len(jobs), len(self.types))

    def _recompute(self, active: Sequence[SimJob]) -> None:
        """A new allocation for a changed job set; deficits settled and time counters reset."""
        for i, j in enumerate(self.jobs):
            owed = self.x[i] * self.rounds_since_reset - self.received.get(j, 0.0)
            self.deficit[j] = self.deficit.get(j, np.zeros(len(self.types))) + owed
        t0 = time.perf_counter()
        t = self.throughputs(active)
        size = np.array([j.spec.num_replicas for j in active], dtype=np.int64)
        t[size[:, None] > self.workers[None, :]] = 0.0  # types without enough GPUs in service
        runs = t.any(axis=1)  # a job that no type can hold now waits (its row of x stays 0)
        x = np.zeros_like(t)
        if runs.any():
            x[runs] = gavel_allocation(t[runs], size[runs], self.workers).x
        seconds = time.perf_counter() - t0
        self.stats.rounds += 1
        self.stats.solve_seconds += seconds
        self.stats.max_solve_seconds = max(self.stats.max_solve_seconds, seconds)
        self.jobs = tuple(j.index for j in active)
        self.x = x
        live = set(self.jobs)
        self.deficit = {j: d for j, d in self.deficit.items() if j in live}
        self.received = {j: np.zeros(len(self.types)) for j in self.jobs}
        self.rounds_since_reset = 0

    def priorities(self) -> np.ndarray:
        """Priority per (job, type) of the current allocation (module docstring)."""
        got = np.array([self.received[j] for j in self.jobs]).reshape(self.x.shape)
        total = got.sum(axis=0)
        frac = np.divide(got, total, out=np.zeros_like(got), where=total > 0)
        pri = np.divide(self.x, frac, out=self.x * UNSEEN_PRIORITY, where=frac > 0)
        return np.where(self.x > 0, pri, 0.0)

    def schedule(self, active: Sequence[SimJob]) -> dict[int, int]:
        """Gavel's greedy round: job index -> type index for the jobs that run this round."""
        pri = self.priorities()
        deficit = np.array([self.deficit.get(j, np.zeros(len(self.types))) for j in self.jobs]).reshape(self.x.shape)
        size = {j.index: j.spec.num_replicas for j in active}
        left = self.workers.copy()
        chosen: dict[int, int] = {}
        for k in range(len(self.types)):
            order = sorted(range(len(self.jobs)), key=lambda i: (-pri[i, k], -deficit[i, k], -self.x[i, k], self.jobs[i]))
            for i in order:
                j = self.jobs[i]
                if pri[i, k] <= 0 or j in chosen or size[j] > left[k]:
                    continue
                left[k] -= size[j]
                chosen[j] = k
        return chosen

    def place(self, chosen: dict[int, int], size: dict[int, int]) -> dict[int, tuple[int, ...]]:
        """GPU positions for the scheduled jobs: kept where still free, else the first free ones
        (in service)."""
        taken = self.layout.unavailable(self.out_of_service)
        out: dict[int, tuple[int, ...]] = {}
        order = sorted(chosen, key=lambda j: (-size[j], j))
        for j in order:
            old = self.holding.get(j, ())
            if old and all(int(self.layout.type_of[g]) == chosen[j] for g in old) and not taken[list(old)].any():
                out[j] = old
                taken[list(old)] = True
        for j in order:
            if j in out:
                continue
            free = np.flatnonzero((self.layout.type_of == chosen[j]) & ~taken)[: size[j]]
            out[j] = tuple(int(g) for g in free)
            taken[free] = True
        return out

    def allocate(self, active: Sequence[SimJob], now: float) -> dict[int, tuple[int, ...]]:
        """GPU positions of every active job for the next round (empty: not running); a new
        decision once :attr:`round_length` has passed since the last one."""
        live = {j.index for j in active}  # a finished job's GPUs are idle, not held
        self.holding = {i: g for i, g in self.holding.items() if i in live}
        oos = self.out_of_service
        # a holding on a GPU that left service: decide now (else the 360 s round holds, as for
        # any other change of the cluster: an idle GPU leaving or coming back waits for it)
        hit = oos is not None and any(oos[list(g)].any() for g in self.holding.values() if g)
        if now < self.next_decision and not hit:
            return {j.index: self.holding.get(j.index, ()) for j in active}
        self.next_decision = now + self.round_length - 1e-6
        if hit:  # a holding on a GPU out of service holds nothing
            self.holding = {i: g for i, g in self.holding.items() if not oos[list(g)].any()}  # type: ignore[index]
        workers = self.layout.in_service(oos)[0]
        if tuple(j.index for j in active) != self.jobs or not np.array_equal(workers, self.workers):
            self.workers = workers
            self._recompute(active)
        chosen = self.schedule(active)
        self.holding = self.place(chosen, {j.index: j.spec.num_replicas for j in active})
        for j, k in chosen.items():
            self.received[j][k] += 1
        self.rounds_since_reset += 1
        return {j.index: self.holding.get(j.index, ()) for j in active}


def gavel_policy(cluster: Sequence[GpuType], config: Any = None, on_round: object = None) -> GavelPolicy:
    """The ``gavel`` entry of :data:`pal_opt.hetero.methods.HETERO_POLICIES`: its round from the
    config's ``gavel_round`` (no solver choice: HiGHS through scipy; variability unseen)."""
    return GavelPolicy(cluster, GAVEL_ROUND if config is None else config.gavel_round)
