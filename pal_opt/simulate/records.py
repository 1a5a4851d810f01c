"""What a simulation records: per job, per round, and the whole run.

The engine (:mod:`.engine`) fills these; :mod:`.summary` and :mod:`.metrics` read them.  Neither
of those imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..model import JobId

if TYPE_CHECKING:
    from .failures import FailureStats

__all__ = ["JobRecord", "RoundRecord", "SimulationResult"]


@dataclass
class JobRecord:
    """What happened to one job."""

    job_id: JobId
    model: str
    perfclass: str
    demand: int
    submit_time: float
    iterations: float
    ideal_seconds: float
    first_start: float | None = None
    finish_time: float | None = None
    run_seconds: float = 0.0
    attained: float = 0.0
    preemptions: int = 0
    moves: int = 0
    restarts: int = 0
    rounds_run: int = 0
    rounds_spanning: int = 0
    slowdown_seconds: float = 0.0  # Σ slowdown × seconds run, for the time-weighted mean
    priority: int = 0
    preempted_gpu_hours: float = 0.0  # Σ over preemptions of GPUs × the round's hours
    stages: int = 1  # pipeline stages (1: a gang)
    failures: int = 0  # times a failure took one of its GPUs while it ran
    lost_gpu_seconds: float = 0.0  # GPUs × seconds of work lost to failures

    @property
    def jct(self) -> float | None:
        return None if self.finish_time is None else self.finish_time - self.submit_time

    @property
    def queueing_delay(self) -> float | None:
        return None if self.first_start is None else self.first_start - self.submit_time

    @property
    def mean_slowdown(self) -> float | None:
        return self.slowdown_seconds / self.run_seconds if self.run_seconds > 0 else None

    def to_row(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "model": self.model,
            "perfclass": self.perfclass,
            "num_gpus": self.demand,
            "submit_time": self.submit_time,
            "iterations": self.iterations,
            "ideal_seconds": self.ideal_seconds,
            "first_start": self.first_start,
            "finish_time": self.finish_time,
            "jct": self.jct,
            "queueing_delay": self.queueing_delay,
            "run_seconds": self.run_seconds,
            "mean_slowdown": self.mean_slowdown,
            "preemptions": self.preemptions,
            "moves": self.moves,
            "restarts": self.restarts,
            "rounds_run": self.rounds_run,
            "rounds_spanning": self.rounds_spanning,
            "priority": self.priority,
            "preempted_gpu_hours": self.preempted_gpu_hours,
            "stages": self.stages,
            "failures": self.failures,
            "lost_gpu_seconds": self.lost_gpu_seconds,
        }


@dataclass(frozen=True)
class RoundRecord:
    """One round: when, how full, how long the method took."""

    time: float
    active: int
    running: int
    gpus_placed: int
    busy_gpu_seconds: float
    spanning: int
    preempted: int
    moved: int
    status: str
    solve_seconds: float
    #: why a round fell back to the greedy placement (the method's message), else ""
    note: str = ""


@dataclass
class SimulationResult:
    """Everything a simulation produced; :mod:`.summary` and :mod:`.metrics` turn it into figures."""

    config: dict[str, Any]
    num_gpus: int
    jobs: list[JobRecord]
    rounds: list[RoundRecord]
    fallbacks: int
    wall_seconds: float
    summary: dict[str, Any] = field(default_factory=dict)
    #: jobs no round could serve (e.g. needing more GPUs than the cluster has), with the reason
    unplaceable: dict[Any, str] = field(default_factory=dict)
    #: what failures did (None: the run had no failures)
    failures: FailureStats | None = None
    #: when a run stopped by ``max_time`` ended with jobs unfinished (its last round's end), else None
    stopped_at: float | None = None
    #: solver processes that crashed during the run (``info["highs_crashes"]`` and
    #: ``info["cbc_crashes"]``), each survived
    solver_crashes: int = 0
