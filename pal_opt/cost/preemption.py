"""Preemption: a running job left unplaced loses the round, weighted by its priority.

A running job that is not placed this round (preempted, :attr:`pal_opt.model.Job.priority` p,
``d`` GPUs) is charged

    ``per_gpu_hour · (1 + p) · d · R / 3600``

round-cost units: the GPU-hours of the ``R``-second round it loses (``params.round_length``),
weighted by ``1 + p``.  ``per_gpu_hour`` comes from ``params.costs["preemption"]`` (default
100: 10 units per GPU of a 360 s round, far above what any placement of a GPU costs in the
program's own unit, ``ln slowdown``, so the program preempts only when it must).  The work lost
*after* the job resumes is the restart cost (:mod:`pal_opt.cost.restart`), charged by the
simulator when it happens.

Every method's round cost includes it for the running jobs it leaves out (a constant under the
queue rules that fix the placed set, ``prefix`` and ``backfill``); the preemptive methods
(admission ``"preempt"``: :mod:`pal_opt.ilp.preempt`, :mod:`pal_opt.policies.preempt`) choose
which jobs pay it.  The geometric-mean slowdown of a placement leaves it out
(:func:`pal_opt.cost.evaluate`).
"""

from __future__ import annotations

from ..model import Job, RoundInstance
from .base import CostTerm

__all__ = ["Preemption", "preempted_gpu_hours"]


def preempted_gpu_hours(job: Job, round_length: float) -> tuple[float, float]:
    """The GPU-hours of a ``round_length``-second round that preempting ``job`` loses:
    ``(unweighted, weighted by 1 + priority)``.

    >>> preempted_gpu_hours(Job(1, 4, "classA", priority=1), 360.0)
    (0.4, 0.8)
    """
    hours = job.demand * round_length / 3600.0
    return hours, hours * (1 + job.priority)


class Preemption(CostTerm):
    name = "preemption"
    summary = "per_gpu_hour x (1 + priority) x the GPU-hours of the round for each running job left unplaced"
    params = {"per_gpu_hour": 100.0}

    def preempted(self, instance: RoundInstance, job: Job) -> float:
        return self.param(instance, "per_gpu_hour") * preempted_gpu_hours(job, instance.params.round_length)[1]
