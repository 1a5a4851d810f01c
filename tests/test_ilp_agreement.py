"""Every backend reaches the same optimum, which equals exhaustive enumeration on tiny rounds.

Real solvers, random rounds (``ilp_rounds.rounds``: ≤ 16 GPUs, uneven servers, sometimes racks,
busy and failed GPUs, several classes, running jobs and restart costs).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ilp_rounds import brute_force, count_assignments, rounds

from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.ilp import available_backends, solve_ilp
from pal_opt.ilp.solve import resolve_admission
from pal_opt.result import Status

BACKENDS = ("highs", "cpsat", "cbc")
#: Relative tolerance on the geometric-mean slowdown (CP-SAT's rounding is ≤ 1e-7 of it).
AGREE = 1e-6


def _needs_all() -> None:
    missing = [b for b in BACKENDS if b not in available_backends()]
    if missing:
        pytest.skip(f"backends not installed: {', '.join(missing)}")


def _valid(inst, r) -> None:
    assert check(inst, r) == []
    used = [g for gs in r.placements.values() for g in gs]
    assert len(used) == len(set(used))
    for jid, gs in r.placements.items():
        job = inst.job_by_id[jid]
        assert len(gs) == job.demand
        assert all(inst.cluster.state[inst.cluster.position[g]] == 0 for g in gs)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(rounds())
def test_backends_agree_prefix_and_backfill(inst):
    _needs_all()
    for mode in ("prefix", "backfill"):
        admitted, _ = resolve_admission(inst, mode, None)
        demand = sum(inst.jobs[i].demand for i in admitted)
        results = {b: solve_ilp(inst, backend=b, admission=mode) for b in BACKENDS}
        for b, r in results.items():
            assert r.status == Status.OPTIMAL, (b, mode, r.message)
            assert r.admission == mode and r.backend == b
            _valid(inst, r)
            assert r.bound is not None and r.bound <= r.objective + 1e-9
        ref = results["highs"].objective
        for b, r in results.items():
            rel = abs(math.expm1((r.objective - ref) / max(demand, 1)))
            assert rel <= AGREE, (b, mode, r.objective, ref)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(rounds(max_gpus=8, max_jobs=5, max_demand=4), st.sampled_from(["prefix", "backfill"]))
def test_optimum_equals_brute_force(inst, mode):
    admitted, _ = resolve_admission(inst, mode, None)
    if count_assignments(inst, admitted) > 50_000:
        return
    fac = binned_factors(inst.cluster, "none")
    best, best_placement = brute_force(inst, admitted, fac)
    r = solve_ilp(inst, admission=mode)
    assert r.status == Status.OPTIMAL
    assert r.objective == pytest.approx(best, abs=1e-9), (r.placements, best_placement)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(rounds(max_gpus=8, max_jobs=6, max_demand=4), st.sampled_from(BACKENDS))
def test_optimum_equals_brute_force_every_backend(inst, backend):
    if backend not in available_backends():
        pytest.skip(f"{backend} not installed")
    admitted, _ = resolve_admission(inst, "prefix", None)
    if count_assignments(inst, admitted) > 200_000:
        return
    fac = binned_factors(inst.cluster, "none")
    best, _ = brute_force(inst, admitted, fac)
    r = solve_ilp(inst, backend=backend)
    assert r.status == Status.OPTIMAL
    demand = sum(inst.jobs[i].demand for i in admitted)
    assert abs(math.expm1((r.objective - best) / max(demand, 1))) <= AGREE
