"""Failure repair (``pal_opt.repair``, ``pal-opt repair``): each promise of the feature on small
generated rounds, on every installed backend where that is cheap.

* no failed GPU is used, and the checker passes (on the round itself and on the written file);
* by default every unaffected job keeps exactly its GPUs;
* the default repair is proven optimal among the placements that keep them (against brute force);
* with ``allow_migration`` the total cost is never above the default answer's (hypothesis);
* each displaced job that cannot fit is left out with a reason;
* bad input: one line, exit 2, no output file; same input, same answer.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pal_opt.binning import binned_factors
from pal_opt.check import Kind, check, violations
from pal_opt.cli import main
from pal_opt.cost import evaluate, relative_gap
from pal_opt.errors import InstanceError, OptionError, SolveInterrupted
from pal_opt.generate import generate_instance
from pal_opt.ilp import available_backends, solve_ilp
from pal_opt.ilp.solve import OPTIMALITY_TOL
from pal_opt.inforce import in_force_placement, repair_round
from pal_opt.io import save_instance
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams
from pal_opt.repair import reduced_round, repair, repair_counts
from pal_opt.result import Status
from pal_opt.solve import solve

BACKENDS = available_backends()


def _round(seed: int, nodes: int = 4, per: int = 4, jobs: int = 10, racks: int = 0) -> RoundInstance:
    return generate_instance(nodes, per, jobs, racks=racks, seed=seed)


def _two_servers(inst: RoundInstance, seed: int, k: int = 2) -> list[int]:
    """``k`` GPUs on each of two servers, chosen by ``seed``."""
    rng = np.random.default_rng(seed)
    cl = inst.cluster
    servers = rng.choice(cl.num_servers, size=2, replace=False)
    out: list[int] = []
    for s in servers.tolist():
        ids = cl.gpu_ids[cl.server_of == s]
        out += rng.choice(ids, size=min(k, ids.size), replace=False).tolist()
    return sorted(out)


def _case(seed: int, **kw):
    inst = _round(seed, **kw)
    placed = solve(inst, "pal")
    return inst, placed, _two_servers(inst, seed)


def _unaffected(placements, failed) -> dict:
    bad = set(failed)
    return {j: g for j, g in placements.items() if not bad & set(g)}


# --------------------------------------------------------------------------- the promises
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_repair_keeps_unaffected_jobs_uses_no_failed_gpu_and_checks(backend, seed):
    inst, placed, failed = _case(seed, racks=2 if seed == 2 else 0)
    r = repair(inst, placed, failed, backend=backend)
    assert r.method == "repair" and r.admission == "repair" and r.status == Status.OPTIMAL
    used = {g for gs in r.placements.values() for g in gs}
    assert not used & set(failed)
    for jid, gpus in _unaffected(placed.placements, failed).items():
        assert r.placements[jid] == tuple(gpus)
    displaced = set(placed.placements) - set(_unaffected(placed.placements, failed))
    assert set(r.jobs_to_terminate) == displaced
    assert set(r.placements) | set(r.unplaceable) == set(placed.placements)
    assert check(inst, r) == []
    assert check(inst, json.loads(r.to_json())) == []
    rr = repair_round(inst, in_force_placement(inst, placed), failed)
    assert check(rr.instance, r) == []
    assert r.gap is not None and r.gap <= 1e-6 and r.bound <= r.objective + 1e-9


@pytest.fixture(scope="module")
def big():
    """A 2,048-GPU round (256 × 8, 600 queued jobs) placed by PAL, and 8 failed GPUs, 4 on each of
    two servers (benchmarks/repair.py times the same on rounds placed by the integer program)."""
    inst = generate_instance(256, 8, 600, seed=7)
    placed = solve(inst, "pal")
    return inst, placed, _two_servers(inst, 7, k=4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_2048_gpu_round_is_repaired_optimally(backend, big):
    inst, placed, failed = big
    r = repair(inst, placed, failed, backend=backend)
    assert r.status == Status.OPTIMAL and r.gap <= 1e-6
    assert not {g for gs in r.placements.values() for g in gs} & set(failed)
    unaffected = _unaffected(placed.placements, failed)
    assert len(unaffected) < len(placed.placements)
    assert all(r.placements[j] == tuple(g) for j, g in unaffected.items())
    assert check(inst, json.loads(r.to_json())) == []


def _brute_force(rr) -> float:
    """The least cost of the repair round over every placement that keeps the unaffected jobs
    and places every displaced job that the repair admits (all of them, in the cases used)."""
    inst = rr.instance
    cl = inst.cluster
    factors = binned_factors(cl, inst.params.binning)
    kept = rr.in_force(rr.kept)
    held = {g for gs in kept.values() for g in gs}
    free = [int(g) for g, st_ in zip(cl.gpu_ids.tolist(), cl.state.tolist(), strict=True) if st_ == 0 and g not in held]
    movers = [inst.jobs[i] for i in rr.displaced]
    best = math.inf

    def walk(k: int, left: list[int], chosen: dict) -> None:
        nonlocal best
        if k == len(movers):
            best = min(best, evaluate(inst, {**kept, **chosen}, factors).cost)
            return
        for combo in itertools.combinations(left, movers[k].demand):
            walk(k + 1, [g for g in left if g not in combo], {**chosen, movers[k].id: combo})

    walk(0, free, {})
    return best


def _brute_force_case(seed: int):
    """A 12-GPU round of small jobs (7 to 9 GPUs in all) placed by PAL, and one GPU in use failed
    on each of two servers; None when every displaced job cannot be re-placed (the brute force covers the
    rounds where all of them are)."""
    rng = np.random.default_rng(seed)
    base = generate_instance(3, 4, 0, seed=seed)
    jobs: list[Job] = []
    while sum(j.demand for j in jobs) < 7:
        jobs.append(Job(len(jobs), int(rng.integers(1, 4)), str(rng.choice(base.cluster.classes)), len(jobs)))
    inst = RoundInstance(base.cluster, tuple(jobs), base.params)
    placed = solve(inst, "pal")
    cl = inst.cluster
    used = np.asarray(sorted(g for gs in placed.placements.values() for g in gs))
    servers = np.unique(cl.server_of[cl.positions(used)])
    if servers.size < 2:
        return None
    failed = [int(rng.choice(used[cl.server_of[cl.positions(used)] == s])) for s in servers[:2].tolist()]
    rr = repair_round(inst, in_force_placement(inst, placed), failed)
    r = repair(inst, placed, failed, backend=BACKENDS[0])
    return None if r.unplaceable else (rr, r)


@pytest.mark.parametrize("seed", range(12))
def test_default_repair_is_optimal_among_placements_that_keep_unaffected_jobs(seed):
    case = _brute_force_case(seed)
    if case is None:
        pytest.skip("a displaced job does not fit: not a brute-force case")
    rr, r = case
    assert rr.displaced and r.status == Status.OPTIMAL
    assert r.objective == pytest.approx(_brute_force(rr), abs=1e-9)
    assert r.bound == pytest.approx(r.objective, abs=1e-6)


def test_the_brute_force_cases_are_not_all_skipped():
    assert sum(_brute_force_case(seed) is not None for seed in range(12)) >= 6


@pytest.mark.parametrize("seed", [3, 4])
def test_every_backend_finds_the_same_repair_cost(seed):
    inst, placed, failed = _case(seed, nodes=6, jobs=16)
    costs = [repair(inst, placed, failed, backend=b).objective for b in BACKENDS]
    assert max(costs) - min(costs) <= 1e-6


def _flat(factors: list[float], per: int = 4) -> Cluster:
    n = len(factors)
    return Cluster.from_arrays(range(n), [g // per for g in range(n)], {"classA": factors})


def test_a_displaced_job_that_cannot_fit_is_left_out_with_a_reason():
    cl = _flat([1.0] * 8)
    jobs = (Job("a", 4, "classA", 0), Job("b", 3, "classA", 1), Job("c", 1, "classA", 2))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    placement = {"a": [0, 1, 2, 3], "b": [4, 5, 6], "c": [7]}
    r = repair(inst, placement, [3], backend=BACKENDS[0])
    assert r.placements == {"b": (4, 5, 6), "c": (7,)}
    assert r.unplaceable == {"a": "needs 4 GPUs; 3 are left free (7 in service, 4 kept by unaffected jobs, "
                                   "0 given to displaced jobs before it in the queue)"}
    assert r.jobs_to_terminate == ("a",) and r.status == Status.OPTIMAL
    assert check(inst, r) == []
    # a later, smaller displaced job still gets GPUs the first one could not use
    r = repair(inst, placement, [3, 7], backend=BACKENDS[0])
    assert set(r.unplaceable) == {"a"} and r.placements["b"] == (4, 5, 6)
    assert len(r.placements["c"]) == 1 and r.placements["c"][0] in (0, 1, 2)
    # with room, the displaced 4-GPU gang is re-placed, across servers since no server has 4 left
    r = repair(inst, {"a": [0, 1, 2, 3], "c": [7]}, [3], backend=BACKENDS[0])
    assert not r.unplaceable and inst.cluster.span_level(r.placements["a"]) > 0
    assert check(inst, r) == []


def test_a_job_bigger_than_the_working_cluster_gets_the_admission_reason():
    cl = _flat([1.0] * 4)
    inst = RoundInstance(cl, (Job("a", 4, "classA"),), RoundParams(binning="none"))
    r = repair(inst, {"a": [0, 1, 2, 3]}, [2], backend=BACKENDS[0])
    assert r.placements == {} and r.unplaceable == {"a": "needs 4 GPUs; 3 are in service (1 failed)"}


def test_a_one_gpu_job_left_out_is_said_to_need_1_gpu_not_1_gpus():
    cl = _flat([1.0] * 2, per=2)
    inst = RoundInstance(cl, (Job("a", 1, "classA", 0), Job("b", 1, "classA", 1)), RoundParams(binning="none"))
    r = repair(inst, {"a": [0], "b": [1]}, [0], backend=BACKENDS[0])
    assert r.unplaceable == {"a": "needs 1 GPU; 0 are left free (1 in service, 1 kept by unaffected jobs, "
                                   "0 given to displaced jobs before it in the queue)"}
    r = repair(inst, {"a": [0], "b": [1]}, [0, 1], backend=BACKENDS[0])
    assert r.unplaceable == {"a": "needs 1 GPU; 0 are in service (2 failed)",
                             "b": "needs 1 GPU; 0 are in service (2 failed)"}


def test_failed_gpus_nobody_uses_change_nothing():
    inst, placed, _ = _case(0)
    used = {g for gs in placed.placements.values() for g in gs}
    idle = [g for g in inst.cluster.gpu_ids.tolist() if g not in used][:2]
    if not idle:
        pytest.skip("no idle GPU")
    r = repair(inst, placed, idle, backend=BACKENDS[0])
    assert r.placements == {k: tuple(v) for k, v in placed.placements.items()}
    assert r.jobs_to_terminate == () and r.status == Status.OPTIMAL and r.gap == 0.0


def test_a_gpu_already_failed_in_the_round_displaces_its_job():
    cl = Cluster.from_arrays(range(8), [g // 4 for g in range(8)], {"classA": [1.0] * 8}, state=[0] * 7 + [2])
    inst = RoundInstance(cl, (Job("a", 2, "classA"), Job("b", 2, "classA", 1)), RoundParams(binning="none"))
    r = repair(inst, {"a": [6, 7], "b": [0, 1]}, [1], backend=BACKENDS[0])
    assert set(r.jobs_to_terminate) == {"a", "b"} and not r.unplaceable
    assert not {1, 7} & {g for gs in r.placements.values() for g in gs}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_displaced_pipeline_job_is_repaired_in_a_round_with_a_restart_cost(backend):
    """The stage program prices no move, and the reduced round once held the displaced jobs as
    running: a restart cost made every repair of a pipeline job an OptionError (and stopped
    ``simulate --failures --restart-cost S`` on a trace with pipelines).  What the move costs is
    a constant, counted once, on the repair round."""
    cl = Cluster.from_arrays(range(8), [g // 4 for g in range(8)], {"classA": [1.0] * 6 + [1.5, 1.0]})
    pipe = Job("p", 3, "classA", 0, (1.0, 1.7, 1.7), pipeline=Pipeline((2.0, 1.0), (2, 1)))
    inst = RoundInstance(cl, (pipe, Job("g", 2, "classA", 1, (1.0, 1.7, 1.7))),
                         RoundParams(binning="none", restart_cost=36.0, round_length=360.0))
    r = repair(inst, {"p": [0, 1, 2], "g": [4, 5]}, [1], backend=backend)
    assert r.status == Status.OPTIMAL and r.placements["g"] == (4, 5) and not r.unplaceable
    assert not {1, 4, 5} & set(r.placements["p"]) and check(inst, r) == []
    assert r.objective == pytest.approx(3 * -math.log(1 - 36.0 / 360.0))  # the move alone: p on 0, 2, 3
    assert r.bound == pytest.approx(r.objective)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pipelines_may_migrate_at_a_price(backend):
    """``--allow-migration`` with pipeline jobs: the whole-round stage program now has keep
    variables (it raised OptionError before 2026-11-27).  p runs on 4, 6 | 7 and q on 0, 2 | 3,
    each with a slow GPU (1.5) on its heavy stage (3 ln 1.5 each); GPU 5 fails under g, which
    no longer fits the one free GPU (preempted, 20).  At 0.01 per GPU both move to pace 1
    (6 x 0.01); at 0.5 a move (1.5) costs more than it saves (3 ln 1.5): both are kept."""
    cl = Cluster.from_arrays(range(8), [g // 4 for g in range(8)], {"classA": [1.5] + [1.0] * 5 + [1.5, 1.0]})
    loc = (1.0, 1.7, 1.7)
    jobs = (Job("p", 3, "classA", 0, loc, pipeline=Pipeline((2.0, 1.0), (2, 1))),
            Job("q", 3, "classA", 1, loc, pipeline=Pipeline((2.0, 1.0), (2, 1))), Job("g", 2, "classA", 2, loc))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    in_force = {"p": [4, 6, 7], "q": [0, 2, 3], "g": [1, 5]}
    cheap = repair(inst, in_force, [5], backend=backend, allow_migration=0.01)
    dear = repair(inst, in_force, [5], backend=backend, allow_migration=0.5)
    assert check(inst, cheap) == [] and check(inst, dear) == []
    assert cheap.objective == pytest.approx(20.0 + 6 * 0.01) and set(cheap.jobs_to_terminate) == {"p", "q", "g"}
    assert dear.objective == pytest.approx(20.0 + 6 * math.log(1.5)) and dear.jobs_to_terminate == ("g",)
    assert dear.placements == {"p": (4, 6, 7), "q": (0, 2, 3)}


def test_queued_jobs_are_not_started():
    inst = _round(5, jobs=30)
    placed = solve(inst, "pal")
    assert len(placed.placements) < len(inst.jobs)
    r = repair(inst, placed, _two_servers(inst, 5), backend=BACKENDS[0])
    assert set(r.placements) <= set(placed.placements)


def test_repair_is_deterministic():
    inst, placed, failed = _case(6, nodes=6, jobs=16)
    for backend in BACKENDS:
        a = repair(inst, placed, failed, backend=backend)
        b = repair(inst, placed, failed, backend=backend)
        assert a.placements == b.placements and a.objective == b.objective
        m = repair(inst, placed, failed, backend=backend, allow_migration=0.02)
        n = repair(inst, placed, failed, backend=backend, allow_migration=0.02)
        assert m.placements == n.placements


# --------------------------------------------------------------------------- migration
def _default_on(rr_mig, default) -> float:
    """The default answer priced on the migration round (the same round the migration answer is
    priced on)."""
    factors = binned_factors(rr_mig.instance.cluster, rr_mig.instance.params.binning)
    return evaluate(rr_mig.instance, default.placements, factors).cost


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), cost=st.floats(0.001, 2.0), k=st.integers(1, 3),
       racks=st.sampled_from([0, 2]))
def test_migration_is_never_above_the_default_answer(seed, cost, k, racks):
    inst = _round(seed, nodes=4, per=4, jobs=10, racks=racks)
    placed = solve(inst, "pal")
    failed = _two_servers(inst, seed, k=k)
    default = repair(inst, placed, failed, backend="highs" if "highs" in BACKENDS else BACKENDS[0])
    mig = repair(inst, placed, failed, backend="highs" if "highs" in BACKENDS else BACKENDS[0],
                 allow_migration=cost)
    rr = repair_round(inst, in_force_placement(inst, placed), failed, migration_per_gpu=cost)
    base = _default_on(rr, default)
    # a displaced job pays no migration (its move is forced): the plain repair costs the same on
    # either round, so a migration repair is never above the plain one either
    assert base == pytest.approx(default.objective, abs=1e-9)
    assert mig.objective <= base + 1e-9
    assert mig.info["repair"]["keep_objective"] == pytest.approx(base, abs=1e-9)
    assert set(mig.placements) == set(default.placements) and mig.unplaceable == default.unplaceable
    assert not {g for gs in mig.placements.values() for g in gs} & set(failed)
    assert check(inst, mig) == [] and check(inst, json.loads(mig.to_json())) == []
    moved = set(mig.info["repair"]["migrated"])
    for jid, gpus in _unaffected(placed.placements, failed).items():
        assert (mig.placements[jid] == tuple(gpus)) == (jid not in moved)
    if moved:  # moves are made only where they lower the round's cost
        assert mig.objective < base - 1e-9
    else:
        assert mig.objective == pytest.approx(base, abs=1e-9)


def _squeezed() -> tuple[RoundInstance, dict]:
    """Two full servers of four GPUs.  The 2-GPU job "d" on server 1 loses GPU 5; the GPUs left
    free are 3 (server 0) and 4 (server 1), so "d" must span servers (penalty 2, cost 2 ln 2)
    unless one 1-GPU job moves to the other server ("s" from GPU 0 to 4, or "f2" or "f3" to 3)
    and leaves "d" two GPUs of one server."""
    cl = _flat([1.0] * 8)
    loc = (1.0, 2.0, 2.0)
    jobs = (Job("s", 1, "classA", 0, loc), Job("d", 2, "classA", 1, loc), Job("f1", 2, "classA", 2, loc),
            Job("f2", 1, "classA", 3, loc), Job("f3", 1, "classA", 4, loc))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    return inst, {"s": [0], "d": [4, 5], "f1": [1, 2], "f2": [6], "f3": [7]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_moves_a_job_only_when_that_pays(backend):
    inst, placement = _squeezed()
    keep = repair(inst, placement, [5], backend=backend)
    assert keep.placements["s"] == (0,) and set(keep.placements["d"]) == {3, 4}
    assert keep.objective == pytest.approx(2 * math.log(2), abs=1e-9)
    cheap = repair(inst, placement, [5], backend=backend, allow_migration=0.1)
    moved = cheap.info["repair"]["migrated"]
    assert cheap.status == Status.OPTIMAL and len(moved) == 1 and moved[0] in ("s", "f2", "f3")
    assert inst.cluster.span_level(cheap.placements["d"]) == 0  # one move lets d into one server
    assert cheap.objective == pytest.approx(0.1, abs=1e-9)  # that move; d's forced one is not charged
    assert cheap.info["repair"]["keep_objective"] == pytest.approx(2 * math.log(2), abs=1e-9)
    dear = repair(inst, placement, [5], backend=backend, allow_migration=2.0)  # 2.0 > 2 ln 2
    assert dear.info["repair"]["migrated"] == [] and dear.placements == keep.placements
    assert dear.objective == pytest.approx(2 * math.log(2), abs=1e-9) == keep.objective
    assert check(inst, cheap) == [] and check(inst, dear) == []


def test_settling_sends_back_a_move_that_does_not_pay(monkeypatch):
    """A whole-round answer that moves an unaffected job for nothing is settled back."""
    import pal_opt.ilp

    cl = _flat([1.0] * 8)
    inst = RoundInstance(cl, (Job("x", 1, "classA"), Job("d", 1, "classA", 1)), RoundParams(binning="none"))
    real = pal_opt.ilp.solve_ilp

    def wandering(instance, **kw):
        res = real(instance, **kw)
        if "start" in kw:  # the whole-round solve: move x to an idle GPU, which gains nothing
            assert res.placements["x"] == (0,)
            idle = min({0, 1, 2, 3, 5, 6, 7} - {g for gs in res.placements.values() for g in gs})
            res.placements = {**res.placements, "x": (idle,)}
        return res

    monkeypatch.setattr(pal_opt.ilp, "solve_ilp", wandering)
    r = repair(inst, {"x": [0], "d": [4]}, [4], backend=BACKENDS[0], allow_migration=0.5)
    assert r.placements["x"] == (0,) and r.info["repair"]["migrated"] == []
    assert r.objective == pytest.approx(0.0, abs=1e-12)  # d's forced move is not charged


@pytest.mark.parametrize("moves", [True, False])
def test_a_migration_repair_out_of_time_says_whether_its_answer_moves_jobs(monkeypatch, moves):
    """When the whole-round solve found nothing in time, the cheapest start is returned, which may
    move unaffected jobs; the message once always said the answer kept every one of them."""
    import pal_opt.ilp

    inst, placement = _squeezed()
    real = pal_opt.ilp.solve_ilp

    def out_of_time(instance, **kw):
        res = real(instance, **kw)
        if "start" in kw:  # the whole-round solve: what solve_ilp returns when time ran out
            res.status, res.info["start_source"] = Status.FALLBACK, "packing-keep"
            if not moves:
                res.placements = dict(kw["start"])
        return res

    monkeypatch.setattr(pal_opt.ilp, "solve_ilp", out_of_time)
    r = repair(inst, placement, [5], backend=BACKENDS[0], allow_migration=0.1)
    moved = r.info["repair"]["migrated"]
    assert r.status == Status.FEASIBLE and bool(moved) == moves and check(inst, r) == []
    if moves:
        assert r.message.endswith("the cheapest start placement (packing-keep) is returned, which moves 1 "
                                  "unaffected job") and len(moved) == 1, r.message
    else:
        assert r.message.endswith("the answer that keeps every unaffected job is returned"), r.message


def test_a_migration_repair_never_reports_a_bound_above_its_objective(monkeypatch):
    """The whole-round solve reports a bound above its own objective (a backend's bound is
    within its tolerances, and the repair's answer is repriced and settled after it): the
    repair's bound is its objective at most, so its gap is 0, not a bound the answer beats."""
    import pal_opt.ilp

    cl = _flat([1.0] * 8)
    inst = RoundInstance(cl, (Job("x", 1, "classA"), Job("d", 1, "classA", 1)), RoundParams(binning="none"))
    real = pal_opt.ilp.solve_ilp

    def overbound(instance, **kw):
        res = real(instance, **kw)
        if "start" in kw:  # the whole-round solve
            res.bound = res.objective + 0.5
        return res

    monkeypatch.setattr(pal_opt.ilp, "solve_ilp", overbound)
    r = repair(inst, {"x": [0], "d": [4]}, [4], backend=BACKENDS[0], allow_migration=0.5)
    assert r.info["repair"]["mode"] == "migrate"
    assert r.bound == r.objective and r.gap == 0.0


# --------------------------------------------------------------------------- solve_ilp(start=)
def test_solve_ilp_start_is_never_beaten_by_a_worse_answer_and_must_be_valid():
    inst = _round(1)
    greedy = solve(inst, "pal")
    ids = list(greedy.placements)
    r = solve_ilp(inst, jobs=ids, start=greedy.placements, time_limit=5)
    assert r.objective <= greedy.objective + 1e-9
    assert "start_given_objective" in r.info
    with pytest.raises(OptionError, match="start is not a placement of the admitted jobs"):
        solve_ilp(inst, jobs=ids, start={ids[0]: greedy.placements[ids[0]]})


# --------------------------------------------------------------------------- interrupts
def test_an_interrupted_repair_hands_back_a_whole_repair(monkeypatch):
    import pal_opt.ilp

    inst, placed, failed = _case(0)
    real = pal_opt.ilp.solve_ilp

    def stopped(instance, **kw):
        raise SolveInterrupted(real(instance, **kw))

    monkeypatch.setattr(pal_opt.ilp, "solve_ilp", stopped)
    with pytest.raises(SolveInterrupted) as exc:
        repair(inst, placed, failed, backend=BACKENDS[0])
    res = exc.value.result
    assert res is not None and res.method == "repair"
    assert set(_unaffected(placed.placements, failed)) <= set(res.placements)
    assert check(inst, res) == []


# --------------------------------------------------------------------------- the checker's rule
def _repaired():
    cl = _flat([1.0, 1.1, 1.0, 1.2, 1.0, 1.0, 1.3, 1.0])
    jobs = (Job("a", 2, "classA", 0), Job("b", 2, "classA", 1), Job("q", 1, "classA", 2))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    return inst, repair(inst, {"a": [0, 1], "b": [4, 5]}, [1], backend=BACKENDS[0])


def test_checker_reports_a_kept_job_moved_without_notice():
    inst, r = _repaired()
    doc = json.loads(r.to_json())
    doc["placements"]["b"] = [6, 7]
    doc.pop("objective")
    assert check(inst, doc) == ["repair: running job 'b' was moved or left out without being listed in "
                                "jobs_to_terminate"]


def test_checker_reports_a_displaced_job_left_out_that_fits():
    inst, r = _repaired()
    doc = json.loads(r.to_json())
    del doc["placements"]["a"]
    doc.pop("objective")
    assert check(inst, doc) == ["repair: job 'a' needs 2 GPUs and 5 are still free, but it was not placed"]


def test_checker_reports_a_failed_gpu_used():
    inst, r = _repaired()
    doc = json.loads(r.to_json())
    doc["placements"]["a"] = [1, 2]
    assert check(inst, doc) == ["job 'a': GPU 1 is failed"]
    assert [v.kind for v in violations(inst, doc)] == [Kind.GPU_NOT_FREE]


def test_checker_reports_an_unaffected_job_dropped():
    inst, r = _repaired()
    doc = json.loads(r.to_json())
    del doc["placements"]["b"]
    doc["jobs_to_terminate"].append("b")
    doc.pop("objective")
    assert check(inst, doc) == ["repair: job 'b' lost no GPU but was left out"]


def test_checker_reports_a_queued_job_started():
    inst, r = _repaired()
    doc = json.loads(r.to_json())
    doc["placements"]["q"] = [7]
    assert check(inst, doc) == ["repair: job 'q' was not in the placement in force; a repair starts no queued job"]
    assert [v.kind for v in violations(inst, doc)] == [Kind.ADMISSION]


def test_checker_needs_the_repair_declaration():
    inst, r = _repaired()
    doc = json.loads(r.to_json())
    del doc["info"]["repair"]
    assert check(inst, doc) == ["info.repair: a repair result must declare its failed GPUs and the placement in "
                                "force"]
    doc = json.loads(r.to_json())
    doc["info"]["repair"]["failed"] = [99]
    assert check(inst, doc) == ["info.repair: failed GPU 99 is not a GPU of the round"]


# --------------------------------------------------------------------------- API bad input
def test_api_rejects_bad_input_in_one_line():
    inst, placed, failed = _case(0)
    with pytest.raises(OptionError, match="failed GPU 999 is not a GPU of the round"):
        repair(inst, placed, [999])
    with pytest.raises(OptionError, match="no failed GPU given"):
        repair(inst, placed, [])
    with pytest.raises(OptionError, match="allow_migration must be a positive number"):
        repair(inst, placed, failed, allow_migration=0)
    with pytest.raises(OptionError, match=r"option\(s\) admission do not apply to a repair"):
        repair(inst, placed, failed, admission="backfill")
    some = next(iter(placed.placements))
    with pytest.raises(InstanceError, match="job 'nope' is not in the round"):
        repair(inst, {**placed.placements, "nope": [0]}, failed)
    other = next(j for j in placed.placements if j != some)
    twice = {**placed.placements, other: (placed.placements[some][0], *placed.placements[other][1:])}
    with pytest.raises(InstanceError, match=r"GPU \d+ is also used by job"):
        repair(inst, twice, failed)


def test_reduced_round_holds_only_the_displaced_jobs():
    inst, placed, failed = _case(1)
    rr = repair_round(inst, in_force_placement(inst, placed), failed)
    red = reduced_round(rr)
    assert [j.id for j in red.jobs] == [rr.instance.jobs[i].id for i in rr.displaced]
    held = [g for i in rr.kept for g in rr.instance.jobs[i].placement]
    assert (red.cluster.state[red.cluster.positions(held)] == 1).all()


# --------------------------------------------------------------------------- the command line
def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def files(tmp_path, capsys) -> tuple[Path, Path, list[int]]:
    inst, placed, failed = _case(2, nodes=6, jobs=16)
    ip, pp = tmp_path / "round.json", tmp_path / "placement.json"
    save_instance(inst, ip)
    pp.write_text(placed.to_json())
    return ip, pp, failed


def test_cli_repair_writes_a_placement_that_check_accepts(files, tmp_path, capsys):
    ip, pp, failed = files
    out = tmp_path / "repaired.json"
    rc, text, err = run(capsys, "repair", ip, pp, "--failed", ",".join(map(str, failed)), "--out", out)
    assert rc == 0, err
    for key in ("round", "failed", "method", "status", "kept", "displaced", "placed", "objective", "bound",
                "time", "wrote"):
        assert any(line.startswith(key) for line in text.splitlines()), key
    assert any(line.startswith("status") and line.endswith("optimal") for line in text.splitlines())
    placed = next(line for line in text.splitlines() if line.startswith("placed"))
    doc = json.loads(out.read_text())
    n, g = len(doc["placements"]), sum(map(len, doc["placements"].values()))
    assert placed.split(None, 1)[1] == f"{n} job{'s' * (n != 1)} on {g} GPU{'s' * (g != 1)}"
    doc = json.loads(out.read_text())
    assert doc["method"] == "repair" and doc["admission"] == "repair" and doc["status"] == "optimal"
    assert doc["info"]["repair"]["failed"] == sorted(failed)
    assert doc["info"]["repair"]["in_force"] == json.loads(pp.read_text())["placements"]
    rc, text, err = run(capsys, "check", ip, out)
    assert rc == 0 and "valid" in text and "admission repair" in text, text + err
    rc, text, err = run(capsys, "repair", ip, pp, "--failed", ",".join(map(str, failed)), "--allow-migration",
                        "0.05", "--out", tmp_path / "m.json", "--backend", BACKENDS[0])
    assert rc == 0 and "migrated" in text, err
    rc, text, _ = run(capsys, "check", ip, tmp_path / "m.json")
    assert rc == 0


def test_cli_repair_says_one_job_on_one_gpu_in_the_singular(tmp_path, capsys):
    """The summary's ``placed`` line: ``1 job on 1 GPU``, not ``1 jobs on 1 GPUs`` (75faaaa; the
    test above places many jobs, so it held either way)."""
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0, 1.1, 1.2, 1.3]})
    inst = RoundInstance(cl, (Job("a", 1, "classA"),), RoundParams(binning="none"))
    ip, pp, out = tmp_path / "round.json", tmp_path / "placement.json", tmp_path / "repaired.json"
    save_instance(inst, ip)
    pp.write_text(solve(inst, "pal").to_json())
    rc, text, err = run(capsys, "repair", ip, pp, "--failed", "0", "--out", out)
    assert rc == 0, err
    assert next(line for line in text.splitlines() if line.startswith("placed")).split(None, 1)[1] == "1 job on 1 GPU"


def test_cli_repair_output_is_deterministic(files, tmp_path, capsys):
    ip, pp, failed = files
    docs = []
    for k in range(2):
        out = tmp_path / f"r{k}.json"
        assert run(capsys, "repair", ip, pp, "--failed", ",".join(map(str, failed)), "-o", out)[0] == 0
        doc = json.loads(out.read_text())
        docs.append((doc["placements"], doc["objective"], doc["jobs_to_terminate"], doc["unplaceable"]))
    assert docs[0] == docs[1]


@pytest.mark.parametrize("argv, expected", [
    (["--failed", "9999"], "pal-opt: error: --failed 9999: not a GPU of "),
    (["--failed", "1,x"], "argument --failed: GPU ids must be integers, got 'x' in '1,x'"),
    ([], "the following arguments are required: --failed"),
    (["--failed", "1", "--allow-migration", "0"], "argument --allow-migration: must be > 0, got '0'"),
    (["--failed", "1", "--allow-migration", "-1"], "argument --allow-migration: must be > 0"),
    (["--failed", "1", "--admission", "backfill"], "unrecognized arguments: --admission backfill"),
    (["--failed", "1", "--backend", "gurobi"], "argument --backend: invalid choice: 'gurobi'"),
])
def test_cli_repair_bad_options(argv, expected, files, tmp_path, capsys):
    ip, pp, _ = files
    out = tmp_path / "out.json"
    rc, text, err = run(capsys, "repair", ip, pp, *argv, "-o", out)
    assert rc == 2 and text == ""
    assert len(err.strip().splitlines()) == 1 and expected in err, err
    assert not out.exists()


def _edit(kind: str, p: dict) -> dict:
    """The placement ``p`` spoilt in one way."""
    first = next(iter(p))
    big = next(j for j, g in p.items() if len(g) >= 2)
    second = next(j for j in p if j != first)
    if kind == "unknown job":
        return {**p, "nope": [0]}
    if kind == "unknown GPU":
        return {**p, first: [999, *p[first][1:]]}
    if kind == "GPU twice in a gang":
        return {**p, big: [p[big][0]] * len(p[big])}
    return {**p, second: [p[first][0], *p[second][1:]]}  # "GPU used by two jobs"


@pytest.mark.parametrize("kind, expected", [
    ("unknown job", "placements.nope: job 'nope' is not in the round"),
    ("unknown GPU", "GPU 999 is not a GPU of the round"),
    ("GPU twice in a gang", "distinct GPUs"),
    ("GPU used by two jobs", "is also used by job"),
])
def test_cli_repair_rejects_a_placement_that_does_not_match_the_round(kind, expected, files, tmp_path, capsys):
    ip, pp, failed = files
    doc = json.loads(pp.read_text())
    doc["placements"] = _edit(kind, doc["placements"])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    out = tmp_path / "out.json"
    rc, text, err = run(capsys, "repair", ip, bad, "--failed", failed[0], "-o", out)
    assert rc == 2 and text == "" and not out.exists()
    assert len(err.strip().splitlines()) == 1 and expected in err and str(bad) in err, err


def _typed_pair() -> RoundInstance:
    """Types a (GPUs 0-3, server 0) and b (4-7, server 1); x (4 GPUs) and r (3 GPUs), one type each."""
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 8}, gpu_types="aaaabbbb")
    jobs = (Job("x", 4, "classA", 0), Job("r", 3, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("migration", [None, 0.1])
def test_a_displaced_job_that_fits_no_type_is_left_out_on_a_typed_cluster(backend, migration):
    inst = _typed_pair()
    placement = {"x": [0, 1, 2, 3], "r": [4, 5, 6]}
    r = repair(inst, placement, [0], backend=backend, allow_migration=migration)
    assert r.unplaceable == {"x": "needs 4 GPUs of type 'a' or 'b'; at most 3 of one type are left free "
                                   "(7 in service, 3 kept by unaffected jobs, 0 given to displaced jobs "
                                   "before it in the queue)"}
    assert r.placements == {"r": (4, 5, 6)} and r.jobs_to_terminate == ("x",)
    assert check(inst, r) == []
    # with room on type b (r not running), x moves there whole
    r = repair(inst, {"x": [0, 1, 2, 3]}, [0], backend=backend, allow_migration=migration)
    assert not r.unplaceable and sorted(r.placements["x"]) == [4, 5, 6, 7] and check(inst, r) == []


def test_typed_displaced_jobs_are_admitted_only_if_they_fit_together():
    # GPUs 0 and 2 (type a) fail: p and q are displaced, 2 GPUs of each type are left free
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 8}, gpu_types="aaaabbbb")
    jobs = (Job("p", 2, "classA", 0), Job("q", 2, "classA", 1, allowed_types=("a",)), Job("k", 2, "classA", 2))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    placement = {"p": [0, 1], "q": [2, 3], "k": [6, 7]}
    r = repair(inst, placement, [0, 2], backend=BACKENDS[0])  # q takes a's two, p goes to b
    assert not r.unplaceable and sorted(r.placements["q"]) == [1, 3] and sorted(r.placements["p"]) == [4, 5]
    assert check(inst, r) == []
    # when both may use a only, one of them is left out with a reason (not an exception)
    inst = RoundInstance(cl, (jobs[0].__class__("p", 2, "classA", 0, allowed_types=("a",)), *jobs[1:]),
                         RoundParams(binning="none"))
    r = repair(inst, placement, [0, 2], backend=BACKENDS[0])
    assert set(r.placements) == {"p", "k"} and set(r.unplaceable) == {"q"} and check(inst, r) == []


def test_solve_ilp_reports_a_given_set_that_fits_no_type_as_infeasible():
    inst = RoundInstance(_typed_pair().cluster, (Job("x", 5, "classA"),), RoundParams(binning="none"))
    r = solve(inst, "ilp", jobs=["x"], backend=BACKENDS[0])
    assert r.status == Status.INFEASIBLE and r.placements == {}
    assert r.message == "job x needs 5 GPUs of its GPU types but fewer are free"


def _scaling_round() -> RoundInstance:
    cl = _flat([1.0] * 8)
    jobs = (Job("s", 4, "classA", 0, kind="strong-scaling", allowed_counts=(2, 4)), Job("r", 3, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


@pytest.mark.parametrize("migration", [None, 0.1])
def test_a_displaced_job_may_shrink_to_an_allowed_count(migration):
    inst = _scaling_round()
    r = repair(inst, {"s": [0, 1, 2, 3], "r": [4, 5, 6]}, [0, 1], backend=BACKENDS[0], allow_migration=migration)
    assert not r.unplaceable and r.placements["r"] == (4, 5, 6) and len(r.placements["s"]) == 2
    assert not {0, 1} & set(r.placements["s"]) and r.jobs_to_terminate == ("s",)
    assert check(inst, r) == [] and check(inst, r.to_dict()) == []
    rr = repair_round(inst, {"s": [0, 1, 2, 3], "r": [4, 5, 6]}, [0, 1], migration_per_gpu=migration)
    assert r.gpus_used == 5 and r.objective == pytest.approx(
        evaluate(rr.instance, r.placements, binned_factors(inst.cluster, "none")).cost)


def test_a_displaced_job_keeps_its_demand_when_that_fits():
    inst = _scaling_round()
    r = repair(inst, {"s": [0, 1, 2, 3], "r": [4, 5, 6]}, [0], backend=BACKENDS[0])
    assert not r.unplaceable and len(r.placements["s"]) == 4 and check(inst, r) == []
    # nothing fits even its smallest count: left out, and the reason names the counts
    r = repair(inst, {"s": [0, 1, 2, 3], "r": [4, 5, 6]}, [0, 1, 2, 7], backend=BACKENDS[0])
    assert r.unplaceable == {"s": "needs 4 GPUs (or 2); 1 are left free (4 in service, 3 kept by unaffected jobs, "
                                  "0 given to displaced jobs before it in the queue)"}
    assert check(inst, r) == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("migration", [None, 0.1])
@pytest.mark.parametrize("types", [None, "aaaabbbb"])
def test_a_repaired_result_with_a_shrunk_job_can_be_repaired_again(backend, migration, types):
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 8}, gpu_types=types)
    inst = RoundInstance(cl, _scaling_round().jobs, RoundParams(binning="none"))
    first = repair(inst, {"s": [0, 1, 2, 3], "r": [4, 5, 6]}, [0, 1], backend=backend, allow_migration=migration)
    assert first.placements == {"s": (2, 3), "r": (4, 5, 6)}
    # r loses a GPU: s, running on 2 of its allowed counts, is kept (or moved) on 2 GPUs
    for in_force in (first, first.to_dict()):
        again = repair(inst, in_force, [0, 1, 4], backend=backend, allow_migration=migration)
        assert again.placements == {"s": (2, 3), "r": (5, 6, 7)} and not again.unplaceable
        assert check(inst, again) == [] and check(inst, again.to_dict()) == []
    # s loses a GPU: re-placed at the count it ran on, not grown back to its demand (4 would fit)
    again = repair(inst, first, [2], backend=backend, allow_migration=migration)
    assert len(again.placements["s"]) == 2 and 2 not in again.placements["s"] and check(inst, again) == []


def test_a_placement_in_force_must_hold_one_of_the_jobs_counts():
    inst = _scaling_round()
    assert in_force_placement(inst, {"s": [0, 1]}) == {"s": (0, 1)}
    with pytest.raises(InstanceError, match=r"placements.s: job 's' needs one of \[2, 4\] distinct GPUs, got \[0, 1, 2\]"):
        in_force_placement(inst, {"s": [0, 1, 2]})
    with pytest.raises(InstanceError, match=r"placements.r: job 'r' needs 3 distinct GPUs, got \[4, 5\]"):
        in_force_placement(inst, {"r": [4, 5]})


def test_repair_counts_never_grow_a_job():
    job = Job("s", 4, "classA", kind="strong-scaling", allowed_counts=(1, 2, 4))
    assert repair_counts(job) == (4, 2, 1)
    assert repair_counts(replace(job, placement=(0, 1))) == (2, 1)
    assert repair_counts(Job("r", 3, "classA", placement=(0, 1, 2))) == (3,)


def test_checker_reports_a_displaced_job_left_out_that_fits_at_a_smaller_allowed_count():
    inst = _scaling_round()
    r = repair(inst, {"s": [0, 1, 2, 3], "r": [4, 5, 6]}, [0, 1], backend=BACKENDS[0])
    doc = json.loads(r.to_json())
    del doc["placements"]["s"]
    doc.pop("objective")
    assert check(inst, doc) == ["repair: job 's' needs 2 GPUs (one of its allowed counts) and 3 are still free, "
                                "but it was not placed"]
    assert [v.kind for v in violations(inst, doc)] == [Kind.LEFT_OUT]
    # with only 1 GPU left free, leaving s out is right
    r = repair(inst, {"s": [0, 1, 2, 3], "r": [4, 5, 6]}, [0, 1, 2, 7], backend=BACKENDS[0])
    assert "s" in r.unplaceable and check(inst, r) == []


def test_checker_reports_a_repair_that_grows_a_job():
    inst = _scaling_round()
    first = repair(inst, {"s": [0, 1, 2, 3], "r": [4, 5, 6]}, [0, 1], backend=BACKENDS[0])
    again = repair(inst, first, [2], backend=BACKENDS[0])  # s, shrunk to 2, loses GPU 2
    assert again.placements["r"] == (4, 5, 6) and len(again.placements["s"]) == 2 and check(inst, again) == []
    doc = json.loads(again.to_json())
    doc["placements"]["s"] = [0, 1, 3, 7]  # 4 fit (one of its allowed counts), but it ran on 2
    doc.pop("objective")
    assert check(inst, doc) == ["repair: job 's' ran on 2 GPUs and is placed on 4; a repair never grows a job"]
    assert [v.kind for v in violations(inst, doc)] == [Kind.COUNT]


# --------------------------------------------------------------------------- bound and gap
def _bound_cases() -> list[tuple[RoundInstance, dict, list[int]]]:
    cl = _flat([1.0, 1.1, 1.2, 1.0, 1.3, 1.0, 0.9, 1.0])
    jobs = (Job("a", 4, "classA", 0), Job("b", 3, "classA", 1), Job("c", 1, "classA", 2))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    placement = {"a": [0, 1, 2, 3], "b": [4, 5, 6], "c": [7]}
    typed = Cluster.from_arrays(range(8), [g // 4 for g in range(8)], {"classA": [1.0] * 8},
                                gpu_types=["A100"] * 4 + ["V100"] * 4)
    tjobs = (Job("a", 3, "classA", 0, gpu_type="A100"), Job("b", 2, "classA", 1))
    tinst = RoundInstance(typed, tjobs, RoundParams(binning="none"))
    return [
        (inst, placement, [3]),  # "a" displaced and left out, the others kept
        (inst, placement, list(range(8))),  # every GPU failed: every job left out
        (tinst, {"a": [0, 1, 2], "b": [4, 5]}, [1, 3]),  # "a" fits no A100 left
    ]


@pytest.mark.parametrize("case", range(3))
@pytest.mark.parametrize("migration", [None, 0.5])
def test_bound_and_gap_agree_with_the_status_when_a_displaced_job_is_left_out(case, migration):
    inst, placement, failed = _bound_cases()[case]
    r = repair(inst, placement, failed, allow_migration=migration, backend=BACKENDS[0])
    assert r.unplaceable and r.status == Status.OPTIMAL
    assert r.bound is not None and r.bound <= r.objective + 1e-9
    assert r.gap is not None and r.gap <= OPTIMALITY_TOL  # optimal: within the tolerance of OPTIMAL
    assert r.gap == pytest.approx(relative_gap(r.objective, r.bound, r.gpus_used), abs=1e-12)
    if migration is None:  # nothing left to solve once the left-out job is set aside: bound = objective
        assert r.bound == pytest.approx(r.objective, abs=1e-9) and r.gap == 0.0


def test_cli_repair_prints_a_bound_equal_to_the_objective_when_a_job_is_left_out(tmp_path, capsys):
    inst, placement, failed = _bound_cases()[0]
    ip, pp, out = tmp_path / "round.json", tmp_path / "placement.json", tmp_path / "out.json"
    save_instance(inst, ip)
    pp.write_text(json.dumps({"placements": placement}))
    for f in (failed, list(range(8))):
        rc, text, err = run(capsys, "repair", ip, pp, "--failed", ",".join(map(str, f)), "--out", out)
        assert rc == 0, err
        doc = json.loads(out.read_text())
        assert doc["status"] == "optimal" and doc["objective"] > 0
        assert doc["bound"] == pytest.approx(doc["objective"]) and doc["gap"] == pytest.approx(0.0, abs=1e-9)
        assert "gap 0.000%" in text


@st.composite
def _pipeline_repairs(draw):
    """One or two servers of two to four GPUs with uneven factors; one to three jobs of one to
    three GPUs, most of two or more a two-stage pipeline, each in force on GPUs in any order (so
    in any stage map); one or two of their GPUs fail; a restart cost of 0, 5 or 36 s; a
    migration price."""
    levels = (0.9, 1.0, 1.0, 1.25, 1.5)
    per, servers = draw(st.integers(2, 4)), draw(st.integers(1, 2))
    g = per * servers
    cl = Cluster.from_arrays(range(g), [p // per for p in range(g)],
                             {"classA": [draw(st.sampled_from(levels)) for _ in range(g)]})
    pool = list(draw(st.permutations(range(g))))
    jobs, in_force = [], {}
    for k in range(draw(st.integers(1, 3))):
        d = draw(st.integers(1, 3))
        pipe = None
        if d >= 2 and draw(st.integers(0, 3)):
            cut = draw(st.integers(1, d - 1))
            pipe = Pipeline((draw(st.sampled_from((0.5, 1.0, 2.0, 3.0))), draw(st.sampled_from((0.5, 1.0, 2.0)))),
                            (cut, d - cut))
        jobs.append(Job(k, d, "classA", k, (1.0, 1.3, 1.3), pipeline=pipe))
        if len(pool) >= d:
            in_force[k], pool = pool[:d], pool[d:]
    used = sorted(gpu for gpus in in_force.values() for gpu in gpus)
    failed = draw(st.lists(st.sampled_from(used or [0]), min_size=1, max_size=2, unique=True))
    params = RoundParams(binning="none", restart_cost=draw(st.sampled_from((0.0, 5.0, 36.0))))
    return RoundInstance(cl, tuple(jobs), params), in_force, failed, draw(st.sampled_from((0.001, 0.01, 0.1, 0.5)))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_pipeline_repairs())
def test_migration_with_pipelines_reaches_the_least_cost_over_sets_and_stage_maps(case):
    """``--allow-migration`` on rounds with pipeline jobs (the stage program with keep variables):
    the answer passes the checker and its cost is the least, over every GPU set and stage map of
    the jobs it places, of the repair round's cost (:func:`pal_opt.cost.evaluate`, which charges
    a pipeline re-mapped on its own GPUs the move), within the gap of an optimal status."""
    inst, in_force, failed, price = case
    if not in_force:  # (nothing in force: nothing fails)
        return
    res = repair(inst, in_force, failed, allow_migration=price, backend="highs")
    assert check(inst, res) == []
    rr = repair_round(inst, in_force_placement(inst, in_force), failed, migration_per_gpu=price)
    factors = binned_factors(rr.instance.cluster, "none")
    placed = [j for j in rr.instance.jobs if j.id in res.placements]
    free = tuple(int(p) for p in np.flatnonzero(rr.instance.cluster.free_mask))

    def lists(job, avail):
        for combo in itertools.combinations(avail, job.demand):
            seen = set()
            for perm in itertools.permutations(combo):
                key = tuple(frozenset(perm[a:b]) for a, b in (job.pipeline.slices() if job.pipeline else [(0, job.demand)]))
                if key not in seen:
                    seen.add(key)
                    yield perm

    def best(k, avail, chosen):
        if k == len(placed):
            return evaluate(rr.instance, chosen, factors).cost
        return min((best(k + 1, tuple(x for x in avail if x not in gids), {**chosen, placed[k].id: gids})
                    for gids in lists(placed[k], avail)), default=math.inf)

    least = best(0, free, {})
    assert res.objective >= least - 1e-7
    if res.status == Status.OPTIMAL:
        assert res.objective <= least + OPTIMALITY_TOL * max(res.gpus_used, 1) + 1e-7


def test_a_migrating_repair_under_a_short_limit_on_typed_gpus_is_never_worse_than_keeping() -> None:
    """The answer that keeps the unaffected jobs is the solve's given start; under a limit too
    short to build the program it was not priced, and the answer placed nothing (every job
    ended, objective 130 against 4.79)."""
    from pal_opt.generate import generate_typed_instance

    inst = generate_typed_instance("aws:2x4,rtx:1x8", 12, seed=10, guaranteed_fraction=0.3)
    placed = solve(inst, "ilp")
    for limit in (1e-4, 0.05):
        res = repair(inst, placed, [9, 14], allow_migration=0.3, time_limit=limit)
        assert check(inst, res) == []
        assert res.objective <= res.info["repair"]["keep_objective"] + 1e-9
        assert len(res.placements) == len(placed.placements)


def test_a_repair_keeps_a_running_pipelines_stage_map_from_the_file() -> None:
    """The placement in force was read by its list order only: a file whose ``stages`` map GPU 0
    to stage 1 was repaired as if GPU 0 ran stage 0, re-mapping the pipeline without terminating
    it and pricing it at 3 ln 1.5 instead of 0 (review)."""
    c = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.5] + [1.0] * 7})
    inst = RoundInstance(c, (Job("p", 3, "classA", pipeline=Pipeline(stage_times=(2.0, 1.0), replicas=(2, 1))),
                             Job("g", 2, "classA")), RoundParams(binning="none"))
    doc = {"placements": {"p": [0, 1, 2], "g": [4, 5]}, "stages": {"p": [[1, 2], [0]]}, "admission": "given"}
    res = repair(inst, doc, [5])
    assert res.stages["p"] == ((1, 2), (0,)) and res.jobs_to_terminate == ("g",)
    assert res.objective == pytest.approx(0.0) and check(inst, res) == []
    bad = {**doc, "stages": {"p": [[1, 2], [3]]}}
    with pytest.raises(InstanceError, match=r"stages\.p: the stages hold GPUs \[1, 2, 3\], but placements lists"):
        repair(inst, bad, [5])


def test_an_unaffected_job_keeps_its_gpus_in_the_order_it_had_them(monkeypatch):
    """Its GPUs are its ranks: an answer that keeps a job's GPUs but lists them in another
    order must not re-order them (the whole-round program returns GPU sets, sorted)."""
    import pal_opt.ilp

    cl = _flat([1.0] * 8)
    inst = RoundInstance(cl, (Job("x", 2, "classA"), Job("d", 1, "classA", 1)), RoundParams(binning="none"))
    real = pal_opt.ilp.solve_ilp

    def sorted_sets(instance, **kw):
        res = real(instance, **kw)
        res.placements = {k: tuple(sorted(v)) for k, v in res.placements.items()}
        return res

    monkeypatch.setattr(pal_opt.ilp, "solve_ilp", sorted_sets)
    r = repair(inst, {"x": [3, 1], "d": [4]}, [4], backend=BACKENDS[0], allow_migration=0.5)
    assert r.placements["x"] == (3, 1) and r.info["repair"]["migrated"] == []


def test_settling_sends_back_a_move_that_saves_exactly_what_it_costs(monkeypatch):
    """A move whose saving equals the migration price (x leaves a GPU of factor e^0.5 for one of
    1.0 at a price of 0.5) did not pay either: it is settled back ("no more than it cost")."""
    import pal_opt.ilp

    cl = _flat([math.exp(0.5), 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    inst = RoundInstance(cl, (Job("x", 1, "classA"), Job("d", 1, "classA", 1)), RoundParams(binning="none"))
    real = pal_opt.ilp.solve_ilp

    def even(instance, **kw):
        res = real(instance, **kw)
        if "start" in kw:  # the whole-round solve: x moved to an idle GPU of factor 1.0
            idle = min({1, 2, 3, 5, 6, 7} - {g for gs in res.placements.values() for g in gs})
            res.placements = {**res.placements, "x": (idle,)}
        return res

    monkeypatch.setattr(pal_opt.ilp, "solve_ilp", even)
    r = repair(inst, {"x": [0], "d": [4]}, [4], backend=BACKENDS[0], allow_migration=0.5)
    assert r.placements["x"] == (0,) and r.info["repair"]["migrated"] == []
