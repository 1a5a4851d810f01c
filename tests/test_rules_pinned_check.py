"""The checker's rules that no test held (a mutation review of :mod:`pal_opt.check`, 2026-12-07).

Each test fails on a one-rule change to the checker that the suite let pass (named in the
test's comment) and passes on the checker as it is.  The expected reports follow from the rules
in the module's docstring, not from running the checker.
"""

from __future__ import annotations

import math

from pal_opt.check import Kind, check, violations
from pal_opt.cost import evaluate
from pal_opt.model import Cluster, Job, RoundInstance, RoundParams
from pal_opt.result import PlacementResult, Status


def _round(jobs) -> RoundInstance:
    """Two servers of two GPUs (0-3), all factors 1."""
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4})
    return RoundInstance(cl, tuple(jobs), RoundParams(binning="none"))


# -- backfill --------------------------------------------------------------------------------------
def test_backfill_without_sticky_counts_a_running_job_left_out_as_waiting() -> None:
    # queue-order-backfill places from scratch: a running job left out that fits the 4 free GPUs
    # breaks the rule even when the result does not say it terminated it (was: only sticky's
    # "waiting" test, placement None or terminated, applied to every backfill rule)
    inst = _round([Job("r", 2, "classA", 0, placement=(0, 1))])
    got = check(inst, {"placements": {}, "admission": "queue-order-backfill"})
    assert got == ["queue-order-backfill: job 'r' needs 2 GPUs and 4 are still free, but it was not placed"]


def test_backfill_admission_is_the_admitted_set() -> None:
    # "backfill" (like "prefix") must place exactly admit()'s set: job b (2 GPUs) fits beside a
    # (was: only "prefix" compared the sets, "backfill" was not checked at all)
    inst = _round([Job("a", 2, "classA", 0), Job("b", 2, "classA", 1)])
    got = check(inst, {"placements": {"a": [0, 1]}, "admission": "backfill"})
    assert got == ["backfill: admitted set differs (missing ['b'], extra [])"]


# -- the reported objective --------------------------------------------------------------------------
def test_objective_a_hundredth_of_a_percent_off_is_reported() -> None:
    # "equals the cost recomputed": rel. tolerance 1e-6 (was: 1e-3 let 0.01 % through)
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0, 1.2, 1.0, 1.0]})
    inst = RoundInstance(cl, (Job("a", 2, "classA"),), RoundParams(binning="none"))
    cost = evaluate(inst, {"a": (0, 1)}, cl.factors).cost
    got = violations(inst, {"placements": {"a": [0, 1]}, "objective": cost * 1.0001})
    assert [v.kind for v in got] == [Kind.OBJECTIVE]


def test_objective_of_a_round_that_places_nothing_is_checked() -> None:
    # r (priority 0) is left out and pays the preemption charge of pal_opt.cost.preemption:
    # 100 per GPU-hour x 2 GPUs x a 360 s round = 20, so the round costs 20 with nothing placed
    # and an objective of 0 is wrong (was: not checked when nothing was placed)
    inst = _round([Job("r", 2, "classA", 0, placement=(0, 1))])
    assert inst.params.round_length == 360.0
    bare = {"placements": {}, "admission": "given", "jobs_to_terminate": ["r"]}
    assert check(inst, {**bare, "objective": 20.0}) == []
    assert [v.kind for v in violations(inst, {**bare, "objective": 0.0})] == [Kind.OBJECTIVE]


def test_an_infeasible_result_reporting_an_infinite_objective_is_valid() -> None:
    # an exact method that finds a round infeasible places nothing and reports objective inf
    inst = _round([Job("a", 8, "classA")])
    res = PlacementResult({}, "ilp", Status.INFEASIBLE, math.inf, math.nan, 0, 0.0, "prefix")
    assert check(inst, res) == [] and check(inst, res.to_dict()) == []


def test_a_result_naming_an_unknown_binning_is_priced_with_the_rounds_own() -> None:
    # info["binning"] the checker does not know falls back to the round's binning ("none" here)
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0, 1.2, 1.0, 1.0]})
    inst = RoundInstance(cl, (Job("a", 2, "classA"),), RoundParams(binning="none"))
    cost = evaluate(inst, {"a": (0, 1)}, cl.factors).cost
    assert check(inst, {"placements": {"a": [0, 1]}, "objective": cost, "info": {"binning": "octiles"}}) == []


# -- a bare {job id: [GPU ids]} mapping ------------------------------------------------------------
def test_a_bare_mapping_may_place_a_job_named_like_a_result_field() -> None:
    # a job whose id is "status" is a job, not a result field
    inst = _round([Job("status", 2, "classA")])
    assert check(inst, {"status": [0, 1]}) == []
