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

Several levels: the outermost level searches the whole model once, its segment times (the inner
level's optima) first replaced by lower bounds (the compute over the inner worker count) and made
exact only for the segments its programs choose (:class:`SegmentTimes`, :meth:`_Threshold.probe`);
each of those is a search at the inner level, lazy over the level below in the same way.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import progress
from ..errors import BackendError, InfeasiblePartitionError
from ..ilp.program import Program
from .cost import stage_time
from .states import StateGraph, straight_problem
from .tables import ArrayTable

__all__ = [
    "StageProgram",
    "ProgramLevel",
    "build_stage_program",
    "solve_stage_program",
    "solve_segment",
    "solve_levels_ip",
    "real_segments",
    "SegmentTimes",
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
    times = _stage_times(T, P, start, end, workers, r, bandwidth, divisor)
    keep = np.isfinite(times)
    return start[keep], end[keep], workers[keep], times[keep]


def _stage_times(T: np.ndarray, P: np.ndarray, start: np.ndarray, end: np.ndarray, workers: np.ndarray, r: int,
                 bandwidth: float, divisor: float) -> np.ndarray:
    """The time per sample of each stage ``(start, end, workers)`` of segment ``(r, ·)``:
    :func:`~pal_opt.pipeline.cost.stage_time` with one replica count at a time (the dynamic
    program's floats), the first stage's synchronisation divided by ``divisor``."""
    divisors = np.where(start == r, divisor, 1.0)
    times = np.empty(start.size)
    for w in np.unique(workers).tolist():
        at = workers == w
        times[at] = stage_time(T[start[at], end[at]], P[start[at], end[at]], w, bandwidth, divisors[at])
    return times


def _within_bound(start: np.ndarray, end: np.ndarray, workers: np.ndarray, times: np.ndarray, work: np.ndarray,
                  r: int, j: int, machines: int, bound: float) -> np.ndarray:
    """Which candidate stages a pipeline of time per sample at most ``bound`` can use.

    ``work[c, l]`` is a lower bound on the segment's one-worker time that adds up along a
    pipeline (the layers' compute time over the inner levels' worker count).  A stage of time at
    most ``bound`` on ``w`` workers has ``work <= w * bound`` (its time is at least its one-worker
    time over ``w``), so the stages before it need at least ``ceil(work before / bound)`` workers
    and those after it ``ceil(work after / bound)``: a stage is kept when its time is at most
    ``bound`` and those, with its own ``w``, fit in ``machines``.

    A worker count past the largest float (work of 1e305 s against a bound of milliseconds, from
    the finite layer times of 1e308 ms the reader accepts) is infinite, more than any level has:
    the stage is dropped, as it should be, so that overflow is no warning.
    """
    before = np.where(start > r, work[r, np.maximum(start - 1, 0)], 0.0)
    after = np.where(end < j, work[np.minimum(end + 1, work.shape[0] - 1), j], 0.0)
    # a zero bound leaves no room for positive work, and an overflow is an infinite count (above)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
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
             machines: int, *, decide: bool = False, cost: np.ndarray | None = None) -> StageProgram:
    """The program over the given candidate stages (see :func:`build_stage_program`); with
    ``decide``, the objective is 0 (any pipeline on these stages is an answer) or, given
    ``cost``, the sum of the chosen stages' costs."""
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
        c=np.concatenate((np.zeros(cols) if cost is None else cost.astype(float), [0.0 if decide else 1.0])),
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
#: Slack of the lower bounds of :meth:`SegmentTimes.bounded`, relative to the segment and to the
#: whole model: the inner optimum of a segment is at least its compute over the inner worker
#: count in exact arithmetic, and its float differs by rounding (prefix differences) only.
BOUND_SLACK = 1e-12


@dataclass(eq=False)
class SegmentTimes:
    """One level's ``T`` (each segment's time on one worker of the level), exact or, until a
    program needs it, a lower bound.

    Attributes
    ----------
    value
        ``(n + 1) x n``: the exact time where ``known``, a lower bound elsewhere (``inf``: not a
        real segment, or no pipeline).
    known
        Which entries are exact.
    solve
        Computes one entry exactly (the inner level's optimum of the segment; ``inf`` when it has
        no pipeline); None when every entry is known.
    solved
        Entries computed by ``solve``.
    """

    value: np.ndarray
    known: np.ndarray
    solve: Callable[[int, int], float] | None = None
    solved: int = 0

    @classmethod
    def exact(cls, T: np.ndarray) -> SegmentTimes:
        """Every entry known: the innermost level's compute times."""
        return cls(np.array(T, dtype=float), np.ones(np.shape(T), dtype=bool))

    @classmethod
    def bounded(cls, work: np.ndarray, solve: Callable[[int, int], float]) -> SegmentTimes:
        """Every real segment unknown, bounded below by its compute over the inner worker count
        (``work``, less :data:`BOUND_SLACK`): the inner optimum's largest stage time is at least
        the average over the inner workers of the compute the stages share."""
        total = float(np.max(work[0], initial=0.0))
        with np.errstate(invalid="ignore"):
            bound = np.maximum(work * (1 - BOUND_SLACK) - BOUND_SLACK * total, 0.0)
        return cls(np.where(np.isfinite(work), bound, np.inf), ~np.isfinite(work), solve)

    def resolve(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Compute the entries ``(s, e)`` not known yet.

        Raises
        ------
        RuntimeError
            An exact time below its lower bound (the bound would have been wrong).
        """
        for s, e in pairs:
            if self.known[s, e]:
                continue
            assert self.solve is not None
            progress.report(stage=f"{_SOLVED}{self.solved}")
            exact = self.solve(s, e)
            if exact < self.value[s, e]:  # pragma: no cover - the bound is proven
                raise RuntimeError(f"segment ({s}, {e}): the inner optimum {exact!r} is below its bound")
            self.value[s, e], self.known[s, e] = exact, True
            self.solved += 1


#: Prefer stages of known time in a threshold program (objective: the number of chosen stages
#: whose segment is still only bounded), so that fewer inner segments are solved.
PREFER_KNOWN = True
#: Rounds of one threshold program after which every bounded stage it keeps is solved at once.
BATCH_AFTER = 10


@dataclass(eq=False)
class _Threshold:
    """The threshold programs of one segment over times that are partly lower bounds
    (:func:`solve_segment`): the candidate stages and their current times."""

    states: StateGraph
    times: SegmentTimes
    P: np.ndarray
    r: int
    j: int
    machines: int
    bandwidth: float
    divisor: float
    work: np.ndarray
    backend: str | None
    time_limit: float | None
    start: np.ndarray = field(init=False)
    end: np.ndarray = field(init=False)
    workers: np.ndarray = field(init=False)
    t: np.ndarray = field(init=False)
    probes: int = 0

    def setup(self, straight: bool) -> int:
        """Collect the candidate stages; returns their count."""
        self.start, self.end, self.workers, self.t = _candidate_stages(
            self.states, self.times.value, self.P, self.r, self.j, self.machines, self.bandwidth, self.divisor,
            straight)
        return int(self.t.size)

    def levels(self, above: float, below: float) -> np.ndarray:
        """The distinct current stage times in ``(above, below)``, ascending."""
        t = self.t[(self.t > above) & (self.t < below)]
        return np.unique(t)

    def probe(self, bound: float) -> tuple[float, list[tuple[int, int, int]]] | None:
        """A pipeline of time per sample at most ``bound`` (every stage exact), or None: none exists.

        Each round solves the threshold program on the current times; a pipeline that uses a
        bounded segment has those segments solved exactly, their stages repriced, and the
        program solved again (the repriced stages may now exceed ``bound``).
        """
        for round_ in itertools.count():
            self.probes += 1
            keep = _within_bound(self.start, self.end, self.workers, self.t, self.work, self.r, self.j,
                                 self.machines, bound) & np.isfinite(self.t)  # inf: no inner pipeline
            unknown = ~self.times.known[self.start[keep], self.end[keep]]
            if round_ >= BATCH_AFTER and unknown.any():  # resolve every bounded stage that is still kept
                self._learn(sorted(set(zip(self.start[keep][unknown].tolist(), self.end[keep][unknown].tolist(),
                                           strict=True))))
                continue
            problem = _program(self.start[keep], self.end[keep], self.workers[keep], self.t[keep], self.r, self.j,
                               self.machines, decide=True,
                               cost=unknown.astype(float) if PREFER_KNOWN and unknown.any() else None)
            found = solve_stage_program(problem, self.backend, time_limit=self.time_limit)
            if found is None:
                return None
            pending = [(s, e) for s, e, _ in found[1] if not self.times.known[s, e]]
            if not pending:
                return found
            self._learn(pending)
        raise AssertionError("unreachable")  # pragma: no cover

    def _learn(self, pending: list[tuple[int, int]]) -> None:
        """Solve the segments ``pending`` exactly and reprice their stages."""
        self.times.resolve(pending)
        key = self.end.max() + 1
        again = np.isin(self.start * key + self.end, [s * key + e for s, e in pending])
        self.t[again] = _stage_times(self.times.value, self.P, self.start[again], self.end[again],
                                     self.workers[again], self.r, self.bandwidth, self.divisor)


def solve_segment(states: StateGraph, T: np.ndarray | SegmentTimes, P: np.ndarray, r: int, j: int, machines: int,
                  bandwidth: float, *, divisor: float = 1.0, straight: bool = False, work: np.ndarray | None = None,
                  backend: str | None = None, time_limit: float | None = None,
                  ) -> tuple[float, list[tuple[int, int, int]], int] | None:
    """The optimum of segment ``(r, j)`` by threshold programs: ``(time per sample, stages,
    programs solved)``, or None when the segment has no pipeline on its workers.

    ``T`` is the level's segment times, or a :class:`SegmentTimes` whose unknown entries are
    lower bounds, computed when a threshold program's pipeline uses them (:meth:`_Threshold.probe`).
    A threshold program on the stages of (current) time at most ``τ`` is infeasible only when
    the optimum exceeds ``τ``, and its pipelines, once exact, are pipelines of time at most ``τ``.
    The search: from the lower bound ``work[r, j] / machines``, bounds growing by
    :data:`BOUND_GROWTH` (to the next current stage time) until a pipeline is found (the last
    resort: no bound at all), then the largest current stage time below the best pipeline's
    time, alternating with bisection, between the last infeasible bound ``lo`` and the best
    pipeline's time ``hi``.  With no current stage time in ``(lo, hi)`` the best pipeline is the
    optimum: an optimum pipeline below ``hi`` had, when ``lo`` was found infeasible, a stage
    above ``lo``, and times only grow (``formulations/pipeline_partition.md``).
    """
    times = T if isinstance(T, SegmentTimes) else SegmentTimes.exact(T)
    W = times.value if work is None else work
    search = _Threshold(states, times, P, r, j, machines, bandwidth, divisor, W, backend, time_limit)
    if search.setup(straight) == 0:
        return None
    lo, best, bound = -math.inf, None, float(W[r, j]) / machines
    while best is None:  # bracket the optimum: grow the bound until a program is feasible
        above = search.levels(lo, math.inf)
        above = above[above >= bound * (1 - 1e-12)]
        tau = float(above[0]) if above.size else math.inf
        best = search.probe(tau)
        if best is None:
            if tau == math.inf:
                return None
            lo, bound = tau, tau * BOUND_GROWTH
    descend = True
    while True:  # lo: infeasible (or none); best: the best pipeline found
        inside = search.levels(lo, best[0])
        if inside.size == 0:
            return best[0], best[1], search.probes
        tau = float(inside[-1] if descend else inside[(inside.size - 1) // 2])
        found = search.probe(tau)
        if found is None:
            lo, descend = tau, False
        else:
            best, descend = found, not descend


@dataclass(eq=False)
class ProgramLevel:
    """One level solved by integer programs; it reads back like the dynamic program's
    :class:`~pal_opt.pipeline.tables.LevelTable` (:class:`~pal_opt.pipeline.tables.SolvedLevel`).

    Attributes
    ----------
    T, P
        The level's segment times and parameter bytes (``(n + 1) x n``); above the innermost
        level, ``T`` is exact only for the segments the inner level solved (``times.known``), a
        lower bound elsewhere.
    machines, bandwidth, divisor, straight
        The level.
    optimum
        ``(n + 1) x n``: the optimum time per sample of each solved segment (``inf`` elsewhere,
        and where the segment has no pipeline): the next level's exact ``T``.
    stages
        The optimum's stages per solved segment ``(r, j)``.
    programs
        Programs solved at this level.
    times
        ``T`` with what is known of it (:class:`SegmentTimes`).
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
    times: SegmentTimes | None = None

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
    """Solve every level by integer programs (the counterpart of
    :func:`~pal_opt.pipeline.tables.solve_levels`): one threshold search at the outermost level,
    for the whole model, whose segment times are the inner level's optima, computed only for
    the segments its programs choose (:class:`SegmentTimes`, :func:`solve_segment`); each of
    those is a threshold search at the inner level, on that level's times, likewise.
    ``time_limit`` applies to each program.
    """
    T, P = ArrayTable.segment_tables(states)
    raw, inner, divisor = T, 1, 1.0
    times = SegmentTimes.exact(T)
    out: list[ProgramLevel] = []
    for m, b in levels:
        level = ProgramLevel(times.value, P, m, b, divisor, straight, np.full(T.shape, np.inf), times=times)
        out.append(level)
        work = raw / inner
        times = SegmentTimes.bounded(raw / (inner * m), _on_demand(states, level, times, work, backend, time_limit))
        inner, divisor = inner * m, float(m)
    with progress.adapted(_ProgressLine()):
        times.resolve([(0, states.n - 1)])
    if (0, states.n - 1) not in out[-1].stages:
        workers = math.prod(m for m, _ in levels)
        raise InfeasiblePartitionError(straight_problem(states, workers) or f"no pipeline on {workers} workers")
    return out


class _ProgressLine:
    """The partition's progress reports: without the programs' own values
    (:func:`_without_program_values`), and with the count of segment programs solved kept on
    every stage a program reports, first (``segment programs solved: 130; translating the program
    for highs``): the solver's stages replaced the count, and a long ``--method ip`` run showed
    ``translating the program for highs`` for minutes."""

    def __init__(self) -> None:
        self.count = ""

    def __call__(self, fields: dict[str, Any]) -> dict[str, Any]:
        fields = _without_program_values(fields)
        stage = fields.get("stage")
        if isinstance(stage, str) and stage.startswith(_SOLVED):
            self.count = stage
        elif isinstance(stage, str) and self.count:
            fields["stage"] = f"{self.count}; {stage}"  # the count first: a narrow terminal cuts the end
        return fields


_SOLVED = "segment programs solved: "


def _without_program_values(fields: dict[str, Any]) -> dict[str, Any]:
    """A progress report of one of the partition's programs without the solver's incumbent, bound
    and gap: they are that program's objective (a threshold program's count of stages whose time
    is still a bound, mostly 0; or an inner segment's), not the partition's time per sample, and
    a live line showed them as ``incumbent 0.0000, bound 0.0000``."""
    return {k: v for k, v in fields.items() if k not in ("incumbent", "bound", "gap")}


def _on_demand(states: StateGraph, level: ProgramLevel, times: SegmentTimes, work: np.ndarray, backend: str | None,
               time_limit: float | None) -> Callable[[int, int], float]:
    """The optimum of one segment at ``level`` (recorded there), for the next level's times."""

    def solve(r: int, j: int) -> float:
        solved = solve_segment(states, times, level.P, r, j, level.machines, level.bandwidth,
                               divisor=level.divisor, straight=level.straight, work=work, backend=backend,
                               time_limit=time_limit)
        if solved is None:
            return math.inf
        level.optimum[r, j], level.stages[(r, j)], used = solved
        level.programs += used
        return float(level.optimum[r, j])

    return solve
