"""The headline figures of a simulation (:func:`summarize`).

Definitions (times in seconds):

* **JCT** of a job = completion time − submit time; ``avg_jct`` is the mean over jobs and
  ``p99_jct`` the 99th percentile (numpy's linear interpolation).
* **Queueing delay** = first start − submit time.
* **Makespan** = last completion − first submit.
* **Slowdown**: a job's ``mean_slowdown`` is its slowdown averaged over the seconds it ran;
  ``gpu_weighted_slowdown`` averages over all GPU-seconds run.
* **Utilisation** = busy GPU-seconds / (GPUs × makespan), where a job's GPUs are busy from the
  start of each round it is placed in until the round ends or the job completes (time lost to
  a restart counts as busy).
* **JCT by priority** (``jct_by_priority``): per value of the trace's optional ``priority``
  column (0 when absent), keyed by its text: jobs, jobs finished, mean, median and p99 JCT.
* **Failures** (``failures``, only when the run injects them, :mod:`.failures`): failures (GPU and
  server), jobs hit, **lost GPU-hours** (Σ over jobs hit of GPUs × seconds of work since the
  last checkpoint / 3600), GPU-hours out of service, repairs run inside rounds and the jobs
  they re-placed, restarts per job (every restart: moves, resumptions and restarts after a
  failure) and failure restarts per job (times a failure hit the job), mean and max.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .records import SimulationResult

__all__ = ["summarize"]


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def jct_by_priority(result: SimulationResult) -> dict[str, dict[str, Any]]:
    """Per priority class (ascending): jobs, jobs finished, mean, median and p99 JCT (s)."""
    out: dict[str, dict[str, Any]] = {}
    for p in sorted({j.priority for j in result.jobs}):
        jobs = [j for j in result.jobs if j.priority == p]
        jct = np.array([j.jct for j in jobs if j.jct is not None], dtype=np.float64)
        out[str(p)] = {"jobs": len(jobs), "jobs_finished": int(jct.size),
                       "avg_jct": float(jct.mean()) if jct.size else None,
                       "median_jct": _pct(jct, 50), "p99_jct": _pct(jct, 99)}
    return out


def summarize(result: SimulationResult) -> dict[str, Any]:
    """The headline figures of ``result`` (see the module docstring for definitions)."""
    jobs = result.jobs
    jct = np.array([j.jct for j in jobs if j.jct is not None], dtype=np.float64)
    qd = np.array([j.queueing_delay for j in jobs if j.queueing_delay is not None], dtype=np.float64)
    finishes = [j.finish_time for j in jobs if j.finish_time is not None]
    first_submit = min(j.submit_time for j in jobs)
    end = max(finishes) if finishes else first_submit
    makespan = end - first_submit
    busy = float(sum(r.busy_gpu_seconds for r in result.rounds))
    util = busy / (result.num_gpus * makespan) if makespan > 0 else 0.0
    solve = np.array([r.solve_seconds for r in result.rounds], dtype=np.float64)
    slow = np.array([j.mean_slowdown for j in jobs if j.mean_slowdown is not None], dtype=np.float64)
    gpu_run = sum(j.demand * j.run_seconds for j in jobs)
    gpu_slow = sum(j.demand * j.slowdown_seconds for j in jobs)
    run_rounds = sum(j.rounds_run for j in jobs)
    span_rounds = sum(j.rounds_spanning for j in jobs)
    figures = {
        "jobs": len(jobs),
        "jobs_finished": int(jct.size),
        "avg_jct": float(jct.mean()) if jct.size else None,
        "median_jct": _pct(jct, 50),
        "p99_jct": _pct(jct, 99),
        "max_jct": float(jct.max()) if jct.size else None,
        "makespan": makespan,
        "end_time": end,
        "utilization": util,
        "busy_gpu_seconds": busy,
        "avg_queueing_delay": float(qd.mean()) if qd.size else None,
        "median_queueing_delay": _pct(qd, 50),
        "p99_queueing_delay": _pct(qd, 99),
        "mean_job_slowdown": float(slow.mean()) if slow.size else None,
        "gpu_weighted_slowdown": gpu_slow / gpu_run if gpu_run > 0 else None,
        "spanning_round_fraction": span_rounds / run_rounds if run_rounds else 0.0,
        "preemptions": int(sum(j.preemptions for j in jobs)),
        "moves": int(sum(j.moves for j in jobs)),
        "restarts": int(sum(j.restarts for j in jobs)),
        "rounds": len(result.rounds),
        "fallbacks": int(result.fallbacks),
        "solve_seconds_total": float(solve.sum()),
        "solve_seconds_mean": float(solve.mean()) if solve.size else 0.0,
        "solve_seconds_max": float(solve.max()) if solve.size else 0.0,
        "wall_seconds": float(result.wall_seconds),
        "jct_by_priority": jct_by_priority(result),
    }
    if result.failures is not None:
        figures["failures"] = result.failures.summary([j.restarts for j in jobs], [j.failures for j in jobs])
    return figures
