"""Fill cuts on typed rounds (formulation._add_fill_cuts): valid for every placement, a bound no
weaker, never above the exact optimum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import evaluate
from pal_opt.generate import generate_typed_instance
from pal_opt.gputypes import type_groups
from pal_opt.ilp import solve_ilp
from pal_opt.ilp.backends import SolveOptions, get_backend
from pal_opt.ilp.decode import encode
from pal_opt.ilp.formulation import build_formulation
from pal_opt.ilp.solve import prepare_round
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams
from pal_opt.result import Status

THROUGHPUT = {"classA": {"aws": 1.0, "rtx": 1.6, "dgx-ext": 2.4}, "classB": {"aws": 1.0, "rtx": 1.2, "dgx-ext": 1.3},
              "classC": {"aws": 1.0, "rtx": 1.1, "dgx-ext": 1.1}, "classD": {"aws": 1.0, "rtx": 1.0, "dgx-ext": 1.05}}
SPECS = ["aws:3x4,rtx:3x4", "aws:2x8,rtx:2x8,dgx-ext:1x8", "aws:4x2,rtx:2x4,dgx-ext:2x4"]


def _round(spec, seed, jobs, busy=0.0):
    tp = {c: {t: v for t, v in row.items() if t in spec} for c, row in THROUGHPUT.items()}
    return generate_typed_instance(spec, jobs, seed=seed, busy_fraction=busy, guaranteed_fraction=0.25, throughput=tp)


def _typed_placement(inst, admitted, rnd):
    """A random valid placement: each job on one of its type groups, random free GPUs there;
    None when the random choice of groups does not fit."""
    cl = inst.cluster
    free = set(np.flatnonzero(cl.state == GpuState.FREE).tolist())
    out = {}
    for i in admitted:
        job = inst.jobs[i]
        groups = list(type_groups(cl, job))
        rnd.shuffle(groups)
        for g in groups:
            cand = sorted(p for p in free if int(cl.type_of[p]) in g)
            if len(cand) >= job.demand:
                pick = rnd.sample(cand, job.demand)
                free -= set(pick)
                out[job.id] = tuple(int(cl.gpu_ids[p]) for p in pick)
                break
        else:
            return None
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(SPECS), busy=st.sampled_from([0.0, 0.25]),
       rnd=st.randoms(use_true_random=False))
def test_every_typed_placement_satisfies_the_fill_cuts(seed, spec, busy, rnd):
    inst = _round(spec, seed, 10, busy)
    s = prepare_round(inst, None, "highs", "prefix", None)
    f = build_formulation(inst, s.admitted, factors=s.factors)
    for _ in range(4):
        placement = _typed_placement(inst, s.admitted, rnd)
        if placement is None:
            continue
        x = encode(f, placement)
        assert f.is_feasible(x)  # every row, the fill cuts among them
        assert f.objective(x) == pytest.approx(evaluate(inst, placement, s.factors).cost, abs=1e-9)


def _lp(form):
    return get_backend("highs")().relaxation_bound(form, SolveOptions())


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(SPECS))
def test_the_cut_bound_is_no_weaker_and_never_above_the_optimum(seed, spec):
    inst = _round(spec, seed, 12)
    s = prepare_round(inst, None, "highs", "prefix", None)
    if not s.admitted:
        return
    cut = _lp(build_formulation(inst, s.admitted, factors=s.factors))
    plain = _lp(build_formulation(inst, s.admitted, factors=s.factors, cuts=False))
    exact = solve_ilp(inst, backend="highs", time_limit=60)
    assert exact.status == Status.OPTIMAL and check(inst, exact) == []
    assert cut >= plain - 1e-6
    assert cut <= exact.objective + 1e-6


def test_a_whole_server_job_takes_the_fast_gpus_of_its_server_too():
    """Two 4-GPU servers of type a, each with two fast (1.0) and two slow (2.0) GPUs for class A,
    and a one-type server b.  Job w (4 GPUs, class B, indifferent to speed) fills a server; gang g
    (class A, 4 GPUs) wants the fast GPUs.  Without fill cuts the LP puts half of w on each
    server on the slow GPUs only and g on the four fast ones; every placement gives g at least
    one slow GPU of a or a whole server, so the cut bound is the optimum."""
    fa = [1.0, 1.0, 2.0, 2.0] * 2 + [1.0] * 4
    cl = Cluster.from_arrays(np.arange(12), [0] * 4 + [1] * 4 + [2] * 4,
                             {"classA": fa, "classB": [1.0] * 12}, gpu_types="aaaaaaaabbbb",
                             throughput={"classA": {"a": 1.0}, "classB": {"a": 1.0}})
    jobs = (Job(id="w", demand=4, perfclass="classB"), Job(id="g", demand=4, perfclass="classA", position=1))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none", locality_penalty=1.7), "fill")
    fac = binned_factors(cl, "none")
    cut = _lp(build_formulation(inst, [0, 1], factors=fac))
    plain = _lp(build_formulation(inst, [0, 1], factors=fac, cuts=False))
    exact = solve_ilp(inst, backend="highs", binning="none")
    assert exact.status == Status.OPTIMAL
    assert plain < exact.objective - 0.1
    assert cut == pytest.approx(exact.objective, abs=1e-6)
