"""Migration: moving a running job to other GPUs costs its checkpoint transfer and warm-up.

A running job that does not keep exactly its GPUs pays ``per_job + per_gpu · d_j`` in round-cost
units (the program's own unit, ``Σ d · ln slowdown``; unlike the restart cost, which is given in
seconds and converted, :mod:`pal_opt.cost.restart`: ``per_gpu = u`` prices a move as losing
``restart_cost_seconds(u, R)`` seconds of an R-second round), with both parameters from
``params.costs["migration"]`` (default 0: free moves).  Unlike
the restart term, which models PAL's per-GPU restart loss, this term lets a scheduler price a
move by job as well as by size; repair and preemption use it to keep unaffected jobs in place
unless moving them lowers the round's cost by more than the move costs.  A running job that lost
a GPU (failed, or busy with other work) pays no migration: it must move, so there is no choice to
price, and a repair's displaced jobs are not charged for the move the failure forced.

Set it in an instance file (``"params": {"costs": {"migration": {"per_job": 0.5}}}``), on the
command line (``pal-opt solve ... --cost migration.per_job=0.5``) or in code
(``RoundParams(costs={"migration": {"per_gpu": 0.1}})``).
"""

from __future__ import annotations

from ..model import GpuState, Job, RoundInstance
from .base import CostTerm

__all__ = ["Migration"]


class Migration(CostTerm):
    name = "migration"
    summary = "per_job + per_gpu x demand for each running job moved to other GPUs"
    params = {"per_job": 0.0, "per_gpu": 0.0}

    def moved(self, instance: RoundInstance, job: Job) -> float:
        if job.placement and _lost_a_gpu(instance, job.placement):
            return 0.0  # its move is forced (a GPU failed or was taken): no choice to price
        return self.param(instance, "per_job") + self.param(instance, "per_gpu") * job.demand


def _lost_a_gpu(instance: RoundInstance, placement: tuple[int, ...]) -> bool:
    """Whether a GPU of ``placement`` is out of this round (failed, or busy with other work)."""
    cl = instance.cluster
    return bool((cl.state[cl.positions(placement)] != GpuState.FREE).any())
