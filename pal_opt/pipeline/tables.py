"""The dynamic program of PipeDream's partitioner, one level at a time, on two engines.

For one level with ``M`` workers, bandwidth ``b`` and ``W`` workers inside each worker, the table
``best[r][j][m]`` is the best time per sample of the segment from cut ``r`` (just after state
``r - 1``; cut 0 is the input) to state ``j`` on ``m + 1`` workers::

    best[r][j][m] = min( whole segment replicated:  stage_time(T[r][j], P[r][j], m + 1, b, W),
                         min over k, w:  max(best[r][k][m - w], stage_time(T[k+1][j], P[k+1][j], w, b)) )

where ``k`` ranges over the states after cut ``r`` that are ancestors of ``j`` (the rest of the
segment ends at ``k``; the last stage holds the layers after ``k`` up to ``j``) and ``w = 1..m``
workers run the last stage.  A straight pipeline allows only ``m = 0`` for the whole segment and
``w = 1``.  Segments that are not real (cut ``r`` is not after an ancestor of ``j``) cost ``inf``.

Two engines give bit-identical tables (same floating-point operations in the same order):

* :class:`ArrayTable` (numpy): the inner min over split points and start rows is a (min, max)
  matrix product, computed one block of start rows at a time; a level that replicates stages on
  more than :data:`PRODUCT_WORKER_LIMIT` workers is solved instead by a search that evaluates only
  the split sizes whose lower bounds are below the best value found (the comment before
  ``_Triples`` argues why it skips nothing smaller), work about linear in the workers rather than
  quadratic, and the same floats;
* :class:`ListTable` (pure Python): ``min(map(max, ...))`` over list slices.  For small problems it
  is faster overall, because it does not import numpy (which costs more than the whole solve).

:func:`solve_levels` picks one by the amount of work (:func:`estimated_work`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import OptionError
from .cost import stage_time
from .states import StateGraph

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ENGINES",
    "PYTHON_WORK_LIMIT",
    "MAX_TABLE_BYTES",
    "PRODUCT_WORKER_LIMIT",
    "SEARCH_MAX_BYTES",
    "SolvedLevel",
    "LevelTable",
    "ArrayTable",
    "ListTable",
    "estimated_work",
    "table_bytes",
    "search_bytes",
    "uses_search",
    "solve_levels",
]

#: Engine names accepted by :func:`solve_levels`.
ENGINES = ("auto", "numpy", "python")
#: Above this many (min, max) element operations (:func:`estimated_work`), ``auto`` uses numpy.
#: Measured on the reference profiles (2-core AMD EPYC, Python 3.11): the pure-Python engine
#: takes 50-60 ns of CPU per estimated operation (gnmt on 16 workers, 0.6 million: 0.03 s; resnet50
#: on 16, 3.5 million: 0.21 s), the numpy engine a few ns, and importing numpy about 0.12 s of CPU,
#: so the two break even near 2-2.5 million.
PYTHON_WORK_LIMIT: int = 2_500_000
#: Largest memory the tables may take (:func:`table_bytes`).
MAX_TABLE_BYTES: int = 4 * 2**30
#: Elements of the largest temporary array of numpy's (min, max) product (float64: 32 MiB).
BLOCK_ELEMENTS: int = 1 << 22
#: Above this many workers, a level that replicates stages is solved by the bounded search of
#: :func:`_solve_replicated` (work about linear in the workers) rather than by one (min, max)
#: product per worker split (quadratic).  Both give the same floats.  The search costs about ten
#: products per worker count, so it wins from about 16 workers on: resnet50's 240 states, one level
#: of 16 (all rows), 2.3 s either way, of 24, 4.5 s against 8.8 s; gnmt's 99, of 12, 0.015 s
#: against 0.21 s.
PRODUCT_WORKER_LIMIT: int = 16
#: The bounded search keeps arrays over every (row, split, state) triple (:func:`search_bytes`);
#: a level whose search would take more than this keeps the products, whose memory is bounded.
SEARCH_MAX_BYTES: int = 2 * 2**30
#: The bounded search solves a level a block of states at a time, about this many triples each
#: (see ``_search``): few enough that a block's reads stay in the cache.
SEARCH_BLOCK_TRIPLES: int = 1 << 16


class SolvedLevel(Protocol):
    """What reading a partition back needs from one solved level, by any method: the dynamic
    program's :class:`LevelTable` or the integer program's level
    (:class:`pal_opt.pipeline.ip.ProgramLevel`)."""

    machines: int
    bandwidth: float
    divisor: float
    straight: bool

    def time(self, r: int, j: int) -> float:
        """``T[r][j]``: the segment's time on one worker of this level."""

    def params(self, r: int, j: int) -> float:
        """``P[r][j]``: the segment's parameter bytes."""

    def split(self, r: int, j: int) -> list[tuple[int, int, int]]:
        """The stages ``(start cut, last state, workers)`` of an optimum of segment ``(r, j)`` on
        all of the level's workers, first stage first."""


class LevelTable(ABC):
    """One solved level: its inputs and its table of best times (see the module docstring).

    At the outermost level only row ``r = 0`` of ``best`` is solved.
    """

    machines: int
    bandwidth: float
    divisor: float
    straight: bool

    @abstractmethod
    def time(self, r: int, j: int) -> float:
        """``T[r][j]``: the segment's time on one worker of this level."""

    @abstractmethod
    def params(self, r: int, j: int) -> float:
        """``P[r][j]``: the segment's parameter bytes."""

    @abstractmethod
    def best(self, r: int, j: int, m: int) -> float:
        """``best[r][j][m]``."""

    @abstractmethod
    def candidates(self, r: int, j: int, m: int, w: int) -> list[float]:
        """For ``k = 0 .. j - 1``: the time of splitting segment ``(r, j)`` on ``m + 1`` workers
        after state ``k`` with ``w`` workers on the last stage (``inf`` where not allowed)."""

    @abstractmethod
    def next_times(self) -> Any:
        """``best[r][j][M - 1]`` for every solved row: the next level's ``T``."""

    def whole(self, r: int, j: int, m: int) -> float:
        """The segment ``(r, j)`` as one stage on ``m + 1`` workers (``inf`` if not allowed)."""
        if self.straight and m > 0:
            return math.inf
        return float(stage_time(self.time(r, j), self.params(r, j), m + 1, self.bandwidth, self.divisor))

    def widths(self, m: int) -> range:
        """Worker counts a last stage may have when the segment has ``m + 1`` workers."""
        return range(1, min(m, 1 if self.straight else m) + 1)

    def split(self, r: int, j: int) -> list[tuple[int, int, int]]:
        """The stages ``(start cut, last state, workers)`` of segment ``(r, j)`` on all
        ``machines`` workers, read back from the table.

        Ties go to the whole segment, then to the fewest workers on the last stage, then to the
        earliest split.  Values are compared exactly: the table holds the same floats.
        """
        m = self.machines - 1
        stages: list[tuple[int, int, int]] = []
        while True:
            value = self.best(r, j, m)
            if value == self.whole(r, j, m):
                stages.append((r, j, m + 1))
                break
            k, w = self._last_stage(r, j, m, value)
            stages.append((k + 1, j, w))
            j, m = k, m - w
        stages.reverse()
        return stages

    def _last_stage(self, r: int, j: int, m: int, value: float) -> tuple[int, int]:
        """The split ``(k, w)`` whose candidate equals ``value``: the rest ends at state ``k``, the
        last stage runs on ``w`` workers."""
        for w in self.widths(m):
            candidates = self.candidates(r, j, m, w)
            if value in candidates:
                return candidates.index(value), w
        raise RuntimeError(f"no split reproduces segment ({r}, {j}) on {m + 1} workers")  # pragma: no cover


def estimated_work(n: int, machines: Sequence[int], straight: bool) -> int:
    """(min, max) element operations of the dynamic program on ``n`` states (an estimate)."""
    total = 0
    for index, m in enumerate(machines):
        pairs = (m - 1) if straight else m * (m - 1) // 2
        final = index == len(machines) - 1
        total += pairs * (n * n // 2 if final else n * n * n // 6)
    return total


def table_bytes(n: int, machines: Sequence[int], engine: str, straight: bool = False) -> int:
    """Memory the tables of :func:`solve_levels` take at their largest (an estimate, in bytes):
    per level ``best`` (``rows x n x M``) and the last-stage tables (``M - 1`` of ``n x n / 2``),
    8 bytes per number with numpy, about 32 with Python lists; with numpy, a level solved by the
    bounded search adds :func:`search_bytes`."""
    per_number = 8 if engine == "numpy" else 32
    largest = 0
    for index, m in enumerate(machines):
        rows = 1 if index == len(machines) - 1 else n + 1
        size = (rows * n * m + (m - 1) * n * n // (1 if engine == "numpy" else 2)) * per_number
        if engine == "numpy" and uses_search(rows, n, m, straight):
            size += search_bytes(rows, n, m)
        largest = max(largest, size)
    return largest + 2 * (n + 1) * n * per_number


def search_bytes(rows: int, n: int, machines: int) -> int:
    """Memory the bounded search of a level takes besides its tables (an estimate, in bytes): the
    running minima (``rows x n x M`` floats), the mask of real triples (a byte each of
    ``rows x n x n``) and about 128 bytes per triple ``r <= k < j`` (its offsets and the
    temporaries of one worker count)."""
    triples = math.comb(n + 1, 3) - math.comb(max(n + 1 - rows, 0), 3)
    return 8 * rows * n * machines + rows * n * n + 128 * triples


def uses_search(rows: int, n: int, machines: int, straight: bool) -> bool:
    """Whether the numpy engine solves a level by the bounded search (:data:`PRODUCT_WORKER_LIMIT`,
    :data:`SEARCH_MAX_BYTES`) rather than by (min, max) products."""
    return (not straight and machines > max(1, PRODUCT_WORKER_LIMIT)
            and search_bytes(rows, n, machines) <= SEARCH_MAX_BYTES)


def solve_levels(states: StateGraph, levels: Sequence[tuple[int, float]], *, straight: bool = False,
                 engine: str = "auto") -> list[LevelTable]:
    """Solve every level, innermost first; each level's ``T`` is the one below's optimum.

    ``engine`` is ``"numpy"``, ``"python"`` or ``"auto"`` (numpy when :func:`estimated_work`
    exceeds :data:`PYTHON_WORK_LIMIT`).

    Raises
    ------
    OptionError
        The tables would take more than :data:`MAX_TABLE_BYTES` (:func:`table_bytes`).
    """
    if engine == "auto":
        work = estimated_work(states.n, [m for m, _ in levels], straight)
        engine = "numpy" if work > PYTHON_WORK_LIMIT else "python"
    size = table_bytes(states.n, [m for m, _ in levels], engine, straight)
    if size > MAX_TABLE_BYTES:
        raise OptionError(f"{states.profile.source}: the partitioner's tables would take about "
                          f"{size / 2**30:.1f} GiB for {states.n} cut states on {' x '.join(str(m) for m, _ in levels)} workers "
                          f"(limit {MAX_TABLE_BYTES / 2**30:.0f} GiB)")
    kind: type[ArrayTable] | type[ListTable]
    if engine == "numpy":
        kind = ArrayTable
    elif engine == "python":
        kind = ListTable
    else:
        raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    times: Any
    params: Any
    times, params = kind.segment_tables(states)
    tables: list[LevelTable] = []
    divisor = 1.0
    for index, (m, b) in enumerate(levels):
        final = index == len(levels) - 1
        table = kind.solve(times, params, m, b, divisor=divisor, straight=straight, all_rows=not final)
        tables.append(table)
        times, divisor = table.next_times(), float(m)
    return tables


def _real_pairs(states: StateGraph) -> list[list[int]]:
    """Per state ``j``, the rows ``r >= 1`` of real segments ending at ``j`` (``r - 1`` an ancestor)."""
    out = []
    for ancestors in states.ancestors:
        rows = []
        while ancestors:
            low = ancestors & -ancestors
            rows.append(low.bit_length())  # state s = bit_length - 1, row s + 1
            ancestors ^= low
        out.append(rows)
    return out


# --------------------------------------------------------------------------- pure Python
class ListTable(LevelTable):
    """A level solved with Python lists: ``T[r][j]``, ``P[r][j]``, ``best[m][r][j]`` and
    ``last[w][j][k]`` (the last stage after state ``k < j``)."""

    def __init__(self, T: list[list[float]], P: list[list[float]], best: list[list[list[float]]],
                 last: list[list[list[float]] | None], machines: int, bandwidth: float, divisor: float,
                 straight: bool):
        self.T, self.P, self._best, self.last = T, P, best, last
        self.machines, self.bandwidth, self.divisor, self.straight = machines, bandwidth, divisor, straight

    def time(self, r: int, j: int) -> float:
        return self.T[r][j]

    def params(self, r: int, j: int) -> float:
        return self.P[r][j]

    def best(self, r: int, j: int, m: int) -> float:
        return self._best[m][r][j]

    def candidates(self, r: int, j: int, m: int, w: int) -> list[float]:
        last = self.last[w]
        assert last is not None
        return list(map(max, self._best[m - w][r][:j], last[j]))

    def next_times(self) -> list[list[float]]:
        return self._best[self.machines - 1]

    @staticmethod
    def segment_tables(states: StateGraph) -> tuple[list[list[float]], list[list[float]]]:
        """``T`` and ``P`` for every cut ``r = 0..n`` and state ``j`` (``inf`` / 0 where not real)."""
        n, cum, par = states.n, states.cum_time, states.cum_parameter
        T = [list(cum)] + [[math.inf] * n for _ in range(n)]
        P = [list(par)] + [[0.0] * n for _ in range(n)]
        for j, rows in enumerate(_real_pairs(states)):
            for r in rows:
                T[r][j] = cum[j] - cum[r - 1]
                P[r][j] = par[j] - par[r - 1]
        return T, P

    @classmethod
    def solve(cls, T: list[list[float]], P: list[list[float]], machines: int, bandwidth: float, *,
              divisor: float = 1.0, straight: bool = False, all_rows: bool = True) -> ListTable:
        """Solve one level (see :func:`ArrayTable.solve` for the parameters)."""
        n = len(T[0])
        rows = len(T) if all_rows else 1
        last = _last_stage_lists(T, P, machines, bandwidth, straight)
        # per width w and state j: the split points k < j, cheapest last stage first
        order = [None if lw is None else [sorted(range(j), key=lw[j].__getitem__) for j in range(n)]
                 for lw in last]
        best = [[list(T[r]) for r in range(rows)]]
        for m in range(1, machines):
            level = []
            for r in range(rows):
                if straight:
                    cur = [math.inf] * n
                else:  # stage_time(T, P, m + 1, b, W), inlined (same operations)
                    scale = bandwidth * (m + 1)
                    cur = [(t + (4 * m * p) / scale / divisor) / (m + 1) for t, p in zip(T[r], P[r], strict=True)]
                for w in range(1, min(m, 1 if straight else m) + 1):
                    _improve(cur, best[m - w][r], last[w], order[w], r)
                level.append(cur)
            best.append(level)
        return cls(T, P, best, last, machines, bandwidth, divisor, straight)


def _improve(cur: list[float], head: list[float], last: list[list[float]] | None,
             order: list[list[int]] | None, r: int) -> None:
    """``cur[j] = min(cur[j], min_k max(head[k], last[j][k]))`` for ``j > r``, exactly.

    Split points are visited cheapest last stage first, so the scan stops at the first ``k``
    whose last stage alone is no better than the best so far; a ``k`` whose head is no better
    is skipped.  Neither can lower the minimum, so the result is the full minimum.
    """
    assert last is not None and order is not None
    for j in range(r + 1, len(cur)):
        best = cur[j]
        tail = last[j]
        for k in order[j]:
            t = tail[k]
            if t >= best:
                break
            h = head[k]
            if h < best:
                best = h if h > t else t
        cur[j] = best


def _last_stage_lists(T: list[list[float]], P: list[list[float]], machines: int, bandwidth: float,
                      straight: bool) -> list[list[list[float]] | None]:
    """``last[w][j][k]`` = ``stage_time(T[k+1][j], P[k+1][j], w, b)`` for ``k < j``, inlined.

    On one worker a stage costs its time (``(T + 0.0) / 1``); the synchronisation term is divided
    by 1.0, which changes no float, so it is left out.
    """
    n = len(T[0])
    cols_t = [[T[k + 1][j] for k in range(j)] for j in range(n)]
    last: list[list[list[float]] | None] = [None] * machines
    if machines > 1:
        last[1] = cols_t
    if straight or machines <= 2:
        return last
    cols_p = [[P[k + 1][j] for k in range(j)] for j in range(n)]
    for w in range(2, machines):
        four, scale = 4 * (w - 1), bandwidth * w
        last[w] = [[(t + (four * p) / scale) / w for t, p in zip(ct, cp, strict=True)]
                   for ct, cp in zip(cols_t, cols_p, strict=True)]
    return last


# --------------------------------------------------------------------------- numpy
class ArrayTable(LevelTable):
    """A level solved with numpy: ``T`` and ``P`` of shape ``(n + 1, n)``, ``best`` of shape
    ``(rows, n, M)`` and ``last[w]`` of shape ``(n, n)`` indexed ``[k, j]``."""

    def __init__(self, T: np.ndarray, P: np.ndarray, best: np.ndarray, last: list[np.ndarray | None],
                 machines: int, bandwidth: float, divisor: float, straight: bool):
        self.T, self.P, self._best, self.last = T, P, best, last
        self.machines, self.bandwidth, self.divisor, self.straight = machines, bandwidth, divisor, straight

    def time(self, r: int, j: int) -> float:
        return float(self.T[r, j])

    def params(self, r: int, j: int) -> float:
        return float(self.P[r, j])

    def best(self, r: int, j: int, m: int) -> float:
        return float(self._best[r, j, m])

    def candidates(self, r: int, j: int, m: int, w: int) -> list[float]:
        import numpy as np

        last = self.last[w]
        assert last is not None
        out: list[float] = np.maximum(self._best[r, :j, m - w], last[:j, j]).tolist()
        return out

    def next_times(self) -> np.ndarray:
        return self._best[:, :, -1]

    @staticmethod
    def segment_tables(states: StateGraph) -> tuple[np.ndarray, np.ndarray]:
        """``T`` and ``P`` as ``(n + 1) x n`` arrays (``inf`` / 0 where not real)."""
        import numpy as np

        n = states.n
        cum = np.asarray(states.cum_time, dtype=float)
        par = np.asarray(states.cum_parameter, dtype=float)
        real = np.zeros((n + 1, n), dtype=bool)
        for j, rows in enumerate(_real_pairs(states)):
            real[rows, j] = True
        T = np.where(real, cum[None, :] - np.concatenate(([0.0], cum))[:, None], np.inf)
        P = np.where(real, par[None, :] - np.concatenate(([0.0], par))[:, None], 0.0)
        T[0, :], P[0, :] = cum, par  # row 0 is the prefix itself, not a difference
        return T, P

    @classmethod
    def solve(cls, T: np.ndarray, P: np.ndarray, machines: int, bandwidth: float, *, divisor: float = 1.0,
              straight: bool = False, all_rows: bool = True) -> ArrayTable:
        """Solve one level.

        Parameters
        ----------
        T, P
            Segment times and parameter bytes (:meth:`segment_tables`), or for an outer level the
            inner level's :meth:`next_times` with the same ``P``.
        machines, bandwidth
            The level's worker count and bandwidth (bytes per second).
        divisor
            The inner level's worker count (1 at the innermost level): see
            :func:`~pal_opt.pipeline.cost.stage_time`.
        straight
            No replication.
        all_rows
            Solve segments from every cut (an outer level needs them); otherwise from cut 0 only.
        """
        import numpy as np

        rows = T.shape[0] if all_rows else 1
        if uses_search(rows, T.shape[1], machines, straight):
            searched, tails = _solve_replicated(T, P, rows, machines, bandwidth, divisor)
            return cls(T, P, searched, tails, machines, bandwidth, divisor, straight)
        best = np.full((rows, T.shape[1], machines), np.inf)
        best[:, :, 0] = T[:rows]
        last: list[np.ndarray | None] = [None] * machines
        for w in range(1, min(machines - 1, 1 if straight else machines - 1) + 1):
            last[w] = stage_time(T[1:], P[1:], w, bandwidth)
        for m in range(1, machines):
            if not straight:
                best[:, :, m] = stage_time(T[:rows], P[:rows], m + 1, bandwidth, divisor)
            for w in range(1, min(m, 1 if straight else m) + 1):
                lw = last[w]
                assert lw is not None
                _minmax_into(best[:, :, m], best[:, :, m - w], lw)
        return cls(T, P, best, last, machines, bandwidth, divisor, straight)


def _minmax_into(out: np.ndarray, head: np.ndarray, tail: np.ndarray) -> None:
    """``out[r, j] = min(out[r, j], min_k max(head[r, k], tail[k, j]))`` in place.

    ``head[r, k]`` is finite only for ``k >= r`` and ``tail[k, j]`` only for ``j > k``, so a block
    of rows ``r0 <= r < r1`` needs ``k >= r0`` and ``j > r0`` only.
    """
    import numpy as np

    rows, n = head.shape
    r0 = 0
    while r0 < rows and r0 < n - 1:
        width = n - r0
        r1 = min(rows, r0 + max(1, BLOCK_ELEMENTS // (width * width)))
        block = np.maximum(head[r0:r1, r0:, None], tail[None, r0:, r0 + 1:])
        np.minimum(out[r0:r1, r0 + 1:], block.min(axis=1), out=out[r0:r1, r0 + 1:])
        r0 = r1


# --------------------------------------------------------------------------- numpy, many workers
# Why the replicated levels are not solved by a (min, max) product per worker split.  The product
# above costs one pass over every (row, split point, state) triple for each pair (m, w): about
# M^2 / 2 passes per level, half a million at 1,024 workers (``pal-opt partition --machines
# 1024,1024``: alexnet's 22 cut states 19-26 s, vgg16's 40 65-104 s, longer still for gnmt's 99 and
# resnet50's 240).  Yet for one triple (r, k, j) and m + 1 workers,
# cand(w) = max(head(m - w), tail(w)) with head(x) = best[r][k][x] and tail(w) = last[w][k][j]
# is the max of a function that rises with w and one that falls: the head loses workers, the tail
# gains them.  So only the few w near where they cross can give the minimum.  To stay exact without
# assuming either function monotone, the search uses monotone lower bounds:
#
# * A(w) = min(best[r][k][0 .. m - w])   (a running minimum over m, kept in ``floor``): A(w) <= head(m - w),
#   and A does not fall as w grows;
# * B(w) = min(last[1 .. w][k][j]):  B(w) <= tail(w), and B does not rise as w grows (the tail's
#   time falls for w >= 2 in exact arithmetic, so B(w) is min(last[1], last[w]) when the computed
#   floats fall too, which is checked once; otherwise B is a running minimum, stored).
#
# Every candidate with max(A(w), B(w)) >= U, for U a value the minimum already reached, can be
# skipped: it is no smaller than U.  Starting from c, where A(c) >= B(c) first holds, the search
# walks down while B(w) < U and up while A(w) < U, and stops in each direction at the first w that
# fails (every w beyond fails too).  The minimum is the same float as the full product's: the
# skipped candidates are no smaller, and max and min of floats are exact.  c moves by at most one
# as m grows (A(w) at m + 1 is A(w - 1) at m), so it is kept per triple from one m to the next;
# exactness does not depend on c, only the number of steps does.  The value U starts as the whole
# segment's and the two candidates beside c, and falls as the walks find better ones.
#
# Most triples need neither bounds nor walks.  Call a triple *regular* at m + 1 workers while its
# head has not risen on x = 0 .. m - 1 and its tail has not risen on w = 1 .. m (each value <= the
# one before, which a NaN fails).  Then A = head and B = tail where they are read, c is the first w
# with head(m - w) >= tail(w) (m + 1 if none), and the minimum over w is exactly
# min(head(m - c), tail(c - 1)), with head(-1) = tail(0) = inf: for w >= c the candidate is
# head(m - w) >= head(m - c), reached at w = c; for w < c it is tail(w) >= tail(c - 1), reached at
# w = c - 1.  Both are candidates of the products and min and max only select, so it is the same
# float.  c moves up by one from m to m + 1 exactly when head(m + 1 - c) < tail(c) (for w < c the
# head only fell; if it moves, head(m - c) >= tail(c) >= tail(c + 1) holds at the next w), so per
# triple and worker count a regular triple costs three reads: head(m - c), tail(c), and the head at
# the new c.  A triple stops being regular for good at its head's first rise (found as each plane
# of ``best`` is filled) or its tail's (known from the start) and then joins the bounded search with
# its c, the crossing of A and B, which were the head and tail until then.  resnet50 at 64 x 64
# (bandwidths 25e9, 3.125e9): 714 of the inner level's 2.2 million triples leave; at the outer
# level, where most last stages are slower on two workers than on one, 24,838 of 28,248.
#
# The order of the work changes no number.  Rows are independent and a state's segments need only
# earlier states' heads, so a level is solved a block of states j at a time
# (SEARCH_BLOCK_TRIPLES triples), every worker count of a block before the next; a triple's reads
# move by at most one worker from one count to the next, and the tables keep the worker count
# innermost (``best`` as ``[r, j, m + 1]`` in memory, m + 1 = 0 the head(-1) = inf; the tails as
# ``[j, k, w]``), so a block's reads stay in the cache (resnet50 at 1,024 workers: a random read
# each per triple and worker count was what cost the time).  A head of an earlier block is
# complete, so the step after its first rise is known when the block starts.  The level's tables
# are transposed views of these arrays, the same floats.
# Tests (tests/test_pipeline_partition.py): ``test_bounded_search_gives_the_full_products_tables``,
# ``..._on_reference_profiles`` and ``..._on_random_tables`` compare every table entry with the
# products' bit for bit.


class _Triples:
    """Real (row r, split k, state j) triples of a level, in runs of one group (r, j): per triple
    ``r * n + k`` (its head), ``j * n + k`` (its last stage) and its group (``r * n + j``, or
    within a block of states, ``r * states + j - j0``); the first triple of each run."""

    def __init__(self, hk: np.ndarray, jk: np.ndarray, group: np.ndarray):
        import numpy as np

        self.hk, self.jk, self.group = hk, jk, group
        self.starts = np.flatnonzero(np.diff(group, prepend=-1))
        self.groups = group[self.starts]
        self.size = len(group)

    @classmethod
    def of_level(cls, T: np.ndarray, rows: int) -> _Triples:
        import numpy as np

        n = T.shape[1]
        head = np.isfinite(T[:rows])  # [r, k]
        tail = np.isfinite(T[1:])  # [k, j]: the last stage after state k up to j
        j, r, k = np.nonzero(head[None, :, :] & tail.T[:, None, :])  # sorted by (j, r), then k
        return cls(r * n + k, j * n + k, r * n + j)

    def take(self, keep: np.ndarray) -> _Triples:
        return _Triples(self.hk[keep], self.jk[keep], self.group[keep])

    def lower(self, cur: np.ndarray, values: np.ndarray) -> None:
        """``cur[g] = min(cur[g], min(values[t] for the triples t of group g))``."""
        import numpy as np

        if self.size:
            cur[self.groups] = np.minimum(cur[self.groups], np.minimum.reduceat(values, self.starts))


class _Level:
    """The arrays the search reads, flat in memory order: ``best`` (a view ``(M + 1, rows, n)``:
    plane ``m + 1`` for ``m + 1`` workers, plane 0 inf), its running minimum over the planes
    (``floor``, A), the tails (a view ``(M, n, n)`` as ``[w, j, k]``), B (see the comment above)
    and the first rise of each tail (``M`` if none).  ``at_head`` and ``at_tail`` turn a triple's
    ``r * n + k`` and ``j * n + k`` into flat offsets in plane 0; ``plane`` and ``width`` step
    them by one worker."""

    def __init__(self, best: np.ndarray, tails: np.ndarray):
        import numpy as np

        self.n, self.view = best.shape[2], best
        self.plane, self.rstride, self.kstride = (s // best.itemsize for s in best.strides)
        self.width, self.jstride, self.ktail = (s // tails.itemsize for s in tails.strides)
        self.floor = best.copy(order="K")
        self.best, self.flat_floor = best.ravel(order="K"), self.floor.ravel(order="K")
        self.tail = tails.ravel(order="K")
        falls = bool(np.all(tails[3:] <= tails[2:-1]))
        bound = tails if falls else np.minimum.accumulate(tails, axis=0, out=np.empty_like(tails))  # tails[0] is inf
        self.bound = bound.ravel(order="K")
        # flat views, not copies: the search writes ``best`` and reads it back through them
        assert all(np.may_share_memory(flat, whole) for flat, whole in
                   ((self.best, best), (self.flat_floor, self.floor), (self.tail, tails), (self.bound, bound)))
        up = ~(tails[2:] <= tails[1:-1])  # [w - 2, j, k]: the tail rises at w
        rise = np.where(up.any(axis=0), up.argmax(axis=0) + 2, len(tails)) if len(tails) > 2 else \
            np.full(tails.shape[1:], len(tails))
        rise[np.isnan(tails[1])] = 1
        self.rise = rise.ravel()

    def at_head(self, hk: np.ndarray) -> np.ndarray:
        out: np.ndarray = hk // self.n * self.rstride + hk % self.n * self.kstride
        return out

    def at_tail(self, jk: np.ndarray) -> np.ndarray:
        out: np.ndarray = jk // self.n * self.jstride + jk % self.n * self.ktail
        return out


class _Regular:
    """The regular triples (see the comment above): per triple the flat offsets of head(m - c) in
    ``best`` and of tail(c) in the tails at the start of step ``m``."""

    def __init__(self, tri: _Triples, level: _Level):
        self.tri = tri
        self.at_head = level.plane + level.at_head(tri.hk)  # m = 1, c = 1: head(0)
        self.at_tail = level.width + level.at_tail(tri.jk)  # tail(1)

    def step(self, level: _Level, cur: np.ndarray) -> None:
        """Lower ``cur`` by each regular triple's minimum over the last stage's workers."""
        import numpy as np

        up = np.take(level.best, self.at_head) < np.take(level.tail, self.at_tail)  # c moves up by one
        self.at_tail += up * level.width
        self.at_head -= up * level.plane
        self.tri.lower(cur, np.minimum(np.take(level.best, self.at_head),
                                       np.take(level.tail, self.at_tail - level.width)))
        self.at_head += level.plane  # the next step has one worker more, on the head at the same c

    def leave(self, out: np.ndarray, level: _Level) -> tuple[_Triples, np.ndarray]:
        """Drop the triples ``out``; return them and their c."""
        c = (self.at_tail[out] - level.at_tail(self.tri.jk[out])) // level.width
        gone, stay = self.tri.take(out), ~out
        self.tri, self.at_head, self.at_tail = self.tri.take(stay), self.at_head[stay], self.at_tail[stay]
        return gone, c


class _Bounded:
    """The triples searched with the bounds A and B and walks (see the comment above), with c and
    tail(1) per triple."""

    def __init__(self) -> None:
        import numpy as np

        empty = np.zeros(0, dtype=np.int64)
        self.tri, self.c, self.first = _Triples(empty, empty, empty), empty, np.zeros(0)
        self.head_at, self.tail_at = empty, empty

    def add(self, tri: _Triples, c: np.ndarray, level: _Level) -> None:
        import numpy as np

        group = np.concatenate((self.tri.group, tri.group))
        order = np.argsort(group, kind="stable")
        self.tri = _Triples(np.concatenate((self.tri.hk, tri.hk))[order], np.concatenate((self.tri.jk, tri.jk))[order],
                            group[order])
        self.c = np.concatenate((self.c, c))[order]
        self.head_at, self.tail_at = level.at_head(self.tri.hk), level.at_tail(self.tri.jk)
        self.first = level.tail[level.width + self.tail_at]

    def step(self, level: _Level, m: int, cur: np.ndarray) -> None:
        """Lower ``cur`` by every candidate of these triples below their bounds."""
        import numpy as np

        tri, c, every = self.tri, self.c, slice(None)
        if not tri.size:
            return
        c += level.flat_floor[(m + 1 - c) * level.plane + self.head_at] < self._tail_bound(level, c, every)
        near = np.minimum(self._candidate(level, m, np.clip(c - 1, 1, m), every),
                          self._candidate(level, m, np.minimum(c, m), every))
        tri.lower(cur, near)
        self._walk(level, cur, c - 2, -1, m)
        self._walk(level, cur, c + 1, 1, m)

    def _tail_bound(self, level: _Level, w: np.ndarray, at: np.ndarray | slice) -> np.ndarray:
        import numpy as np

        out: np.ndarray = np.minimum(self.first[at], level.bound[w * level.width + self.tail_at[at]])
        return out

    def _candidate(self, level: _Level, m: int, w: np.ndarray, at: np.ndarray | slice) -> np.ndarray:
        import numpy as np

        out: np.ndarray = np.maximum(level.best[(m + 1 - w) * level.plane + self.head_at[at]],
                                     level.tail[w * level.width + self.tail_at[at]])
        return out

    def _walk(self, level: _Level, cur: np.ndarray, w: np.ndarray, step: int, m: int) -> None:
        """Lower ``cur`` by every candidate from ``w`` on in direction ``step`` (-1: fewer workers on
        the last stage, bounded by B; +1: more, bounded by A) until its bound reaches ``cur``."""
        import numpy as np

        group, head = self.tri.group, self.head_at
        at = np.flatnonzero((w >= 1) & (w <= m))
        w = w[at]
        while at.size:
            limit = cur[group[at]]
            lower = self._tail_bound(level, w, at) if step < 0 else level.flat_floor[(m + 1 - w) * level.plane + head[at]]
            keep = lower < limit
            at, w = at[keep], w[keep]
            if not at.size:
                break
            np.minimum.at(cur, group[at], self._candidate(level, m, w, at))
            w = w + step
            inside = (w >= 1) & (w <= m)
            at, w = at[inside], w[inside]


def _solve_replicated(T: np.ndarray, P: np.ndarray, rows: int, machines: int, bandwidth: float,
                      divisor: float) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """A level that replicates stages, solved by the search (see the comment above): its
    ``best`` (``(rows, n, M)``, a view of the search's planes) and last-stage tables (``last[w]``
    indexed ``[k, j]``), the same floats as the (min, max) products'."""
    import numpy as np

    n = T.shape[1]
    best = np.full((rows, n, machines + 1), np.inf).transpose(2, 0, 1)  # [m + 1, r, j], workers innermost
    tails = np.full((n, n, machines), np.inf).transpose(2, 0, 1)  # [w, j, k]
    best[1] = T[:rows]
    for w in range(1, machines):
        tails[w] = stage_time(T[1:], P[1:], w, bandwidth).T
    if machines > 1:
        _search(T, P, best, tails, bandwidth, divisor)
    return best[1:].transpose(1, 2, 0), [None, *(t.T for t in tails[1:])]


def _search(T: np.ndarray, P: np.ndarray, best: np.ndarray, tails: np.ndarray, bandwidth: float,
            divisor: float) -> None:
    """Fill planes 2.. of ``best``, a block of states at a time (:data:`SEARCH_BLOCK_TRIPLES`
    triples): every worker count of one block before the next, so that each triple's reads, which
    move by at most one worker from one count to the next, stay in the cache."""
    import numpy as np

    planes, rows, n = best.shape
    level = _Level(best, tails)
    tri = _Triples.of_level(T, rows)
    first_rise = np.where(np.isnan(best[1]), 0, planes - 1).ravel()  # of each head: a NaN at 0 counts
    before = np.concatenate(([0], np.cumsum(np.bincount(tri.jk // n, minlength=n))))  # triples of states < j
    j0 = 0
    while j0 < n:
        a = int(before[j0])
        j1 = min(n, max(j0 + 1, int(np.searchsorted(before, a + SEARCH_BLOCK_TRIPLES, side="right")) - 1))
        b = int(before[j1])
        block = _Triples(tri.hk[a:b], tri.jk[a:b], tri.hk[a:b] // n * (j1 - j0) + tri.jk[a:b] // n - j0)
        _search_block(T, P, level, block, first_rise, (j0, j1), bandwidth, divisor)
        j0 = j1


def _search_block(T: np.ndarray, P: np.ndarray, level: _Level, tri: _Triples, first_rise: np.ndarray,
                  states: tuple[int, int], bandwidth: float, divisor: float) -> None:
    """Fill planes 2.. of ``best`` for the states ``j0 <= j < j1`` (every earlier state done):
    each worker count's whole segment lowered by the regular triples' minima, then by the bounded
    search of the others.  A triple leaves the regular ones at the step after its head first rose
    (``first_rise``, per head, updated here for the block's states) or at its tail's first rise."""
    import numpy as np

    j0, j1 = states
    best, planes, rows, n = level.view, level.view.shape[0], level.view.shape[1], level.n
    regular, bounded = _Regular(tri, level), _Bounded()
    never = planes - 1
    heads = first_rise.reshape(rows, n)[:, j0:j1]  # a view: the block's states as heads
    leave = np.minimum(first_rise[tri.hk] + 1, level.rise[tri.jk])
    events, check = set(np.unique(leave).tolist()), False
    for m in range(1, planes - 1):
        if check or m in events:
            out = (level.rise[regular.tri.jk] <= m) | (first_rise[regular.tri.hk] < m)
            if out.any():
                bounded.add(*regular.leave(out, level), level)
        cur = stage_time(T[:rows, j0:j1], P[:rows, j0:j1], m + 1, bandwidth, divisor).ravel()
        regular.step(level, cur)
        bounded.step(level, m, cur)
        best[m + 1, :, j0:j1] = cur.reshape(rows, j1 - j0)
        np.minimum(level.floor[m, :, j0:j1], best[m + 1, :, j0:j1], out=level.floor[m + 1, :, j0:j1])
        rose = ~(best[m + 1, :, j0:j1] <= best[m, :, j0:j1]) & (heads == never)
        check = bool(rose.any())
        heads[rose] = m
