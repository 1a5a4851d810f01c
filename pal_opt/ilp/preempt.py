"""``ilp-preempt``: the round program that chooses the jobs to preempt and the placement together.

1. :func:`pal_opt.priority.preempt_plan` admits waiting jobs by priority and splits the running
   jobs into those that stay placed and the *optional* ones, of the priorities whose GPUs the
   admitted jobs need;
2. the round program (:func:`~pal_opt.ilp.formulation.build_formulation` with ``optional=``)
   places every admitted waiting job and every kept running job, and gives each optional job a
   drop variable priced by the cost terms' ``preempted`` charge (:mod:`pal_opt.cost.preemption`:
   ``(1 + priority)`` × the GPU-hours of the round, weighted by ``per_gpu_hour``): it minimises
   the preemption cost, the restart and migration costs of moved jobs and the variability and
   locality cost at once (``formulations/preemption.md``).  It starts from the greedy
   comparator's choice of victims (:func:`greedy_start`), so it never preempts more than that
   start costs;
3. the GPUs left over once whole jobs are preempted (the plan counts GPUs, victims free whole
   jobs) go to the waiting jobs that now fit, in admission order, placed by PAL's rules
   (``info["backfilled"]``; the bound is then not reported).

The result's queue rule is ``"preempt"``; preempted and moved jobs are in ``jobs_to_terminate``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..binning import binned_factors
from ..cost import evaluate, relative_gap
from ..model import GpuState, JobId, RoundInstance
from ..priority import PreemptPlan, admission_order, evict_for, preempt_plan, victim_order
from ..result import PlacementResult, Status, priced_result
from .backends import SolverStatus, get_backend
from .backends.base import SolveOptions as BackendOptions
from .decode import decode, encode
from .formulation import Formulation, build_formulation
from .running import keep_positions

__all__ = ["solve_preempt", "greedy_start", "preempt_program"]


def greedy_start(instance: RoundInstance, factors: Mapping[str, np.ndarray], plan: PreemptPlan) -> dict[JobId, tuple[int, ...]]:
    """A placement of the plan: the optional jobs evicted in :func:`~pal_opt.priority.victim_order`
    until the rest fit (then, as Kueue does, each victim but the last given back when the rest
    still fit), running jobs kept on their GPUs where they can, the others placed by PAL."""
    jobs = instance.jobs
    order = victim_order(instance, plan.optional)
    demand = sum(jobs[i].demand for i in (*plan.waiting, *plan.kept, *plan.optional))
    victims = evict_for(instance, demand, instance.free_gpus, order)
    if victims is None:  # not enough even so: every candidate goes
        victims = order
    running = [i for i in (*plan.kept, *plan.optional) if i not in victims]
    mask = instance.cluster.state == GpuState.FREE
    out: dict[JobId, tuple[int, ...]] = {}
    homeless: list[int] = []
    for i in running:
        pos = keep_positions(instance, i)
        if pos is None:
            homeless.append(i)
        else:
            mask[pos] = False
            out[jobs[i].id] = tuple(jobs[i].placement or ())
    rest = pal_greedy_on(instance, factors, [*homeless, *plan.waiting], mask)
    out.update(rest)
    return {j.id: out[j.id] for j in jobs if j.id in out}


def preempt_program(instance: RoundInstance, factors: Mapping[str, np.ndarray] | None = None,
                    plan: PreemptPlan | None = None) -> Formulation:
    """The program :func:`solve_preempt` solves (``formulations/preemption.md`` §2): the round
    program over the plan's admitted jobs with a drop variable per optional running job.

    ``factors`` default to the round's binned factors (``instance.params.binning``), ``plan`` to
    :func:`~pal_opt.priority.preempt_plan`.  Public so that the program can be exported
    (:func:`pal_opt.ilp.lpwriter.lp_text`; the golden file ``formulations/golden/preempt_contended.lp``).
    """
    if factors is None:
        factors = binned_factors(instance.cluster, instance.params.binning)
    if plan is None:
        plan = preempt_plan(instance)
    return build_formulation(instance, plan.admitted, factors=factors, optional=plan.optional)


def pal_greedy_on(instance: RoundInstance, factors: Mapping[str, np.ndarray], order: Sequence[int],
                  free_mask: np.ndarray) -> dict[JobId, tuple[int, ...]]:
    """PAL's placement of ``order`` on the GPUs of ``free_mask`` (skipping a job that does not fit)."""
    from ..policies.pal import place_sequence

    return place_sequence(instance, factors, order, free_mask=free_mask, backfill=True)


def solve_preempt(
    instance: RoundInstance,
    *,
    binning: str | None = None,
    backend: str | None = None,
    time_limit: float | None = None,
    gap: float | None = None,
    threads: int | None = None,
    warm_start: bool = True,
    deterministic: bool = True,
    backend_params: Mapping[str, Any] | None = None,
) -> PlacementResult:
    """Place one round with preemption by priority (module docstring).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    >>> jobs = (Job("a", 2, "classA", placement=(0, 1)), Job("b", 1, "classA", placement=(2,)),
    ...         Job("hi", 1, "classA", priority=1))
    >>> res = solve_preempt(RoundInstance(c, jobs))
    >>> sorted(res.placements), res.jobs_to_terminate, res.admission
    (['a', 'b', 'hi'], (), 'preempt')
    """
    t0 = time.perf_counter()
    mode = binning or instance.params.binning
    factors = binned_factors(instance.cluster, mode)
    plan = preempt_plan(instance)
    start = greedy_start(instance, factors, plan)
    cls = get_backend(backend)
    start_cost = evaluate(instance, start, factors).cost
    info: dict[str, Any] = {"binning": mode, "optional": [instance.jobs[i].id for i in plan.optional],
                            "start_objective": start_cost}
    if not plan.admitted or instance.free_gpus == 0:  # (no GPU in service: nothing can be placed)
        return _finish(instance, {}, factors, info, Status.OPTIMAL, None, 0.0, time.perf_counter() - t0, cls)
    form = preempt_program(instance, factors, plan)
    built = time.perf_counter() - t0
    vector = None
    if warm_start and cls.supports_warm_start:
        try:
            vector = encode(form, start)
        except ValueError:  # pragma: no cover - the start is a placement of the plan
            vector = None
    demand = sum(instance.jobs[i].demand for i in plan.admitted)
    opts = BackendOptions(time_limit=time_limit, abs_gap=demand * math.log1p(gap) if gap else 0.0, threads=threads,
                          deterministic=deterministic, backend_params=dict(backend_params or {}))
    sol = cls().solve(form, opts, start=vector)
    info.update(solver_status=str(sol.status), num_vars=form.num_vars, num_rows=form.num_rows, warm_start=vector is not None)
    placements = start
    status = Status.FALLBACK
    if sol.values is not None:
        found = decode(form, sol.values)
        if evaluate(instance, found, factors).cost <= start_cost + 1e-9:
            placements = found
        status = Status.OPTIMAL if sol.status == SolverStatus.OPTIMAL else Status.FEASIBLE
    return _finish(instance, placements, factors, info, status, sol.bound, sol.seconds, built, cls)


def _finish(instance: RoundInstance, placements: dict[JobId, tuple[int, ...]], factors: Mapping[str, np.ndarray],
            info: dict[str, Any], status: Status, bound: float | None, seconds: float, built: float,
            cls: Any) -> PlacementResult:
    """The result: the leftover GPUs backfilled (:func:`_backfill`), priced, with the bound when
    nothing was backfilled."""
    extra = _backfill(instance, factors, placements)
    info["backfilled"] = list(extra)
    res = priced_result(instance, {**placements, **extra}, factors, method="ilp-preempt", status=status,
                        admission="preempt", solve_seconds=seconds, build_seconds=built, backend=cls.name,
                        backend_version=cls.version(), info=info)
    if extra or bound is None:
        if status == Status.OPTIMAL and extra:
            res.status = Status.FEASIBLE
        return res
    res.bound = bound
    res.gap = relative_gap(res.objective, bound, max(res.gpus_used, 1))
    return res


def _backfill(instance: RoundInstance, factors: Mapping[str, np.ndarray],
              placements: Mapping[JobId, tuple[int, ...]]) -> dict[JobId, tuple[int, ...]]:
    """The waiting jobs (and running jobs that must move) not placed that fit the GPUs left, in
    admission order, placed by PAL."""
    cl = instance.cluster
    mask = cl.state == GpuState.FREE
    for gids in placements.values():
        mask[cl.positions(gids)] = False
    left = int(mask.sum())
    todo: list[int] = []
    for i in admission_order(instance, moving=True):
        job = instance.jobs[i]
        if job.id not in placements and job.demand <= left:
            todo.append(i)
            left -= job.demand
    return pal_greedy_on(instance, factors, todo, mask) if todo else {}
