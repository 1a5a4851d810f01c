"""The stage program on pairs of servers (:mod:`pal_opt.ilp.stagesearch`): what ``solve_ilp`` runs
under a deadline on rounds with pipeline jobs of at least ``SEARCH_MIN_GPUS`` free GPUs.

Small rounds stand in for large ones (``SEARCH_MIN_GPUS`` patched): from a poor start the search
moves pipelines to the servers whose slow GPU they can put on a stage with slack; the answer
passes the checker, is never worse than its start, is the same on every run (no deadline) and
on every backend; running jobs under a restart cost are priced as the whole round prices them.
The jobs-alone bound is also checked where the whole stage program reports it (the last section).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import CostTerm, evaluate, register_cost_term, unregister_cost_term
from pal_opt.ilp import available_backends, solve_ilp, stagesearch
from pal_opt.ilp.backends import SolveOptions
from pal_opt.ilp.stagesearch import PairSearch, search_applies, solve_stage_search
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams
from pal_opt.result import PlacementResult, Status


def _four_servers(restart_cost: float = 0.0, running: bool = False) -> RoundInstance:
    """Four servers of four GPUs; servers 0 and 1 each have one slow GPU (1.5).  Two pipelines
    whose second stage has slack (times 2 and 1 on 3 + 1 GPUs) and two 4-GPU gangs: the optimum
    (0) puts the pipelines on servers 0 and 1, each slow GPU on a slack stage, the gangs on 2 and
    3.  With ``running``, pipeline p1 runs on server 3 (GPUs 12-15)."""
    f = [1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.5, 1.0] + [1.0] * 8
    cl = Cluster.from_arrays(range(16), np.repeat([0, 1, 2, 3], 4), {"classA": f})
    pipe = Pipeline((2.0, 1.0), (3, 1))
    jobs = (Job("p0", 4, "classA", 0, pipeline=pipe),
            Job("p1", 4, "classA", 1, pipeline=pipe, placement=(12, 13, 14, 15) if running else None),
            Job("g0", 4, "classA", 2), Job("g1", 4, "classA", 3))
    return RoundInstance(cl, jobs, RoundParams(binning="none", restart_cost=restart_cost))


#: The gangs on the slow servers, the pipelines on the fast ones: 8 ln 1.5.
POOR = {"p0": (8, 9, 10, 11), "p1": (12, 13, 14, 15), "g0": (0, 1, 2, 3), "g1": (4, 5, 6, 7)}


def test_the_search_moves_the_pipelines_to_the_slow_servers() -> None:
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    assert evaluate(inst, POOR, f).cost == pytest.approx(8 * math.log(1.5))
    search = PairSearch(inst, range(4), f, POOR)
    search.run()
    assert evaluate(inst, search.placement, f).cost == pytest.approx(0.0, abs=1e-9)
    assert search.stats.improved >= 1 and search.stats.gain == pytest.approx(8 * math.log(1.5))
    assert {frozenset(search.placement[j]) for j in ("p0", "p1")} == {frozenset(range(4)), frozenset(range(4, 8))}
    # each slow GPU (1 and 6) is its pipeline's last stage (the one with slack)
    assert {search.placement["p0"][-1], search.placement["p1"][-1]} == {1, 6}


def test_the_search_is_deterministic_without_a_deadline() -> None:
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    runs = []
    for _ in range(2):
        res = solve_stage_search(inst, [0, 1, 2, 3], f, options=SolveOptions(seed=3), start=POOR, start_label="poor")
        assert res is not None
        runs.append(res.placements)
    assert runs[0] == runs[1]


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_solve_ilp_searches_pairs_on_large_rounds(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """Under a time limit, a round of at least ``SEARCH_MIN_GPUS`` free GPUs gets the search
    (``info["stage_search"]``, FEASIBLE, no bound) and the optimum here; without one, the whole
    stage program, as before."""
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")
    inst = _four_servers()
    assert not search_applies(inst)
    monkeypatch.setattr(stagesearch, "SEARCH_MIN_GPUS", 16)
    assert search_applies(inst)
    res = solve_ilp(inst, time_limit=60, backend=backend)
    assert res.info["program"] == "stage" and res.info["stage_search"]["passes"] >= 1
    assert check(inst, res) == [] and res.objective == pytest.approx(0.0, abs=1e-9)
    # every job alone costs 0 here (a pipeline's slow GPU on its slack stage, a gang on a fast
    # server): the bound proves the optimum and the search stops there
    assert res.bound == pytest.approx(0.0, abs=1e-9) and res.status == Status.OPTIMAL
    assert res.info["stage_search"]["stopped"] == stagesearch.STOP_BOUND
    whole = solve_ilp(inst, backend=backend)
    assert "stage_search" not in whole.info and whole.status == Status.OPTIMAL


def test_the_search_records_the_stage_programs_backend_params(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pair is a stage program, which HiGHS is given with ``presolve_rule_off`` (82d8f2f,
    under the caller's ``backend_params``); the search's answer records what its solver was
    given in ``info["backend_params"]``, as the whole stage program's does (review)."""
    if "highs" not in available_backends():
        pytest.skip("highs is not installed")
    inst = _four_servers()
    monkeypatch.setattr(stagesearch, "SEARCH_MIN_GPUS", 16)
    res = solve_ilp(inst, time_limit=60, backend="highs")
    assert "stage_search" in res.info and res.info["backend_params"] == {"presolve_rule_off": 1 << 15}
    res = solve_ilp(inst, time_limit=60, backend="highs", backend_params={"presolve_rule_off": 0})
    assert "stage_search" in res.info and res.info["backend_params"] == {"presolve_rule_off": 0}


def test_a_poor_given_start_is_not_taken_over_pals() -> None:
    """The search starts from the cheaper of the start given and PAL's placement."""
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    res = solve_stage_search(inst, [0, 1, 2, 3], f, options=SolveOptions(), start=POOR, start_label="poor")
    assert res is not None and check(inst, res) == []
    assert res.objective <= evaluate(inst, POOR, f).cost


def test_running_jobs_under_a_restart_cost_are_priced_as_the_round_prices_them() -> None:
    """p1 runs on server 3; moving it costs 4 (−ln(1 − 180/360)) = 4 ln 2, more than the gang it
    would free from a slow GPU saves (4 ln 1.5): p1 stays, p0 takes a slow server, g0 and g1 the
    others; the search from the poor start finds it and its cost is the round's."""
    inst = _four_servers(restart_cost=180.0, running=True)
    f = binned_factors(inst.cluster, "none")
    res = solve_stage_search(inst, [0, 1, 2, 3], f, options=SolveOptions(), start=POOR, start_label="poor")
    assert res is not None and check(inst, res) == []
    assert res.placements["p1"] == (12, 13, 14, 15)
    assert res.objective == pytest.approx(evaluate(inst, res.placements, f).cost)
    best = solve_ilp(inst)
    assert res.objective == pytest.approx(best.objective, abs=1e-9)


def test_a_ctrl_c_in_the_search_keeps_the_best_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C while a pair is solved raises ``SolveInterrupted`` with the placement the search
    had, priced for the whole round."""
    from pal_opt.errors import SolveInterrupted

    def interrupted(*args: object, **kwargs: object) -> None:
        raise SolveInterrupted(None)

    monkeypatch.setattr(stagesearch, "solve_stage_round", interrupted)
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    with pytest.raises(SolveInterrupted) as caught:
        solve_stage_search(inst, [0, 1, 2, 3], f, start=POOR, start_label="poor")
    res = caught.value.result
    assert res is not None and res.info["interrupted"] and check(inst, res) == []
    assert res.objective <= evaluate(inst, POOR, f).cost and res.message.startswith("interrupted")


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_a_gap_target_does_not_stop_the_pairs_at_their_start(backend: str) -> None:
    """The round's gap target (``abs_gap``, in the whole round's units: 16 ln 1.5 here, more than
    the start's 8 ln 1.5 above the optimum) is not the pairs': each pair is still solved (CP-SAT
    stopped every pair at its start)."""
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    search = PairSearch(inst, range(4), f, POOR, backend=backend, options=SolveOptions(abs_gap=16 * math.log1p(0.5)))
    search.run()
    assert evaluate(inst, search.placement, f).cost == pytest.approx(0.0, abs=1e-9)


def test_a_ctrl_c_between_two_pairs_keeps_the_best_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C outside a pair's solver (here while the second pair's round is made) is a
    ``SolveInterrupted`` with the search's placement, as one in the solver."""
    from pal_opt.errors import SolveInterrupted

    made = []
    part = stagesearch.part_instance

    def interrupted_second(*args: object, **kwargs: object) -> RoundInstance:
        made.append(1)
        if len(made) == 2:
            raise KeyboardInterrupt
        return part(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(stagesearch, "part_instance", interrupted_second)
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    with pytest.raises(SolveInterrupted) as caught:
        solve_stage_search(inst, [0, 1, 2, 3], f, start=POOR, start_label="poor")
    res = caught.value.result
    assert res is not None and res.info["interrupted"] and check(inst, res) == []
    assert res.info["stage_search"]["pairs"] == 1 and res.info["stage_search"]["stopped"] == stagesearch.STOP_INTERRUPTED


def test_no_time_for_any_pair_is_a_fallback_that_says_so() -> None:
    """A deadline that leaves no time for a pair returns the start as the whole stage program
    does then (FALLBACK, ``info["time_limit_reached"]``), and the message says the time limit
    stopped the search."""
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    res = solve_stage_search(inst, [0, 1, 2, 3], f, options=SolveOptions(deadline=time.monotonic() - 1.0),
                             start=POOR, start_label="poor")
    assert res is not None and check(inst, res) == []
    assert res.status == Status.FALLBACK and res.info["time_limit_reached"] == stagesearch.SEARCH_STAGE
    assert res.info["stage_search"]["pairs"] == 0 and res.info["stage_search"]["stopped"] == stagesearch.STOP_DEADLINE
    assert "time limit" in res.message
    done = solve_stage_search(inst, [0, 1, 2, 3], f, start=POOR, start_label="poor")
    assert done is not None and done.status == Status.OPTIMAL and "time_limit_reached" not in done.info
    assert done.info["stage_search"]["stopped"] == stagesearch.STOP_BOUND and "time limit" not in done.message


def _solver_out_of_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pair's stage program gets a deadline that has just passed (its solver does not run)."""
    whole = stagesearch.solve_stage_round

    def late(*args: Any, **kwargs: Any) -> PlacementResult:
        kwargs["options"] = replace(kwargs["options"], deadline=time.monotonic())
        return whole(*args, **kwargs)

    monkeypatch.setattr(stagesearch, "solve_stage_round", late)


def test_a_pair_its_solver_had_no_time_for_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pair whose solver did not run (its one-pair limit) is skipped, not counted as solved; one
    the round's deadline left no time ends the search."""
    _solver_out_of_time(monkeypatch)
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    search = PairSearch(inst, range(4), f, POOR)
    search.run()
    assert search.stats.pairs == 0 and search.stats.passes == stagesearch.STALE_PASSES and search.stats.skipped >= 2
    res = solve_stage_search(inst, [0, 1, 2, 3], f, start=POOR, start_label="poor")
    assert res is not None and res.status == Status.FALLBACK and check(inst, res) == []
    monkeypatch.setattr(stagesearch, "PAIR_SECONDS", 1e6)  # the round's deadline is the pair's
    search = PairSearch(inst, range(4), f, POOR, options=SolveOptions(deadline=time.monotonic() + 1e5))
    search.run()
    assert search.stats.pairs == 0 and search.stats.passes == 1 and search.stats.stopped == stagesearch.STOP_DEADLINE


class _PipelinesOnServerZero(CostTerm):
    """A throwaway term: a pipeline pays 0.2 per GPU on the cluster's first server (position 0;
    a pair's round has other servers first)."""

    name = "pipelines-on-server-zero"

    def placed(self, instance: RoundInstance, job: Job, pos: np.ndarray, level: int, max_factor: float) -> float:
        return 0.2 * float(np.sum(instance.cluster.server_of[pos] == 0)) if job.pipeline is not None else 0.0


@pytest.mark.parametrize("seed", range(4))
def test_a_pairs_gain_is_the_rounds(seed: int) -> None:
    """A pair's answer is priced on the whole round: with a term that prices a job by where its
    GPUs lie in the cluster, the gain the search reports is the round's."""
    register_cost_term(_PipelinesOnServerZero())
    try:
        inst = _four_servers()
        f = binned_factors(inst.cluster, "none")
        search = PairSearch(inst, range(4), f, POOR, options=SolveOptions(seed=seed))
        search.run()
        gain = evaluate(inst, POOR, f).cost - evaluate(inst, search.placement, f).cost
        assert search.stats.gain == pytest.approx(gain, abs=1e-9) and gain >= 0
    finally:
        unregister_cost_term(_PipelinesOnServerZero.name)


def test_a_round_whose_only_pipeline_no_group_holds_gets_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipeline of more GPUs than a pair of servers, a group (``GROUP_MAX_GPUS``) or a
    neighbourhood (``NEIGHBOURHOOD_GPUS``) holds lies on two servers or more, where its own
    neighbourhood (``LARGE_JOB_EXTRA_GPUS``) re-places it: a round whose only pipeline it is gets
    the search too (until the fifteenth session it got the whole stage program), as does one that
    three servers hold (a group)."""
    cl = Cluster.from_arrays(range(12), np.repeat(np.arange(6), 2),
                             {"classA": [1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.2, 1.0, 1.0, 1.0, 1.0]})
    monkeypatch.setattr(stagesearch, "GROUP_MAX_GPUS", 6)
    monkeypatch.setattr(stagesearch, "NEIGHBOURHOOD_GPUS", 6)
    big = 8
    jobs = (Job("p", big, "classA", 0, pipeline=Pipeline((2.0, 1.0), (big - 1, 1))), Job("g", 2, "classA", 1))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    monkeypatch.setattr(stagesearch, "SEARCH_MIN_GPUS", 8)
    assert search_applies(inst, [0, 1]) and not search_applies(replace(inst, jobs=jobs[1:]), [0])
    three = (Job("p", 6, "classA", 0, pipeline=Pipeline((2.0, 1.0), (5, 1))), Job("g", 2, "classA", 1))
    assert search_applies(replace(inst, jobs=three), [0, 1])


def test_solve_ilp_re_places_a_round_whose_only_pipeline_has_more_than_32_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 40-GPU pipeline of :func:`_large_pipeline` (no pair or group holds it, with the real
    constants) under a time limit: the search, whose neighbourhood of the pipeline reaches the
    optimum (its slack stage on the slow GPU), valid."""
    inst, _, least = _large_pipeline()
    monkeypatch.setattr(stagesearch, "SEARCH_MIN_GPUS", 64)
    res = solve_ilp(inst, time_limit=60, backend="highs")
    assert "stage_search" in res.info and res.info["stage_search"]["neighbourhoods"] >= 1
    assert check(inst, res) == [] and res.objective == pytest.approx(least)


def test_a_search_run_again_goes_on() -> None:
    """``run(passes=...)`` again after a search stopped makes the passes asked for."""
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    search = PairSearch(inst, range(4), f, POOR)
    search.run(passes=1)
    assert search.stats.passes == 1 and search.stats.stopped == stagesearch.STOP_PASSES
    search.run(passes=2)
    assert search.stats.passes == 2


def _three_server_pipeline() -> RoundInstance:
    """Four servers of two GPUs, GPU 7 (server 3) slow (1.5); a pipeline of 6 GPUs whose last
    stage has slack (times 2 and 1 on 5 + 1 GPUs) and a 2-GPU gang.  The optimum (6 ln 1.7: the
    pipeline spans the cluster whatever it takes) puts the pipeline on server 3 and two others,
    GPU 7 on its slack stage, the gang on the server left."""
    cl = Cluster.from_arrays(range(8), np.repeat([0, 1, 2, 3], 2), {"classA": [1.0] * 7 + [1.5]})
    jobs = (Job("p", 6, "classA", 0, pipeline=Pipeline((2.0, 1.0), (5, 1))), Job("g", 2, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


#: The pipeline on servers 0-2, the gang on the slow server 3: 6 ln 1.7 + 2 ln 1.5.
ON_THREE = {"p": (0, 1, 2, 3, 4, 5), "g": (6, 7)}


@pytest.mark.parametrize("seed", range(3))
def test_a_pipeline_on_three_servers_is_re_placed_by_its_group(seed: int) -> None:
    """No pair of servers holds the pipeline (it lies on three): only the group of its servers
    plus one more moves it, to the slow server, and frees the gang from the slow GPU."""
    inst = _three_server_pipeline()
    f = binned_factors(inst.cluster, "none")
    spread = 6 * math.log(1.7)
    assert evaluate(inst, ON_THREE, f).cost == pytest.approx(spread + 2 * math.log(1.5))
    search = PairSearch(inst, range(2), f, ON_THREE, options=SolveOptions(seed=seed))
    search.run()
    assert search.stats.groups >= 1 and search.stats.improved >= 1
    assert evaluate(inst, search.placement, f).cost == pytest.approx(spread)
    assert 7 in search.placement["p"] and search.placement["p"][-1] == 7  # the slow GPU on the slack stage
    res = solve_stage_search(inst, [0, 1], f, options=SolveOptions(seed=seed), start=ON_THREE, start_label="poor")
    assert res is not None and check(inst, res) == [] and res.objective == pytest.approx(spread)


def _seeded_round(seed: int, server_gpus: int = 2, running: bool = False) -> RoundInstance:
    """A small random round on servers of ``server_gpus`` GPUs: pipelines of 3-6 GPUs (so lying
    on several servers) and gangs filling at most the cluster, factors drawn among 1, 1.2, 1.5;
    with ``running`` the first jobs run where PAL put them and a restart costs 120 s."""
    rng = np.random.default_rng(seed)
    n = 12
    cl = Cluster.from_arrays(range(n), np.arange(n) // server_gpus, {"classA": rng.choice([1.0, 1.0, 1.2, 1.5], n)})
    jobs: list[Job] = []
    room = n
    while room >= 3:
        d = int(rng.integers(3, min(6, room) + 1))
        split = int(rng.integers(1, d))
        jobs.append(Job(f"p{len(jobs)}", d, "classA", len(jobs),
                        pipeline=Pipeline((float(rng.choice([1.5, 2.0, 3.0])), 1.0), (d - split, split))))
        room -= d
        if room >= 1 and rng.random() < 0.7:
            g = int(rng.integers(1, min(3, room) + 1))
            jobs.append(Job(f"g{len(jobs)}", g, "classA", len(jobs)))
            room -= g
    inst = RoundInstance(cl, tuple(jobs), RoundParams(binning="none", restart_cost=120.0 if running else 0.0))
    if running:
        from pal_opt.ilp.stageround import start_placement

        pal = start_placement(inst, range(len(jobs)), binned_factors(cl, "none"))
        assert pal is not None
        jobs = [replace(j, placement=pal[j.id]) if k < 2 else j for k, j in enumerate(jobs)]
        inst = replace(inst, jobs=tuple(jobs))
    return inst


@pytest.mark.parametrize("running", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_the_jobs_alone_bound_is_below_the_proven_optimum(seed: int, running: bool) -> None:
    """The bound of the search's answer (each job alone on the free GPUs) is at most its answer and
    at most the optimum the whole stage program proves, on seeded rounds (with running jobs under
    a restart cost: keep columns and move charges)."""
    from pal_opt.ilp.stageround import alone_bound, start_placement

    inst = _seeded_round(seed, running=running)
    f = binned_factors(inst.cluster, "none")
    admitted = list(range(len(inst.jobs)))
    best = solve_ilp(inst)
    assert best.status == Status.OPTIMAL and len(best.placements) == len(admitted)
    bound = alone_bound(inst, admitted, f)
    assert bound is not None and bound <= best.objective + 1e-9
    start = start_placement(inst, admitted, f)
    assert start is not None
    res = solve_stage_search(inst, admitted, f, options=SolveOptions(seed=seed), start=start, start_label="PAL")
    assert res is not None and check(inst, res) == []
    assert res.bound == pytest.approx(bound) and res.bound <= res.objective + 1e-9
    assert res.gap is not None and res.gap >= 0
    assert (res.status == Status.OPTIMAL) == (res.gap <= stagesearch.PROVEN_GAP)


@pytest.mark.parametrize("seed", [0, 2, 3, 5])
def test_the_search_with_groups_is_deterministic_and_valid(seed: int) -> None:
    """On rounds whose pipelines lie on several 2-GPU servers (groups visited), the same round
    and seed give the same placement, valid and never worse than the start."""
    from pal_opt.ilp.stageround import start_placement

    inst = _seeded_round(seed)
    f = binned_factors(inst.cluster, "none")
    admitted = list(range(len(inst.jobs)))
    start = start_placement(inst, admitted, f)
    assert start is not None
    runs = []
    for _ in range(2):
        search = PairSearch(inst, admitted, f, start, options=SolveOptions(seed=seed))
        search.run()
        runs.append((search.placement, search.stats.as_info()))
    assert runs[0] == runs[1] and runs[0][1]["groups"] >= 1
    res = solve_stage_search(inst, admitted, f, options=SolveOptions(seed=seed), start=start, start_label="PAL")
    assert res is not None and check(inst, res) == [] and res.objective <= evaluate(inst, start, f).cost + 1e-9


def test_an_unseen_term_leaves_the_search_without_a_bound() -> None:
    """A term the program cannot see (no ``slots``) is not in the bound: the answer keeps it only
    as ``info["program_bound"]``, with no gap, and is not proven."""
    register_cost_term(_PipelinesOnServerZero())
    try:
        inst = _four_servers()
        f = binned_factors(inst.cluster, "none")
        res = solve_stage_search(inst, [0, 1, 2, 3], f, start=POOR, start_label="poor")
        assert res is not None and res.bound is None and res.gap is None and res.status == Status.FEASIBLE
        assert "program_bound" in res.info
    finally:
        unregister_cost_term(_PipelinesOnServerZero.name)


@pytest.mark.parametrize("binning", ["none", "silhouette"])
@pytest.mark.parametrize("seed", range(6))
def test_the_jobs_alone_bound_is_each_jobs_cheapest_column_of_the_program(seed: int, binning: str) -> None:
    """``alone_bound`` finds each job's cheapest mode without listing the modes: it equals the sum
    over jobs of the least cost among the job's mode (and keep) columns of the stage program, plus
    its constant, on seeded rounds (4-GPU servers: jobs alone on a server or spread; running jobs
    under a restart cost on odd seeds)."""
    from pal_opt.ilp.stageround import KIND_KEEP, KIND_MODE, alone_bound, build_stage_round

    inst = _seeded_round(seed, server_gpus=4, running=seed % 2 == 1)
    inst = replace(inst, params=replace(inst.params, binning=binning))
    f = binned_factors(inst.cluster, binning)
    admitted = list(range(len(inst.jobs)))
    sr = build_stage_round(inst, admitted, f)
    priced = (sr.kind == KIND_MODE) | (sr.kind == KIND_KEEP)
    least = [sr.program.c[priced & (sr.job == a)].min() for a in range(len(admitted))]
    assert alone_bound(inst, admitted, f) == pytest.approx(math.fsum(least) + sr.program.obj_offset, abs=1e-9)


def test_a_start_at_the_bound_is_proven_without_a_pass() -> None:
    """A start whose cost meets the jobs-alone bound is OPTIMAL at once: the search stops before
    its first pass, with no time limit noted."""
    inst = _four_servers()
    f = binned_factors(inst.cluster, "none")
    best = {"p0": (0, 2, 3, 1), "p1": (4, 5, 7, 6), "g0": (8, 9, 10, 11), "g1": (12, 13, 14, 15)}
    assert evaluate(inst, best, f).cost == pytest.approx(0.0, abs=1e-12)
    res = solve_stage_search(inst, [0, 1, 2, 3], f, start=best, start_label="best")
    assert res is not None and res.status == Status.OPTIMAL and res.gap == pytest.approx(0.0, abs=1e-9)
    assert res.info["stage_search"]["passes"] == 0 and res.info["stage_search"]["stopped"] == stagesearch.STOP_BOUND
    assert "time_limit_reached" not in res.info and check(inst, res) == []


# ---------------------------------------------------------------- the whole program's bound
# Rounds of fewer than SEARCH_MIN_GPUS free GPUs get the whole stage program; since 2026-12-07 its
# answer carries the jobs-alone bound too, the larger of it and the solver's.

def _optimum(inst: RoundInstance) -> PlacementResult:
    """The whole stage program's proven optimum (no limit)."""
    best = solve_ilp(inst)
    assert best.status == Status.OPTIMAL and best.info["program"] == "stage" and "stage_search" not in best.info
    return best


@pytest.mark.parametrize("running", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_a_whole_program_cut_short_carries_the_jobs_alone_bound(seed: int, running: bool) -> None:
    """HiGHS stopped at once (its own ``time_limit`` 0, under a generous deadline) returns the
    start with no bound of its own: the answer carries the jobs-alone bound, at most its objective
    and at most the optimum an unlimited solve proves, with its gap; OPTIMAL exactly when that gap
    is closed (until 2026-12-07: no bound, no gap).  A start that bound proves optimal (seed 7 with
    running jobs) is the answer with no program solved."""
    from pal_opt.cost import relative_gap
    from pal_opt.ilp.stageround import START_MEETS_BOUND, alone_bound, start_meets_bound

    inst = _seeded_round(seed, running=running)
    admitted = list(range(len(inst.jobs)))
    alone = alone_bound(inst, admitted, binned_factors(inst.cluster, "none"))
    best = _optimum(inst)
    res = solve_ilp(inst, time_limit=60.0, backend="highs", backend_params={"time_limit": 0.0})
    assert res.info["program"] == "stage" and "stage_search" not in res.info and check(inst, res) == []
    if start_meets_bound(inst, admitted, binned_factors(inst.cluster, "none"), alone) is not None:
        assert res.info["solver_status"] == START_MEETS_BOUND and "meets the jobs-alone bound" in res.message
    else:
        assert "Time limit reached" in res.message and "bound: each job alone on the free GPUs" in res.message
    assert alone is not None and res.bound == pytest.approx(alone) and res.info["alone_bound"] == pytest.approx(alone)
    assert res.bound <= res.objective + 1e-9 and res.bound <= best.objective + 1e-9
    assert res.gap == pytest.approx(relative_gap(res.objective, res.bound, sum(j.demand for j in inst.jobs)))
    assert (res.status == Status.OPTIMAL) == (res.gap <= stagesearch.PROVEN_GAP)
    assert res.status in (Status.OPTIMAL, Status.FEASIBLE)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_a_stage_program_the_deadline_left_unbuilt_carries_the_bound_given(seed: int) -> None:
    """A deadline already past: the stage program is not built and the start is returned with the
    jobs-alone bound given (``alone=``), FALLBACK; a start that bound proves optimal (seed 7) is
    OPTIMAL, with no time limit noted as the program was not needed; without the bound, no
    bound, as before."""
    from pal_opt.ilp.stageround import START_MEETS_BOUND, alone_bound, solve_stage_round

    inst = _seeded_round(seed, running=True)
    f = binned_factors(inst.cluster, "none")
    admitted = list(range(len(inst.jobs)))
    alone = alone_bound(inst, admitted, f)
    best = _optimum(inst)
    res = solve_stage_round(inst, admitted, f, backend="highs", options=SolveOptions(deadline=time.monotonic()),
                            alone=alone)
    assert res.bound == pytest.approx(alone) and res.bound <= best.objective + 1e-9 and res.gap is not None
    proven = res.gap <= stagesearch.PROVEN_GAP
    assert proven == (seed == 7) and check(inst, res) == []
    assert res.status == (Status.OPTIMAL if proven else Status.FALLBACK)
    assert res.info.get("time_limit_reached") == (None if proven else "building the stage program")
    assert (res.info.get("solver_status") == START_MEETS_BOUND) == proven
    bare = solve_stage_round(inst, admitted, f, backend="highs", options=SolveOptions(deadline=time.monotonic()))
    assert bare.status == Status.FALLBACK and bare.bound is None and bare.gap is None
    assert bare.placements == res.placements


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_the_solvers_better_bound_is_kept(seed: int) -> None:
    """Where the solver's bound is above the jobs-alone bound it is the answer's: HiGHS stopped at
    its first improving solution (4-GPU servers, where its bound then exceeds the jobs-alone one)
    gives the same bound and gap with the jobs-alone bound given as without; and an unlimited
    solve reports the proven optimum as its bound."""
    from pal_opt.ilp.stageround import alone_bound, solve_stage_round

    inst = _seeded_round(seed, server_gpus=4)
    f = binned_factors(inst.cluster, "none")
    admitted = list(range(len(inst.jobs)))
    alone = alone_bound(inst, admitted, f)
    opts = SolveOptions(backend_params={"mip_max_improving_sols": 1})
    bare = solve_stage_round(inst, admitted, f, backend="highs", options=opts)
    res = solve_stage_round(inst, admitted, f, backend="highs", options=opts, alone=alone)
    assert alone is not None and bare.bound is not None and bare.bound > alone + 1e-6
    assert res.status == bare.status == Status.FEASIBLE and res.objective == pytest.approx(bare.objective)
    assert res.bound == pytest.approx(bare.bound) and res.gap == pytest.approx(bare.gap)
    assert "each job alone" not in res.message and res.info["alone_bound"] == pytest.approx(alone)
    best = _optimum(inst)
    assert best.bound == pytest.approx(best.objective) and best.info["alone_bound"] < best.bound - 1e-6


def test_an_unseen_term_leaves_the_whole_program_without_a_bound() -> None:
    """A term the stage program cannot see: neither the solver's bound nor the jobs-alone bound is
    one on the round cost, so the answer keeps the program's in ``info["program_bound"]``, with no
    bound, no gap, not proven (until 2026-12-07 the solver's bound and gap were set again after
    pricing had taken them out)."""
    register_cost_term(_PipelinesOnServerZero())
    try:
        inst = _four_servers()
        for limited in (False, True):
            res = solve_ilp(inst, time_limit=60.0 if limited else None, backend="highs",
                            backend_params={"time_limit": 0.0} if limited else None)
            assert res.info["program"] == "stage" and "stage_search" not in res.info
            assert res.bound is None and res.gap is None and res.status == Status.FEASIBLE
            assert "program_bound" in res.info and "give no slots" in res.message
    finally:
        unregister_cost_term(_PipelinesOnServerZero.name)


# ---------------------------------------------------------------- a start the bound proves
# Since 2026-12-07 a start that the jobs-alone bound proves optimal is the whole program's answer
# as it is: the stage program is neither built nor solved (under a deadline, nor is the gang view).

def _met_rounds() -> list[RoundInstance]:
    """Rounds whose start (PAL's) meets the jobs-alone bound: ``formulations/pipeline_round.md``
    §5 (two servers of four GPUs, a slow GPU on each, a pipeline with slack and a 4-GPU gang:
    optimum 4 ln 1.5), and seeded round 7 with running jobs under a restart cost."""
    cl = Cluster.from_arrays(range(8), [0, 0, 0, 0, 1, 1, 1, 1], {"classA": [1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5]})
    jobs = (Job("p", 4, "classA", 0, pipeline=Pipeline((2.0, 1.0), (3, 1))), Job("g", 4, "classA", 1))
    return [RoundInstance(cl, jobs, RoundParams(binning="none")), _seeded_round(7, running=True)]


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
@pytest.mark.parametrize("which", [0, 1])
def test_a_start_the_bound_proves_is_the_answer_without_the_program(which: int, backend: str) -> None:
    """The answer is the start, OPTIMAL, its bound the jobs-alone one (gap 0), with no program
    figures (``num_vars``) and ``info["solver_status"]`` and the message saying that the program
    was not needed; it costs the optimum the program proves when solved (without the bound), and
    is the same on every run.  Until 2026-12-07 the program was built and solved all the same."""
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")
    from pal_opt.ilp.stageround import START_MEETS_BOUND, alone_bound, solve_stage_round

    inst = _met_rounds()[which]
    f = binned_factors(inst.cluster, "none")
    admitted = list(range(len(inst.jobs)))
    alone = alone_bound(inst, admitted, f)
    res = solve_ilp(inst, backend=backend)
    assert res.status == Status.OPTIMAL and res.info["program"] == "stage" and check(inst, res) == []
    assert res.info["solver_status"] == START_MEETS_BOUND and "num_vars" not in res.info
    assert res.info["start"] == "PAL's" and "the stage program was not needed" in res.message
    assert alone is not None and res.bound == pytest.approx(alone) and res.gap == pytest.approx(0.0, abs=1e-9)
    solved = solve_stage_round(inst, admitted, f, backend=backend)  # no bound given: the program runs
    assert solved.status == Status.OPTIMAL and "num_vars" in solved.info
    assert res.objective == pytest.approx(solved.objective, abs=1e-9)
    assert solve_ilp(inst, backend=backend).placements == res.placements


def test_under_a_deadline_a_start_the_bound_proves_needs_no_gang_view() -> None:
    """Under a time limit PAL's start, proven by the jobs-alone bound, is the answer before the
    round program places the round with pipelines seen as gangs (``info["gang_view"]`` says it
    did not run; it ran until 2026-12-07); the same answer as without a limit."""
    from pal_opt.ilp.stageround import START_MEETS_BOUND

    inst = _met_rounds()[0]
    res = solve_ilp(inst, time_limit=60.0, backend="highs")
    assert res.info["gang_view"] == "not run: PAL's start placement meets the jobs-alone bound"
    assert res.info["solver_status"] == START_MEETS_BOUND and res.status == Status.OPTIMAL
    assert res.placements == solve_ilp(inst, backend="highs").placements and check(inst, res) == []


def test_a_start_above_the_bound_gets_the_program() -> None:
    """PAL's start above the jobs-alone bound (8 ln 1.5 against 0): the program is built and
    solved, under a deadline from the gang view's start, and proves the optimum, 0."""
    from pal_opt.ilp.stageround import START_MEETS_BOUND

    inst = _four_servers()
    for limit in (None, 60.0):
        res = solve_ilp(inst, time_limit=limit, backend="highs")
        assert res.status == Status.OPTIMAL and res.objective == pytest.approx(0.0, abs=1e-9)
        assert "num_vars" in res.info and res.info["solver_status"] != START_MEETS_BOUND
        assert limit is None or res.info["gang_view"].startswith("optimal")


def test_an_unseen_term_leaves_the_program_to_prove_a_start_at_the_bound() -> None:
    """With a term the program cannot see, the jobs-alone bound is no bound on the round cost:
    a start that meets it is not taken as proven (``start_meets_bound`` follows ``bounded``) and
    the program runs."""
    from pal_opt.ilp.stageround import START_MEETS_BOUND, alone_bound, start_meets_bound

    inst = _met_rounds()[0]
    f = binned_factors(inst.cluster, "none")
    alone = alone_bound(inst, [0, 1], f)
    assert start_meets_bound(inst, [0, 1], f, alone) is not None
    register_cost_term(_PipelinesOnServerZero())
    try:
        assert start_meets_bound(inst, [0, 1], f, alone) is None
        res = solve_ilp(inst, backend="highs")
        assert res.info.get("solver_status") != START_MEETS_BOUND and "num_vars" in res.info
    finally:
        unregister_cost_term(_PipelinesOnServerZero.name)


@pytest.mark.parametrize("which", [0, 1])
def test_canonical_takes_a_start_the_bound_proves_as_a_proven_optimum(which: int) -> None:
    """``canonical=True``: the start the bound proves is a proven optimum, and is replaced by its
    canonical representative as the solver's would be (``info["canonical"]``): the same placement
    as the canonical representative of the optimum the program proves when solved."""
    from pal_opt.ilp.canonical import ALREADY, CHANGED, canonical_optimum
    from pal_opt.ilp.stageround import START_MEETS_BOUND, solve_stage_round

    inst = _met_rounds()[which]
    f = binned_factors(inst.cluster, "none")
    res = solve_ilp(inst, backend="highs", canonical=True)
    assert res.info["solver_status"] == START_MEETS_BOUND and res.info["canonical"] in (CHANGED, ALREADY)
    assert res.status == Status.OPTIMAL and check(inst, res) == []
    assert canonical_optimum(inst, res.placements, f) == res.placements
    solved = solve_stage_round(inst, list(range(len(inst.jobs))), f, backend="highs")
    assert canonical_optimum(inst, solved.placements, f) == res.placements


def _crowded_servers(idle: bool) -> tuple[RoundInstance, dict[str, tuple[int, ...]], float]:
    """Four servers of 16 GPUs; a 24-GPU pipeline ``p`` (stage times 2 and 1 on 23 + 1 GPUs) on 8
    GPUs of each of servers 0-2 (48 free GPUs, more than ``GROUP_MAX_GPUS``), a 16-GPU gang ``f``
    on servers 1 and 2, on server 0 a 4-GPU gang ``g`` and (unless ``idle``) a 4-GPU gang ``h``,
    and a 16-GPU gang ``k`` on server 3.  No pair of servers holds ``p`` (three servers) and no
    group (48 free GPUs); the pairs hold only gangs, which they leave as they are.

    Without ``idle``: GPU 8, ``g``'s, is slow (1.5), so ``g`` pays ``4 ln 1.5``; ``p``'s slack
    stage (GPU 7) can take it and ``g`` GPU 7.  With ``idle``: GPUs 12-15 idle; ``p``'s GPUs 0
    and 1 are slow, one on each stage (pace 1.5), and an idle fast GPU lets it keep one slow GPU
    only, on its slack stage.  Either way ``p``'s neighbourhood (``p``, ``g``, ``h`` or the idle
    GPUs; ``f`` does not fit it) reaches ``40 ln 1.7`` (``p`` and ``f`` span servers), which the
    start placement, returned with it, exceeds."""
    f = [1.0] * 64
    if idle:
        f[0] = f[1] = 1.5
    else:
        f[8] = 1.5
    cl = Cluster.from_arrays(range(64), np.repeat([0, 1, 2, 3], 16), {"classA": f})
    start = {"p": (*range(0, 7), *range(16, 24), *range(32, 40), 7), "g": (8, 9, 10, 11),
             "f": (*range(24, 32), *range(40, 48)), "k": tuple(range(48, 64))}
    if idle:  # GPU 0 on the heavy stage, GPU 1 on the light one
        start["p"] = (0, *range(2, 8), *range(16, 24), *range(32, 40), 1)
    jobs = [Job("p", 24, "classA", 0, pipeline=Pipeline((2.0, 1.0), (23, 1))), Job("g", 4, "classA", 1),
            Job("f", 16, "classA", 2), Job("k", 16, "classA", 3)]
    if not idle:
        jobs.append(Job("h", 4, "classA", 4))
        start["h"] = (12, 13, 14, 15)
    return RoundInstance(cl, tuple(jobs), RoundParams(binning="none")), start, 40 * math.log(1.7)


@pytest.mark.parametrize("idle", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_a_job_on_servers_of_many_free_gpus_is_re_placed_in_its_neighbourhood(idle: bool, seed: int) -> None:
    """A pipeline on three servers holding 48 free GPUs (no pair or group holds it) is re-placed
    in its neighbourhood: with the gangs lying on its servers that fit (a slow GPU swapped onto
    its slack stage), or with the fastest idle GPUs; the same on every run, valid."""
    inst, start, least = _crowded_servers(idle)
    f = binned_factors(inst.cluster, "none")
    admitted = list(range(len(inst.jobs)))
    assert evaluate(inst, start, f).cost == pytest.approx(least + (24 if idle else 4) * math.log(1.5))
    # the first solve in a process may outlast PAIR_SECONDS (HiGHS's server starting), and a solve
    # that does is not counted: run once before the runs compared
    PairSearch(inst, admitted, f, start).run(passes=1)
    runs = []
    for _ in range(2):
        search = PairSearch(inst, admitted, f, start, options=SolveOptions(seed=seed))
        search.run()
        runs.append((search.placement, search.stats.as_info()))
    assert runs[0] == runs[1]
    stats = runs[0][1]
    assert stats["neighbourhoods"] >= 1 and stats["groups"] == 0 and stats["improved"] >= 1
    assert evaluate(inst, runs[0][0], f).cost == pytest.approx(least)
    # (from the cheaper of this start and PAL's, which with idle GPUs is PAL's)
    res = solve_stage_search(inst, admitted, f, options=SolveOptions(seed=seed), start=start, start_label="poor")
    assert res is not None and check(inst, res) == [] and res.objective <= evaluate(inst, start, f).cost
    assert "neighbourhoods of a multi-server job" in res.message
    assert idle or res.objective == pytest.approx(least)


def test_a_neighbourhood_holds_at_most_its_cap_of_free_gpus() -> None:
    """A neighbourhood opens the job's GPUs, other jobs lying wholly on its servers while they fit
    and idle GPUs fastest first, never more than ``NEIGHBOURHOOD_GPUS`` GPUs in all; a job on two
    servers has one too (no group holds it), with nothing else when nothing else fits."""
    inst, start, _ = _crowded_servers(True)
    f = binned_factors(inst.cluster, "none")
    search = PairSearch(inst, range(4), f, start)
    free = np.bincount(inst.cluster.server_of, minlength=4)
    found = {opened.jobs[0]: (servers.tolist(), opened) for servers, opened in
             search._neighbourhoods(np.random.default_rng(0), free)}
    assert set(found) == {"p", "f"}
    servers, opened = found["p"]
    assert servers == [0, 1, 2] and opened.jobs == ("p", "g") and sorted(opened.idle.tolist()) == [12, 13, 14, 15]
    assert found["f"][0] == [1, 2] and found["f"][1].jobs == ("f",) and found["f"][1].idle.size == 0
    for _, (_, opened) in found.items():
        assert sum(len(start[j]) for j in opened.jobs) + opened.idle.size <= stagesearch.NEIGHBOURHOOD_GPUS


def _large_pipeline() -> tuple[RoundInstance, dict[str, tuple[int, ...]], float]:
    """Four servers of 16 GPUs; a 40-GPU pipeline ``p`` (stage times 2 and 1 on 39 + 1 GPUs, more
    than ``NEIGHBOURHOOD_GPUS``) on servers 0, 1 and half of 2, an 8-GPU gang ``g`` on the other
    half of server 2, whose GPU 40 is slow (1.5), and a 16-GPU gang ``k`` on server 3.  No pair
    holds ``p`` (three servers), no group (48 free GPUs), and no pair or group holding ``g`` holds a
    pipeline: only ``p``'s neighbourhood (its GPUs and ``g``'s) trades GPU 40 onto ``p``'s slack
    stage, which saves ``g``'s ``8 ln 1.5``; ``p`` spans servers (``40 ln 1.7``) either way."""
    f = [1.0] * 64
    f[40] = 1.5
    cl = Cluster.from_arrays(range(64), np.repeat([0, 1, 2, 3], 16), {"classA": f})
    jobs = (Job("p", 40, "classA", 0, pipeline=Pipeline((2.0, 1.0), (39, 1))), Job("g", 8, "classA", 1),
            Job("k", 16, "classA", 2))
    start = {"p": tuple(range(40)), "g": tuple(range(40, 48)), "k": tuple(range(48, 64))}
    return RoundInstance(cl, jobs, RoundParams(binning="none")), start, 40 * math.log(1.7)


@pytest.mark.parametrize("seed", range(3))
def test_a_pipeline_of_more_than_32_gpus_is_re_placed_in_its_neighbourhood(seed: int) -> None:
    """A 40-GPU pipeline was never re-placed (no pair, group or neighbourhood held it); now its
    neighbourhood, its own GPUs and at most ``LARGE_JOB_EXTRA_GPUS`` more, takes the slow GPU of a
    gang on its servers onto its slack stage; the same on every run, valid."""
    inst, start, least = _large_pipeline()
    f = binned_factors(inst.cluster, "none")
    assert evaluate(inst, start, f).cost == pytest.approx(least + 8 * math.log(1.5))
    PairSearch(inst, range(3), f, start).run(passes=1)  # HiGHS's server started (see above)
    runs = []
    for _ in range(2):
        search = PairSearch(inst, range(3), f, start, options=SolveOptions(seed=seed))
        search.run()
        runs.append((search.placement, search.stats.as_info()))
    assert runs[0] == runs[1]
    placement, stats = runs[0]
    assert stats["neighbourhoods"] >= 1 and stats["groups"] == 0 and stats["improved"] >= 1
    assert evaluate(inst, placement, f).cost == pytest.approx(least) and placement["p"][-1] == 40
    opened = search._open("p", search.home["p"], np.random.default_rng(seed))
    assert opened.jobs == ("p", "g") and opened.idle.size == 0 and opened.servers.tolist() == [0, 1, 2]
    res = solve_stage_search(inst, [0, 1, 2], f, options=SolveOptions(seed=seed), start=start, start_label="poor")
    assert res is not None and check(inst, res) == [] and res.objective == pytest.approx(least)


def test_a_large_jobs_neighbourhood_opens_at_most_its_extra_gpus() -> None:
    """A job of more than ``NEIGHBOURHOOD_GPUS`` GPUs opens its own and at most
    ``LARGE_JOB_EXTRA_GPUS`` more: a gang of 8 on its servers does not fit beside the share kept
    for idle GPUs (``IDLE_SHARE``), and 8 of the 16 idle GPUs of server 3 are taken, fastest first
    (all faster than the pipeline's slow GPU 0)."""
    f = [1.0] * 64
    f[0] = 1.5
    cl = Cluster.from_arrays(range(64), np.repeat([0, 1, 2, 3], 16), {"classA": f})
    jobs = (Job("p", 40, "classA", 0, pipeline=Pipeline((2.0, 1.0), (39, 1))), Job("k", 8, "classA", 1))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    start = {"p": tuple(range(40)), "k": tuple(range(40, 48))}
    search = PairSearch(inst, range(2), binned_factors(cl, "none"), start)
    found = {opened.jobs[0]: opened
             for _, opened in search._neighbourhoods(np.random.default_rng(0), np.bincount(cl.server_of))}
    assert set(found) == {"p"}
    assert found["p"].jobs == ("p",) and found["p"].idle.tolist() == list(range(48, 48 + stagesearch.LARGE_JOB_EXTRA_GPUS))
    assert found["p"].servers.tolist() == [0, 1, 2, 3]


def _idle_server_elsewhere() -> tuple[RoundInstance, dict[str, tuple[int, ...]], float]:
    """Four servers of 16 GPUs; a 24-GPU pipeline ``p`` (stage times 2 and 1 on 23 + 1 GPUs) on
    server 0 and half of server 1, its GPUs 0 and 1 slow (1.5, one on each stage: pace 1.5); a
    16-GPU gang ``f`` on the other half of server 1 and half of server 3, an 8-GPU gang ``k`` on
    the rest of server 3; server 2 idle.  Only an idle fast GPU of server 2, outside ``p``'s
    servers, lets ``p`` keep one slow GPU only, on its slack stage: ``p``'s neighbourhood on its
    own servers has no idle GPU and ``f`` does not lie on them, and no pair or group holds ``p``
    with server 2 (a pair holds the jobs lying wholly on it).  (``p`` may leave both slow GPUs.)"""
    f = [1.0] * 64
    f[0] = f[1] = 1.5
    cl = Cluster.from_arrays(range(64), np.repeat([0, 1, 2, 3], 16), {"classA": f})
    jobs = (Job("p", 24, "classA", 0, pipeline=Pipeline((2.0, 1.0), (23, 1))), Job("f", 16, "classA", 1),
            Job("k", 8, "classA", 2))
    start = {"p": (0, *range(2, 24), 1), "f": (*range(24, 32), *range(48, 56)), "k": tuple(range(56, 64))}
    return RoundInstance(cl, jobs, RoundParams(binning="none")), start, 40 * math.log(1.7)


@pytest.mark.parametrize("outside", [True, False])
def test_a_neighbourhood_takes_idle_gpus_from_a_server_outside_the_jobs(
        monkeypatch: pytest.MonkeyPatch, outside: bool) -> None:
    """The neighbourhood of a job adds the server outside its own with the most idle GPUs faster
    for it than its slowest, and the job moves a slow GPU's stage there; without that server
    (``OUTSIDE_SERVER`` off, as before) the search finds nothing."""
    monkeypatch.setattr(stagesearch, "OUTSIDE_SERVER", outside)
    inst, start, least = _idle_server_elsewhere()
    f = binned_factors(inst.cluster, "none")
    assert evaluate(inst, start, f).cost == pytest.approx(least + 24 * math.log(1.5))
    search = PairSearch(inst, range(3), f, start)
    opened = search._open("p", search.home["p"], np.random.default_rng(0))
    assert opened.jobs == ("p",)
    assert opened.servers.tolist() == ([0, 1, 2] if outside else [0, 1])
    assert opened.idle.tolist() == (list(range(32, 40)) if outside else [])
    search.run()
    assert search.stats.neighbourhoods >= 1
    if outside:
        assert evaluate(inst, search.placement, f).cost == pytest.approx(least)
        slow = set(search.placement["p"][:-1]) & {0, 1}  # no slow GPU on its heavy stage
        assert not slow and set(search.placement["p"]) & set(range(32, 40))  # part of it on server 2
        # (from the cheaper of this start and PAL's, which puts f on one server)
        res = solve_stage_search(inst, [0, 1, 2], f, start=start, start_label="poor")
        assert res is not None and check(inst, res) == [] and res.objective <= least + 1e-9
    else:
        assert search.stats.improved == 0 and search.placement == start


def _neighbourhood_round(servers: int, jobs: dict[str, tuple[int, ...]], busy: range | list[int] = ()) -> PairSearch:
    """Servers of 16 GPUs of factor 1.0 but GPU 0 (1.5, the first job's); the first job of
    ``jobs`` a pipeline (stage times 2 and 1, its last GPU alone on the second), the others gangs,
    each on the GPUs given; the GPUs ``busy`` held by jobs outside the round."""
    n = 16 * servers
    f = [1.0] * n
    f[0] = 1.5
    state = [1 if g in busy else 0 for g in range(n)]
    cl = Cluster.from_arrays(range(n), np.repeat(range(servers), 16), {"classA": f}, state=state)
    made = [Job(jid, len(gpus), "classA", k, pipeline=Pipeline((2.0, 1.0), (len(gpus) - 1, 1)) if k == 0 else None)
            for k, (jid, gpus) in enumerate(jobs.items())]
    inst = RoundInstance(cl, tuple(made), RoundParams(binning="none"))
    return PairSearch(inst, range(len(made)), binned_factors(cl, "none"), dict(jobs))


def test_a_neighbourhood_with_a_job_drawn_takes_only_the_idle_gpus_its_cap_leaves() -> None:
    """``p`` (8 GPUs on servers 0 and 1) and ``k`` (8, wholly on server 0) fill 16 of the cap of
    ``NEIGHBOURHOOD_GPUS``: 16 idle GPUs of the 32 on servers 0-2 (server 2 added outside), the
    lowest positions first on a tie of speed, not the 24 the job's own GPUs alone would leave."""
    search = _neighbourhood_round(3, {"p": (0, 1, 2, 3, 16, 17, 18, 19), "k": tuple(range(4, 12))})
    opened = search._open("p", search.home["p"], np.random.default_rng(0))
    assert opened.jobs == ("p", "k") and opened.servers.tolist() == [0, 1, 2]
    assert opened.idle.tolist() == [12, 13, 14, 15, *range(20, 32)]
    assert 16 + opened.idle.size == stagesearch.NEIGHBOURHOOD_GPUS


def test_a_job_of_exactly_the_neighbourhood_cap_has_no_more_room() -> None:
    """A 32-GPU job (``NEIGHBOURHOOD_GPUS``, not more) is not a large job: on two servers its
    neighbourhood is its own GPUs alone (no ``LARGE_JOB_EXTRA_GPUS`` of idle server 2); on three
    servers of no other free GPU a group holds it, so it has no neighbourhood."""
    two = _neighbourhood_round(3, {"p": tuple(range(32))})
    opened = two._open("p", two.home["p"], np.random.default_rng(0))
    assert opened.jobs == ("p",) and opened.idle.size == 0
    three = _neighbourhood_round(3, {"p": (*range(16), *range(16, 24), *range(32, 40))},
                                 busy=[*range(24, 32), *range(40, 48)])
    cl = three.instance.cluster
    free = np.bincount(cl.server_of[cl.state == 0], minlength=cl.num_servers)
    assert [g.tolist() for g in three._groups(np.random.default_rng(0), free)] == [[0, 1, 2]]
    assert list(three._neighbourhoods(np.random.default_rng(0), free)) == []


def test_the_outside_server_is_the_one_of_most_fast_idle_gpus_outside_the_jobs_lowest_on_a_tie() -> None:
    # servers 2 and 3 both wholly idle: the lower, 2
    tie = _neighbourhood_round(4, {"p": (0, 1, 2, 3, 16, 17, 18, 19)}, busy=[*range(4, 16), *range(20, 32)])
    opened = tie._open("p", tie.home["p"], np.random.default_rng(0))
    assert opened.servers.tolist() == [0, 1, 2] and opened.idle.tolist() == list(range(32, 48))
    # the job's own servers hold more idle GPUs (12 each) than server 2 (4): server 2 is still added
    own = _neighbourhood_round(3, {"p": (0, 1, 2, 3, 16, 17, 18, 19)}, busy=range(32, 44))
    opened = own._open("p", own.home["p"], np.random.default_rng(0))
    assert opened.servers.tolist() == [0, 1, 2]
