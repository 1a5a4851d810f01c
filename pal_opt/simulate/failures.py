"""GPU and server failures in the simulator: the seeded failure process, checkpoints, what is lost.

Off by default: :class:`~pal_opt.simulate.engine.SimConfig` has ``failures=None`` and a run
without failures is the run it always was, to the bit.

The failure process
-------------------
Every GPU and every server alternates between *up* and *down*: up for an exponentially
distributed time with mean the MTBF (``gpu_mtbf_hours``, ``server_mtbf_hours``), then down for
``repair_time`` seconds, then up again with a fresh draw (an alternating renewal process per
component, independent across components).  A GPU is **in service** when it and its server are
both up.  A server failure takes every GPU of the server out of service.  The draws come from
one generator seeded by the simulation's seed, taken in time order, so a run is reproducible
from its seed and does not depend on how the rounds cut time.

Default rates (Llama 3)
-----------------------
Meta's Llama 3 report (Dubey et al., *The Llama 3 Herd of Models*, 2024, §3.3.4 and its
Table 5) counts **419 unexpected interruptions in a 54-day snapshot of pre-training on 16,384
H100 GPUs**, servers of 8 GPUs (2,048 servers); **58.7 %** of them are GPU issues (faulty GPU
incl. NVLink 30.1 %, HBM3 17.2 %, SRAM 4.5 %, GPU system processor 4.1 %, silent data
corruption 1.4 %, thermal interface and sensor 1.4 %); the rest (software bugs, network switches
and cables, host maintenance, NICs, SSDs, power supplies, CPUs, ...) we charge to the host, as a
server failure: each one stopped the job as a whole server going away would.

* all causes, per GPU: 16,384 × 54 × 24 / 419 ≈ 50,700 GPU-hours between interruptions;
* GPU causes: 0.587 × 419 ≈ 246 in 16,384 × 1,296 GPU-hours: **per-GPU MTBF ≈ 86,300 hours**
  (:data:`DEFAULT_GPU_MTBF_HOURS`);
* the other 41.3 % ≈ 173 in 2,048 × 1,296 server-hours: **per-server MTBF ≈ 15,300 hours**
  (:data:`DEFAULT_SERVER_MTBF_HOURS`).  It is per server whatever its GPU count (the host's
  parts fail, not the GPUs'), so a simulated server of 4 GPUs fails as often as a Llama 3 host
  of 8.

Both together give back the 50,700 GPU-hours per interruption on Llama 3's 8-GPU servers.  At
these rates a 64-GPU cluster sees an interruption about every five weeks, which a trace of a
few days rarely meets; the benchmark (``benchmarks/failures.py``) scales the MTBFs down 100×.

The Philly study (Jeon et al., *Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
Training Workloads*, USENIX ATC '19, §4) classifies failed *jobs*, most of which fail for reasons
in the user's program or configuration rather than the hardware; those are not outages of GPUs
or servers, and the rates above do not include them.

Repair time and checkpoints
---------------------------
Neither report gives a time to repair.  The default, :data:`DEFAULT_REPAIR_SECONDS` = 4 hours,
is an assumption: a failed GPU's server is drained, diagnosed, rebooted or has the part
replaced, then rejoins the pool; Llama 3 reports that all but three interruptions were handled
by automation, i.e. within hours rather than days.  Change it with ``--repair-time``.

A running job saves a checkpoint every ``checkpoint_interval`` seconds of work (default
:data:`DEFAULT_CHECKPOINT_INTERVAL` = 1 hour, an assumption too) counted from its last
checkpoint, and whenever the scheduler stops or moves it (the planned stop the restart cost
models).  A job holding a GPU that goes out of service loses the work since its last checkpoint:
``lost GPU-seconds = GPUs of the job × seconds of work since its last checkpoint`` (the seconds
a job spends restoring after a restart are not work), and it resumes from the checkpoint.

The simulator's part (:mod:`.engine`): failures at a round boundary take the GPUs out before the
round is placed (every method sees them :attr:`~pal_opt.model.GpuState.FAILED`); failures inside
a round stop the jobs they hit at that instant and :func:`pal_opt.repair.repair` re-places them
(:func:`repair_in_round`).  A GPU whose repair ends mid-round is back in service from the next
round boundary.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import OptionError
from ..model import Cluster, GpuState, JobId, RoundInstance
from ..options import SolveOptions, is_finite_number, shown_number
from ..result import PlacementResult
from .choices import (
    DEFAULT_CHECKPOINT_INTERVAL,
    DEFAULT_GPU_MTBF_HOURS,
    DEFAULT_REPAIR_SECONDS,
    DEFAULT_SERVER_MTBF_HOURS,
    LLAMA3,
)

__all__ = [
    "LLAMA3",
    "DEFAULT_GPU_MTBF_HOURS",
    "DEFAULT_SERVER_MTBF_HOURS",
    "DEFAULT_REPAIR_SECONDS",
    "DEFAULT_CHECKPOINT_INTERVAL",
    "FailureConfig",
    "FailureEvent",
    "FailureProcess",
    "Checkpoints",
    "FailureStats",
    "repair_in_round",
]



@dataclass(frozen=True)
class FailureConfig:
    """The failure process and checkpointing.

    Attributes
    ----------
    gpu_mtbf_hours, server_mtbf_hours
        Mean hours a GPU (a server) runs between failures; ``math.inf``: that kind never fails.
    repair_time
        Seconds a failed GPU or server stays out of service.
    checkpoint_interval
        Seconds of work between a job's checkpoints; ``math.inf``: only planned stops save one.
    scale
        Divides both MTBFs (``scale=100``: failures 100× as often), for short traces on small
        clusters.
    seed
        Seeds the failure process; None: the simulation's ``seed``.
    """

    gpu_mtbf_hours: float = DEFAULT_GPU_MTBF_HOURS
    server_mtbf_hours: float = DEFAULT_SERVER_MTBF_HOURS
    repair_time: float = DEFAULT_REPAIR_SECONDS
    checkpoint_interval: float = DEFAULT_CHECKPOINT_INTERVAL
    scale: float = 1.0
    seed: int | None = None

    def validate(self) -> None:
        """One :class:`~pal_opt.errors.OptionError` naming the first bad field."""
        for name, flag in (("gpu_mtbf_hours", "gpu-mtbf"), ("server_mtbf_hours", "server-mtbf"),
                           ("checkpoint_interval", "checkpoint-interval")):
            v = getattr(self, name)
            # is_finite_number: 10**400 refused as NaN is (math.isnan, math.isfinite raised OverflowError)
            if not (_is_number(v) and (is_finite_number(v) or v == math.inf) and v > 0):
                raise OptionError(f"{flag} must be a number > 0 (inf: never), got {shown_number(v)}")
        for name, flag in (("repair_time", "repair-time"), ("scale", "failure-scale")):
            v = getattr(self, name)
            if not (_is_number(v) and is_finite_number(v) and v > 0):
                raise OptionError(f"{flag} must be a finite number > 0, got {shown_number(v)}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer))):
            raise OptionError(f"failure-seed must be an integer, got {self.seed!r}")

    def mtbf_seconds(self) -> tuple[float, float]:
        """(GPU, server) mean seconds between failures, ``scale`` applied."""
        return self.gpu_mtbf_hours * 3600.0 / self.scale, self.server_mtbf_hours * 3600.0 / self.scale


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


@dataclass(frozen=True)
class FailureEvent:
    """One failure: when, what failed (``"gpu"`` or ``"server"`` and its index: a GPU id or a
    server position, 0-based), the GPU ids it takes out of service, when they come back, and the
    id of the server failed or holding the GPU (as the cluster names it: ``gpu07``, 3)."""

    time: float
    kind: str
    component: int
    gpus: tuple[int, ...]
    until: float
    server: Any = None


class FailureProcess:
    """The seeded failure process of one cluster (module docstring).

    :meth:`pop_until` hands out the failures in time order; :meth:`out_of_service` says which
    GPUs are out at a time not before the last failure handed out.
    """

    _KINDS = ("gpu", "server")

    def __init__(self, cluster: Cluster, config: FailureConfig, seed: int) -> None:
        self.cluster = cluster
        self.repair = float(config.repair_time)
        self.mtbf = config.mtbf_seconds()
        # modulo 2**128, not 2**32: seeds 2**32 apart were one process (below 2**32 nothing changes)
        self.rng = np.random.default_rng(np.random.SeedSequence([int(seed) % 2**128, 3]))
        n_servers = int(cluster.num_servers)
        self.server_gpus = [tuple(int(g) for g in cluster.gpu_ids[cluster.server_of == s]) for s in range(n_servers)]
        self.down_until = {"gpu": np.zeros(cluster.num_gpus), "server": np.zeros(n_servers)}
        self.heap: list[tuple[float, int, int]] = []
        for kind, units in ((0, cluster.num_gpus), (1, n_servers)):
            if math.isfinite(self.mtbf[kind]):
                first = self.rng.exponential(self.mtbf[kind], size=units)
                self.heap.extend((float(t), kind, k) for k, t in enumerate(first))
        heapq.heapify(self.heap)

    def pop_until(self, end: float, *, inclusive: bool = False, most: int | None = None) -> list[FailureEvent]:
        """The failures before ``end`` (at or before, ``inclusive``) not handed out yet, at most
        ``most`` of them.  :meth:`out_of_service` knows a failure once it is handed out, so a
        caller that asks it about a time inside the span takes the failures one at a time."""
        out: list[FailureEvent] = []
        while (self.heap and (most is None or len(out) < most)
               and (self.heap[0][0] < end or (inclusive and self.heap[0][0] == end))):
            t, kind, k = heapq.heappop(self.heap)
            name = self._KINDS[kind]
            back = t + self.repair
            self.down_until[name][k] = back
            if kind == 0:
                comp = int(self.cluster.gpu_ids[k])
                gpus: tuple[int, ...] = (comp,)
                server = self.cluster.server_ids[int(self.cluster.server_of[k])]
            else:
                comp, gpus, server = k, self.server_gpus[k], self.cluster.server_ids[k]
            out.append(FailureEvent(t, name, comp, gpus, back, server))  # server ids are plain (Cluster)
            heapq.heappush(self.heap, (back + float(self.rng.exponential(self.mtbf[kind])), kind, k))
        return out

    def out_of_service(self, t: float) -> np.ndarray:
        """Boolean mask over the cluster's GPU positions: out of service at time ``t``."""
        gpu_down = self.down_until["gpu"] > t
        return np.asarray(gpu_down | (self.down_until["server"][self.cluster.server_of] > t))


class Checkpoints:
    """Per job: seconds of work since its last checkpoint and its remaining iterations then."""

    def __init__(self, interval: float, remaining: Sequence[float]) -> None:
        self.interval = float(interval)
        self.since = [0.0] * len(remaining)
        self.at = list(remaining)

    def save(self, i: int, remaining: float) -> None:
        """Job ``i`` saves a checkpoint now (a planned stop)."""
        self.since[i] = 0.0
        self.at[i] = remaining

    def worked(self, i: int, seconds: float, remaining: float, seconds_per_iteration: float) -> None:
        """Job ``i`` worked ``seconds`` at ``seconds_per_iteration`` and has ``remaining``
        iterations left: the periodic checkpoints it passed are saved."""
        since = self.since[i] + seconds
        if since >= self.interval:
            since = math.fmod(since, self.interval)
            self.at[i] = remaining + since / seconds_per_iteration
        self.since[i] = since

    def lose(self, i: int) -> tuple[float, float]:
        """Job ``i`` loses its work since the checkpoint: (seconds lost, remaining iterations)."""
        lost = self.since[i]
        self.since[i] = 0.0
        return lost, self.at[i]


@dataclass
class FailureStats:
    """What failures did to a run (the result's ``failures``)."""

    config: dict[str, Any]
    events: list[FailureEvent] = field(default_factory=list)
    #: one entry per job hit: (time, job id, GPUs of the job, seconds of work lost)
    hits: list[tuple[float, JobId, int, float]] = field(default_factory=list)
    #: the jobs each failure stopped, by the failure's index in ``events``
    stopped: dict[int, list[JobId]] = field(default_factory=dict)
    repairs: int = 0
    replaced: int = 0
    repair_seconds: float = 0.0
    #: (GPU id, from, to): the time intervals a job ran on a GPU (for the checks)
    runs: list[tuple[int, float, float]] = field(default_factory=list)
    last_run: dict[int, int] = field(default_factory=dict)

    @property
    def lost_gpu_seconds(self) -> float:
        return float(sum(gpus * lost for _, _, gpus, lost in self.hits))

    def hit(self, event: int, time: float, job: JobId, gpus: int, lost: float) -> None:
        """Failure ``events[event]`` stopped ``job`` (``gpus`` GPUs) at ``time``; it lost
        ``lost`` seconds of work on each."""
        self.hits.append((time, job, gpus, lost))
        self.stopped.setdefault(event, []).append(job)

    def ran(self, gpus: Sequence[int], start: float, end: float) -> None:
        """A job held ``gpus`` from ``start`` to ``end`` (intervals of one GPU that meet are merged)."""
        if end <= start:
            return
        for g in gpus:
            k = self.last_run.get(g)
            if k is not None and self.runs[k][2] == start:
                self.runs[k] = (g, self.runs[k][1], end)
            else:
                self.last_run[g] = len(self.runs)
                self.runs.append((g, start, end))

    def summary(self, restarts: Sequence[int], failure_restarts: Sequence[int]) -> dict[str, Any]:
        """The headline figures: failures, lost GPU-hours, restarts per job."""
        kinds = [e.kind for e in self.events]
        return {
            "failures": len(self.events),
            "gpu_failures": kinds.count("gpu"),
            "server_failures": kinds.count("server"),
            "jobs_hit": len(self.hits),
            "lost_gpu_hours": self.lost_gpu_seconds / 3600.0,
            "gpu_hours_out_of_service": sum(len(e.gpus) * (e.until - e.time) for e in self.events) / 3600.0,
            "repairs": self.repairs,
            "replaced_by_repair": self.replaced,
            "repair_seconds": self.repair_seconds,
            "restarts_per_job_mean": float(np.mean(restarts)) if len(restarts) else 0.0,
            "restarts_per_job_max": int(max(restarts, default=0)),
            "failure_restarts_per_job_mean": float(np.mean(failure_restarts)) if len(failure_restarts) else 0.0,
            "failure_restarts_per_job_max": int(max(failure_restarts, default=0)),
            "config": dict(self.config),
        }

    def log(self) -> list[dict[str, Any]]:
        """The failures one by one (JSON-ready), each with the jobs it stopped (``jobs``, in the
        order they were stopped; a job already stopped by an earlier failure is not repeated)."""
        return [{"time": e.time, "kind": e.kind, "component": e.component, "server": e.server, "gpus": list(e.gpus),
                 "until": e.until, "jobs": list(self.stopped.get(k, ()))} for k, e in enumerate(self.events)]


def failures_line(figures: Mapping[str, Any]) -> str:
    """The printed summary of a result's ``failures`` (:meth:`FailureStats.summary`; both
    simulators give it under these names)."""
    f = figures
    return (f"failures {f['failures']} ({f['gpu_failures']} GPU, {f['server_failures']} server), "
            f"jobs hit {f['jobs_hit']}, lost {f['lost_gpu_hours']:.2f} GPU-hours, "
            f"restarts per job {f['restarts_per_job_mean']:.2f} mean / {f['restarts_per_job_max']} max "
            f"({f['failure_restarts_per_job_mean']:.2f} / {f['failure_restarts_per_job_max']} after failures), "
            f"repairs {f['repairs']}")


def repair_in_round(
    instance: RoundInstance,
    in_force: Mapping[JobId, tuple[int, ...]],
    out_of_service: Sequence[int],
    busy: Sequence[int],
    options: SolveOptions,
) -> tuple[RoundInstance, PlacementResult]:
    """:func:`pal_opt.repair.repair` on the round in progress.

    ``instance`` is the round as it was placed; the repair round has the jobs of ``in_force``
    (the jobs running now, those hit by the failure on their GPUs in force), in queue order;
    ``busy`` GPUs (held by jobs that finished earlier in the round, free only from the next round)
    are marked busy, and every GPU of ``out_of_service`` failed.  Unaffected jobs keep their GPUs.
    Returns the round given to the repair (for the checker) and the repair.
    """
    from ..repair import repair

    cl = instance.cluster
    state = cl.state.copy()
    if busy:
        state[cl.positions(list(busy))] = GpuState.BUSY
    jobs = tuple(replace(j, placement=None) for j in instance.jobs if j.id in in_force)
    rnd = RoundInstance(cl.with_state(state), jobs, instance.params, f"{instance.name} (failure)")
    return rnd, repair(rnd, dict(in_force), list(out_of_service), options=options)
