"""PAL and Packed on a heterogeneous cluster, blind to GPU types (comparators of ``sia``).

Every job asks for its workload row's ``num_replicas`` GPUs and keeps them until it completes
(no elasticity, no preemption).  Every round the waiting jobs, in arrival order, go to
pal-opt's greedy method (:func:`pal_opt.solve.solve` with ``pal`` or ``packed``) on a round
whose cluster is every GPU of every type as one untyped pool (servers of 4 or 8 GPUs), the GPUs
of running jobs busy, and each class's **raw** factors (PAL bins them itself).  The method
never sees the types: a job lands wherever its placement rule puts it, at the throughput of
that type and shape; a gang that spans types runs at its slowest type
(:func:`effective_type`), as the core model prices a mixed gang (``formulations/round_ilp.md``,
speed), with a shape of that type (:func:`gang_type_shape`): each node's GPUs split into the
type's node size, fitted to its node limit.

A shape of a type has at most ``node limit × GPUs per node`` GPUs (the node limit is the type's
own, as for Sia's placer; more would put more GPUs on a node than the type's servers have), so a
gang runs only if its slowest type holds it: a gang of 25 GPUs over the RTX and A100 nodes of
the paper's cluster would run as 25 RTX GPUs on three 8-GPU nodes, which no model gives a speed
for.  Hence the unplaceable jobs of these policies (:mod:`pal_opt.hetero.simulate`):

* before the first round (:meth:`TypeBlindPolicy.unplaceable_reason`), a job needing more GPUs
  than the cluster has, or than any one type holds (it must span types, and its slowest type
  cannot hold it);
* where the method places it (:attr:`TypeBlindPolicy.unplaceable`), a job whose GPUs span types
  whose slowest one cannot hold it, or land on a shape its profile has no step time for
  (:func:`gang_problem`): it is reported with its reason, given no GPUs, and the round is placed
  again without it.  The method placed it there and never sees types, so this is the policy's
  outcome, not the simulator's choice of other GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import OptionError, counted
from ..model import Cluster, Job, RoundInstance, RoundParams
from ..options import number_array, require_items, require_type
from .configs import GpuType, require_gpu_types, throughput_ratio_unchecked
from .gpus import Layout, Variability
from .placer import fit_shape_unchecked
from .profiles import APP_TYPES, APP_WHAT, Application
from .simjob import SimJob, shape_runs

__all__ = [
    "TypeBlindPolicy",
    "effective_type",
    "gang_type_shape",
    "gang_state",
    "gang_problem",
    "core_cluster",
    "NOMINAL",
]

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
    types = require_gpu_types(types, "types")
    touched = require_items(touched, "touched", "a list of type indices")
    if not touched:
        raise OptionError("touched: no type given")
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    return _effective_type(app, types, touched)


def _effective_type(app: Application, types: Sequence[GpuType], touched: Sequence[int]) -> int:
    """:func:`effective_type` without the checks of its arguments."""
    first = touched[0]
    speed = [throughput_ratio_unchecked(app, types[t].name, types[first].name) for t in touched]
    return touched[int(np.argmin(speed))]


def _capacity(gpu_type: GpuType) -> int:
    """Most GPUs a shape of the type may have: its node limit times its GPUs per node."""
    return gpu_type.node_limit * gpu_type.gpus_per_node


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def gang_type_shape(layout: Layout, app: Application, gpus: Sequence[int]) -> tuple[int, tuple[int, ...] | None]:
    """(type index the gang runs as, its per-node shape on that type, or None if the type cannot
    hold it) of a non-empty GPU set (module docstring).

    A gang on one type keeps its per-node counts; a gang spanning types runs as its slowest type,
    each node's count split into that type's node size.  A shape on more nodes than the type's
    node limit is rewritten as ``⌈n / limit⌉`` GPUs per node (:func:`~pal_opt.hetero.placer.fit_shape`),
    which fits the type's nodes only for ``n ≤ limit × GPUs per node``: None beyond.
    """
    touched = sorted({int(layout.type_of[g]) for g in gpus})
    shape = layout.shape(gpus)
    t = touched[0] if len(touched) == 1 else _effective_type(app, layout.types, touched)
    gt = layout.types[t]
    if len(touched) > 1:
        g = gt.gpus_per_node
        shape = tuple(x for n in shape for x in (g,) * (n // g) + ((n % g,) if n % g else ()))
    if len(gpus) > _capacity(gt):
        return t, None
    return t, fit_shape_unchecked(shape, gt.node_limit or len(gpus))


def _no_shape(layout: Layout, gpus: Sequence[int], t: int) -> str:
    """Why type ``t`` has no shape for the gang (:func:`gang_type_shape` gave None)."""
    gt = layout.types[t]
    touched = sorted({int(layout.type_of[g]) for g in gpus})
    if len(touched) == 1:
        return f"its {len(gpus)} GPUs on {gt.name} exceed the {_capacity(gt)} its node limit allows"
    return (f"its {len(gpus)} GPUs span {_listed([layout.types[i].name for i in touched])}, and a gang spanning "
            f"types runs as its slowest type, {gt.name}, which holds at most {_capacity(gt)}")


def gang_state(layout: Layout, app: Application, gpus: Sequence[int]) -> tuple[int | None, tuple[int, ...]]:
    """(type index the job runs as, per-node shape) of a GPU set (:func:`gang_type_shape`);
    (None, ()) for no GPUs.

    Raises
    ------
    OptionError
        The type the gang runs as cannot hold it (a policy must not hand out such GPUs;
        :func:`gang_problem`).
    """
    require_type(layout, Layout, "layout", " (Layout(cluster))")
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    gpus = number_array(gpus, "gpus", "iu") if isinstance(gpus, np.ndarray) else require_items(gpus, "gpus", "a list of GPU positions")
    return gang_state_unchecked(layout, app, gpus)


def gang_state_unchecked(layout: Layout, app: Application, gpus: Sequence[int]) -> tuple[int | None, tuple[int, ...]]:
    """:func:`gang_state` without the checks of its arguments' types, for the simulator's round
    step, whose layout, applications and GPU positions are its own (not in ``__all__``)."""
    if not len(gpus):
        return None, ()
    t, shape = gang_type_shape(layout, app, gpus)
    if shape is None:
        raise OptionError(f"{app.name}: {_no_shape(layout, gpus, t)}")
    return t, shape


def gang_problem(layout: Layout, job: SimJob, gpus: Sequence[int]) -> str | None:
    """Why the job cannot train on these GPUs (module docstring), or None: the type it would run
    as cannot hold it, or its profile has no step time for the shape at the job's batch
    (:func:`~pal_opt.hetero.simjob.shape_runs`)."""
    t, shape = gang_type_shape(layout, job.app, gpus)
    if shape is None:
        return _no_shape(layout, gpus, t)
    name = layout.types[t].name
    if not shape_runs(job.app, name, shape, job.kind, job.spec.batch_size, job.params[t], job.grad):
        return f"{job.app.name} has no measured step time on {name} for its shape there, {shape}"
    return None


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
        from ..methods import get_method
        from .policy import RoundStats

        self.layout = require_type(layout, Layout, "layout", " (Layout(cluster))")
        get_method(method)  # an unknown name (None too) failed at the first round, inside solve
        self.method = method
        if variability is not None:
            require_type(variability, Variability, "variability", " (parse_variability or draw_variability)")
        self.variability = variability or Variability()
        self.holding: dict[int, tuple[int, ...]] = {}
        self.stats = RoundStats()
        #: jobs found unplaceable where the method placed them: {job index: reason}
        self.unplaceable: dict[int, str] = {}
        #: GPUs out of service (a bool per position, or None): never placed on; a job holding one
        #: holds nothing (the caller suspended it) and waits again
        self.out_of_service: np.ndarray | None = None

    def unplaceable_reason(self, job: SimJob) -> str | None:
        """Why no GPUs of the cluster can ever run the job at its requested count (more than the
        cluster has, or than any one type holds; module docstring), or None."""
        n, total = job.spec.num_replicas, self.layout.num_gpus
        if n > total:
            return f"needs {counted(n, 'GPU')}; the cluster has {total}"
        most = max(_capacity(t) for t in self.layout.types)
        if n > most:
            return f"needs {counted(n, 'GPU')}; no GPU type holds more than {most} and a gang spanning types runs as its slowest type"
        return None

    def _job(self, job: SimJob, position: int) -> Job:
        key = self.variability.key(job.app.name)
        return Job(job.index, job.spec.num_replicas, key or NOMINAL, position=position)

    def _place(self, waiting: Sequence[SimJob], busy: np.ndarray) -> dict[int, tuple[int, ...]]:
        """The method's placements of the waiting jobs (in arrival order) around the busy GPUs."""
        import time

        from ..solve import solve

        t0 = time.perf_counter()
        cluster = core_cluster(self.layout, self.variability.raw, busy, typed=False)
        inst = RoundInstance(cluster, tuple(self._job(j, i) for i, j in enumerate(waiting)), RoundParams())
        result = solve(inst, self.method)
        self.stats.rounds += 1
        self.stats.solve_seconds += time.perf_counter() - t0
        return {int(jid): tuple(sorted(int(g) for g in gpus)) for jid, gpus in result.placements.items()}

    def allocate(self, active: Sequence[SimJob], now: float) -> dict[int, tuple[int, ...]]:
        """GPU positions of every active job for the next round (running jobs keep theirs); a job
        placed where it cannot run (:func:`gang_problem`) goes to :attr:`unplaceable` and the
        round is placed again without it."""
        live = {j.index: j for j in active}
        self.holding = {i: g for i, g in self.holding.items() if i in live}
        busy = self.layout.unavailable(self.out_of_service)
        for g in self.holding.values():
            busy[list(g)] = True
        waiting = sorted((j for j in active if j.index not in self.holding), key=lambda j: (j.submit_time, j.index))
        while waiting and not busy.all():
            placed = self._place(waiting, busy)
            bad = {i: f"{self.method} placed it where it cannot run: {why}" for i, g in placed.items()
                   if (why := gang_problem(self.layout, live[i], g)) is not None}
            if not bad:
                self.holding.update(placed)
                break
            self.unplaceable.update(bad)
            waiting = [j for j in waiting if j.index not in bad]
        return {j.index: self.holding.get(j.index, ()) for j in active}
