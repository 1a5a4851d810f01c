"""What a review acting as a scheduler author found in the round-loop API (2026-12-06): each test
fails on the code before its fix."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import pal_opt
from pal_opt import Cluster, GpuState, RoundPolicy, SolveOptions
from pal_opt.adapters.blox import BloxPlacement
from pal_opt.binning import binned_factors
from pal_opt.errors import InputTypeError, InstanceError, OptionError
from pal_opt.generate import generate_instance

QUEUE = [{"id": "a", "demand": 4, "class": "classA"}, {"id": "b", "demand": 2, "class": "classA"},
         {"id": "c", "demand": 4, "class": "classA"}]


def _cluster(failed: tuple[int, ...] = ()) -> Cluster:
    state = [GpuState.FAILED if g in failed else GpuState.FREE for g in range(16)]
    return Cluster.uniform(4, 4, {"classA": [1.0 + 0.05 * (g % 5) for g in range(16)]}, state=state)


def test_policy_repair_is_the_placement_the_next_round_carries() -> None:
    """After ``policy.repair`` the next round keeps the repaired job where the repair put it;
    before, the policy still had it on the failed GPU, moved it again and gave its new GPUs away."""
    policy = RoundPolicy("ilp")
    first = policy.place(pal_opt.make_instance(_cluster(), QUEUE, restart_cost=60))
    bad = first.placements["b"][0]
    fixed = policy.repair([bad])
    assert policy.last is fixed and bad not in fixed.placements["b"]
    assert pal_opt.check(policy.last_instance, fixed) == []
    nxt = policy.place(pal_opt.make_instance(_cluster(failed=(bad,)), QUEUE, restart_cost=60))
    assert nxt.placements == fixed.placements
    assert nxt.jobs_to_terminate == ()
    assert sorted(nxt.info["carried"]) == ["a", "b", "c"]


def test_policy_repair_before_any_round_and_of_forgotten_jobs() -> None:
    policy = RoundPolicy("pal")
    with pytest.raises(OptionError, match="no round yet"):
        policy.repair([0])
    first = policy.place(pal_opt.make_instance(_cluster(), QUEUE))
    policy.forget("a")
    fixed = policy.repair([first.placements["b"][0]])
    assert "a" not in fixed.placements  # finished: not repaired, its GPUs free


def test_a_job_id_given_as_text_next_round_is_the_same_job() -> None:
    """7 then "7" (a queue rebuilt from a placement file, whose ids are text): carried, not a
    new job whose GPUs go to another."""
    policy = RoundPolicy("packed-sticky")
    first = policy.place(pal_opt.make_instance(_cluster(), [
        {"id": 7, "demand": 2, "class": "classA"}, {"id": 8, "demand": 2, "class": "classA"}]))
    nxt = policy.place(pal_opt.make_instance(_cluster(), [
        {"id": 9, "demand": 2, "class": "classA"}, {"id": "7", "demand": 2, "class": "classA"},
        {"id": np.int64(8), "demand": 2, "class": "classA"}]))
    assert nxt.placements["7"] == first.placements[7]
    assert not set(nxt.placements[9]) & set(first.placements[7])


def test_blox_adapter_reads_is_running_as_the_importer_does() -> None:
    """A waiting job (``is_running`` False) that gpu_df still lists on failed GPUs holds nothing:
    the adapter told Blox to terminate it."""
    gpu_df = pd.DataFrame({"GPU_ID": range(8), "Node_ID": [0] * 4 + [1] * 4,
                           "IN_USE": [True, True] + [False] * 6, "JOB_IDS": [1, 1] + [None] * 6,
                           "FAILED": [True, True] + [False] * 6,
                           "PerfVar_classA": [1.0] * 8})
    active = {1: {"num_GPUs": 2, "perfclass": "classA", "is_running": False}}
    policy = BloxPlacement(None, method="pal")
    terminate, launch = policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df),
                                     {"job_order": [(1, 0)]})
    assert terminate == [] and set(launch[1]).isdisjoint({0, 1})


@pytest.mark.parametrize("call", [
    lambda inst: pal_opt.solve(inst, "ilp", options={"time_limit": 5}),
    lambda inst: RoundPolicy("ilp", options={"time_limit": 5}),
    lambda inst: pal_opt.repair(inst, {}, [0], options={"time_limit": 5}),
    lambda inst: BloxPlacement(None, method="ilp", options={"gap": 0.1}),
])
def test_options_that_are_not_solve_options_are_an_option_error(call) -> None:
    with pytest.raises(OptionError, match=r"options= must be a SolveOptions .*time_limit=|gap=.*got dict"):
        call(generate_instance(4, 4, 4, seed=1))


def test_pricing_an_unknown_job_gpu_or_class_names_it() -> None:
    inst = generate_instance(4, 4, 6, seed=1)
    f = binned_factors(inst.cluster, "pal-artifact")
    job = inst.jobs[0]
    with pytest.raises(InstanceError, match=r"job 'zz' is not in the round$"):
        pal_opt.evaluate(inst, {"zz": [0]}, f)
    # the factors given first (job_slowdown takes them before the job): it said only that job
    # 'classA' was not in the round
    with pytest.raises(InstanceError, match=r"^placements: job 'classA' is not in the round \(a class: the orders are "
                                            r"evaluate\(instance, placements, factors\) and job_slowdown\(instance, "
                                            r"factors, job, gpu_ids\); named arguments need none \(factors=\.\.\.\)\)$"):
        pal_opt.evaluate(inst, f, {job.id: [0]})  # type: ignore[arg-type]
    with pytest.raises(InstanceError, match="GPU 99 is not in the round's cluster"):
        pal_opt.evaluate(inst, {job.id: [99]}, f)
    with pytest.raises(InstanceError, match="GPU 99"):
        pal_opt.job_slowdown(inst, f, job, (99,))
    with pytest.raises(InstanceError, match="no factors for class"):
        pal_opt.evaluate(inst, {job.id: [0]}, {})
    with pytest.raises(InputTypeError, match="expected a RoundInstance"):
        pal_opt.evaluate(None, {}, f)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="expected a RoundInstance"):
        pal_opt.repair(None, {}, [0])  # type: ignore[arg-type]
    with pytest.raises(InstanceError, match="placement: must be a sequence of GPU ids, got 0"):
        pal_opt.Job("x", 1, "classA", placement=0)  # type: ignore[arg-type]


def test_blox_adapter_constructor_arguments() -> None:
    with pytest.raises(OptionError, match="track_running does not apply"):
        BloxPlacement(None, "pal", track_running=True)
    policy = BloxPlacement(None, "ilp", options=SolveOptions(gap=0.1))  # (the adapter adds its time limit)
    assert policy.policy.options == {"gap": 0.1, "time_limit": 10.0}
    with pytest.raises(OptionError, match="round_length must be a finite number > 0"):
        BloxPlacement(None, "pal", round_length=0)
    with pytest.raises(OptionError, match="restart_cost must be a finite number >= 0"):
        BloxPlacement(None, "pal", restart_cost=-5)


def test_a_policy_round_records_its_random_stream() -> None:
    inst = generate_instance(4, 4, 6, seed=1)
    policy = RoundPolicy("random", seed=5)
    policy.place(inst)
    second = policy.place(inst)
    assert (second.seed, second.info["policy_seed"], second.info["policy_round"]) == (None, 5, 2)
    replay = RoundPolicy("random", seed=second.info["policy_seed"])
    for _ in range(second.info["policy_round"] - 1):
        replay.place(inst)
    assert replay.place(inst).placements == second.placements
    assert "policy_seed" not in RoundPolicy("random").place(inst, seed=3).info  # a seed of its own


def test_range_errors_say_the_range() -> None:
    cl = _cluster()
    with pytest.raises(InstanceError, match=r"priority: must be an integer in 0\.\.1000000, got 1000001"):
        pal_opt.make_instance(cl, [{"id": 1, "demand": 1, "class": "classA", "priority": 10**6 + 1}])
    with pytest.raises(InstanceError, match=r"demand: must be a positive integer"):
        pal_opt.make_instance(cl, [{"id": 1, "demand": "x", "class": "classA"}])
    with pytest.raises(InstanceError, match=r"nodes: must be an integer >= 1, got 2.5"):
        Cluster.uniform(2.5, 2, {"classA": [1.0] * 5})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- second review
def test_sigterm_guard_exits_143_where_the_signal_cannot_end_the_process(monkeypatch) -> None:
    """As PID 1 of a container the kernel drops the default-action SIGTERM a process sends itself:
    ``die`` returned and the CBC solve went on reading files it had just removed (exit 2)."""
    import os

    from pal_opt.sigint import SigtermNoted

    sent = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append(sig))  # dropped, as for PID 1

    def exit_(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", exit_)
    with pytest.raises(SystemExit) as ended:
        SigtermNoted().die()
    assert ended.value.code == 143 and sent


def test_policy_repair_takes_the_policys_solver_options() -> None:
    policy = RoundPolicy("ilp", backend="cbc", time_limit=5)
    first = policy.place(pal_opt.make_instance(_cluster(), QUEUE))
    fixed = policy.repair([first.placements["b"][0]])
    assert fixed.backend == "cbc"
    assert policy.repair([first.placements["a"][0]], backend="highs").backend == "highs"


def test_job_slowdown_names_the_gpu_or_class_not_the_job() -> None:
    inst = generate_instance(4, 4, 6, seed=1)
    f = binned_factors(inst.cluster, "pal-artifact")
    outside = pal_opt.Job(99, 1, inst.jobs[0].perfclass)
    assert pal_opt.job_slowdown(inst, f, outside, (0,)) > 0  # a job not in the round may be priced
    with pytest.raises(InstanceError, match="GPU 999 is not in the round's cluster"):
        pal_opt.job_slowdown(inst, f, outside, (999,))
    with pytest.raises(InstanceError, match="no factors for class 'classZ'"):
        pal_opt.job_slowdown(inst, f, pal_opt.Job(99, 1, "classZ"), (0,))


def test_policy_round_counts_the_rounds_that_drew_from_the_stream() -> None:
    inst = generate_instance(4, 4, 6, seed=1)
    policy = RoundPolicy("random", seed=5)
    policy.place(inst, seed=9)  # its own seed: the stream is not drawn from
    drawn = policy.place(inst)
    assert drawn.info["policy_round"] == 1
    assert RoundPolicy("random", seed=5).place(inst).placements == drawn.placements


def test_blox_errors_name_the_active_jobs_entry() -> None:
    gpu_df = pd.DataFrame({"GPU_ID": [0, 1, 2, 3], "Node_ID": [0, 0, 1, 1], "IN_USE": [True, True, False, False],
                           "JOB_IDS": [5, 5, None, None], "PerfVar_classA": [1.0, 1.3, 0.9, 1.0]})
    for flag, says in ((False, "job 5 is marked not running but gpu_df lists it on GPUs [0, 1]"),
                       ("running", "must be true or false, got 'running'")):
        active = {5: {"num_GPUs": 2, "perfclass": "classA", "is_running": flag}}
        with pytest.raises(InstanceError) as err:
            BloxPlacement(None, "pal").place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df),
                                             {"job_order": [(5, 0)]})
        assert str(err.value) == f"job_state: active_jobs[5].is_running: {says}"
