"""The trace-driven round simulator.

Time advances in rounds of ``round_length`` seconds starting at t = 0.  At the start of each
round:

1. jobs whose ``submit_time`` ≤ t join the active set (as the Blox simulator hands out
   arrivals at round boundaries);
2. the queue policy (:mod:`.queue`) orders the active, unfinished jobs;
3. a :class:`~pal_opt.model.RoundInstance` is built: the jobs in queue order, running jobs with
   ``placement`` set, λ from ``locality_penalty``, the cluster's **raw** drawn factors (the
   method bins them itself per ``binning``); every GPU is FREE because every job holding GPUs
   is in the queue;
4. :func:`pal_opt.solve.solve` places it with the chosen method.

A pipeline job (the trace's optional ``pipeline``, :class:`~pal_opt.model.Pipeline`) is offered
with its stages; its GPU list, as the method returns it, runs the stages in order (a method that
does not know stages, such as PAL, places it as a flat gang and its list order maps the stages).

During the round each placed job advances ``(round_length − lost) / (iter_time × slowdown)``
iterations, where ``slowdown`` is :func:`pal_opt.cost.job_slowdown_pos` on the raw, unbinned
factors (max factor of the job's class over its GPUs × the job's locality penalty for the
level its GPUs span; for a pipeline job the slowest *stage*'s factor, :func:`pal_opt.cost.pace_factor`,
stage time × the slowest factor among that stage's GPUs) and ``lost`` is the restart cost when the job was moved, or resumed after
a preemption (first starts cost nothing; the restart cost must be below the round length).  A
restart cost that runs past the round's end (one paid after a failure inside the round) is paid
on in the next round by a job that keeps its GPUs.  A job that finishes mid-round completes at the
exact fractional time; its GPUs are free from the next round.

The PAL artifact's simulator charges nothing for preemption or migration (its launch path
for simulated jobs is a no-op marked "TODO: Add time for checkpoint and restore"), so the
default restart cost is 0.  The restart cost has the unit it has everywhere (seconds of work
lost on each GPU of the job, :mod:`pal_opt.cost.restart`): every round's
:class:`~pal_opt.model.RoundParams` carries ``restart_cost = S`` and ``round_length = R``, so a
method that prices moves (the integer program) sees what ``pal-opt solve --restart-cost S
--round R`` sees for the same round: ``−ln(1 − S/R)`` per GPU of a moved job (losing S of R
seconds is the same progress as running the whole round R / (R − S) times slower, and the
round cost is Σ d·ln(slowdown)).

With ``SimConfig(failures=FailureConfig(...))`` (:mod:`.failures`; off by default) GPUs and
servers fail and come back.  Before a round is placed, the failures up to its start take their
GPUs out of service (the round's cluster marks them FAILED for every method) and the jobs on them
lose their work since their last checkpoint.  A failure inside a round splits it: every running
job works up to that instant, the jobs hit lose their work since the checkpoint, and
:func:`pal_opt.repair.repair` re-places them on the GPUs left (the other running jobs keep
theirs, the GPUs of jobs finished earlier in the round stay held); a re-placed job restarts from
its checkpoint at that instant (paying the restart cost), one the repair leaves out waits for the
next round.  Without failures a round is one piece and the arithmetic is the same as before.

The run ends when every job has finished (or is unplaceable), or with ``SimConfig(max_time=S)``
at the first round boundary at or after ``S`` simulated seconds (``pal-opt simulate --max-hours``):
the jobs still unfinished then are in the result with no finish time.  Without ``max_time``, a
trace that would need more than :data:`MAX_ROUNDS` rounds on median GPUs is refused
(:class:`~pal_opt.errors.InstanceError`).
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..cost import job_slowdown_pos
from ..cost.restart import restart_cost_units
from ..errors import BackendError, InfeasibleRoundError, InputTypeError, InstanceError, OptionError, counted
from ..model import Cluster, GpuState, Job, RoundInstance, RoundParams, keeps_placement
from ..options import (
    DEFAULT_ROUND_LENGTH,
    SolveOptions,
    check_callbacks,
    check_cluster_size,
    check_count,
    check_finite,
    check_flag,
    check_seconds,
    is_finite_number,
    require_mapping,
    shown_number,
)
from ..result import PlacementResult, Status
from ..scheduler import RoundPolicy
from .failures import Checkpoints, FailureConfig, FailureEvent, FailureProcess, FailureStats, repair_in_round
from .queue import QueueEntry, get_queue_policy
from .records import JobRecord, RoundRecord, SimulationResult
from .summary import summarize
from .variability import DRAWS, artifact_draw_factors, draw_cluster_factors

log = logging.getLogger("pal_opt.simulate")

__all__ = [
    "ClusterSpec",
    "SimConfig",
    "JobRecord",
    "RoundRecord",
    "SimulationResult",
    "CLUSTER_SHAPE",
    "parse_cluster",
    "build_cluster",
    "simulate",
    "check_trace",
    "restart_cost_units",
]

_EPS = 1e-9

#: Rounds a run without ``max_time`` may need at the least (on median GPUs) before it is refused:
#: one job of 10**15 iterations would otherwise keep the simulator going for ever.
MAX_ROUNDS = 1_000_000


# ---------------------------------------------------------------------------- cluster
@dataclass(frozen=True)
class ClusterSpec:
    """Shape of a simulated cluster: ``servers`` × ``gpus_per_server``, optionally in racks."""

    servers: int
    gpus_per_server: int
    racks: int = 0

    def __post_init__(self) -> None:
        # ClusterSpec("4", 4) said "n_gpus must be an integer >= 1, got '4444'"; 4 servers in 3
        # racks, or more GPUs than parse_cluster builds, were built without a word
        set_ = object.__setattr__
        set_(self, "servers", check_count(self.servers, "ClusterSpec: servers"))
        set_(self, "gpus_per_server", check_count(self.gpus_per_server, "ClusterSpec: gpus_per_server"))
        set_(self, "racks", check_count(self.racks, "ClusterSpec: racks", 0))
        if self.racks and self.servers % self.racks:
            raise OptionError(f"ClusterSpec: {self.servers} servers do not split into {self.racks} racks of equal size")
        check_cluster_size(self.servers * self.gpus_per_server, f"ClusterSpec {self}")

    @property
    def num_gpus(self) -> int:
        return self.servers * self.gpus_per_server

    def __str__(self) -> str:
        if self.racks:
            return f"{self.racks}x{self.servers // self.racks}x{self.gpus_per_server}"
        return f"{self.servers}x{self.gpus_per_server}"


#: A cluster shape: ``16x4`` (servers × GPUs per server) or ``4x4x4`` (racks × servers per rack × GPUs).
CLUSTER_SHAPE = re.compile(r"\s*(\d+)\s*[xX]\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?")


def parse_cluster(text: str) -> ClusterSpec:
    """``"16x4"`` (servers × GPUs per server) or ``"4x4x4"`` (racks × servers per rack × GPUs).

    >>> parse_cluster("16x4"), parse_cluster("2x8x4").servers
    (ClusterSpec(servers=16, gpus_per_server=4, racks=0), 16)
    """
    parts = CLUSTER_SHAPE.fullmatch(text if isinstance(text, str) else "")
    if not parts:
        raise OptionError(f"--cluster must look like 16x4 or 4x4x4 (racks x servers x GPUs), got {text!r}")
    sizes = [int(n) for n in parts.groups() if n is not None]
    if min(sizes) < 1:
        raise OptionError(f"--cluster sizes must be positive, got {text!r}")
    check_cluster_size(math.prod(sizes), f"--cluster {text.strip()}")
    if len(sizes) == 2:
        return ClusterSpec(*sizes)
    racks, servers, gpus = sizes
    return ClusterSpec(racks * servers, gpus, racks=racks)


def build_cluster(
    spec: ClusterSpec,
    variability: Mapping[str, str | os.PathLike[str]] | None = None,
    seed: int = 0,
    draw: str = "numpy",
    *,
    synthetic_seed: int | None = None,
) -> tuple[Cluster, dict[str, str]]:
    """A cluster of ``spec``'s shape whose GPUs draw raw per-class factors from measurements.

    Parameters
    ----------
    spec
        Shape.
    variability
        ``{class: measurement file}`` overriding the default source (the PAL artifact's
        Longhorn files when present, else the synthetic model; see :mod:`.variability`).
    seed
        Seeds the draw (``draw="numpy"``).
    draw
        ``"numpy"`` (seeded by ``seed``) or ``"artifact"`` (the PAL artifact's own draw,
        :func:`~pal_opt.simulate.variability.artifact_draw_factors`; ``seed`` is not read, but
        checked all the same).
    synthetic_seed
        Given: classes without a file in ``variability`` draw from the synthetic Longhorn-like
        model seeded by it, whatever ``draw`` is and whether or not the shared files exist
        (``pal-opt simulate --synthetic-variability SEED``).  With ``draw="numpy"`` and no
        files, ``synthetic_seed=S`` gives the factors that the synthetic fallback gives
        ``seed=S``.

    Returns
    -------
    cluster, origins
        The cluster (all GPUs free) and ``{class: file or "synthetic"}``.
    """
    if not isinstance(spec, ClusterSpec):
        raise InputTypeError(f"must be a ClusterSpec (parse_cluster('16x4')), got {type(spec).__name__}", path="spec")
    if variability is not None:
        require_mapping(variability, "variability", "a mapping of class names to measurement files")
    check_count(seed, "seed", 0)  # checked with draw="artifact" too, which does not read it
    if synthetic_seed is not None:
        check_count(synthetic_seed, "synthetic_seed", 0)
    synth = None if synthetic_seed is None else _derive(synthetic_seed, 1)
    if draw == "numpy":
        factors, origins = draw_cluster_factors(spec.num_gpus, variability, seed=_derive(seed, 1), synthetic_seed=synth)
    elif draw == "artifact":
        factors, origins = artifact_draw_factors(spec.num_gpus, variability, synthetic_seed=synth)
    else:
        raise OptionError(f"unknown variability draw {draw!r}; choose one of {', '.join(DRAWS)}")
    return Cluster.uniform(spec.servers, spec.gpus_per_server, factors, racks=spec.racks), origins


def _derive(seed: int, *keys: int) -> int:
    """A child seed for one purpose (variability draw, random policy round k, ...)."""
    # modulo 2**128, not 2**32: seeds 2**32 apart were one seed (below 2**32 nothing changes)
    return int(np.random.SeedSequence([int(seed) % 2**128, *keys]).generate_state(1)[0])


# ---------------------------------------------------------------------------- config
@dataclass(frozen=True)
class SimConfig:
    """Simulation parameters.

    Attributes
    ----------
    policy
        Placement method for :func:`pal_opt.solve.solve`: ``pal``, ``pmfirst``, ``packed``,
        ``packed-sticky``, ``random`` or ``ilp``.
    queue
        Queue policy: ``fifo``, ``las`` or ``srtf``.
    round_length
        Seconds per round.
    locality_penalty
        λ: slowdown multiplier for a gang spanning servers.
    rack_penalty
        Multiplier for a gang spanning servers within one rack (racked clusters); None = λ.
    binning
        Variability binning mode the method uses (progress always uses raw factors).
    restart_cost
        Seconds of work a job loses on each of its GPUs when it is moved or resumed after a
        preemption (the unit of :attr:`RoundParams.restart_cost <pal_opt.model.RoundParams>`).
    seed
        Seeds the random policy (and, via :func:`build_cluster`, the variability draw).
    admission, backend, time_limit
        Integer-program options (``policy="ilp"`` only).
    ilp_options
        Further integer-program options passed through (e.g. ``threads``, ``gap``).
    failures
        A :class:`~pal_opt.simulate.failures.FailureConfig` to inject GPU and server failures
        (seeded by ``seed``), or None (default): no failures.
    max_time
        Simulated seconds after which no round starts (the round under way then runs to its
        end), even with jobs unfinished: they keep ``finish_time`` None and the summary's
        ``n_completed`` is below ``n_jobs``.  None (default): run until every job is done.
    """

    policy: str = "pal"
    queue: str = "fifo"
    round_length: float = DEFAULT_ROUND_LENGTH
    locality_penalty: float = 1.7
    rack_penalty: float | None = None
    binning: str = "pal-artifact"
    restart_cost: float = 0.0
    seed: int = 0
    admission: str | None = None
    backend: str | None = None
    time_limit: float | None = None
    ilp_options: Mapping[str, Any] = field(default_factory=dict)
    failures: FailureConfig | None = None
    max_time: float | None = None

    def __post_init__(self) -> None:
        # checked when built, as the Sia simulator's SimConfig and ClusterSpec: checked only by
        # simulate(), a bad value was reported when the run started, far from the line that built it
        self.validate()

    def validate(self) -> None:
        """Check the configuration: the method and its options (:mod:`pal_opt.methods`), the
        round parameters (:class:`~pal_opt.model.RoundParams`) and what only the simulator has
        (one :class:`~pal_opt.errors.OptionError` naming the first bad field).  Run when the
        configuration is built (:func:`dataclasses.replace` too), so a bad one is never built;
        still public, for callers that ran it themselves."""
        get_queue_policy(self.queue)
        check_seconds(self.round_length, "round_length")
        if self.rack_penalty is not None:
            check_finite(self.rack_penalty, "rack_penalty", 1.0)
        check_seconds(self.restart_cost, "restart_cost", allow_zero=True)
        if self.restart_cost >= self.round_length:
            raise OptionError(f"restart-cost must be below the round length ({self.restart_cost:g} s ≥ "
                              f"{self.round_length:g} s): jobs that trade GPUs every round would never end")
        if self.max_time is not None:
            check_seconds(self.max_time, "max_time")
        check_count(self.seed, "seed", 0)
        if self.failures is not None:
            if not isinstance(self.failures, FailureConfig):
                raise OptionError(f"failures must be a FailureConfig or None, got {type(self.failures).__name__}")
            self.failures.validate()
        self.round_params()
        self.options()

    def round_params(self) -> RoundParams:
        """The parameters of every round: what ``pal-opt solve --restart-cost S --round R`` gives
        a round (the round program converts S itself, :mod:`pal_opt.cost.restart`)."""
        return RoundParams.from_arguments(
            locality_penalty=self.locality_penalty, binning=self.binning,
            restart_cost=self.restart_cost, round_length=self.round_length,
        )

    def options(self) -> SolveOptions:
        """The method's options, checked against the method (:mod:`pal_opt.methods`)."""
        from ..methods import METHODS

        method = METHODS.get(self.policy)
        if method is None:
            raise OptionError(f"unknown policy {self.policy!r}; choose one of {', '.join(METHODS)}")
        given = {n: getattr(self, n) for n in ("admission", "backend", "time_limit") if getattr(self, n) is not None}
        ilp_options = require_mapping(self.ilp_options, "ilp_options", "a mapping of option names to values")
        opts = SolveOptions.from_kwargs(**given, **dict(ilp_options))
        method.validate_options(opts)
        return opts

    @property
    def locality(self) -> tuple[float, float, float]:
        lam = float(self.locality_penalty)
        rack = lam if self.rack_penalty is None else float(self.rack_penalty)
        return (1.0, rack, lam)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ilp_options"] = dict(self.ilp_options)
        if self.failures is None:  # a run without failures records what it always recorded
            del d["failures"]
        if self.max_time is None:  # nor does a run without a time cap
            del d["max_time"]
        return d

    def repair_options(self) -> SolveOptions:
        """The options of the repairs inside a round (failures): the backend and limits given to
        the integer program, else the defaults (:data:`~pal_opt.repair.REPAIR_OPTIONS`)."""
        from ..options import DEFAULT_ILP_TIME_LIMIT
        from ..repair import REPAIR_OPTIONS

        given = {k: v for k, v in self.ilp_options.items() if k in REPAIR_OPTIONS}
        return SolveOptions.from_kwargs(backend=self.backend, time_limit=self.time_limit or DEFAULT_ILP_TIME_LIMIT,
                                        **given)


# ---------------------------------------------------------------------------- engine
def check_trace(trace: Sequence[Any], cluster: Cluster, source: str | None) -> None:
    """The trace against the cluster: positive demands and work, finite submit times, each
    pipeline adding up to its demand and each class with factors (an :class:`InstanceError`
    naming the row and column)."""
    if not trace:
        raise InstanceError("the trace has no jobs", source=source)
    for tj in trace:
        where = f"row {tj.row}, column " if getattr(tj, "row", 0) else f"job {tj.id!r}: "
        if not (isinstance(tj.demand, (int, np.integer)) and tj.demand >= 1):
            raise InstanceError(
                f"job {tj.id!r} must need a positive integer number of GPUs, got {tj.demand!r}",
                source=source,
                path=where + "num_gpus",
            )
        # is_finite_number: 10**400 refused as NaN is (math.isfinite raised OverflowError on it)
        if not (is_finite_number(tj.iterations) and tj.iterations > 0
                and is_finite_number(tj.iter_time) and tj.iter_time > 0):
            raise InstanceError(
                f"job {tj.id!r} needs finite positive iterations and iteration time",
                source=source,
                path=where + "duration",
            )
        if not (is_finite_number(tj.submit_time) and tj.submit_time >= 0):
            raise InstanceError(
                f"job {tj.id!r} has submit time {shown_number(tj.submit_time)}; expected a finite number ≥ 0",
                source=source,
                path=where + "submit_time",
            )
        pipe = getattr(tj, "pipeline", None)
        if pipe is not None and getattr(pipe, "gpus", None) != tj.demand:
            raise InstanceError(
                f"job {tj.id!r}: its pipeline's replicas must add up to num_gpus={tj.demand}",
                source=source,
                path=where + "pipeline",
            )
        if tj.perfclass not in cluster.factors:
            raise InstanceError(
                f"job {tj.id!r}: class {tj.perfclass!r} has no GPU factors (known: {', '.join(cluster.factors)})",
                source=source,
                path=where + "model",
            )


#: Without ``max_time``, a run stops after this many times the rounds its trace needs run one job
#: at a time on median GPUs: only restarts or failures that undo the jobs' work get there (a job
#: losing all its work to failures between checkpoints, say), and the run would not end.
STALL_FACTOR = 100


def _round_cap(trace: Sequence[Any], cfg: SimConfig) -> float:
    """The round after which a run without ``max_time`` stops (:data:`STALL_FACTOR`)."""
    if cfg.max_time is not None or not trace:
        return math.inf
    r = float(cfg.round_length)
    serial = sum(math.ceil(tj.iterations * tj.iter_time / r) for tj in trace)
    return STALL_FACTOR * (math.ceil(max(tj.submit_time for tj in trace) / r) + serial) + 1000


def _check_run_length(trace: Sequence[Any], cluster: Cluster, cfg: SimConfig, source: str | None) -> None:
    """Without ``max_time``, refuse a trace whose run needs more than :data:`MAX_ROUNDS` rounds on
    median GPUs: its longest job alone, or all its GPU-seconds of work on the whole cluster (jobs
    bigger than the cluster never run and do not count)."""
    if cfg.max_time is not None:
        return
    r = float(cfg.round_length)
    trace = [tj for tj in trace if tj.demand <= cluster.num_gpus]  # the others never run
    if not trace:
        return
    hint = "it would not end in reasonable time: stop it earlier with --max-hours (SimConfig(max_time=...))"
    last = max(trace, key=lambda tj: tj.submit_time)
    if last.submit_time / r > MAX_ROUNDS:  # (at 1e17 s and more, a second is below the clock's precision)
        where = f"row {last.row}, column submit_time" if getattr(last, "row", 0) else f"job {last.id!r}: submit_time"
        raise InstanceError(f"job {last.id!r} is submitted after {last.submit_time / r:.3g} rounds of {r:g} s, more "
                            f"than {MAX_ROUNDS:,}; {hint}", source=source, path=where)
    longest = max(trace, key=lambda tj: tj.iterations * tj.iter_time)
    rounds = longest.iterations * longest.iter_time / r
    if rounds > MAX_ROUNDS:
        where = f"row {longest.row}, column duration" if getattr(longest, "row", 0) else f"job {longest.id!r}: duration"
        raise InstanceError(f"job {longest.id!r} runs {rounds:.3g} rounds of {r:g} s on median GPUs, more than "
                            f"{MAX_ROUNDS:,}; {hint}", source=source, path=where)
    work = math.fsum(tj.demand * tj.iterations * tj.iter_time for tj in trace) / (cluster.num_gpus * r)
    if work > MAX_ROUNDS:
        raise InstanceError(f"the trace's work fills the cluster for {work:.3g} rounds of {r:g} s on median GPUs, "
                            f"more than {MAX_ROUNDS:,}; {hint}", source=source)


@dataclass(frozen=True)
class _Round:
    """One round as offered to the method: its number, start time and instance."""

    k: int
    t: float
    instance: RoundInstance
    job_of: dict[int, Job]  # trace index -> the job offered, for every active job


@dataclass(frozen=True)
class _Placed:
    """The method's answer to a round, checked: GPUs per trace index, status, seconds."""

    gpus: dict[int, tuple[int, ...]]
    status: str
    solve_seconds: float
    note: str = ""


@dataclass
class _Stint:
    """A job's run on one GPU set inside a round: from ``start`` to ``at`` (seconds after the
    round's start), restoring for ``restore`` more seconds, ``restored`` seconds spent restoring."""

    gpus: tuple[int, ...]
    slow: float
    tpi: float
    start: float
    restore: float
    at: float = 0.0
    restored: float = 0.0
    done: bool = False


@dataclass
class _Tally:
    """What the active jobs did during one round."""

    busy: float = 0.0
    spanning: int = 0
    preempted: int = 0
    moved: int = 0
    done: list[int] = field(default_factory=list)


class _Simulation:
    """The state of one run: per-job progress and placement, the active set, the clock.

    Jobs are referred to by their index in the trace.  Each method is one step of a round;
    :func:`simulate` calls them in order.
    """

    def __init__(self, trace: Sequence[Any], cluster: Cluster, cfg: SimConfig, source: str | None) -> None:
        n = len(trace)
        if np.any(cluster.state != 0):
            cluster = cluster.with_state(np.zeros(cluster.num_gpus, dtype=np.int8))
        self.trace = trace
        self.cluster = cluster
        self.cfg = cfg
        self.round_length = float(cfg.round_length)
        self.locality = cfg.locality
        self.params = cfg.round_params()
        self.policy = RoundPolicy(cfg.policy, track_running=False, options=cfg.options())
        self.queue_key = get_queue_policy(cfg.queue)
        self.records = [
            JobRecord(
                job_id=tj.id,
                model=tj.model,
                perfclass=tj.perfclass,
                demand=int(tj.demand),
                submit_time=float(tj.submit_time),
                iterations=float(tj.iterations),
                ideal_seconds=float(tj.iterations) * float(tj.iter_time),
                priority=int(getattr(tj, "priority", 0)),
                stages=len(tj.pipeline.replicas) if getattr(tj, "pipeline", None) is not None else 1,
            )
            for tj in trace
        ]
        #: per job, its pipeline stages (None: a gang); the round's job carries them
        self.pipelines = [getattr(tj, "pipeline", None) for tj in trace]
        self.iter_time = [float(tj.iter_time) for tj in trace]
        self.remaining = [float(tj.iterations) for tj in trace]
        self.placement: list[tuple[int, ...] | None] = [None] * n
        self.was_preempted = [False] * n
        #: restore seconds a running job still owes at a round's end (a restart cost that ran past
        #: it): paid first in the next round if the job keeps its GPUs
        self.restore_left: dict[int, float] = {}
        #: when each running job last (re)started (the greedy preemption comparator's order)
        self.started: list[float | None] = [None] * n
        self.by_id = {tj.id: i for i, tj in enumerate(trace)}
        if len(self.by_id) != n:
            raise InstanceError("duplicate job ids in the trace", source=source)
        self.arrivals = sorted(range(n), key=lambda i: (self.records[i].submit_time, i))
        g = cluster.num_gpus
        #: jobs no round can serve, by trace index: reported, never queued
        self.unplaceable = {i: f"needs {counted(r.demand, 'GPU')}; the cluster has {g}"
                            for i, r in enumerate(self.records) if r.demand > g}
        self.active: list[int] = []
        self.rounds: list[RoundRecord] = []
        self.fallbacks = 0
        self.solver_crashes = 0
        self.finished = 0
        self.next_arrival = 0
        self.t = 0.0
        self.k = 0
        self.idle_rounds = 0
        self.on_round: Callable[[RoundInstance, PlacementResult], None] | None = None
        fc = cfg.failures
        #: the failure process, the checkpoints and what failures did (all None without failures)
        self.failures = None if fc is None else FailureProcess(
            cluster, fc, _derive(cfg.seed if fc.seed is None else fc.seed, 3))
        self.ckpt = None if fc is None else Checkpoints(fc.checkpoint_interval, self.remaining)
        self.fstats = None if fc is None else FailureStats(asdict(fc))
        self.repair_options = None if fc is None else cfg.repair_options()

    @property
    def done(self) -> bool:
        """Every job finished or unplaceable, or the clock reached ``max_time``."""
        cap = self.cfg.max_time
        return self.finished + len(self.unplaceable) >= len(self.records) or (cap is not None and self.t >= cap - _EPS)

    # ------------------------------------------------------------------ arrivals
    def admit_arrivals(self) -> None:
        """Jobs submitted by the round's start join the active set."""
        n = len(self.arrivals)
        while self.next_arrival < n:
            i = self.arrivals[self.next_arrival]
            if self.records[i].submit_time > self.t + _EPS:
                break
            if i not in self.unplaceable:
                self.active.append(i)
            self.next_arrival += 1

    def skip_idle(self) -> None:
        """No job is active: jump to the first round boundary at or after the next arrival, or
        at or after ``max_time`` when that comes first (the run stops there, not at the arrival)."""
        nxt = self.records[self.arrivals[self.next_arrival]].submit_time
        r = self.round_length
        self.t = max(self.t + r, math.ceil((nxt - _EPS) / r) * r)
        cap = self.cfg.max_time
        if cap is not None:
            self.t = min(self.t, math.ceil((cap - _EPS) / r) * r)
        self.k += 1

    # ------------------------------------------------------------------ failures
    def fail_at_boundary(self) -> None:
        """Failures up to the round's start: the running jobs they hit lose their work since the
        last checkpoint and their GPUs (no-op without failures)."""
        if self.failures is None:
            return
        events = self.failures.pop_until(self.t, inclusive=True)
        first = self._record_events(events)
        for i in self.active:
            held = self.placement[i]
            if held is None:
                continue
            # the first of these failures (in time order) to take one of its GPUs stopped it
            k = next((k for k, e in enumerate(events) if not set(e.gpus).isdisjoint(held)), None)
            if k is not None:
                self._hit(i, self.t, first + k)

    def _record_events(self, events: list[FailureEvent]) -> int:
        """Log ``events``; returns the index of the first of them in the log."""
        assert self.fstats is not None
        first = len(self.fstats.events)
        self.fstats.events.extend(events)
        return first

    def _hit(self, i: int, t: float, event: int) -> None:
        """Job ``i`` lost a GPU at ``t`` to failure ``event`` (its index in the log): back to its
        checkpoint, off its GPUs, to be restarted."""
        assert self.ckpt is not None and self.fstats is not None
        lost, remaining = self.ckpt.lose(i)
        rec = self.records[i]
        self.remaining[i] = remaining
        rec.failures += 1
        rec.lost_gpu_seconds += rec.demand * lost
        self.fstats.hit(event, t, rec.job_id, rec.demand, lost)
        self.placement[i] = None
        self.was_preempted[i] = True

    def _round_cluster(self) -> Cluster:
        """The cluster of the round starting now: the GPUs out of service marked failed."""
        if self.failures is None:
            return self.cluster
        out = self.failures.out_of_service(self.t)
        if not out.any():
            return self.cluster
        return self.cluster.with_state(np.where(out, GpuState.FAILED, GpuState.FREE).astype(np.int8))

    # ------------------------------------------------------------------ admission
    def queue_round(self) -> _Round:
        """The round instance: the active jobs in queue order, running ones with their GPUs."""
        recs = self.records
        entries = [
            QueueEntry(i, recs[i].submit_time, recs[i].attained, self.remaining[i] * self.iter_time[i])
            for i in self.active
        ]
        order = [e.index for e in sorted(entries, key=self.queue_key)]
        jobs = tuple(
            Job(
                id=self.trace[i].id,
                demand=recs[i].demand,
                perfclass=recs[i].perfclass,
                position=pos,
                locality=self.locality,
                placement=self.placement[i],
                model=recs[i].model,
                priority=recs[i].priority,
                started=self.started[i] if self.placement[i] is not None else None,
                pipeline=self.pipelines[i],
            )
            for pos, i in enumerate(order)
        )
        inst = RoundInstance(self._round_cluster(), jobs, self.params, name=f"round {self.k} t={self.t:g}")
        return _Round(self.k, self.t, inst, dict(zip(order, jobs, strict=True)))

    # ------------------------------------------------------------------ placement
    def place(self, rnd: _Round, validate: bool) -> _Placed:
        """Solve the round with the configured method and check what it returned."""
        cfg = self.cfg
        what = f"{rnd.instance.name}: method {cfg.policy!r}"
        s0 = time.perf_counter()
        seed = _derive(cfg.seed, 2, rnd.k) if cfg.policy == "random" else None
        res = self.policy.place(rnd.instance, seed=seed)
        solve_s = time.perf_counter() - s0
        if self.on_round is not None:
            self.on_round(rnd.instance, res)
        if res.status == Status.FALLBACK:
            self.fallbacks += 1
        # survived: solved again or fell back
        self.solver_crashes += int(res.info.get("highs_crashes", 0)) + int(res.info.get("cbc_crashes", 0))
        if res.status == Status.INFEASIBLE:
            raise InfeasibleRoundError(f"{what} found no placement: {res.message}")
        if validate:
            from ..check import check

            problems = check(rnd.instance, res)
            if problems:
                raise BackendError(f"{what}: {'; '.join(problems[:3])}")
        status = str(res.status.value if hasattr(res.status, "value") else res.status)
        note = res.message if res.status == Status.FALLBACK else ""
        return _Placed(self._gpus_by_index(rnd, res), status, solve_s, note)

    def _gpus_by_index(self, rnd: _Round, res: PlacementResult) -> dict[int, tuple[int, ...]]:
        """``res.placements`` by trace index; every job active, whole and on GPUs of its own."""
        what = f"{rnd.instance.name}: method {self.cfg.policy!r}"
        used = np.zeros(self.cluster.num_gpus, dtype=np.int64)
        new_pl: dict[int, tuple[int, ...]] = {}
        for jid, gids in res.placements.items():
            i = self.by_id.get(jid)
            if i is None or i not in rnd.job_of:
                raise BackendError(f"{what} placed unknown job {jid!r}")
            gids = tuple(int(g) for g in gids)
            need = self.records[i].demand
            if len(gids) != need:
                raise BackendError(f"{what} gave job {jid!r} {counted(len(gids), 'GPU')}, it needs {need}")
            used[self.cluster.positions(gids)] += 1
            new_pl[i] = gids
        if (used > 1).any():
            raise BackendError(f"{what} put two jobs on one GPU")
        return new_pl

    # ------------------------------------------------------------------ progress
    def run_round(self, rnd: _Round, placed: _Placed, validate: bool = False) -> _Tally:
        """Every active job waits, is preempted, or runs on its new GPUs for the round; failures
        inside the round stop the jobs they hit and the repair code re-places them."""
        tally = _Tally()
        stints: dict[int, _Stint] = {}
        for i in self.active:
            new = placed.gpus.get(i)
            if new is None:
                self._hold(i, tally)
            else:
                stints[i] = self._start(i, new, rnd, tally)
        if self.failures is not None:
            # one at a time: the repair asks which GPUs are out at the failure's own time
            while events := self.failures.pop_until(rnd.t + self.round_length, most=1):
                ev = events[0]
                off = ev.time - rnd.t
                self._advance_to(stints, off, rnd, tally)
                self._fail_in_round(stints, ev, off, rnd, tally, validate)
        self._advance_to(stints, self.round_length, rnd, tally)
        self.restore_left = {}
        for i, st in stints.items():
            if not st.done:
                self._close(i, st, rnd, tally)
                if st.restore > 0:
                    self.restore_left[i] = st.restore
        return tally

    def _hold(self, i: int, tally: _Tally) -> None:
        """Job ``i`` has no GPUs this round: a preemption if it had some (a planned stop: it
        saves a checkpoint)."""
        if self.placement[i] is not None:
            rec = self.records[i]
            rec.preemptions += 1
            rec.preempted_gpu_hours += rec.demand * self.round_length / 3600.0
            tally.preempted += 1
            self.was_preempted[i] = True
            if self.ckpt is not None:
                self.ckpt.save(i, self.remaining[i])
        self.placement[i] = None

    def _restart_loss(self, i: int, job: Job, new: tuple[int, ...], tally: _Tally) -> float:
        """Seconds job ``i`` (``job`` this round) loses on ``new``: the restart cost if moved
        (a pipeline also when its stages are re-mapped on the same GPUs,
        :func:`~pal_opt.model.keeps_placement`) or resumed, else 0."""
        old = self.placement[i]
        rec = self.records[i]
        if old is not None and not keeps_placement(job, new, held=old):
            rec.moves += 1
            tally.moved += 1
            rec.restarts += 1
            if self.ckpt is not None:
                self.ckpt.save(i, self.remaining[i])
            return self.cfg.restart_cost
        if old is None and self.was_preempted[i]:
            rec.restarts += 1
            return self.cfg.restart_cost
        return 0.0

    def _start(self, i: int, new: tuple[int, ...], rnd: _Round, tally: _Tally) -> _Stint:
        """Job ``i`` starts the round on ``new``."""
        rec = self.records[i]
        job, old = rnd.job_of[i], self.placement[i]
        lost = self._restart_loss(i, job, new, tally) or self.restore_left.get(i, 0.0)
        if old is None or not keeps_placement(job, new, held=old):
            self.started[i] = rnd.t
        self.was_preempted[i] = False
        self.placement[i] = new
        if rec.first_start is None:
            rec.first_start = rnd.t
        if self.cluster.span_level_pos(self.cluster.positions(new)) > 0:
            rec.rounds_spanning += 1
            tally.spanning += 1
        rec.rounds_run += 1
        return self._stint(i, new, rnd, 0.0, lost)

    def _stint(self, i: int, new: tuple[int, ...], rnd: _Round, start: float, lost: float) -> _Stint:
        """Job ``i`` on ``new`` from ``start`` seconds into the round, ``lost`` seconds restoring
        first, at the slowdown of its raw factors there."""
        pos = self.cluster.positions(new)
        slow = job_slowdown_pos(self.cluster, self.cluster.factors[self.records[i].perfclass], rnd.job_of[i], pos)
        return _Stint(new, slow, self.iter_time[i] * slow, start, lost, at=start)

    def _advance_to(self, stints: dict[int, _Stint], end: float, rnd: _Round, tally: _Tally) -> None:
        """Every running job works until ``end`` seconds into the round, or finishes before."""
        for i, st in stints.items():
            if st.done:
                continue
            span = end - st.at
            restore = min(st.restore, span)
            avail = span - restore
            st.restore -= restore
            st.restored += restore
            need = self.remaining[i] * st.tpi
            if need <= avail * (1.0 + 1e-12) + _EPS:
                st.at = st.at + restore + need
                self.records[i].finish_time = rnd.t + st.at
                self.remaining[i] = 0.0
                tally.done.append(i)
                self._close(i, st, rnd, tally)
            else:
                self.remaining[i] -= avail / st.tpi
                st.at = end
                if self.ckpt is not None:
                    self.ckpt.worked(i, avail, self.remaining[i], st.tpi)

    def _close(self, i: int, st: _Stint, rnd: _Round, tally: _Tally) -> None:
        """Job ``i``'s stint ends (round end, finish or failure): the seconds it held its GPUs."""
        rec = self.records[i]
        held = st.at - st.start
        run = held - st.restored
        rec.run_seconds += run
        rec.slowdown_seconds += st.slow * run
        rec.attained += rec.demand * held
        tally.busy += rec.demand * held
        st.done = True
        if self.fstats is not None:
            self.fstats.ran(st.gpus, rnd.t + st.start, rnd.t + st.at)

    def _fail_in_round(self, stints: dict[int, _Stint], ev: FailureEvent, off: float, rnd: _Round,
                       tally: _Tally, validate: bool) -> None:
        """A failure ``off`` seconds into the round: the jobs it hits stop and lose their work
        since their checkpoint; :func:`~pal_opt.simulate.failures.repair_in_round` re-places them
        on the GPUs left (the other running jobs keep theirs), the rest wait for the next round."""
        k = self._record_events([ev])
        down = set(ev.gpus)
        hit = [i for i, st in stints.items() if not st.done and down.intersection(st.gpus)]
        if not hit:
            return
        order = {j.id: k for k, j in enumerate(rnd.instance.jobs)}
        running = [i for i, st in stints.items() if not st.done]
        in_force = {self.records[i].job_id: stints[i].gpus for i in sorted(running, key=lambda i: order[self.records[i].job_id])}
        for i in hit:
            self._close(i, stints[i], rnd, tally)
            self._hit(i, rnd.t + off, k)
        self._replace(stints, hit, in_force, off, rnd, tally, validate)

    def _replace(self, stints: dict[int, _Stint], hit: list[int], in_force: dict[Any, tuple[int, ...]], off: float,
                 rnd: _Round, tally: _Tally, validate: bool) -> None:
        """Repair the round in progress after a failure and restart the jobs it re-placed."""
        assert self.failures is not None and self.fstats is not None and self.repair_options is not None
        what = f"{rnd.instance.name}: repair after a failure at t={rnd.t + off:g}"
        out = self.cluster.gpu_ids[self.failures.out_of_service(rnd.t + off)]
        busy = [g for i in tally.done for g in stints[i].gpus]
        s0 = time.perf_counter()
        inst, res = repair_in_round(rnd.instance, in_force, [int(g) for g in out], busy, self.repair_options)
        self.fstats.repairs += 1
        self.fstats.repair_seconds += time.perf_counter() - s0
        if validate:
            from ..check import check

            problems = check(inst, res)
            if problems:
                raise BackendError(f"{what}: {'; '.join(problems[:3])}")
        for jid, gpus in in_force.items():
            i = self.by_id[jid]
            new = res.placements.get(jid)
            if i not in hit:
                if not keeps_placement(rnd.job_of[i], new, held=gpus):
                    raise BackendError(f"{what} moved job {jid!r}, which the failure did not hit")
            elif new is not None:
                self.fstats.replaced += 1
                stints[i] = self._restart(i, tuple(int(g) for g in new), off, rnd)

    def _restart(self, i: int, new: tuple[int, ...], off: float, rnd: _Round) -> _Stint:
        """Job ``i``, hit by a failure, restarts from its checkpoint on ``new`` mid-round."""
        self.records[i].restarts += 1
        self.placement[i] = new
        self.was_preempted[i] = False
        return self._stint(i, new, rnd, off, self.cfg.restart_cost)  # what the round's end leaves is paid next

    # ------------------------------------------------------------------ completion
    def complete(self, tally: _Tally) -> None:
        """Jobs that finished leave the active set; their GPUs are free from the next round."""
        for i in tally.done:
            self.placement[i] = None
        if tally.done:
            gone = set(tally.done)
            self.active = [i for i in self.active if i not in gone]
            self.finished += len(tally.done)

    # ------------------------------------------------------------------ metrics
    def record_round(self, rnd: _Round, placed: _Placed, tally: _Tally) -> None:
        """Log the round; a method that places nothing for 3 rounds in a row is an error."""
        self.rounds.append(
            RoundRecord(
                time=rnd.t,
                active=len(rnd.job_of),
                running=len(placed.gpus),
                gpus_placed=int(sum(self.records[i].demand for i in placed.gpus)),
                busy_gpu_seconds=tally.busy,
                spanning=tally.spanning,
                preempted=tally.preempted,
                moved=tally.moved,
                status=placed.status,
                solve_seconds=placed.solve_seconds,
                note=placed.note,
            )
        )
        out_of_service = bool((rnd.instance.cluster.state == GpuState.FAILED).any())
        self.idle_rounds = self.idle_rounds + 1 if not placed.gpus and not out_of_service else 0
        if self.idle_rounds >= 3:
            what = f"{rnd.instance.name}: method {self.cfg.policy!r}"
            raise InfeasibleRoundError(f"{what} placed no job for 3 rounds while {len(self.active)} wait")

    def next_round(self) -> None:
        # a multiple of the round length, not a running sum: 1,000 rounds of 36.1 s drifted by 1e-9 s,
        # and a job submitted at a boundary was admitted a round late or queued for -1e-9 s
        self.t = (round(self.t / self.round_length) + 1) * self.round_length
        self.k += 1

    def result(self, wall_seconds: float) -> SimulationResult:
        """The run's records with their :func:`~pal_opt.simulate.summary.summarize` figures."""
        cluster = self.cluster
        result = SimulationResult(
            config={**self.cfg.to_dict(), "num_gpus": cluster.num_gpus, "num_servers": cluster.num_servers},
            num_gpus=cluster.num_gpus,
            jobs=self.records,
            rounds=self.rounds,
            fallbacks=self.fallbacks,
            solver_crashes=self.solver_crashes,
            wall_seconds=wall_seconds,
            unplaceable={self.trace[i].id: why for i, why in self.unplaceable.items()},
            failures=self.fstats,
            stopped_at=self.t if self.finished + len(self.unplaceable) < len(self.records) else None,
        )
        result.summary = summarize(result)
        return result


def _checked_arguments(trace: Any, cluster: Any, config: Any, validate: Any, progress: Any, on_round: Any) -> SimConfig:
    """:func:`simulate`'s configuration, checked with its other arguments (the flag and the
    functions too, which a run may never read)."""
    if config is not None and not isinstance(config, SimConfig):
        raise InputTypeError(f"must be a SimConfig or None, got {type(config).__name__}", path="config")
    if isinstance(trace, str | bytes | Mapping) or not isinstance(trace, Iterable):
        raise InputTypeError(f"must be a list of trace jobs (pal_opt.io.traces.read_trace), got {type(trace).__name__}",
                             path="trace")
    cfg = config or SimConfig()  # checked when built
    check_flag(validate, "validate")  # a truthy object ran the checker on every round
    check_callbacks(progress=progress, on_round=on_round)  # called only later, if at all
    if not isinstance(cluster, Cluster):  # build_cluster's (cluster, origins) failed deep inside
        hint = " (build_cluster returns (cluster, origins): pass the first)" if isinstance(cluster, tuple) else ""
        raise InputTypeError(f"must be a pal_opt Cluster, got {type(cluster).__name__}{hint}", path="cluster")
    return cfg


def simulate(
    trace: Sequence[Any],
    cluster: Cluster,
    config: SimConfig | None = None,
    *,
    progress: Callable[[int, int, float], None] | None = None,
    source: str | None = None,
    validate: bool = False,
    on_round: Callable[[RoundInstance, PlacementResult], None] | None = None,
) -> SimulationResult:
    """Run ``trace`` on ``cluster`` round by round.

    Parameters
    ----------
    trace
        Jobs (:class:`pal_opt.io.traces.TraceJob` or anything with ``id``, ``demand``,
        ``submit_time``, ``iterations``, ``model``, ``perfclass``, ``iter_time``).
    cluster
        The cluster; its ``factors`` are the raw per-GPU factors (1.0 = median GPU).  GPU
        states are ignored (every GPU is in service unless ``config.failures`` takes it out).
    config
        Simulation parameters (defaults: PAL, FIFO, 360 s rounds, λ = 1.7).
    progress
        Called after each round with (jobs finished, jobs total, simulated time).
    source
        File name for error messages.
    validate
        Run the independent checker (:func:`pal_opt.check.check`) on every round's result and
        raise :class:`~pal_opt.errors.BackendError` on a violation (slower; for tests).
    on_round
        Called with each round's instance and the method's result, before the round runs (to
        study the rounds a policy met, e.g. re-solve them with another method; it must not
        change them).

    Returns
    -------
    SimulationResult
        With ``summary`` filled by :func:`pal_opt.simulate.summary.summarize`.
    """
    cfg = _checked_arguments(trace, cluster, config, validate, progress, on_round)
    check_trace(trace, cluster, source)
    _check_run_length(trace, cluster, cfg, source)
    wall0 = time.perf_counter()
    sim = _Simulation(trace, cluster, cfg, source)
    sim.on_round = on_round
    cap = _round_cap(trace, cfg)
    while not sim.done:
        if sim.k >= cap:
            left = len(sim.active)
            log.warning("simulate: stopped after %d rounds, %d times the rounds the trace needs run one job at a "
                        "time on median GPUs, with %s unfinished: restarts or failures undo their work "
                        "(restart cost %g s of a %g s round%s)", sim.k, STALL_FACTOR,
                        f"{left} job{'s' * (left != 1)}",
                        cfg.restart_cost, cfg.round_length,
                        "" if cfg.failures is None else f", checkpoints every {cfg.failures.checkpoint_interval:g} s")
            break
        sim.admit_arrivals()
        if not sim.active:
            sim.skip_idle()
            continue
        sim.fail_at_boundary()
        rnd = sim.queue_round()
        placed = sim.place(rnd, validate)
        tally = sim.run_round(rnd, placed, validate)
        sim.complete(tally)
        sim.record_round(rnd, placed, tally)
        if progress is not None:
            progress(sim.finished, len(trace), sim.t + sim.round_length)
        sim.next_round()
    return sim.result(time.perf_counter() - wall0)
