"""Rules of pal_opt/hetero/policy.py that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

import numpy as np
import pytest

from pal_opt.hetero.configs import PAPER_CLUSTER
from pal_opt.hetero.goodput import JobKind
from pal_opt.hetero.policy import SiaParams, SiaPolicy
from pal_opt.hetero.profiles import Application
from pal_opt.hetero.simjob import SimJob
from pal_opt.hetero.workload import WorkloadJob

TYPES = [t.name for t in PAPER_CLUSTER]



def _rigid(app: Application, replicas: int = 4) -> SimJob:
    return SimJob(0, WorkloadJob("cifar10-0", 0.0, app.name, replicas, 2048, JobKind.RIGID, 2), app, TYPES)


def test_a_rigid_job_that_has_not_run_a_penalty_s_worth_is_not_discouraged(cifar10: Application) -> None:
    app = cifar10
    job = _rigid(app)
    penalty = app.settings.restart_penalty
    job.num_restarts = 1
    job.attained_service = penalty / 2  # it ran, but less than the penalty
    assert SiaPolicy(PAPER_CLUSTER, SiaParams())._factor(job, now=10 * penalty) == 1.0


def test_a_rigid_job_s_goodput_is_its_gpu_count_on_its_slowest_type(cifar10: Application) -> None:
    app = cifar10
    job = _rigid(app, replicas=4)
    costs = SiaPolicy(PAPER_CLUSTER, SiaParams()).rigid_costs([job], now=60.0)
    finite = costs[0][costs[0] < 100]
    assert finite.size > 0
    # the slowest type's goodput is the 4 GPUs, so its cost is round(4 ** -0.5, 2)
    assert float(finite.max()) == pytest.approx(round(4 ** -0.5, 2))
    assert np.all(finite <= 0.5 + 1e-6)


def test_rounds_not_solved_to_optimality_are_counted() -> None:
    from pal_opt.hetero.policy import RoundStats
    from pal_opt.hetero.round import RoundDecision

    stats = RoundStats()
    empty = np.zeros(0, dtype=np.int64)
    stats.add(RoundDecision(empty, empty, 0.0, "feasible", 1.5, "highs"))
    stats.add(RoundDecision(empty, empty, 0.0, "optimal", 0.5, "highs"))
    assert (stats.rounds, stats.not_optimal, stats.max_solve_seconds) == (2, 1, 1.5)


def test_a_rigid_job_that_restarted_often_is_discouraged_from_moving(cifar10: Application) -> None:
    app = cifar10
    job = _rigid(app)
    penalty = app.settings.restart_penalty
    job.num_restarts, job.attained_service = 5, 100 * penalty
    policy = SiaPolicy(PAPER_CLUSTER, SiaParams())
    fresh = policy.rigid_costs([job], now=10 * penalty)[0]
    prev = int(np.flatnonzero(fresh < 100)[0])
    policy.previous = {job.index: prev}
    held = policy.rigid_costs([job], now=10 * penalty)[0]
    assert held[prev] == fresh[prev]  # its own type keeps its cost
    others = [t for t in np.flatnonzero(fresh < 100) if t != prev]
    assert others and all(held[t] > fresh[t] for t in others)  # moving costs more
