"""The Sia round program solved: which configuration (GPU type and count) each job gets.

:func:`solve_round` solves the program of :mod:`pal_opt.hetero.roundprogram` to proven
optimality: first by the LP relaxation, Lagrangian knapsack bounds and knapsack repairs of
:mod:`pal_opt.hetero.bounds` (most rounds end there), then, when the bound is not met, by any
backend of :mod:`pal_opt.ilp.backends` (HiGHS, CP-SAT, CBC) on the core of columns that can
still beat the best solution found.  :attr:`RoundDecision.objective` is in the program's own
units (not hundredths).

:func:`solve_round_dp` solves the same program by a dynamic program over the GPUs used per type
(a multiple-choice knapsack): the exact oracle of the tests, usable when the product of the
types' GPU counts is small.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np

from ..errors import BackendError, OptionError
from ..ilp.program import Program
from ..options import check_time_limit
from .bounds import core_program, relax, solve_large_round
from .roundprogram import (
    LAMBDA_N,
    OBJECTIVE_SCALE,
    RoundInput,
    RoundProgram,
    build_round_program,
    round_objective,
    synthetic_round,
)

log = logging.getLogger(__name__)

__all__ = [
    "BACKEND_PARAMS",
    "DECOMPOSE_COLUMNS",
    "LAMBDA_N",
    "MAX_DP_STATES",
    "OBJECTIVE_SCALE",
    "RoundDecision",
    "RoundInput",
    "RoundProgram",
    "build_round_program",
    "round_objective",
    "solve_round",
    "solve_round_dp",
    "solve_program",
    "synthetic_round",
]

#: Largest number of states :func:`solve_round_dp` accepts.
MAX_DP_STATES = 2_000_000
#: Solver parameters for the round program, per backend: CP-SAT proves these knapsack programs
#: with its full LP relaxation (``linearization_level`` 2) in about a second where its default
#: takes tens of seconds.
BACKEND_PARAMS: dict[str, dict[str, object]] = {"cpsat": {"linearization_level": 2}}


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
    _check_solve_arguments(backend, time_limit, prune, decompose)
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


def solve_program(prog: Program, backend: str | None, time_limit: float | None) -> tuple[np.ndarray | None, str, str]:
    """Solve any configuration program (Sia's, or :mod:`pal_opt.hetero.levelprogram`'s) with a
    backend: (values rounded to integers or None if infeasible, status, backend name).

    Raises
    ------
    BackendError
        The solver stopped without a solution or a proof of infeasibility.
    """
    return _solve_backend(prog, backend, time_limit, None)


def _solve_backend(
    prog: Program, backend: str | None, time_limit: float | None, start: np.ndarray | None
) -> tuple[np.ndarray | None, str, str]:
    """(values, status, backend name) from a :mod:`pal_opt.ilp.backends` backend; values None
    when the program is infeasible (status ``infeasible``).

    A backend that stops with neither a solution nor a proof of infeasibility (HiGHS 1.14 reports
    "Solve error" on a few of these programs with per-GPU variability) is followed by the other
    installed backends in preference order, with a warning; the first answer counts.

    Raises
    ------
    BackendError
        No installed backend found a solution or a proof of infeasibility.
    """
    from ..ilp.backends import SolveOptions, available_backends, get_backend

    first = get_backend(backend)
    tried: list[str] = []
    for cls in (first, *(get_backend(n) for n in available_backends() if n != first.name)):
        options = SolveOptions(time_limit=time_limit, abs_gap=0.0, threads=1,
                               backend_params=BACKEND_PARAMS.get(cls.name, {}))
        sol = cls().solve(prog, options, start=start)
        if sol.values is None and str(sol.status) == "infeasible":
            return None, "infeasible", cls.name
        if sol.values is not None:
            if tried:
                log.warning("Sia round program: %s; solved by %s instead", "; ".join(tried), cls.name)
            return np.rint(sol.values), str(sol.status), cls.name
        tried.append(f"{cls.name} found no solution ({sol.status}: {sol.message})")
    raise BackendError(f"no backend solved the Sia round program: {'; '.join(tried)}")


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


def _check_solve_arguments(backend: object, time_limit: object, prune: object, decompose: object) -> None:
    """:func:`solve_round`'s options, checked whether or not the round needs them (a bad backend
    or time limit passed unread whenever the bounds proved the repaired solution optimal)."""
    from ..ilp.backends import get_backend

    if backend is not None:
        get_backend(backend, probe=False)  # type: ignore[arg-type]  # an unknown name: an OptionError
    check_time_limit(time_limit)
    for name, value in (("prune", prune), ("decompose", decompose)):
        if not isinstance(value, bool) and not (name == "decompose" and value is None):
            raise OptionError(f"{name} must be True or False{' or None' if name == 'decompose' else ''}, got {value!r}")


def solve_round_dp(inp: RoundInput, *, prune: bool = True) -> RoundDecision:
    """Solve one round exactly by dynamic programming over the GPUs used per type.

    The state is the GPUs used of each type (``Π (N_c g_c + 1)`` states, at most
    :data:`MAX_DP_STATES`); each job adds one of its columns or nothing.

    Raises
    ------
    OptionError
        Too many states.
    """
    _check_solve_arguments(None, None, prune, None)
    t0 = time.perf_counter()
    prog = build_round_program(inp, prune=prune)
    shape = tuple(int(c) + 1 for c in inp.type_gpus())
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


