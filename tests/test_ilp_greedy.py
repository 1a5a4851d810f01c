"""The program is never worse than a greedy policy on the set of jobs that policy placed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ilp_rounds import rounds

from pal_opt.admission import admit, class_rank
from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import evaluate
from pal_opt.generate import generate_instance
from pal_opt.ilp import available_backends
from pal_opt.ilp.backends.cpsat import OBJECTIVE_PRECISION
from pal_opt.policies.pal import place_sequence
from pal_opt.result import Status
from pal_opt.solve import solve

POLICIES = ("pal", "pmfirst", "packed")
BACKENDS = ("highs", "cpsat", "cbc")


def _tolerance(backend: str, n_jobs: int) -> float:
    # CP-SAT optimises costs rounded to OBJECTIVE_PRECISION per job; the others are exact.
    return 1e-9 + (n_jobs * OBJECTIVE_PRECISION if backend == "cpsat" else 0.0)


def _assert_valid(inst, r) -> None:
    assert check(inst, r) == [], check(inst, r)
    seen: set[int] = set()
    for jid, gpus in r.placements.items():
        assert len(gpus) == len(set(gpus)) == inst.job_by_id[jid].demand
        for g in gpus:
            assert g not in seen
            seen.add(g)
            assert inst.cluster.state[inst.cluster.position[g]] == 0


def _compare(inst, policy: str, backend: str) -> None:
    greedy = solve(inst, policy)
    ids = list(greedy.placements)
    r = solve(inst, method="ilp", backend=backend, jobs=ids)
    assert r.admission == "given"
    assert set(r.placements) == set(ids)
    assert r.status == Status.OPTIMAL
    assert r.objective <= greedy.objective + _tolerance(backend, len(ids)), (policy, backend)
    _assert_valid(inst, r)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", range(3))
def test_never_worse_than_greedy_on_generated_rounds(seed, policy, backend):
    if backend not in available_backends():
        pytest.skip(f"{backend} not installed")
    inst = generate_instance(8, 4, 24, seed=seed, busy_fraction=0.15, failed_fraction=0.05, running_fraction=0.2)
    _compare(inst, policy, backend)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(rounds(), st.sampled_from(POLICIES))
def test_never_worse_than_greedy_on_random_rounds(inst, policy):
    _compare(inst, policy, "highs")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["prefix", "backfill"])
def test_never_worse_than_pal_on_the_admitted_set(backend, mode):
    """PAL's placement of the admitted jobs (its class-sorted order) is the warm start and the
    fallback, and the program's optimum is at most its cost."""
    if backend not in available_backends():
        pytest.skip(f"{backend} not installed")
    inst = generate_instance(16, 4, 40, seed=3, busy_fraction=0.1)
    factors = binned_factors(inst.cluster)
    admitted = admit(inst, mode)
    order = sorted(admitted, key=lambda i: class_rank(inst.jobs[i].perfclass))
    pal = place_sequence(inst, factors, order)
    assert len(pal) == len(admitted)
    r = solve(inst, method="ilp", backend=backend, admission=mode)
    assert r.objective <= evaluate(inst, pal, factors).cost + _tolerance(backend, len(admitted))
    _assert_valid(inst, r)
