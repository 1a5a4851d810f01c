"""Rules of pal_opt/result.py (what every method returns, and the placement file it writes) that
no test held: each test here fails on a one-rule change (a mutation audit, 2026-12-07) that the
rest of the suite let pass."""

from __future__ import annotations

import json

import numpy as np

from pal_opt.cost import CostTerm, register_cost_term, unregister_cost_term
from pal_opt.model import Cluster, Job, RoundInstance
from pal_opt.result import PlacementResult, Status, priced_result


def _result(**fields: object) -> PlacementResult:
    base: dict[str, object] = dict(placements={"a": (0, 1), 7: (2,)}, method="ilp", status=Status.FEASIBLE,
                                   objective=1.5, geomean_slowdown=1.2, gpus_used=3, solve_seconds=0.0,
                                   admission="queue-order")
    return PlacementResult(**{**base, **fields})  # type: ignore[arg-type]


def test_to_dict_counts_the_jobs_placed_and_lists_the_unplaceable_ones() -> None:
    """``jobs_placed`` is the number of placements (not one less), and ``unplaceable`` a list of
    ``{"job", "reason"}`` objects in the round's order (not the ``{job: reason}`` mapping, whose
    keys JSON would turn into text: job 9 and job "9" would be one)."""
    d = _result(unplaceable={9: "needs 9 GPUs but the cluster has 8", "9": "class 'x' has no factors"}).to_dict()
    assert d["jobs_placed"] == 2
    assert d["unplaceable"] == [{"job": 9, "reason": "needs 9 GPUs but the cluster has 8"},
                                {"job": "9", "reason": "class 'x' has no factors"}]
    assert _result(placements={}).to_dict()["jobs_placed"] == 0


def test_to_dict_writes_an_infinite_bound_as_null() -> None:
    """JSON has no infinity: every float figure that may be infinite is written as null, the
    bound too (a solve with no proven bound), so that ``json.dumps(..., allow_nan=False)`` works."""
    d = _result(bound=float("-inf"), gap=float("inf"), objective=float("inf")).to_dict()
    assert (d["bound"], d["gap"], d["objective"]) == (None, None, None)
    json.dumps(d, allow_nan=False)


def test_to_json_of_a_round_with_nothing_placed_is_jsons_own() -> None:
    """With no placement the text is ``json.dumps``' (``"placements": {}``), not the hand-laid
    placements' ``{`` and ``}`` on lines of their own around nothing."""
    r = _result(placements={}, gpus_used=0)
    assert r.to_json() == json.dumps(r.to_dict(), indent=2)
    assert '"placements": {}' in r.to_json()
    assert r.to_json(indent=4) == json.dumps(r.to_dict(), indent=4)


def test_to_json_escapes_a_job_id_as_json_does() -> None:
    """The placements are laid out by hand for speed; a job id with a quote or a backslash is
    still written as JSON writes it (``json.dumps`` of the id), so the text reads back."""
    r = _result(placements={'say "hi"\\': (0,), "b": ()})
    assert json.loads(r.to_json()) == r.to_dict()
    assert r.to_json() == json.dumps(r.to_dict(), indent=2)


class _OnServerZero(CostTerm):
    """A placed-only term (no ``slots``): -1 per GPU on server 0, which no program sees."""

    name = "on_server_zero"

    def placed(self, instance: RoundInstance, job: Job, pos: np.ndarray, level: int, max_factor: float) -> float:
        return -float(np.sum(instance.cluster.server_of[pos] == 0))


def _round() -> RoundInstance:
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4},
                             [0, 0, 1, 0])  # GPU 2 busy
    return RoundInstance(cl, (Job("run", 1, "classA", placement=(3,)), Job("new", 1, "classA")))


def test_priced_result_takes_the_jobs_to_terminate_it_is_given() -> None:
    """``jobs_to_terminate_`` (a greedy policy's own list, :func:`pal_opt.greedy_method`) is the
    result's as given; only without it are the running jobs that lose their GPUs derived."""
    inst = _round()
    factors = {"classA": np.ones(4)}
    given = priced_result(inst, {"new": (0,), "run": (1,)}, factors, method="pal", status=Status.FEASIBLE,
                          admission="pal-order", solve_seconds=0.0, jobs_to_terminate_=())
    assert given.jobs_to_terminate == ()
    derived = priced_result(inst, {"new": (0,), "run": (1,)}, factors, method="pal", status=Status.FEASIBLE,
                            admission="pal-order", solve_seconds=0.0)
    assert derived.jobs_to_terminate == ("run",)


def test_an_unproven_answer_keeps_its_message_before_the_reason() -> None:
    """A bound priced with a term the program cannot see is set aside, and the reason is added
    to the solver's message after ``; `` (a time-limit note must not be lost), not put in its
    place."""
    inst = _round()
    register_cost_term(_OnServerZero())
    try:
        res = priced_result(inst, {"new": (0,), "run": (3,)}, {"classA": np.ones(4)}, method="ilp",
                            status=Status.OPTIMAL, admission="queue-order", solve_seconds=0.0, bound=0.0,
                            gap=0.0, message="stopped at the time limit")
    finally:
        unregister_cost_term("on_server_zero")
    assert res.status == Status.FEASIBLE and res.bound is None and res.info["program_bound"] == 0.0
    assert res.message.startswith("stopped at the time limit; cost term(s) 'on_server_zero' give no slots")
