"""Large Sia rounds solved fast and exactly: LP and Lagrangian bounds, and knapsack repairs.

The round program (:mod:`pal_opt.hetero.round`) is a multiple-choice knapsack with one capacity
per GPU type: every job takes at most one column (a configuration: type t, n GPUs, cost c), and
the GPUs taken of each type are limited.  With few types this structure gives:

* **The LP relaxation** (HiGHS dual simplex through scipy): a bound ``z_LP``, prices ``μ_t ≥ 0``
  of the GPUs of each type and a reduced cost per column.  Every objective value is an integer
  (costs in hundredths), so ``⌈z_LP⌉`` bounds the optimum.
* **Lagrangian knapsack bounds.**  Price the GPUs of every type but one at ``μ`` and keep the
  last type's capacity: each job then picks its cheapest priced column off that type, or a column
  on it, and a dynamic program over that type's GPU count solves the rest exactly.  Each such
  bound is at least the LP bound and often closes its gap.
* **Knapsack repairs** (a primal heuristic).  From the rounded LP solution, re-decide one type at
  a time exactly: a dynamic program over that type's GPUs lets every job take a column there or
  keep what it has elsewhere (leaving another type only frees GPUs, so every step stays
  feasible), until no type improves.

:func:`solve_large_round` returns the repaired solution when it meets the best bound (proven
optimal); otherwise the columns whose reduced cost shows they cannot beat it are dropped and a
backend solves the rest from it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from .roundprogram import RoundProgram

__all__ = [
    "Relaxation",
    "relax",
    "round_relaxation",
    "Layout",
    "layout",
    "lagrangian",
    "lagrangian_bound",
    "repair",
    "core_program",
    "LargeRoundResult",
    "solve_large_round",
]


@dataclass(frozen=True)
class Relaxation:
    """The LP relaxation of a round program.

    Attributes
    ----------
    values
        A basic optimal solution.
    bound
        Its objective (program units, offset included).
    row_prices
        Dual price (≥ 0) of one unit of slack of each row: jobs, then GPU types.
    reduced
        Reduced cost of each column (≥ 0 at 0, ≤ 0 at 1).
    """

    values: np.ndarray
    bound: float
    row_prices: np.ndarray
    reduced: np.ndarray

    @property
    def prices(self) -> np.ndarray:
        """μ_t ≥ 0: the dual price of one GPU of each type (the last rows)."""
        return self.row_prices[self.row_prices.size - self._types :]

    _types: int = 0


def relax(prog: RoundProgram) -> Relaxation | None:
    """The LP relaxation by HiGHS' dual simplex (scipy); None if it fails or has no columns."""
    from scipy.optimize import linprog

    if prog.num_vars == 0:
        return None
    res = linprog(
        prog.c, A_ub=prog.A, b_ub=prog.row_hi, bounds=np.column_stack([prog.col_lo, prog.col_hi]), method="highs-ds"
    )
    if res.status != 0 or res.x is None:
        return None
    row_prices = np.maximum(-np.asarray(res.ineqlin.marginals), 0.0)
    reduced = np.asarray(res.lower.marginals) + np.asarray(res.upper.marginals)
    return Relaxation(np.asarray(res.x), float(res.fun) + prog.obj_offset, row_prices, reduced, prog.num_types)


#: Most combinations of the split jobs' columns :func:`round_relaxation` tries.
MAX_ROUNDING_COMBINATIONS = 4096


def round_relaxation(prog: RoundProgram, x: np.ndarray) -> np.ndarray:
    """A feasible 0/1 solution from an LP solution: jobs at 1 keep their column; the (few) jobs
    split between columns get the cheapest combination of their columns (or none) that fits the
    GPUs left, tried exhaustively up to :data:`MAX_ROUNDING_COMBINATIONS`, else job by job
    (largest share first)."""
    values = (x >= 1 - 1e-6).astype(np.float64)
    left = prog.type_capacity.copy()
    np.subtract.at(left, prog.col_type[values > 0], prog.col_gpus[values > 0])
    taken = set(prog.col_job[values > 0].tolist())
    split = np.flatnonzero((x > 1e-6) & (values == 0))
    jobs = list(dict.fromkeys(int(prog.col_job[c]) for c in split[np.argsort(-x[split], kind="stable")]))
    options = [np.flatnonzero(prog.col_job == j) for j in jobs if j not in taken]
    if math.prod(o.size + 1 for o in options) <= MAX_ROUNDING_COMBINATIONS:
        best, pick = 0.0, tuple[int, ...]()
        for combo in itertools.product(*[[-1, *o.tolist()] for o in options]):
            chosen = [c for c in combo if c >= 0]
            use = np.zeros_like(left)
            np.add.at(use, prog.col_type[chosen], prog.col_gpus[chosen])
            cost = float(prog.c[chosen].sum())
            if cost < best and np.all(use <= left):
                best, pick = cost, tuple(chosen)
        values[list(pick)] = 1.0
        return values
    for cols in options:
        fits = cols[prog.col_gpus[cols] <= left[prog.col_type[cols]]]
        if fits.size and prog.c[fits].min() < 0:
            k = int(fits[np.argmin(prog.c[fits])])
            values[k] = 1.0
            left[prog.col_type[k]] -= prog.col_gpus[k]
    return values


@dataclass(frozen=True, eq=False)
class Layout:
    """A round program's columns arranged for the knapsack dynamic programs (built once).

    Attributes
    ----------
    num_jobs
        Jobs (rows of one configuration each).
    on_type
        Per type: (job, columns, GPUs, costs, pinned) of every job that may take a column there
        (a pinned job only its pinned column).
    off_type
        Per type: bool per job, True where the job cannot take a column of that type.
    pinned
        Per job its pinned column, or -1.
    """

    num_jobs: int
    on_type: list[list[tuple[int, np.ndarray, np.ndarray, np.ndarray, bool]]]
    off_type: list[np.ndarray]
    pinned: np.ndarray


def layout(prog: RoundProgram) -> Layout:
    """The :class:`Layout` of a program."""
    jobs = prog.num_adaptive + prog.num_rigid
    pinned = np.full(jobs, -1, dtype=np.int64)
    pin_cols = np.flatnonzero(prog.col_lo > 0.5)
    pinned[prog.col_job[pin_cols]] = pin_cols
    on_type: list[list[tuple[int, np.ndarray, np.ndarray, np.ndarray, bool]]] = []
    off_type = []
    for t in range(prog.num_types):
        cols = np.flatnonzero(prog.col_type == t)
        cols = cols[(pinned[prog.col_job[cols]] < 0) | (prog.col_lo[cols] > 0.5)]
        cols = cols[np.argsort(prog.col_job[cols], kind="stable")]
        owners = prog.col_job[cols]
        cuts = np.flatnonzero(np.diff(owners)) + 1
        entries = []
        for part in np.split(cols, cuts) if cols.size else []:
            j = int(prog.col_job[part[0]])
            entries.append((j, part, prog.col_gpus[part], prog.c[part], bool(pinned[j] >= 0)))
        on_type.append(entries)
        blocked = np.ones(jobs, dtype=bool)
        blocked[[e[0] for e in entries]] = False
        off_type.append(blocked)
    return Layout(jobs, on_type, off_type, pinned)


def _knapsack(prog: RoundProgram, lay: Layout, t: int, off: np.ndarray) -> tuple[float, np.ndarray]:
    """Exact choice on type ``t``: each job takes one of its type-``t`` columns or its ``off``
    cost, within the type's GPUs; a job pinned on ``t`` takes its pinned column.

    Returns (value, choice): the least total cost and per job the chosen column or -1.  The
    table of the best cost per GPU count is shifted by every column's GPUs at once through a
    strided view (no copy) of the table padded with ``inf``; the tables are kept and the choices
    read back from them.
    """
    from numpy.lib.stride_tricks import as_strided

    cap = int(prog.type_capacity[t])
    width = int(prog.col_gpus[prog.col_type == t].max(initial=0))
    padded = np.full(width + cap + 1, np.inf)
    best = padded[width:]
    best[0] = 0.0
    step = padded.strides[0]
    shifts = as_strided(best, shape=(width + 1, cap + 1), strides=(-step, step), writeable=False)
    const = float(off[lay.off_type[t]].sum())
    tables = []
    for j, _, gpus, costs, forced in lay.on_type[t]:
        tables.append(best.copy())
        take = (shifts[gpus] + costs[:, None]).min(axis=0)
        if forced:
            best[:] = take
        else:
            np.minimum(take, best + off[j], out=best)
    used = int(np.argmin(best))
    value = float(best[used]) + const
    after = float(best[used])
    choice = np.full(lay.num_jobs, -1, dtype=np.int64)
    for (j, cols, gpus, costs, forced), before in zip(reversed(lay.on_type[t]), reversed(tables), strict=True):
        if not forced and before[used] + off[j] == after:
            after = float(before[used])
            continue
        src = used - gpus
        hit = np.flatnonzero((src >= 0) & (before[np.maximum(src, 0)] + costs == after))
        choice[j] = cols[hit[0]]
        used = int(src[hit[0]])
        after = float(before[used])
    return value, choice


def lagrangian(prog: RoundProgram, lay: Layout, prices: np.ndarray, t: int) -> tuple[float, np.ndarray]:
    """A lower bound on the program, and the choice per job that attains it: every type's GPUs
    but ``t``'s priced at ``prices``, type ``t``'s capacity kept (solved exactly by
    :func:`_knapsack`).  The choice may overfill the priced types."""
    priced = prog.c + prices[prog.col_type] * prog.col_gpus
    priced[prog.col_type == t] = np.inf
    order = np.lexsort((priced, prog.col_job))
    first = order[np.concatenate([[True], np.diff(prog.col_job[order]) != 0])] if order.size else order
    off_col = np.full(lay.num_jobs, -1, dtype=np.int64)
    off_col[prog.col_job[first]] = first
    pinned = lay.pinned >= 0
    off_col[pinned] = lay.pinned[pinned]
    off = np.where(off_col >= 0, priced[np.maximum(off_col, 0)], 0.0)
    drop = ~pinned & (off >= 0)
    off[drop], off_col[drop] = 0.0, -1
    value, on_t = _knapsack(prog, lay, t, off)
    others = np.arange(prog.num_types) != t
    bound = value + prog.obj_offset - float(prices[others] @ prog.type_capacity[others])
    return bound, np.where(on_t >= 0, on_t, off_col)


def lagrangian_bound(prog: RoundProgram, lay: Layout, prices: np.ndarray, t: int) -> float:
    """The bound of :func:`lagrangian` alone."""
    return lagrangian(prog, lay, prices, t)[0]


def _as_choice(prog: RoundProgram, values: np.ndarray) -> np.ndarray:
    choice = np.full(prog.num_adaptive + prog.num_rigid, -1, dtype=np.int64)
    cols = np.flatnonzero(values > 0.5)
    choice[prog.col_job[cols]] = cols
    return choice


def _cost(prog: RoundProgram, choice: np.ndarray) -> float:
    return float(prog.c[choice[choice >= 0]].sum()) + prog.obj_offset


def _redecide(prog: RoundProgram, lay: Layout, choice: np.ndarray, t: int) -> np.ndarray:
    """Type ``t`` re-decided exactly: each job takes a column on ``t`` or keeps what it has
    elsewhere (jobs now on ``t`` may be left without GPUs)."""
    kept = np.where((choice >= 0) & (prog.col_type[np.maximum(choice, 0)] != t), choice, -1)
    off = np.where(kept >= 0, prog.c[np.maximum(kept, 0)], 0.0)
    _, on_t = _knapsack(prog, lay, t, off)
    return np.where(on_t >= 0, on_t, kept)


def _overfull(prog: RoundProgram, choice: np.ndarray) -> list[int]:
    used = np.zeros(prog.num_types)
    cols = choice[choice >= 0]
    np.add.at(used, prog.col_type[cols], prog.col_gpus[cols])
    return np.flatnonzero(used > prog.type_capacity + 1e-9).tolist()


def repair(
    prog: RoundProgram,
    lay: Layout,
    values: np.ndarray,
    target: float = -np.inf,
    max_passes: int = 4,
) -> np.ndarray:
    """A feasible 0/1 solution from ``values`` (overfull types re-decided first), improved by
    exact one-type re-decisions (module docstring) until a pass improves nothing or the cost
    reaches ``target`` (a lower bound)."""
    choice = _as_choice(prog, values)
    for t in _overfull(prog, choice):
        choice = _redecide(prog, lay, choice, t)
    best = _cost(prog, choice)
    for _ in range(max_passes):
        improved = False
        for t in range(prog.num_types):
            if best <= target + 1e-9:
                break
            new = _redecide(prog, lay, choice, t)
            cost = _cost(prog, new)
            if cost < best - 1e-9:
                choice, best, improved = new, cost, True
        if not improved:
            break
    out = np.zeros(prog.num_vars)
    out[choice[choice >= 0]] = 1.0
    return out


def core_program(prog: RoundProgram, relaxation: Relaxation, target: float) -> tuple[RoundProgram, np.ndarray]:
    """The program restricted to what every solution of cost ≤ ``target`` obeys, and the mask of
    the columns it keeps.

    For every feasible x, ``c·x − z_LP`` is a sum of non-negative terms: ``r_j·x_j`` for columns
    with reduced cost ``r_j > 0`` (at 0 in the LP), ``|r_j|·(1 − x_j)`` for ``r_j < 0`` (at 1),
    and ``d_i·s_i`` for rows with dual price ``d_i`` and slack ``s_i``.  With the budget
    ``B = target − z_LP``: columns with ``r_j > B`` are dropped, columns with ``r_j < −B`` fixed
    at 1, and each row's slack limited to ``⌊B / d_i⌋`` (a job whose dual exceeds B must get
    GPUs; a type whose GPUs are priced cannot leave more than that many idle).
    """
    budget = target - relaxation.bound
    reduced = relaxation.reduced
    keep = (reduced <= budget + 1e-6) | (prog.col_lo > 0.5)
    col_lo = np.where(reduced < -budget - 1e-6, 1.0, prog.col_lo)
    with np.errstate(divide="ignore", invalid="ignore"):
        slack = np.where(relaxation.row_prices > 1e-9, np.floor(budget / relaxation.row_prices + 1e-6), np.inf)
    row_lo = np.maximum(prog.row_lo, prog.row_hi - slack)
    return replace(prog.subset(keep), row_lo=row_lo, col_lo=col_lo[keep]), keep


@dataclass(frozen=True)
class LargeRoundResult:
    """What :func:`solve_large_round` found: a solution, the best lower bound and whether the
    solution is proven optimal."""

    values: np.ndarray
    bound: float
    proven: bool


def solve_large_round(prog: RoundProgram, relaxation: Relaxation) -> LargeRoundResult:
    """Bounds and a repaired solution (module docstring).

    The rounded LP solution is repaired; while it is above the bound, each type (highest price
    first) gives a Lagrangian bound.
    """
    lay = layout(prog)
    ceil = math.ceil if prog.integral_objective() else float
    bound = ceil(relaxation.bound - 1e-6)
    values = repair(prog, lay, round_relaxation(prog, relaxation.values), target=bound)
    z = float(prog.c @ values) + prog.obj_offset
    for t in np.argsort(-relaxation.prices, kind="stable").tolist():
        if z <= bound + 1e-9:
            break
        bound = max(bound, ceil(lagrangian_bound(prog, lay, relaxation.prices, t) - 1e-6))
    return LargeRoundResult(values, float(bound), z <= bound + 1e-9)
