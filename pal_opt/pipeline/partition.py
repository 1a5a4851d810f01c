"""PipeDream's hierarchical partitioner: the optimum pipeline of a profiled model on a machine tree.

The model (PipeDream, SOSP'19; described in our words in ``PIPEDREAM_MODEL.md``): workers form
levels, innermost first (``machines=[4, 8]`` is 8 servers of 4 GPUs), each level with its own
bandwidth.  A pipeline cuts the model at cut states (:mod:`pal_opt.pipeline.states`) into stages,
each stage replicated data-parallel over some of the level's workers; a worker of an outer level is
a whole inner level, which pipelines its segment again.  The time per sample is the slowest
stage's time; activation transfers are not counted (PipeDream counts them only with an activation
compression ratio).

The cost model is :func:`~pal_opt.pipeline.cost.stage_time`, shared by every method that prices a
stage.  The search is a dynamic program over segments, solved level by level
(:mod:`pal_opt.pipeline.tables`): the best time of a segment on ``m + 1`` workers either
replicates the whole segment or splits off a last stage on ``w`` workers and recurses on the rest
with ``m + 1 - w``.  This module reads the stages back from the tables and builds the result.

Only real segments take part (a segment from cut ``p`` to state ``j`` with ``p`` an ancestor of
``j``), so the answer does not depend on how the states are numbered.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..errors import InfeasiblePartitionError, InstanceError, OptionError
from .cost import allreduce_time, stage_time
from .profile import Profile
from .states import StateGraph, build_states, straight_problem
from .tables import ENGINES, SolvedLevel, solve_levels

__all__ = [
    "LevelStage",
    "PipelineStage",
    "PartitionResult",
    "stage_time",
    "allreduce_time",
    "partition",
    "MAX_WORKERS_PER_LEVEL",
    "METHODS",
]

#: Most workers per level (the tables grow with its square).
MAX_WORKERS_PER_LEVEL: int = 1024
#: The partitioning methods: the dynamic program and the integer program (:mod:`pal_opt.pipeline.ip`).
METHODS: tuple[str, ...] = ("dp", "ip")


# --------------------------------------------------------------------------- results
class LevelStage(NamedTuple):
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


class PipelineStage(NamedTuple):
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


class PartitionResult(NamedTuple):
    """The optimum of PipeDream's partitioner (:func:`partition`).

    An immutable record, like :class:`LevelStage` and :class:`PipelineStage` (named tuples rather
    than frozen dataclasses, which would cost a fifth of a small ``pal-opt partition`` run to
    import and build).

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
        The whole model replicated on every worker (PipeDream's data-parallel baseline); ``inf``
        when its synchronisation overflows (``None`` in :meth:`to_dict`).
    layer_order
        Layer ids in an order in which each stage is contiguous (a topological order).
    method
        ``"dp"`` (the dynamic program) or ``"ip"`` (the integer programs).
    backend
        With ``method="ip"``: the solver backend that solved them (None for ``"dp"``).
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
    layer_order: tuple[str, ...]
    method: str = "dp"
    backend: str | None = None

    @property
    def total_stages(self) -> int:
        """Stages of the whole pipeline."""
        return len(self.stages)

    def job_pipeline(self) -> Any:
        """The stages as a job's :class:`pal_opt.model.Pipeline` (each stage's time per sample
        with its replicas, and its replica count), for a one-level partition; None for several
        levels (an outer stage is a whole inner pipeline), and for a profile whose stages take no
        time at all (a job's pipeline needs one stage that takes time).

        >>> from pal_opt.pipeline import parse_profile
        >>> line = ("node{0} -- L -- forward_compute_time={1}, backward_compute_time=0, activation_size=1, "
        ...         "parameter_size={2}")
        >>> text = "\\n".join([line.format(1, 4.0, 1e9), line.format(2, 1.0, 0), "\\tnode1 -- node2"])
        >>> partition(parse_profile(text), [3], [1e9]).job_pipeline()  # node1's 1 GB is not replicated
        Pipeline(stage_times=(0.004, 0.0005), replicas=(1, 2))
        """
        if len(self.levels) != 1 or max(s.time for s in self.levels[0]) <= 0:
            return None
        from ..model import Pipeline

        return Pipeline(tuple(s.time for s in self.levels[0]), tuple(s.replicas for s in self.levels[0]))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``stages[i]["layers"]`` is ``[first, last]``); for a one-level
        partition ``pipeline`` is the instance file's ``jobs[].pipeline`` of a job running it."""
        return {
            "time_per_sample": self.time_per_sample,
            "total_stages": self.total_stages,
            "machines": list(self.machines),
            "bandwidths": list(self.bandwidths),
            "straight": self.straight,
            "num_states": self.num_states,
            "single_stage_time": self.single_stage_time,
            # (a baseline, not the answer: None when it overflows, over a tiny bandwidth)
            "data_parallel_time": self.data_parallel_time if math.isfinite(self.data_parallel_time) else None,
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
            "method": self.method,
            **({"backend": self.backend} if self.backend is not None else {}),
            **({"pipeline": {"stage_times": list(pipe.stage_times), "replicas": list(pipe.replicas)}}
               if (pipe := self.job_pipeline()) is not None else {}),
        }


# --------------------------------------------------------------------------- reading back
def _level_stage(table: SolvedLevel, states: StateGraph, seg: tuple[int, int, int], first: bool) -> LevelStage:
    r, j, w = seg
    divisor = table.divisor if first else 1.0
    compute = states.cum_time[j] - (states.cum_time[r - 1] if r > 0 else 0.0)
    comm = float(allreduce_time(table.params(r, j), w, table.bandwidth, divisor)) / w
    t = float(stage_time(table.time(r, j), table.params(r, j), w, table.bandwidth, divisor))
    return LevelStage(r, j + 1, w, compute, table.time(r, j), comm, t)


# --------------------------------------------------------------------------- the partitioner
def partition(profile: Profile | StateGraph, machines: Sequence[int], bandwidths: Sequence[float], *,
              straight: bool = False, engine: str = "auto", method: str = "dp", backend: str | None = None,
              time_limit: float | None = None) -> PartitionResult:
    """PipeDream's optimum partition of ``profile`` on a machine hierarchy.

    Parameters
    ----------
    profile
        A profile (:func:`~pal_opt.pipeline.profile.load_profile`) or its cut states
        (:func:`~pal_opt.pipeline.states.build_states`).
    machines
        Workers per level, innermost first (``[8]``: 8 GPUs; ``[4, 8]``: 8 servers of 4).
    bandwidths
        Bytes per second per level, innermost first.
    straight
        A straight pipeline: no stage is replicated (exactly one stage per worker).
    engine
        ``"auto"`` (default), ``"numpy"`` or ``"python"``: how the dynamic program is computed
        (:func:`~pal_opt.pipeline.tables.solve_levels`).  All give the same floats.
    method
        ``"dp"`` (default): the dynamic program; ``"ip"``: the integer programs of
        :mod:`pal_opt.pipeline.ip` (one per segment at inner levels), the same optimum by another
        method.
    backend
        With ``method="ip"``: the solver backend (:func:`pal_opt.ilp.backends.get_backend`; None:
        the first installed, HiGHS).
    time_limit
        With ``method="ip"``: seconds per program; a program not proven optimal in time is an
        error.

    Returns
    -------
    PartitionResult

    Raises
    ------
    OptionError
        Bad machines, bandwidths, engine or method; ``backend`` or ``time_limit`` without
        ``method="ip"``, a ``time_limit`` that is not a positive number, or ``profile`` not a
        :class:`~pal_opt.pipeline.profile.Profile` or :class:`~pal_opt.pipeline.states.StateGraph`.
    InstanceError
        A bad profile (from :func:`~pal_opt.pipeline.states.build_states`), or times that overflow
        (sizes too large for the bandwidths).
    InfeasiblePartitionError
        A straight pipeline with more workers than the model has cut states in a chain
        (:meth:`~pal_opt.pipeline.states.StateGraph.max_stages`).
    BackendError
        With ``method="ip"``: a program was not solved to proven optimality.
    """
    levels = _check_levels(machines, bandwidths)
    if engine not in ENGINES:
        raise OptionError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    if method not in METHODS:
        raise OptionError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    _check_ip_options(method, backend, time_limit)
    if not isinstance(profile, (Profile, StateGraph)):
        raise OptionError(f"profile: expected a Profile (load_profile(path) reads a file) or a StateGraph, "
                          f"got {type(profile).__name__}")
    states = profile if isinstance(profile, StateGraph) else build_states(profile)
    problem = straight_problem(states, math.prod(m for m, _ in levels)) if straight else None
    if problem:
        raise InfeasiblePartitionError(problem)
    if method == "ip":
        from .ip import solve_levels_ip

        solved = solve_levels_ip(states, levels, straight=straight, backend=backend, time_limit=time_limit)
        from ..ilp.backends import get_backend

        result = _result(states, solved, levels, straight, float(solved[-1].optimum[0, states.n - 1]))._replace(
            method="ip", backend=get_backend(backend).name)
    else:
        tables = solve_levels(states, levels, straight=straight, engine=engine)
        result = _result(states, tables, levels, straight, tables[-1].best(0, states.n - 1, tables[-1].machines - 1))
    _check_finite(result, states)
    return result


def _check_ip_options(method: str, backend: str | None, time_limit: float | None) -> None:
    if method != "ip" and (backend is not None or time_limit is not None):
        raise OptionError("backend and time_limit apply to method='ip' only")
    if time_limit is not None and _positive_finite(time_limit) is None:
        raise OptionError(f"time_limit: must be a positive number of seconds, got {time_limit!r}")


def _positive_finite(value: Any) -> float | None:
    """``value`` as a float if ``float()`` takes it (not a bool or a string) and it is finite and
    > 0, else None: the one reading of ``time_limit`` and of each level's bandwidth."""
    try:
        number = math.nan if isinstance(value, (bool, str)) else float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past a float's range
        return None
    return number if math.isfinite(number) and number > 0 else None


def _check_finite(result: PartitionResult, states: StateGraph) -> None:
    """Bad input when the answer's time overflows (huge sizes over a tiny bandwidth): a float the
    JSON output could not hold and no meaningful answer.  The data-parallel baseline may overflow
    where the answer does not (a pipeline without replicas synchronises nothing): it is then
    reported as None."""
    figures = [("time_per_sample", result.time_per_sample)]
    figures += [("a stage's time", s.time) for level in result.levels for s in level]
    for name, value in figures:
        if not math.isfinite(value):
            raise InstanceError(f"{name} overflows (not a finite number): the profile's times and parameter sizes "
                                f"are too large for the bandwidths {list(result.bandwidths)}",
                                source=states.profile.source)


def _check_levels(machines: Sequence[int], bandwidths: Sequence[float]) -> list[tuple[int, float]]:
    machines, bandwidths = list(machines), list(bandwidths)
    if not machines:
        raise OptionError("machines: at least one level is needed")
    if len(machines) != len(bandwidths):
        raise OptionError(f"machines has {len(machines)} levels but bandwidths has {len(bandwidths)}")
    levels = []
    for i, (m, b) in enumerate(zip(machines, bandwidths, strict=True)):
        try:
            count = -1 if isinstance(m, bool) else operator.index(m)
        except TypeError:
            count = -1
        if not 1 <= count <= MAX_WORKERS_PER_LEVEL:
            raise OptionError(f"machines[{i}]: must be an integer from 1 to {MAX_WORKERS_PER_LEVEL}, got {m!r}")
        rate = _positive_finite(b)
        if rate is None:
            raise OptionError(f"bandwidths[{i}]: must be a positive finite number (bytes/s), got {b!r}")
        levels.append((count, rate))
    return levels


def _result(states: StateGraph, tables: Sequence[SolvedLevel], levels: list[tuple[int, float]], straight: bool,
            value: float) -> PartitionResult:
    n = states.n
    segments: list[tuple[int, int, tuple[int, ...]]] = [(0, n - 1, ())]  # (start cut, last state, outer replicas)
    per_level: list[tuple[LevelStage, ...]] = []
    for index in range(len(tables) - 1, -1, -1):
        table = tables[index]
        found: list[tuple[int, int, tuple[int, ...]]] = []
        shown: list[LevelStage] = []
        for r, j, outer in segments:
            for pos, seg in enumerate(table.split(r, j)):
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
