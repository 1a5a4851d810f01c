"""Keep variables in the stage program: restart and migration costs with pipeline jobs
(``formulations/pipeline_round.md`` §7, :mod:`pal_opt.ilp.stageround`).

* Random small rounds with running gangs and pipelines and a restart or migration cost
  (hypothesis): the program's optimum equals a brute force over every GPU set and every stage map
  of every admitted job, each running job charged the move unless it keeps each stage on its
  GPUs (priced here, independently of :mod:`pal_opt.cost`'s move test); the answer passes the
  checker, encodes back at its own cost, and is the same when solved again.
* The three backends reach the same optimum on such rounds.
* A hand-worked round: a running pipeline whose slow GPU sits on its heavy stage is re-mapped on
  the same GPUs when a restart is cheap and kept when it is dear; the keep variable gives it back
  its GPU list as it was, and a re-map is listed in ``jobs_to_terminate``.
* ``ilp-preempt`` takes a restart cost with pipeline jobs: on tiny rounds its program's optimum is
  the least cost over victims, GPU sets and stage maps with the move charge (brute force).
* With GPU types: running jobs on one of their type groups, the optimum against the brute force
  over each job's type groups; ``solve_ilp(start=...)`` checked and used by the stage program.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_preempt_pipelines import brute_force as preempt_brute_force
from test_preempt_pipelines import pipeline_rounds as preempt_rounds
from test_preempt_pipelines import small_clusters
from test_stage_round import typed_pipeline_rounds

from pal_opt.admission import admit
from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import job_slowdown_pos, left_out_charge
from pal_opt.cost.restart import restart_units
from pal_opt.ilp import available_backends, solve_ilp
from pal_opt.ilp.lpwriter import lp_text
from pal_opt.ilp.preempt import solve_preempt
from pal_opt.ilp.stageround import KIND_KEEP, build_stage_round, encode_stage_round, solve_stage_round
from pal_opt.model import Cluster, GpuState, Job, Pipeline, RoundInstance, RoundParams
from pal_opt.priority import preempt_plan
from pal_opt.result import Status

_SET = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            derandomize=True)
BACKENDS = [b for b in ("highs", "cpsat", "cbc") if b in available_backends()]
STAGE_TIMES = st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0])


LEVELS = (0.9, 1.0, 1.0, 1.25, 1.5)
PENALTIES = ((1.0, 1.0, 1.0), (1.0, 1.3, 1.3), (1.0, 1.7, 1.7), (1.0, 1.2, 1.5))


@st.composite
def keep_rounds(draw: Any, max_gpus: int = 7) -> RoundInstance:
    """A small round: one to three servers (sometimes racked), two classes, a few busy or failed
    GPUs; one to three jobs of one to four GPUs, two in three of two or more a pipeline of two or
    three stages; two in three running where they fit (mostly on free GPUs, sometimes on a failed
    one: it must move), a running pipeline's GPU list in any order (any stage map); a restart cost or a
    migration cost (or both) that is not zero."""
    cl = draw(small_clusters(max_gpus))
    taken: set[int] = set()
    jobs = []
    for k in range(draw(st.integers(1, 3))):
        d = draw(st.integers(1, 4))
        pipe = None
        if d >= 2 and draw(st.integers(0, 2)):
            n = draw(st.integers(2, min(3, d)))
            cuts = sorted(draw(st.sets(st.integers(1, d - 1), min_size=n - 1, max_size=n - 1)))
            reps = tuple(b - a for a, b in zip([0, *cuts], [*cuts, d], strict=True))
            pipe = Pipeline(tuple(draw(STAGE_TIMES) for _ in reps), reps)
        pool = [p for p in range(cl.num_gpus) if p not in taken and cl.state[p] != GpuState.BUSY]
        placement = None
        if draw(st.integers(0, 2)) and len(pool) >= d:  # two in three running, where they fit
            start = draw(st.integers(0, len(pool) - d))
            placement = tuple(draw(st.permutations(pool[start:start + d])))
            taken.update(placement)
        jobs.append(Job(k, d, draw(st.sampled_from(("classA", "classB"))), k, draw(st.sampled_from(PENALTIES)),
                        placement, pipeline=pipe))
    restart = draw(st.sampled_from((0.0, 5.0, 36.0, 120.0)))
    migration = draw(st.sampled_from(({}, {"per_job": 0.3}, {"per_gpu": 0.05, "per_job": 0.01})))
    if restart == 0.0 and not migration:
        restart = 36.0
    params = RoundParams(binning="none", restart_cost=restart, costs={"migration": migration} if migration else {})
    return RoundInstance(cl, tuple(jobs), params, name="keep")


@st.composite
def remap_rounds(draw: Any) -> RoundInstance:
    """One or two servers of two to four GPUs with uneven factors; a running pipeline of two or
    three stages on some of them in any stage map (so re-mapping it on its GPUs may pay), perhaps
    a waiting gang; a restart cost of 1 to 120 s."""
    sizes = [draw(st.integers(2, 4)) for _ in range(draw(st.integers(1, 2)))]
    g = sum(sizes)
    cl = Cluster.from_arrays(range(g), np.repeat(np.arange(len(sizes)), sizes),
                             {"classA": [draw(st.sampled_from(LEVELS)) for _ in range(g)]})
    d = draw(st.integers(2, min(4, g)))
    n = draw(st.integers(2, min(3, d)))
    cuts = sorted(draw(st.sets(st.integers(1, d - 1), min_size=n - 1, max_size=n - 1)))
    reps = tuple(b - a for a, b in zip([0, *cuts], [*cuts, d], strict=True))
    held = tuple(draw(st.permutations(range(g)))[:d])
    jobs = [Job("p", d, "classA", 0, placement=held, pipeline=Pipeline(tuple(draw(STAGE_TIMES) for _ in reps), reps))]
    if g > d and draw(st.booleans()):
        jobs.append(Job("w", draw(st.integers(1, g - d)), "classA", 1))
    return RoundInstance(cl, tuple(jobs), RoundParams(binning="none", restart_cost=draw(st.sampled_from((1.0, 5.0, 36.0, 120.0)))))


def _stage_sets(job: Job, gpus: tuple[int, ...]) -> tuple[frozenset[int], ...]:
    bounds = job.pipeline.slices() if job.pipeline is not None else [(0, job.demand)]
    return tuple(frozenset(gpus[a:b]) for a, b in bounds)


def _move_charge(inst: RoundInstance, job: Job) -> float:
    """Restart (``d · −ln(1 − S/R)``) plus migration (``per_job + per_gpu · d``), by hand."""
    mig = inst.params.costs.get("migration", {})
    return job.demand * restart_units(inst.params) + mig.get("per_job", 0.0) + mig.get("per_gpu", 0.0) * job.demand


def _lists(job: Job, avail: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Every GPU list of ``job`` on ``avail``: each set once for a gang, each stage map once for a
    pipeline (one order per choice of GPUs per stage)."""
    for combo in itertools.combinations(avail, job.demand):
        if job.pipeline is None:
            yield combo
            continue
        def deal(k: int, left: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
            if k == len(job.pipeline.replicas):  # type: ignore[union-attr]
                yield ()
                return
            for stage in itertools.combinations(left, job.pipeline.replicas[k]):  # type: ignore[union-attr]
                rest = tuple(g for g in left if g not in stage)
                yield from (stage + tail for tail in deal(k + 1, rest))
        yield from deal(0, combo)


def brute_force(inst: RoundInstance, admitted: list[int], factors: Mapping[str, np.ndarray]) -> float:
    """Least round cost over every assignment of disjoint GPU lists (every stage map) to the
    admitted jobs: ``d ln slowdown`` per job, plus the move charge for a running job that does not
    keep every stage on its GPUs, plus the preemption charge of the running jobs not admitted."""
    cl = inst.cluster  # (GPU ids are positions in these rounds)
    free = tuple(int(p) for p in np.flatnonzero(cl.state == GpuState.FREE))
    order = sorted(admitted, key=lambda i: -inst.jobs[i].demand)
    best = [math.inf]
    memo: dict[tuple[int, tuple[int, ...]], float] = {}

    def price(i: int, gpus: tuple[int, ...]) -> float:
        if (i, gpus) not in memo:
            job = inst.jobs[i]
            s = job_slowdown_pos(cl, np.asarray(factors[job.perfclass]), job, np.asarray(gpus))
            stays = job.placement is not None and _stage_sets(job, gpus) == _stage_sets(job, job.placement)
            moved = job.placement is not None and not stays
            memo[(i, gpus)] = job.demand * math.log(s) + (_move_charge(inst, job) if moved else 0.0)
        return memo[(i, gpus)]

    def rec(k: int, avail: tuple[int, ...], acc: float) -> None:
        if k == len(order):
            best[0] = min(best[0], acc)
            return
        i = order[k]
        for gpus in _lists(inst.jobs[i], avail):
            rec(k + 1, tuple(g for g in avail if g not in gpus), acc + price(i, gpus))

    rec(0, free, 0.0)
    return best[0] + left_out_charge(inst, {inst.jobs[i].id for i in admitted})


@settings(max_examples=60, **_SET)  # type: ignore[arg-type]
@given(keep_rounds())
def test_the_optimum_is_the_least_cost_over_sets_and_stage_maps_with_the_move_charge(inst: RoundInstance) -> None:
    admitted = admit(inst, "prefix")
    factors = binned_factors(inst.cluster, "none")
    res = solve_stage_round(inst, admitted, factors, admission="prefix", backend="highs")
    assert res.status == Status.OPTIMAL
    assert res.objective == pytest.approx(brute_force(inst, admitted, factors), abs=1e-9)
    assert check(inst, res) == []
    sr = build_stage_round(inst, admitted, factors)  # the answer, encoded back, prices the same
    x = encode_stage_round(sr, res.placements)
    assert x is not None and sr.program.is_feasible(x)
    assert sr.program.objective(x) == pytest.approx(res.objective, abs=1e-9)
    for a in sr.job[(sr.kind == KIND_KEEP) & (x > 0.5)].tolist():  # kept: on its own GPU list
        job = inst.jobs[admitted[a]]
        assert res.placements[job.id] == job.placement and job.id not in res.jobs_to_terminate
    again = solve_stage_round(inst, admitted, factors, admission="prefix", backend="highs")
    assert again.placements == res.placements and again.jobs_to_terminate == res.jobs_to_terminate
    assert lp_text(build_stage_round(inst, admitted, factors).program) == lp_text(sr.program)


@settings(max_examples=60, **_SET)  # type: ignore[arg-type]
@given(remap_rounds())
def test_a_running_pipeline_is_kept_or_remapped_at_the_least_cost(inst: RoundInstance) -> None:
    """Rounds where re-mapping a running pipeline on its own GPUs may pay: the same optimum as the
    brute force, the pipeline listed in ``jobs_to_terminate`` exactly when its stage map changed."""
    admitted = admit(inst, "prefix")
    factors = binned_factors(inst.cluster, "none")
    res = solve_stage_round(inst, admitted, factors, admission="prefix", backend="highs")
    assert res.objective == pytest.approx(brute_force(inst, admitted, factors), abs=1e-9)
    assert check(inst, res) == []
    p = inst.jobs[0]
    moved = _stage_sets(p, res.placements["p"]) != _stage_sets(p, p.placement or ())
    assert ("p" in res.jobs_to_terminate) == moved


@pytest.mark.skipif(len(BACKENDS) < 3, reason="needs all three backends")
@settings(max_examples=15, **_SET)  # type: ignore[arg-type]
@given(keep_rounds(max_gpus=6))
def test_the_three_backends_reach_one_optimum(inst: RoundInstance) -> None:
    admitted = admit(inst, "prefix")
    factors = binned_factors(inst.cluster, "none")
    found = {}
    for backend in BACKENDS:
        res = solve_stage_round(inst, admitted, factors, admission="prefix", backend=backend)
        assert res.status == Status.OPTIMAL and check(inst, res) == [], backend
        found[backend] = res.objective
    assert max(found.values()) - min(found.values()) < 1e-6, found


# ---------------------------------------------------------------- a round worked by hand
def slow_heavy_stage(restart_cost: float) -> RoundInstance:
    """One server of four GPUs; GPU 0 is 1.5x slow.  Pipeline p (stage times 2 and 1 on 3 + 1
    GPUs) runs on 0, 1, 2 | 3: the slow GPU on its heavy stage, pace 1.5.  Re-mapped on the same
    GPUs (GPU 0 on the light stage: 1 x 1.5 < 2) it runs at pace 1."""
    cl = Cluster.uniform(1, 4, {"classA": [1.5, 1.0, 1.0, 1.0]})
    p = Job("p", 4, "classA", 0, placement=(0, 1, 2, 3), pipeline=Pipeline((2.0, 1.0), (3, 1)))
    return RoundInstance(cl, (p,), RoundParams(binning="none", restart_cost=restart_cost))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cheap_restart_remaps_the_pipeline_a_dear_one_keeps_it(backend: str) -> None:
    # re-mapped: 4 ln 1 + 4 x -ln(1 - S/360); kept: 4 ln 1.5.  The break-even S is 120 s.
    cheap, dear = solve_ilp(slow_heavy_stage(36.0), backend=backend), solve_ilp(slow_heavy_stage(300.0), backend=backend)
    assert cheap.info["program"] == dear.info["program"] == "stage"
    assert cheap.objective == pytest.approx(-4 * math.log(1 - 36 / 360))
    assert set(cheap.stages["p"][1]) == {0} and cheap.jobs_to_terminate == ("p",)
    assert dear.objective == pytest.approx(4 * math.log(1.5))
    assert dear.placements["p"] == (0, 1, 2, 3) and dear.jobs_to_terminate == ()
    for inst, res in ((slow_heavy_stage(36.0), cheap), (slow_heavy_stage(300.0), dear)):
        assert check(inst, res) == [] and res.status == Status.OPTIMAL


# ---------------------------------------------------------------- ilp-preempt
@settings(max_examples=60, **_SET)  # type: ignore[arg-type]
@given(preempt_rounds(max_gpus=6, max_jobs=4, max_demand=3), st.sampled_from((5.0, 36.0, 120.0)))
def test_ilp_preempt_finds_the_least_cost_over_victims_sets_and_stage_maps_with_the_move_charge(
        inst: RoundInstance, restart: float) -> None:
    """``tests/test_preempt_pipelines.py``'s rounds with a restart cost: the program's optimum is
    the brute force over victims, GPU sets and stage maps priced by :func:`pal_opt.cost.evaluate`
    (which charges a re-mapped pipeline the move); the answer is valid and the same solved again."""
    inst = RoundInstance(inst.cluster, inst.jobs, RoundParams(binning="none", restart_cost=restart))
    plan, factors = preempt_plan(inst), binned_factors(inst.cluster, "none")
    res = solve_preempt(inst, backend="highs")
    assert check(inst, res) == []
    assert solve_preempt(inst, backend="highs").placements == res.placements
    if not plan.admitted or inst.free_gpus == 0:
        return
    assert res.info["solver_status"] == "optimal"
    assert res.info["program_objective"] == pytest.approx(preempt_brute_force(inst, plan, factors), abs=1e-9)


# ---------------------------------------------------------------- a given start
def test_a_given_start_is_checked_and_priced_with_the_own_starts() -> None:
    """``solve_ilp(start=...)`` reaches the stage program (it was ignored there before keep
    variables made repair's whole-round program of pipeline jobs possible, which relies on it):
    a start that is not a placement of the admitted jobs is refused, a valid one is the warm
    start when it is the cheapest, and the answer is never above it."""
    from pal_opt.errors import OptionError

    inst = slow_heavy_stage(300.0)
    kept = solve_ilp(inst, start={"p": (1, 0, 2, 3)})  # the held stage map, replicas permuted
    assert kept.objective == pytest.approx(4 * math.log(1.5)) and kept.jobs_to_terminate == ()
    for bad in ({"p": [0, 1, 2]}, {"p": [0, 1, 2, 9]}, {"p": [0, 0, 1, 2]}, {}):
        with pytest.raises(OptionError, match="start is not a placement of the admitted jobs"):
            solve_ilp(inst, start=bad)


def test_a_start_of_the_wrong_form_is_an_option_error_naming_it() -> None:
    """A start that is not ``{job id: [GPU ids]}`` was a raw ``TypeError`` or ``ValueError`` from
    ``int()``, on the gang path and the stage path alike."""
    from pal_opt.errors import OptionError
    from pal_opt.generate import generate_instance

    for inst in (slow_heavy_stage(300.0), generate_instance(2, 4, 3, seed=1)):
        for bad, says in (([0, 1, 2, 3], "start must map job ids"), ({"p": 3}, r"start\['p'\] must be a list"),
                          ({"p": "0123"}, r"start\['p'\] must be a list"),
                          ({"p": [0, 1.5, 2, 3]}, "must list integer GPU ids"),
                          ({"p": [0, True, 2, 3]}, "must list integer GPU ids")):
            with pytest.raises(OptionError, match=says):
                solve_ilp(inst, start=bad)  # type: ignore[arg-type]
    assert solve_ilp(slow_heavy_stage(300.0), start={"p": np.array([1, 0, 2, 3])}).jobs_to_terminate == ()


def test_warm_start_false_gives_the_stage_programs_solver_no_start() -> None:
    """``warm_start=False`` was ignored by the stage program; the start is still its fallback."""
    inst = slow_heavy_stage(300.0)
    warm, cold = solve_ilp(inst), solve_ilp(inst, warm_start=False)
    assert warm.info["warm_start"] is True and cold.info["warm_start"] is False
    assert cold.objective == pytest.approx(warm.objective) and cold.status == Status.OPTIMAL


def test_a_deadline_bounds_the_stage_program() -> None:
    """``solve_ilp(deadline=...)`` (a ``time.monotonic()`` value, as ``ilp-partitioned`` hands its
    parts and the command line passes) was not passed to the stage program, whose solver then ran
    to the end however late.  With the deadline already past, the answer is the start placement
    (FALLBACK): the keeping start here, so the running pipeline stays on its stage map.  The
    program is not even built (it was, until 2026-11-28, whatever the deadline)."""
    import time

    inst = slow_heavy_stage(300.0)
    res = solve_ilp(inst, deadline=time.monotonic() - 1.0)
    assert res.status == Status.FALLBACK and res.info["program"] == "stage"
    assert res.info["time_limit_reached"] == "building the stage program"
    assert res.placements == {"p": (0, 1, 2, 3)} and res.jobs_to_terminate == () and check(inst, res) == []
    assert res.message.startswith("time limit reached before building the stage program")


# ---------------------------------------------------------------- GPU types
@st.composite
def typed_keep_rounds(draw: Any) -> RoundInstance:
    """``tests/test_stage_round.py``'s typed rounds (two or three GPU types; guaranteed,
    restricted, mixing and free jobs, some pipelines) with some jobs running on GPUs of one of
    their type groups (a pipeline's list in any order) and a restart cost."""
    from pal_opt.gputypes import type_groups

    inst = draw(typed_pipeline_rounds())
    cl, taken, jobs = inst.cluster, set(), []
    for job in inst.jobs:
        groups = type_groups(cl, job)
        if groups and draw(st.booleans()):
            group = draw(st.sampled_from(groups))
            pool = [p for p in range(cl.num_gpus) if p not in taken and int(cl.type_of[p]) in group]
            if len(pool) >= job.demand:
                held = tuple(draw(st.permutations(pool))[: job.demand])
                taken.update(held)
                job = Job(job.id, job.demand, job.perfclass, job.position, job.locality, held, kind=job.kind,
                          gpu_type=job.gpu_type, allowed_types=job.allowed_types, mix_types=job.mix_types,
                          pipeline=job.pipeline)
        jobs.append(job)
    params = RoundParams(binning="none", restart_cost=draw(st.sampled_from((5.0, 36.0, 120.0))))
    return RoundInstance(cl, tuple(jobs), params, name="typed keep")


def typed_brute_force(inst: RoundInstance, admitted: list[int], factors: Mapping[str, np.ndarray]) -> float:
    """:func:`brute_force` over the GPU lists each job may take: all of one of its type groups."""
    from pal_opt.gputypes import type_groups

    cl = inst.cluster
    best = [math.inf]

    def rec(k: int, avail: tuple[int, ...], acc: float) -> None:
        if k == len(admitted):
            best[0] = min(best[0], acc)
            return
        job = inst.jobs[admitted[k]]
        for group in type_groups(cl, job):
            for gpus in _lists(job, tuple(p for p in avail if int(cl.type_of[p]) in group)):
                s = job_slowdown_pos(cl, np.asarray(factors[job.perfclass]), job, np.asarray(gpus))
                stays = job.placement is not None and _stage_sets(job, gpus) == _stage_sets(job, job.placement)
                charge = _move_charge(inst, job) if job.placement is not None and not stays else 0.0
                rec(k + 1, tuple(p for p in avail if p not in gpus), acc + job.demand * math.log(s) + charge)

    rec(0, tuple(int(p) for p in np.flatnonzero(cl.state == GpuState.FREE)), 0.0)
    return best[0] + left_out_charge(inst, {inst.jobs[i].id for i in admitted})


@settings(max_examples=40, **_SET)  # type: ignore[arg-type]
@given(typed_keep_rounds())
def test_with_gpu_types_a_kept_job_stays_on_its_types_at_the_least_cost(inst: RoundInstance) -> None:
    admitted = admit(inst, "prefix")
    if not admitted:
        return
    factors = binned_factors(inst.cluster, "none")
    res = solve_stage_round(inst, admitted, factors, admission="prefix", backend="highs")
    assert check(inst, res) == [] and res.status == Status.OPTIMAL
    assert res.objective == pytest.approx(typed_brute_force(inst, admitted, factors), abs=1e-9)
