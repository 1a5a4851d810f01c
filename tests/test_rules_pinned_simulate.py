"""Rules of the PAL simulator's loop (pal_opt/simulate/engine.py) that no test held (third mutation review)."""

from __future__ import annotations

import heapq
import math

import pytest

from pal_opt.errors import BackendError
from pal_opt.io.traces import TraceJob
from pal_opt.model import Cluster, RoundInstance
from pal_opt.result import PlacementResult
from pal_opt.scheduler import RoundPolicy
from pal_opt.simulate import SimConfig, simulate
from pal_opt.simulate import engine as engine_mod
from pal_opt.simulate.failures import FailureConfig, FailureProcess


def _job(jid: int, demand: int, submit: float, seconds: float) -> TraceJob:
    return TraceJob(id=jid, demand=demand, submit_time=submit, iterations=seconds, model="m",
                    perfclass="classA", iter_time=1.0)


def test_a_failure_at_a_round_boundary_stops_the_job_on_that_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # One failure of GPU 0 exactly at t = 360 s, the first round's end: the in-round loop leaves it
    # (it takes failures before the end), the boundary takes it, and it hits the job on GPU 0.
    class OneFailure(FailureProcess):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            heapq.heappush(self.heap, (360.0, 0, 0))

    monkeypatch.setattr(engine_mod, "FailureProcess", OneFailure)
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    trace = [_job(0, 1, 0.0, 1000.0)]
    never = FailureConfig(gpu_mtbf_hours=math.inf, server_mtbf_hours=math.inf, repair_time=60.0,
                          checkpoint_interval=math.inf)
    res = simulate(trace, cluster, SimConfig(policy="packed", round_length=360.0, seed=0, failures=never))
    assert [r.failures for r in res.jobs] == [1]
    assert res.failures is not None and len(res.failures.events) == 1
    assert res.failures.events[0].gpus == (0,)


def test_an_idle_gap_is_one_round_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # A job arriving 100 rounds after the first finished: the clock jumps to its arrival in one
    # step, so the round it runs in is the next round number (and the loop does not walk the gap).
    names: list[str] = []
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    trace = [_job(0, 1, 0.0, 100.0), _job(1, 1, 36_000.0, 100.0)]
    simulate(trace, cluster, SimConfig(policy="packed", round_length=360.0, seed=0),
             on_round=lambda inst, res: names.append(inst.name))
    assert names == ["round 0 t=0", "round 2 t=36000"]


def test_srtf_orders_by_remaining_seconds_not_iterations() -> None:
    # Job 0: 100 iterations of 10 s (1,000 s); job 1: 500 iterations of 1 s (500 s): job 1 first.
    first: list[object] = []
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    trace = [TraceJob(id=0, demand=1, submit_time=0.0, iterations=100.0, model="m", perfclass="classA", iter_time=10.0),
             TraceJob(id=1, demand=1, submit_time=0.0, iterations=500.0, model="m", perfclass="classA", iter_time=1.0)]
    simulate(trace, cluster, SimConfig(policy="packed", queue="srtf", round_length=360.0, seed=0),
             on_round=lambda inst, res: first.append(inst.jobs[0].id))
    assert first[0] == 1


def test_two_jobs_on_one_gpu_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Overlapping(RoundPolicy):
        def place(self, instance: RoundInstance, *, seed: object = None) -> PlacementResult:
            res = super().place(instance, seed=seed)  # type: ignore[arg-type]
            res.placements = {j.id: (0,) for j in instance.jobs}  # both jobs on GPU 0
            return res

    monkeypatch.setattr(engine_mod, "RoundPolicy", Overlapping)
    cluster = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    with pytest.raises(BackendError, match="two jobs on one GPU"):
        simulate([_job(0, 1, 0.0, 100.0), _job(1, 1, 0.0, 100.0)], cluster,
                 SimConfig(policy="packed", round_length=360.0, seed=0))


def test_a_preempted_job_keeps_the_work_it_did_before_a_later_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    # Round 0: the job runs 360 s; round 1: the policy gives it no GPU (a planned stop, which saves
    # a checkpoint); round 2: it runs again and GPU 0 fails 100 s in.  Without periodic
    # checkpoints it loses those 100 s only, not the 360 s of round 0 too.
    class PauseRoundOne(RoundPolicy):
        def place(self, instance: RoundInstance, *, seed: object = None) -> PlacementResult:
            res = super().place(instance, seed=seed)  # type: ignore[arg-type]
            if instance.name.startswith("round 1 "):
                res.placements = {}
            return res

    class FailureAt820(FailureProcess):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            heapq.heappush(self.heap, (820.0, 0, 0))

    monkeypatch.setattr(engine_mod, "RoundPolicy", PauseRoundOne)
    monkeypatch.setattr(engine_mod, "FailureProcess", FailureAt820)
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    never = FailureConfig(gpu_mtbf_hours=math.inf, server_mtbf_hours=math.inf, repair_time=60.0,
                          checkpoint_interval=math.inf)
    res = simulate([_job(0, 1, 0.0, 2000.0)], cluster,
                   SimConfig(policy="packed", round_length=360.0, seed=0, failures=never))
    (rec,) = res.jobs
    assert rec.failures == 1 and rec.preemptions == 1
    assert rec.lost_gpu_seconds == pytest.approx(100.0)


def test_a_job_spanning_two_servers_of_one_rack_counts_as_spanning() -> None:
    cluster = Cluster.uniform(2, 1, {"classA": [1.0, 1.0]}, racks=1)  # one rack, two 1-GPU servers
    res = simulate([_job(0, 2, 0.0, 500.0)], cluster, SimConfig(policy="packed", round_length=360.0, seed=0))
    (rec,) = res.jobs
    assert rec.rounds_run >= 1 and rec.rounds_spanning == rec.rounds_run


def test_a_running_job_carries_its_start_time_into_the_round() -> None:
    # The preemptive methods evict the most recently started job first: they read Job.started.
    seen: list[object] = []
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    simulate([_job(0, 1, 0.0, 1000.0)], cluster, SimConfig(policy="packed", round_length=360.0, seed=0),
             on_round=lambda inst, res: seen.append(inst.jobs[0].started))
    assert seen == [None, 0.0, 0.0]


def test_las_counts_gpu_seconds_so_a_wider_job_has_attained_more() -> None:
    # Both run round 0: job 0 on 2 GPUs (720 GPU-s), job 1 on 1 GPU (360 GPU-s): LAS puts job 1 first.
    orders: list[list[object]] = []
    cluster = Cluster.uniform(1, 3, {"classA": [1.0, 1.0, 1.0]})
    simulate([_job(0, 2, 0.0, 2000.0), _job(1, 1, 0.0, 2000.0)], cluster,
             SimConfig(policy="packed", queue="las", round_length=360.0, seed=0),
             on_round=lambda inst, res: orders.append([j.id for j in inst.jobs]))
    assert orders[0] == [0, 1] and orders[1] == [1, 0]


def test_a_job_finished_in_the_round_keeps_its_gpus_from_the_repair(monkeypatch: pytest.MonkeyPatch) -> None:
    # Job 0 (100 s) finishes on one GPU; job 1's GPU fails at t = 200 s.  The finished job's GPU is
    # free only from the next round, so the repair has nowhere to put job 1: it waits.
    class FailureOfGpu1(FailureProcess):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            heapq.heappush(self.heap, (200.0, 0, 1))

    monkeypatch.setattr(engine_mod, "FailureProcess", FailureOfGpu1)
    cluster = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    never = FailureConfig(gpu_mtbf_hours=math.inf, server_mtbf_hours=math.inf, repair_time=60.0,
                          checkpoint_interval=math.inf)
    res = simulate([_job(0, 1, 0.0, 100.0), _job(1, 1, 0.0, 2000.0)], cluster,
                   SimConfig(policy="packed", round_length=360.0, seed=0, failures=never))
    assert [r.failures for r in res.jobs] == [0, 1]
    assert res.failures is not None and res.failures.replaced == 0


def test_two_rounds_placing_nothing_are_not_yet_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class SlowStart(RoundPolicy):
        def place(self, instance: RoundInstance, *, seed: object = None) -> PlacementResult:
            res = super().place(instance, seed=seed)  # type: ignore[arg-type]
            if instance.name.startswith(("round 0 ", "round 1 ")):
                res.placements = {}
            return res

    monkeypatch.setattr(engine_mod, "RoundPolicy", SlowStart)
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    res = simulate([_job(0, 1, 0.0, 100.0)], cluster, SimConfig(policy="packed", round_length=360.0, seed=0))
    assert res.jobs[0].first_start == 720.0
