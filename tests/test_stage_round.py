"""Rounds with pipeline jobs: the stage program (:mod:`pal_opt.ilp.stageround`).

* Random small rounds with pipeline jobs (hypothesis): the program's optimum equals a brute force
  over every assignment of GPU sets *and* stage maps, priced by :mod:`pal_opt.cost`; the result
  passes the checker with its stages.
* Rounds of gangs only: the same optimum as the round program (:func:`pal_opt.ilp.solve_ilp`).
* ``solve_ilp`` sends rounds with pipelines to it, on every backend; ``best_stage_order`` is the
  best stage map of a fixed set; a restart cost gives running jobs keep variables (more in
  ``tests/test_stage_keep.py``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ilp_rounds import rounds

from pal_opt.admission import admit
from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import CostTerm, evaluate, job_slowdown_pos, register_cost_term, unregister_cost_term
from pal_opt.ilp import available_backends, solve_ilp
from pal_opt.ilp.stageround import (
    alone_bound,
    best_stage_order,
    bounded,
    build_stage_round,
    encode_stage_round,
    solve_stage_round,
)
from pal_opt.model import Cluster, GpuState, Job, Pipeline, RoundInstance, RoundParams
from pal_opt.result import Status

_SET = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
STAGE_TIMES = st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0])


@st.composite
def pipeline_rounds(draw: Any) -> RoundInstance:
    """A small round (``ilp_rounds.rounds`` without running jobs) in which some jobs of two or
    more GPUs become pipelines of two or three stages."""
    inst = draw(rounds(max_gpus=8, max_jobs=3, max_demand=4, restart=False))
    jobs = []
    for job in inst.jobs:
        if job.demand >= 2 and draw(st.booleans()):
            n = draw(st.integers(2, min(3, job.demand)))
            cuts = sorted(draw(st.sets(st.integers(1, job.demand - 1), min_size=n - 1, max_size=n - 1)))
            reps = tuple(b - a for a, b in zip([0, *cuts], [*cuts, job.demand], strict=True))
            job = Job(job.id, job.demand, job.perfclass, job.position, job.locality,
                      pipeline=Pipeline(tuple(draw(STAGE_TIMES) for _ in reps), reps))
        jobs.append(job)
    return RoundInstance(inst.cluster, tuple(jobs), inst.params, name="pipelines")


def brute_force(instance: RoundInstance, admitted: list[int], factors: Mapping[str, np.ndarray]) -> float:
    """Least round cost over every assignment of disjoint GPU lists, in every order (every stage
    map) for a pipeline job, each job priced by :func:`pal_opt.cost.job_slowdown_pos`."""
    cl = instance.cluster
    free = [int(p) for p in np.flatnonzero(cl.state == GpuState.FREE)]
    best = [math.inf]

    def options(j: int, avail: tuple[int, ...]) -> Any:
        job = instance.jobs[j]
        for combo in itertools.combinations(avail, job.demand):
            yield from (itertools.permutations(combo) if job.pipeline is not None else [combo])

    def rec(k: int, avail: tuple[int, ...], acc: float) -> None:
        if k == len(admitted):
            best[0] = min(best[0], acc)
            return
        j = admitted[k]
        job = instance.jobs[j]
        for gpus in options(j, avail):
            s = job_slowdown_pos(cl, np.asarray(factors[job.perfclass]), job, np.asarray(gpus))
            rec(k + 1, tuple(p for p in avail if p not in gpus), acc + job.demand * math.log(s))

    rec(0, tuple(free), 0.0)
    return best[0]


@settings(max_examples=60, **_SET)  # type: ignore[arg-type]
@given(pipeline_rounds())
def test_the_stage_program_finds_the_least_cost_over_sets_and_stage_maps(inst: RoundInstance) -> None:
    admitted = admit(inst, "prefix")
    factors = binned_factors(inst.cluster, "none")
    res = solve_stage_round(inst, admitted, factors, admission="prefix")
    assert res.status == Status.OPTIMAL
    assert res.objective == pytest.approx(brute_force(inst, admitted, factors), abs=1e-9)
    assert check(inst, res) == []
    assert set(res.stages) == {inst.jobs[i].id for i in admitted if inst.jobs[i].pipeline is not None}
    sr = build_stage_round(inst, admitted, factors)  # the answer, encoded back, prices the same
    x = encode_stage_round(sr, res.placements)
    assert x is not None and sr.program.is_feasible(x)
    assert sr.program.objective(x) == pytest.approx(res.objective, abs=1e-9)


@settings(max_examples=40, **_SET)  # type: ignore[arg-type]
@given(rounds(max_gpus=12, max_jobs=5, restart=False))
def test_gang_rounds_give_the_round_programs_optimum(inst: RoundInstance) -> None:
    admitted = admit(inst, "prefix")
    if not admitted:
        return
    ref = solve_ilp(inst)
    res = solve_stage_round(inst, admitted, binned_factors(inst.cluster, "none"), admission="prefix")
    assert res.objective == pytest.approx(ref.objective, abs=1e-9)
    assert res.stages == {} and check(inst, res) == []


def _round() -> RoundInstance:
    """Two servers of four GPUs; server 0 has two slow GPUs (1.5).  Job p (4 GPUs) is a pipeline
    whose second stage has slack (times 2 and 1, on 3 + 1 GPUs); job g a 4-GPU gang."""
    f = [1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5]
    cl = Cluster.from_arrays(range(8), [0, 0, 0, 0, 1, 1, 1, 1], {"classA": f})
    jobs = (Job("p", 4, "classA", 0, pipeline=Pipeline((2.0, 1.0), (3, 1))), Job("g", 4, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_solve_ilp_places_stages(backend: str) -> None:
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")
    inst = _round()
    res = solve_ilp(inst, backend=backend)
    # each job inside one server: the pipeline puts its server's slow GPU on its slack stage
    # (pace 1), the gang pays 1.5 for the other (spanning servers would cost 1.7)
    assert res.status == Status.OPTIMAL and res.info["program"] == "stage"
    assert check(inst, res) == []
    stages = res.stages["p"]
    assert len(stages) == 2 and len(stages[0]) == 3 and len(stages[1]) == 1
    assert res.objective == pytest.approx(4 * math.log(1.5))  # the gang pays for a slow GPU; p does not


def test_best_stage_order_of_a_fixed_set() -> None:
    inst = _round()
    job = inst.job_by_id["p"]
    f = inst.cluster.factors["classA"]
    pos = {g: g for g in range(8)}
    order = best_stage_order(job, (1, 0, 2, 3), f, pos)
    assert order == (0, 2, 3, 1)  # the slow GPU 1 goes to the 1-unit stage
    assert best_stage_order(inst.job_by_id["g"], (3, 1), f, pos) == (3, 1)
    best = min(job_slowdown_pos(inst.cluster, f, job, np.asarray(p)) for p in itertools.permutations((1, 0, 2, 3)))
    assert job_slowdown_pos(inst.cluster, f, job, np.asarray(order)) == best == 1.0


def test_pipelines_beat_a_gang_placement_of_the_same_round() -> None:
    inst = _round()
    factors = binned_factors(inst.cluster, "none")
    piped = solve_ilp(inst)
    flat = evaluate(inst, {"p": (0, 1, 2, 3), "g": (4, 5, 6, 7)}, factors).cost  # GPU order: 1.5 on stage 0
    assert piped.objective < flat


def test_a_restart_cost_gives_the_running_jobs_keep_variables() -> None:
    """Until 2026-11-27 the stage program refused a restart cost ("placed non-sticky").  Now the
    running gang g gets a keep column (the waiting pipeline none) and stays on its GPUs."""
    from pal_opt.ilp.stageround import KIND_KEEP

    inst = _round()
    jobs = (inst.jobs[0], Job("g", 4, "classA", 1, placement=(4, 5, 6, 7)))
    costly = RoundInstance(inst.cluster, jobs, RoundParams(binning="none", restart_cost=0.5))
    sr = build_stage_round(costly, [0, 1], binned_factors(costly.cluster, "none"))
    assert sr.kept == (1,) and sr.job[sr.kind == KIND_KEEP].tolist() == [1]
    res = solve_ilp(costly)
    assert res.placements["g"] == (4, 5, 6, 7) and res.jobs_to_terminate == () and check(costly, res) == []


def test_the_start_placement_encodes_to_a_feasible_vector() -> None:
    from pal_opt.ilp.stageround import start_placement

    inst = _round()
    factors = binned_factors(inst.cluster, "none")
    sr = build_stage_round(inst, [0, 1], factors)
    start = start_placement(inst, [0, 1], factors)
    assert start is not None
    x = encode_stage_round(sr, start)
    assert x is not None and sr.program.is_feasible(x)
    assert sr.program.objective(x) == pytest.approx(evaluate(inst, start, factors).cost)


def test_decreasing_locality_penalties_are_refused() -> None:
    from pal_opt.errors import InstanceError

    with pytest.raises(InstanceError, match="must not decrease"):  # refused where the job is built
        Job("p", 4, "classA", 0, (1.0, 1.2, 0.9), pipeline=Pipeline((2.0, 1.0), (3, 1)))


# ---------------------------------------------------------------- GPU types
@st.composite
def typed_pipeline_rounds(draw: Any) -> RoundInstance:
    """A small round on two or three GPU types (servers of 2 or 4 GPUs, sometimes a throughput
    table); jobs restricted to one type, guaranteed, mixing or free, some of them pipelines."""
    names = ("a", "b", "c")[:draw(st.integers(2, 3))]
    sizes = [(t, draw(st.sampled_from((2, 4)))) for t in names for _ in range(draw(st.integers(1, 2)))]
    types = [t for t, n in sizes for _ in range(n)]
    server = [s for s, (_, n) in enumerate(sizes) for _ in range(n)]
    if len(types) > 10:  # (the brute force enumerates GPU permutations)
        types, server = types[:10], server[:10]
        names = tuple(t for t in names if t in types)
    f = [draw(st.sampled_from((1.0, 1.2, 1.5))) for _ in types]
    throughput = {"classA": {t: draw(st.sampled_from((1.0, 2.0))) for t in names}} if draw(st.booleans()) else None
    cl = Cluster.from_arrays(range(len(types)), server, {"classA": f}, gpu_types=types, throughput=throughput)
    jobs = []
    for k in range(draw(st.integers(1, 3))):
        d = draw(st.integers(1, 4))
        kw: dict[str, Any] = {}
        how = draw(st.integers(0, 3))
        if how == 0:
            kw.update(kind="guaranteed", gpu_type=draw(st.sampled_from(names)))
        elif how == 1:
            kw["allowed_types"] = tuple(draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)))
        elif how == 2:
            kw["mix_types"] = True
        if d >= 2 and draw(st.booleans()):
            cut = draw(st.integers(1, d - 1))
            kw["pipeline"] = Pipeline((draw(STAGE_TIMES), draw(STAGE_TIMES)), (cut, d - cut))
        jobs.append(Job(k, d, "classA", k, **kw))
    return RoundInstance(cl, tuple(jobs), RoundParams(binning="none"), name="typed pipelines")


def typed_brute_force(instance: RoundInstance, admitted: list[int], factors: Mapping[str, np.ndarray]) -> float:
    """:func:`brute_force` over the GPU lists each job may take: all of one of its type groups."""
    from pal_opt.gputypes import type_groups

    cl = instance.cluster
    best = [math.inf]

    def rec(k: int, avail: tuple[int, ...], acc: float) -> None:
        if k == len(admitted):
            best[0] = min(best[0], acc)
            return
        job = instance.jobs[admitted[k]]
        for group in type_groups(cl, job):
            mine = tuple(p for p in avail if int(cl.type_of[p]) in group)
            for combo in itertools.combinations(mine, job.demand):
                for gpus in (itertools.permutations(combo) if job.pipeline is not None else [combo]):
                    s = job_slowdown_pos(cl, np.asarray(factors[job.perfclass]), job, np.asarray(gpus))
                    rec(k + 1, tuple(p for p in avail if p not in gpus), acc + job.demand * math.log(s))

    rec(0, tuple(range(cl.num_gpus)), 0.0)
    return best[0]


@settings(max_examples=80, **_SET)  # type: ignore[arg-type]
@given(typed_pipeline_rounds())
def test_with_gpu_types_every_stage_runs_on_a_type_its_job_may_use(inst: RoundInstance) -> None:
    admitted = admit(inst, "prefix")
    if not admitted:
        return
    factors = binned_factors(inst.cluster, "none")
    res = solve_stage_round(inst, admitted, factors, admission="prefix")
    assert check(inst, res) == []  # usable types, one type per job unless it mixes
    assert res.status == Status.OPTIMAL
    assert res.objective == pytest.approx(typed_brute_force(inst, admitted, factors), abs=1e-9)
    sr = build_stage_round(inst, admitted, factors)  # the answer, encoded back, prices the same
    x = encode_stage_round(sr, res.placements)
    assert x is not None and sr.program.is_feasible(x)
    assert sr.program.objective(x) == pytest.approx(res.objective, abs=1e-9)


@settings(max_examples=30, **_SET)  # type: ignore[arg-type]
@given(typed_pipeline_rounds())
def test_with_gpu_types_one_stage_pipelines_give_the_round_programs_optimum(inst: RoundInstance) -> None:
    gangs = RoundInstance(inst.cluster, tuple(replace(j, pipeline=None) for j in inst.jobs), inst.params)
    piped = RoundInstance(inst.cluster, tuple(replace(j, pipeline=Pipeline((1.0,), (j.demand,))) for j in inst.jobs),
                          inst.params)
    ref, res = solve_ilp(gangs), solve_ilp(piped)
    assert check(piped, res) == []
    if res.placements:  # (a round with no job that fits builds no program)
        assert res.info["program"] == "stage"
    assert set(res.placements) == set(ref.placements)
    assert res.objective == pytest.approx(ref.objective, abs=1e-9)


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_a_pipeline_restricted_to_one_type_stays_on_it(backend: str) -> None:
    """Found by the preemption work: the stage program grouped GPUs by factor only, so a pipeline
    that may use type a took a GPU of type b with the same factor ('not of its type', and two
    types for a job that does not mix)."""
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 8}, gpu_types="bbbbaaaa")
    for kw in ({"allowed_types": ("a",)}, {"kind": "guaranteed", "gpu_type": "a"}):
        inst = RoundInstance(cl, (Job("p", 4, "classA", 0, pipeline=Pipeline((1.0, 1.0), (3, 1)), **kw),),
                             RoundParams(binning="none"))
        res = solve_ilp(inst, backend=backend)
        assert res.info["program"] == "stage" and check(inst, res) == []
        assert sorted(res.placements["p"]) == [4, 5, 6, 7]


# ---------------------------------------------------------------- deadlines and the gang view
def _two_server_round() -> RoundInstance:
    """``formulations/pipeline_round.md`` §5: two servers of four GPUs, a slow GPU on each, a
    pipeline with slack and a 4-GPU gang (optimum 4 ln 1.5)."""
    cluster = Cluster.from_arrays(range(8), [0, 0, 0, 0, 1, 1, 1, 1],
                                  {"classA": [1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5]})
    jobs = (Job("p", 4, "classA", 0, pipeline=Pipeline((2.0, 1.0), (3, 1))), Job("g", 4, "classA", 1))
    return RoundInstance(cluster, jobs, RoundParams(binning="none"))


def _contended_round() -> RoundInstance:
    """Four servers of four GPUs, one slow GPU (1.5) on each of servers 0 and 1; two pipelines
    with slack (times 2 and 1 on 3 + 1 GPUs) and two 4-GPU gangs.  PAL's start puts the gangs on
    the slow servers (8 ln 1.5); the optimum, 0 (each slow GPU on a pipeline's slack stage), is the
    jobs-alone bound, which the start does not meet, so the stage program is built and solved (a
    round whose start meets that bound gets no program since 2026-12-07)."""
    f = [1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.5, 1.0] + [1.0] * 8
    cl = Cluster.from_arrays(range(16), np.repeat([0, 1, 2, 3], 4), {"classA": f})
    pipe = Pipeline((2.0, 1.0), (3, 1))
    jobs = (Job("p0", 4, "classA", 0, pipeline=pipe), Job("p1", 4, "classA", 1, pipeline=pipe),
            Job("g0", 4, "classA", 2), Job("g1", 4, "classA", 3))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


def test_the_build_gives_up_at_its_deadline() -> None:
    """``build_stage_round(deadline=...)`` raises ``TimeLimitReached`` (its stage named) instead of
    building past the deadline; without one it builds."""
    import time

    from pal_opt.deadline import Deadline
    from pal_opt.errors import TimeLimitReached

    inst = _two_server_round()
    factors = binned_factors(inst.cluster, "none")
    with pytest.raises(TimeLimitReached, match="building the stage program"):
        build_stage_round(inst, [0, 1], factors, deadline=Deadline(time.monotonic() - 1.0))
    assert build_stage_round(inst, [0, 1], factors, deadline=Deadline.after(60.0)).program.num_vars > 0


def test_a_time_limited_solve_starts_from_the_gang_view_and_reaches_the_optimum() -> None:
    """Under a time limit the round program first places the round with the pipeline seen as a
    gang (``info["gang_view"]``), then the stage program proves the optimum from the cheaper
    start; the untimed solve takes no gang view and reaches the same cost.  (On a round whose
    start meets the jobs-alone bound neither runs: ``test_stage_search.py``.)"""
    inst = _contended_round()
    timed, untimed = solve_ilp(inst, time_limit=60), solve_ilp(inst)
    assert timed.info["gang_view"].startswith("optimal") and "gang_view" not in untimed.info
    assert timed.status == untimed.status == Status.OPTIMAL and "num_vars" in timed.info
    assert timed.objective == pytest.approx(0.0, abs=1e-9) and untimed.objective == pytest.approx(0.0, abs=1e-9)
    assert timed.info["start"] in ("PAL's", "the round program's, pipelines seen as gangs")
    assert check(inst, timed) == []


def test_a_given_start_is_checked_even_when_the_program_is_not_built() -> None:
    """With the deadline past, the stage program is not built: a valid ``start`` is returned as it
    is (when no dearer than PAL's), an invalid one is an ``OptionError`` as it is when built."""
    import time

    from pal_opt.errors import OptionError

    inst = _two_server_round()
    good = {"p": (4, 5, 6, 7), "g": (0, 1, 2, 3)}  # p's slow GPU 7 on its slack stage: 4 ln 1.5, as PAL's
    res = solve_ilp(inst, start=good, deadline=time.monotonic() - 1.0)
    assert res.status == Status.FALLBACK and res.info["time_limit_reached"] == "building the stage program"
    assert check(inst, res) == [] and res.objective <= 4 * math.log(1.5) + 1e-9
    with pytest.raises(OptionError, match="start is not a placement"):
        solve_ilp(inst, start={"p": (0, 1, 2, 3), "g": (0, 1, 2, 3)}, deadline=time.monotonic() - 1.0)


# Found by review (2026-11-28): with the pace levels (y) and spreads (z) continuous, HiGHS
# 1.14.0's MIP presolve returned suboptimal answers as "optimal" and bounds above the objective on
# these rounds; CBC, CP-SAT and the program written without them were right.  They are integer now.
def _review_rounds() -> list[tuple[RoundInstance, float]]:
    one = RoundInstance(Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.25, 1.0, 0.9, 1.0]}),
                        (Job("p", 4, "classA", 0, (1.0, 1.2, 1.5), pipeline=Pipeline((1.0, 1.0, 3.0), (2, 1, 1))),),
                        RoundParams(binning="none"))
    cl = Cluster.from_arrays(range(7), [0, 0, 0, 0, 1, 1, 1],
                             {"classA": [1.0, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0],
                              "classB": [0.9, 1.0, 1.5, 0.9, 0.9, 0.9, 1.5]}, rack_of_server={0: 0, 1: 0})
    jobs = (Job(0, 3, "classA", 0, (1.0, 1.3, 1.3), (3, 5, 4), pipeline=Pipeline((1.0, 2.0, 3.0), (1, 1, 1))),
            Job(1, 4, "classA", 1, (1.0, 1.2, 1.5), pipeline=Pipeline((3.0, 1.0, 2.0), (1, 2, 1))),
            Job(2, 3, "classA", 2, (1.0, 1.0, 1.0), pipeline=Pipeline((0.5, 0.5), (2, 1))))
    three = RoundInstance(cl, jobs, RoundParams(binning="none", restart_cost=36.0))
    return [(one, brute_force(one, [0], binned_factors(one.cluster, "none"))), (three, math.nan)]


@pytest.mark.parametrize("backend", available_backends())
def test_the_rounds_highs_presolve_got_wrong_are_solved_to_their_optimum(backend: str) -> None:
    (one, best), (three, _) = _review_rounds()
    res = solve_ilp(one, backend=backend)
    assert res.status == Status.OPTIMAL and res.objective == pytest.approx(best, abs=1e-6)
    assert res.bound is not None and res.bound <= res.objective + 1e-6
    ref = solve_ilp(three, backend="cbc") if "cbc" in available_backends() else None
    res = solve_ilp(three, backend=backend)
    assert res.status == Status.OPTIMAL and check(three, res) == []
    if ref is not None:
        assert res.objective == pytest.approx(ref.objective, abs=1e-6)  # -0.105361, not +0.316082


def test_a_ctrl_c_in_the_gang_view_answers_for_this_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review (2026-11-28): a Ctrl-C while the gang view ran raised ``SolveInterrupted``
    with that round's answer (pipelines unmapped, priced as gangs).  Now its placement comes back
    with every pipeline's stages mapped best, priced on the round with pipelines."""
    from pal_opt.errors import SolveInterrupted
    from pal_opt.ilp.backends import get_backend
    from pal_opt.ilp.backends.base import BackendInterrupted

    cls = get_backend("highs" if "highs" in available_backends() else available_backends()[0])
    calls: list[int] = []

    def first_call_interrupted(original: Any) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) == 1:
                raise BackendInterrupted(None)
            return original(self, *args, **kwargs)
        return call

    monkeypatch.setattr(cls, "solve", first_call_interrupted(cls.solve))
    monkeypatch.setattr(cls, "relaxation_bound", first_call_interrupted(cls.relaxation_bound))
    inst = _contended_round()
    with pytest.raises(SolveInterrupted) as caught:
        solve_ilp(inst, backend=cls.name, time_limit=60)
    res = caught.value.result
    assert res is not None and res.info["interrupted"] and res.info["program"] == "stage"
    assert check(inst, res) == []
    assert res.objective == pytest.approx(evaluate(inst, res.placements, binned_factors(inst.cluster, "none")).cost)
    assert "pipelines seen as gangs" in res.message


@pytest.mark.parametrize("with_incumbent", [False, True])
def test_a_ctrl_c_in_the_stage_program_keeps_the_best_so_far(monkeypatch: pytest.MonkeyPatch,
                                                              with_incumbent: bool) -> None:
    """A Ctrl-C while the stage program is solved raises ``SolveInterrupted`` with a priced answer
    for the round: the solver's incumbent (decoded) when it had one, else the start placement
    (until 2026-11-28 the backend's ``BackendInterrupted`` escaped, with no answer), with the
    jobs-alone bound (0 here, below the start's 8 ln 1.5: FALLBACK; no bound until 2026-12-07)."""
    from pal_opt.errors import SolveInterrupted
    from pal_opt.ilp.backends import get_backend
    from pal_opt.ilp.backends.base import BackendInterrupted

    cls = get_backend("highs" if "highs" in available_backends() else available_backends()[0])
    original = cls.solve

    def interrupted(self: Any, program: Any, options: Any, start: Any = None) -> Any:
        raise BackendInterrupted(original(self, program, options, start) if with_incumbent else None)

    monkeypatch.setattr(cls, "solve", interrupted)
    inst = _contended_round()
    with pytest.raises(SolveInterrupted) as caught:
        solve_ilp(inst, backend=cls.name)
    res = caught.value.result
    assert res is not None and res.info["interrupted"] and res.info["program"] == "stage"
    assert check(inst, res) == [] and res.message.startswith("interrupted")
    if with_incumbent:
        assert res.objective == pytest.approx(0.0, abs=1e-9)
    else:
        assert "start placement (PAL's)" in res.message and "each job alone on the free GPUs" in res.message
        assert res.status == Status.FALLBACK and res.objective == pytest.approx(8 * math.log(1.5))
        assert res.bound == pytest.approx(0.0, abs=1e-9) and res.info["alone_bound"] == pytest.approx(res.bound)
        assert res.gap is not None and res.gap > 0


def _highs_params_seen(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The ``backend_params`` of every program HiGHS is given from now on."""
    from pal_opt.ilp.backends.highs import HighsBackend

    seen: list[dict[str, Any]] = []
    original = HighsBackend.solve

    def watched(self: Any, program: Any, options: Any, start: Any = None) -> Any:
        seen.append(dict(options.backend_params))
        return original(self, program, options, start)

    monkeypatch.setattr(HighsBackend, "solve", watched)
    return seen


def test_highs_solves_the_stage_program_without_presolve_probing(monkeypatch: pytest.MonkeyPatch) -> None:
    """2026-12-07: HiGHS's presolve probing (rule 15) took most of the stage program's time on
    256-GPU rounds of a scheduler's loop (``benchmarks/results/racked_rounds.md``); the stage
    program (and ``ilp-preempt``'s, with pipelines) is solved with it off, unless the caller's
    ``backend_params`` say otherwise.  The round program keeps HiGHS's defaults."""
    if "highs" not in available_backends():
        pytest.skip("highs is not installed")
    from pal_opt.ilp.backends.highs import HighsBackend

    assert HighsBackend.stage_params == {"presolve_rule_off": 1 << 15}
    seen = _highs_params_seen(monkeypatch)
    inst = _contended_round()
    assert solve_ilp(inst, backend="highs").objective == pytest.approx(0.0, abs=1e-9)
    assert seen == [{"presolve_rule_off": 1 << 15}]
    seen.clear()
    assert solve_ilp(inst, backend="highs", backend_params={"presolve_rule_off": 0}).status == Status.OPTIMAL
    assert seen == [{"presolve_rule_off": 0}]  # the caller's value, not pal-opt's
    seen.clear()
    gangs = RoundInstance(inst.cluster, (Job("a", 4, "classA", 0), *inst.jobs[2:]), inst.params)
    assert solve_ilp(gangs, backend="highs").status == Status.OPTIMAL
    assert seen == [{}]  # the round program: HiGHS's own presolve
    seen.clear()
    import pal_opt

    res = pal_opt.solve(inst, "ilp-preempt", backend="highs")
    assert res.info["program"] == "stage" and res.info["backend_params"] == {"presolve_rule_off": 1 << 15}
    assert seen == [{"presolve_rule_off": 1 << 15}] and res.objective == pytest.approx(0.0, abs=1e-9)


@settings(max_examples=30, **_SET)  # type: ignore[arg-type]
@given(pipeline_rounds())
def test_presolve_probing_off_keeps_the_stage_programs_optimum(inst: RoundInstance) -> None:
    """The stage program's optimum is the same with HiGHS's probing on (its default) and off."""
    if "highs" not in available_backends():
        return
    from pal_opt.ilp.backends import SolveOptions

    admitted = admit(inst, "prefix")
    factors = binned_factors(inst.cluster, "none")
    off = solve_stage_round(inst, admitted, factors, backend="highs", admission="prefix")
    on = solve_stage_round(inst, admitted, factors, backend="highs", admission="prefix",
                           options=SolveOptions(backend_params={"presolve_rule_off": 0}))
    assert off.status == on.status == Status.OPTIMAL
    assert off.objective == pytest.approx(on.objective, abs=1e-9)


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_ilp_records_the_stage_programs_backend_params_as_ilp_preempt_does(backend: str) -> None:
    """82d8f2f gave HiGHS's stage program ``presolve_rule_off`` and ``ilp-preempt`` recorded it in
    ``info["backend_params"]`` (what the solver is given), but ``ilp`` recorded only the caller's
    parameters: a result file of ``ilp`` said nothing of what its stage program ran with (review).
    Both record what the solver is given; the caller's value still wins; CP-SAT and CBC, which
    have no stage parameters, record only the caller's."""
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")
    import pal_opt
    from pal_opt.ilp.backends import get_backend

    inst = _contended_round()  # (a round whose start meets the jobs-alone bound runs no solver)
    own = dict(get_backend(backend).stage_params)
    assert own == ({"presolve_rule_off": 1 << 15} if backend == "highs" else {})
    caller = {"highs": {"presolve_rule_off": 0}, "cpsat": {"random_seed": 1}, "cbc": {"maxNodes": 100000}}[backend]
    for theirs in ({}, caller):
        kw: dict[str, Any] = {"backend_params": theirs} if theirs else {}
        ilp = pal_opt.solve(inst, "ilp", backend=backend, **kw)
        assert ilp.info["program"] == "stage"
        assert ilp.info.get("backend_params", {}) == {**own, **theirs}
        if backend != "cpsat":  # (CP-SAT's ilp-preempt adds its drop program's own, preempt_params)
            preempt = pal_opt.solve(inst, "ilp-preempt", backend=backend, **kw)
            assert preempt.info.get("backend_params", {}) == ilp.info.get("backend_params", {})


class _Unseen(CostTerm):
    """A term with ``placed`` only: the program neither sees nor bounds it."""

    name = "unseen_by_the_stage_program"
    summary = "test term"
    params: dict[str, float] = {}

    def placed(self, instance: RoundInstance, job: Job, pos: np.ndarray, level: int, max_factor: float) -> float:
        return 0.0


def test_a_closed_gap_is_optimal_only_when_every_term_is_bounded() -> None:
    assert bounded(1.0, 4, Status.FEASIBLE, [None, 1.0]) == (1.0, 0.0, Status.OPTIMAL)
    register_cost_term(_Unseen())
    try:
        assert bounded(1.0, 4, Status.FEASIBLE, [1.0]) == (1.0, 0.0, Status.FEASIBLE)
    finally:
        unregister_cost_term(_Unseen.name)


def test_the_jobs_alone_bound_takes_a_running_jobs_cheaper_column() -> None:
    """r runs on two slow GPUs (factor 2) and moving costs less than staying: its least is its
    mode on the fast GPUs, not its keep column, and the bound is at most moving's cost."""
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [2.0, 2.0, 1.0, 1.0]})
    rc = 0.1 * RoundParams().round_length  # seconds: well below 2 ln 2 per GPU
    inst = RoundInstance(cl, (Job("r", 2, "classA", 0, placement=(0, 1)),),
                         RoundParams(binning="none", restart_cost=rc))
    fac = binned_factors(cl, "none")
    moved = evaluate(inst, {"r": (2, 3)}, fac).cost
    assert 0 < moved < evaluate(inst, {"r": (0, 1)}, fac).cost
    assert alone_bound(inst, [0], fac) == pytest.approx(moved)


def test_the_jobs_alone_bound_leaves_a_victim_only_the_gpus_left() -> None:
    """Two free GPUs; q (2 GPUs) must be placed, running v (2 GPUs) may be preempted: q takes
    both, so v is preempted in every placement and its charge is in the bound."""
    cl = Cluster.from_arrays(range(2), [0, 0], {"classA": [1.0, 1.0]})
    inst = RoundInstance(cl, (Job("q", 2, "classA", 0), Job("v", 2, "classA", 1, placement=(0, 1))),
                         RoundParams(binning="none"))
    fac = binned_factors(cl, "none")
    best = evaluate(inst, {"q": (0, 1)}, fac).cost
    assert best > 0  # v's preemption charge
    assert alone_bound(inst, [0, 1], fac, optional=[1]) == pytest.approx(best)
    # with two GPUs more, v keeps running in the best placement, and the bound is not its charge
    wide = RoundInstance(Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}), inst.jobs,
                         inst.params)
    kept = evaluate(wide, {"q": (2, 3), "v": (0, 1)}, binned_factors(wide.cluster, "none")).cost
    assert alone_bound(wide, [0, 1], binned_factors(wide.cluster, "none"), optional=[1]) == pytest.approx(kept)
