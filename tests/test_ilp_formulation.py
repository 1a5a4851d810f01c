"""The round program in solver-neutral form: structure, encoding and decoding (no solver)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ilp_rounds import rounds

from pal_opt.binning import binned_factors
from pal_opt.cost import evaluate
from pal_opt.cost.restart import restart_cost_seconds
from pal_opt.errors import InfeasibleRoundError, InstanceError
from pal_opt.ilp import build_formulation, decode, encode
from pal_opt.ilp.formulation import KIND_FLOW, KIND_KEEP, KIND_X, KIND_Y, KIND_Z
from pal_opt.ilp.solve import resolve_admission
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams


def _flat(factors, state=None, jobs=(), rc=0.0, sizes=(2, 2)):
    server = np.repeat(np.arange(len(sizes)), sizes)
    cl = Cluster.from_arrays(np.arange(len(server)), server, factors, state)
    # rc: round-cost units per GPU (a negative one passes through, for the validation test)
    seconds = restart_cost_seconds(rc, RoundParams().round_length) if rc > 0 else rc
    return RoundInstance(cl, tuple(jobs), RoundParams(binning="none", restart_cost=seconds))


def test_formulation_is_integral_except_costs(tiny_instance):
    f = build_formulation(tiny_instance)
    assert np.all(f.A.data == np.round(f.A.data))
    for arr in (f.row_lo, f.row_hi, f.col_lo, f.col_hi):
        fin = arr[np.isfinite(arr)]
        assert np.all(fin == np.round(fin))
    assert f.A.shape == (f.num_rows, f.num_vars)
    assert len(f.var_names) == len(set(f.var_names)) == f.num_vars
    assert len(f.row_names) == len(set(f.row_names)) == f.num_rows
    # flows are the only continuous variables and carry no cost
    assert np.all(f.integrality == (f.var_kind != KIND_FLOW))
    assert np.all(f.c[f.var_kind == KIND_FLOW] == 0)


def test_admitted_and_demand(tiny_instance):
    f = build_formulation(tiny_instance)
    # 7 free GPUs: the prefix is jobs 0, 1, 2 (2 + 3 + 1 = 6); job 3 (2 GPUs) does not fit
    assert f.admitted == (0, 1, 2)
    assert f.total_demand == 6


def test_slot_costs_price_factor_and_penalty():
    inst = _flat({"classA": [1.0, 1.5, 1.0, 1.0]}, jobs=[Job(7, 2, "classA", 0, (1.0, 1.7, 1.7))])
    f = build_formulation(inst)
    x = np.flatnonzero(f.var_kind == KIND_X)
    z = np.flatnonzero(f.var_kind == KIND_Z)
    vals = f.profiles[0].values["classA"]
    assert vals.tolist() == [1.0, 1.5]
    for v in x.tolist():
        assert f.c[v] == pytest.approx(2 * math.log(vals[f.var_level[v]]))
    for v in z.tolist():
        assert f.c[v] == pytest.approx(2 * (math.log(vals[f.var_level[v]]) + math.log(1.7)))
    # server 1 holds two level-0 GPUs, server 0 one of each level: x_v0 only on server 1
    assert sorted((int(f.var_level[v]), int(f.var_node[v])) for v in x.tolist()) == [(0, 1), (1, 0)]


def test_identical_classes_share_a_profile():
    fac = {"classA": [1.0, 1.2, 1.0, 1.1], "classB": [2.0, 2.4, 2.0, 2.2], "classC": [1.1, 1.0, 1.0, 1.0]}
    jobs = [Job(0, 1, "classA"), Job(1, 1, "classB"), Job(2, 1, "classC")]
    f = build_formulation(_flat(fac, jobs=jobs))
    # A and B order the GPUs the same way (different values): one profile; C another
    assert [p.classes for p in f.profiles] == [("classA", "classB"), ("classC",)]
    assert f.profiles[0].values["classB"].tolist() == [2.0, 2.2, 2.4]


def test_racked_cluster_has_rack_slots():
    cl = Cluster.from_arrays(np.arange(6), [0, 0, 1, 1, 2, 2], {"classA": [1.0] * 6}, None, {0: "r0", 1: "r0", 2: "r1"})
    inst = RoundInstance(cl, (Job(0, 3, "classA"),), RoundParams(binning="none"))
    f = build_formulation(inst)
    assert (f.var_kind == KIND_Y).sum() == 1  # only rack r0 has two servers
    assert (f.var_kind == KIND_Z).sum() == 1
    assert (f.var_kind == KIND_X).sum() == 0  # no server holds 3 GPUs


def test_keep_variables_only_with_restart_cost():
    jobs = [Job(0, 2, "classA", 0, (1, 1.7, 1.7), placement=(1, 2)), Job(1, 1, "classA", 1)]
    fac = {"classA": [1.0, 1.0, 1.0, 1.0]}
    assert not (build_formulation(_flat(fac, jobs=jobs)).var_kind == KIND_KEEP).any()
    f = build_formulation(_flat(fac, jobs=jobs, rc=0.25))
    keep = np.flatnonzero(f.var_kind == KIND_KEEP)
    assert keep.size == 1
    # keeping (1, 2) spans two servers: 2 ln 1.7; the restart cost (0.25 per GPU) sits in the offset
    assert f.c[keep[0]] == pytest.approx(2 * math.log(1.7) - 0.5)
    assert f.obj_offset == pytest.approx(0.5)


def test_keep_impossible_on_a_failed_gpu():
    jobs = [Job(0, 2, "classA", 0, placement=(0, 1))]
    inst = _flat({"classA": [1.0] * 4}, state=[0, GpuState.FAILED, 0, 0], jobs=jobs, rc=1.0)
    f = build_formulation(inst)
    assert not (f.var_kind == KIND_KEEP).any()
    assert f.obj_offset == pytest.approx(2.0)  # the job must move


def test_infeasible_admitted_set_raises():
    inst = _flat({"classA": [1.0] * 4}, state=[0, 2, 2, 0], jobs=[Job(0, 3, "classA")])
    with pytest.raises(InfeasibleRoundError):
        build_formulation(inst, [0])


def test_decreasing_locality_is_an_instance_error_where_the_job_is_built():
    # one rule for a file and for memory: spanning more of the cluster is never faster, so the
    # model refuses decreasing penalties (for any demand) and no program ever sees them
    for demand, loc in ((2, (1.0, 2.0, 1.5)), (1, (2.0, 1.0, 1.0))):
        with pytest.raises(InstanceError, match="must not decrease") as err:
            Job(1, demand, "classA", 1, loc)
        assert err.value.path == "jobs[1].locality"


@pytest.mark.parametrize("locality, where", [((1.0, -1.0, 1.7), "locality[1]"), ((1.0, 1.7, math.inf), "locality[2]")])
def test_bad_locality_is_an_instance_error_where_the_job_is_built(locality, where):
    # the model checks a job once, where it is built; no program ever sees such a job
    with pytest.raises(InstanceError, match="finite number > 0") as err:
        Job(1, 2, "classA", 1, locality)
    assert err.value.path == f"jobs[1].{where}"


def test_negative_restart_cost_is_an_instance_error():
    with pytest.raises(InstanceError, match="params.restart_cost"):
        _flat({"classA": [1.0] * 4}, jobs=[Job(0, 1, "classA")], rc=-0.1)


def test_cuts_are_optional_and_only_add_rows(tiny_instance):
    a = build_formulation(tiny_instance, cuts=False)
    b = build_formulation(tiny_instance, cuts=True)
    assert a.num_vars == b.num_vars
    assert b.num_rows >= a.num_rows
    assert not any(n.startswith("cg_") for n in a.row_names)


def test_cut_tightens_server_packing():
    # server 0 has GPUs at levels (1.0, 1.0, 2.0); two 2-GPU jobs.  The capacity rows allow
    # x_v0_s0 = 1 and x_v1_s0 = 0.5 (2 + 1 = 3 GPUs); the cut says x_v0_s0 + x_v1_s0 <= 1.
    inst = _flat({"classA": [1.0, 1.0, 2.0, 3.0, 3.0, 3.0]}, jobs=[Job(0, 2, "classA"), Job(1, 2, "classA", 1)],
                 sizes=(3, 3))
    f = build_formulation(inst)
    cuts = [i for i, n in enumerate(f.row_names) if n.startswith("cg_s0_")]
    assert len(cuts) == 1, f.row_names
    row = f.A.getrow(cuts[0])
    assert f.row_hi[cuts[0]] == 1
    assert sorted(f.var_names[j] for j in row.indices) == ["x_t0_v0_s0", "x_t0_v1_s0"]
    assert set(row.data.tolist()) == {1.0}
    assert not any(n.startswith("cg_") for n in build_formulation(inst, cuts=False).row_names)


def _random_placement(inst, admitted, rnd):
    free = [int(g) for g in np.flatnonzero(inst.cluster.state == GpuState.FREE)]
    rnd.shuffle(free)
    out, used = {}, set()
    for i in admitted:
        j = inst.jobs[i]
        if j.placement is not None and rnd.random() < 0.5 and not used & set(j.placement):
            out[j.id] = tuple(j.placement)
            used |= set(j.placement)
    pool = [g for g in free if g not in used]
    for i in admitted:
        j = inst.jobs[i]
        if j.id not in out:
            out[j.id], pool = tuple(pool[: j.demand]), pool[j.demand :]
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(rounds(max_jobs=8), st.sampled_from(["prefix", "backfill"]), st.randoms(use_true_random=False))
def test_every_placement_encodes_to_a_feasible_vector_of_equal_cost(inst, mode, rnd):
    """Encoding is exact (same cost as pal_opt.cost, all rows and cuts hold) and decoding never
    costs more than the program objective."""
    fac = binned_factors(inst.cluster, "none")
    admitted, _ = resolve_admission(inst, mode, None)
    f = build_formulation(inst, admitted, factors=fac)
    for _ in range(3):
        placement = _random_placement(inst, admitted, rnd)
        x = encode(f, placement)
        assert f.is_feasible(x)
        cost = evaluate(inst, placement, fac).cost
        assert f.objective(x) == pytest.approx(cost, abs=1e-9)
        back = decode(f, x)
        assert set(back) == set(placement)
        assert evaluate(inst, back, fac).cost <= cost + 1e-9


def test_encode_rejects_bad_placements(tiny_instance):
    f = build_formulation(tiny_instance)
    with pytest.raises(InstanceError, match="admitted"):
        encode(f, {0: (0, 1)})
    with pytest.raises(InstanceError, match="not free"):
        encode(f, {0: (0, 2), 1: (3, 4, 5), 2: (6,)})  # GPU 2 is busy


def test_build_is_vectorised_at_scale():
    """A 2,048-GPU round builds without a per-GPU Python loop (a size check, not a timing)."""
    from pal_opt.generate import generate_instance

    inst = generate_instance(256, 8, 600, seed=0)
    f = build_formulation(inst)
    assert f.num_vars < 40 * inst.cluster.num_gpus
    assert f.total_demand <= inst.free_gpus


def test_every_admitted_job_must_take_a_slot(tiny_instance):
    # the type rows are equalities: placing nothing (all zeros) is not a solution
    f = build_formulation(tiny_instance)
    rows = [k for k, n in enumerate(f.row_names) if n.startswith("n_t")]
    assert rows and np.all(f.row_lo[rows] == f.row_hi[rows])
    assert f.row_lo[rows].sum() == len(f.admitted)
    assert not f.is_feasible(np.zeros(f.num_vars))


def test_a_kept_job_counts_against_its_servers_capacity():
    # job 0 runs on server 0 (GPUs 0, 1) and may keep it; job 1 (1 GPU) cannot join it there
    jobs = [Job(0, 2, "classA", 0, placement=(0, 1)), Job(1, 1, "classA", 1)]
    f = build_formulation(_flat({"classA": [1.0] * 4}, jobs=jobs, rc=0.25))
    kept = encode(f, {0: (0, 1), 1: (2,)})
    moved = encode(f, {0: (2, 3), 1: (0,)})
    assert f.is_feasible(kept) and f.is_feasible(moved)
    t1 = next(t for t, jt in enumerate(f.types) if 1 in jt.jobs)
    slot = np.flatnonzero((f.var_kind <= KIND_Z) & (f.var_type == t1))
    pool = f.var_pool[slot[moved[slot] > 0]]  # job 1's pool when moved: server 0's, job 0 is not in it
    flows = f.var_kind == KIND_FLOW
    both = np.where(flows, 0.0, kept)
    both[slot] = moved[slot]
    mine = np.flatnonzero(flows & np.isin(f.var_pool, pool))
    both[mine] = moved[mine]  # job 1 on server 0 while job 0 keeps it
    assert both[f.var_kind == KIND_KEEP].sum() == 1
    assert not f.is_feasible(both)


def test_the_cut_over_all_profiles_keeps_a_job_that_fits_a_server():
    # two classes, two profiles: the cut on server 0 (3 free GPUs, 2-GPU jobs) is x <= 1, not 0
    inst = _flat({"classA": [1.0, 1.0, 2.0, 1.0, 1.0, 1.0], "classB": [1.0, 1.5, 1.0, 1.0, 1.0, 1.0]},
                 jobs=[Job(0, 2, "classA"), Job(1, 2, "classB", 1)], sizes=(3, 3))
    f = build_formulation(inst)
    assert len(f.profiles) == 2 and "cg_s0_k2" in f.row_names
    for placement in ({0: (0, 1), 1: (3, 4)}, {0: (3, 4), 1: (0, 1)}):
        assert f.is_feasible(encode(f, placement))


def test_a_running_job_left_out_costs_its_preemption_charge():
    # ilp-preempt's drop column: leaving out optional job 0 costs its preempted charge, no move
    jobs = [Job(0, 2, "classA", 0, placement=(0, 1)), Job(1, 2, "classA", 1)]
    inst = _flat({"classA": [1.0, 1.0, 1.3, 1.3, 1.0, 1.0]}, jobs=jobs, rc=0.25, sizes=(2, 2, 2))
    fac = binned_factors(inst.cluster, "none")
    f = build_formulation(inst, [0, 1], factors=fac, optional=[0])
    for placement in ({1: (4, 5)}, {0: (0, 1), 1: (2, 3)}, {0: (4, 5), 1: (0, 1)}):
        x = encode(f, placement)
        assert f.is_feasible(x)
        assert f.objective(x) == pytest.approx(evaluate(inst, placement, fac).cost, abs=1e-9)
    assert f.objective(encode(f, {1: (4, 5)})) > 0  # the preemption charge is not zero


def test_a_running_job_not_admitted_pays_its_charge_in_the_constant():
    jobs = [Job(0, 2, "classA", 0, placement=(0, 1)), Job(1, 2, "classA", 1)]
    inst = _flat({"classA": [1.0, 1.0, 1.3, 1.3]}, jobs=jobs, rc=0.25)
    fac = binned_factors(inst.cluster, "none")
    f = build_formulation(inst, [1], factors=fac)
    assert f.obj_offset > 0
    x = encode(f, {1: (2, 3)})
    assert f.objective(x) == pytest.approx(evaluate(inst, {1: (2, 3)}, fac).cost, abs=1e-9)
