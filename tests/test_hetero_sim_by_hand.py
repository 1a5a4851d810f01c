"""The Sia simulator on a toy application whose every figure can be worked out by hand.

The rules pinned here were held only by tests that read the Sia artifact's profiles from
``../shared`` (skipped without it): a job submitted on a round boundary starts that round, a
(re)start holds the GPUs for the restart delay, the last epoch ends mid-round at its rounded
second, a job moved to other GPUs of the same per-node shape does not restart, and a rigid job
runs at its slowest GPU's factor.  Each test here fails on a one-rule change of those (the
fifteenth session checked each by hand) and needs no data beyond this file.

The toy application ``toy`` (one GPU type ``t``) makes the progress rate one B0-step per second
on any placement at any batch: every step takes 1 s with no synchronisation, the gradient has no
variance (``grad_var`` 0, so the gain of any batch is 1) and its calibration is 1.  Training to
the end of epoch e then takes P(e) seconds of training, P being the validation curve's progress
column, and a job's completion is its start + restart delay + P(last) (with each epoch's end
rounded to a whole second, :meth:`pal_opt.hetero.simjob.SimJob.advance`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pytest

from pal_opt.hetero.configs import GpuType
from pal_opt.hetero.goodput import JobKind
from pal_opt.hetero.gpus import Layout, Variability
from pal_opt.hetero.profiles import Application, AppSettings, TypeProfile, ValidationCurves
from pal_opt.hetero.roundstep import round_step
from pal_opt.hetero.simjob import SimJob
from pal_opt.hetero.simulate import SiaResult, SimConfig, build_cluster, simulate_sia
from pal_opt.hetero.workload import WorkloadJob, workload_from_frame

ROUND = 60.0  # the simulator's round (SimConfig's default)


def _toy(progress: Sequence[float], restart_delay: float = 30.0) -> Application:
    """The toy application (module docstring): epochs end at ``progress`` B0-steps, batch 32 the
    only validated one, atomic batches 1..64 on shapes 1, 2, 4, 1+1 and 2+2 of type ``t``."""
    shapes = ["1", "2", "4", "11", "22"]
    placements = pd.DataFrame({"placement": [p for p in shapes for _ in (0, 1)], "local_bsz": [1, 64] * len(shapes),
                               "step_time": 1.0, "sync_time": 0.0})
    scalability = pd.DataFrame({"num_nodes": [1, 1, 2, 2], "num_replicas": [1, 1, 8, 8], "local_bsz": [1, 64, 1, 64],
                                "step_time": 1.0, "sync_time": 0.0})
    ones = np.ones((1, len(progress)))
    curves = ValidationCurves(batch_sizes=np.array([32]), progress=np.array([progress], dtype=np.float64),
                              iteration=ones, metric=ones, grad_sqr=ones, grad_var=0 * ones)
    settings = AppSettings(max_epochs=len(progress), restart_delay=restart_delay, restart_penalty=restart_delay)
    return Application("toy", curves, {"t": TypeProfile.from_frames("toy", "t", placements, scalability)}, settings)


def _simulate(app: Application, submit: float, *, gpus: int = 4, variability: Variability | None = None) -> SiaResult:
    """One rigid job of ``gpus`` GPUs at batch 32, submitted at ``submit``, alone on one node of
    four GPUs under the Sia policy."""
    frame = pd.DataFrame([("toy-0", submit, "toy", gpus, 32)],
                         columns=["name", "time", "application", "num_replicas", "batch_size"])
    frame["category"] = "rigid"
    apps = {"toy": app}
    cluster = build_cluster([("t", 1, 4)], apps)
    return simulate_sia(workload_from_frame(frame, source="toy"), apps, cluster,
                        SimConfig(variability=variability or Variability()))


def test_the_toy_job_runs_at_one_step_per_second() -> None:
    """The premise of the other tests: 200 B0-steps take 200 s of training."""
    res = _simulate(_toy([100.0, 200.0]), 0.0)
    job = res.jobs[0]
    # noticed at the first round boundary (60), then 30 s of restart delay and 200 s of training
    assert (job.start_time, job.completion_time, job.restarts, job.epochs) == (60.0, 290.0, 0, 2)
    assert res.gpus_in_use[:, 0].tolist() == [4, 4, 4, 4, 0]  # held at 60, 120, 180, 240; done by 300


@pytest.mark.parametrize("submit, start", [(60.0, 60.0), (59.5, 60.0), (60.5, 120.0), (120.0, 120.0)])
def test_a_job_submitted_on_a_round_boundary_starts_that_round(submit: float, start: float) -> None:
    """Arrivals are noticed at round boundaries, a job submitted at a boundary at that very one
    (``submit_time <= now``); its JCT counts from its submission."""
    job = _simulate(_toy([100.0, 200.0]), submit).jobs[0]
    assert job.start_time == start
    assert job.completion_time == start + 30.0 + 200.0
    assert job.jct == start + 230.0 - submit


@pytest.mark.parametrize("delay", [0.0, 30.0, 40.0, 45.0, 150.0])
def test_a_start_holds_the_gpus_for_the_restart_delay(delay: float) -> None:
    """The restart delay comes first and makes no progress, with the GPUs held (and counted in
    use) all along.  With 40 s the job ends on a round boundary (300) and is not in that
    round's use."""
    res = _simulate(_toy([100.0, 200.0], restart_delay=delay), 0.0)
    done = 60.0 + delay + 200.0
    assert res.jobs[0].completion_time == done
    rounds_held = int(np.ceil((done - 60.0) / ROUND))  # the rounds recorded at 60, 120, ... before `done`
    assert res.gpus_in_use[:, 0].tolist() == [4] * rounds_held + [0]


def test_a_job_that_ends_in_the_round_of_its_restart_delay_ends_after_the_delay() -> None:
    """Epoch ends within the round of a restart delay are counted from the delay's end: started
    at 60, the job waits until 90, ends epoch 1 (5 B0-steps) at 95 and epoch 2 (20) at 110."""
    res = _simulate(_toy([5.0, 20.0]), 0.0)
    assert (res.jobs[0].completion_time, res.jobs[0].epochs) == (110.0, 2)
    assert res.gpus_in_use[:, 0].tolist() == [4, 0]


def test_the_last_epoch_ends_mid_round_at_its_rounded_second() -> None:
    """Epoch ends are rounded to whole seconds and the job completes at the last one, inside the
    round, not at the round's end.  Started at 60, the job trains from 90: 90 B0-steps by 180;
    epoch 1 (100.6) needs 10.6 s more, rounded to 11 (191); the round's other 49 s bring it to
    149.6 by 240; epoch 2 (200) needs 50.4 s, rounded to 50: done at 290 (ceil would give 291,
    floor 289, the round's end 300, one epoch fewer 191)."""
    res = _simulate(_toy([100.6, 200.0]), 0.0)
    job = res.jobs[0]
    assert (job.completion_time, job.epochs, job.jct) == (290.0, 2, 290.0)
    assert res.summary()["makespan"] == 290.0


def test_a_rigid_job_holds_all_its_gpus_and_runs_at_its_slowest_factor() -> None:
    """Variability: the job's four GPUs have factors 1, 1, 2, 1, so it trains at half speed
    (the slowest factor) on all four: 200 B0-steps take 400 s after the 30 s delay from 60."""
    factors = np.array([1.0, 1.0, 2.0, 1.0])
    var = Variability(raw={"toy": factors}, binned={"toy": factors})
    res = _simulate(_toy([100.0, 200.0]), 0.0, variability=var)
    assert res.jobs[0].completion_time == 60.0 + 30.0 + 400.0
    assert res.gpus_in_use[:, 0].tolist() == [4] * 8 + [0]  # GPUs held, not jobs
    assert res.summary()["variability_slowdown"]["mean"] == 2.0


class _Scripted:
    """A policy that gives job 0 ``first`` GPUs in the round at 0 and ``then`` afterwards."""

    unplaceable: Mapping[int, str] = {}

    def __init__(self, first: tuple[int, ...], then: tuple[int, ...]) -> None:
        self.first, self.then = first, then

    def allocate(self, active: Sequence[SimJob], now: float) -> dict[int, tuple[int, ...]]:
        return {0: self.first if now == 0 else self.then}


@pytest.mark.parametrize("then, shape, restarts, done", [
    ((0, 1), (2,), 0, 230.0),  # kept: 30 s delay, then 200 s of training
    ((2, 3), (2,), 0, 230.0),  # the same per-node shape on the other node: no restart, no delay
    ((1, 2), (1, 1), 1, 260.0),  # one GPU on each node: a restart, 30 s more delay
])
def test_a_move_restarts_the_job_only_when_its_per_node_shape_changes(
        then: tuple[int, ...], shape: tuple[int, ...], restarts: int, done: float) -> None:
    """Round steps (:func:`~pal_opt.hetero.roundstep.round_step`, the simulator's) on two nodes
    of two GPUs, positions 0-1 on the first, 2-3 on the second: a rigid job of two GPUs starts
    on the first node at 0 and is moved at 60 (SIA_MODEL.md D)."""
    app = _toy([100.0, 200.0])
    job = SimJob(0, WorkloadJob("toy-0", 0.0, "toy", 2, 32, JobKind.RIGID), app, ["t"])
    layout = Layout((GpuType("t", 2, 2),))
    policy = _Scripted((0, 1), then)
    now = 0.0
    while not job.done and now < 600:
        round_step(policy, layout, Variability(), [job], now)
        job.advance(ROUND, now)
        now += ROUND
    assert job.allocation == then and job.shape == shape
    assert (job.num_restarts, job.completion_time, job.start_time) == (restarts, done, 0.0)
