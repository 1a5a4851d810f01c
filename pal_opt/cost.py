"""The one cost model.  Every policy, the integer programs, the checker, the benchmarks and
the simulator price a placement here.

* Slowdown of job *j* on GPU set *S* = max over *S* of *j*'s class factor × *j*'s locality
  penalty for the topology level *S* spans.
* Round cost = Σ_j d_j · ln(slowdown_j) (+ ``restart_cost`` · d_j for each running job moved).
* Geometric-mean slowdown = exp(cost / Σ_j d_j), a GPU-weighted geometric mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .model import Cluster, Job, JobId, RoundInstance

__all__ = [
    "job_slowdown",
    "job_slowdown_pos",
    "CostSummary",
    "evaluate",
    "geomean_slowdown",
    "relative_gap",
]


def job_slowdown_pos(cluster: Cluster, factors: np.ndarray, job: Job, pos: np.ndarray) -> float:
    """Slowdown of ``job`` on the GPUs at positions ``pos``, given its class's factor array."""
    level = cluster.span_level_pos(pos)
    return float(factors[pos].max()) * float(job.locality[level])


def job_slowdown(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], job: Job, gpu_ids: tuple[int, ...]
) -> float:
    """Slowdown of ``job`` on GPUs given by id, with per-class ``factors``."""
    pos = instance.cluster.positions(gpu_ids)
    return job_slowdown_pos(instance.cluster, factors[job.perfclass], job, pos)


def geomean_slowdown(cost: float, gpus: int) -> float:
    """exp(cost / gpus); 1.0 for an empty placement.

    >>> round(geomean_slowdown(4 * math.log(1.1), 4), 12)
    1.1
    """
    return math.exp(cost / gpus) if gpus > 0 else 1.0


def relative_gap(objective: float, bound: float | None, gpus: int) -> float | None:
    """Relative gap of the geometric-mean slowdown: gm(objective) / gm(bound) − 1 (≥ 0).

    >>> relative_gap(1.0, 1.0, 8)
    0.0
    """
    if bound is None or gpus <= 0 or not math.isfinite(bound):
        return None if bound is None or not math.isfinite(bound) else 0.0
    return max(0.0, math.expm1((objective - bound) / gpus))


@dataclass(frozen=True)
class CostSummary:
    """The price of a placement.

    Attributes
    ----------
    cost
        Round cost Σ d_j ln(slowdown_j) plus restart costs.
    gpus
        GPUs placed, Σ d_j over placed jobs.
    geomean
        exp(cost / gpus).
    slowdown
        Per job: its slowdown.
    level
        Per job: the topology level its set spans (0 server, 1 rack, 2 cluster).
    moved
        Running jobs given a different GPU set.
    """

    cost: float
    gpus: int
    geomean: float
    slowdown: dict[JobId, float]
    level: dict[JobId, int]
    moved: tuple[JobId, ...]

    @property
    def spanning(self) -> int:
        """Jobs whose GPUs lie on more than one server."""
        return sum(1 for v in self.level.values() if v > 0)


def evaluate(
    instance: RoundInstance,
    placements: Mapping[JobId, tuple[int, ...] | list[int]],
    factors: Mapping[str, np.ndarray],
    restart_cost: float | None = None,
) -> CostSummary:
    """Price ``placements`` ({job id: GPU ids}) under ``factors`` ({class: per-GPU array}).

    ``restart_cost`` defaults to the instance's.  Validity is not checked here; see
    :mod:`pal_opt.check`.
    """
    rc = instance.params.restart_cost if restart_cost is None else restart_cost
    cl = instance.cluster
    jobs = instance.job_by_id
    cost = 0.0
    gpus = 0
    slow: dict[JobId, float] = {}
    lev: dict[JobId, int] = {}
    moved: list[JobId] = []
    for jid, gids in placements.items():
        job = jobs[jid]
        pos = cl.positions(gids)
        level = cl.span_level_pos(pos)
        s = float(factors[job.perfclass][pos].max()) * float(job.locality[level])
        slow[jid] = s
        lev[jid] = int(level)
        cost += job.demand * math.log(s)
        gpus += job.demand
        if job.placement is not None and set(job.placement) != set(int(g) for g in gids):
            moved.append(jid)
            cost += rc * job.demand
    return CostSummary(cost, gpus, geomean_slowdown(cost, gpus), slow, lev, tuple(moved))
