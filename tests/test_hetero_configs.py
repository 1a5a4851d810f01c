"""Sia's configuration menu and a job's goodput row over it (pal_opt.hetero.configs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pal_opt.errors import OptionError
from pal_opt.hetero.configs import (
    FLOOR,
    PAPER_CLUSTER,
    GpuType,
    apply_reallocation,
    config_menu,
    enumerate_configs,
    fairness_costs,
    max_replicas,
    normalise_row,
    raw_goodput_row,
    reallocation_factor,
    scheduler_goodput_fn,
    throughput_ratio,
    valid_configs,
)
from pal_opt.hetero.goodput import JobKind, ProfileStepModel, grad_stats
from pal_opt.hetero.profiles import Application, load_applications

TYPES = [t.name for t in PAPER_CLUSTER]


@pytest.fixture(scope="module")
def apps(shared_dir: Path) -> dict[str, Application]:
    d = shared_dir / "data" / "sia-artifact" / "profiles"
    if not d.is_dir():
        pytest.skip(f"Sia artifact profiles not available at {d}")
    return dict(load_applications(d))


def test_the_papers_nineteen_configurations() -> None:
    cs = enumerate_configs(PAPER_CLUSTER)
    got = [(c.gpu_type, c.num_nodes, c.num_gpus) for c in cs.configs]
    expect = (
        [("aws", m, n) for m, n in [(1, 1), (1, 2), (1, 4), (2, 8), (3, 12), (4, 16), (5, 20), (6, 24)]]
        + [("dgx-ext", m, n) for m, n in [(1, 1), (1, 2), (1, 4), (1, 8), (2, 16)]]
        + [("rtx", m, n) for m, n in [(1, 1), (1, 2), (1, 4), (1, 8), (2, 16), (3, 24)]]
    )
    assert got == expect
    assert cs.num_gpus[cs.of_type(1)].tolist() == [1, 2, 4, 8, 16]
    assert cs.index("rtx", 2, 16) == 17
    assert cs.configs[17].placement() == (8, 8)
    with pytest.raises(OptionError, match="not offered"):
        cs.index("aws", 1, 3)


def test_menus_match_the_artifacts_fixed_lists() -> None:
    four = [(1, 1), (1, 2), (1, 4)] + [(m, 4 * m) for m in range(2, 17)]
    eight = [(1, 1), (1, 2), (1, 4), (1, 8)] + [(m, 8 * m) for m in range(2, 9)]
    assert list(config_menu(4)) == four and list(config_menu(8)) == eight
    # A type of 16 nodes (aws could have them) reaches 64 GPUs; no 3, 5, 6 or 7 GPUs on a node.
    big = enumerate_configs([GpuType("aws", 20, 4, 16)])
    assert big.num_gpus.max() == 64 and big.num_nodes.max() == 16
    assert not set(big.num_gpus.tolist()) & {3, 5, 6, 7}


def test_replica_caps(apps: dict[str, Application]) -> None:
    cifar = apps["cifar10"]
    # Never ran: cap 1 everywhere (max(2·0, 1)).
    assert max_replicas(cifar, JobKind.ADAPTIVE, 8, {}, TYPES) == {t: 1 for t in TYPES}
    # Ran with 6 GPUs on rtx: twice that, shared by every type.
    assert max_replicas(cifar, JobKind.ADAPTIVE, 8, {"rtx": 6}, TYPES) == {t: 12 for t in TYPES}
    # 64 and Bmax / b_min cap it: bert 384 // 4 = 96 -> 64, yolov3 512 // 4 = 128 -> 64.
    assert max_replicas(apps["bert"], JobKind.ADAPTIVE, 8, {"aws": 40}, TYPES)["aws"] == 64
    assert max_replicas(apps["yolov3"], JobKind.ADAPTIVE, 8, {"aws": 200}, TYPES)["rtx"] == 64
    # Strong-scaling and rigid jobs are capped at their request.
    assert max_replicas(cifar, JobKind.STRONG_SCALING, 6, {"aws": 40}, TYPES) == {t: 6 for t in TYPES}
    cs = enumerate_configs()
    valid = valid_configs(cs, {t: 6 for t in TYPES})
    assert cs.num_gpus[valid].tolist() == [1, 2, 4, 1, 2, 4, 1, 2, 4]


def test_new_job_row_is_one_gpu_anywhere() -> None:
    # A job that has never run has no goodput function: every type is unknown, the 1-GPU entry
    # of each is 1 and everything else is the floor (B.3, B.4), so its costs are 1 and 100.
    cs = enumerate_configs()
    valid = valid_configs(cs, {t: 1 for t in TYPES})
    raw, known = raw_goodput_row(cs, valid, {t: None for t in TYPES}, ratio=lambda c, d: 1.0)
    assert not known.any() and np.all(raw == FLOOR)
    g = normalise_row(cs, raw, known)
    assert g.dtype == np.float32
    assert np.flatnonzero(g == 1.0).tolist() == [0, 8, 13]
    assert fairness_costs(g).tolist() == [1.0 if k in (0, 8, 13) else 100.0 for k in range(19)]


def test_projected_row_and_normalisation(apps: dict[str, Application]) -> None:
    a = apps["cifar10"]
    cs = enumerate_configs()
    grad = grad_stats(a.validation, 2048, 5)
    aws_fn = scheduler_goodput_fn(a, "aws", ProfileStepModel(a.profile("aws")), grad, requested_batch=2048)
    valid = valid_configs(cs, max_replicas(a, JobKind.ADAPTIVE, 8, {"aws": 4}, TYPES))
    fns = {"aws": aws_fn, "dgx-ext": None, "rtx": None}
    raw, known = raw_goodput_row(cs, valid, fns, ratio=lambda c, d: throughput_ratio(a, c, d))
    assert known.tolist() == [True, True, True]
    # dgx-ext with 8 GPUs on one node is projected from aws's 8 GPUs on 2 nodes:
    # goodput_aws(2, 8) · X(dgx-ext) / X(aws), X = largest 1-GPU batch / largest 1-GPU step time.
    k = cs.index("dgx-ext", 1, 8)
    x_dgx, x_aws = a.profile("dgx-ext").single_gpu_throughput(), a.profile("aws").single_gpu_throughput()
    assert x_dgx is not None and x_aws is not None
    expect = float(aws_fn(np.array([2.0]), np.array([8.0]))[0]) * x_dgx / x_aws
    assert raw[k] == pytest.approx(expect, rel=1e-12)
    # Configurations above the cap (2·4 = 8 GPUs) stay at the floor.
    assert np.all(raw[cs.num_gpus > 8] == FLOOR)
    g = normalise_row(cs, raw, known)
    useful = g[g > FLOOR]
    assert useful.min() == pytest.approx(1.0) and np.all(useful >= 1.0 - 1e-6)
    # The A100s are faster than the T4s, so the same GPU count is worth more there.
    assert g[cs.index("dgx-ext", 1, 4)] > g[cs.index("aws", 1, 4)]
    costs = fairness_costs(g)
    assert np.all((costs[g > FLOOR] > 0) & (costs[g > FLOOR] <= 1.0))


def test_without_projection_other_types_are_unknown(apps: dict[str, Application]) -> None:
    a = apps["bert"]
    cs = enumerate_configs()
    grad = grad_stats(a.validation, 384, 0)
    fn = scheduler_goodput_fn(a, "rtx", ProfileStepModel(a.profile("rtx")), grad, JobKind.STRONG_SCALING, 384)
    valid = valid_configs(cs, {t: 4 for t in TYPES})
    raw, known = raw_goodput_row(cs, valid, {"aws": None, "dgx-ext": None, "rtx": fn})
    assert known.tolist() == [False, False, True]
    g = normalise_row(cs, raw, known)
    assert g[cs.index("aws", 1, 1)] == 1.0 and g[cs.index("dgx-ext", 1, 1)] == 1.0
    assert g[cs.index("aws", 1, 2)] == np.float32(FLOOR)
    # Strong scaling at a fixed batch: 4 GPUs beat 1 on the same type.
    assert g[cs.index("rtx", 1, 4)] > g[cs.index("rtx", 1, 1)]


def test_reallocation_and_costs() -> None:
    # Younger than the penalty: no damping.  570 s old with 2 restarts at 30 s each:
    # (570 - 60) / (570 + 30) = 0.85.
    assert reallocation_factor(29.9, 3, 30) == 1
    assert reallocation_factor(570, 2, 30) == pytest.approx(0.85)
    assert reallocation_factor(100, 10, 30) == 0.0
    row = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    out = apply_reallocation(row, 0.5, previous=2)
    assert out.tolist() == [0.5, 1.0, 4.0] and out.dtype == np.float32
    assert apply_reallocation(row, 0.5, previous=None) is row
    # G^-0.5 rounded to 2 decimals, clipped at 3000.
    costs = fairness_costs(np.array([1.0, 2.0, 1e-8, 0.826]))
    assert costs.tolist() == [1.0, 0.71, 3000.0, 1.1]
    with pytest.raises(OptionError):
        fairness_costs(np.array([1.0]), p=0.0)
