"""Rules of pal_opt/hetero/configs.py that no test held (third mutation review)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from pal_opt.errors import InstanceError
from pal_opt.hetero.configs import (
    FLOOR,
    GpuType,
    config_menu,
    enumerate_configs,
    normalise_row,
    raw_goodput_row,
    reallocation_factor,
    scheduler_goodput_fn,
    throughput_table,
    valid_configs,
)
from pal_opt.hetero.goodput import (
    BatchChoice,
    JobKind,
    ProfileStepModel,
    choose_batch,
    clamp_batch,
    grad_stats,
    initial_batch,
    optimize_goodput,
    progress_rate,
)
from pal_opt.hetero.perfmodel import PerfParams
from pal_opt.hetero.profiles import Application, ValidationCurves, load_applications

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def _apps() -> dict[str, Application]:
    d = SHARED / "data" / "sia-artifact" / "profiles"
    if not d.is_dir():
        pytest.skip(f"Sia artifact profiles not available at {d}")
    return dict(load_applications(d))


def test_a_node_of_six_gpus_is_offered_whole() -> None:
    # 1, 2, 4 GPUs on one node, then the whole node of 6 (not a power of two), then whole nodes.
    assert config_menu(6)[:5] == ((1, 1), (1, 2), (1, 4), (1, 6), (2, 12))
    cs = enumerate_configs((GpuType("v100", 2, 6),))
    assert [(c.num_nodes, c.num_gpus) for c in cs.configs] == [(1, 1), (1, 2), (1, 4), (1, 6), (2, 12)]


def test_the_scheduler_goodput_tops_out_at_the_requested_batch() -> None:
    a = _apps()["cifar10"]
    prof = a.profile("aws")
    model = ProfileStepModel(prof)
    grad = grad_stats(a.validation, 2048, 5)
    requested = 2 * a.init_batch_size
    fn = scheduler_goodput_fn(a, "aws", model, grad, requested_batch=requested)
    m, n = np.array([1.0, 1.0, 2.0]), np.array([1.0, 4.0, 8.0])
    want, _, _ = optimize_goodput(model, grad, a.init_batch_size, m, n, requested,
                                  (prof.min_local_bsz, prof.max_local_bsz))
    unlimited, _, _ = optimize_goodput(model, grad, a.init_batch_size, m, n, a.max_batch_size,
                                       (prof.min_local_bsz, prof.max_local_bsz))
    assert not np.allclose(want, unlimited)  # the case tells the two apart
    assert np.allclose(fn(m, n), want, rtol=1e-12)


def test_the_scheduler_goodput_of_a_rigid_job_does_not_tune_its_batch() -> None:
    a = _apps()["cifar10"]
    prof = a.profile("aws")
    model = ProfileStepModel(prof)
    grad = grad_stats(a.validation, 2048, 5)
    requested = 4 * a.init_batch_size
    fn = scheduler_goodput_fn(a, "aws", model, grad, JobKind.RIGID, requested)
    m, n = np.array([1.0, 1.0, 2.0]), np.array([1.0, 4.0, 8.0])
    atomic = (prof.min_local_bsz, prof.max_local_bsz)
    fixed, _, _ = optimize_goodput(model, grad, a.init_batch_size, m, n, requested, atomic, tune_batch=False)
    tuned, _, _ = optimize_goodput(model, grad, a.init_batch_size, m, n, requested, atomic, tune_batch=True)
    assert not np.allclose(fixed, tuned)  # the case tells the two apart
    assert np.allclose(fn(m, n), fixed, rtol=1e-12)


def test_an_unknown_type_is_projected_from_the_first_type_with_a_goodput_function() -> None:
    cs = enumerate_configs()  # aws, dgx-ext, rtx
    valid = valid_configs(cs, {"aws": 8, "dgx-ext": 8, "rtx": 8})
    fns = {"aws": lambda m, n: 10.0 * n, "dgx-ext": None, "rtx": lambda m, n: 100.0 * n}
    raw, known = raw_goodput_row(cs, valid, fns, ratio=lambda c, d: 1.0)
    assert known.tolist() == [True, True, True]
    # dgx-ext 1, 2, 4, 8 GPUs from aws's function (the first type that has one), not rtx's
    assert raw[cs.of_type(1) & valid].tolist() == [10.0, 20.0, 40.0, 80.0]


def test_the_throughput_table_is_relative_to_the_first_type() -> None:
    a = _apps()["cifar10"]
    x_aws = a.profile("aws").single_gpu_throughput()
    x_rtx = a.profile("rtx").single_gpu_throughput()
    assert x_aws is not None and x_rtx is not None and x_aws != x_rtx
    table = throughput_table({"cifar10": a}, ["aws", "rtx"])
    assert table["cifar10"]["aws"] == 1.0
    assert table["cifar10"]["rtx"] == pytest.approx(x_rtx / x_aws, rel=1e-12)


def test_a_type_profiled_without_one_gpu_is_an_instance_error_naming_the_file() -> None:
    def profile(t: str) -> SimpleNamespace:
        return SimpleNamespace(single_gpu_throughput=lambda: None if t == "rtx" else 5.0)

    app = cast(Application, SimpleNamespace(name="toy", types=("aws", "rtx"), profile=profile))
    with pytest.raises(InstanceError, match=r"no 1-GPU rows \(placement 1\) for GPU type 'rtx' \(placements-rtx.csv\); "
                                            r"toy has 1-GPU rows on: aws"):
        throughput_table({"toy": app}, ["aws", "rtx"])


def test_normalisation_divides_by_the_least_entry_of_known_types_only() -> None:
    cs = enumerate_configs()
    raw = np.full(len(cs), FLOOR)
    raw[:3] = [50.0, 90.0, 160.0]  # aws 1, 2, 4 GPUs (known)
    raw[cs.index("rtx", 1, 2)] = 5.0  # a value on rtx, which is unknown: not the scale
    g = normalise_row(cs, raw, np.array([True, False, False]))
    assert [round(float(v), 6) for v in g[:3]] == [1.0, 1.8, 3.2]


def test_a_job_exactly_as_old_as_the_penalty_is_damped() -> None:
    # "1 for a job younger than P": at age = P the formula applies, (30 - 0) / (30 + 30).
    assert reallocation_factor(30, 0, 30) == 0.5


def test_one_gpu_above_the_initial_batch_takes_two_micro_batches() -> None:
    a = _apps()["cifar10"]  # B0 = 128, up to 1024 per GPU on aws
    prof = a.profile("aws")
    assert initial_batch(a, prof, (1,), 2 * a.init_batch_size) == BatchChoice(a.init_batch_size, 1)


def test_the_batch_is_clamped_to_the_largest_profiled_with_that_many_gpus() -> None:
    a = _apps()["cifar10"]
    prof = a.profile("aws")
    limit = prof.replica_limit(1)
    assert limit is not None and limit < a.max_batch_size  # the case tells the two clamps apart
    assert clamp_batch(a, prof, 1, BatchChoice(a.max_batch_size, 0)) == BatchChoice(limit, 0)


def test_the_clamped_global_batch_with_micro_batches_stays_within_the_largest_batch() -> None:
    # 4 GPUs, two micro-batches each (A = 1): b <= Bmax / (n (A + 1)) = 4096 / 8 = 512, below the
    # profiled limit of 1,024, so the global batch n b (A + 1) is Bmax exactly (2026-12-07: the
    # divisor n A + 1 = 5 gave 819 and a global batch of 6,552)
    a = _apps()["cifar10"]
    prof = a.profile("aws")
    assert a.max_batch_size == 4096 and prof.replica_limit(4) == 1024
    got = clamp_batch(a, prof, 4, BatchChoice(1024, 1))
    assert got == BatchChoice(512, 1) and got.global_batch(4) == a.max_batch_size


def test_a_learned_model_chooses_within_the_placements_own_batch_limit() -> None:
    # deepspeech2 on one rtx GPU: the placement's profiled limit, not the type's largest atomic
    # batch, bounds the atomic batch the job's goodput search may use (A.5).
    a = _apps()["deepspeech2"]
    prof = a.profile("rtx")
    assert prof.placement_limit((1,)) != prof.max_local_bsz  # the case tells the two apart
    th = PerfParams(0.05, 0.0001, 0.1, 0.01, 0.01, 0.001, 1.0)
    assert choose_batch(a, "rtx", (1,), JobKind.ADAPTIVE, step_model=th, grad=(1.0, 1e6)) == BatchChoice(80, 2)


def test_a_zero_step_time_is_an_instance_error() -> None:
    one = np.array([[1.0], [1.0]])
    curves = ValidationCurves(np.array([8, 16]), one, one, one, grad_sqr=one, grad_var=one)
    app = cast(Application, SimpleNamespace(
        name="toy", validation=curves, init_batch_size=8, settings=SimpleNamespace(calibration=1.0),
        profile=lambda t: SimpleNamespace(step_time=lambda p, b: (0.0, 0.0))))
    with pytest.raises(InstanceError, match="no step time"):
        progress_rate(app, "aws", (1,), BatchChoice(8, 0), 0)
