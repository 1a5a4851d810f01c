"""The headline figures of a simulation (:func:`summarize`).

The figures the simulator of GPU types gives too carry the names of :mod:`.fields` (``n_jobs``,
``n_completed``, ``avg_jct``, ``p50_jct``, ``p99_jct``, ``max_jct``, ``makespan``,
``utilisation``, ``rounds``, ``restarts``, ``avg_restarts_per_job``, ``solve_seconds_total``,
``solve_seconds_max``, ``wall_seconds``).  The former names ``jobs``, ``jobs_finished``,
``median_jct``, ``median_queueing_delay`` and ``utilization`` (and ``jobs``, ``jobs_finished`` in
each ``by_priority`` class) are deprecated aliases with the same values
(:data:`.fields.PAL_ALIASES`), to be removed after this release.

Definitions (times in seconds):

* **JCT** of a job = completion time − submit time; ``avg_jct`` is the mean over jobs,
  ``p50_jct`` the median and ``p99_jct`` the 99th percentile (numpy's linear interpolation).
* **Queueing delay** = first start − submit time (``avg_``, ``p50_``, ``p99_queueing_delay``).
* **Makespan** = last completion − first submit.
* **Slowdown**: a job's ``mean_slowdown`` is its slowdown averaged over the seconds it ran;
  ``gpu_weighted_slowdown`` averages over all GPU-seconds run.
* **Pipeline jobs** (a trace with a ``pipeline`` column): ``pipeline_jobs``,
  ``pipeline_avg_jct`` and ``gang_avg_jct``, the mean JCT of the jobs with more than one stage
  and of the others; present only when some job has stages.
* **Utilisation** = busy GPU-seconds / (GPUs × makespan), where a job's GPUs are busy from the
  start of each round it is placed in until the round ends or the job completes (time lost to
  a restart counts as busy).
* **Stopped early** (``SimConfig(max_time=...)``, ``pal-opt simulate --max-hours``): the run
  stopped at ``stopped_at`` (its last round's end) with ``n_completed`` < ``n_jobs``; the JCT
  figures and the makespan cover the finished jobs (None when none finished), utilisation the time from the first submit
  to ``stopped_at``.  ``stopped_at`` is None for a run that finished every job it could.
* **Preempted GPU-hours**: each time a running job is left without GPUs, its GPUs × the round
  length in hours; ``preempted_gpu_hours_weighted`` weighs each by ``1 + priority``
  (:mod:`pal_opt.cost.preemption`).  ``by_priority`` gives JCT and preemptions per priority.
* **Failures** (``failures``, only when the run injects them, :mod:`.failures`): failures (GPU and
  server), jobs hit, **lost GPU-hours** (Σ over jobs hit of GPUs × seconds of work since the
  last checkpoint / 3600), GPU-hours out of service, repairs run inside rounds and the jobs
  they re-placed, restarts per job (every restart: moves, resumptions and restarts after a
  failure) and failure restarts per job (times a failure hit the job), mean and max.
* **Restarts**: ``restarts`` sums every job's restarts (as above, with or without failures);
  ``avg_restarts_per_job`` = ``restarts`` / ``n_jobs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..options import require_type
from .fields import CLASS_ALIASES, PAL_ALIASES, with_aliases
from .records import JobRecord, SimulationResult

__all__ = ["summarize"]


#: Where a :class:`~pal_opt.simulate.records.SimulationResult` comes from, for the message about an
#: argument that is not one.
SIM_HINT = " (pal_opt.simulate.simulate)"


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def _preemption_figures(jobs: Sequence[JobRecord]) -> dict[str, Any]:
    """Preempted GPU-hours (each preemption: the job's GPUs × the round's hours), unweighted and
    weighted by ``1 + priority`` (:mod:`pal_opt.cost.preemption`), and per priority class the
    jobs (``n_jobs``), finished jobs (``n_completed``), average and p99 JCT and preemptions."""
    by: dict[int, list[JobRecord]] = {}
    for j in jobs:
        by.setdefault(j.priority, []).append(j)
    classes: dict[str, Any] = {}
    for p in sorted(by):
        jct = np.array([j.jct for j in by[p] if j.jct is not None], dtype=np.float64)
        classes[str(p)] = with_aliases({
            "n_jobs": len(by[p]), "n_completed": int(jct.size),
            "avg_jct": float(jct.mean()) if jct.size else None, "p99_jct": _pct(jct, 99),
            "preemptions": int(sum(j.preemptions for j in by[p])),
            "preempted_gpu_hours": float(sum(j.preempted_gpu_hours for j in by[p])),
        }, CLASS_ALIASES)
    return {
        "preempted_gpu_hours": float(sum(j.preempted_gpu_hours for j in jobs)),
        "preempted_gpu_hours_weighted": float(sum((1 + j.priority) * j.preempted_gpu_hours for j in jobs)),
        "by_priority": classes,
    }


def _pipeline_figures(result: SimulationResult) -> dict[str, Any]:
    """Mean JCT of the pipeline jobs and of the gangs; nothing when no job has stages."""
    if not any(j.stages > 1 for j in result.jobs):
        return {}
    done = [(j.stages, j.jct) for j in result.jobs if j.jct is not None]
    pipe = [jct for stages, jct in done if stages > 1]
    gang = [jct for stages, jct in done if stages == 1]
    return {
        "pipeline_jobs": sum(j.stages > 1 for j in result.jobs),
        "pipeline_avg_jct": float(np.mean(pipe)) if pipe else None,
        "gang_avg_jct": float(np.mean(gang)) if gang else None,
    }


def summarize(result: SimulationResult) -> dict[str, Any]:
    """The headline figures of ``result`` (see the module docstring for definitions), under the
    shared names of :mod:`.fields`, then the deprecated aliases."""
    require_type(result, SimulationResult, "result", SIM_HINT)
    jobs = result.jobs
    jct = np.array([j.jct for j in jobs if j.jct is not None], dtype=np.float64)
    qd = np.array([j.queueing_delay for j in jobs if j.queueing_delay is not None], dtype=np.float64)
    finishes = [j.finish_time for j in jobs if j.finish_time is not None]
    first_submit = min(j.submit_time for j in jobs)
    end = max(finishes) if finishes else first_submit
    makespan = end - first_submit
    busy = float(sum(r.busy_gpu_seconds for r in result.rounds))
    span = makespan if result.stopped_at is None else result.stopped_at - first_submit
    util = busy / (result.num_gpus * span) if span > 0 else 0.0
    solve = np.array([r.solve_seconds for r in result.rounds], dtype=np.float64)
    slow = np.array([j.mean_slowdown for j in jobs if j.mean_slowdown is not None], dtype=np.float64)
    gpu_run = sum(j.demand * j.run_seconds for j in jobs)
    gpu_slow = sum(j.demand * j.slowdown_seconds for j in jobs)
    run_rounds = sum(j.rounds_run for j in jobs)
    span_rounds = sum(j.rounds_spanning for j in jobs)
    restarts = int(sum(j.restarts for j in jobs))
    figures = {
        "n_jobs": len(jobs),
        "n_completed": int(jct.size),
        "avg_jct": float(jct.mean()) if jct.size else None,
        "p50_jct": _pct(jct, 50),
        "p99_jct": _pct(jct, 99),
        "max_jct": float(jct.max()) if jct.size else None,
        "makespan": makespan if finishes else None,  # no job finished: no figure, as for the JCTs
        "end_time": end,
        "stopped_at": result.stopped_at,
        "utilisation": util,
        "busy_gpu_seconds": busy,
        "avg_queueing_delay": float(qd.mean()) if qd.size else None,
        "p50_queueing_delay": _pct(qd, 50),
        "p99_queueing_delay": _pct(qd, 99),
        "mean_job_slowdown": float(slow.mean()) if slow.size else None,
        "gpu_weighted_slowdown": gpu_slow / gpu_run if gpu_run > 0 else None,
        "spanning_round_fraction": span_rounds / run_rounds if run_rounds else 0.0,
        "preemptions": int(sum(j.preemptions for j in jobs)),
        "moves": int(sum(j.moves for j in jobs)),
        "restarts": restarts,
        "avg_restarts_per_job": restarts / len(jobs),
        **_preemption_figures(jobs),
        "rounds": len(result.rounds),
        "fallbacks": int(result.fallbacks),
        "solver_crashes": int(result.solver_crashes),
        "solve_seconds_total": float(solve.sum()),
        "solve_seconds_mean": float(solve.mean()) if solve.size else 0.0,
        "solve_seconds_max": float(solve.max()) if solve.size else 0.0,
        "wall_seconds": float(result.wall_seconds),
        **_pipeline_figures(result),
    }
    if result.failures is not None:
        figures["failures"] = result.failures.summary([j.restarts for j in jobs], [j.failures for j in jobs])
    return with_aliases(figures, PAL_ALIASES)
