"""The Sia scheduler's learned step-time model (pal_opt.hetero.perfmodel)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from pal_opt.errors import OptionError
from pal_opt.hetero.goodput import optimize_goodput
from pal_opt.hetero.perfmodel import (
    INITIAL_PARAMS,
    TINY,
    PerfParams,
    ProfileObservations,
    fit_perf_params,
    objective_and_gradient,
)
from pal_opt.hetero.profiles import load_application

M = np.array([1, 1, 1, 2, 2, 3, 1, 1])
N = np.array([1, 2, 4, 8, 4, 12, 8, 1])
B = np.array([32, 64, 32, 128, 64, 32, 200, 90])
TRUE = PerfParams(0.02, 0.001, 0.05, 0.004, 0.01, 0.002, 2.5)


def test_model_formulas() -> None:
    th = PerfParams(0.1, 0.01, 0.2, 0.02, 0.05, 0.01, 1.0)
    # compute 0.1 + 0.01·10 = 0.2; across nodes 0.2 + 0.02·(8 − 2) = 0.32; in a node
    # 0.05 + 0.01·(4 − 2) = 0.07; 2 GPUs: retrogression multiplier max(0, 1e-8).
    assert th.accum_time(10) == pytest.approx(0.2)
    assert th.network_time(2, 8) == pytest.approx(0.32)
    assert th.network_time(1, 4) == pytest.approx(0.07)
    assert th.network_time(1, 2) == pytest.approx(0.05 + 0.01 * TINY)
    assert th.network_time(1, 1) == pytest.approx(TINY + TINY * TINY)
    # γ = 1 adds the parts; a large γ approaches their maximum.
    assert th.step_time(2, 8, 10) == pytest.approx(0.52)
    big = PerfParams(0.1, 0.01, 0.2, 0.02, 0.05, 0.01, 10.0)
    assert big.step_time(2, 8, 10) == pytest.approx(0.32, rel=0.01)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_matches_finite_differences(seed: int) -> None:
    rng = np.random.default_rng(seed)
    acc, step = TRUE(M, N, B)
    theta = np.concatenate([rng.uniform(0.005, 0.2, 6), [rng.uniform(1.0, 4.0)]])
    f = lambda x: objective_and_gradient(x, M, N, B, acc, step)[0]  # noqa: E731
    _, grad = objective_and_gradient(theta, M, N, B, acc, step)
    assert grad == pytest.approx(approx_fprime(theta, f, 1e-8), rel=1e-4, abs=1e-5)


def test_fit_reproduces_its_own_model() -> None:
    acc, step = TRUE(M, N, B)
    th = fit_perf_params(M, N, B, acc, step)
    pred_acc, pred_step = th(M, N, B)
    # Compute time is identified exactly; the network priors (small β/α) cost a little accuracy.
    assert th.alpha_c == pytest.approx(TRUE.alpha_c, rel=1e-3) and th.beta_c == pytest.approx(
        TRUE.beta_c, rel=1e-3
    )
    assert np.max(np.abs(np.log(pred_acc / acc))) < 1e-3
    assert np.max(np.abs(np.log(pred_step / step))) < 0.1
    assert 1.0 <= th.gamma <= 10.0


def test_unidentifiable_parameters_are_pinned() -> None:
    # One GPU, one atomic batch: α_c = mean(compute)/2, network terms at their floor, and the
    # inter-node prior α_n ≥ 1.1·α_r, β_n ≥ 1.1·β_r.
    th = fit_perf_params([1, 1], [1, 1], [32, 32], [0.2, 0.4], [0.21, 0.41])
    assert th.alpha_c == pytest.approx(0.15)
    assert (th.alpha_r, th.beta_r, th.beta_n) == (TINY, TINY, pytest.approx(1.1 * TINY))
    assert th.alpha_n == pytest.approx(1.1 * TINY)
    # Single-node multi-GPU observations only: inter-node inherits 1.1 × intra-node.
    th = fit_perf_params([1, 1, 1], [1, 2, 4], [32, 32, 64], [0.1, 0.1, 0.18], [0.1, 0.13, 0.25])
    assert (
        th.alpha_r > TINY and th.alpha_n >= 1.1 * th.alpha_r - 1e-15 and th.beta_n >= 1.1 * th.beta_r - 1e-15
    )
    with pytest.raises(OptionError):
        fit_perf_params([], [], [], [], [])
    with pytest.raises(OptionError):
        fit_perf_params([1], [1], [8], [0.0], [0.1])


def test_online_observations_refit_on_new_shapes() -> None:
    obs = ProfileObservations()
    assert obs.params is None and obs.max_replicas == 0
    acc, step = TRUE(M, N, B)
    for i in range(4):
        assert obs.add(int(M[i]), int(N[i]), int(B[i]), float(step[i]), float(step[i] - acc[i]))
    assert not obs.add(1, 1, 32, 9.0, 0.0)  # a repeated key keeps the first observation
    assert obs.observations[(1, 1, 32)][0] == pytest.approx(step[0])
    assert obs.max_replicas == 8 and len(obs) == 4
    assert obs.params is not None and obs.params != INITIAL_PARAMS


def test_fitted_model_on_measured_profile(shared_dir: Path) -> None:
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    if not profiles.is_dir():
        pytest.skip(f"Sia artifact profiles not available at {profiles}")
    app = load_application(profiles, "imagenet", gpu_types=["aws"])
    p = app.profile("aws").placements
    th = fit_perf_params(p.num_nodes, p.num_replicas, p.local_bsz, p.step_time - p.sync_time, p.step_time)
    _, pred = th(p.num_nodes, p.num_replicas, p.local_bsz)
    err = np.abs(np.log(pred / p.step_time))
    assert np.median(err) < 0.15 and np.percentile(err, 90) < 0.3
    # The fitted model is a step model: the scheduler's goodput of 1, 2 and 4 T4s rises.
    good, atomic, _ = optimize_goodput(
        th, (1.0, 10.0), app.init_batch_size, 1, np.array([1, 2, 4]), 3200, (20, 200)
    )
    assert np.all(np.diff(good) > 0) and np.all((atomic >= 20) & (atomic <= 200))
