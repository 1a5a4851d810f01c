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


# -- objective and repair messages (test audit, 2026-12-07) ----------------------------------------
def test_an_infinite_objective_with_jobs_placed_is_reported() -> None:
    # inf is the objective of an infeasible round, nothing placed; with a job placed it differs
    # from the recomputed cost like any other number (was: every inf objective accepted)
    inst = _round([Job("a", 2, "classA")])
    assert check(inst, {"placements": {}, "objective": math.inf}) == []
    got = violations(inst, {"placements": {"a": [0, 1]}, "objective": math.inf})
    assert [v.kind for v in got] == [Kind.OBJECTIVE]
    assert got[0].message == "objective inf differs from the recomputed round cost 0.0"


def test_a_repair_names_a_remapped_pipeline_as_remapped() -> None:
    # a running pipeline kept on its GPU set with its two stages swapped is a re-map, which the
    # repair rule names as such, apart from a move (was: reported as "moved or left out")
    from pal_opt.model import Pipeline

    jobs = [Job("p", 2, "classA", 0, pipeline=Pipeline((1.0, 2.0), (1, 1)), placement=(0, 1)),
            Job("q", 2, "classA", 1, placement=(2, 3))]
    inst = _round(jobs)
    declared = {"admission": "repair", "jobs_to_terminate": ["q"],
                "info": {"repair": {"in_force": {"p": [0, 1], "q": [2, 3]}, "failed": [3]}}}
    assert check(inst, {"placements": {"p": [0, 1]}, "stages": {"p": [[0], [1]]}, **declared}) == []
    assert check(inst, {"placements": {"p": [1, 0]}, "stages": {"p": [[1], [0]]}, **declared}) == [
        "repair: running job 'p' was re-mapped (its stages on other GPUs of its set) without being listed in "
        "jobs_to_terminate"]
    assert check(inst, {"placements": {"p": [0, 2]}, "stages": {"p": [[0], [2]]}, **declared}) == [
        "repair: running job 'p' was moved or left out without being listed in jobs_to_terminate"]
