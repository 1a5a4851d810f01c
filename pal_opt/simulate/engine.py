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

During the round each placed job advances ``(round_length − lost) / (iter_time × slowdown)``
iterations, where ``slowdown`` is :func:`pal_opt.cost.job_slowdown_pos` on the raw, unbinned
factors (max factor of the job's class over its GPUs × the job's locality penalty for the
level its GPUs span) and ``lost`` is the restart cost when the job was moved, or resumed after
a preemption (first starts cost nothing).  A job that finishes mid-round completes at the
exact fractional time; its GPUs are free from the next round.

The PAL artifact's simulator charges nothing for preemption or migration (its launch path
for simulated jobs is a no-op marked "TODO: Add time for checkpoint and restore"), so the
default restart cost is 0.  For methods that price moves (the integer program), a restart
cost of S seconds is passed as ``RoundParams.restart_cost = −ln(1 − S / round_length)`` per
GPU: losing S of R seconds is the same progress as running the whole round
R / (R − S) times slower, and the round cost is Σ d·ln(slowdown).
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..cost import job_slowdown_pos
from ..errors import BackendError, InfeasibleRoundError, InstanceError, OptionError
from ..model import Cluster, Job, RoundInstance, RoundParams
from ..result import Status
from .queue import QueueEntry, get_queue_policy
from .records import JobRecord, RoundRecord, SimulationResult
from .summary import summarize
from .variability import DRAWS, artifact_draw_factors, draw_cluster_factors

__all__ = [
    "ClusterSpec",
    "SimConfig",
    "JobRecord",
    "RoundRecord",
    "SimulationResult",
    "parse_cluster",
    "build_cluster",
    "simulate",
    "restart_cost_units",
]

_EPS = 1e-9


# ---------------------------------------------------------------------------- cluster
@dataclass(frozen=True)
class ClusterSpec:
    """Shape of a simulated cluster: ``servers`` × ``gpus_per_server``, optionally in racks."""

    servers: int
    gpus_per_server: int
    racks: int = 0

    @property
    def num_gpus(self) -> int:
        return self.servers * self.gpus_per_server

    def __str__(self) -> str:
        if self.racks:
            return f"{self.racks}x{self.servers // self.racks}x{self.gpus_per_server}"
        return f"{self.servers}x{self.gpus_per_server}"


def parse_cluster(text: str) -> ClusterSpec:
    """``"16x4"`` (servers × GPUs per server) or ``"4x4x4"`` (racks × servers per rack × GPUs).

    >>> parse_cluster("16x4"), parse_cluster("2x8x4").servers
    (ClusterSpec(servers=16, gpus_per_server=4, racks=0), 16)
    """
    parts = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?", text or "")
    if not parts:
        raise OptionError(f"--cluster must look like 16x4 or 4x4x4 (racks x servers x GPUs), got {text!r}")
    a, b, c = parts.groups()
    if c is None:
        spec = ClusterSpec(int(a), int(b))
    else:
        spec = ClusterSpec(int(a) * int(b), int(c), racks=int(a))
    if spec.servers < 1 or spec.gpus_per_server < 1 or (c is not None and spec.racks < 1):
        raise OptionError(f"--cluster sizes must be positive, got {text!r}")
    return spec


def build_cluster(
    spec: ClusterSpec,
    variability: Mapping[str, str | os.PathLike[str]] | None = None,
    seed: int = 0,
    draw: str = "numpy",
) -> tuple[Cluster, dict[str, str]]:
    """A cluster of ``spec``'s shape whose GPUs draw raw per-class factors from measurements.

    Parameters
    ----------
    spec
        Shape.
    variability
        ``{class: measurement file}`` overriding the default files (the PAL artifact's
        Longhorn files when present; see :mod:`.variability`).
    seed
        Seeds the draw (``draw="numpy"``).
    draw
        ``"numpy"`` (seeded by ``seed``) or ``"artifact"`` (the PAL artifact's own draw,
        :func:`~pal_opt.simulate.variability.artifact_draw_factors`; ``seed`` is ignored).

    Returns
    -------
    cluster, origins
        The cluster (all GPUs free) and ``{class: file or "synthetic"}``.
    """
    if draw == "numpy":
        factors, origins = draw_cluster_factors(spec.num_gpus, variability, seed=_derive(seed, 1))
    elif draw == "artifact":
        factors, origins = artifact_draw_factors(spec.num_gpus, variability)
    else:
        raise OptionError(f"unknown variability draw {draw!r}; choose one of {', '.join(DRAWS)}")
    return Cluster.uniform(spec.servers, spec.gpus_per_server, factors, racks=spec.racks), origins


def _derive(seed: int, *keys: int) -> int:
    """A child seed for one purpose (variability draw, random policy round k, ...)."""
    return int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, *keys]).generate_state(1)[0])


def restart_cost_units(seconds: float, round_length: float) -> float:
    """Restart cost in round-cost units per GPU: ``−ln(1 − S/R)`` (S capped just below R).

    >>> round(restart_cost_units(36.0, 360.0), 6)
    0.105361
    """
    if seconds <= 0:
        return 0.0
    frac = min(seconds / round_length, 1.0 - 1e-6)
    return -math.log1p(-frac)


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
        Seconds lost when a job is moved or resumed after a preemption.
    seed
        Seeds the random policy (and, via :func:`build_cluster`, the variability draw).
    admission, backend, time_limit
        Integer-program options (``policy="ilp"`` only).
    ilp_options
        Further integer-program options passed through (e.g. ``threads``, ``gap``).
    """

    policy: str = "pal"
    queue: str = "fifo"
    round_length: float = 360.0
    locality_penalty: float = 1.7
    rack_penalty: float | None = None
    binning: str = "pal-artifact"
    restart_cost: float = 0.0
    seed: int = 0
    admission: str | None = None
    backend: str | None = None
    time_limit: float | None = None
    ilp_options: Mapping[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        from ..binning import BINNING_MODES
        from ..solve import METHODS

        if self.policy not in METHODS:
            raise OptionError(f"unknown policy {self.policy!r}; choose one of {', '.join(METHODS)}")
        get_queue_policy(self.queue)
        for name in ("round_length", "locality_penalty"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise OptionError(f"{name.replace('_', '-')} must be a finite number > 0, got {v!r}")
        if self.locality_penalty < 1:
            raise OptionError(f"locality-penalty must be ≥ 1, got {self.locality_penalty!r}")
        if self.rack_penalty is not None and not (math.isfinite(self.rack_penalty) and self.rack_penalty >= 1):
            raise OptionError(f"rack-penalty must be ≥ 1, got {self.rack_penalty!r}")
        if not (math.isfinite(self.restart_cost) and self.restart_cost >= 0):
            raise OptionError(f"restart-cost must be a finite number ≥ 0, got {self.restart_cost!r}")
        if self.binning not in BINNING_MODES:
            raise OptionError(f"unknown binning mode {self.binning!r}; choose one of {', '.join(BINNING_MODES)}")
        if self.policy != "ilp":
            given = [n for n in ("admission", "backend", "time_limit") if getattr(self, n) is not None]
            if given or self.ilp_options:
                names = [*given, *self.ilp_options]
                raise OptionError(f"option(s) {', '.join(names)} apply only to policy 'ilp'")
        if self.time_limit is not None and not (math.isfinite(self.time_limit) and self.time_limit > 0):
            raise OptionError(f"time-limit must be a finite number > 0, got {self.time_limit!r}")

    @property
    def locality(self) -> tuple[float, float, float]:
        lam = float(self.locality_penalty)
        rack = lam if self.rack_penalty is None else float(self.rack_penalty)
        return (1.0, rack, lam)

    def solve_options(self) -> dict[str, Any]:
        if self.policy != "ilp":
            return {}
        opts: dict[str, Any] = dict(self.ilp_options)
        for name in ("admission", "backend", "time_limit"):
            v = getattr(self, name)
            if v is not None:
                opts[name] = v
        return opts

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ilp_options"] = dict(self.ilp_options)
        return d


# ---------------------------------------------------------------------------- engine
def _check_trace(trace: Sequence[Any], cluster: Cluster, source: str | None) -> None:
    if not trace:
        raise InstanceError("the trace has no jobs", source=source)
    g = cluster.num_gpus
    for tj in trace:
        where = f"row {tj.row}, column " if getattr(tj, "row", 0) else f"job {tj.id!r}: "
        if not (isinstance(tj.demand, (int, np.integer)) and tj.demand >= 1):
            raise InstanceError(
                f"job {tj.id!r} must need a positive integer number of GPUs, got {tj.demand!r}",
                source=source,
                path=where + "num_gpus",
            )
        if not (math.isfinite(tj.iterations) and tj.iterations > 0 and math.isfinite(tj.iter_time) and tj.iter_time > 0):
            raise InstanceError(
                f"job {tj.id!r} needs finite positive iterations and iteration time",
                source=source,
                path=where + "duration",
            )
        if not (math.isfinite(tj.submit_time) and tj.submit_time >= 0):
            raise InstanceError(
                f"job {tj.id!r} has submit time {tj.submit_time!r}; expected a finite number ≥ 0",
                source=source,
                path=where + "submit_time",
            )
        if tj.demand > g:
            raise InstanceError(
                f"job {tj.id!r} needs {tj.demand} GPUs but the cluster has {g}",
                source=source,
                path=where + "num_gpus",
            )
        if tj.perfclass not in cluster.factors:
            raise InstanceError(
                f"job {tj.id!r}: class {tj.perfclass!r} has no GPU factors (known: {', '.join(cluster.factors)})",
                source=source,
                path=where + "model",
            )


def simulate(
    trace: Sequence[Any],
    cluster: Cluster,
    config: SimConfig | None = None,
    *,
    progress: Callable[[int, int, float], None] | None = None,
    source: str | None = None,
    validate: bool = False,
) -> SimulationResult:
    """Run ``trace`` on ``cluster`` round by round.

    Parameters
    ----------
    trace
        Jobs (:class:`pal_opt.io.traces.TraceJob` or anything with ``id``, ``demand``,
        ``submit_time``, ``iterations``, ``model``, ``perfclass``, ``iter_time``).
    cluster
        The cluster; its ``factors`` are the raw per-GPU factors (1.0 = median GPU).  GPU
        states are ignored (every GPU is in service).
    config
        Simulation parameters (defaults: PAL, FIFO, 360 s rounds, λ = 1.7).
    progress
        Called after each round with (jobs finished, jobs total, simulated time).
    source
        File name for error messages.
    validate
        Run the independent checker (:func:`pal_opt.check.check`) on every round's result and
        raise :class:`~pal_opt.errors.BackendError` on a violation (slower; for tests).

    Returns
    -------
    SimulationResult
        With ``summary`` filled by :func:`pal_opt.simulate.summary.summarize`.
    """
    from ..solve import solve

    cfg = config or SimConfig()
    cfg.validate()
    _check_trace(trace, cluster, source)
    wall0 = time.perf_counter()

    n = len(trace)
    if np.any(cluster.state != 0):
        cluster = cluster.with_state(np.zeros(cluster.num_gpus, dtype=np.int8))
    R = float(cfg.round_length)
    loc = cfg.locality
    params = RoundParams(
        locality_penalty=float(cfg.locality_penalty),
        binning=cfg.binning,
        restart_cost=restart_cost_units(cfg.restart_cost, R),
    )
    opts = cfg.solve_options()
    qkey = get_queue_policy(cfg.queue)

    records = [
        JobRecord(
            job_id=tj.id,
            model=tj.model,
            perfclass=tj.perfclass,
            demand=int(tj.demand),
            submit_time=float(tj.submit_time),
            iterations=float(tj.iterations),
            ideal_seconds=float(tj.iterations) * float(tj.iter_time),
        )
        for tj in trace
    ]
    iter_time = [float(tj.iter_time) for tj in trace]
    remaining = [float(tj.iterations) for tj in trace]
    placement: list[tuple[int, ...] | None] = [None] * n
    preempted_flag = [False] * n
    by_id = {tj.id: i for i, tj in enumerate(trace)}
    if len(by_id) != n:
        raise InstanceError("duplicate job ids in the trace", source=source)
    arrivals = sorted(range(n), key=lambda i: (records[i].submit_time, i))
    fac = cluster.factors

    active: list[int] = []
    rounds: list[RoundRecord] = []
    fallbacks = 0
    finished = 0
    ptr = 0
    t = 0.0
    k = 0
    idle_rounds = 0
    while finished < n:
        while ptr < n and records[arrivals[ptr]].submit_time <= t + _EPS:
            active.append(arrivals[ptr])
            ptr += 1
        if not active:
            nxt = records[arrivals[ptr]].submit_time
            t = max(t + R, math.ceil((nxt - _EPS) / R) * R)
            k += 1
            continue

        entries = [
            QueueEntry(i, records[i].submit_time, records[i].attained, remaining[i] * iter_time[i])
            for i in active
        ]
        order = [e.index for e in sorted(entries, key=qkey)]
        jobs = tuple(
            Job(
                id=trace[i].id,
                demand=records[i].demand,
                perfclass=records[i].perfclass,
                position=pos,
                locality=loc,
                placement=placement[i],
                model=records[i].model,
            )
            for pos, i in enumerate(order)
        )
        job_of = dict(zip(order, jobs, strict=True))
        active_set = set(active)
        inst = RoundInstance(cluster, jobs, params, name=f"round {k} t={t:g}")
        s0 = time.perf_counter()
        seed = _derive(cfg.seed, 2, k) if cfg.policy == "random" else None
        res = solve(inst, method=cfg.policy, seed=seed, **opts)
        solve_s = time.perf_counter() - s0
        if res.status == Status.FALLBACK:
            fallbacks += 1
        if res.status == Status.INFEASIBLE:
            raise InfeasibleRoundError(f"{inst.name}: method {cfg.policy!r} found no placement: {res.message}")
        if validate:
            from ..check import check

            problems = check(inst, res)
            if problems:
                raise BackendError(f"{inst.name}: method {cfg.policy!r}: {'; '.join(problems[:3])}")
        used = np.zeros(cluster.num_gpus, dtype=np.int64)
        new_pl: dict[int, tuple[int, ...]] = {}
        for jid, gids in res.placements.items():
            i = by_id.get(jid)
            if i is None or i not in active_set:
                raise BackendError(f"{inst.name}: method {cfg.policy!r} placed unknown job {jid!r}")
            gids = tuple(int(g) for g in gids)
            if len(gids) != records[i].demand:
                raise BackendError(
                    f"{inst.name}: method {cfg.policy!r} gave job {jid!r} {len(gids)} GPUs, it needs {records[i].demand}"
                )
            used[cluster.positions(gids)] += 1
            new_pl[i] = gids
        if (used > 1).any():
            raise BackendError(f"{inst.name}: method {cfg.policy!r} put two jobs on one GPU")

        busy = 0.0
        n_span = n_pre = n_mov = 0
        done_now: list[int] = []
        for i in active:
            old = placement[i]
            new = new_pl.get(i)
            rec = records[i]
            if new is None:
                if old is not None:
                    rec.preemptions += 1
                    n_pre += 1
                    preempted_flag[i] = True
                placement[i] = None
                continue
            lost = 0.0
            if old is not None and set(old) != set(new):
                rec.moves += 1
                n_mov += 1
                rec.restarts += 1
                lost = cfg.restart_cost
            elif old is None and preempted_flag[i]:
                rec.restarts += 1
                lost = cfg.restart_cost
            preempted_flag[i] = False
            placement[i] = new
            if rec.first_start is None:
                rec.first_start = t
            pos = cluster.positions(new)
            slow = job_slowdown_pos(cluster, fac[rec.perfclass], job_of[i], pos)
            if cluster.span_level_pos(pos) > 0:
                rec.rounds_spanning += 1
                n_span += 1
            rec.rounds_run += 1
            tpi = iter_time[i] * slow
            lost = min(lost, R)
            need = remaining[i] * tpi
            avail = R - lost
            if need <= avail * (1.0 + 1e-12) + _EPS:
                held = lost + need
                rec.finish_time = t + held
                remaining[i] = 0.0
                done_now.append(i)
            else:
                held = R
                remaining[i] -= avail / tpi
            run = held - lost
            rec.run_seconds += run
            rec.slowdown_seconds += slow * run
            rec.attained += rec.demand * held
            busy += rec.demand * held
        for i in done_now:
            placement[i] = None
        if done_now:
            gone = set(done_now)
            active = [i for i in active if i not in gone]
            finished += len(done_now)
        rounds.append(
            RoundRecord(
                time=t,
                active=len(entries),
                running=len(new_pl),
                gpus_placed=int(sum(records[i].demand for i in new_pl)),
                busy_gpu_seconds=busy,
                spanning=n_span,
                preempted=n_pre,
                moved=n_mov,
                status=str(res.status.value if hasattr(res.status, "value") else res.status),
                solve_seconds=solve_s,
            )
        )
        idle_rounds = idle_rounds + 1 if not new_pl else 0
        if idle_rounds >= 3:
            raise InfeasibleRoundError(
                f"{inst.name}: method {cfg.policy!r} placed no job for 3 rounds while {len(active)} wait"
            )
        if progress is not None:
            progress(finished, n, t + R)
        t += R
        k += 1

    result = SimulationResult(
        config={**cfg.to_dict(), "num_gpus": cluster.num_gpus, "num_servers": cluster.num_servers},
        num_gpus=cluster.num_gpus,
        jobs=records,
        rounds=rounds,
        fallbacks=fallbacks,
        wall_seconds=time.perf_counter() - wall0,
    )
    result.summary = summarize(result)
    return result

