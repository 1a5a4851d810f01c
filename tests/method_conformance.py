"""The conformance suite every registered placement method must pass (not a test module).

``tests/test_method_conformance.py`` makes one subclass of :class:`MethodConformance` per name in
the method registry when the tests are collected, so a method registered through the public
API is held to the same checks with no edit here (``tests/test_registration.py`` does that).
"""

from __future__ import annotations

import math

import pytest

from pal_opt.check import check
from pal_opt.cost import evaluate
from pal_opt.generate import generate_instance
from pal_opt.methods import get_method
from pal_opt.model import RoundInstance
from pal_opt.result import PlacementResult, Status
from pal_opt.solve import solve

#: Rounds every method places: flat, racked with busy/failed GPUs, and one with running jobs.
ROUNDS = {
    "flat-4x4": dict(nodes=4, gpus_per_node=4, jobs=8, seed=0),
    "racked-8x4": dict(nodes=8, gpus_per_node=4, jobs=14, racks=2, seed=3, busy_fraction=0.1,
                       failed_fraction=0.05, binning="none"),
    "running-6x4": dict(nodes=6, gpus_per_node=4, jobs=10, seed=5, running_fraction=0.4),
}


def _solve(method: str, inst: RoundInstance) -> PlacementResult:
    opts = {"time_limit": 30.0} if get_method(method).exact else {}
    return solve(inst, method, **opts)


class MethodConformance:
    """Checks any method must pass; subclasses set ``method``."""

    method: str

    @pytest.fixture(params=sorted(ROUNDS), scope="class")
    @classmethod
    def round_(cls, request: pytest.FixtureRequest) -> RoundInstance:
        return generate_instance(**ROUNDS[request.param])

    def test_result_is_valid(self, round_: RoundInstance) -> None:
        res = _solve(self.method, round_)
        assert isinstance(res, PlacementResult)
        assert res.method == self.method
        assert check(round_, res) == []

    def test_objective_is_the_cost_model(self, round_: RoundInstance) -> None:
        from pal_opt.binning import binned_factors

        res = _solve(self.method, round_)
        cost = evaluate(round_, res.placements, binned_factors(round_.cluster, res.info["binning"])).cost
        assert math.isclose(res.objective, cost, rel_tol=1e-9, abs_tol=1e-9)
        assert res.gpus_used == sum(round_.job_by_id[j].demand for j in res.placements)

    def test_status_is_honest(self, round_: RoundInstance) -> None:
        res = _solve(self.method, round_)
        if get_method(self.method).exact:
            assert res.status in (Status.OPTIMAL, Status.FEASIBLE, Status.FALLBACK)
            if res.status == Status.OPTIMAL:
                assert res.gap is not None and res.gap <= 1e-6
        else:
            assert res.status == Status.FEASIBLE and res.bound is None

    def test_deterministic(self, round_: RoundInstance) -> None:
        a, b = _solve(self.method, round_), _solve(self.method, round_)
        assert a.placements == b.placements

    def test_backfill_is_valid(self, round_: RoundInstance) -> None:
        if "admission" not in get_method(self.method).options:
            pytest.skip("the method takes no admission option")
        opts = {"time_limit": 30.0} if get_method(self.method).exact else {}
        res = solve(round_, self.method, admission="backfill", **opts)
        assert check(round_, res) == []
        assert res.admission.endswith("backfill")

    def test_empty_queue(self) -> None:
        inst = generate_instance(2, 4, 0, seed=1)
        res = _solve(self.method, inst)
        assert res.placements == {} and check(inst, res) == []

    def test_foreign_option_is_an_error(self) -> None:
        from pal_opt.errors import OptionError
        from pal_opt.options import SolveOptions

        m = get_method(self.method)
        foreign = next(n for n in SolveOptions.names() if n not in m.options)
        value = {"gap": 0.1, "time_limit": 1.0, "backend": "highs", "parts": 2, "threads": 1,
                 "admission": "prefix", "jobs": [0], "warm_start": False, "deterministic": False,
                 "backend_params": {"x": 1}, "seed": 1, "binning": "none"}[foreign]
        with pytest.raises(OptionError, match="do not apply"):
            solve(generate_instance(2, 4, 2, seed=1), self.method, **{foreign: value})
