"""Rules of pal_opt/ilp/preempt.py that no test held (third mutation review)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from pal_opt.binning import binned_factors
from pal_opt.cost import evaluate
from pal_opt.ilp import preempt as preempt_mod
from pal_opt.ilp.backends import (
    BackendSolution,
    SolverStatus,
    get_backend,
    register_backend,
    unregister_backend,
)
from pal_opt.ilp.decode import encode
from pal_opt.ilp.preempt import greedy_start, preempt_stage_program, solve_preempt
from pal_opt.ilp.running import keep_positions
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams
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


# ---- guards the rest of the suite did not reach (coverage of preempt.py, 2026-12-07)
def test_a_running_job_that_cannot_keep_its_gpus_is_placed_by_the_greedy_start() -> None:
    """A strong-scaling job running on 1 of its allowed counts (1, 2), below its demand 2, is a
    kept running job of the plan whose GPUs it cannot keep (:func:`keep_positions` is None for a
    placement of another size than its demand): the greedy start places it anew, at its demand,
    rather than dropping it."""
    c = Cluster.uniform(2, 4, {"classA": [1.0] * 8})
    jobs = (Job("a", 2, "classA", placement=(0,), kind="strong-scaling", allowed_counts=(1, 2)),
            Job("b", 1, "classA", placement=(2,)), Job("hi", 1, "classA", priority=1))
    inst = RoundInstance(c, jobs)
    plan = preempt_plan(inst)
    assert plan.kept == (0, 1) and plan.waiting == (2,) and keep_positions(inst, 0) is None
    start = greedy_start(inst, binned_factors(c, inst.params.binning), plan)
    assert set(start) == {"a", "b", "hi"} and len(start["a"]) == 2 and start["b"] == (2,)


def test_the_stage_program_defaults_to_the_rounds_binning_and_plan() -> None:
    """``preempt_stage_program(instance)`` is the program of the round's own binning (here
    ``"none"``, which keeps factors the default binning would merge) and of
    :func:`preempt_plan` (its optional jobs have drop columns)."""
    c = Cluster.uniform(2, 4, {"classA": [1.0, 1.02, 1.3, 1.6, 1.0, 1.05, 1.4, 2.0]})
    jobs = (Job("run", 3, "classA", placement=(0, 1, 2)), Job("w", 3, "classA", placement=(4, 5, 6)),
            Job("pipe", 3, "classA", priority=1, pipeline=Pipeline((2.0, 1.0), (2, 1))))
    inst = RoundInstance(c, jobs, RoundParams(binning="none"))
    plan = preempt_plan(inst)
    assert plan.optional == (0, 1)  # (2 GPUs free: the pipeline's GPUs come from the running jobs)
    got = preempt_stage_program(inst).program
    want = preempt_stage_program(inst, binned_factors(c, "none"), plan).program
    other = preempt_stage_program(inst, binned_factors(c, "pal-artifact"), plan).program
    assert not np.array_equal(want.c, other.c)  # (the binning shows in the objective)
    assert np.array_equal(got.c, want.c) and got.var_names == want.var_names
    assert (got.A != want.A).nnz == 0 and np.array_equal(got.row_lo, want.row_lo)


@pytest.fixture
def scripted_backend() -> Any:
    """Register a backend (the default one's subclass) whose ``solve`` answers what the test sets
    in ``answer(program)``; yields the class, unregisters it afterwards."""
    base = get_backend()

    class Scripted(base):  # type: ignore[misc, valid-type]
        name = "scripted-preempt-test"
        answer: Any = None

        def solve(self, program: Any, options: Any, start: Any = None) -> BackendSolution:
            return type(self).answer(program)

    register_backend(Scripted)
    try:
        yield Scripted
    finally:
        unregister_backend(Scripted.name)


def _contended() -> RoundInstance:
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    return RoundInstance(c, (Job("a", 2, "classA", placement=(0, 1)), Job("b", 1, "classA", placement=(2,)),
                             Job("hi", 2, "classA", priority=1)))


def test_a_solver_answer_costlier_than_the_greedy_start_is_not_taken(scripted_backend: Any) -> None:
    """The backend returns a solution that preempts a (2 GPUs) rather than b (1 GPU): it costs
    more than the greedy start, which is returned instead (still ``feasible``: the solver proved
    nothing)."""
    inst = _contended()
    factors = binned_factors(inst.cluster, inst.params.binning)
    start = greedy_start(inst, factors, preempt_plan(inst))
    worse = {"b": (2,), "hi": (0, 1)}
    assert evaluate(inst, worse, factors).cost > evaluate(inst, start, factors).cost
    scripted_backend.answer = lambda program: BackendSolution(
        SolverStatus.FEASIBLE, encode(program, worse), None, None, 0.0, message="stopped")
    res = solve_preempt(inst, backend=scripted_backend.name)
    assert res.placements == start == {"a": (0, 1), "hi": (2, 3)}
    assert res.jobs_to_terminate == ("b",) and res.status == Status.FEASIBLE


def test_a_solver_answer_as_cheap_as_the_greedy_start_is_taken(scripted_backend: Any) -> None:
    """At equal cost the solver's answer is the one returned."""
    c = Cluster.uniform(2, 2, {"classA": [1.0] * 4})
    inst = RoundInstance(c, (Job("w", 1, "classA"),))
    start = greedy_start(inst, binned_factors(c, inst.params.binning), preempt_plan(inst))
    other = (2,) if start["w"][0] < 2 else (0,)
    scripted_backend.answer = lambda program: BackendSolution(
        SolverStatus.OPTIMAL, encode(program, {"w": other}), None, None, 0.0)
    res = solve_preempt(inst, backend=scripted_backend.name)
    assert res.placements == {"w": other} and res.status == Status.OPTIMAL


@pytest.mark.parametrize("message, said", [("gave up", "gave up"), ("", "no solution")])
def test_no_solution_without_a_time_limit_is_the_greedy_start_with_the_solvers_word(
        scripted_backend: Any, message: str, said: str) -> None:
    """No time limit, and the backend returns no solution: the answer is the greedy start
    (``fallback``) and the note gives the solver's status and message, not a time limit."""
    inst = _contended()
    scripted_backend.answer = lambda program: BackendSolution(
        SolverStatus.NO_SOLUTION, None, None, None, 0.0, message=message)
    res = solve_preempt(inst, backend=scripted_backend.name)
    assert res.status == Status.FALLBACK and res.placements == {"a": (0, 1), "hi": (2, 3)}
    assert res.info["note"] == f"the greedy start (no-solution: {said})" == res.message
    assert "time_limit_reached" not in res.info
