"""Stage 1 of pal-opt's ``ilp`` with types: Sia's configuration program with variability levels.

Sia's round program (:mod:`pal_opt.hetero.roundprogram`) chooses a configuration k = (type,
nodes, GPUs) per job.  Here a column is a configuration **and a variability level** v: "job j
runs configuration k on GPUs of its class's binned factor ≤ f_v" (levels of the job's class on
the configuration's type, :class:`LevelRound`).  Its goodput is Sia's normalised goodput
divided by f_v; costs are Sia's (fairness power, two decimals, clip, λ_n)::

    minimise   Σ_{j,k,v} A[j,k,v] x[j,k,v] + Σ_r Σ_c A^R[r,c] y[r,c] + λ_n (N − Σ x − Σ y)
    subject to Σ_{k,v} x[j,k,v] ≤ 1, Σ_c y[r,c] ≤ 1                         (one choice per job)
               Σ_{k of c, v} n_k x[·,k,v] + Σ_r g_r y[r,c] ≤ N_c g_c                (GPUs of type c)
               Σ_{j of class a, k of c, v' ≤ v} n_k x[j,k,v'] ≤ #{GPUs of c with f_a ≤ f_v}
                                                          (each type c, class a, level v but the last)
               x[j,k0,v0] = 1 for a job still restarting; x, y binary

with ``A[j,k,v] = min(round((G[j,k] / f_v)^p, 2), clip)``.  The level rows are Hall's condition
for one class at a time; jobs of different classes share GPUs, so together they are a
relaxation and stage 2 (:mod:`pal_opt.hetero.ilptypes`) picks the GPUs.  Without variability
every type has one level (f = 1) and the program is Sia's.  ``formulations/sia_ilp_types.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..ilp.program import Program
from ..options import require_type
from .configs import ConfigSet, fairness_costs_unchecked
from .roundprogram import LAMBDA_N, OBJECTIVE_SCALE, type_gpus

__all__ = ["LevelRound", "LevelProgram", "adaptive_columns", "build_level_program", "rigid_columns", "scaled_costs"]


@dataclass(frozen=True, eq=False)
class LevelRound:
    """One round's data for the level program.

    Attributes
    ----------
    configs
        Configurations (columns of ``goodput``).
    goodput
        (jobs, configurations): Sia's normalised goodput rows, re-allocation factor applied.
    job_class
        Class index per job (into ``levels``' inner lists).
    levels
        ``levels[c][a]``: ascending distinct binned factors of class a on type c.
    counts
        ``counts[c][a]``: GPUs of type c at each of those levels.
    pinned
        Per job ``(configuration, level)`` it must keep, or ``(-1, -1)``.
    rigid_costs, rigid_gpus, pinned_rigid
        Rigid jobs as in Sia's program (cost per type, GPUs, pinned type or -1).
    p, lambda_n
        Fairness power and no-allocation penalty.
    capacity
        GPUs in service per type, or None: every GPU (the level ``counts`` must then count only
        GPUs in service too).
    """

    configs: ConfigSet
    goodput: np.ndarray
    job_class: np.ndarray
    levels: Sequence[Sequence[np.ndarray]]
    counts: Sequence[Sequence[np.ndarray]]
    pinned: np.ndarray
    rigid_costs: np.ndarray
    rigid_gpus: np.ndarray
    pinned_rigid: np.ndarray
    p: float = -0.5
    lambda_n: float = LAMBDA_N
    capacity: np.ndarray | None = None

    def type_gpus(self) -> np.ndarray:
        """GPUs each type has for this round (:attr:`capacity`, or every GPU)."""
        return type_gpus(self.configs, self.capacity)

    @property
    def num_jobs(self) -> int:
        return int(self.goodput.shape[0])


@dataclass(frozen=True, eq=False, kw_only=True, repr=False)  # Program.__repr__: its size
class JobColumnsProgram(Program):
    """A program whose first columns are the jobs' choices: per column its job (adaptive jobs
    first, then rigid ones), configuration (type for rigid jobs) and level (-1 for rigid jobs).
    The base of :class:`LevelProgram` and :class:`~pal_opt.hetero.jointprogram.JointProgram`,
    which decode those columns alike (``job_choices``; not in ``__all__``)."""

    col_job: np.ndarray
    col_choice: np.ndarray
    col_level: np.ndarray
    num_adaptive: int
    num_rigid: int

    def job_choices(self, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(configuration per adaptive job, level per adaptive job, type per rigid job; -1: none)
        of the job columns ``chosen`` (a mask over the first columns)."""
        conf = np.full(self.num_adaptive, -1, dtype=np.int64)
        level = np.full(self.num_adaptive, -1, dtype=np.int64)
        rigid = np.full(self.num_rigid, -1, dtype=np.int64)
        for col in np.flatnonzero(chosen).tolist():
            j = int(self.col_job[col])
            if j < self.num_adaptive:
                conf[j], level[j] = self.col_choice[col], self.col_level[col]
            else:
                rigid[j - self.num_adaptive] = self.col_choice[col]
        return conf, level, rigid


@dataclass(frozen=True, eq=False, kw_only=True, repr=False)  # Program.__repr__: its size
class LevelProgram(JobColumnsProgram):
    """The program plus what decoding needs (``JobColumnsProgram``: every column is a job's
    choice)."""

    def decode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(configuration per adaptive job, level per adaptive job, type per rigid job); -1: none."""
        return self.job_choices(np.asarray(values) >= 0.5)


def scaled_costs(a: np.ndarray, lambda_n: float) -> np.ndarray:
    """Costs in hundredths minus the no-allocation penalty (negative: worth allocating)."""
    return np.rint(np.asarray(a, dtype=np.float64) * OBJECTIVE_SCALE) - round(OBJECTIVE_SCALE * lambda_n)


def adaptive_columns(r: LevelRound) -> list[tuple[int, int, int, float, bool]]:
    """(job, configuration, level, scaled cost, pinned) of every useful column: negative cost
    (or pinned), and not matched by a column of the same job, type and level with fewer GPUs."""
    cs = r.configs
    out = []
    for j in range(r.num_jobs):
        pk, pv = (int(x) for x in r.pinned[j])
        a = int(r.job_class[j])
        for c in range(len(cs.types)):
            ks = np.flatnonzero(cs.of_type(c))
            ks = ks[np.argsort(cs.num_gpus[ks], kind="stable")]
            for v, f in enumerate(np.asarray(r.levels[c][a]).tolist()):
                cost = scaled_costs(fairness_costs_unchecked((r.goodput[j, ks] / f).astype(np.float32), r.p), r.lambda_n)
                best = np.inf
                for k, z in zip(ks.tolist(), cost.tolist(), strict=True):
                    pinned = (k, v) == (pk, pv)
                    if pinned or (pk < 0 and z < 0 and z < best):
                        out.append((j, k, v, z, pinned))
                    best = min(best, z)
    return out


def rigid_columns(r: LevelRound) -> list[tuple[int, int, int, float, bool]]:
    """(job, type, -1, scaled cost, pinned) of every useful rigid column (jobs numbered after
    the adaptive ones): negative cost and the type large enough, or pinned."""
    out = []
    cap = r.type_gpus().tolist()
    for i in range(len(r.rigid_gpus)):
        for c in range(len(r.configs.types)):
            z = float(scaled_costs(np.asarray([r.rigid_costs[i, c]]), r.lambda_n)[0])
            held = int(r.pinned_rigid[i]) == c
            if held or (int(r.pinned_rigid[i]) < 0 and z < 0 and r.rigid_gpus[i] <= cap[c]):
                out.append((r.num_jobs + i, c, -1, z, held))
    return out


def build_level_program(r: LevelRound) -> LevelProgram:
    """The sparse MILP of the module docstring."""
    require_type(r, LevelRound, "r", " (a LevelRound)")
    cs = r.configs
    nt = len(cs.types)
    na, nr = r.num_jobs, len(r.rigid_gpus)
    cols = adaptive_columns(r) + rigid_columns(r)
    job = np.array([x[0] for x in cols], dtype=np.int64)
    choice = np.array([x[1] for x in cols], dtype=np.int64)
    level = np.array([x[2] for x in cols], dtype=np.int64)
    cost = np.array([x[3] for x in cols], dtype=np.float64)
    pinned = np.array([x[4] for x in cols], dtype=bool)
    rigid = job >= na
    rg = np.concatenate([np.asarray(r.rigid_gpus, dtype=np.int64), [0]])
    gtype = np.where(rigid, choice, cs.type_index[np.where(rigid, 0, choice)])
    gpus = np.where(rigid, rg[np.where(rigid, job - na, -1)], cs.num_gpus[np.where(rigid, 0, choice)])
    rows, cols_i, data = [job, na + nr + gtype], [np.arange(job.size)] * 2, [np.ones(job.size), gpus.astype(np.float64)]
    hi = [np.ones(na + nr), r.type_gpus().astype(np.float64)]
    names = [f"one_{j}" for j in range(na + nr)] + [f"gpus_{t.name}" for t in cs.types]
    row = na + nr + nt
    jc = np.concatenate([np.asarray(r.job_class, dtype=np.int64), [-1]])
    cls = np.where(rigid, -1, jc[np.where(rigid, -1, job)])
    for c in range(nt):
        for a, cnt in enumerate(r.counts[c]):
            cum = np.cumsum(np.asarray(cnt))
            for v in range(len(cum) - 1):
                sel = np.flatnonzero(~rigid & (gtype == c) & (cls == a) & (level <= v))
                if sel.size:
                    rows.append(np.full(sel.size, row))
                    cols_i.append(sel)
                    data.append(gpus[sel].astype(np.float64))
                    hi.append(np.array([float(cum[v])]))
                    names.append(f"level_{cs.types[c].name}_{a}_{v}")
                    row += 1
    A = sp.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols_i))), shape=(row, job.size))
    A.sort_indices()
    lam = round(OBJECTIVE_SCALE * r.lambda_n)
    return LevelProgram(
        c=cost, obj_offset=float(lam * (na + nr)), A=A, row_lo=np.full(row, -np.inf), row_hi=np.concatenate(hi),
        col_lo=pinned.astype(np.float64), col_hi=np.ones(job.size), integrality=np.ones(job.size, dtype=bool),
        var_names=tuple(f"x_{j}_{k}_{v}" for j, k, v in zip(job.tolist(), choice.tolist(), level.tolist(), strict=True)),
        row_names=tuple(names), col_job=job, col_choice=choice, col_level=level, num_adaptive=na, num_rigid=nr,
    )
