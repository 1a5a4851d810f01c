"""GPU and server failures in the simulator of GPU types (``simulate --trace-format sia --failures``).

The failure process is the PAL simulator's (:class:`pal_opt.simulate.failures.FailureProcess`:
each GPU and each server fails after an exponential time of its MTBF, seeded, and stays out of
service for the repair time), over the cluster's GPU positions (types in cluster order, then
servers, then slots) and its servers numbered type by type.  Within a round of Δ seconds:

* a job holding a GPU that fails at time t trains until t, then loses the work since its last
  checkpoint (its epoch and progress go back to that checkpoint's), and is suspended: it holds
  no GPUs, leaves any restart delay it was in, and the next rounds re-place it, which costs it
  a restart (the application's restart delay), as every start does;
* every other job trains the whole round.

Checkpoints.  Every restart (a start, migration or new shape) and every suspension goes through
a checkpoint in Sia's model, so a job's checkpoint is taken then (a move to other GPUs of the
same shape restarts nothing and takes none), and besides every ``checkpoint_interval`` seconds of
training, at the instant inside the round at which the training since the last reaches the
interval: the state saved is the job's at that instant (:meth:`SimJob.state_after`), so a
failure loses at most the interval, as in the PAL simulator.  With an infinite interval only the
restarts and suspensions checkpoint.

The policies see the GPUs out of service at each round (:func:`pal_opt.hetero.roundstep.round_step`):
the round program counts only the GPUs in service and no policy places a job on the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from ..model import Cluster, JobId
from ..simulate.failures import FailureConfig, FailureProcess, FailureStats
from .gpus import Layout
from .simjob import SimJob

__all__ = ["TypedFailures"]


class TypedFailures:
    """The failure process and the jobs' checkpoints of one simulation (module docstring)."""

    def __init__(self, layout: Layout, config: FailureConfig, seed: int) -> None:
        n = layout.num_gpus
        # servers named by type and node ("aws-0"), numbered as Layout.server_of numbers them
        names = np.array([f"{layout.types[t].name}-{k}" for t, k in zip(layout.type_of, layout.node_of, strict=True)],
                         dtype=object)
        cluster = Cluster.from_arrays(np.arange(n), names, {"nominal": np.ones(n)})
        self.process = FailureProcess(cluster, config, seed)
        self.stats = FailureStats(asdict(config))
        self.interval = float(config.checkpoint_interval)
        self.saved: dict[int, tuple[float, int]] = {}  # job index -> (progress, epoch) at its checkpoint
        self.since: dict[int, float] = {}  # job index -> seconds trained since its checkpoint
        self.stops: dict[int, int] = {}  # job index -> times a failure stopped it

    def advance(self, jobs: Sequence[SimJob], start: float, length: float) -> list[int]:
        """Run the round [start, start + length) for ``jobs`` (their :meth:`SimJob.advance`),
        a job whose GPU fails stopped there and sent back to its checkpoint; returns the
        indices of the jobs so interrupted (suspended: the caller's policy must forget where
        they ran, :func:`pal_opt.hetero.roundstep.forget_allocation`)."""
        events = self.process.pop_until(start + length)
        first = len(self.stats.events)
        self.stats.events.extend(events)
        holder = {g: j.index for j in jobs if j.allocation and not j.done for g in j.allocation}
        failed_at: dict[int, tuple[float, int]] = {}  # job index -> (time, index of the failure)
        for k, ev in enumerate(events):  # in time order: a job's first failure stops it
            for g in ev.gpus:
                i = holder.get(g)
                if i is not None and i not in failed_at:
                    failed_at[i] = (ev.time, first + k)
        hit = []
        for job in jobs:
            run = length if job.index not in failed_at else max(failed_at[job.index][0] - start, 0.0)
            trained = max(run - job.rescale_time, 0.0) if job.shape and not job.done else 0.0
            since = self.since.get(job.index, 0.0) + trained
            if trained and since >= self.interval:  # a periodic checkpoint inside this run
                since = math.fmod(since, self.interval)  # training after the last one passed
                self.saved[job.index] = job.state_after(run - since, start)
            job.advance(run, start)
            self.since[job.index] = since
            if job.index in failed_at and not job.done:
                self._lose(job, *failed_at[job.index])
                hit.append(job.index)
        return hit

    def _lose(self, job: SimJob, when: float, event: int) -> None:
        self.stats.hit(event, when, job.name, job.gpus, self.since.get(job.index, 0.0))
        self.stops[job.index] = self.stops.get(job.index, 0) + 1
        job.progress, job.epoch = self.saved.get(job.index, (0.0, 0))
        job.lose_gpus(when)
        self.since[job.index] = 0.0

    def checkpoint_moved(self, jobs: Sequence[SimJob], before: Mapping[int, tuple[int | None, bool]]) -> None:
        """The jobs a round restarted or suspended checkpointed as they stopped (Sia's
        re-allocation; ``before``: each job's restart count and whether it held GPUs before the
        round).  A move that keeps the shape restarts nothing and takes no checkpoint."""
        for job in jobs:
            restarts, held = before.get(job.index, (job.num_restarts, bool(job.allocation)))
            if job.num_restarts != restarts or (held and not job.allocation):
                self.saved[job.index] = (job.progress, job.epoch)
                self.since[job.index] = 0.0

    def out_of_service(self, t: float) -> np.ndarray:
        """GPU positions out of service at ``t``."""
        return self.process.out_of_service(t)

    def lost_gpu_seconds(self) -> dict[JobId, float]:
        """GPU-seconds of work the failures cost each job they stopped, by job name."""
        out: dict[JobId, float] = {}
        for _, name, gpus, lost in self.stats.hits:
            out[name] = out.get(name, 0.0) + gpus * lost
        return out

    def stopped(self, job: int) -> int:
        """How many times a failure stopped job ``job`` (its index)."""
        return self.stops.get(job, 0)

    def summary(self, jobs: Sequence[SimJob]) -> dict[str, Any]:
        """``failures`` of the result, under the PAL simulator's names
        (:meth:`pal_opt.simulate.failures.FailureStats.summary`; this simulator repairs nothing
        inside a round, so ``repairs`` and ``replaced_by_repair`` are 0), then the names this
        result used before as deprecated aliases (:data:`pal_opt.simulate.fields.FAILURE_ALIASES`)."""
        from ..simulate.fields import FAILURE_ALIASES, with_aliases

        out = self.stats.summary([j.num_restarts or 0 for j in jobs], [self.stopped(j.index) for j in jobs])
        return with_aliases(out, FAILURE_ALIASES)

    def log(self) -> list[dict[str, Any]]:
        """``failure_log`` of the result: the failures one by one, each with the jobs it
        stopped, by name (:meth:`pal_opt.simulate.failures.FailureStats.log`)."""
        return self.stats.log()
