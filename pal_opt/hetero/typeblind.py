"""PAL and Packed on a heterogeneous cluster, blind to GPU types (comparators of ``sia``).

Every job asks for its workload row's ``num_replicas`` GPUs and keeps them until it completes
(no elasticity, no preemption).  Every round the waiting jobs, in arrival order, go to
pal-opt's greedy method (:func:`pal_opt.solve.solve` with ``pal`` or ``packed``) on a round
whose cluster is every GPU of every type as one untyped pool (servers of 4 or 8 GPUs), the GPUs
of running jobs busy, and each class's **raw** factors (PAL bins them itself).  The method
never sees the types: a job lands wherever its placement rule puts it, at the throughput of
that type and shape; a gang that spans types runs at its slowest type
(:func:`effective_type`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..model import Cluster, Job, RoundInstance, RoundParams
from .configs import GpuType, throughput_ratio
from .gpus import Layout, Variability
from .placer import fit_shape
from .profiles import Application
from .simjob import SimJob

__all__ = ["TypeBlindPolicy", "effective_type", "core_cluster", "NOMINAL"]

#: The class name of jobs without variability factors in the core rounds built here.
NOMINAL = "nominal"


def core_cluster(
    layout: Layout, factors: Mapping[str, np.ndarray], busy: np.ndarray, *, typed: bool
) -> Cluster:
    """The core model's cluster of a layout: GPU ids = positions, servers = (type, node), each
    class's ``factors`` plus a nominal class, ``busy`` GPUs held; typed or one anonymous pool."""
    fac = {NOMINAL: np.ones(layout.num_gpus), **{c: np.asarray(v, dtype=np.float64) for c, v in factors.items()}}
    names = [layout.types[t].name for t in layout.type_of.tolist()] if typed else None
    return Cluster.from_arrays(
        np.arange(layout.num_gpus), layout.server_of(), fac, state=busy.astype(np.int8), gpu_types=names
    )


def effective_type(app: Application, types: Sequence[GpuType], touched: Sequence[int]) -> int:
    """The type a gang on ``touched`` types runs as: the slowest for ``app`` (least 1-GPU
    throughput in its profiles, :func:`pal_opt.hetero.configs.throughput_ratio`); ties: the first."""
    first = touched[0]
    speed = [throughput_ratio(app, types[t].name, types[first].name) for t in touched]
    return touched[int(np.argmin(speed))]


def gang_state(layout: Layout, app: Application, gpus: Sequence[int]) -> tuple[int | None, tuple[int, ...]]:
    """(type index the job runs as, per-node shape) of a GPU set.  A gang on one type has its
    shape fitted to the type's node limit; a gang spanning types runs as its slowest type, its
    per-node counts split into that type's node size first."""
    if not gpus:
        return None, ()
    touched = sorted({int(layout.type_of[g]) for g in gpus})
    shape = layout.shape(gpus)
    if len(touched) == 1:
        t = touched[0]
    else:
        t = effective_type(app, layout.types, touched)
        g = layout.types[t].gpus_per_node
        shape = tuple(x for n in shape for x in (g,) * (n // g) + ((n % g,) if n % g else ()))
    return t, fit_shape(shape, layout.types[t].node_limit or len(gpus))


class TypeBlindPolicy:
    """PAL or Packed ignoring types (module docstring).

    Parameters
    ----------
    layout
        The cluster's GPUs.
    method
        ``"pal"`` or ``"packed"`` (any greedy method of :mod:`pal_opt.methods`).
    variability
        Per-GPU factors (raw ones go to the method, which bins them).
    """

    def __init__(self, layout: Layout, method: str, variability: Variability | None = None) -> None:
        from .policy import RoundStats

        self.layout = layout
        self.method = method
        self.variability = variability or Variability()
        self.holding: dict[int, tuple[int, ...]] = {}
        self.stats = RoundStats()
        #: jobs found unplaceable where the method placed them: {job index: reason}
        self.unplaceable: dict[int, str] = {}

    def unplaceable_reason(self, job: SimJob) -> str | None:
        """Why no GPUs of the cluster can ever run the job at its requested count, or None."""
        total = self.layout.num_gpus
        if job.spec.num_replicas > total:
            return f"needs {job.spec.num_replicas} GPUs; the cluster has {total}"
        return None

    def _job(self, job: SimJob, position: int) -> Job:
        key = self.variability.key(job.app.name)
        return Job(job.index, job.spec.num_replicas, key or NOMINAL, position=position)

    def allocate(self, active: Sequence[SimJob], now: float) -> dict[int, tuple[int, ...]]:
        """GPU positions of every active job for the next round (running jobs keep theirs)."""
        import time

        from ..solve import solve

        live = {j.index for j in active}
        self.holding = {i: g for i, g in self.holding.items() if i in live}
        busy = np.zeros(self.layout.num_gpus, dtype=bool)
        for g in self.holding.values():
            busy[list(g)] = True
        waiting = sorted((j for j in active if j.index not in self.holding), key=lambda j: (j.submit_time, j.index))
        if waiting and not busy.all():
            t0 = time.perf_counter()
            cluster = core_cluster(self.layout, self.variability.raw, busy, typed=False)
            inst = RoundInstance(cluster, tuple(self._job(j, i) for i, j in enumerate(waiting)), RoundParams())
            result = solve(inst, self.method)
            for jid, gpus in result.placements.items():
                self.holding[int(jid)] = tuple(sorted(int(g) for g in gpus))
            self.stats.rounds += 1
            self.stats.solve_seconds += time.perf_counter() - t0
        return {j.index: self.holding.get(j.index, ()) for j in active}
