"""The same round, proven optimal by different backends, gives the same placement with
``canonical=True`` (``pal-opt solve --canonical``); by default each keeps the solver's own.

Rounds whose optimum has ties (equally good servers, identical jobs, a running job free to move,
equal rack and cluster penalties, one-GPU jobs on either type, ``ilp-preempt``'s backfill on the
GPUs the program left, which of equal running jobs ``ilp-preempt`` preempts): without
:mod:`pal_opt.ilp.canonical`, HiGHS, CP-SAT and CBC each prove their own placement optimal and
the placements differ (under ``ilp-preempt`` the backfill's cost too, round ``preempt-typed``).
Real solvers, rounds of 16-32 GPUs.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pal_opt.ilp.preempt as preempt_module
import pal_opt.ilp.solve as solve_module
from pal_opt import RoundInstance, RoundPolicy, solve
from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cli import main
from pal_opt.cost import CostTerm, evaluate, register_cost_term, unregister_cost_term
from pal_opt.errors import OptionError
from pal_opt.generate import generate_instance, generate_typed_instance
from pal_opt.ilp import available_backends
from pal_opt.ilp.canonical import ALREADY, CHANGED, NOT_FOUND, OUT_OF_TIME, canonical_optimum, canonicalise
from pal_opt.io import save_instance
from pal_opt.io.traces import TraceJob
from pal_opt.model import Cluster, GpuState, Job, Pipeline, RoundParams, placement_type_error
from pal_opt.result import Status
from pal_opt.simulate import SimConfig, simulate

BACKENDS = ("highs", "cpsat", "cbc")
#: The project's tolerance on an objective (tests/test_ilp_agreement.py: the geometric mean).
AGREE = 1e-6


def _prioritised(inst: RoundInstance, priority: dict[str, int]) -> RoundInstance:
    return replace(inst, jobs=tuple(replace(j, priority=priority.get(str(j.id), 0)) for j in inst.jobs))


def _round(name: str) -> RoundInstance:
    if name == "plain":
        return generate_instance(8, 4, 13, seed=292569159, busy_fraction=0.1)
    if name == "racked":
        return generate_instance(4, 8, 12, racks=2, seed=257375014)
    if name == "typed":
        return generate_typed_instance("aws:4x4,rtx:2x8", 18, seed=325916016, busy_fraction=0.1,
                                       guaranteed_fraction=0.3)
    if name == "running":
        return generate_instance(4, 4, 7, seed=450311511, busy_fraction=0.25, running_fraction=0.5,
                                 restart_cost=30.0)
    if name == "preempt":
        base = generate_instance(8, 2, 7, seed=714888661, busy_fraction=0.1, running_fraction=0.7)
        return _prioritised(base, {"0": 1, "1": 1, "2": 2, "3": 2, "4": 1, "6": 2})
    assert name == "preempt-typed"
    base = generate_typed_instance("a:4x4,b:4x4", 14, seed=106066670, busy_fraction=0.25, running_fraction=0.7,
                                   guaranteed_fraction=0.3)
    return _prioritised(base, {"0": 1, "2": 2, "3": 1, "5": 1, "6": 1, "7": 1, "8": 2, "9": 1, "10": 1,
                               "11": 2, "12": 1, "13": 2})


CASES = [("plain", "ilp"), ("racked", "ilp"), ("typed", "ilp"), ("running", "ilp"), ("preempt", "ilp-preempt"),
         ("preempt-typed", "ilp-preempt")]


def _need_backends() -> None:
    missing = [b for b in BACKENDS if b not in available_backends()]
    if missing:
        pytest.skip(f"backends not installed: {', '.join(missing)}")


@pytest.mark.parametrize(("name", "method"), CASES, ids=[c[0] for c in CASES])
def test_backends_that_prove_a_round_optimal_give_one_placement(name: str, method: str) -> None:
    _need_backends()
    inst = _round(name)
    results = {b: solve(inst, method, backend=b, time_limit=120, canonical=True) for b in BACKENDS}
    for b, r in results.items():
        if method == "ilp":
            assert r.status == Status.OPTIMAL, (b, r.message)
        else:  # its backfill makes the result FEASIBLE: the program itself was proven optimal
            assert "optimal" in str(r.info["solver_status"]).lower(), (b, r.info["solver_status"])
        assert check(inst, r) == [], b
    ref = results["highs"]
    for b, r in results.items():
        assert abs(math.expm1((r.objective - ref.objective) / max(ref.gpus_used, 1))) <= AGREE, (b, r.objective)
        assert r.placements == ref.placements, b
        assert r.jobs_to_terminate == ref.jobs_to_terminate, b


# ---------------------------------------------------------------- the canonical representative
def _flat() -> RoundInstance:
    c = Cluster.from_arrays(range(8), [0, 0, 0, 0, 1, 1, 1, 1], {"classA": [1.0, 1.0, 1.2, 1.2, 1.0, 1.0, 1.0, 1.0]})
    jobs = (Job("a", 2, "classA"), Job("b", 2, "classA"), Job("c", 1, "classA"))
    return RoundInstance(c, jobs, RoundParams(binning="none"))


def test_every_optimum_of_a_pattern_maps_to_one_placement_of_the_same_cost() -> None:
    inst = _flat()
    fac = binned_factors(inst.cluster, "none")
    optima = [{"a": (0, 1), "b": (4, 5), "c": (6,)}, {"a": (4, 5), "b": (0, 1), "c": (7,)},
              {"a": (6, 7), "b": (4, 5), "c": (0,)}, {"a": (0, 1), "b": (6, 7), "c": (4,)}]
    cost = evaluate(inst, optima[0], fac).cost
    found = [canonical_optimum(inst, p, fac) for p in optima]
    assert all(f == found[0] for f in found)
    assert evaluate(inst, found[0], fac).cost == pytest.approx(cost, abs=1e-9)
    assert all(evaluate(inst, p, fac).cost == pytest.approx(cost, abs=1e-9) for p in optima)
    assert canonical_optimum(inst, found[0], fac) == found[0]  # a representative is its own


def test_a_pinned_job_and_a_kept_running_job_stay_where_they_are() -> None:
    c = Cluster.uniform(2, 4, {"classA": [1.0] * 8})
    jobs = (Job("r", 2, "classA", placement=(6, 7)), Job("w", 2, "classA"), Job("p", 2, "classA"))
    inst = RoundInstance(c, jobs, RoundParams(binning="none", restart_cost=30))
    fac = binned_factors(c, "none")
    given = {"r": (6, 7), "w": (4, 5), "p": (2, 3)}
    out = canonical_optimum(inst, given, fac, pinned={"p"})
    assert out["r"] == (6, 7) and out["p"] == (2, 3) and out["w"] == (0, 1)
    assert evaluate(inst, out, fac).cost == pytest.approx(evaluate(inst, given, fac).cost, abs=1e-9)


def test_a_running_job_free_to_move_stays_on_its_gpus_when_they_are_as_good() -> None:
    c = Cluster.uniform(2, 4, {"classA": [1.0] * 8})
    inst = RoundInstance(c, (Job("r", 2, "classA", placement=(6, 7)), Job("w", 2, "classA")),
                         RoundParams(binning="none"))
    fac = binned_factors(c, "none")
    out = canonical_optimum(inst, {"r": (0, 1), "w": (2, 3)}, fac)  # moving is free: r was moved
    assert out["r"] == (6, 7)
    res = solve(inst, "ilp", canonical=True)
    assert res.placements["r"] == (6, 7) and res.jobs_to_terminate == () and check(inst, res) == []


# ---------------------------------------------------------------- opt-in: the default is the solver's
def test_by_default_the_placement_is_the_one_decode_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[dict[Any, tuple[int, ...]]] = []
    real_decode = solve_module.decode

    def recording_decode(*args: Any, **kwargs: Any) -> dict[Any, tuple[int, ...]]:
        decoded.append(real_decode(*args, **kwargs))
        return decoded[-1]

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("canonicalise called without canonical=True")

    monkeypatch.setattr(solve_module, "decode", recording_decode)
    monkeypatch.setattr(solve_module, "canonicalise", refused)
    monkeypatch.setattr(preempt_module, "canonicalise", refused)
    res = solve(_round("plain"), "ilp", backend="highs")
    assert res.status == Status.OPTIMAL and res.info["incumbent"] == "solver"
    assert "canonical" not in res.info and res.placements == decoded[-1]
    pre = solve(_round("preempt"), "ilp-preempt", backend="highs")
    assert "optimal" in str(pre.info["solver_status"]).lower() and "canonical" not in pre.info


def test_canonical_true_reaches_the_round_policy_and_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = solve_module.canonicalise

    def counted(*args: Any, **kwargs: Any) -> tuple[dict[Any, tuple[int, ...]], str]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(solve_module, "canonicalise", counted)
    inst = _round("plain")
    res = RoundPolicy("ilp", backend="highs", canonical=True).place(inst)
    assert res.status == Status.OPTIMAL and "canonical" in res.info and calls
    cluster = Cluster.uniform(2, 4, {"classB": [1.0, 1.0, 1.2, 1.2, 1.0, 1.0, 1.0, 1.0]})
    trace = [TraceJob(id=i, demand=d, submit_time=0.0, iterations=100.0, model="BERT", perfclass="classB",
                      iter_time=1.0) for i, d in enumerate((2, 1, 2))]
    infos: list[dict[str, Any]] = []
    config = SimConfig(policy="ilp", backend="highs", ilp_options={"canonical": True})
    out = simulate(trace, cluster, config, validate=True, on_round=lambda r, p: infos.append(p.info))
    assert out.summary["n_completed"] == 3 and any("canonical" in i for i in infos)
    calls.clear()
    assert "canonical" not in RoundPolicy("ilp", backend="highs").place(inst).info and not calls


def test_canonical_cli_gives_one_placement_json_whichever_backend(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _need_backends()
    path = tmp_path / "plain.json"
    save_instance(_round("plain"), path)
    placements = {}
    for b in BACKENDS:
        out = tmp_path / f"{b}.json"
        assert main(["solve", str(path), "--method", "ilp", "--backend", b, "--canonical", "--quiet",
                     "--out", str(out)]) == 0
        doc = json.loads(out.read_text())
        assert doc["status"] == "optimal" and doc["info"]["canonical"] in (CHANGED, ALREADY)
        placements[b] = json.dumps(doc["placements"], sort_keys=True)
    capsys.readouterr()
    assert placements["cpsat"] == placements["highs"] and placements["cbc"] == placements["highs"]


@pytest.mark.parametrize("method", ["ilp-partitioned", "pal"])
def test_canonical_given_to_a_method_that_does_not_take_it_is_refused_in_one_line(
        method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plain.json"
    save_instance(_round("plain"), path)
    out = tmp_path / "p.json"
    assert main(["solve", str(path), "--method", method, "--canonical", "--out", str(out)]) == 2
    got, err = capsys.readouterr()
    assert got == "" and err == f"pal-opt: error: option(s) --canonical do not apply to method {method!r}\n"
    assert not out.exists()
    with pytest.raises(OptionError, match="do not apply"):
        solve(_round("plain"), method, canonical=True)


def test_canonicalise_says_what_it_did_and_gives_up_at_its_deadline() -> None:
    import time

    from pal_opt.model import Cluster, Job, RoundInstance, RoundParams

    c = Cluster.from_arrays(range(6), [0, 0, 1, 1, 2, 2], {"classA": [1.0] * 6})
    inst = RoundInstance(c, (Job("a", 2, "classA"), Job("b", 1, "classA")), RoundParams(binning="none"))
    moved, what = canonicalise(inst, {"a": (4, 5), "b": (3,)}, c.factors)
    assert (moved, what) == ({"a": (0, 1), "b": (2,)}, CHANGED)
    assert canonicalise(inst, moved, c.factors) == (moved, ALREADY)
    # a deadline already passed keeps the given placement and says so
    assert canonicalise(inst, {"a": (4, 5), "b": (3,)}, c.factors, deadline=time.monotonic() - 1) == (
        {"a": (4, 5), "b": (3,)}, OUT_OF_TIME)
    assert NOT_FOUND.startswith("kept: ") and OUT_OF_TIME.startswith("kept: ")



# ---------------------------------------------------------------- rounds with pipeline jobs
def _with_pipeline(seed: int) -> RoundInstance:
    """A generated round with a 4-GPU pipeline job at the head of the queue."""
    base = generate_instance(4, 4, 7, seed=seed)
    pipe = Job("pipe", 4, "classA", pipeline=Pipeline((2.0, 1.0), (2, 2)))
    return replace(base, jobs=(pipe, *base.jobs))


_SHAPES = (Pipeline((2.0, 1.0), (2, 2)), Pipeline((3.0, 2.0, 1.0), (1, 2, 1)), Pipeline((1.0, 1.0, 2.0), (2, 1, 1)),
           Pipeline((1.5, 1.0), (1, 2)), Pipeline((1.0, 2.0), (3, 3)))


def _with_pipelines(seed: int) -> RoundInstance:
    """A generated round (two racks every third seed, some GPUs busy on odd seeds) with one or
    two pipeline jobs of two or three stages, of class A or B, at the head of the queue."""
    rng = np.random.default_rng(seed)
    base = generate_instance(4, 4, 6, racks=2 if seed % 3 == 0 else 0, seed=seed, busy_fraction=0.1 * (seed % 2))
    shapes = rng.choice(len(_SHAPES), size=1 + seed % 2, replace=False)
    pipes = tuple(Job(f"p{i}", _SHAPES[k].gpus, str(rng.choice(["classA", "classB"])), pipeline=_SHAPES[k])
                  for i, k in enumerate(shapes))
    return replace(base, jobs=(*pipes, *base.jobs))


def _running_pipelines(seed: int) -> RoundInstance:
    """A generated round with running jobs, at the head of the queue (a restart cost on odd
    seeds, two racks every third seed), whose running jobs of two GPUs or more are two-stage
    pipelines."""
    base = generate_instance(4, 4, 7, seed=seed, running_fraction=0.6, busy_fraction=0.1,
                             restart_cost=30.0 if seed % 2 else 0.0, racks=2 if seed % 3 == 0 else 0)
    jobs = [replace(j, pipeline=Pipeline((2.0, 1.0), (j.demand // 2, j.demand - j.demand // 2)))
            if j.demand >= 2 and j.placement is not None else j for j in base.jobs]
    return replace(base, jobs=tuple(sorted(jobs, key=lambda j: j.placement is None)))


#: 32 seeded rounds.  Before the pipelines were placed canonically (they kept the stage map their
#: solver chose) the backends placed a pipeline differently on 7 of them: ("one", 3), ("one", 4)
#: (2 of these 16: on other servers; on the same GPUs with the stages swapped), ("varied", 0),
#: ("varied", 2), ("varied", 4), ("running", 1), ("running", 4).
PIPELINE_ROUNDS = ([("one", s) for s in range(16)] + [("varied", s) for s in range(8)]
                   + [("running", s) for s in range(8)])
_MAKERS = {"one": _with_pipeline, "varied": _with_pipelines, "running": _running_pipelines}


@pytest.mark.parametrize(("kind", "seed"), PIPELINE_ROUNDS, ids=[f"{k}-{s}" for k, s in PIPELINE_ROUNDS])
def test_backends_give_one_placement_on_every_round_with_pipelines(kind: str, seed: int) -> None:
    # The stage program's proven optimum, canonicalised: the pipelines too are placed again from
    # their pattern (pace, level, types), stage by stage, so each backend's optimum -- whatever
    # server it put a pipeline on and whichever stage map -- gives the one placement, at its cost.
    _need_backends()
    inst = _MAKERS[kind](seed)
    assert any(j.pipeline is not None for j in inst.jobs)
    results = {b: solve(inst, "ilp", backend=b, time_limit=120, canonical=True) for b in BACKENDS}
    ref = results["highs"]
    for b, r in results.items():
        assert r.status == Status.OPTIMAL and r.info["program"] == "stage", b
        assert r.info["canonical"] in (CHANGED, ALREADY), (b, r.info.get("canonical"))
        assert check(inst, r) == [], b
        assert r.placements == ref.placements and r.stages == ref.stages, b
        assert r.jobs_to_terminate == ref.jobs_to_terminate, b
        assert r.objective == pytest.approx(ref.objective, abs=1e-6), b
    plain = solve(inst, "ilp", backend="cpsat", time_limit=120)
    assert "canonical" not in plain.info  # off by default: the solver's own optimum, at the same cost
    assert plain.objective == pytest.approx(ref.objective, abs=1e-6)


def _two_servers() -> tuple[RoundInstance, dict[str, Any]]:
    """Two servers, two free GPUs of factor 1.0 on each and one of 1.5: a pipeline whose slow
    stage must get factor 1.0 and whose fast one has slack for 1.5, and a one-GPU job."""
    c = Cluster.from_arrays(range(6), [0, 0, 0, 1, 1, 1], {"classA": [1.0, 1.5, 1.0, 1.0, 1.0, 1.5]})
    jobs = (Job("p", 3, "classA", pipeline=Pipeline((2.0, 1.0), (1, 2))), Job("g", 1, "classA"))
    return RoundInstance(c, jobs, RoundParams(binning="none")), c.factors


def test_every_stage_map_and_server_of_a_pipeline_pattern_maps_to_one_placement() -> None:
    inst, fac = _two_servers()
    optima = [{"p": (0, 1, 2), "g": (3,)}, {"p": (2, 0, 1), "g": (4,)}, {"p": (3, 4, 5), "g": (0,)},
              {"p": (4, 5, 3), "g": (2,)}, {"p": (0, 2, 1), "g": (4,)}]
    cost = evaluate(inst, optima[0], fac).cost
    assert all(evaluate(inst, p, fac).cost == pytest.approx(cost, abs=1e-12) for p in optima)
    found = [canonical_optimum(inst, p, fac) for p in optima]
    assert all(f == found[0] for f in found), found
    assert found[0] == {"p": (0, 1, 2), "g": (3,)}  # the slow stage on a 1.0 GPU, the 1.5 one on the slack stage
    assert evaluate(inst, found[0], fac).cost == pytest.approx(cost, abs=1e-12)
    assert canonical_optimum(inst, found[0], fac) == found[0]


def test_a_pipeline_is_placed_stage_by_stage_when_the_greedy_misses() -> None:
    # The greedy puts the larger pipeline on the server with fewer GPUs it may use (1) and then
    # finds no server for the gang; the exact search gives the gang server 1, the pipeline server
    # 0 with its slow stage on GPU 0, the only 1.0 GPU there.
    c = Cluster.from_arrays(range(13), [0] * 7 + [1] * 6, {"classA": [1.0] + [2.0] * 6 + [1.0] * 6})
    inst = RoundInstance(c, (Job("a", 6, "classA", pipeline=Pipeline((2.0, 1.0), (1, 5))), Job("b", 5, "classA")),
                         RoundParams(binning="none"))
    one, what = canonicalise(inst, {"a": (0, 6, 5, 4, 3, 2), "b": (12, 11, 10, 9, 8)}, c.factors)
    assert what == CHANGED and one == {"a": (0, 1, 2, 3, 4, 5), "b": (7, 8, 9, 10, 11)}
    assert canonicalise(inst, {"a": (0, 1, 3, 4, 5, 6), "b": (7, 8, 9, 10, 12)}, c.factors) == (one, CHANGED)
    assert canonicalise(inst, one, c.factors) == (one, ALREADY)


def test_a_running_pipeline_stays_on_its_stage_map_when_moving_costs_or_it_is_as_good() -> None:
    c = Cluster.from_arrays(range(6), [0, 0, 0, 1, 1, 1], {"classA": [1.0, 1.5, 1.0, 1.0, 1.0, 1.5]})
    pipe = Pipeline((2.0, 1.0), (1, 2))
    for restart in (0.0, 30.0):
        inst = RoundInstance(c, (Job("r", 3, "classA", pipeline=pipe, placement=(4, 3, 5)), Job("g", 1, "classA")),
                             RoundParams(binning="none", restart_cost=restart))
        kept = canonical_optimum(inst, {"r": (4, 3, 5), "g": (0,)}, c.factors)
        assert kept == {"r": (4, 3, 5), "g": (0,)}, restart  # not (3, 4, 5): the same pace, but re-mapped
        # moved to server 0: its own GPUs are as good (with a restart cost, cheaper), so it goes back
        assert canonical_optimum(inst, {"r": (0, 1, 2), "g": (3,)}, c.factors) == kept, restart


def test_two_pipelines_of_one_size_and_kinds_but_other_stage_splits_are_not_taken_for_twins() -> None:
    # x (1 GPU of factor 1.0, 2 of up to 2.0) fits on either server, y (2 of 1.0, 1 of up to 2.0)
    # only on server 1.  The exact search took them for twins (same caps, same 3 GPUs, same
    # level) and tried y only on servers from x's on: x tried first on server 1 (fewest GPUs),
    # then 0, y then never on 1, so no placement was found and each placement was kept as given.
    c = Cluster.from_arrays(range(7), [0, 0, 0, 0, 1, 1, 1], {"classA": [1.0, 2.0, 2.0, 2.0, 1.0, 1.0, 2.0]})
    jobs = (Job("x", 3, "classA", pipeline=Pipeline((2.0, 1.0), (1, 2))),
            Job("y", 3, "classA", pipeline=Pipeline((2.0, 1.0), (2, 1))))
    inst = RoundInstance(c, jobs, RoundParams(binning="none"))
    one, what = canonicalise(inst, {"x": (0, 2, 3), "y": (5, 4, 6)}, c.factors)
    assert (one, what) == ({"x": (0, 1, 2), "y": (4, 5, 6)}, CHANGED)
    assert canonicalise(inst, one, c.factors) == (one, ALREADY)


# ---------------------------------------------------------------- ilp-preempt: the choice among equal patterns
def _preempt_pipelines(seed: int) -> RoundInstance:
    """A generated round of 16 GPUs with running jobs (a restart cost on odd seeds, two racks every
    third seed), every job of priority 0-2 at random; the running jobs of two GPUs or more are
    two-stage pipelines on seeds 4k and 4k+1, and a waiting 4-GPU pipeline of priority 2 heads the
    queue on seeds 4k+1 and 4k+2."""
    rng = np.random.default_rng(1000 + seed)
    base = generate_instance(4, 4, 8, seed=seed, running_fraction=0.6, busy_fraction=0.1,
                             restart_cost=30.0 if seed % 2 else 0.0, racks=2 if seed % 3 == 0 else 0)
    jobs = []
    for j in base.jobs:
        priority = int(rng.integers(0, 3))
        if j.placement is not None and j.demand >= 2 and seed % 4 < 2:
            j = replace(j, pipeline=Pipeline((2.0, 1.0), (j.demand // 2, j.demand - j.demand // 2)))
        jobs.append(replace(j, priority=priority))
    if seed % 4 in (1, 2):
        jobs.insert(0, Job("pipe", 4, "classA", pipeline=Pipeline((2.0, 1.0), (2, 2)), priority=2))
    return replace(base, jobs=tuple(jobs))


def _equal_victims(seed: int) -> RoundInstance:
    """A generated round of 16 GPUs whose jobs are all of one class, the running ones of priority
    0 and the waiting ones of priority 1 (a restart cost on odd seeds, some GPUs busy on odd
    seeds, two racks every third): running jobs of one size are equal victims."""
    rng = np.random.default_rng(2000 + seed)
    base = generate_instance(4, 4, 8, seed=seed, running_fraction=0.7, busy_fraction=0.1 * (seed % 2),
                             restart_cost=30.0 if seed % 2 else 0.0, racks=2 if seed % 3 == 0 else 0)
    klass = str(rng.choice(["classA", "classB", "classD"]))
    return replace(base, jobs=tuple(replace(j, perfclass=klass, priority=0 if j.placement is not None else 1)
                                    for j in base.jobs))


def _typed_preempt(seed: int) -> RoundInstance:
    """A generated round on two GPU types of 8 GPUs each (a quarter of the GPUs busy), 70% of
    the jobs running, 30% guaranteed one type, every job of priority 0-2 at random."""
    rng = np.random.default_rng(seed)
    base = generate_typed_instance("a:2x4,b:2x4", 14, seed=seed, busy_fraction=0.25, running_fraction=0.7,
                                   guaranteed_fraction=0.3)
    return replace(base, jobs=tuple(replace(j, priority=int(rng.integers(0, 3))) for j in base.jobs))


#: Seeded ``ilp-preempt`` rounds on which, before the choice among optima of equal cost was made
#: canonical, HiGHS, CP-SAT and CBC gave different placements with ``canonical=True``: which of
#: two equal running jobs is preempted (or kept where it runs, with a restart cost), or a running
#: job free to move and a waiting job of its kind trading GPUs.  (Of seeds 0-99 of the first kind
#: and 100-199 of the second 7 and 16 differed.)  Then, before the caps of a class were dealt
#: again and the type of a job that may take either chosen canonically
#: (``pal_opt.ilp.canonical._dealt``), jobs of other sizes trading GPUs of two speeds: ("victims", 126),
#: ("victims", 192) (and 78 of seeds 0-99); on typed rounds (:func:`_typed_preempt`, seeds 0-49)
#: 13 of 50 differed, by such trades between jobs of one class of other sizes or types, and a job
#: of several GPUs on either type.  0 of each now.  ("typed", 86) and ("typed", 92) (of seeds
#: 50-149, where 31 differed, 4 then, 2 then) differed until equal running jobs of other type
#: constraints were given their roles together too (which of them is preempted); ("typed", 121)
#: and ("typed", 149), the 2 left, until those roles were handed out only where a job's types
#: allow (a job guaranteed type 'a' and a rigid one of its class and size: the later in the
#: queue is preempted, the earlier given GPUs of 'a'): 0 of seeds 0-149 now.
PREEMPT_ROUNDS = ([("pipelines", s) for s in (2, 46, 60, 72, 78, 86, 90)]
                  + [("victims", s) for s in (78, 108, 120, 122, 126, 132, 136, 141, 161, 179, 183, 192)]
                  + [("typed", s) for s in (0, 5, 7, 10, 11, 12, 14, 24, 29, 32, 34, 42, 43, 86, 92, 121, 149)])
_PREEMPT_MAKERS = {"pipelines": _preempt_pipelines, "victims": _equal_victims, "typed": _typed_preempt}


@pytest.mark.parametrize(("kind", "seed"), PREEMPT_ROUNDS, ids=[f"{k}-{s}" for k, s in PREEMPT_ROUNDS])
def test_backends_choose_one_of_equal_victims_under_ilp_preempt(kind: str, seed: int) -> None:
    _need_backends()
    inst = _PREEMPT_MAKERS[kind](seed)
    results = {b: solve(inst, "ilp-preempt", backend=b, time_limit=120, canonical=True) for b in BACKENDS}
    ref = results["highs"]
    for b, r in results.items():
        assert "optimal" in str(r.info["solver_status"]).lower(), (b, r.info["solver_status"])
        assert r.info["canonical"] in (CHANGED, ALREADY), (b, r.info["canonical"])
        assert check(inst, r) == [], b
        assert r.objective == pytest.approx(r.info["program_objective"], abs=1e-6) or r.info["backfilled"], b
        assert r.placements == ref.placements and r.jobs_to_terminate == ref.jobs_to_terminate, b
        assert r.objective == pytest.approx(ref.objective, abs=1e-6), b


def test_of_two_equal_victims_the_later_one_in_the_queue_is_preempted() -> None:
    # a and b run on two GPUs each, equal in every way; h (priority 1) needs two of the four.
    # Either optimum -- a preempted and h on its GPUs, or b -- gives b preempted, a kept.
    c = Cluster.uniform(1, 4, {"classA": [1.0, 1.0, 1.2, 1.2]})
    jobs = (Job("a", 2, "classA", placement=(2, 3)), Job("b", 2, "classA", placement=(0, 1)),
            Job("h", 2, "classA", priority=1))
    for restart in (0.0, 30.0):
        inst = RoundInstance(c, jobs, RoundParams(binning="none", restart_cost=restart))
        one = {"a": (2, 3), "h": (0, 1)}
        other = {"b": (0, 1), "h": (2, 3)}
        cost = evaluate(inst, one, c.factors).cost
        assert evaluate(inst, other, c.factors).cost == pytest.approx(cost, abs=1e-12)
        assert canonicalise(inst, other, c.factors, optional=("a", "b")) == (one, CHANGED), restart
        assert canonicalise(inst, one, c.factors, optional=("a", "b")) == (one, ALREADY), restart
        # without optional= the set of jobs placed is the caller's: nothing is preempted instead
        assert canonicalise(inst, other, c.factors)[0].keys() == other.keys()
        res = solve(inst, "ilp-preempt", canonical=True)
        assert res.placements == one and res.jobs_to_terminate == ("b",) and check(inst, res) == []


@pytest.mark.parametrize("seed", [10, 13])
def test_a_newly_kept_job_does_not_push_a_typed_job_onto_gpus_of_another_type(seed: int) -> None:
    """``canonical=True`` gives a running job back its own GPUs when moving is charged; a job the
    optimum had put on one of them takes another GPU left free.  On a round of two GPU types that
    GPU was of the other type: a guaranteed 8-GPU job of type 'a' ended on GPUs of 'a' and 'b'
    (``check``: not of its type, does not mix types), priced below the proven optimum.  Such a
    choice is now refused and the optimum kept as the solver gave it or placed canonically."""
    inst = generate_typed_instance("a:2x4,b:2x4", 12, seed=seed, guaranteed_fraction=0.4, running_fraction=0.6,
                                   restart_cost=float(seed % 3) * 40.0)
    plain = solve(inst, "ilp", backend="highs")
    res = solve(inst, "ilp", backend="highs", canonical=True)
    assert plain.status == res.status == "optimal"
    assert check(inst, res) == []
    assert res.objective == pytest.approx(plain.objective, rel=1e-9)


# ---------------------------------------------------------------- levels dealt, types chosen
def test_jobs_of_other_sizes_trading_levels_map_to_one_placement() -> None:
    # A job of two GPUs on the two fast ones and two of one GPU on the slow ones costs what the
    # other way round does (2 ln 1.0 + 2 ln 1.2): the levels are dealt in queue order, the
    # fastest that leaves the rest dealable, so both give the first job the fast GPUs.
    c = Cluster.from_arrays(range(4), [0, 0, 0, 0], {"classA": [1.0, 1.0, 1.2, 1.2]})
    inst = RoundInstance(c, (Job("big", 2, "classA"), Job("s1", 1, "classA"), Job("s2", 1, "classA")),
                         RoundParams(binning="none"))
    one = {"big": (0, 1), "s1": (2,), "s2": (3,)}
    other = {"big": (2, 3), "s1": (0,), "s2": (1,)}
    assert evaluate(inst, other, c.factors).cost == pytest.approx(evaluate(inst, one, c.factors).cost, abs=1e-12)
    assert canonicalise(inst, other, c.factors) == (one, CHANGED)
    assert canonicalise(inst, one, c.factors) == (one, ALREADY)
    # a running job free to move is first dealt the level of its own GPUs: s2 stays on GPU 1,
    # so the two fast GPUs cannot both go to big, which takes the slow ones
    ran = replace(inst, jobs=(inst.jobs[0], inst.jobs[1], replace(inst.jobs[2], placement=(1,))))
    assert canonicalise(ran, one, c.factors) == ({"big": (2, 3), "s1": (0,), "s2": (1,)}, CHANGED)


def test_a_job_that_may_take_either_type_is_given_one_whichever_the_optimum_chose() -> None:
    # r (4 GPUs) and w (2) may each run on type a or b, not both; either way round costs the
    # same.  In queue order each takes the first type that leaves the rest placeable: r on a.
    c = Cluster.from_arrays(range(8), [0, 0, 0, 0, 1, 1, 1, 1], {"classA": [1.0] * 8}, gpu_types="aaaabbbb")
    inst = RoundInstance(c, (Job("r", 4, "classA"), Job("w", 2, "classA")), RoundParams(binning="none"))
    one = {"r": (0, 1, 2, 3), "w": (4, 5)}
    assert canonicalise(inst, {"r": (4, 5, 6, 7), "w": (0, 1)}, c.factors) == (one, CHANGED)
    assert canonicalise(inst, {"r": (4, 5, 6, 7), "w": (2, 3)}, c.factors) == (one, CHANGED)
    assert canonicalise(inst, one, c.factors) == (one, ALREADY)


def test_of_equal_victims_of_other_type_constraints_the_later_one_is_preempted() -> None:
    # r (rigid) and g (guaranteed type b) run on the two free b GPUs; h (priority 1, type b) needs
    # one of them.  Preempting either costs the same; r may run on g's GPU, so the later one, g,
    # is preempted whichever the optimum chose.  (Before, HiGHS preempted g, CP-SAT and CBC r.)
    c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, state=[1, 1, 0, 0], gpu_types="aabb")
    jobs = (Job("r", 1, "classA", placement=(2,)),
            Job("g", 1, "classA", placement=(3,), kind="guaranteed", gpu_type="b"),
            Job("h", 1, "classA", priority=1, kind="guaranteed", gpu_type="b"))
    inst = RoundInstance(c, jobs, RoundParams(binning="none"))
    one = {"r": (2,), "h": (3,)}
    other = {"g": (3,), "h": (2,)}
    assert evaluate(inst, other, c.factors).cost == pytest.approx(evaluate(inst, one, c.factors).cost, abs=1e-12)
    assert canonicalise(inst, other, c.factors, optional=("r", "g")) == (one, CHANGED)
    assert canonicalise(inst, one, c.factors, optional=("r", "g")) == (one, ALREADY)
    _need_backends()
    for b in BACKENDS:
        res = solve(inst, "ilp-preempt", backend=b, canonical=True)
        assert res.placements == one and res.jobs_to_terminate == ("g",) and check(inst, res) == [], b


def test_of_equal_victims_the_later_one_is_preempted_when_the_earlier_may_not_run_on_its_gpus() -> None:
    # g (guaranteed type a) runs on GPU 0, r (rigid) on GPU 2 of type b; h (priority 1) needs one
    # of the two.  Preempting either costs the same.  g may not run on r's GPU, so the roles are
    # handed out by type: r, the later, is preempted and g keeps a GPU of type a.  (Before, a
    # pattern was the job's type group, g's {a} and r's {a, b}, so the two optima had other
    # roles: each was kept as its solver gave it.)
    c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, state=[0, 1, 0, 1], gpu_types="aabb")
    jobs = (Job("g", 1, "classA", placement=(0,), kind="guaranteed", gpu_type="a"),
            Job("r", 1, "classA", placement=(2,)),
            Job("h", 1, "classA", priority=1))
    inst = RoundInstance(c, jobs, RoundParams(binning="none"))
    one = {"g": (0,), "h": (2,)}
    other = {"r": (2,), "h": (0,)}
    assert evaluate(inst, other, c.factors).cost == pytest.approx(evaluate(inst, one, c.factors).cost, abs=1e-12)
    assert canonicalise(inst, other, c.factors, optional=("g", "r")) == (one, CHANGED)
    assert canonicalise(inst, one, c.factors, optional=("g", "r")) == (one, ALREADY)
    # (ilp-preempt's typed queue rule makes only g optional here, the victim on h's claim of
    # type a; ("typed", 121) and ("typed", 149) above are rounds where the solvers chose.)


# ---------------------------------------------------------------- which of equal running jobs moves
def _typed_restart(seed: int) -> RoundInstance:
    """:func:`_typed_preempt`'s round with a restart cost of 0-80 s drawn per seed: moving a
    running job is charged, so of equal running jobs (one class and size) one keeps its GPUs
    and another moves, and which one is a tie whenever their GPUs' patterns are traded with
    the jobs placed."""
    rng = np.random.default_rng(seed)
    base = generate_typed_instance("a:2x4,b:2x4", 14, seed=seed, busy_fraction=0.25, running_fraction=0.7,
                                   guaranteed_fraction=0.3, restart_cost=float(rng.integers(0, 81)))
    return replace(base, jobs=tuple(replace(j, priority=int(rng.integers(0, 3))) for j in base.jobs))


#: Seeds of :func:`_typed_restart` on which HiGHS, CP-SAT and CBC gave different placements with
#: ``canonical=True`` (9 of seeds 0-199, 0 now) before a charged running job's keep was given out
#: in the matching of roles (``pal_opt.ilp.canonical._HandOut``: the earlier in the queue keeps its
#: GPUs whenever the other jobs can still take the roles left; before, the first ones whose own
#: GPUs' pattern was among the roles were kept unchecked, and a later one that had to stay then
#: found no role, so each solver's choice was kept).  157 and 184 also needed a keep in a role
#: whose GPUs differ from the job's own only in type (a rigid job and one guaranteed type 'a').
TYPED_RESTART = [12, 37, 65, 72, 154, 157, 167, 174, 184]


@pytest.mark.parametrize("seed", TYPED_RESTART)
def test_backends_choose_one_of_equal_running_jobs_to_move_at_a_restart_charge(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _need_backends()
    inst = _typed_restart(seed)
    assert inst.params.restart_cost > 0
    fac = binned_factors(inst.cluster, inst.params.binning)
    real = preempt_module.canonicalise
    costs: list[tuple[float, float]] = []

    def priced(instance: RoundInstance, placements: Any, factors: Any, **kw: Any) -> tuple[dict[Any, Any], str]:
        out = real(instance, placements, factors, **kw)
        costs.append((evaluate(instance, placements, fac).cost, evaluate(instance, out[0], fac).cost))
        return out

    monkeypatch.setattr(preempt_module, "canonicalise", priced)
    results = {b: solve(inst, "ilp-preempt", backend=b, time_limit=120, canonical=True) for b in BACKENDS}
    assert len(costs) == len(BACKENDS)
    for solver_cost, canonical_cost in costs:  # the canonical placement costs what the solver's does
        assert canonical_cost == pytest.approx(solver_cost, abs=1e-9)
    ref = results["highs"]
    for b, r in results.items():
        assert "optimal" in str(r.info["solver_status"]).lower(), (b, r.info["solver_status"])
        assert r.info["canonical"] in (CHANGED, ALREADY), (b, r.info["canonical"])
        assert check(inst, r) == [], b
        assert r.objective == pytest.approx(ref.objective, abs=1e-6), b
    for b, r in results.items():
        assert r.placements == ref.placements and r.jobs_to_terminate == ref.jobs_to_terminate, b


def _three_running() -> RoundInstance:
    """r1 and r2 (rigid, one GPU of class C) run on the two GPUs of type b, of factors 1.0 and
    1.2; r3 (their kind) on a GPU of type a; g, guaranteed type b, waits.  g must take r1's or
    r2's GPU, so one of them moves to the free GPU of type a (factor 1.0) at the restart charge;
    either way the jobs hold one GPU of 1.2 and three of 1.0 and one is moved: the same cost."""
    c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classC": [1.0, 1.0, 1.0, 1.2]}, gpu_types="aabb")
    jobs = (Job("r1", 1, "classC", placement=(2,)), Job("r2", 1, "classC", placement=(3,)),
            Job("r3", 1, "classC", placement=(1,)), Job("g", 1, "classC", kind="guaranteed", gpu_type="b"))
    return RoundInstance(c, jobs, RoundParams(binning="none", restart_cost=30))


def test_of_equal_running_jobs_the_earlier_keeps_its_gpus_when_one_must_move() -> None:
    # Either optimum gives r1 (the earlier) its GPU back, r2 moved, g on r2's GPU.  Before, r1 and
    # r2 were both kept from the roles unchecked (each own GPU's pattern was among them: r1's was
    # g's), r3 then had no role left, and each optimum was kept as given: CP-SAT moved r1.
    inst = _three_running()
    fac = inst.cluster.factors
    one = {"r1": (2,), "r2": (0,), "r3": (1,), "g": (3,)}
    other = {"r1": (0,), "r2": (3,), "r3": (1,), "g": (2,)}
    assert evaluate(inst, other, fac).cost == pytest.approx(evaluate(inst, one, fac).cost, abs=1e-12)
    assert canonicalise(inst, other, fac) == (one, CHANGED)
    assert canonicalise(inst, one, fac) == (one, ALREADY)
    _need_backends()
    for b in BACKENDS:
        res = solve(inst, "ilp", backend=b, canonical=True)
        assert res.status == Status.OPTIMAL and res.placements == one and res.jobs_to_terminate == ("r2",), b
        assert check(inst, res) == [], b


def test_of_a_rigid_and_a_typed_running_job_the_earlier_keeps_its_gpus_of_another_type() -> None:
    # r (rigid, on GPU 1 of type a, factor 1.2) and g (guaranteed b, on GPU 3 of type b, 1.2);
    # w waits.  Moving one of them to GPU 4 (b, 1.0) at the restart charge is cheaper than
    # moving none; either costs the same, the kept pattern (1.2) differing only in its type.
    # r, the earlier, keeps its GPU whichever the optimum kept.  (Before, the patterns kept,
    # of types a and b, were other roles: each optimum was kept as given, and every backend's
    # own optimum moves r.)
    c = Cluster.from_arrays(range(6), [0, 0, 0, 1, 1, 1], {"classC": [1.0, 1.2, 1.2, 1.2, 1.0, 1.0]},
                            gpu_types="aaabbb")
    jobs = (Job("w", 1, "classC"), Job("r", 1, "classC", placement=(1,)), Job("s", 1, "classC", placement=(5,)),
            Job("g", 1, "classC", placement=(3,), kind="guaranteed", gpu_type="b"))
    inst = RoundInstance(c, jobs, RoundParams(binning="none", restart_cost=30))
    one = {"w": (0,), "r": (1,), "s": (5,), "g": (4,)}
    other = {"w": (0,), "r": (4,), "s": (5,), "g": (3,)}
    assert evaluate(inst, other, c.factors).cost == pytest.approx(evaluate(inst, one, c.factors).cost, abs=1e-12)
    assert canonicalise(inst, other, c.factors) == (one, CHANGED)
    assert canonicalise(inst, one, c.factors) == (one, ALREADY)
    res = solve(inst, "ilp", backend="highs", canonical=True)
    assert res.placements == one and res.jobs_to_terminate == ("g",) and check(inst, res) == []



def _one_gpu_optima(inst: RoundInstance) -> tuple[float, list[dict[Any, tuple[int, ...]]]]:
    """Every optimum of a round of jobs of one GPU (all placements of its jobs on its free GPUs
    enumerated) and its cost; none if no placement holds every job's types."""
    fac = inst.cluster.factors
    ids = [j.id for j in inst.jobs]
    gpus = [int(g) for g, state in zip(inst.cluster.gpu_ids, inst.cluster.state, strict=True) if state == GpuState.FREE]
    valid = [dict(zip(ids, ((g,) for g in on), strict=True)) for on in itertools.permutations(gpus, len(ids))]
    valid = [p for p in valid if all(placement_type_error(inst.cluster, replace(j, placement=p[j.id])) is None
                                     for j in inst.jobs)]
    priced = [(evaluate(inst, p, fac).cost, p) for p in valid]
    best = min((c for c, _ in priced), default=math.inf)
    return best, [p for c, p in priced if c <= best + 1e-9]


def _kept_and_waiting(factors: list[float], jobs: tuple[Job, ...]) -> RoundInstance:
    """Six GPUs of one GPU each, of types a (0-2) and b (3-5), a restart charge of 30."""
    c = Cluster.from_arrays(range(6), [0, 0, 0, 1, 1, 1], {"classC": factors}, gpu_types="aaabbb")
    return RoundInstance(c, jobs, RoundParams(binning="none", restart_cost=30.0))


def _g(jid: str, gpu_type: str, placement: tuple[int, ...] | None = None) -> Job:
    return Job(jid, 1, "classC", placement=placement, kind="guaranteed", gpu_type=gpu_type)


#: Rounds of :func:`_one_gpu_rounds`' kind (found by enumerating every optimum of 298 of them) whose
#: optima mapped to two placements before the roles of jobs alike but for their types were given
#: out by their price alone (``pal_opt.ilp.canonical._repriced``): a kept running job traded levels
#: with a waiting job (or a moved one) of other type constraints, which then needed GPUs of
#: another type than the role it traded into, and each optimum was its own representative.  With
#: each round, the placement every optimum maps to: the earliest running job keeps its GPUs.
KEPT_AND_WAITING = {
    # r1 (guaranteed b, on GPU 3 at 1.2) kept and r0 (rigid) moved to a 1.0 GPU, w0 (rigid) on the
    # other 1.0, was kept as given when r0 had moved to type a and w0 to type b
    "rigid-waiting": (_kept_and_waiting([1.0, 1.2, 1.2, 1.2, 1.0, 1.0], (
        Job("w0", 1, "classC"), Job("r0", 1, "classC", placement=(1,)), Job("r2", 1, "classC", placement=(5,)),
        _g("r1", "b", (3,)))), {"w0": (0,), "r0": (1,), "r2": (5,), "r1": (4,)}),
    # r0 (rigid, on 1 at 1.2) kept and w0 (guaranteed a) on another 1.2 of type a, or r0 moved to
    # GPU 3 (b, 1.0) and r1 (guaranteed b, on 4 at 1.2) kept: w0 would need type a for r1's level
    "typed-waiting": (_kept_and_waiting([1.2, 1.2, 1.2, 1.0, 1.2, 1.0], (
        Job("r0", 1, "classC", placement=(1,)), Job("r2", 1, "classC", placement=(5,)), _g("w0", "a"),
        _g("r1", "b", (4,)))), {"r0": (1,), "r2": (5,), "w0": (0,), "r1": (3,)}),
    # r0 (rigid, on 2 at 1.0) kept, r1 (guaranteed b) moved to 5 (1.0), w0 (guaranteed a) at 1.2;
    # or r1 kept at 1.2, r0 moved to 5 and w0 on r0's GPU 2 at 1.0
    "three-jobs": (_kept_and_waiting([1.2, 1.2, 1.0, 1.2, 1.2, 1.0], (
        Job("r0", 1, "classC", placement=(2,)), _g("r1", "b", (4,)), _g("w0", "a"))),
        {"r0": (2,), "r1": (5,), "w0": (0,)}),
}


@pytest.mark.parametrize("name", sorted(KEPT_AND_WAITING))
def test_a_level_traded_between_a_kept_job_and_one_of_other_types_maps_to_one_placement(name: str) -> None:
    inst, expected = KEPT_AND_WAITING[name]
    fac = inst.cluster.factors
    best, optima = _one_gpu_optima(inst)
    assert len(optima) >= 2 and evaluate(inst, expected, fac).cost == pytest.approx(best, abs=1e-12)
    assert any(p["r0"] != inst.job_by_id["r0"].placement for p in optima)  # (an optimum moves r0)
    for p in optima:
        out, what = canonicalise(inst, p, fac)
        assert out == expected, p
        assert what == (ALREADY if p == expected else CHANGED)
        assert evaluate(inst, out, fac).cost == pytest.approx(best, abs=1e-9)
    _need_backends()
    for b in BACKENDS:
        res = solve(inst, "ilp", backend=b, canonical=True)
        assert res.status == Status.OPTIMAL and res.placements == expected and check(inst, res) == [], b


def _audited(factors: list[float], restart: float, jobs: tuple[Job, ...], failed: int | None = None) -> RoundInstance:
    """:func:`_kept_and_waiting`'s round with restart charge ``restart`` and GPU ``failed`` out of service."""
    c = Cluster.from_arrays(range(6), [0, 0, 0, 1, 1, 1], {"classC": factors}, gpu_types="aaabbb",
                            state=[GpuState.FAILED if g == failed else GpuState.FREE for g in range(6)])
    return RoundInstance(c, jobs, RoundParams(binning="none", restart_cost=restart))


def _r(jid: str, gpu: int) -> Job:
    return Job(jid, 1, "classC", placement=(gpu,))


#: The rounds of :func:`_one_gpu_rounds`' kind (drawn with numpy, seeds 0-399: 382 with a valid
#: placement, every optimum enumerated) whose optima a mutation audit found mapped to two
#: placements (by seed), with the placement every optimum maps to now.  In 257, 307 and 374 the
#: canonical placement of one optimum, canonicalised again, gave the other (not a fixed point);
#: those 7 were mended by :func:`pal_opt.ilp.canonical._repriced`.  In 249 and 342 GPU 3 is out
#: of service, so r0 (guaranteed b) moves and one of two rigid running jobs moves too: an optimum
#: whose moved jobs took the fast and slow levels the other way round (the rigid job that moved
#: on the level of the earlier one's GPUs) was its own representative, until the move charges
#: were laid on the roles' patterns by the patterns alone (``_pooled``): the earlier one keeps.
AUDITED = {
    56: (_audited([1.2, 1.2, 1.0, 1.2, 1.0, 1.0], 30.0, (_g("w1", "b"), _r("r0", 2), _g("w0", "a"), _g("r1", "b", (3,)))),
         {"w1": (4,), "r0": (2,), "w0": (0,), "r1": (5,)}),
    136: (_audited([1.0, 1.2, 1.2, 1.2, 1.0, 1.2], 10.0, (_g("w0", "a"), _r("r2", 0), _g("r0", "b", (3,)),
                                                          _g("r1", "b", (5,)))), {"w0": (1,), "r2": (0,), "r0": (3,), "r1": (4,)}),
    183: (_audited([1.2, 1.2, 1.2, 1.0, 1.2, 1.0], 30.0, (_r("r1", 4), _r("r2", 3), _g("r0", "b", (5,)), _g("w0", "a")),
                   failed=5), {"r1": (4,), "r2": (1,), "r0": (3,), "w0": (0,)}),
    249: (_audited([1.2, 1.0, 1.2, 1.0, 1.0, 1.2], 30.0, (_r("r2", 5), _r("r1", 4), _g("r0", "b", (3,)), _g("w0", "a")),
                   failed=3), {"r2": (5,), "r1": (1,), "r0": (4,), "w0": (0,)}),
    257: (_audited([1.0, 1.2, 1.2, 1.0, 1.2, 1.2], 10.0, (_g("r2", "b", (4,)), _g("w0", "a"), _r("r1", 5), _r("r0", 2))),
          {"r2": (4,), "w0": (0,), "r1": (5,), "r0": (3,)}),
    274: (_audited([1.2, 1.2, 1.2, 1.2, 1.2, 1.0], 10.0, (_r("r0", 0), _g("w0", "a"), _g("r1", "a", (1,)), _r("r2", 3))),
          {"r0": (0,), "w0": (2,), "r1": (1,), "r2": (5,)}),
    307: (_audited([1.0, 1.0, 1.2, 1.0, 1.2, 1.2], 10.0, (_g("r2", "a", (2,)), _r("r0", 5), _g("r1", "b", (4,)), _g("w0", "a"))),
          {"r2": (2,), "r0": (1,), "r1": (3,), "w0": (0,)}),
    342: (_audited([1.0, 1.0, 1.2, 1.0, 1.2, 1.0], 10.0, (_r("r2", 2), _g("r0", "b", (3,)), _g("w0", "a"), _r("r1", 5)),
                   failed=3), {"r2": (2,), "r0": (5,), "w0": (0,), "r1": (1,)}),
    374: (_audited([1.0, 1.2, 1.0, 1.2, 1.0, 1.2], 30.0, (_g("r1", "a", (0,)), _r("r0", 3), _g("r2", "a", (1,)),
                                                          Job("w0", 1, "classC"))), {"r1": (0,), "r0": (3,), "r2": (2,), "w0": (4,)}),
}


@pytest.mark.parametrize("seed", sorted(AUDITED))
def test_every_optimum_of_an_audited_round_maps_to_one_fixed_point(seed: int) -> None:
    """Each optimum of the round maps to the one placement, at the optimum's cost, and that
    placement is its own representative: ``canonicalise(canonicalise(x)) == canonicalise(x)``."""
    inst, expected = AUDITED[seed]
    fac = inst.cluster.factors
    best, optima = _one_gpu_optima(inst)
    assert len(optima) >= 2 and expected in optima
    for p in optima:
        out, what = canonicalise(inst, p, fac)
        assert out == expected, p
        assert what == (ALREADY if p == expected else CHANGED)
        assert canonicalise(inst, out, fac) == (out, ALREADY)
        assert evaluate(inst, out, fac).cost == pytest.approx(best, abs=1e-9)


@st.composite
def _one_gpu_rounds(draw: st.DrawFn) -> RoundInstance:
    """Six GPUs of two types (a: 0-2, b: 3-5) of factor 1.0 or 1.2, a restart cost, 2-3 running
    jobs of one GPU of one class (rigid, or guaranteed their GPU's type) and 1-2 waiting ones
    (rigid, or guaranteed a or b): equal running jobs of which one may have to move."""
    c = Cluster.from_arrays(range(6), [0, 0, 0, 1, 1, 1], {"classC": draw(st.lists(st.sampled_from((1.0, 1.2)),
                                                                                 min_size=6, max_size=6))},
                            gpu_types="aaabbb")
    own = draw(st.lists(st.integers(0, 5), min_size=2, max_size=3, unique=True))
    jobs = [Job(f"r{k}", 1, "classC", placement=(g,), **({"kind": "guaranteed", "gpu_type": "ab"[g // 3]}
                                                         if draw(st.booleans()) else {}))
            for k, g in enumerate(own)]
    for k in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(("rigid", "a", "b")))
        jobs.append(Job(f"w{k}", 1, "classC", **({} if kind == "rigid" else {"kind": "guaranteed", "gpu_type": kind})))
    order = draw(st.permutations(range(len(jobs))))
    return RoundInstance(c, tuple(jobs[i] for i in order),
                         RoundParams(binning="none", restart_cost=draw(st.sampled_from((10.0, 30.0)))))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_one_gpu_rounds())
def test_canonicalising_any_optimum_keeps_its_cost(inst: RoundInstance) -> None:
    """Every optimum of a small round (all placements of its jobs enumerated), canonicalised,
    costs exactly the optimum, is a valid placement and is its own representative: which of
    equal running jobs keeps its GPUs and which moves is given out again at no change of cost
    (``_HandOut``'s docstring)."""
    fac = inst.cluster.factors
    ids = [j.id for j in inst.jobs]
    best, optima = _one_gpu_optima(inst)
    assume(optima)  # (more jobs guaranteed a type than it has GPUs)
    for p in optima:
        out, what = canonicalise(inst, p, fac)
        assert what in (CHANGED, ALREADY) and out.keys() == p.keys()
        assert len({g for gids in out.values() for g in gids}) == len(ids)
        assert all(placement_type_error(inst.cluster, replace(j, placement=out[j.id])) is None for j in inst.jobs)
        assert evaluate(inst, out, fac).cost == pytest.approx(best, abs=1e-9)
        assert canonicalise(inst, out, fac)[0] == out  # (a fixed point)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), restart=st.sampled_from((10.0, 30.0, 80.0)), guaranteed=st.sampled_from((0.0, 0.4)))
def test_canonicalising_never_changes_the_cost_of_an_optimum(seed: int, restart: float, guaranteed: float) -> None:
    """On small typed rounds with running jobs and a restart charge, the canonical representative
    of HiGHS's proven optimum costs exactly what it does (the roles handed out are a matching of
    equal-cost roles, the pattern placed again at no higher cost: ``_HandOut``'s docstring), and
    is its own representative; of any other placement (PAL's, ``ilp-preempt``'s backfilled one
    with its victims optional) it never costs more."""
    inst = generate_typed_instance("a:1x4,b:1x4", 8, seed=seed, busy_fraction=0.125, running_fraction=0.6,
                                   guaranteed_fraction=guaranteed, restart_cost=restart)
    fac = binned_factors(inst.cluster, inst.params.binning)
    best = solve(inst, "ilp", backend="highs", time_limit=60)
    assert best.status == Status.OPTIMAL
    out, what = canonicalise(inst, best.placements, fac)
    assert what in (CHANGED, ALREADY) and out.keys() == best.placements.keys()
    assert evaluate(inst, out, fac).cost == pytest.approx(evaluate(inst, best.placements, fac).cost, abs=1e-9)
    assert canonicalise(inst, out, fac) == (out, ALREADY)
    running = [j.id for j in inst.jobs if j.placement is not None]
    for given_ in (solve(inst, "pal").placements, solve(inst, "ilp-preempt", backend="highs", time_limit=60).placements):
        other, _ = canonicalise(inst, given_, fac, optional=[j for j in running if j not in given_])
        assert evaluate(inst, other, fac).cost <= evaluate(inst, given_, fac).cost + 1e-9


def test_a_running_job_whose_gpu_failed_is_not_kept_on_it() -> None:
    """r1 ran on GPU 4, now failed; r0 and r2, its equals, run on GPUs 3 and 5 of the same
    pattern (1.2, type b); w0 waits.  Whichever optimum is given, r1 (earlier than r0) is not
    given back its failed GPU: a job may keep only GPUs it could keep (``keep_positions``)."""
    c = Cluster.from_arrays(range(6), [0, 0, 0, 1, 1, 1], {"classC": [1.2, 1.0, 1.0, 1.2, 1.2, 1.2]},
                            gpu_types="aaabbb", state=[0, 0, 0, 0, 2, 0])
    jobs = (Job("w0", 1, "classC"), Job("r1", 1, "classC", placement=(4,)), Job("r2", 1, "classC", placement=(5,)),
            Job("r0", 1, "classC", placement=(3,)))
    inst = RoundInstance(c, jobs, RoundParams(binning="none", restart_cost=10))
    fac = c.factors
    best = {"w0": (1,), "r1": (2,), "r2": (5,), "r0": (3,)}
    other = {"w0": (2,), "r1": (1,), "r2": (5,), "r0": (3,)}
    assert evaluate(inst, other, fac).cost == pytest.approx(evaluate(inst, best, fac).cost, abs=1e-12)
    assert canonicalise(inst, best, fac) == (best, ALREADY)
    assert canonicalise(inst, other, fac) == (best, CHANGED)


class _R1OnGpu2(CostTerm):
    """A throwaway term pricing one job by its GPU: r1 pays 0.1 on GPU 2 (its own)."""

    name = "r1-on-gpu-2"

    def placed(self, instance: RoundInstance, job: Job, pos: np.ndarray, level: int, max_factor: float) -> float:
        return 0.1 * float(np.sum(pos == 2)) if job.id == "r1" else 0.0


def test_roles_given_out_again_are_kept_only_at_no_higher_cost() -> None:
    """:func:`_three_running`, with a term that charges r1 for its own GPU: the roles given out
    again (r1 kept, r2 moved) would cost 0.1 more than the optimum given, which is kept as it is."""
    inst = _three_running()
    fac = inst.cluster.factors
    one = {"r1": (2,), "r2": (0,), "r3": (1,), "g": (3,)}
    other = {"r1": (0,), "r2": (3,), "r3": (1,), "g": (2,)}
    register_cost_term(_R1OnGpu2())
    try:
        assert evaluate(inst, one, fac).cost == pytest.approx(evaluate(inst, other, fac).cost + 0.1, abs=1e-12)
        # (not "kept: the canonical placement would cost more": the roles are priced and dropped
        # before the patterns are placed again from the optimum given)
        assert canonicalise(inst, other, fac) == (other, ALREADY)
    finally:
        unregister_cost_term(_R1OnGpu2.name)
    assert canonicalise(inst, other, fac) == (one, CHANGED)


def test_of_running_jobs_alike_but_for_types_the_earlier_keeps_its_gpu_in_a_role_of_another_type() -> None:
    """r1 and r2 (guaranteed type a) run on GPUs 0 (1.0) and 1 (1.2); r0 (rigid, between them in
    the queue) on GPU 3 (type b, 1.2); w0 waits.  Given the optimum that keeps r2 and moves r0 to
    GPU 2, r0 (the earlier, alike but for its types) keeps its GPU instead, in r2's role of
    type a, and r2 moves there, at the same cost.  (A kept job tries the role of its own GPUs'
    pattern before one of another type: with r1 kept in w0's role of type b instead, the roles
    gave no placement and the optimum given was kept.)"""
    c = Cluster.from_arrays(range(6), [0, 0, 0, 1, 1, 1], {"classC": [1.0, 1.2, 1.0, 1.2, 1.0, 1.2]},
                            gpu_types="aaabbb")
    jobs = (Job("r1", 1, "classC", placement=(0,), kind="guaranteed", gpu_type="a"),
            Job("r0", 1, "classC", placement=(3,)),
            Job("r2", 1, "classC", placement=(1,), kind="guaranteed", gpu_type="a"), Job("w0", 1, "classC"))
    inst = RoundInstance(c, jobs, RoundParams(binning="none", restart_cost=30))
    fac = c.factors
    kept = {"r1": (0,), "r0": (3,), "r2": (2,), "w0": (4,)}
    moved = {"r1": (0,), "r0": (2,), "r2": (1,), "w0": (4,)}
    assert evaluate(inst, moved, fac).cost == pytest.approx(evaluate(inst, kept, fac).cost, abs=1e-12)
    assert canonicalise(inst, moved, fac) == (kept, CHANGED)
    assert canonicalise(inst, kept, fac) == (kept, ALREADY)
