"""Failures at a round boundary in the PAL simulator (pal_opt/simulate/engine.py): which round
sees them and which failure the failure log charges a stopped job to."""

from __future__ import annotations

import heapq
import math

import pytest

from pal_opt.io.traces import TraceJob
from pal_opt.model import Cluster, GpuState
from pal_opt.simulate import SimConfig, simulate
from pal_opt.simulate import engine as engine_mod
from pal_opt.simulate.failures import FailureConfig, FailureProcess

NEVER = FailureConfig(gpu_mtbf_hours=math.inf, server_mtbf_hours=math.inf, repair_time=60.0,
                      checkpoint_interval=math.inf)


def _job(jid: int, demand: int, seconds: float) -> TraceJob:
    return TraceJob(id=jid, demand=demand, submit_time=0.0, iterations=seconds, model="m", perfclass="classA",
                    iter_time=1.0)


def _inject(monkeypatch: pytest.MonkeyPatch, *events: tuple[float, int, int]) -> None:
    class Injected(FailureProcess):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            for e in events:
                heapq.heappush(self.heap, e)

    monkeypatch.setattr(engine_mod, "FailureProcess", Injected)


def test_a_failure_at_a_round_boundary_is_seen_by_the_next_rounds_placement(monkeypatch) -> None:
    # GPU 0 fails exactly at t = 360 (round 0's end) under the job: round 1 is placed with GPU 0
    # failed and the job on GPU 1, without a mid-round repair
    _inject(monkeypatch, (360.0, 0, 0))
    seen: dict[str, list[int]] = {}
    res = simulate([_job(0, 1, 1000.0)], Cluster.uniform(1, 2, {"classA": [1.0, 1.0]}),
                   SimConfig(policy="packed", round_length=360.0, seed=0, failures=NEVER),
                   on_round=lambda inst, r: seen.setdefault(inst.name, inst.cluster.state.tolist()))
    assert seen["round 1 t=360"] == [GpuState.FAILED, GpuState.FREE]
    assert res.failures is not None and res.failures.repairs == 0
    assert [r.failures for r in res.jobs] == [1]


def test_the_failure_log_charges_a_job_to_the_failure_that_took_its_gpu(monkeypatch) -> None:
    # GPU 3 fails at 100 s (idle); at 360 s GPU 2 (idle) and server 0 (under the job on GPU 0) fail
    _inject(monkeypatch, (100.0, 0, 3), (360.0, 0, 2), (360.0, 1, 0))
    res = simulate([_job(0, 1, 1000.0)], Cluster.uniform(2, 2, {"classA": [1.0] * 4}),
                   SimConfig(policy="packed", round_length=360.0, seed=0, failures=NEVER))
    log = res.failures.log()
    assert [(e["kind"], e["gpus"]) for e in log] == [("gpu", [3]), ("gpu", [2]), ("server", [0, 1])]
    assert [e["jobs"] for e in log] == [[], [], [0]]
