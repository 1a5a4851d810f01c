"""Restart: a running job that is moved (or stopped) loses work.

``restart_cost · d_j`` for each running job that does not keep exactly its GPUs, with
``restart_cost`` from ``instance.params.restart_cost`` (round-cost units per GPU; 0, the
default, reproduces PAL's non-sticky rounds).
"""

from __future__ import annotations

from ..model import Job, RoundInstance
from .base import CostTerm

__all__ = ["Restart"]


class Restart(CostTerm):
    name = "restart"
    summary = "restart_cost x demand for each running job that loses or changes its GPUs"

    def moved(self, instance: RoundInstance, job: Job) -> float:
        return instance.params.restart_cost * job.demand
