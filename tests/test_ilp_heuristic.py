"""Start placements (PAL's greedy and the packing greedy) are valid placements of the admitted jobs."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ilp_rounds import rounds

from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import evaluate
from pal_opt.generate import generate_instance
from pal_opt.ilp import build_formulation, encode
from pal_opt.ilp.heuristic import packing_greedy, start_placements
from pal_opt.ilp.solve import resolve_admission


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(rounds(), st.sampled_from(["prefix", "backfill"]))
def test_start_placements_are_valid_and_encodable(inst, mode):
    fac = binned_factors(inst.cluster, "none")
    admitted, _ = resolve_admission(inst, mode, None)
    form = build_formulation(inst, admitted, factors=fac)
    starts = start_placements(form)
    assert "packing" in starts
    if inst.params.restart_cost > 0 and any(inst.jobs[i].placement for i in admitted):
        assert "packing-keep" in starts
    for placement in starts.values():
        assert set(placement) == {inst.jobs[i].id for i in admitted}
        doc = {"placements": {str(k): list(v) for k, v in placement.items()}, "admission": mode}
        assert check(inst, doc) == []
        x = encode(form, placement)
        assert form.is_feasible(x)
        assert abs(form.objective(x) - evaluate(inst, placement, fac).cost) < 1e-9


def test_packing_greedy_keeps_servers_whole_for_small_gangs():
    """On a 256-GPU round of 8-GPU servers the packing greedy beats PAL's class-ordered walk
    (PAL scatters large gangs and leaves small ones without a whole server)."""
    inst = generate_instance(32, 8, 200, seed=1)
    fac = binned_factors(inst.cluster)
    form = build_formulation(inst, factors=fac)
    starts = start_placements(form)
    assert evaluate(inst, starts["packing"], fac).cost < evaluate(inst, starts["pal"], fac).cost
    assert packing_greedy(form) == starts["packing"]  # deterministic
