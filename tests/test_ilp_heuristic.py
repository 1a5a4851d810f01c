"""Start placements (PAL's greedy and the packing greedy) are valid placements of the admitted jobs."""

from __future__ import annotations

import math

import pytest
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


def test_with_gpu_types_a_tie_goes_to_the_server_the_others_value_least():
    """Servers 0 and 1 (type a) are equally good for class D, whose factors are flat; server 0 is
    fast for class A and server 1 slow.  The packing greedy places the 4-GPU class-D job first
    (queue order on equal demand); of the two tied servers it takes the one worth less to the
    other profiles (server 1), so the class-A job gets the fast server."""
    import numpy as np

    from pal_opt.model import Cluster, Job, RoundInstance, RoundParams

    fa = [1.0] * 4 + [2.0] * 4 + [1.0] * 4
    cl = Cluster.from_arrays(np.arange(12), [0] * 4 + [1] * 4 + [2] * 4,
                             {"classA": fa, "classD": [1.0] * 12}, gpu_types="aaaaaaaabbbb",
                             throughput={"classA": {"a": 1.0}, "classD": {"a": 1.0}})
    jobs = (Job(id="d", demand=4, perfclass="classD"), Job(id="a", demand=4, perfclass="classA", position=1))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"), "worth")
    form = build_formulation(inst, [0, 1], factors=binned_factors(cl, "none"))
    placement = packing_greedy(form)
    assert placement == {"d": (4, 5, 6, 7), "a": (0, 1, 2, 3)}


def test_on_racks_the_large_gangs_first_start_is_offered_and_can_be_cheaper():
    """Small jobs placed first take the fast GPUs of both racks (servers 0 and 2); the 8-GPU gang
    left with a slow server in each rack pays the cross-rack penalty (8 ln(1.2 x 2.5) = 8.79).
    Placed first, it takes one rack (8 ln(1.2 x 1.7) = 5.70) and the small jobs the rest (0.73)."""
    from pal_opt.cost import evaluate
    from pal_opt.ilp.formulation import build_formulation
    from pal_opt.ilp.heuristic import start_placements
    from pal_opt.model import Cluster, Job, RoundInstance, RoundParams

    server = [s for s in range(4) for _ in range(4)]
    factors = [1.0 if s in (0, 2) else 1.2 for s in server]
    cl = Cluster.from_arrays(range(16), server, {"classA": factors}, None, {0: "r0", 1: "r0", 2: "r1", 3: "r1"})
    loc = (1.0, 1.7, 2.5)
    jobs = (Job("big", 8, "classA", locality=loc),
            *(Job(f"s{k}", 2, "classA", locality=loc) for k in range(4)))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    form = build_formulation(inst)
    starts = start_placements(form)
    cost = {k: evaluate(inst, p, form.factors).cost for k, p in starts.items()}
    assert cost["packing"] == pytest.approx(8 * math.log(3.0))
    assert cost["packing-large"] == pytest.approx(8 * math.log(1.2 * 1.7) + 4 * math.log(1.2))
    flat = RoundInstance(Cluster.from_arrays(range(16), server, {"classA": factors}), jobs, RoundParams(binning="none"))
    assert "packing-large" not in start_placements(build_formulation(flat))  # only where racks can fragment
