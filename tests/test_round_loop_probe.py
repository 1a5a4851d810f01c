"""What a probe acting as a scheduler author found in a 200-round loop (2026-12-07): each test
fails on the code before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

import pal_opt
from pal_opt import Cluster, RoundPolicy
from pal_opt.ilp.backends import available_backends

QUEUE = [{"id": "a", "demand": 4, "class": "classA", "placement": [3, 2, 1, 0]},
         {"id": "b", "demand": 2, "class": "classA", "placement": [6, 4]},
         {"id": "c", "demand": 4, "class": "classA"}]


def _round(restart_cost: float = 300.0) -> pal_opt.RoundInstance:
    cluster = Cluster.uniform(4, 4, {"classA": [1.0] * 16})
    return pal_opt.make_instance(cluster, QUEUE, restart_cost=restart_cost)


CASES = [("ilp", {"backend": b}) for b in available_backends()] + [("packed-sticky", {}), ("pal", {})]


@pytest.mark.parametrize(("method", "options"), CASES, ids=[f"{m}-{o.get('backend', '')}" for m, o in CASES])
def test_a_running_job_kept_on_its_gpus_gets_them_back_in_the_order_given(method: str, options: dict) -> None:
    """A loop tells "goes on running" by ``result.placements[j] == job.placement``; the integer
    program (and PAL) gave a kept job's GPUs back sorted, which read as a move that
    ``jobs_to_terminate`` did not list (28 such rounds out of 200 in the probe's HiGHS loop)."""
    inst = _round()
    result = pal_opt.solve(inst, method, **options)
    kept = [j.id for j in inst.jobs if j.placement is not None and j.id not in result.jobs_to_terminate]
    assert kept == (["a"] if method == "pal" else ["a", "b"])  # PAL is not sticky: it moves b
    for j in inst.jobs:
        if j.id in kept:
            assert result.placements[j.id] == j.placement
    assert pal_opt.check(inst, result) == []


def test_a_repair_gives_the_jobs_it_keeps_their_gpus_in_the_order_given() -> None:
    """The repair round, and the next round of the policy, keep the unaffected job as given."""
    policy = RoundPolicy("ilp")
    first = policy.place(_round())
    assert first.placements["a"] == (3, 2, 1, 0)
    fixed = policy.repair([6])
    assert fixed.placements["a"] == (3, 2, 1, 0)
    assert 6 not in fixed.placements["b"] and fixed.jobs_to_terminate == ("b",)


def test_under_a_restart_cost_a_start_keeps_every_running_job_that_can_stay() -> None:
    """A round of the probe's 256-GPU loop (restart_cost 10 s, 60 s rounds, 18 jobs running,
    2 GPUs failed) whose 2 s time limit left no time for the program: the answer was the
    cheapest start, ``packing-keep``, which moved 8 running jobs at a round cost of 111.5, when
    keeping every running job and packing the rest costs 86.0 (the optimum is 85.1).  The
    ``packing-stay`` start is that placement."""
    from pal_opt.binning import binned_factors
    from pal_opt.cost import evaluate
    from pal_opt.ilp import build_formulation
    from pal_opt.ilp.heuristic import start_placements
    from pal_opt.ilp.solve import resolve_admission

    inst = pal_opt.load_instance(Path(__file__).parent / "data" / "loop_round_restart.json")
    fac = binned_factors(inst.cluster, inst.params.binning)
    admitted, _ = resolve_admission(inst, "prefix", None)
    starts = start_placements(build_formulation(inst, admitted, factors=fac))
    cost = {k: evaluate(inst, p, fac).cost for k, p in starts.items()}
    sticky = pal_opt.solve(inst, "packed-sticky")
    assert sticky.jobs_to_terminate == () and len(sticky.placements) == len(admitted)
    assert min(cost.values()) <= sticky.objective + 1e-9
    assert cost["packing-stay"] < cost["packing-keep"]
    for placement in starts.values():
        doc = {"placements": {str(k): list(v) for k, v in placement.items()}, "admission": "prefix"}
        assert pal_opt.check(inst, doc) == []
