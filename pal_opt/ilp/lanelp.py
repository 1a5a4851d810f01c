"""LP-guided GPU-type lanes: a start placement that takes each job's type from the LP relaxation.

With GPU types a job of several lanes (one per usable type) must go to one of them, and the
greedy starts (:mod:`pal_opt.ilp.heuristic`) choose lanes job by job: by size, or by regret over
each lane's mean factor.  Neither sees how the jobs then pack: on 2,048 GPUs of three types with
Sia's throughputs the regret start of one round (``benchmarks/types_scale.py``, seed 3) is 1.4 %
above the LP bound, while packing the same jobs on the lanes the LP relaxation chose is 0.5 %
better.  :func:`lp_lane_start` therefore

1. takes an optimal solution of the round program's LP relaxation (HiGHS's, read with the bound:
   :func:`pal_opt.ilp.solve.solve_ilp` has HiGHS solve typed rounds' LPs under every backend, so
   every backend gets the same start; else, without HiGHS installed, solved with SciPy's HiGHS)
   and reads, for every job type, how many of its
   jobs the LP puts on each lane (:func:`lane_mass`);
2. rounds those counts (:func:`round_lane_counts`): integer counts per (job type, lane) that
   sum to the type's jobs and fit the free GPUs of every set of GPU types (Hall's condition: the
   jobs whose lanes lie inside a set of types need no more GPUs than that set has free), as
   close as possible to the LP's (least GPUs moved), by a small integer program;
3. gives the jobs of each type those lanes in queue order and places them with the packing
   greedy (:func:`~pal_opt.ilp.heuristic.packing_greedy` with ``lanes``).

The result is a start placement like the others (source ``"packing-lp"``): priced, it is used
only when it is the cheapest; None when any step fails (the rounding finds no counts, a job finds
no GPUs), which leaves the other starts.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp

from ..gputypes import free_per_type, has_types
from ..model import GpuState, JobId
from .formulation import KIND_Z, Formulation
from .heuristic import packing_greedy

__all__ = ["applies", "estimated_seconds", "lane_mass", "lane_types", "round_lane_counts", "lp_lane_start"]

#: Seconds for the rounding and the packing at 2,048 GPUs (0.06-0.2 s measured, 0.25 with room).
ROUND_AND_PACK_SECONDS = 0.25
#: Seconds per matrix entry of SciPy's LP solve when the backend has no LP solution to give
#: (1.0-2.3 s at 190,000-200,000 entries on a loaded two-core machine).
LP_SECONDS_PER_ENTRY = 1e-5

#: Up to this many GPU types every set of types gets a Hall row; above, single types and all.
_HALL_MAX_TYPES = 8


def applies(form: Formulation) -> bool:
    """Whether the round has GPU types and a job type with several lanes, and every admitted job
    is placed by slot columns (no keep or drop columns: running jobs whose move is charged)."""
    return (has_types(form.instance) and any(len(jt.profiles) > 1 for jt in form.types)
            and bool(np.all(form.var_kind[form.var_type >= 0] <= KIND_Z)))


def estimated_seconds(form: Formulation, have_values: bool) -> float:
    """What :func:`lp_lane_start` may take: the rounding and packing, and SciPy's LP unless the
    LP's values are given."""
    return ROUND_AND_PACK_SECONDS + (0.0 if have_values else LP_SECONDS_PER_ENTRY * form.A.nnz)


def lane_mass(form: Formulation, values: np.ndarray | None = None) -> np.ndarray | None:
    """The LP relaxation's jobs per (job type, lane): an array (job types × their most lanes),
    entry ``[t, k]`` for the lane ``form.types[t].profiles[k]``; None if the LP was not solved.
    ``values``: the LP's optimal column values when known (the backend's, from its bound), else
    the LP is solved here (SciPy's HiGHS dual simplex)."""
    x = _lp_values(form) if values is None else np.asarray(values, dtype=np.float64)
    if x is None or x.size != form.num_vars:
        return None
    slot = form.var_kind <= KIND_Z
    mass = np.zeros((len(form.types), max(len(jt.profiles) for jt in form.types)))
    assert form.var_profile is not None
    for t, jt in enumerate(form.types):
        of_t = slot & (form.var_type == t)
        for k, p in enumerate(jt.profiles):
            mass[t, k] = float(x[of_t & (form.var_profile == p)].sum())
    return mass


def _lp_values(form: Formulation) -> np.ndarray | None:
    """The LP relaxation's optimal column values (None if SciPy's HiGHS did not solve it)."""
    import scipy.optimize as so

    lo, hi = np.asarray(form.row_lo), np.asarray(form.row_hi)
    eq = lo == hi
    ub = ~eq & np.isfinite(hi)
    lb = ~eq & np.isfinite(lo)
    A = form.A.tocsr()
    A_ub = sp.vstack([A[np.flatnonzero(ub)], -A[np.flatnonzero(lb)]]).tocsr()
    b_ub = np.r_[hi[ub], -lo[lb]]
    res = so.linprog(np.asarray(form.c), A_ub=A_ub if A_ub.shape[0] else None, b_ub=b_ub if b_ub.size else None,
                     A_eq=A[np.flatnonzero(eq)], b_eq=hi[eq], bounds=np.column_stack([form.col_lo, form.col_hi]),
                     method="highs-ds")
    return np.asarray(res.x, dtype=np.float64) if res.status == 0 else None


def lane_types(form: Formulation) -> dict[int, tuple[int, ...]]:
    """The GPU types (positions in ``cluster.type_names``) of each profile's lane: the types of the
    free GPUs the profile gives a level."""
    cl = form.instance.cluster
    on = form.gpu_type >= 0
    out = {}
    for p, prof in enumerate(form.profiles):
        inside = np.zeros(on.size, dtype=bool)
        inside[on] = form.type_levels[form.gpu_type[on], p] < prof.num_levels
        out[p] = tuple(int(u) for u in np.unique(cl.type_of[inside]))
    return out


def round_lane_counts(form: Formulation, mass: np.ndarray) -> np.ndarray | None:
    """Integer jobs per (job type, lane) (module docstring, step 2); None if none fit."""
    import scipy.optimize as so

    cl = form.instance.cluster
    free = free_per_type(cl, cl.state == GpuState.FREE)
    types_of = lane_types(form)
    keys = [(t, k) for t, jt in enumerate(form.types) for k in range(len(jt.profiles))]
    n = len(keys)
    d = np.array([form.types[t].demand for t, _ in keys], dtype=np.float64)
    m = np.array([mass[t, k] for t, k in keys])
    # columns: counts n (integer), then deviations e ≥ |n − m|; minimise Σ d·e
    rows: list[np.ndarray] = []
    lo: list[float] = []
    hi: list[float] = []
    for t, jt in enumerate(form.types):
        r = np.zeros(2 * n)
        r[[i for i, (u, _) in enumerate(keys) if u == t]] = 1.0
        rows.append(r)
        lo.append(jt.count)
        hi.append(jt.count)
    lanes = [set(types_of[form.types[t].profiles[k]]) for t, k in keys]
    for S in _type_sets(cl.num_types):
        r = np.zeros(2 * n)
        r[:n] = [di if lane <= S else 0.0 for di, lane in zip(d, lanes, strict=True)]
        rows.append(r)
        lo.append(-np.inf)
        hi.append(float(free[list(S)].sum()))
    dev = np.hstack([np.eye(n), -np.eye(n)])
    A = np.vstack([*rows, dev, np.hstack([-np.eye(n), -np.eye(n)])])
    lo += [-np.inf] * (2 * n)
    hi += [*m, *(-m)]
    res = so.milp(np.r_[np.zeros(n), d], constraints=so.LinearConstraint(A, lo, hi),
                  integrality=np.r_[np.ones(n), np.zeros(n)], bounds=so.Bounds(0, np.inf))
    if res.status != 0 or res.x is None:
        return None
    out = np.zeros_like(mass, dtype=np.int64)
    for i, (t, k) in enumerate(keys):
        out[t, k] = int(round(res.x[i]))
    return out


def _type_sets(num_types: int) -> list[set[int]]:
    """The sets of GPU types that get a Hall row."""
    if num_types > _HALL_MAX_TYPES:
        return [{u} for u in range(num_types)] + [set(range(num_types))]
    return [set(c) for r in range(1, num_types + 1) for c in itertools.combinations(range(num_types), r)]


def lp_lane_start(form: Formulation, values: np.ndarray | None = None) -> dict[JobId, tuple[int, ...]] | None:
    """The packing greedy's placement on the LP's rounded lanes (module docstring); None when it
    does not apply or a step fails.  ``values``: the LP's optimal column values, if known."""
    if not applies(form):
        return None
    mass = lane_mass(form, values)
    counts = None if mass is None else round_lane_counts(form, mass)
    if counts is None:
        return None
    lanes: dict[int, int] = {}
    for t, jt in enumerate(form.types):
        jobs = iter(jt.jobs)
        for k, p in enumerate(jt.profiles):
            for _ in range(int(counts[t, k])):
                lanes[next(jobs)] = p
    placement = packing_greedy(form, lanes=lanes)
    if placement is None or len(placement) != len(form.admitted):
        return None
    return placement
