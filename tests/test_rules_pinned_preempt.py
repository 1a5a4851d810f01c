"""Rules of pal_opt/ilp/preempt.py that no test held (third mutation review)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from pal_opt.binning import binned_factors
from pal_opt.ilp import preempt as preempt_mod
from pal_opt.ilp.backends import SolverStatus
from pal_opt.ilp.preempt import greedy_start, solve_preempt
from pal_opt.model import Cluster, Job, RoundInstance
from pal_opt.priority import preempt_plan
from pal_opt.result import Status


def test_the_greedy_start_evicts_only_what_the_admitted_job_needs() -> None:
    # hi (priority 1) needs 2 GPUs, 1 is free: evicting b (1 GPU) is enough; a keeps its GPUs.
    # (The start is the answer when the solver finds nothing in time.)
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    jobs = (Job("a", 2, "classA", placement=(0, 1)), Job("b", 1, "classA", placement=(2,)),
            Job("hi", 2, "classA", priority=1))
    inst = RoundInstance(c, jobs)
    plan = preempt_plan(inst)
    assert set(plan.optional) == {0, 1}
    start = greedy_start(inst, binned_factors(c, inst.params.binning), plan)
    assert start == {"a": (0, 1), "hi": (2, 3)}


def test_a_solution_the_solver_did_not_prove_is_not_reported_optimal(monkeypatch: pytest.MonkeyPatch) -> None:
    real = preempt_mod.get_backend

    def unproven(name: str | None) -> Any:
        cls = real(name)

        class Stopped(cls):  # type: ignore[misc, valid-type]
            def solve(self, *args: Any, **kwargs: Any) -> Any:
                sol = super().solve(*args, **kwargs)
                return dataclasses.replace(sol, status=SolverStatus.FEASIBLE)

        return Stopped

    monkeypatch.setattr(preempt_mod, "get_backend", unproven)
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    jobs = (Job("a", 2, "classA", placement=(0, 1)), Job("b", 1, "classA", placement=(2,)),
            Job("hi", 2, "classA", priority=1))
    res = solve_preempt(RoundInstance(c, jobs))
    assert res.status == Status.FEASIBLE


def test_the_gap_is_of_the_geometric_mean_slowdown_per_gpu_placed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = preempt_mod.get_backend

    def loose(name: str | None) -> Any:
        cls = real(name)

        class LooseBound(cls):  # type: ignore[misc, valid-type]
            def solve(self, *args: Any, **kwargs: Any) -> Any:
                sol = super().solve(*args, **kwargs)
                return dataclasses.replace(sol, status=SolverStatus.FEASIBLE, bound=sol.objective - 1.0)

        return LooseBound

    monkeypatch.setattr(preempt_mod, "get_backend", loose)
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    jobs = (Job("a", 2, "classA", placement=(0, 1)), Job("b", 1, "classA", placement=(2,)),
            Job("hi", 2, "classA", priority=1))
    res = solve_preempt(RoundInstance(c, jobs))
    assert res.bound is not None and res.gap is not None and res.gpus_used == 4
    assert res.gap == pytest.approx(math.expm1((res.objective - res.bound) / 4))
