"""LP-guided GPU-type lanes (pal_opt.ilp.lanelp): counts that fit, placements on them, solve_ilp."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pal_opt.check import check
from pal_opt.generate import generate_instance, generate_typed_instance
from pal_opt.gputypes import free_per_type
from pal_opt.ilp import solve_ilp
from pal_opt.ilp.backends import SolveOptions, get_backend
from pal_opt.ilp.formulation import build_formulation
from pal_opt.ilp.lanelp import applies, lane_mass, lane_types, lp_lane_start, round_lane_counts
from pal_opt.ilp.solve import prepare_round
from pal_opt.model import GpuState
from pal_opt.result import Status

THROUGHPUT = {"classA": {"aws": 1.0, "rtx": 1.6, "dgx-ext": 2.4}, "classB": {"aws": 1.0, "rtx": 1.2, "dgx-ext": 1.3},
              "classC": {"aws": 1.0, "rtx": 1.1, "dgx-ext": 1.1}, "classD": {"aws": 1.0, "rtx": 1.0, "dgx-ext": 1.05}}
SPECS = ["aws:3x4,rtx:3x4", "aws:2x8,rtx:2x8,dgx-ext:2x8", "aws:4x2,rtx:2x4,dgx-ext:2x4"]


def _form(spec, seed, jobs=14, busy=0.0):
    inst = generate_typed_instance(spec, jobs, seed=seed, busy_fraction=busy, guaranteed_fraction=0.25,
                                   throughput={c: {t: v for t, v in row.items() if t in spec} for c, row in THROUGHPUT.items()})
    s = prepare_round(inst, None, "highs", "prefix", None)
    return inst, build_formulation(inst, s.admitted, factors=s.factors)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(SPECS), busy=st.sampled_from([0.0, 0.25]))
def test_rounded_counts_cover_every_job_and_fit_every_set_of_types(seed, spec, busy):
    inst, form = _form(spec, seed, busy=busy)
    if not applies(form):
        return
    mass = lane_mass(form)
    assert mass is not None
    for t, jt in enumerate(form.types):  # the LP places every job of a type, on its lanes
        assert mass[t, : len(jt.profiles)].sum() == pytest.approx(jt.count, abs=1e-6)
    counts = round_lane_counts(form, mass)
    assert counts is not None  # the LP's own split fits, so some rounding does
    cl = inst.cluster
    free = free_per_type(cl, cl.state == GpuState.FREE)
    kinds = lane_types(form)
    for t, jt in enumerate(form.types):
        assert counts[t, : len(jt.profiles)].sum() == jt.count and (counts >= 0).all()
    for u in range(cl.num_types):  # single types: what is placed there fits
        need = sum(jt.demand * counts[t, k] for t, jt in enumerate(form.types) for k, p in enumerate(jt.profiles)
                   if kinds[p] == (u,))
        assert need <= free[u]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(SPECS))
def test_the_lp_lane_start_is_a_valid_placement_on_the_rounded_lanes(seed, spec):
    inst, form = _form(spec, seed)
    if not applies(form):
        assert lp_lane_start(form) is None
        return
    placement = lp_lane_start(form)
    if placement is None:  # a mixed-type job may find its GPUs taken; then there is no start
        return
    assert set(placement) == {inst.jobs[i].id for i in form.admitted}
    assert check(inst, {"placements": {str(j): list(g) for j, g in placement.items()}, "admission": "given"}) == []
    counts = round_lane_counts(form, lane_mass(form))
    kinds = lane_types(form)
    cl = inst.cluster
    for t, jt in enumerate(form.types):  # each type's jobs lie on its lanes in the rounded numbers
        got = [tuple(np.unique(cl.type_of[cl.positions(placement[inst.jobs[i].id])]).tolist()) for i in jt.jobs]
        for k, p in enumerate(jt.profiles):
            on = sum(1 for g in got if set(g) <= set(kinds[p]))
            if len(kinds[p]) == 1:
                assert on == counts[t, k]


def test_the_backend_lp_values_give_the_same_masses_up_to_ties():
    """HiGHS's LP solution (kept by ``relaxation_bound``) is an optimal LP solution: its masses sum
    per type to the type's jobs like SciPy's, and its objective is the bound."""
    inst, form = _form("aws:2x8,rtx:2x8,dgx-ext:2x8", 3)
    h = get_backend("highs")()
    bound = h.relaxation_bound(form, SolveOptions())
    assert h.relaxation_values is not None and bound is not None
    assert form.objective(h.relaxation_values) == pytest.approx(bound, rel=1e-6, abs=1e-6)
    mass = lane_mass(form, h.relaxation_values)
    assert mass is not None
    assert mass.sum() == pytest.approx(len(form.admitted))


def test_not_without_types():
    inst = generate_instance(4, 4, 6, seed=0)
    s = prepare_round(inst, None, "highs", "prefix", None)
    form = build_formulation(inst, s.admitted, factors=s.factors)
    assert not applies(form) and lp_lane_start(form) is None


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_solve_ilp_prices_the_lp_lane_start_when_the_greedy_start_is_not_within_the_gap(backend):
    """A tight gap on a typed round: the greedy starts are not within it, so every backend prices
    the LP-lane start (from HiGHS's LP solution, whatever the backend) and the answer is
    valid and no worse than any start."""
    inst, _ = _form("aws:2x8,rtx:2x8,dgx-ext:2x8", 4, jobs=20)
    res = solve_ilp(inst, backend=backend, gap=1e-6, time_limit=20)
    assert check(inst, res) == []
    assert res.status in (Status.OPTIMAL, Status.FEASIBLE)
    starts = [v for k, v in res.info.items() if k.startswith("start_") and k.endswith("_objective")]
    assert "start_packing-lp_objective" in res.info
    assert res.objective <= min(starts) + 1e-6


def test_typed_rounds_take_the_lp_bound_from_highs_under_every_backend():
    """With GPU types the round program's LP relaxation is HiGHS's whatever the backend
    (``PROGRAM_LP_OWN_MAX_ENTRIES``): CP-SAT and CBC report HiGHS's bound, named in
    ``info["program_relaxation"]``, and it is at most the exact optimum."""
    inst, _ = _form("aws:2x8,rtx:2x8,dgx-ext:2x8", 4, jobs=20)
    exact = solve_ilp(inst, backend="highs")
    assert exact.status == Status.OPTIMAL
    got = {b: solve_ilp(inst, backend=b, gap=0.5, time_limit=20).info for b in ("highs", "cpsat", "cbc")}
    for b, info in got.items():
        assert info["program_relaxation"] == "highs", b
        assert info["relaxation_bound"] == got["highs"]["relaxation_bound"], b
        assert info["relaxation_bound"] <= exact.objective + 1e-9
    # GLOP's own bound differs in the last digits: the one reported is not GLOP's
    s = prepare_round(inst, None, "cpsat", "prefix", None)
    form = build_formulation(inst, s.admitted, factors=s.factors)
    glop = get_backend("cpsat")().relaxation_bound(form, SolveOptions())
    assert glop is not None and glop != got["cpsat"]["relaxation_bound"]
    assert glop == pytest.approx(got["cpsat"]["relaxation_bound"], rel=1e-6)


def test_untyped_small_rounds_keep_the_backends_own_lp_solver():
    inst = generate_instance(4, 4, 6, seed=0)
    for b, lp in (("highs", "HiGHS"), ("cpsat", "GLOP"), ("cbc", "CLP")):
        res = solve_ilp(inst, backend=b, gap=0.5)
        assert res.info["program_relaxation"] == b
        # the note names the LP solver that ran, not the backend that did not (diff review)
        assert res.message == f"{b} not run: the start placement is within the gap of the LP bound (solved by {lp})"


def test_every_backend_gets_the_same_lp_lane_start():
    """HiGHS's LP solution gives the LP-lane start for every backend, so its price is the same."""
    inst, _ = _form("aws:2x8,rtx:2x8,dgx-ext:2x8", 4, jobs=20)
    prices = {b: solve_ilp(inst, backend=b, gap=1e-6, time_limit=20).info.get("start_packing-lp_objective")
              for b in ("highs", "cpsat", "cbc")}
    assert prices["highs"] is not None
    assert prices["cpsat"] == prices["highs"] and prices["cbc"] == prices["highs"]
