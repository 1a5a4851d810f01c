"""Rules that no test held.

A mutation review (2026-12-06) changed the code one rule at a time (a comparison, a tie-break,
a percentile) and found 29 changes a user would see that the whole suite let pass: the
checker accepting a job on a busy GPU, p99 computed as p95, typed admission by worst fit.
Each test here fails on such a change and passes on the code as it is.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pal_opt.admission import admit, claim_placement, pal_order
from pal_opt.binning import bin_values
from pal_opt.check import check
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams
from pal_opt.priority import admission_order
from pal_opt.repair import repair
from pal_opt.simulate.records import JobRecord, RoundRecord, SimulationResult
from pal_opt.simulate.summary import summarize


# -- the simulator's headline figures (pal_opt.simulate.summary) -------------------------------------
def _result(stopped_at=None):
    jobs = [JobRecord(k, "m", "classA", 1 + k % 2, submit_time=10.0, iterations=1.0, ideal_seconds=1.0,
                      first_start=10.0 + k * k, finish_time=10.0 + 10 * (k + 1), run_seconds=10.0,
                      slowdown_seconds=10.0 * (1 + k % 2), priority=k % 2, preempted_gpu_hours=1.0)
            for k in range(10)]
    jobs.append(JobRecord("late", "m", "classA", 1, submit_time=10.0, iterations=1.0, ideal_seconds=1.0))
    rounds = [RoundRecord(10.0, 1, 1, 2, 400.0, 0, 0, 0, "optimal", 0.5, "")]
    return SimulationResult({}, 4, jobs, rounds, 0, 1.0, stopped_at=stopped_at)


def test_headline_figures_are_exact() -> None:
    s = summarize(_result())  # JCTs 10, 20, ..., 100; delays 0, 1, 4, ..., 81; one job unfinished
    assert s["n_jobs"] == 11 and s["n_completed"] == 10
    assert s["avg_jct"] == 55.0 and s["p50_jct"] == 55.0 and s["p99_jct"] == pytest.approx(99.1)
    assert s["max_jct"] == 100.0
    assert s["makespan"] == 100.0  # last finish 110 - first submit 10
    assert s["utilisation"] == pytest.approx(400.0 / (4 * 100.0))
    assert s["avg_queueing_delay"] == 28.5 and s["p50_queueing_delay"] == 20.5
    assert s["p99_queueing_delay"] == pytest.approx(79.47)
    assert s["preempted_gpu_hours"] == 11.0 - 1.0  # the unfinished job has none
    assert s["preempted_gpu_hours_weighted"] == 5 * 1.0 + 5 * 2.0
    # gpu-weighted: demands 1 (slowdown 1) and 2 (slowdown 2): (5*1*10*1 + 5*2*10*2) / (5*10 + 5*20)
    assert s["gpu_weighted_slowdown"] == pytest.approx(250.0 / 150.0)
    assert s["by_priority"]["0"]["n_jobs"] == 6 and s["by_priority"]["0"]["n_completed"] == 5
    odd = s["by_priority"]["1"]  # JCTs 20, 40, ..., 100
    assert odd["avg_jct"] == 60.0 and odd["p99_jct"] == pytest.approx(99.2)


def test_utilisation_of_a_stopped_run_spans_to_stopped_at() -> None:
    assert summarize(_result(stopped_at=210.0))["utilisation"] == pytest.approx(400.0 / (4 * 200.0))


# -- the checker's lenient paths (pal_opt.check) -----------------------------------------------------
def test_busy_gpu_is_reported() -> None:
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4},
                             [0, GpuState.BUSY, 0, 0])
    inst = RoundInstance(cl, (Job("a", 2, "classA"),), RoundParams(binning="none"))
    assert check(inst, {"placements": {"a": [0, 1]}, "admission": "given"}) == ["job 'a': GPU 1 is busy"]


def test_preempted_for_equal_priority_is_reported_with_types() -> None:
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types="aabb")
    jobs = (Job("r", 2, "classA", 0, allowed_types=("a",), placement=(0, 1)),
            Job("h", 2, "classA", 1, allowed_types=("b",), priority=1),
            Job("w", 2, "classA", 2, allowed_types=("a",)))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    got = check(inst, {"placements": {"h": [2, 3], "w": [0, 1]}, "admission": "preempt",
                       "jobs_to_terminate": ["r"]})
    assert len(got) == 1 and "preempt: running job 'r'" in got[0] and "may use those types" in got[0]


def test_repair_that_grows_a_job_by_one_gpu_is_reported() -> None:
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4})
    jobs = (Job("s", 4, "classA", 0, kind="strong-scaling", allowed_counts=(1, 2, 4), placement=(0,)),)
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    got = check(inst, {"placements": {"s": [0, 1]}, "admission": "repair", "jobs_to_terminate": ["s"],
                       "info": {"repair": {"in_force": {"s": [0]}, "failed": [3]}}})
    assert any("a repair never grows a job" in m for m in got), got


def test_objective_off_by_half_a_percent_is_reported() -> None:
    from pal_opt.cost import evaluate
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0, 1.2, 1.0, 1.0]})
    inst = RoundInstance(cl, (Job("a", 2, "classA"),), RoundParams(binning="none"))
    cost = evaluate(inst, {"a": (0, 1)}, cl.factors).cost
    assert check(inst, {"placements": {"a": [0, 1]}, "objective": cost * 1.005})[0].startswith("objective ")
    assert check(inst, {"placements": {"a": [0, 1]}, "objective": cost * (1 + 1e-9)}) == []


def test_sticky_backfill_terminated_job_that_fits_must_be_placed() -> None:
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    jobs = (Job("r", 2, "classA", 0, placement=(0, 1)), Job("w", 2, "classA", 1))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    got = check(inst, {"placements": {"w": [2, 3]}, "admission": "sticky-backfill", "jobs_to_terminate": ["r"]})
    assert got == ["sticky-backfill: job 'r' needs 2 GPUs and 2 are still free, but it was not placed"]


def test_checked_start_rejects_a_start_missing_an_admitted_job() -> None:
    import pytest

    from pal_opt.check import checked_start
    from pal_opt.errors import OptionError
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    inst = RoundInstance(cl, (Job("a", 2, "classA", 0), Job("b", 2, "classA", 1)), RoundParams(binning="none"))
    with pytest.raises(OptionError, match=r"missing \['b'\], extra \[\]"):
        checked_start(inst, [0, 1], {"a": (0, 1)})


# -- PAL's queue order and placeability (pal_opt.admission) ------------------------------------------
def _inst(jobs, state=None):
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {c: [1.0] * 4 for c in ("classA", "classB", "classX")}, state)
    return RoundInstance(cl, tuple(jobs), RoundParams(binning="none"))


def test_pal_order_sorts_a_head_that_fills_the_cluster_exactly() -> None:
    assert pal_order(_inst([Job("b", 2, "classB", 0), Job("a", 2, "classA", 1)])) == [1, 0]


def test_pal_order_puts_unknown_classes_after_classA_to_D() -> None:
    assert pal_order(_inst([Job("x", 1, "classX", 0), Job("a", 1, "classA", 1)])) == [1, 0]


def test_pal_order_cuts_at_total_gpus_not_free_gpus() -> None:
    inst = _inst([Job("b", 2, "classB", 0), Job("a", 2, "classA", 1)], [0, 0, GpuState.BUSY, GpuState.BUSY])
    assert pal_order(inst) == [1, 0]


def test_a_job_needing_exactly_the_gpus_in_service_is_placeable() -> None:
    from pal_opt.admission import unplaceable
    inst = _inst([Job("j", 3, "classA", 0)], [0, 0, 0, GpuState.FAILED])
    assert unplaceable(inst) == {}


# -- claims on GPU types (pal_opt.gputypes, admission.claim_placement) -------------------------------
def test_typed_prefix_admits_every_job_a_best_fit_claim_fits() -> None:
    cl = Cluster.from_arrays(range(7), [0] * 3 + [1] * 4, {"classA": [1.0] * 7}, gpu_types="aaabbbb")
    jobs = (Job("j0", 2, "classA", 0), Job("j1", 2, "classA", 1), Job("j2", 3, "classA", 2))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    assert admit(inst, "prefix") == [0, 1, 2]  # a: j2 (3); b: j0, j1 (2 + 2)


def test_a_mixing_job_is_claimed_on_as_few_types_as_possible() -> None:
    cl = Cluster.from_arrays(range(4), [0, 0, 0, 1], {"classA": [1.0] * 4}, gpu_types="aaab")
    inst = RoundInstance(cl, (Job("m", 2, "classA", 0, mix_types=True),), RoundParams(binning="none"))
    assert claim_placement(inst, admit(inst)) == {"m": (0, 1)}


def test_claim_placement_keeps_a_gang_on_one_server_when_it_can() -> None:
    cl = Cluster.from_arrays(range(5), [0, 1, 1, 1, 2], {"classA": [1.0] * 5}, gpu_types="aaaab")
    inst = RoundInstance(cl, (Job("j", 2, "classA", 0, gpu_type="a"),), RoundParams(binning="none"))
    assert claim_placement(inst, admit(inst)) == {"j": (1, 2)}


# -- priority tie-breaks (pal_opt.priority) ----------------------------------------------------------
def test_a_running_job_that_must_move_comes_first_among_its_priority() -> None:
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, [0, 0, 0, GpuState.FAILED])
    jobs = (Job("w", 1, "classA", 0), Job("h", 2, "classA", 1, placement=(2, 3)))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    assert admission_order(inst, moving=True) == [1, 0]


def _running(demands):
    cl = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    jobs, g = [], 0
    for k, d in enumerate(demands):
        jobs.append(Job(f"r{k}", d, "classA", k, placement=tuple(range(g, g + d))))
        g += d
    return RoundInstance(cl, tuple(jobs), RoundParams(binning="none"))


def test_victims_of_equal_priority_are_the_later_in_the_queue_first() -> None:
    from pal_opt.priority import victim_order
    assert victim_order(_running((1, 1)), [0, 1]) == [1, 0]


def test_a_victim_is_given_back_when_the_job_fits_exactly_without_it() -> None:
    from pal_opt.priority import evict_for
    assert evict_for(_running((1, 2)), 2, 0, [0, 1]) == [1]


# -- repair settling (pal_opt.repair) ----------------------------------------------------------------
def test_settling_sends_back_a_move_that_saves_exactly_what_it_costs(monkeypatch: pytest.MonkeyPatch) -> None:
    import pal_opt.ilp

    f = [math.exp(0.5), 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    cl = Cluster.from_arrays(range(8), [g // 4 for g in range(8)], {"classA": f})
    inst = RoundInstance(cl, (Job("x", 1, "classA"), Job("d", 1, "classA", 1)), RoundParams(binning="none"))
    real = pal_opt.ilp.solve_ilp

    def wandering(instance, **kw):
        res = real(instance, **kw)
        if "start" in kw:  # the whole-round solve moves x to GPU 1: it saves ~0.5 and costs 0.5
            res.placements = {k: v for k, v in res.placements.items() if k != "x"}
            free = min({1, 2, 3} - {g for gs in res.placements.values() for g in gs})
            res.placements = {"x": (free,), **res.placements}
        return res

    monkeypatch.setattr(pal_opt.ilp, "solve_ilp", wandering)
    r = repair(inst, {"x": [0], "d": [4]}, [4], backend="highs", allow_migration=0.5)
    assert r.placements["x"] == (0,) and r.info["repair"]["migrated"] == []


# -- binning (pal_opt.binning) -----------------------------------------------------------------------
def test_silhouette_never_tries_as_many_clusters_as_distinct_values() -> None:
    v = np.array([1.0, 1.0, 1.0, 1.5, 1.5, 2.0])
    assert len(set(bin_values(v, "silhouette").tolist())) == 2


def test_silhouette_ties_go_to_the_fewest_clusters() -> None:
    """K1 is the first K in 2..10 with the highest silhouette score: on 1, 1.5, 1.75, 2.25 (exact
    binary fractions) k-means gives {1, 1.5, 1.75}, {2.25} for K = 2 and {1}, {1.5, 1.75},
    {2.25} for K = 3, both scoring exactly 1/4 (K = 2: 1/2, 1/2, 0 and a singleton's 0; K = 3:
    two singletons' 0, then 1/2, 1/2), and the tie goes to K = 2 (a ``>=`` would take 3)."""
    from pal_opt.kmeans import kmeans_1d, silhouette_score

    v = np.array([1.0, 1.5, 1.75, 2.25])
    scores = [silhouette_score(v, kmeans_1d(v, k, seed=1).labels) for k in (2, 3)]
    assert scores == [0.25, 0.25]
    # centres 17/12 and 9/4, divided by their median 11/6
    assert bin_values(v, "silhouette").tolist() == pytest.approx([17 / 22] * 3 + [27 / 22], abs=1e-15)


def test_a_job_needing_exactly_the_cluster_is_placeable() -> None:
    """Unplaceable is more GPUs than the cluster has; exactly as many, none failed, is placeable
    (a mutant with `>=` passed the test above, which has a failed GPU)."""
    from pal_opt.admission import unplaceable
    inst = _inst([Job("w", 4, "classA", 0), Job("x", 5, "classA", 1)])
    assert unplaceable(inst) == {"x": "needs 5 GPUs; the cluster has 4"}

def test_prefix_admits_a_queue_that_fills_the_free_gpus_exactly() -> None:
    """Four GPUs free (one busy, one failed): jobs of 2 and 2 fill them and are both admitted
    (a mutant cutting the prefix with side="left" admitted only the first)."""
    cl = Cluster.uniform(3, 2, {"classA": [1.0] * 6}, state=[0, 0, 0, 0, GpuState.BUSY, GpuState.FAILED])
    inst = RoundInstance(cl, (Job("a", 2, "classA"), Job("b", 2, "classA", 1), Job("c", 1, "classA", 2)))
    assert admit(inst, "prefix") == [0, 1]
    assert admit(inst, "backfill") == [0, 1]


def test_backfill_counts_down_the_free_gpus_it_admits() -> None:
    """Backfill skips a job that no longer fits what the admitted jobs left (a mutant that never
    counted the free GPUs down admitted every job that fits the cluster alone)."""
    cl = Cluster.uniform(2, 2, {"classA": [1.0] * 4})
    inst = RoundInstance(cl, (Job("a", 3, "classA"), Job("b", 3, "classA", 1), Job("c", 1, "classA", 2),
                              Job("d", 1, "classA", 3)))
    assert admit(inst, "backfill") == [0, 2]
    assert admit(inst, "prefix") == [0]
