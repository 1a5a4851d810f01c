"""Rules of pal_opt/cost/evaluate.py that no test held (mutation review round 5, 2026-12-06):
each test fails on a one-rule change of evaluate.py that the rest of the suite let pass.  The
stage rules at the end (test audit, 2026-12-07) were held only by a minutes-long solve test of
``test_preempt_pipelines.py`` and by doctests."""

from __future__ import annotations

import itertools
import math

import pytest

from pal_opt.cost import evaluate, stages_mapped_best
from pal_opt.cost.evaluate import best_stage_order, job_slowdown
from pal_opt.model import Cluster, Job, Level, Pipeline, RoundInstance, RoundParams


def test_a_gang_runs_at_its_slowest_gpu_times_its_locality_penalty() -> None:
    """A gang's slowdown is its slowest GPU's factor (E1 took the fastest) times the locality
    penalty of the level its GPUs span (E4 left the penalty out)."""
    c = Cluster.uniform(2, 2, {"classA": [1.0, 1.5, 1.2, 1.0]})
    inst = RoundInstance(c, (Job("a", 2, "classA", locality=(1.0, 1.7, 1.7)),))
    job = inst.jobs[0]
    assert job_slowdown(inst, c.factors, job, (0, 1)) == pytest.approx(1.5)
    assert job_slowdown(inst, c.factors, job, (0, 3)) == pytest.approx(1.7)
    s = evaluate(inst, {"a": (1, 2)}, c.factors)
    assert s.slowdown["a"] == pytest.approx(1.5 * 1.7)
    assert s.cost == pytest.approx(2 * math.log(1.5 * 1.7))


def test_a_pipeline_runs_at_its_slowest_stage() -> None:
    """A pipeline's slowdown is its slowest stage's (``Pipeline.effective_factor``), not its
    slowest GPU's: a slow GPU on the slack stage costs less (E5 priced it as a gang)."""
    c = Cluster.uniform(1, 3, {"classA": [1.5, 1.0, 1.0]})
    p = Job("p", 3, "classA", pipeline=Pipeline((1.0, 2.0), (1, 2)))
    inst = RoundInstance(c, (p,))
    s = evaluate(inst, {"p": (0, 1, 2)}, c.factors)  # GPU 0 (1.5) on the slack stage
    want = p.pipeline.effective_factor([1.5, 1.0])
    assert want < 1.5
    assert s.slowdown["p"] == pytest.approx(want)


def test_a_running_job_on_its_own_gpus_is_not_moved() -> None:
    """A running job placed on the GPUs it holds (in any order) is not moved and pays no restart
    (E6 charged every running job)."""
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    inst = RoundInstance(c, (Job("r", 2, "classA", placement=(0, 1)),), RoundParams(restart_cost=30.0))
    s = evaluate(inst, {"r": (1, 0)}, c.factors)
    assert s.moved == () and s.cost == pytest.approx(0.0)
    assert evaluate(inst, {"r": (0, 1)}, c.factors).cost == pytest.approx(0.0)


def test_a_job_on_one_server_of_a_racked_cluster_spans_the_server_level() -> None:
    """On a racked cluster a job on one server spans the server level (E9 put every job whose
    GPUs share a rack at the rack level, one server included), one on two servers of a rack the
    rack level."""
    c = Cluster.from_arrays([0, 1, 2, 3, 4, 5], [0, 0, 1, 1, 2, 2], {"classA": [1.0] * 6},
                            rack_of_server={0: "r0", 1: "r0", 2: "r1"})
    inst = RoundInstance(c, (Job("a", 2, "classA"), Job("b", 2, "classA"), Job("c", 2, "classA")))
    s = evaluate(inst, {"a": (0, 1), "b": (2, 3), "c": (3, 4)}, c.factors)
    assert s.level == {"a": int(Level.SERVER), "b": int(Level.SERVER), "c": int(Level.CLUSTER)}
    s = evaluate(inst, {"a": (0, 2)}, c.factors)
    assert s.level == {"a": int(Level.RACK)}


def test_a_pipeline_stage_runs_at_its_slowest_replica() -> None:
    """Within a stage the slowest replica sets the stage's pace (a stage taking its fastest
    replica's factor priced GPUs 1 and 2 below as 1.0; the test above has one factor per stage)."""
    c = Cluster.uniform(1, 3, {"classA": [1.0, 1.0, 1.3]})
    p = Job("p", 3, "classA", pipeline=Pipeline((1.0, 2.0), (1, 2)))
    s = evaluate(RoundInstance(c, (p,)), {"p": (0, 1, 2)}, c.factors)  # stage 1 on GPUs 1 (1.0) and 2 (1.3)
    assert s.slowdown["p"] == pytest.approx(max(1.0 * 1.0, 2.0 * 1.3) / 2.0)
    assert s.cost == pytest.approx(3 * math.log(1.3))


def test_best_stage_order_gives_the_slowest_stages_the_fastest_gpus() -> None:
    """``best_stage_order`` hands out the GPUs fastest first to the stages slowest first, and no
    other order of the GPUs runs the pipeline faster (brute force over the 24 orders, priced here
    from the stage rule, max over stages of time x slowest factor)."""
    factors = [1.4, 1.0, 1.2, 1.1]
    c = Cluster.uniform(1, 4, {"classA": factors})
    job = Job("p", 4, "classA", pipeline=Pipeline((1.0, 3.0, 2.0), (1, 2, 1)))
    order = best_stage_order(job, (0, 1, 2, 3), c.factors["classA"], c.position)
    assert order == (0, 1, 3, 2)  # stage 1 (3.0) on GPUs 1 and 3, stage 2 (2.0) on 2, stage 0 (1.0) on 0

    def pace(gpus: tuple[int, ...]) -> float:
        stages = ((gpus[0],), gpus[1:3], (gpus[3],))
        return max(t * max(factors[g] for g in st) for t, st in zip((1.0, 3.0, 2.0), stages, strict=True))

    assert pace(order) == min(pace(o) for o in itertools.permutations(range(4)))


def test_a_left_out_running_job_pays_preemption_weighted_by_one_plus_its_priority() -> None:
    """Leaving out a running job of priority 2 costs ``per_gpu_hour x (1 + 2) x`` its GPU-hours
    of the round (a weight of ``max(1, priority)`` priced it at 2)."""
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    job = Job("r", 2, "classA", priority=2, placement=(0, 1))
    inst = RoundInstance(c, (job,), RoundParams(round_length=360.0))
    s = evaluate(inst, {}, c.factors)
    assert s.by_term["preemption"] == pytest.approx(100.0 * 3 * 2 * 360.0 / 3600.0)
    assert s.cost == pytest.approx(60.0)


def test_a_running_pipeline_keeps_its_stage_map_when_a_remap_runs_no_faster() -> None:
    """GPUs 1 and 2 are equally fast: swapping them changes no pace but would force a restart.
    (A mutant that re-mapped at equal pace, `pace(held) < pace(best)`, passed the other tests.)"""
    cl = Cluster.uniform(1, 3, {"classA": [1.5, 1.0, 1.0]})
    q = Job("q", 3, "classA", pipeline=Pipeline((2.0, 1.0), (1, 2)), placement=(2, 0, 1))
    inst = RoundInstance(cl, (q,), RoundParams(binning="none", restart_cost=30.0))
    kept = stages_mapped_best(inst, cl.factors, {"q": (0, 1, 2)})
    assert kept == {"q": (2, 0, 1)}
    assert evaluate(inst, kept, cl.factors).moved == ()


def test_a_pipeline_remapped_on_its_own_gpus_is_priced_as_moved() -> None:
    """The same GPU set with another stage map is a move (keeps_placement), and pays the restart.
    (A mutant that compared GPU sets only passed the other tests.)"""
    cl = Cluster.uniform(1, 3, {"classA": [1.0, 1.0, 1.0]})
    q = Job("q", 3, "classA", pipeline=Pipeline((2.0, 1.0), (1, 2)), placement=(0, 1, 2))
    inst = RoundInstance(cl, (q,), RoundParams(binning="none", restart_cost=30.0))
    kept, remapped = evaluate(inst, {"q": (0, 1, 2)}, cl.factors), evaluate(inst, {"q": (1, 0, 2)}, cl.factors)
    assert kept.moved == () and remapped.moved == ("q",)
    assert remapped.cost > kept.cost
