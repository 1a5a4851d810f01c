"""Priorities and preemption: the priority field, the plan, the greedy comparator, the joint
round program, the checker's preempt rule and the simulator on a priority trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pal_opt
from pal_opt.check import Kind, violations
from pal_opt.cost.preemption import preempted_gpu_hours
from pal_opt.errors import InstanceError
from pal_opt.ilp.decode import encode
from pal_opt.ilp.formulation import build_formulation
from pal_opt.io import load_instance, save_instance
from pal_opt.io.jobs import load_jobs
from pal_opt.io.traces import read_trace
from pal_opt.model import Cluster, Job, RoundInstance, RoundParams
from pal_opt.policies.preempt import evict_for
from pal_opt.priority import admission_order, preempt_plan, victim_order
from pal_opt.simulate.engine import SimConfig, simulate

FLAT = {"classA": [1.0] * 9}


# ---------------------------------------------------------------- the field
@pytest.mark.parametrize("bad", [-1, 1.5, True, "1", 1_000_001])
def test_priority_must_be_an_integer_in_range(bad: object) -> None:
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.priority: must be an integer in 0\.\.1000000"):
        Job(1, 1, "classA", priority=bad)  # type: ignore[arg-type]


def test_started_must_be_finite_and_non_negative() -> None:
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.started"):
        Job(1, 1, "classA", started=-1.0)
    assert Job(1, 1, "classA", priority=3, started=7).started == 7.0


def _tiny_round() -> RoundInstance:
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    return RoundInstance(c, (Job("a", 2, "classA", placement=(0, 1), priority=2, started=12.0),
                             Job("b", 1, "classA")))


def test_instance_files_keep_priority_and_started(tmp_path: Path) -> None:
    path = tmp_path / "round.json"
    save_instance(_tiny_round(), path)
    doc = json.loads(path.read_text())
    assert doc["jobs"][0]["priority"] == 2 and doc["jobs"][0]["started"] == 12.0
    assert "priority" not in doc["jobs"][1]
    back = load_instance(path)
    assert (back.jobs[0].priority, back.jobs[0].started, back.jobs[1].priority) == (2, 12.0, 0)


def test_the_schema_rejects_a_bad_priority(tmp_path: Path) -> None:
    path = tmp_path / "round.json"
    save_instance(_tiny_round(), path)
    doc = json.loads(path.read_text())
    doc["jobs"][1]["priority"] = -3
    path.write_text(json.dumps(doc))
    with pytest.raises(InstanceError) as exc:
        load_instance(path)
    assert "jobs[1].priority" in str(exc.value)


def test_job_csv_priority_column(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,num_gpus,model,priority\n1,2,resnet50,3\n2,1,resnet50,\n")
    jobs = load_jobs(path).jobs
    assert [j.priority for j in jobs] == [3, 0]
    path.write_text("job_id,num_gpus,model,priority\n1,2,resnet50,high\n")
    with pytest.raises(InstanceError, match=r"line 2, column priority: must be an integer in 0\.\.1000000"):
        load_jobs(path)


def test_trace_priority_column(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("job_id,num_gpus,submit_time,duration,model,priority\n1,2,0,10,resnet50,1\n2,1,5,10,vgg19,\n")
    assert [j.priority for j in read_trace(path)] == [1, 0]
    path.write_text("job_id,num_gpus,submit_time,duration,model,priority\n1,2,0,10,resnet50,-2\n")
    with pytest.raises(InstanceError, match=r"row 2, column priority"):
        read_trace(path)


# ---------------------------------------------------------------- the plan and the greedy order
def _contended() -> RoundInstance:
    """9 GPUs on 3 servers, all held by priority-0 jobs: A (4, oldest), C (3), D (2, newest);
    H (priority 1) needs 4.  The greedy evicts D then C (5 GPUs; D is not given back: 3 < 4);
    evicting A alone frees exactly 4."""
    c = Cluster.uniform(3, 3, FLAT)
    jobs = (Job("A", 4, "classA", placement=(0, 1, 2, 3), started=0.0),
            Job("C", 3, "classA", placement=(3 + 1, 5, 6), started=100.0),
            Job("D", 2, "classA", placement=(7, 8), started=200.0),
            Job("H", 4, "classA", priority=1))
    return RoundInstance(c, jobs, RoundParams(restart_cost=30.0))


def test_admission_order_and_victim_order() -> None:
    inst = _contended()
    assert admission_order(inst) == [3]
    assert victim_order(inst, [0, 1, 2]) == [2, 1, 0]  # most recently started first
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    mixed = RoundInstance(c, (Job("p1", 1, "classA", placement=(0,), priority=1, started=50.0),
                              Job("p0", 1, "classA", placement=(1,), started=0.0),
                              Job("anon", 1, "classA", placement=(2,))))
    assert [mixed.jobs[i].id for i in victim_order(mixed, [0, 1, 2])] == ["p0", "anon", "p1"]


def test_evict_for_gives_back_what_is_not_needed() -> None:
    inst = _contended()
    assert evict_for(inst, 4, 0, [2, 1, 0]) == [2, 1]
    assert evict_for(inst, 2, 0, [1, 2]) == [1]
    assert evict_for(inst, 3, 1, [2, 1]) == [2]
    assert evict_for(inst, 10, 0, [2, 1, 0]) is None


def test_evict_for_gives_victims_back_last_evicted_first() -> None:
    """Victims are given back in reverse eviction order (the docstring's rule): of victims of 1,
    2 and 3 GPUs for 4, the 2-GPU one goes back first and the 1-GPU one must then stay, so
    [1-GPU, 3-GPU] are evicted; giving back in eviction order evicted [2-GPU, 3-GPU] (test
    audit: no case here had two victims that could each be given back alone)."""
    import numpy as np

    from pal_opt.priority import evict_for_types

    c = Cluster.uniform(1, 6, {"classA": [1.0] * 6})
    inst = RoundInstance(c, tuple(Job(k, d, "classA", placement=tuple(range(k * (k + 1) // 2, k * (k + 1) // 2 + d)))
                                  for k, d in enumerate((1, 2, 3))))
    assert evict_for(inst, 4, 0, [0, 1, 2]) == [0, 2]
    held = {0: np.array([1, 0]), 1: np.array([2, 0]), 2: np.array([3, 0])}
    assert evict_for_types([(0,)], 4, np.array([0, 0]), [0, 1, 2], held) == [0, 2]


def test_plan_never_preempts_for_an_equal_priority() -> None:
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    inst = RoundInstance(c, (Job("run", 4, "classA", placement=(0, 1, 2, 3), priority=1),
                             Job("same", 2, "classA", priority=1), Job("low", 1, "classA")))
    plan = preempt_plan(inst)
    assert plan.waiting == () and plan.kept == (0,) and plan.optional == ()
    for method in ("preempt-greedy", "ilp-preempt"):
        res = pal_opt.solve(inst, method)
        assert res.placements == {"run": (0, 1, 2, 3)} and res.jobs_to_terminate == ()


def test_greedy_evicts_lowest_priority_then_most_recent() -> None:
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    jobs = (Job("mid", 1, "classA", placement=(0,), priority=1, started=300.0),
            Job("old", 1, "classA", placement=(1,), started=0.0),
            Job("new", 1, "classA", placement=(2,), started=200.0),
            Job("newest-mid", 1, "classA", placement=(3,), priority=1, started=400.0),
            Job("top", 2, "classA", priority=2))
    res = pal_opt.solve(RoundInstance(c, jobs), "preempt-greedy")
    assert res.jobs_to_terminate == ("old", "new")
    assert set(res.placements) == {"mid", "newest-mid", "top"}


# ---------------------------------------------------------------- the joint program
def test_the_program_preempts_fewer_gpu_hours_than_the_greedy() -> None:
    inst = _contended()
    greedy = pal_opt.solve(inst, "preempt-greedy")
    best = pal_opt.solve(inst, "ilp-preempt", backend="highs")
    assert set(greedy.jobs_to_terminate) >= {"C", "D"} and "C" not in greedy.placements
    assert "A" not in best.placements and {"C", "D", "H"} <= set(best.placements)

    def weighted(res: pal_opt.PlacementResult) -> float:
        return sum(preempted_gpu_hours(j, 360.0)[1] for j in inst.jobs
                   if j.placement is not None and j.id not in res.placements)

    assert weighted(best) == pytest.approx(0.4) and weighted(greedy) == pytest.approx(0.5)
    assert best.objective < greedy.objective
    assert best.status == pal_opt.Status.OPTIMAL
    assert pal_opt.check(inst, greedy) == [] and pal_opt.check(inst, best) == []


def test_priority_dominates_keeping_a_lower_job() -> None:
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    inst = RoundInstance(c, (Job("low", 4, "classA", placement=(0, 1, 2, 3)), Job("hi", 1, "classA", priority=1)))
    for method in ("preempt-greedy", "ilp-preempt"):
        res = pal_opt.solve(inst, method)
        assert "hi" in res.placements and res.jobs_to_terminate == ("low",)


def test_weights_prefer_the_lower_priority_victim() -> None:
    """Two victims of equal size, priority 0 and 1; a priority-2 job needs one of them."""
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    inst = RoundInstance(c, (Job("p1", 2, "classA", placement=(0, 1), priority=1),
                             Job("p0", 2, "classA", placement=(2, 3)), Job("top", 2, "classA", priority=2)))
    plan = preempt_plan(inst)
    assert plan.optional == (1,) and plan.kept == (0,)
    res = pal_opt.solve(inst, "ilp-preempt")
    assert res.jobs_to_terminate == ("p0",)


def test_encode_covers_left_out_optional_jobs() -> None:
    inst = _contended()
    plan = preempt_plan(inst)
    form = build_formulation(inst, plan.admitted, optional=plan.optional)
    placement = {"C": (4, 5, 6), "D": (7, 8), "H": (0, 1, 2, 3)}
    x = encode(form, placement)
    cost = pal_opt.cost.evaluate(inst, placement, form.factors).cost
    assert form.objective(x) == pytest.approx(cost)
    with pytest.raises(InstanceError, match="does not cover exactly the admitted jobs"):
        encode(form, {"C": (4, 5, 6), "D": (7, 8)})  # H is not optional


@pytest.mark.parametrize("method", ["preempt-greedy", "ilp-preempt"])
def test_preemptive_methods_accept_gpu_types(method: str) -> None:
    """Once refused ("do not support GPU types yet"); typed preemption is tested in
    ``test_preempt_types.py``."""
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types="aabb")
    inst = RoundInstance(cl, (Job("j", 2, "classA"),))
    res = pal_opt.solve(inst, method)
    assert len(res.placements["j"]) == 2 and pal_opt.check(inst, res) == []


# ---------------------------------------------------------------- the checker
def test_checker_reports_an_unreported_preemption() -> None:
    inst = _contended()
    doc = {"placements": {"C": [4, 5, 6], "D": [7, 8], "H": [0, 1, 2, 3]}, "admission": "preempt",
           "jobs_to_terminate": []}
    found = violations(inst, doc)
    assert [v.kind for v in found] == [Kind.UNREPORTED]
    assert str(found[0]) == "preempt: running job 'A' is preempted but not in jobs_to_terminate"


def test_checker_reports_a_preemption_without_higher_priority_work() -> None:
    inst = _contended()
    doc = {"placements": {"C": [4, 5, 6], "D": [7, 8]}, "admission": "preempt", "jobs_to_terminate": ["A"]}
    found = violations(inst, doc)
    assert Kind.PRIORITY in [v.kind for v in found]
    assert ("preempt: running job 'A' (priority 0) is preempted, but no waiting job of a higher priority "
            "was started") in [str(v) for v in found]


def test_checker_reports_a_waiting_job_left_out_that_fits() -> None:
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    inst = RoundInstance(c, (Job("w", 2, "classA"),))
    found = violations(inst, {"placements": {}, "admission": "preempt"})
    assert [v.kind for v in found] == [Kind.LEFT_OUT]


def test_checker_reports_shared_gpus_under_preempt() -> None:
    inst = _contended()
    doc = {"placements": {"C": [4, 5, 6], "D": [6, 8], "H": [0, 1, 2, 3]}, "admission": "preempt",
           "jobs_to_terminate": ["A", "D"]}
    assert Kind.GANG_SIZE not in [v.kind for v in violations(inst, doc)]
    assert Kind.GPU_SHARED in [v.kind for v in violations(inst, doc)]


def _one_gpu_failed(b_priority: int) -> RoundInstance:
    """1 server of 4 GPUs, GPU 0 failed under a (priority 1, 3 GPUs: it must move); b runs on 3."""
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    state = c.state.copy()
    state[0] = 2  # failed
    jobs = (Job("a", 3, "classA", placement=(0, 1, 2), priority=1),
            Job("b", 1, "classA", placement=(3,), priority=b_priority))
    return RoundInstance(c.with_state(state), jobs)


@pytest.mark.parametrize("method", ["preempt-greedy", "ilp-preempt"])
def test_a_job_that_must_move_takes_only_lower_priorities_gpus(method: str) -> None:
    same = _one_gpu_failed(1)  # b, of a's priority, stays; a is left out (it was not preempted)
    res = pal_opt.solve(same, method)
    assert set(res.placements) == {"b"} and "a" in res.jobs_to_terminate and pal_opt.check(same, res) == []
    lower = _one_gpu_failed(0)  # b, of a lower priority, makes room for a
    res = pal_opt.solve(lower, method)
    assert set(res.placements) == {"a"} and set(res.jobs_to_terminate) == {"a", "b"}
    assert pal_opt.check(lower, res) == []


@pytest.mark.parametrize("method", ["preempt-greedy", "ilp-preempt"])
def test_preemption_with_every_gpu_failed_places_nothing(method: str) -> None:
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    inst = RoundInstance(c.with_state([2] * 4), (Job("w", 2, "classA", priority=1),
                                                 Job("r", 2, "classA", placement=(0, 1))))
    res = pal_opt.solve(inst, method)
    assert res.placements == {} and res.jobs_to_terminate == ("r",) and pal_opt.check(inst, res) == []
    assert res.unplaceable["r"] == "needs 2 GPUs; 0 are in service (4 failed)"


def test_checker_a_job_that_must_move_is_started_anew_or_left_out() -> None:
    same = _one_gpu_failed(1)
    moved = {"placements": {"a": [1, 2, 3]}, "admission": "preempt", "jobs_to_terminate": ["a", "b"]}
    assert pal_opt.check(same, moved) == [
        "preempt: running job 'b' (priority 1) is preempted, but no waiting job of a higher priority was started"]
    assert pal_opt.check(_one_gpu_failed(0), moved) == []
    left = {"placements": {"b": [3]}, "admission": "preempt", "jobs_to_terminate": ["a"]}
    assert pal_opt.check(same, left) == []
    fits = {"placements": {}, "admission": "preempt", "jobs_to_terminate": ["a", "b"]}
    assert pal_opt.check(_one_gpu_failed(0), fits) == [
        "preempt: job 'a' needs 3 GPUs and 3 are still free, but it was not placed",
        "preempt: running job 'b' (priority 0) is preempted, but no waiting job of a higher priority was started"]


# ---------------------------------------------------------------- the simulator
def _priority_trace(tmp_path: Path) -> Path:
    lines = ["job_id,num_gpus,submit_time,duration,model,priority"]
    lines += [f"{k},4,{k * 10},30000,resnet50,0" for k in range(4)]  # fill 16 GPUs
    lines += [f"{10 + k},4,{400 + k},500,resnet50,1" for k in range(2)]  # urgent arrivals
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("method", ["preempt-greedy", "ilp-preempt"])
def test_simulator_preempts_for_high_priority_jobs(tmp_path: Path, method: str) -> None:
    path = _priority_trace(tmp_path)
    jobs = read_trace(path)
    cl = Cluster.uniform(4, 4, {"classA": [1.0] * 16})
    res = simulate(jobs, cl, SimConfig(policy=method, restart_cost=30.0), validate=True)
    s = res.summary
    assert s["n_completed"] == 6
    assert s["preemptions"] == 2 and s["preempted_gpu_hours"] == pytest.approx(2 * 4 * 0.1)
    assert s["preempted_gpu_hours_weighted"] == pytest.approx(s["preempted_gpu_hours"])
    high = s["by_priority"]["1"]
    assert high["n_jobs"] == 2 and high["avg_jct"] < s["by_priority"]["0"]["avg_jct"]
    # a high-priority job starts in the first round after it arrives
    rec = {r.job_id: r for r in res.jobs}
    assert rec[10].first_start == 720.0 and rec[10].preemptions == 0
    # FIFO without priorities would have made them wait
    plain = simulate(jobs, cl, SimConfig(policy="pal"))
    assert plain.summary["by_priority"]["1"]["avg_jct"] > high["avg_jct"]


# ---------------------------------------------------------------- time limits
def _held_round(seed: int = 0) -> RoundInstance:
    """A 64-GPU round, mostly held by priority-0 jobs, with priority-1 jobs waiting."""
    base = pal_opt.generate_instance(nodes=8, gpus_per_node=8, jobs=40, seed=seed, running_fraction=0.8)
    jobs = tuple(Job(j.id, j.demand, j.perfclass, placement=j.placement,
                     priority=0 if j.placement is not None else 1) for j in base.jobs)
    return RoundInstance(base.cluster, jobs, base.params)


def test_a_deadline_already_passed_answers_with_the_greedy_start() -> None:
    """``deadline`` (what ``pal-opt solve --time-limit`` sets) applies to ilp-preempt: with none
    left the answer is the greedy start, valid, and says why."""
    import time

    inst = _held_round()
    res = pal_opt.solve(inst, "ilp-preempt", deadline=time.monotonic() - 1.0)
    assert res.status == pal_opt.Status.FALLBACK
    assert res.info["note"].startswith("time limit: the greedy start")
    assert pal_opt.check(inst, res) == []
    full = pal_opt.solve(inst, "ilp-preempt", deadline=time.monotonic() + 600.0)
    assert full.status == pal_opt.Status.OPTIMAL and "note" not in full.info
    assert full.objective <= res.objective + 1e-9


def test_a_deadline_that_leaves_no_time_for_the_solver_answers_with_the_greedy_start(monkeypatch) -> None:
    """Time enough to build the program but not to translate or run the solver (here: what is
    kept for decoding and pricing made huge): ``TimeLimitReached`` escaped ``solve_preempt``;
    the answer is the greedy start, as when no time is left to build."""
    import time

    import pal_opt.ilp.preempt as preempt

    inst = _held_round()
    monkeypatch.setattr(preempt, "FINISH_SECONDS", 1e6)
    res = pal_opt.solve(inst, "ilp-preempt", deadline=time.monotonic() + 600.0)
    assert res.status == pal_opt.Status.FALLBACK and res.info["solver_status"] == "no-solution"
    assert res.info["note"].startswith("time limit: the greedy start (time limit reached before translating")
    assert pal_opt.check(inst, res) == []


def test_cli_time_limit_applies_to_ilp_preempt(tmp_path: Path) -> None:
    """``--time-limit`` with ``--method ilp-preempt`` used to be refused ("option(s) deadline do
    not apply"): the command's deadline was not an option of the preemptive program.  (A fresh
    process: the command's limit counts from the process's start.)"""
    import subprocess
    import sys

    path, out = tmp_path / "round.json", tmp_path / "placed.json"
    save_instance(_held_round(), path)
    cmd = [sys.executable, "-m", "pal_opt.cli", "solve", str(path), "--method", "ilp-preempt", "--time-limit", "60",
           "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "status     optimal" in done.stdout
    assert pal_opt.check(load_instance(path), json.loads(out.read_text())) == []


def test_an_ilp_preempt_answer_stopped_by_the_time_limit_says_so() -> None:
    """It returned the greedy start with an empty message and no ``time_limit_reached``, which
    ``ilp`` sets and docs/limits.md promises (found by review)."""
    from pal_opt.generate import generate_instance

    res = pal_opt.solve(generate_instance(64, 8, 150, seed=1), "ilp-preempt", time_limit=0.05)
    assert res.status == pal_opt.Status.FALLBACK
    assert res.message.startswith("time limit: the greedy start")
    assert res.info["time_limit_reached"]
