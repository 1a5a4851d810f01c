"""Partitioned solving (POP-style) with a whole-round bound: pal_opt.ilp.partition."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_stage_keep import keep_rounds

from pal_opt.admission import admit
from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import evaluate
from pal_opt.errors import OptionError
from pal_opt.generate import generate_instance
from pal_opt.ilp import solve_ilp
from pal_opt.ilp.partition import part_instance, partition_round, solve_partitioned
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams, pal_locality
from pal_opt.result import Status

TOL = 1e-6


def _round(nodes=16, gpn=4, jobs=40, racks=0, seed=0, **kw):
    return generate_instance(nodes, gpn, jobs, racks=racks, seed=seed, **kw)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("admission", ["prefix", "backfill"])
@pytest.mark.parametrize("racks", [0, 4])
def test_partitioned_valid_and_bounded(k, admission, racks):
    inst = _round(racks=racks, seed=k + racks)
    res = solve_partitioned(inst, k, admission=admission, executor="serial")
    assert check(inst, res) == []
    assert res.admission == admission
    assert {inst.jobs[i].id for i in admit(inst, admission)} == set(res.placements)
    assert res.bound is not None and res.bound <= res.objective + TOL
    assert res.gap is not None and res.gap >= 0
    assert res.info["partition"]["k"] == k
    assert math.isclose(res.objective, evaluate(inst, res.placements, binned_factors(inst.cluster)).cost)


@pytest.mark.parametrize("seed", range(4))
def test_bound_below_exact_optimum(seed):
    inst = _round(nodes=12, gpn=4, jobs=30, seed=seed)
    exact = solve_ilp(inst)
    assert exact.status == Status.OPTIMAL
    for k in (2, 3, 4):
        res = solve_partitioned(inst, k, executor="serial")
        assert res.bound <= exact.objective + TOL
        assert res.objective >= exact.objective - TOL


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("admission", ["prefix", "backfill"])
def test_k1_equals_direct(seed, admission):
    inst = _round(racks=2, seed=seed)
    direct = solve_ilp(inst, admission=admission)
    one = solve_partitioned(inst, 1, admission=admission, executor="serial")
    assert one.placements == direct.placements
    assert one.objective == pytest.approx(direct.objective, abs=1e-12)
    assert one.bound == pytest.approx(direct.bound, abs=1e-9)
    assert one.status == direct.status
    assert one.admission == direct.admission
    assert check(inst, one) == []


def _fast_slow() -> RoundInstance:
    # server 0: four fast GPUs, server 1: four slow ones; two 2-GPU jobs of one type
    c = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 4 + [1.3] * 4})
    loc = pal_locality(1.7)
    jobs = (Job(0, 2, "classA", 0, loc), Job(1, 2, "classA", 1, loc))
    return RoundInstance(c, jobs, RoundParams(binning="none"))


def test_sum_of_part_optima_is_not_a_bound():
    inst = _fast_slow()
    exact = solve_ilp(inst)
    assert exact.objective == pytest.approx(0.0)  # both jobs on the fast server
    res = solve_partitioned(inst, 2, executor="serial")
    parts = res.info["partition"]["parts"]
    assert [p["jobs"] for p in parts] == [1, 1]  # same make-up: one job per part
    # every part is solved to optimality, yet their sum exceeds the whole round's optimum
    assert all(p["status"] == "optimal" for p in parts)
    assert res.info["parts_bound_sum"] > exact.objective + 0.1
    # the whole-round LP bound stays valid, and the gap shows the price of partitioning
    assert res.bound <= exact.objective + TOL
    assert res.gap > 0.1
    assert res.status == Status.FEASIBLE
    assert check(inst, res) == []


def test_partition_same_makeup():
    inst = _round(nodes=64, gpn=8, jobs=200, seed=3)
    adm = admit(inst)
    part = partition_round(inst, adm, 4)
    assert part.k == 4 and part.job_dealing == "balanced"
    allsrv = np.concatenate(part.servers)
    assert sorted(allsrv.tolist()) == list(range(inst.cluster.num_servers))
    assert max(len(s) for s in part.servers) - min(len(s) for s in part.servers) <= 1
    assert sorted(i for js in part.jobs for i in js) == sorted(adm)
    types = {}
    for p, js in enumerate(part.jobs):
        for i in js:
            j = inst.jobs[i]
            types.setdefault((j.perfclass, j.demand), Counter())[p] += 1
        demand = sum(inst.jobs[i].demand for i in js)
        assert demand <= part.free[p]
    smallest = min(d for _, d in types)
    for (_, d), cnt in types.items():
        counts = [cnt.get(p, 0) for p in range(4)]
        # every type is dealt evenly; the smallest jobs, dealt last, fill what the others left
        assert max(counts) - min(counts) <= (1 if d > smallest else max(counts))


def test_whole_racks_when_enough():
    inst = _round(nodes=32, gpn=4, jobs=60, racks=8, seed=1)
    part = partition_round(inst, admit(inst), 4)
    assert part.scheme == "racks"
    rack_of = inst.cluster.rack_of_server
    seen = {}
    for p, srv in enumerate(part.servers):
        for r in np.unique(rack_of[srv]).tolist():
            assert seen.setdefault(r, p) == p  # no rack is cut
    few = partition_round(_round(nodes=32, gpn=4, jobs=60, racks=2, seed=1), admit(inst), 4)
    assert few.scheme == "rack-slices"


def test_part_instance_prices_like_the_whole():
    inst = _round(nodes=16, gpn=4, jobs=40, racks=4, seed=2)
    f = binned_factors(inst.cluster)
    adm = admit(inst)
    part = partition_round(inst, adm, 2, factors=f)
    direct = solve_ilp(inst)
    for p in range(part.k):
        sub = part_instance(inst, f, part.servers[p], part.jobs[p], f"p{p}")
        mine = {j.id: direct.placements[j.id] for j in sub.jobs
                if set(direct.placements[j.id]) <= set(sub.cluster.gpu_ids.tolist())}
        whole = evaluate(inst, mine, f).cost
        assert evaluate(sub, mine, binned_factors(sub.cluster, "none")).cost == pytest.approx(whole, abs=1e-12)


def test_restart_cost_running_jobs():
    inst = _round(nodes=16, gpn=4, jobs=40, seed=4, running_fraction=0.4, restart_cost=18.0)
    assert any(j.placement is not None for j in inst.jobs)
    res = solve_partitioned(inst, 2, executor="serial")
    assert check(inst, res) == []
    exact = solve_ilp(inst)
    assert res.bound <= exact.objective + TOL <= res.objective + 2 * TOL


def test_more_parts_than_servers_and_options():
    inst = _round(nodes=3, gpn=4, jobs=6, seed=0)
    res = solve_partitioned(inst, 10, executor="serial")
    assert res.info["partition"]["k"] <= 3
    assert check(inst, res) == []
    with pytest.raises(OptionError):
        solve_partitioned(inst, 0, executor="serial")
    with pytest.raises(OptionError):
        solve_partitioned(inst, 2, bound="sum", executor="serial")
    nob = solve_partitioned(inst, 2, bound="none", executor="serial")
    assert nob.bound is None and nob.gap is None and nob.status == Status.FEASIBLE


def test_explicit_jobs_and_other_backends():
    inst = _round(seed=6)
    ids = [j.id for j in inst.jobs[:6]]
    res = solve_partitioned(inst, 2, jobs=ids, executor="serial", backend="cpsat")
    assert set(res.placements) == set(ids) and res.admission == "given"
    assert check(inst, res) == []
    cbc = solve_partitioned(inst, 2, jobs=ids, executor="serial", backend="cbc")
    assert cbc.objective == pytest.approx(res.objective, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("racks", [0, 3])
@pytest.mark.parametrize("seed", range(3))
def test_large_round_bound_is_the_flow_free_relaxation(monkeypatch, racks, seed):
    """Above the large-round threshold (lowered here so the exact optimum can be proven) the
    whole-round bound is the flow-free relaxation's LP: valid (at most the exact optimum) and at
    most the program's LP bound, which the same round reports below the threshold."""
    import pal_opt.ilp.partition as partition

    inst = _round(nodes=12, gpn=4, jobs=30, racks=racks, seed=seed)
    exact = solve_ilp(inst)
    assert exact.status == Status.OPTIMAL
    program_lp = solve_partitioned(inst, 2, executor="serial")
    assert program_lp.info["bound_source"].startswith("LP relaxation of the whole round")
    monkeypatch.setattr(partition, "LARGE_ROUND_GPUS", 0)
    flow_free = solve_partitioned(inst, 2, executor="serial")
    assert flow_free.info["bound_source"].startswith("the flow-free relaxation")
    assert flow_free.bound <= exact.objective + TOL
    assert flow_free.bound <= program_lp.bound + TOL
    assert flow_free.placements == program_lp.placements
    assert check(inst, flow_free) == []


# ---------------------------------------------------------------- rounds with pipeline jobs
def _pipelines_split_badly():
    """Three servers (2, 3, 3 GPUs; GPU 1 failed); two pipelines of two stages, each best on a
    slow-light / fast-heavy pair, and a one-GPU job.  Split in two parts, the pipelines cannot
    both get their best pairs: the partitioned answer costs more than the whole round's optimum."""
    cl = Cluster.from_arrays(range(8), [0, 0, 1, 1, 1, 2, 2, 2],
                             {"classA": [1.25, 1.0, 1.25, 0.9, 1.0, 1.0, 1.0, 1.25],
                              "classB": [1.0, 1.25, 0.9, 1.5, 1.0, 1.5, 1.0, 0.9]}, [0, 2, 0, 0, 0, 0, 0, 0])
    jobs = (Job(0, 2, "classA", 0, (1.0, 1.7, 1.7), pipeline=Pipeline((0.5, 2.0), (1, 1))),
            Job(1, 1, "classA", 1, (1.0, 1.3, 1.3)),
            Job(2, 2, "classB", 2, (1.0, 1.2, 1.5), pipeline=Pipeline((1.0, 3.0), (1, 1))))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


def test_with_pipelines_the_bound_is_the_stage_programs_relaxation():
    """The round program prices a pipeline at its slowest GPU, above its pace, so its LP
    relaxation was no bound of a round of pipelines: here it lay above the partitioned answer,
    which was then reported optimal (gap 0) at a cost above the whole round's optimum.  The
    bound is now the LP relaxation of the whole round's stage program."""
    from pal_opt.ilp.relaxation import applies

    inst = _pipelines_split_badly()
    assert not applies(inst, admit(inst))  # (nor the flow-free relaxation, on large rounds)
    exact = solve_ilp(inst)
    res = solve_partitioned(inst, 2, executor="serial")
    assert res.info["partition"]["k"] == 2 and check(inst, res) == []
    assert res.info["bound_source"] == "LP relaxation of the whole round's stage program (HiGHS dual simplex)"
    assert res.objective > exact.objective + 0.1
    assert res.status == Status.FEASIBLE and res.bound <= exact.objective + TOL


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(keep_rounds(max_gpus=8))
def test_with_pipelines_and_moves_charged_the_bound_is_valid(inst):
    """Small rounds of gangs and pipelines, some running, with a restart or migration cost
    (``tests/test_stage_keep.py``): the partitioned answer is valid, its bound at most the whole
    round's optimum, and it is reported optimal only at that optimum."""
    exact = solve_ilp(inst, admission="prefix")
    res = solve_partitioned(inst, 2, executor="serial", admission="prefix")
    assert check(inst, res) == []
    assert res.objective >= exact.objective - TOL
    if res.bound is not None:
        assert res.bound <= exact.objective + TOL
    if res.status == Status.OPTIMAL:
        assert res.objective == pytest.approx(exact.objective, abs=TOL)


@pytest.mark.parametrize(("raised", "stopped"), [(KeyboardInterrupt, True), (RuntimeError, False)])
def test_an_error_while_the_parts_run_cancels_the_rest(monkeypatch, raised, stopped):
    """Found by review: ``_run_parts`` closed its pool with ``shutdown(wait=True)`` whatever
    happened, so after a Ctrl-C (or a part's error) every queued part was solved first.  Now the
    parts not started are cancelled, and on a Ctrl-C the pool's workers are stopped."""
    from pal_opt.ilp import solve_partitioned
    from pal_opt.parallel import ExecutorHandle

    closed = []

    def results(self, futures, on_done=None):  # type: ignore[no-untyped-def]
        raise raised("stop")

    monkeypatch.setattr(ExecutorHandle, "results", results)
    monkeypatch.setattr(ExecutorHandle, "close", lambda self, **kw: closed.append(kw))
    with pytest.raises(raised):
        solve_partitioned(_round(), 2, backend="highs", executor="serial", bound="none")
    assert closed == [{"cancel": True, "stop": stopped}]
