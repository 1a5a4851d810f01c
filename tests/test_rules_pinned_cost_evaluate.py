"""Rules of pal_opt/cost/evaluate.py that no test held (mutation review round 5, 2026-12-06):
each test fails on a one-rule change of evaluate.py that the rest of the suite let pass."""

from __future__ import annotations

import math

import pytest

from pal_opt.cost import evaluate
from pal_opt.cost.evaluate import job_slowdown
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
