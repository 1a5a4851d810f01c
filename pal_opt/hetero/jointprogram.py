"""pal-opt's joint ``ilp`` round with GPU types: configuration, level and GPUs in one program.

The level program (:mod:`pal_opt.hetero.levelprogram`) chooses a configuration k = (type c_k,
nodes m_k, GPUs n_k) and a variability level v per job; its level rows are exact per class only.
Here the same columns are linked to the GPUs themselves.  GPUs are grouped into *cells*
e = (type, node, binned factor of every class): GPUs of one cell are interchangeable for every
job.  ``n_e`` is the cell's free GPUs (those of jobs still restarting are removed: those jobs
keep their GPUs and their pinned column).  With ``w[j,e] ∈ Z≥0`` (GPUs of cell e job j gets) and
``u[j,s] ∈ {0,1}`` (job j uses node s)::

    minimise   M (Σ A[j,k,v] x[j,k,v] + Σ A^R[r,c] y[r,c] + λ_n (N − Σ x − Σ y)) + Σ_{e not held by j} w[j,e]
    subject to Σ_{k,v} x[j,k,v] ≤ 1, Σ_c y[r,c] ≤ 1                             (one choice)
               Σ_{e of c} w[j,e] = Σ_{k of c, v} n_k x[j,k,v]  (+ g_r y[r,c])     (count, per j, c)
               w[j,e] ≤ Σ_{k of c_e, v: f_v ≥ φ_{a(j)}(e)} min(n_e, n_k) x[j,k,v]          (level)
               Σ_j w[j,e] ≤ n_e                                                   (capacity)
               Σ_{e on s} w[j,e] ≤ min(free_s, max n_k) u[j,s]                      (node used)
               Σ_{s of c} u[j,s] ≤ Σ_{k of c, v} m_k x[j,k,v]  (+ ⌈g_r / g_c⌉ y[r,c])      (nodes)

``A`` is the level program's cost (Sia's normalised goodput over the level's factor, fairness
power, two decimals, clip), in hundredths; ``M`` = free GPUs + 1, so the tie-break (a GPU of a
cell the job holds nothing of) never outweighs one hundredth.  A configuration of one node
gets its GPUs on one node, one of m whole nodes gets m nodes whole: no job is fragmented and the
program's shapes are the configurations'.  ``formulations/sia_ilp_types.md`` §6.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..ilp.program import Program
from ..options import check_finite, require_type
from .levelprogram import JobColumnsProgram, LevelRound, adaptive_columns, rigid_columns
from .round import solve_program
from .roundprogram import OBJECTIVE_SCALE

__all__ = ["Cells", "JointRound", "JointProgram", "make_cells", "build_joint_program", "solve_joint", "assign_gpus", "order_gpus"]


@dataclass(frozen=True, eq=False)
class Cells:
    """The free GPUs of a round grouped by (type, node, binned factors).

    Attributes
    ----------
    type_of, node_of
        Per cell: type index and cluster-wide node index.
    factor
        (cells, classes): the binned factor of every class on the cell's GPUs.
    gpus
        Per cell its free GPU positions, ascending.
    """

    type_of: np.ndarray
    node_of: np.ndarray
    factor: np.ndarray
    gpus: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> np.ndarray:
        return np.array([len(g) for g in self.gpus], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.gpus)


def make_cells(type_of: np.ndarray, node_of: np.ndarray, factors: np.ndarray, free: np.ndarray) -> Cells:
    """Cells of the ``free`` GPUs; ``factors`` is (classes, GPUs); cells in order of first GPU."""
    groups: dict[tuple[float, ...], list[int]] = {}
    for g in np.flatnonzero(free).tolist():
        groups.setdefault((int(type_of[g]), int(node_of[g]), *factors[:, g].tolist()), []).append(g)
    keys = list(groups)
    return Cells(
        np.array([int(k[0]) for k in keys], dtype=np.int64), np.array([int(k[1]) for k in keys], dtype=np.int64),
        np.array([k[2:] for k in keys], dtype=np.float64).reshape(len(keys), factors.shape[0]),
        tuple(tuple(groups[k]) for k in keys),
    )


@dataclass(frozen=True, eq=False)
class JointRound:
    """One round's data: the level program's (``level``; its ``levels`` are the true levels),
    the cells, and ``held[j, e]``: GPUs of cell e job j holds now (adaptive jobs, then rigid)."""

    level: LevelRound
    cells: Cells
    held: np.ndarray


@dataclass(frozen=True, eq=False, kw_only=True, repr=False)  # Program.__repr__: its size
class JointProgram(JobColumnsProgram):
    """The program plus what decoding needs: the x columns first (job, configuration or type,
    level; rigid jobs numbered after the adaptive ones: ``levelprogram.JobColumnsProgram``),
    then w (job, cell), then u (job, node)."""

    col_cost: np.ndarray
    w_job: np.ndarray
    w_cell: np.ndarray
    scale: float
    lambda_n: float
    aggregate: Program

    def decode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, dict[int, int]]]:
        """(configuration per adaptive job, level per adaptive job, type per rigid job, GPUs per
        cell per job); -1: none."""
        v = np.rint(np.asarray(values))
        nx, nw = self.col_job.size, self.w_job.size
        conf, level, rigid = self.job_choices(v[:nx] >= 0.5)
        counts: dict[int, dict[int, int]] = {}
        for i in np.flatnonzero(v[nx:nx + nw] >= 0.5).tolist():
            counts.setdefault(int(self.w_job[i]), {})[int(self.w_cell[i])] = int(v[nx + i])
        return conf, level, rigid, counts

    def main(self) -> JointProgram:
        """The program without the tie-break, in hundredths (its optimum: Sia's objective)."""
        nx = self.col_job.size
        c = np.concatenate([self.col_cost, np.zeros(self.num_vars - nx)])
        offset = float(round(OBJECTIVE_SCALE * self.lambda_n) * (self.num_adaptive + self.num_rigid))
        return dataclasses.replace(self, c=c, obj_offset=offset, scale=1.0)

    def with_choice(self, values: np.ndarray) -> JointProgram:
        """The program with every x fixed to ``values``' (only the GPUs left to choose)."""
        nx = self.col_job.size
        x = np.rint(np.asarray(values)[:nx])
        return dataclasses.replace(self, col_lo=np.concatenate([x, self.col_lo[nx:]]),
                                   col_hi=np.concatenate([x, self.col_hi[nx:]]))

    def round_objective(self, values: np.ndarray) -> float:
        """Sia's objective of the chosen columns (units of ``A``; the tie-break left out)."""
        x = np.rint(np.asarray(values)[: self.col_job.size])
        jobs = self.num_adaptive + self.num_rigid
        return float(self.col_cost @ x + round(OBJECTIVE_SCALE * self.lambda_n) * jobs) / OBJECTIVE_SCALE


@dataclass
class _Rows:
    """A sparse matrix under construction: (row, column, value) triplets and row bounds."""

    r: list[int]
    c: list[int]
    v: list[float]
    lo: list[float]
    hi: list[float]
    names: list[str]

    def add(self, entries: Mapping[int, float] | Sequence[tuple[int, float]], lo: float, hi: float, name: str) -> None:
        row = len(self.lo)
        for col, val in (entries.items() if isinstance(entries, Mapping) else entries):
            self.r.append(row)
            self.c.append(col)
            self.v.append(float(val))
        self.lo.append(lo)
        self.hi.append(hi)
        self.names.append(name)


def _column_table(jr: JointRound) -> tuple[list[tuple[int, int, int, float, bool]], np.ndarray]:
    """The x columns (job, choice, level, scaled cost, pinned) and per column (type, GPUs, nodes,
    level factor; inf for rigid jobs: any GPU)."""
    r = jr.level
    cs = r.configs
    cols = adaptive_columns(r) + rigid_columns(r)
    info = np.zeros((len(cols), 4))
    for i, (j, k, v, _, _) in enumerate(cols):
        if j < r.num_jobs:
            c = int(cs.type_index[k])
            info[i] = (c, cs.num_gpus[k], cs.num_nodes[k], r.levels[c][int(r.job_class[j])][v])
        else:
            n = int(r.rigid_gpus[j - r.num_jobs])
            info[i] = (k, n, -(-n // cs.types[k].gpus_per_node), np.inf)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, col in enumerate(cols):
        groups.setdefault((col[0], int(info[i, 0])), []).append(i)
    keep = sorted(i for g in groups.values() for i in g if not _dominated(cols, info, i, g))
    return [cols[i] for i in keep], info[keep]


def _dominated(cols: list[tuple[int, int, int, float, bool]], info: np.ndarray, i: int, group: list[int]) -> bool:
    """Whether another column of the same job and type (``group``) has no more GPUs, a level no
    stricter and a cost no higher: any placement of column i holds one of it (a subset of its
    GPUs), so leaving i out keeps the optimum."""
    if cols[i][4]:
        return False
    z, n, f = cols[i][3], info[i, 1], info[i, 3]
    return any(o != i and info[o, 1] <= n and info[o, 3] >= f and cols[o][3] <= z for o in group)


def _placement_vars(jr: JointRound, cols: list[tuple[int, int, int, float, bool]], info: np.ndarray
                    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(job, cell) of every w and (job, node) of every u: the cells of a type a job has a column
    on that its best level on the type covers."""
    cells, r = jr.cells, jr.level
    best: dict[tuple[int, int], float] = {}
    for (j, _, _, _, pinned), (c, _, _, f) in zip(cols, info.tolist(), strict=True):
        if not pinned:
            best[(j, int(c))] = max(best.get((j, int(c)), 0.0), f)
    w: list[tuple[int, int]] = []
    u: list[tuple[int, int]] = []
    for (j, c), f in sorted(best.items()):
        a = int(r.job_class[j]) if j < r.num_jobs else 0
        mine = [e for e in np.flatnonzero(cells.type_of == c).tolist() if j >= r.num_jobs or cells.factor[e, a] <= f]
        w += [(j, e) for e in mine]
        u += [(j, s) for s in sorted({int(cells.node_of[e]) for e in mine})]
    return w, u


def build_joint_program(jr: JointRound) -> JointProgram:
    """The sparse MILP of the module docstring."""
    require_type(jr, JointRound, "jr", " (a JointRound)")
    r, cells = jr.level, jr.cells
    cols, info = _column_table(jr)
    nx = len(cols)
    wv, uv = _placement_vars(jr, cols, info)
    nw = len(wv)
    widx = {key: nx + i for i, key in enumerate(wv)}
    uidx = {key: nx + nw + i for i, key in enumerate(uv)}
    size = cells.size
    scale = float(int(size.sum()) + 1)
    rows = _Rows([], [], [], [], [], [])
    jobs = r.num_jobs + len(r.rigid_gpus)
    _one_rows(rows, jobs, cols)
    _link_rows(rows, jr, cols, info, widx, uidx)
    for e in range(len(cells)):
        rows.add([(widx[(j, e2)], 1.0) for j, e2 in wv if e2 == e], -np.inf, float(size[e]), f"cap_{e}")
    cost = np.array([c[3] for c in cols], dtype=np.float64)
    pinned = np.array([c[4] for c in cols], dtype=bool)
    held = np.asarray(jr.held)
    tie = np.array([0.0 if held[j, e] > 0 else 1.0 for j, e in wv])
    nu = len(uv)
    lam = round(OBJECTIVE_SCALE * r.lambda_n)
    A = sp.csr_matrix((rows.v, (rows.r, rows.c)), shape=(len(rows.lo), nx + nw + nu))
    A.sort_indices()
    return JointProgram(
        c=np.concatenate([scale * cost, tie, np.zeros(nu)]), obj_offset=scale * lam * jobs, A=A,
        row_lo=np.array(rows.lo), row_hi=np.array(rows.hi),
        col_lo=np.concatenate([pinned.astype(np.float64), np.zeros(nw + nu)]),
        col_hi=np.concatenate([np.ones(nx), size[[e for _, e in wv]].astype(np.float64), np.ones(nu)]),
        integrality=np.ones(nx + nw + nu, dtype=bool),
        var_names=tuple([f"x_{j}_{k}_{v}" for j, k, v, _, _ in cols] + [f"w_{j}_{e}" for j, e in wv]
                        + [f"u_{j}_{s}" for j, s in uv]),
        row_names=tuple(rows.names), col_job=np.array([c[0] for c in cols], dtype=np.int64),
        col_choice=np.array([c[1] for c in cols], dtype=np.int64), col_level=np.array([c[2] for c in cols], dtype=np.int64),
        col_cost=cost, w_job=np.array([j for j, _ in wv], dtype=np.int64), w_cell=np.array([e for _, e in wv], dtype=np.int64),
        num_adaptive=r.num_jobs, num_rigid=len(r.rigid_gpus), scale=scale, lambda_n=r.lambda_n,
        aggregate=_aggregate(jr, cols, info),
    )


def _one_rows(rows: _Rows, jobs: int, cols: list[tuple[int, int, int, float, bool]]) -> None:
    """Σ_{k,v} x[j,k,v] ≤ 1 per job."""
    per: list[list[tuple[int, float]]] = [[] for _ in range(jobs)]
    for i, col in enumerate(cols):
        per[col[0]].append((i, 1.0))
    for j in range(jobs):
        rows.add(per[j], -np.inf, 1.0, f"one_{j}")


def _aggregate(jr: JointRound, cols: list[tuple[int, int, int, float, bool]], info: np.ndarray) -> Program:
    """The relaxation over the x columns only: one choice per job, and per type c, class a and
    level v the GPUs that jobs of class a priced at level ≤ v take on c at most the free GPUs of
    c with φ_a ≤ f_v (v = the last: all free GPUs of c; all classes together).  Pinned columns
    are fixed and take no free GPUs."""
    r, cells = jr.level, jr.cells
    size = cells.size
    rows = _Rows([], [], [], [], [], [])
    _one_rows(rows, r.num_jobs + len(r.rigid_gpus), cols)
    free = [i for i, col in enumerate(cols) if not col[4]]
    cls = [int(r.job_class[cols[i][0]]) if cols[i][0] < r.num_jobs else -1 for i in range(len(cols))]
    for c in range(len(r.configs.types)):
        on = cells.type_of == c
        rows.add([(i, info[i, 1]) for i in free if info[i, 0] == c], -np.inf, float(size[on].sum()), f"gpus_{c}")
        for a, fs in enumerate(r.levels[c]):
            for f in np.asarray(fs)[:-1].tolist():
                mine = [(i, info[i, 1]) for i in free if info[i, 0] == c and cls[i] == a and info[i, 3] <= f]
                if mine:
                    rows.add(mine, -np.inf, float(size[on & (cells.factor[:, a] <= f)].sum()), f"level_{c}_{a}_{f:g}")
    nx = len(cols)
    A = sp.csr_matrix((rows.v, (rows.r, rows.c)), shape=(len(rows.lo), nx))
    A.sort_indices()
    jobs = r.num_jobs + len(r.rigid_gpus)
    return Program(c=np.array([col[3] for col in cols], dtype=np.float64),
                   obj_offset=float(round(OBJECTIVE_SCALE * r.lambda_n) * jobs), A=A,
                   row_lo=np.array(rows.lo), row_hi=np.array(rows.hi),
                   col_lo=np.array([float(col[4]) for col in cols]), col_hi=np.ones(nx),
                   integrality=np.ones(nx, dtype=bool), var_names=tuple(f"x_{j}_{k}_{v}" for j, k, v, _, _ in cols),
                   row_names=tuple(rows.names))


def solve_joint(prog: JointProgram, backend: str | None, time_limit: float | None) -> tuple[np.ndarray | None, str, str]:
    """Solve with a backend (:func:`pal_opt.hetero.round.solve_program`), Sia's objective first,
    then the tie-break with the configurations and levels fixed (:meth:`JointProgram.with_choice`):

    1. the aggregate relaxation (:attr:`JointProgram.aggregate`: no GPUs, only type totals and
       per-class level rows); if its optimum can be placed, it is the joint optimum;
    2. otherwise the joint program without the tie-break (:meth:`JointProgram.main`).  (A row
       bounding its objective below by the relaxation's optimum made HiGHS slower, up to 120 s
       on one round of newtrace-7's prefix, and is not used.)

    (values or None, status of the solve that chose the configurations, backend.)  The tie-break
    is least for the chosen configurations, not over every optimal choice."""
    require_type(prog, JointProgram, "prog", " (build_joint_program)")
    if time_limit is not None:
        check_finite(time_limit, "time_limit", strict=True)
    agg, status, name = solve_program(prog.aggregate, backend, time_limit)
    if agg is None:
        return None, status, name
    placed, _, _ = solve_program(prog.with_choice(agg), backend, time_limit)
    if placed is not None:  # the relaxation's optimum is placeable: it is the joint optimum
        return placed, status, name
    values, status, name = solve_program(prog.main(), backend, time_limit)
    if values is None:
        return None, status, name
    placed, _, _ = solve_program(prog.with_choice(values), backend, time_limit)
    return (values if placed is None else placed), status, name


def _link_rows(rows: _Rows, jr: JointRound, cols: list[tuple[int, int, int, float, bool]], info: np.ndarray,
               widx: dict[tuple[int, int], int], uidx: dict[tuple[int, int], int]) -> None:
    """Count, level, node-used and node-count rows per (job, type) with placement variables."""
    r, cells = jr.level, jr.cells
    size = cells.size
    by_jc: dict[tuple[int, int], list[int]] = {}
    for i, (j, _, _, _, pinned) in enumerate(cols):
        if not pinned:
            by_jc.setdefault((j, int(info[i, 0])), []).append(i)
    for (j, c), mine in sorted(by_jc.items()):
        a = int(r.job_class[j]) if j < r.num_jobs else 0
        es = [e for e in np.flatnonzero(cells.type_of == c).tolist() if (j, e) in widx]
        rows.add([(widx[(j, e)], 1.0) for e in es] + [(i, -info[i, 1]) for i in mine], 0.0, 0.0, f"count_{j}_{c}")
        for e in es:
            cover = [(i, -min(float(size[e]), info[i, 1])) for i in mine if info[i, 3] >= cells.factor[e, a]]
            rows.add([(widx[(j, e)], 1.0), *cover], -np.inf, 0.0, f"level_{j}_{e}")
        most = max(info[i, 1] for i in mine)
        nodes = sorted({int(cells.node_of[e]) for e in es})
        for s in nodes:
            on = [e for e in es if cells.node_of[e] == s]
            free = float(sum(size[e] for e in on))
            rows.add([(widx[(j, e)], 1.0) for e in on] + [(uidx[(j, s)], -min(free, most))], -np.inf, 0.0, f"node_{j}_{s}")
        rows.add([(uidx[(j, s)], 1.0) for s in nodes] + [(i, -info[i, 2]) for i in mine], -np.inf, 0.0, f"nodes_{j}_{c}")


def assign_gpus(cells: Cells, counts: Mapping[int, Mapping[int, int]], held: Mapping[int, Sequence[int]]) -> dict[int, list[int]]:
    """GPU positions per job from its GPUs per cell: in every cell each job first keeps the GPUs
    it holds there, then takes the lowest free ones (jobs in ascending order)."""
    out: dict[int, list[int]] = {j: [] for j in counts}
    for e, gpus in enumerate(cells.gpus):
        want = {j: c[e] for j, c in sorted(counts.items()) if c.get(e, 0) > 0}
        for j, n in want.items():
            mine = set(held.get(j, ()))
            out[j] += [g for g in gpus if g in mine][:n]
        taken = {g for j in want for g in out[j]}
        rest = [g for g in gpus if g not in taken]
        for j, n in want.items():
            missing = n - sum(1 for g in out[j] if g in set(gpus))
            out[j] += rest[:missing]
            rest = rest[missing:]
    return out


def order_gpus(gpus: Sequence[int], node_of: np.ndarray, previous: tuple[int, ...]) -> tuple[int, ...]:
    """A job's GPUs grouped by node, the nodes ordered so that the per-node counts read as
    ``previous`` when they are a permutation of it (then the shape is unchanged), else by count,
    largest first (then node)."""
    per: dict[int, list[int]] = {}
    for g in sorted(gpus):
        per.setdefault(int(node_of[g]), []).append(g)
    nodes = sorted(per, key=lambda s: (-len(per[s]), s))
    if sorted(len(v) for v in per.values()) == sorted(previous):
        pool = list(nodes)
        nodes = []
        for q in previous:
            s = next(s for s in pool if len(per[s]) == q)
            pool.remove(s)
            nodes.append(s)
    return tuple(g for s in nodes for g in per[s])
