"""Rules of pal_opt/hetero/simjob.py that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

import pytest

from pal_opt.hetero.configs import PAPER_CLUSTER
from pal_opt.hetero.goodput import JobKind
from pal_opt.hetero.profiles import Application
from pal_opt.hetero.simjob import SimJob
from pal_opt.hetero.workload import WorkloadJob

TYPES = [t.name for t in PAPER_CLUSTER]



def _job(app: Application) -> SimJob:
    return SimJob(0, WorkloadJob("cifar10-0", 0.0, app.name, 4, 2048, JobKind.ADAPTIVE, 2), app, TYPES)


def test_the_last_epoch_ends_at_the_rounded_not_the_ceiled_second(monkeypatch: pytest.MonkeyPatch, cifar10: Application) -> None:
    app = cifar10
    job = _job(app)
    job.reallocate(2, (2,), now=0)
    job.rescale_time = 0.0
    from pal_opt.hetero.simjob import _epoch_targets

    targets = _epoch_targets(app)
    job.epoch = app.max_epochs - 1
    job.progress = targets[job.epoch]
    rate = (targets[job.epoch + 1] - job.progress) / 10.3  # the last epoch takes 10.3 s
    monkeypatch.setattr(SimJob, "_rate", lambda self: rate)
    job.advance(60, now=100)
    assert job.completion_time == 110  # round(10.3) = 10, not ceil = 11


def test_a_suspended_job_runs_at_no_slowdown(cifar10: Application) -> None:
    app = cifar10
    job = _job(app)
    job.reallocate(2, (2,), now=0, slowdown=1.3)
    assert job.slowdown == 1.3
    job.reallocate(2, (), now=60, slowdown=1.3)  # same type, no GPUs: suspended
    assert job.slowdown == 1.0


def test_a_slower_gpu_slows_the_job_s_progress(cifar10: Application) -> None:
    app = cifar10
    fast, slow = _job(app), _job(app)
    fast.reallocate(2, (2,), now=0, slowdown=1.0)
    slow.reallocate(2, (2,), now=0, slowdown=2.0)
    for j in (fast, slow):
        j.rescale_time = 0.0
        j.advance(5, now=0)  # well inside the first epoch
    assert slow.progress == pytest.approx(fast.progress / 2)


def test_accumulation_steps_do_not_pay_the_synchronisation(cifar10: Application) -> None:
    import dataclasses

    from pal_opt.hetero.goodput import gain

    app = cifar10
    job = _job(app)
    job.reallocate(2, (4, 4), now=0)  # two nodes: the synchronisation time is not zero
    assert job.choice is not None
    job.choice = dataclasses.replace(job.choice, accum_steps=2)
    key, (step, sync), grad = job.measurement()
    assert 0 < sync < step
    batch = key[1] * key[2] * 3
    want = app.settings.calibration * gain(batch, app.init_batch_size, *grad) / (step + 2 * (step - sync))
    assert job._rate() == pytest.approx(want)


def test_losing_its_gpus_ends_a_restart_delay(cifar10: Application) -> None:
    app = cifar10
    job = _job(app)
    job.reallocate(2, (2,), now=0)
    assert job.rescale_time > 0
    job.lose_gpus(now=10)
    assert job.rescale_time == 0.0 and job.shape == () and job.allocation == ()


def test_holding_longer_than_the_restart_delay_leaves_no_negative_delay(cifar10: Application) -> None:
    app = cifar10
    job = _job(app)
    job.reallocate(2, (2,), now=0)
    job.hold(10 * app.settings.restart_delay + 60)
    assert job.rescale_time == 0.0


@pytest.mark.parametrize("new, restarts", [((4, 2), 0), ((2, 4), 1), ((3, 3), 1)])
def test_the_same_type_restarts_on_a_changed_per_node_tuple_in_order(
        cifar10: Application, new: tuple[int, ...], restarts: int) -> None:
    """SIA_MODEL.md (d): on the same type a job restarts when its per-node count tuple changes,
    compared as the authors' ``Job.reallocate`` does (``old_placement != new_placement``): the
    same counts in another node order, or the same GPU count spread otherwise, is a new tuple
    (a restart); only the same tuple on other nodes costs nothing."""
    app = cifar10
    job = _job(app)
    job.reallocate(2, (4, 2), now=0)
    job.rescale_time = 0.0
    assert job.num_restarts == 0
    job.reallocate(2, new, now=60)
    assert job.shape == new and job.num_restarts == restarts
    assert job.rescale_time == (app.settings.restart_delay if restarts else 0.0)
