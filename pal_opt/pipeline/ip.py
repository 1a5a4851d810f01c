"""PipeDream's partitioner as an integer program, solved by any backend of :mod:`pal_opt.ilp.backends`.

The same search as the dynamic program (:mod:`pal_opt.pipeline.tables`), written as a program
instead of a recurrence; ``formulations/pipeline_partition.md`` gives the mathematics.  For one
level and one segment (from cut ``r`` to state ``j``) on ``M`` workers:

* a *stage column* ``x[a]`` (binary) per candidate stage ``a``: the layers after a node up to a
  later state, on ``w`` workers, priced by :func:`~pal_opt.pipeline.cost.stage_time` exactly as
  the dynamic program prices it (the first stage's synchronisation divided by the inner level's
  worker count, every later stage's by 1);
* a path: one unit of flow from the segment's start to state ``j`` through the cut states (each
  stage goes from a state to a descendant of it, so a path is a chain of real cuts);
* the workers: ``sum_a w[a] x[a] = M`` (a straight pipeline has only ``w = 1`` columns);
* the bottleneck: the candidate stage times, sorted and de-duplicated, get ranks ``1..K``; the
  integer column ``rank`` is at least ``sum_{a leaving v} rank[a] x[a]`` at every node ``v``
  (a path leaves each node at most once), and the objective is ``min rank``.

Every coefficient is an integer, so HiGHS, CP-SAT and CBC solve the same program without
rounding anything, and the optimum's rank names the optimum time exactly: the time per sample is
the largest stage time of the chosen path, the same float the dynamic program finds.

Several levels are solved as the dynamic program solves them: the inner level once per real
segment (its optimum is the outer level's one-worker time of that segment), then the next level
on those times, up to one program for the whole model at the outermost level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import BackendError, OptionError
from ..ilp.program import Program
from .cost import stage_time
from .states import StateGraph
from .tables import ArrayTable

__all__ = [
    "StageProgram",
    "ProgramLevel",
    "build_stage_program",
    "solve_stage_program",
    "solve_segment",
    "solve_levels_ip",
    "real_segments",
]


@dataclass(frozen=True, eq=False)
class StageProgram:
    """The integer program of one segment at one level, and what decoding it needs.

    Attributes
    ----------
    program
        The program: one binary column per candidate stage, then the integer ``rank`` column
        (the last).
    start, end, workers
        Per stage column: its first cut (cut ``c`` lies after state ``c - 1``), its last state
        and its worker count.
    times
        Per stage column: its time per sample (:func:`~pal_opt.pipeline.cost.stage_time`).
    levels
        The distinct stage times, ascending: rank ``k`` is ``levels[k - 1]``.
    first_cut, last_state, machines
        The segment (from cut ``first_cut`` to state ``last_state``) and its worker count.
    """

    program: Program
    start: np.ndarray
    end: np.ndarray
    workers: np.ndarray
    times: np.ndarray
    levels: np.ndarray
    first_cut: int
    last_state: int
    machines: int

    def decode(self, values: np.ndarray) -> tuple[float, list[tuple[int, int, int]]]:
        """The time per sample and the stages ``(start cut, last state, workers)`` of a solution.

        Raises
        ------
        BackendError
            The solution's stage columns do not form one path that uses every worker.
        """
        chosen = np.flatnonzero(np.asarray(values[: self.times.size]) > 0.5)
        by_start = {int(self.start[a]): int(a) for a in chosen}
        stages: list[tuple[int, int, int]] = []
        cut = self.first_cut
        while cut in by_start and len(stages) < len(chosen):
            a = by_start[cut]
            stages.append((cut, int(self.end[a]), int(self.workers[a])))
            cut = int(self.end[a]) + 1
        used = sum(w for _, _, w in stages)
        if (len(stages) != len(chosen) or not stages or stages[-1][1] != self.last_state
                or used != self.machines):
            raise BackendError(f"the solver's answer to the partition program of segment ({self.first_cut}, "
                               f"{self.last_state}) is not one pipeline on {self.machines} workers")
        return float(self.times[chosen].max()), stages


def _segment_nodes(states: StateGraph, r: int, j: int) -> list[int]:
    """The states a pipeline of segment ``(r, j)`` can cut after: real from cut ``r`` and
    ancestors of ``j`` (and ``j`` itself, where the path ends)."""
    return [k for k in range(r, j + 1)
            if (r == 0 or states.is_ancestor(r - 1, k)) and (k == j or states.is_ancestor(k, j))]


def _candidate_stages(states: StateGraph, T: np.ndarray, P: np.ndarray, r: int, j: int, machines: int,
                      bandwidth: float, divisor: float, straight: bool) -> tuple[np.ndarray, ...]:
    """Per candidate stage (ordered by start cut, last state, workers): start cut, last state,
    workers, time.  Stages that cannot be priced (an infinite time) are left out."""
    nodes = _segment_nodes(states, r, j)
    widths = np.arange(1, 2 if straight else machines + 1)
    starts, ends = [], []
    for k in [r - 1, *nodes[:-1]]:
        for e in nodes:
            if e > k and (k == r - 1 or states.is_ancestor(k, e)):
                starts.append(k + 1)
                ends.append(e)
    start = np.repeat(np.asarray(starts, dtype=np.int64), widths.size)
    end = np.repeat(np.asarray(ends, dtype=np.int64), widths.size)
    workers = np.tile(widths, len(starts))
    divisors = np.where(start == r, divisor, 1.0)
    times = np.empty(start.size)
    for w in widths.tolist():  # stage_time with one replica count at a time: the dynamic program's floats
        at = workers == w
        times[at] = stage_time(T[start[at], end[at]], P[start[at], end[at]], w, bandwidth, divisors[at])
    keep = np.isfinite(times)
    return start[keep], end[keep], workers[keep], times[keep]


def _within_bound(start: np.ndarray, end: np.ndarray, workers: np.ndarray, times: np.ndarray, work: np.ndarray,
                  r: int, j: int, machines: int, bound: float) -> np.ndarray:
    """Which candidate stages a pipeline of time per sample at most ``bound`` can use.

    ``work[c, l]`` is a lower bound on the segment's one-worker time that adds up along a
    pipeline (the layers' compute time over the inner levels' worker count).  A stage of time at
    most ``bound`` on ``w`` workers has ``work <= w * bound`` (its time is at least its one-worker
    time over ``w``), so the stages before it need at least ``ceil(work before / bound)`` workers
    and those after it ``ceil(work after / bound)``: a stage is kept when its time is at most
    ``bound`` and those, with its own ``w``, fit in ``machines``.
    """
    before = np.where(start > r, work[r, np.maximum(start - 1, 0)], 0.0)
    after = np.where(end < j, work[np.minimum(end + 1, work.shape[0] - 1), j], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero bound leaves no room for positive work
        need = (np.where(before > 0, np.ceil(before / bound - 1e-9), 0.0) + workers
                + np.where(after > 0, np.ceil(after / bound - 1e-9), 0.0))
    return np.asarray((times <= bound) & (need <= machines))


#: Solver parameters for these programs, per backend.  Measured on alexnet and vgg16 (8 workers,
#: 2,024 and 6,560 stage columns): HiGHS spends 20 s and more probing the binaries in presolve
#: and then solves the rest at the root, and without presolve takes about 1 and 4 s; CP-SAT
#: likewise probes for seconds (``cp_model_probing_level`` 0 halves its time) and proves the
#: bound faster with its full LP relaxation (``linearization_level`` 2): about 2 and 11 s.
BACKEND_PARAMS: dict[str, dict[str, object]] = {
    "highs": {"presolve": "off"},
    "cpsat": {"linearization_level": 2, "cp_model_probing_level": 0},
}


def build_stage_program(states: StateGraph, T: np.ndarray, P: np.ndarray, r: int, j: int, machines: int,
                        bandwidth: float, *, divisor: float = 1.0, straight: bool = False,
                        bound: float | None = None, work: np.ndarray | None = None) -> StageProgram:
    """The integer program of segment ``(r, j)`` on ``machines`` workers of one level.

    Parameters
    ----------
    states
        The cut states.
    T, P
        The level's segment times and parameter bytes, ``(n + 1) x n``
        (:meth:`~pal_opt.pipeline.tables.ArrayTable.segment_tables`, or the inner level's optima).
    r, j
        The segment: from cut ``r`` (after state ``r - 1``; 0 is the input) to state ``j``.
    machines, bandwidth, divisor, straight
        The level (see :func:`~pal_opt.pipeline.cost.stage_time`).
    bound, work
        Given: only the stages a pipeline of time per sample at most ``bound`` can use
        (:func:`_within_bound`; ``work`` is the additive lower bound of ``T``, ``T`` itself by
        default).  The program is then feasible exactly when the optimum is at most ``bound``, and
        its optimum is the optimum.

    Returns
    -------
    StageProgram
        Columns ``x_{start}_{end}_w{w}`` (a stage from cut ``start`` to cut ``end`` on ``w``
        workers, as PipeDream prints stages), then ``rank``.  Rows ``flow_c{c}`` (one unit of flow
        from cut ``r`` to cut ``j + 1``; cut ``c`` lies after state ``c - 1``), ``workers`` and
        ``bottleneck_c{c}``.
    """
    start, end, workers, times = _candidate_stages(states, T, P, r, j, machines, bandwidth, divisor, straight)
    if bound is not None:
        keep = _within_bound(start, end, workers, times, T if work is None else work, r, j, machines, bound)
        start, end, workers, times = start[keep], end[keep], workers[keep], times[keep]
    return _program(start, end, workers, times, r, j, machines)


def _program(start: np.ndarray, end: np.ndarray, workers: np.ndarray, times: np.ndarray, r: int, j: int,
             machines: int, *, decide: bool = False) -> StageProgram:
    """The program over the given candidate stages (see :func:`build_stage_program`); with
    ``decide``, the objective is 0: any pipeline on these stages is an answer."""
    levels, inverse = np.unique(times, return_inverse=True)
    rank = inverse.reshape(-1) + 1.0
    cols, nvar = start.size, start.size + 1
    cuts = sorted({r, j + 1, *start.tolist(), *(end + 1).tolist()})
    row_of = {c: i for i, c in enumerate(cuts)}
    leave = np.array([row_of[c] for c in start.tolist()], dtype=np.int64)
    enter = np.array([row_of[c] for c in (end + 1).tolist()], dtype=np.int64)
    arc, nodes = np.arange(cols), len(cuts)
    flow = sp.coo_matrix((np.concatenate((-np.ones(cols), np.ones(cols))),
                          (np.concatenate((leave, enter)), np.concatenate((arc, arc)))), shape=(nodes, nvar))
    used = sp.coo_matrix((workers.astype(float), (np.zeros(cols, dtype=np.int64), arc)), shape=(1, nvar))
    tails = sorted(set(start.tolist()))  # the cuts a stage can start at: all but the last
    tail_of = {c: i for i, c in enumerate(tails)}
    out_row = np.array([tail_of[c] for c in start.tolist()], dtype=np.int64)
    bottleneck = sp.coo_matrix((np.concatenate((rank, -np.ones(len(tails)))),
                                (np.concatenate((out_row, np.arange(len(tails)))),
                                 np.concatenate((arc, np.full(len(tails), cols))))), shape=(len(tails), nvar))
    balance = np.zeros(nodes)
    balance[row_of[r]], balance[row_of[j + 1]] = -1.0, 1.0
    program = Program.from_arrays(
        c=np.concatenate((np.zeros(cols), [0.0 if decide else 1.0])),
        A=sp.vstack((flow, used, bottleneck)).tocsr(),
        row_lo=np.concatenate((balance, [machines], np.full(len(tails), -np.inf))),
        row_hi=np.concatenate((balance, [machines], np.zeros(len(tails)))),
        col_lo=np.concatenate((np.zeros(cols), [1.0])),
        col_hi=np.concatenate((np.ones(cols), [max(1, levels.size)])),
        integrality=np.ones(nvar, dtype=bool),
        var_names=[f"x_{s}_{e + 1}_w{w}" for s, e, w in zip(start.tolist(), end.tolist(), workers.tolist(), strict=True)]
        + ["rank"],
        row_names=[f"flow_c{c}" for c in cuts] + ["workers"] + [f"bottleneck_c{c}" for c in tails],
    )
    return StageProgram(program, start, end, workers, times, levels, r, j, machines)


def solve_stage_program(problem: StageProgram, backend: str | None = None, *,
                        time_limit: float | None = None) -> tuple[float, list[tuple[int, int, int]]] | None:
    """Solve one segment's program to proven optimality: ``(time per sample, stages)``, or None
    when the segment has no pipeline on its workers (a straight pipeline longer than the segment).

    Raises
    ------
    BackendError
        The solver stopped without a proven optimum (a time limit) or returned a bad answer.
    """
    from ..ilp.backends import SolveOptions, SolverStatus, get_backend

    if problem.times.size == 0:
        return None
    cls = get_backend(backend)
    options = SolveOptions(time_limit=time_limit, abs_gap=0.0, threads=1, backend_params=BACKEND_PARAMS.get(cls.name, {}))
    sol = cls().solve(problem.program, options)
    if sol.status == SolverStatus.INFEASIBLE:
        return None
    if sol.status != SolverStatus.OPTIMAL or sol.values is None:
        raise BackendError(f"{cls.name} did not prove an optimum of the partition program of segment "
                           f"({problem.first_cut}, {problem.last_state}) ({sol.status}: {sol.message})")
    return problem.decode(np.rint(sol.values))


#: Growth of the bound between two threshold programs (:func:`solve_segment`).
BOUND_GROWTH = 1.25


def solve_segment(states: StateGraph, T: np.ndarray, P: np.ndarray, r: int, j: int, machines: int,
                  bandwidth: float, *, divisor: float = 1.0, straight: bool = False, work: np.ndarray | None = None,
                  backend: str | None = None, time_limit: float | None = None,
                  ) -> tuple[float, list[tuple[int, int, int]], int] | None:
    """The optimum of segment ``(r, j)`` by threshold programs: ``(time per sample, stages,
    programs solved)``, or None when the segment has no pipeline on its workers.

    A threshold program (:func:`_within_bound`, objective 0) on the candidate stages of time at
    most ``τ`` has a solution exactly when the optimum is at most ``τ``.  The search over the
    distinct candidate times ``τ_1 < … < τ_K``: from the lower bound ``work[r, j] / machines``
    (every worker busy with the segment's additive work), bounds growing by
    :data:`BOUND_GROWTH` until one is feasible, then bisection between the last infeasible and
    the first feasible.  When ``τ_k`` is feasible and ``τ_{k-1}`` is not (or ``k = 1``), the
    solution at ``τ_k`` is a pipeline whose largest stage time is ``τ_k``, the optimum
    (``formulations/pipeline_partition.md``).
    """
    start, end, workers, times = _candidate_stages(states, T, P, r, j, machines, bandwidth, divisor, straight)
    if times.size == 0:
        return None
    W = T if work is None else work
    levels = np.unique(times)
    probes = 0

    def probe(k: int) -> tuple[float, list[tuple[int, int, int]]] | None:
        nonlocal probes
        probes += 1
        keep = _within_bound(start, end, workers, times, W, r, j, machines, float(levels[k]))
        problem = _program(start[keep], end[keep], workers[keep], times[keep], r, j, machines, decide=True)
        return solve_stage_program(problem, backend, time_limit=time_limit)

    def rank(t: float) -> int:
        return int(np.searchsorted(levels, t))

    low, high, best, bound = -1, levels.size - 1, None, float(W[r, j]) / machines
    while best is None:  # bracket the optimum: grow the bound until a program is feasible
        at = max(low + 1, min(rank(bound * (1 - 1e-12)), high))
        best = probe(at)
        if best is None:
            if at == high:
                return None
            low, bound = at, float(levels[at]) * BOUND_GROWTH
    high, descend = rank(best[0]), True
    while high - low > 1:  # low: infeasible (or none); high: the best pipeline found's rank
        found = probe(high - 1 if descend else (low + high) // 2)
        if found is None:
            low, descend = (high - 1 if descend else (low + high) // 2), False
        else:
            best, high, descend = found, rank(found[0]), not descend
    return best[0], best[1], probes


@dataclass(eq=False)
class ProgramLevel:
    """One level solved by integer programs; it reads back like the dynamic program's
    :class:`~pal_opt.pipeline.tables.LevelTable` (:class:`~pal_opt.pipeline.tables.SolvedLevel`).

    Attributes
    ----------
    T, P
        The level's segment times and parameter bytes (``(n + 1) x n``).
    machines, bandwidth, divisor, straight
        The level.
    optimum
        ``(n + 1) x n``: the optimum time per sample of each solved segment (``inf`` elsewhere):
        the next level's ``T``.
    stages
        The optimum's stages per solved segment ``(r, j)``.
    programs
        Programs solved at this level.
    """

    T: np.ndarray
    P: np.ndarray
    machines: int
    bandwidth: float
    divisor: float
    straight: bool
    optimum: np.ndarray
    stages: dict[tuple[int, int], list[tuple[int, int, int]]] = field(default_factory=dict)
    programs: int = 0

    def time(self, r: int, j: int) -> float:
        return float(self.T[r, j])

    def params(self, r: int, j: int) -> float:
        return float(self.P[r, j])

    def split(self, r: int, j: int) -> list[tuple[int, int, int]]:
        return list(self.stages[(r, j)])


def real_segments(states: StateGraph) -> list[tuple[int, int]]:
    """Every real segment ``(r, j)``: from the input (``r = 0``) to any state, or from the cut
    after state ``r - 1`` to a descendant ``j`` of it."""
    out = []
    for j in range(states.n):
        out.append((0, j))
        out += [(r, j) for r in range(1, j + 1) if states.is_ancestor(r - 1, j)]
    return sorted(out)


def solve_levels_ip(states: StateGraph, levels: Sequence[tuple[int, float]], *, straight: bool = False,
                    backend: str | None = None, time_limit: float | None = None) -> list[ProgramLevel]:
    """Solve every level by integer programs, innermost first (the counterpart of
    :func:`~pal_opt.pipeline.tables.solve_levels`).

    Inner levels solve one program per real segment (:func:`real_segments`); the outermost level
    one program, for the whole model.  ``time_limit`` applies to each program.
    """
    T, P = ArrayTable.segment_tables(states)
    raw, inner = T, 1
    divisor = 1.0
    out: list[ProgramLevel] = []
    for index, (m, b) in enumerate(levels):
        final = index == len(levels) - 1
        level = ProgramLevel(T, P, m, b, divisor, straight, np.full(T.shape, np.inf))
        for r, j in ([(0, states.n - 1)] if final else real_segments(states)):
            solved = solve_segment(states, T, P, r, j, m, b, divisor=divisor, straight=straight, work=raw / inner,
                                   backend=backend, time_limit=time_limit)
            if solved is not None:
                level.optimum[r, j], level.stages[(r, j)], used = solved
                level.programs += used
        out.append(level)
        T, divisor, inner = level.optimum, float(m), inner * m
    if (0, states.n - 1) not in out[-1].stages:
        raise OptionError(f"a straight pipeline on {math.prod(m for m, _ in levels)} workers needs at least as "
                          f"many cut states in a chain; the profile has {states.n} states")
    return out

