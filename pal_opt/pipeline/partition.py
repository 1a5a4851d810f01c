"""PipeDream's hierarchical partitioner: the optimum pipeline of a profiled model on a machine tree.

The model (PipeDream, SOSP'19; described in our words in ``PIPEDREAM_MODEL.md``): workers form
levels, innermost first (``machines=[4, 8]`` is 8 servers of 4 GPUs), each level with its own
bandwidth.  A pipeline cuts the model at cut states (:mod:`pal_opt.pipeline.states`) into stages,
each stage replicated data-parallel over some of the level's workers; a worker of an outer level is
a whole inner level, which pipelines its segment again.  The time per sample is the slowest
stage's time; activation transfers are not counted (PipeDream counts them only with an activation
compression ratio).

The cost model is :func:`stage_time`, shared by every method that prices a stage.  The search is
a dynamic program over segments, solved level by level (:func:`solve_level`): the best time of a
segment on ``m + 1`` workers either replicates the whole segment or splits off a last stage on
``m'`` workers and recurses on the rest with ``m + 1 - m'``.  The inner min over split points and
start rows is a (min, max) matrix product done with numpy, one block of start rows at a time.

Only real segments take part (a segment from cut ``p`` to state ``j`` with ``p`` an ancestor of
``j``), so the answer does not depend on how the states are numbered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import OptionError
from .profile import Profile
from .states import StateGraph, build_states

__all__ = [
    "LevelStage",
    "PipelineStage",
    "PartitionResult",
    "LevelTable",
    "stage_time",
    "allreduce_time",
    "segment_tables",
    "solve_level",
    "partition",
]

#: Elements of the largest temporary array of the (min, max) product (float64: 32 MiB).
BLOCK_ELEMENTS: int = 1 << 22


# --------------------------------------------------------------------------- cost model
def allreduce_time(parameters: Any, replicas: int, bandwidth: float, divisor: float = 1.0) -> Any:
    """Data-parallel synchronisation time of a stage, per sample of one replica's batch.

    ``4 (r - 1) P / (b r)``: each of ``r`` replicas sends and receives its share of the
    ``P`` parameter bytes twice (reduce-scatter and all-gather, gradients and weights), divided
    by ``divisor`` (the worker count inside each worker of an outer level; see
    :func:`stage_time`).  Works elementwise on numpy arrays.
    """
    return (4 * (replicas - 1) * parameters) / (bandwidth * replicas) / divisor


def stage_time(compute: Any, parameters: Any, replicas: int, bandwidth: float, divisor: float = 1.0) -> Any:
    """Time per sample of a stage replicated on ``replicas`` workers of one level.

    Parameters
    ----------
    compute
        The stage's time on one worker (seconds per sample): at the innermost level its layers'
        forward plus backward time; at an outer level the inner level's optimum for the segment.
    parameters
        The stage's parameter bytes.
    replicas
        Workers of this level that hold a copy of the stage.
    bandwidth
        The level's bandwidth in bytes per second.
    divisor
        Divides the synchronisation time.  PipeDream divides it by the inner level's worker count
        for the *first* stage of a segment (its whole-segment term) and by 1 for every stage split
        off after it; pass ``W`` or 1 accordingly.

    Returns
    -------
    float or numpy.ndarray
        ``(compute + allreduce_time(parameters, replicas, bandwidth, divisor)) / replicas``.

    Examples
    --------
    >>> stage_time(0.010, 2e8, 2, 25e9)  # 10 ms of compute, 200 MB of weights, 2 replicas
    0.013
    """
    return (compute + allreduce_time(parameters, replicas, bandwidth, divisor)) / replicas


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class LevelStage:
    """One stage at one level of the machine tree.

    ``start`` and ``end`` are cuts: cut ``c`` lies after state ``c - 1`` (cut 0 is the input, cut
    ``n`` the end of the model), as PipeDream prints them.  ``compute_time`` is the stage's layers'
    forward plus backward seconds on one worker; ``level_time`` is its time on one worker of this
    level (``compute_time`` at the innermost level, the inner pipeline's optimum above);
    ``communication_time`` is the data-parallel synchronisation term and ``time`` the stage's time
    per sample (:func:`stage_time`).
    """

    start: int
    end: int
    replicas: int
    compute_time: float
    level_time: float
    communication_time: float
    time: float


@dataclass(frozen=True)
class PipelineStage:
    """One stage of the whole pipeline (innermost level), with all its replicas.

    ``layers`` is ``(first, last)``, positions in :attr:`PartitionResult.layer_order`, in which
    every stage is a contiguous run; ``layer_ids`` names them.  ``replicas`` is the total worker
    count, the product of ``replicas_per_level`` (innermost first).
    """

    start: int
    end: int
    layers: tuple[int, int]
    layer_ids: tuple[str, ...]
    replicas: int
    replicas_per_level: tuple[int, ...]
    compute_time: float


@dataclass(frozen=True)
class PartitionResult:
    """The optimum of PipeDream's partitioner (:func:`partition`).

    Attributes
    ----------
    time_per_sample
        The slowest stage's time at the outermost level, seconds per sample: PipeDream's optimum.
    stages
        The whole pipeline, first stage first.
    levels
        Per level, innermost first, the stages of that level's split (each outer stage's segment is
        split again by the level below).
    machines, bandwidths, straight
        The inputs.
    num_states
        Cut states of the profile.
    single_stage_time
        The whole model on one worker (seconds per sample).
    data_parallel_time
        The whole model replicated on every worker (PipeDream's data-parallel baseline).
    layer_order
        Layer ids in an order in which each stage is contiguous (a topological order).
    """

    time_per_sample: float
    stages: tuple[PipelineStage, ...]
    levels: tuple[tuple[LevelStage, ...], ...]
    machines: tuple[int, ...]
    bandwidths: tuple[float, ...]
    straight: bool
    num_states: int
    single_stage_time: float
    data_parallel_time: float
    layer_order: tuple[str, ...] = field(repr=False)

    @property
    def total_stages(self) -> int:
        """Stages of the whole pipeline."""
        return len(self.stages)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``stages[i]["layers"]`` is ``[first, last]``)."""
        return {
            "time_per_sample": self.time_per_sample,
            "total_stages": self.total_stages,
            "machines": list(self.machines),
            "bandwidths": list(self.bandwidths),
            "straight": self.straight,
            "num_states": self.num_states,
            "single_stage_time": self.single_stage_time,
            "data_parallel_time": self.data_parallel_time,
            "stages": [
                {"layers": list(s.layers), "replicas": s.replicas, "states": [s.start, s.end],
                 "replicas_per_level": list(s.replicas_per_level), "compute_time": s.compute_time,
                 "layer_ids": list(s.layer_ids)}
                for s in self.stages
            ],
            "levels": [
                {"machines": m, "bandwidth": b,
                 "stages": [{"start": s.start, "end": s.end, "replicas": s.replicas,
                             "compute_time": s.compute_time, "level_time": s.level_time,
                             "communication_time": s.communication_time, "time": s.time}
                            for s in level]}
                for m, b, level in zip(self.machines, self.bandwidths, self.levels, strict=True)
            ],
            "layer_order": list(self.layer_order),
        }


# --------------------------------------------------------------------------- tables
def segment_tables(states: StateGraph) -> tuple[np.ndarray, np.ndarray]:
    """Compute time and parameter bytes of every segment, as ``(n + 1) x n`` arrays.

    Row ``r`` is cut ``r`` (the segment starts after state ``r - 1``; row 0 at the input),
    column ``j`` is the segment's last state.  Segments that are not real (state ``r - 1`` is
    not an ancestor of state ``j``) have time ``inf`` and parameters 0.
    """
    n = states.n
    cum = np.asarray(states.cum_time, dtype=float)
    par = np.asarray(states.cum_parameter, dtype=float)
    real = np.zeros((n + 1, n), dtype=bool)
    real[0, :] = True
    for j, ancestors in enumerate(states.ancestors):
        p = ancestors
        while p:
            low = p & -p
            real[low.bit_length(), j] = True  # row (state + 1)
            p ^= low
    before = np.concatenate(([0.0], cum))[:, None]
    pbefore = np.concatenate(([0.0], par))[:, None]
    times = np.where(real, cum[None, :] - before, np.inf)
    times[0, :] = cum  # T[0][j] is the prefix itself, not a difference
    params = np.where(real, par[None, :] - pbefore, 0.0)
    params[0, :] = par
    return times, params


@dataclass(frozen=True)
class LevelTable:
    """One level's dynamic-programming table and what it was solved with.

    ``best[r, j, m]`` is the best time of the segment from cut ``r`` to state ``j`` on ``m + 1``
    workers of this level (``inf`` if none); at the outermost level only row 0 is kept.  ``last[m']`` is the time of a last stage from cut ``k + 1``
    to state ``j`` on ``m'`` workers, indexed ``[k, j]``.
    """

    times: np.ndarray
    params: np.ndarray
    best: np.ndarray
    last: tuple[np.ndarray | None, ...]
    machines: int
    bandwidth: float
    divisor: float
    straight: bool

    def whole(self, r: int, j: int, m: int) -> float:
        """The segment ``(r, j)`` as one stage on ``m + 1`` workers (``inf`` if not allowed)."""
        if self.straight and m > 0:
            return math.inf
        return float(stage_time(self.times[r, j], self.params[r, j], m + 1, self.bandwidth, self.divisor))


def solve_level(times: np.ndarray, params: np.ndarray, machines: int, bandwidth: float, *,
                divisor: float = 1.0, straight: bool = False, all_rows: bool = True) -> LevelTable:
    """Solve one level of the hierarchy for every segment.

    Parameters
    ----------
    times, params
        Segment compute times (seconds) and parameter bytes, from :func:`segment_tables`, or for
        an outer level the inner level's optimum (``best[:, :, -1]``) with the same parameters.
    machines
        Workers at this level.
    bandwidth
        The level's bandwidth (bytes per second).
    divisor
        The inner level's worker count (1 at the innermost level): see :func:`stage_time`.
    straight
        No replication: every stage on one worker.
    all_rows
        Solve segments from every cut (needed by an outer level); otherwise from cut 0 only.
    """
    rows, n = times.shape
    kept = rows if all_rows else 1
    best = np.full((kept, n, machines), np.inf)
    best[:, :, 0] = times[:kept]
    widths = range(1, 2) if straight else range(1, machines)
    last: list[np.ndarray | None] = [None] * machines
    for w in widths if machines > 1 else ():
        last[w] = stage_time(times[1:], params[1:], w, bandwidth)
    for m in range(1, machines):
        if not straight:
            best[:, :, m] = stage_time(times[:kept], params[:kept], m + 1, bandwidth, divisor)
        for w in widths:
            if w > m:
                break
            lw = last[w]
            assert lw is not None
            _minmax_into(best[:, :, m], best[:, :, m - w], lw)
    return LevelTable(times, params, best, tuple(last), machines, bandwidth, divisor, straight)


def _minmax_into(out: np.ndarray, head: np.ndarray, tail: np.ndarray) -> None:
    """``out[r, j] = min(out[r, j], min_k max(head[r, k], tail[k, j]))`` in place.

    ``head[r, k]`` is finite only for ``k >= r`` and ``tail[k, j]`` only for ``j > k``, so a block
    of rows ``r0 <= r < r1`` needs ``k >= r0`` and ``j > r0`` only.
    """
    rows, n = head.shape
    r0 = 0
    while r0 < rows and r0 < n - 1:
        width = n - r0
        r1 = min(rows, r0 + max(1, BLOCK_ELEMENTS // (width * width)))
        block = np.maximum(head[r0:r1, r0:, None], tail[None, r0:, r0 + 1:])
        np.minimum(out[r0:r1, r0 + 1:], block.min(axis=1), out=out[r0:r1, r0 + 1:])
        r0 = r1


# --------------------------------------------------------------------------- reading back
def _split(table: LevelTable, r: int, j: int, m: int) -> list[tuple[int, int, int]]:
    """The stages ``(start cut, last state, workers)`` of segment ``(r, j)`` on ``m + 1`` workers.

    Ties go to the whole segment, then to the fewest workers on the last stage, then to the
    earliest split.  Values are compared exactly: the table holds the same floats.
    """
    stages: list[tuple[int, int, int]] = []
    while True:
        value = table.best[r, j, m]
        if value == table.whole(r, j, m):
            stages.append((r, j, m + 1))
            break
        k, w = _last_stage(table, r, j, m, value)
        stages.append((k + 1, j, w))
        j, m = k, m - w
    stages.reverse()
    return stages


def _last_stage(table: LevelTable, r: int, j: int, m: int, value: float) -> tuple[int, int]:
    """The split ``(k, w)`` whose candidate equals ``value``: the rest ends at state ``k``, the
    last stage runs on ``w`` workers."""
    for w in range(1, 2 if table.straight else m + 1):
        lw = table.last[w]
        assert lw is not None
        hits = np.flatnonzero(np.maximum(table.best[r, :, m - w], lw[:, j]) == value)
        if hits.size:
            return int(hits[0]), w
    raise RuntimeError(f"no split reproduces segment ({r}, {j}) on {m + 1} workers")  # pragma: no cover


def _level_stage(table: LevelTable, states: StateGraph, seg: tuple[int, int, int], first: bool) -> LevelStage:
    r, j, w = seg
    divisor = table.divisor if first else 1.0
    compute = states.cum_time[j] - (states.cum_time[r - 1] if r > 0 else 0.0)
    comm = float(allreduce_time(table.params[r, j], w, table.bandwidth, divisor)) / w
    t = float(stage_time(table.times[r, j], table.params[r, j], w, table.bandwidth, divisor))
    return LevelStage(r, j + 1, w, compute, float(table.times[r, j]), comm, t)


# --------------------------------------------------------------------------- the partitioner
def partition(profile: Profile | StateGraph, machines: Sequence[int], bandwidths: Sequence[float], *,
              straight: bool = False) -> PartitionResult:
    """PipeDream's optimum partition of ``profile`` on a machine hierarchy.

    Parameters
    ----------
    profile
        A profile (:func:`~pal_opt.pipeline.profile.load_profile`) or its cut states.
    machines
        Workers per level, innermost first (``[8]``: 8 GPUs; ``[4, 8]``: 8 servers of 4).
    bandwidths
        Bytes per second per level, innermost first.
    straight
        A straight pipeline: no stage is replicated (exactly one stage per worker).

    Returns
    -------
    PartitionResult

    Raises
    ------
    OptionError
        Bad machines or bandwidths, or a straight pipeline with more workers than the model has
        cut points.
    """
    levels = _check_levels(machines, bandwidths)
    states = profile if isinstance(profile, StateGraph) else build_states(profile)
    times, params = segment_tables(states)
    tables: list[LevelTable] = []
    divisor = 1.0
    for index, (m, b) in enumerate(levels):
        final = index == len(levels) - 1
        table = solve_level(times, params, m, b, divisor=divisor, straight=straight, all_rows=not final)
        tables.append(table)
        times, divisor = table.best[:, :, -1], float(m)
    value = float(tables[-1].best[0, states.n - 1, -1])
    if not math.isfinite(value):
        raise OptionError(f"a straight pipeline on {math.prod(m for m, _ in levels)} workers needs at least as "
                          f"many cut states in a chain; the profile has {states.n} states")
    return _result(states, tables, levels, straight, value)


def _check_levels(machines: Sequence[int], bandwidths: Sequence[float]) -> list[tuple[int, float]]:
    machines, bandwidths = list(machines), list(bandwidths)
    if not machines:
        raise OptionError("machines: at least one level is needed")
    if len(machines) != len(bandwidths):
        raise OptionError(f"machines has {len(machines)} levels but bandwidths has {len(bandwidths)}")
    for i, m in enumerate(machines):
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise OptionError(f"machines[{i}]: must be a positive integer, got {m!r}")
    for i, b in enumerate(bandwidths):
        if isinstance(b, bool) or not isinstance(b, (int, float, np.number)) or not math.isfinite(b) or b <= 0:
            raise OptionError(f"bandwidths[{i}]: must be a positive finite number (bytes/s), got {b!r}")
    return [(int(m), float(b)) for m, b in zip(machines, bandwidths, strict=True)]


def _result(states: StateGraph, tables: list[LevelTable], levels: list[tuple[int, float]], straight: bool,
            value: float) -> PartitionResult:
    n = states.n
    segments: list[tuple[int, int, tuple[int, ...]]] = [(0, n - 1, ())]  # (start cut, last state, outer replicas)
    per_level: list[tuple[LevelStage, ...]] = []
    for index in range(len(tables) - 1, -1, -1):
        table = tables[index]
        found: list[tuple[int, int, tuple[int, ...]]] = []
        shown: list[LevelStage] = []
        for r, j, outer in segments:
            for pos, seg in enumerate(_split(table, r, j, table.machines - 1)):
                shown.append(_level_stage(table, states, seg, first=pos == 0))
                found.append((seg[0], seg[1], (seg[2], *outer)))
        per_level.append(tuple(shown))
        segments = found
    per_level.reverse()
    stages = _pipeline_stages(states, segments)
    return PartitionResult(
        time_per_sample=value,
        stages=stages,
        levels=tuple(per_level),
        machines=tuple(m for m, _ in levels),
        bandwidths=tuple(b for _, b in levels),
        straight=straight,
        num_states=n,
        single_stage_time=states.cum_time[-1],
        data_parallel_time=_data_parallel(states, levels),
        layer_order=tuple(name for stage in stages for name in stage.layer_ids),
    )


def _ordered(states: StateGraph, start: int, end: int) -> list[int]:
    members = set(states.segment_layers(start, end))
    return [v for v in states.profile.topological_order if v in members]


def _pipeline_stages(states: StateGraph, segments: list[tuple[int, int, tuple[int, ...]]]) -> tuple[PipelineStage, ...]:
    out: list[PipelineStage] = []
    offset = 0
    for r, j, reps in segments:
        layers = _ordered(states, r, j + 1)
        compute = states.cum_time[j] - (states.cum_time[r - 1] if r > 0 else 0.0)
        out.append(PipelineStage(
            start=r, end=j + 1, layers=(offset, offset + len(layers) - 1),
            layer_ids=tuple(states.profile.layers[v].id for v in layers),
            replicas=math.prod(reps), replicas_per_level=reps, compute_time=compute,
        ))
        offset += len(layers)
    return tuple(out)


def _data_parallel(states: StateGraph, levels: list[tuple[int, float]]) -> float:
    """The whole model replicated on every worker, level by level (PipeDream's baseline)."""
    total, divisor = states.cum_time[-1], 1.0
    for m, b in levels:
        total = float(stage_time(total, states.cum_parameter[-1], m, b, divisor))
        divisor = float(m)
    return total
