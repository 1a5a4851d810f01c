"""A running pipeline job re-mapped on the same GPUs is a move (:func:`pal_opt.model.keeps_placement`).

A pipeline's GPUs are read stage by stage, so the same GPU set in another stage map is another
placement: the job must restart.  Each place that asks "did this running job keep its GPUs?"
answers it through the one helper, and each is tested here on a running pipeline of two stages
(2 replicas, then 1) on GPUs 0, 1 | 2:

* the helper: replicas permuted within a stage keep the placement, a GPU that changes stage does not;
* the result: ``jobs_to_terminate`` lists the re-mapped job, not the permuted one;
* the cost: the restart and migration terms charge a re-map, not a permutation;
* the checker: rules ``sticky``, ``preempt`` and ``repair`` accept the permuted job unlisted and
  require the re-mapped one in ``jobs_to_terminate``, with the exact report;
* the simulator: a method that swaps a running pipeline's stages every round makes it pay the
  restart delay every round (it used to run on for free).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pytest

import pal_opt
from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import evaluate
from pal_opt.cost.restart import restart_cost_units
from pal_opt.io.traces import TraceJob
from pal_opt.methods import unregister_method
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams, keeps_placement
from pal_opt.policies.base import GreedyPlacement
from pal_opt.result import Status, jobs_to_terminate, priced_result
from pal_opt.simulate import SimConfig, simulate

PIPE = Pipeline((2.0, 1.0), (2, 1))
KEPT = (1, 0, 2)  # the replicas of stage 0 listed the other way round: the same stage map
REMAPPED = (2, 1, 0)  # GPU 2 on stage 0, GPU 0 on stage 1: the same GPUs, another stage map


def _round(**params: object) -> RoundInstance:
    """One server of four GPUs (GPU 3 free); p runs on 0, 1 | 2, w (1 GPU) waits."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 0, 0], {"classA": [1.0, 1.0, 1.0, 1.0]})
    jobs = (Job("p", 3, "classA", 0, placement=(0, 1, 2), pipeline=PIPE), Job("w", 1, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none", **params))  # type: ignore[arg-type]


def test_the_helper_compares_the_gpus_stage_by_stage() -> None:
    p = _round().jobs[0]
    assert keeps_placement(p, (0, 1, 2)) and keeps_placement(p, KEPT)
    assert not keeps_placement(p, REMAPPED) and not keeps_placement(p, (0, 2, 1))
    assert not keeps_placement(p, (0, 1, 3)) and not keeps_placement(p, None)
    gang = Job("g", 3, "classA", placement=(0, 1, 2))
    assert keeps_placement(gang, REMAPPED) and not keeps_placement(gang, (0, 1, 3))
    assert not keeps_placement(Job("n", 3, "classA"), (0, 1, 2))  # not running: nothing to keep
    assert keeps_placement(p, REMAPPED, held=REMAPPED) and not keeps_placement(p, KEPT, held=REMAPPED)


def test_a_running_pipeline_holds_exactly_its_demand() -> None:
    """A pipeline that allows other counts (a strong-scaling job) running on fewer GPUs than its
    stages have replicas has no stage map: ``keeps_placement`` could only compare sets, and
    ``packed-sticky`` and ``preempt-greedy``, which keep it where it runs, crashed pricing it
    (``ValueError: zero-size array``).  It is refused where the job is built."""
    from pal_opt.errors import InstanceError

    kw = dict(kind="strong-scaling", allowed_counts=(2, 3), pipeline=PIPE)
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.placement: a running pipeline job holds its stages' GPUs, "
                                            r"exactly demand=3, got \[0, 1\]"):
        Job("p", 3, "classA", placement=(0, 1), **kw)  # type: ignore[arg-type]
    assert Job("p", 3, "classA", placement=(0, 1, 2), **kw).placement == (0, 1, 2)  # type: ignore[arg-type]
    assert Job("g", 3, "classA", placement=(0, 1), kind="strong-scaling", allowed_counts=(2, 3)).placement == (0, 1)


def test_jobs_to_terminate_lists_a_remapped_pipeline() -> None:
    inst = _round()
    assert jobs_to_terminate(inst, {"p": KEPT, "w": (3,)}) == ()
    assert jobs_to_terminate(inst, {"p": REMAPPED, "w": (3,)}) == ("p",)
    factors = binned_factors(inst.cluster, "none")
    res = priced_result(inst, {"p": REMAPPED}, factors, method="given", status=Status.FEASIBLE, admission="given",
                        solve_seconds=0.0)
    assert res.jobs_to_terminate == ("p",) and res.stages["p"] == ((2, 1), (0,))


@pytest.mark.parametrize("term", ["restart", "migration"])
def test_the_move_terms_charge_a_remap(term: str) -> None:
    params = {"restart_cost": 36.0} if term == "restart" else {"costs": {"migration": {"per_job": 0.5}}}
    inst = _round(**params)
    factors = binned_factors(inst.cluster, "none")
    charge = 3 * restart_cost_units(36.0, 360.0) if term == "restart" else 0.5
    kept = evaluate(inst, {"p": KEPT, "w": (3,)}, factors)
    remapped = evaluate(inst, {"p": REMAPPED, "w": (3,)}, factors)
    assert kept.moved == () and kept.by_term[term] == 0.0
    assert remapped.moved == ("p",) and remapped.by_term[term] == pytest.approx(charge)
    assert remapped.cost == pytest.approx(kept.cost + charge)


@pytest.mark.parametrize(("admission", "report"), [
    ("sticky", "sticky: running job 'p' was re-mapped (its stages on other GPUs of its set) without being terminated"),
    ("preempt", "preempt: running job 'p' is re-mapped but not in jobs_to_terminate"),
])
def test_the_checker_requires_a_remapped_pipeline_to_be_terminated(admission: str, report: str) -> None:
    inst = _round()
    assert check(inst, {"placements": {"p": list(KEPT), "w": [3]}, "admission": admission}) == []
    bad = {"placements": {"p": list(REMAPPED), "w": [3]}, "admission": admission}
    assert check(inst, bad) == [report]
    if admission == "preempt":  # listed, the re-map is a valid move
        assert check(inst, {**bad, "jobs_to_terminate": ["p"]}) == []
    # a result giving the stages is read by its stages, not by the order of its GPU list
    staged = {"placements": {"p": [0, 1, 2], "w": [3]}, "stages": {"p": [[2, 1], [0]]}, "admission": admission}
    assert check(inst, staged) == [report]


def test_the_repair_rule_requires_a_remapped_pipeline_to_be_terminated() -> None:
    inst = _round()
    base = {"admission": "repair", "info": {"repair": {"in_force": {"p": [0, 1, 2]}, "failed": [3]}}}
    kept = {**base, "placements": {"p": list(KEPT)}}
    remapped = {**base, "placements": {"p": list(REMAPPED)}}
    assert check(inst, kept) == []
    assert check(inst, remapped) == ["repair: running job 'p' was re-mapped (its stages on other GPUs of its set) "
                                     "without being listed in jobs_to_terminate"]
    assert check(inst, {**remapped, "jobs_to_terminate": ["p"]}) == []


# ----------------------------------------------------------------------------- the simulator
SWAP = "swap-stages"


def _swap_stages(instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: object = None) -> GreedyPlacement:
    """A test's method: a running job on its GPUs read backwards (a 1 + 1 pipeline's stages
    swapped), a waiting job on the first free GPUs."""
    taken = {g for j in instance.jobs if j.placement for g in j.placement}
    free = [int(g) for g in instance.cluster.gpu_ids if int(g) not in taken]
    out: dict[object, tuple[int, ...]] = {}
    for j in instance.jobs:
        if j.placement is not None:
            out[j.id] = tuple(reversed(j.placement))
        elif len(free) >= j.demand:
            out[j.id], free = tuple(free[: j.demand]), free[j.demand:]
    return GreedyPlacement(out, jobs_to_terminate(instance, out), "given")  # type: ignore[arg-type]


@pytest.fixture
def swap_method() -> Iterator[str]:
    pal_opt.register_method(pal_opt.greedy_method(SWAP, _swap_stages, "swaps running jobs' stages (a test's method)"))
    yield SWAP
    unregister_method(SWAP)


def test_the_simulator_charges_a_remapped_pipeline_the_restart_delay(swap_method: str) -> None:
    """1,000 s of work on two GPUs of factor 1, rounds of 360 s, a restart costs 30 s.  Each round
    after the first swaps the stages: 360 + 330 + (310 + 30) = 1,060 s, two restarts.  A gang
    reversed on its GPUs keeps them and finishes in 1,000 s."""
    cluster = Cluster.uniform(1, 2, {"classB": [1.0, 1.0]})

    def job(pipeline: Pipeline | None) -> TraceJob:
        return TraceJob(id=0, demand=2, submit_time=0.0, iterations=1000, model="BERT", perfclass="classB",
                        iter_time=1.0, pipeline=pipeline)

    cfg = SimConfig(policy=swap_method, restart_cost=30.0)
    piped = simulate([job(Pipeline((1.0, 1.0), (1, 1)))], cluster, cfg, validate=True).jobs[0]
    gang = simulate([job(None)], cluster, cfg, validate=True).jobs[0]
    assert piped.restarts == 2 and piped.moves == 2 and piped.finish_time == pytest.approx(1060.0)
    assert gang.restarts == 0 and gang.moves == 0 and gang.finish_time == pytest.approx(1000.0)
