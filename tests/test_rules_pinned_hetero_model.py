"""Rules of pal_opt/hetero/perfmodel.py and goodput.py that no test held (third mutation review), or
only tests on the Sia artifact's profiles in ``../shared`` (sixteenth session: a tiny application by hand)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pal_opt.errors import OptionError
from pal_opt.hetero.goodput import (
    CANDIDATES,
    BatchChoice,
    JobKind,
    ProfileStepModel,
    TrainingTarget,
    choose_batch,
    clamp_batch,
    efficiency,
    epoch_of,
    epoch_progress,
    even_placement,
    grad_stats,
    optimize_goodput,
    progress_rate,
    training_target,
)
from pal_opt.hetero.perfmodel import TINY, PerfParams, ProfileObservations, fit_perf_params
from pal_opt.hetero.profiles import Application, AppSettings, TypeProfile, ValidationCurves


def test_without_an_observation_above_two_gpus_the_retrogression_terms_are_pinned() -> None:
    # One node with 1 and 2 GPUs, two nodes with 2 GPUs: max(n - 2, 1e-8) never exceeds 1e-8, so
    # β_n and β_r are not identifiable and stay at 1e-8 (not the start value 0.01, which would
    # add 0.06 s to an 8-GPU step).
    m = np.array([1, 1, 1, 2])
    n = np.array([1, 1, 2, 2])
    b = np.array([32, 64, 32, 32])
    acc = np.array([0.10, 0.18, 0.10, 0.10])
    step = np.array([0.11, 0.19, 0.14, 0.20])
    th = fit_perf_params(m, n, b, acc, step)
    assert th.beta_n == TINY and th.beta_r == TINY


def test_strong_scaling_jobs_choose_their_gpu_count() -> None:
    assert JobKind.STRONG_SCALING.chooses_count and JobKind.ADAPTIVE.chooses_count
    assert not JobKind.RIGID.chooses_count and not JobKind.GUARANTEED.chooses_count


def test_the_strong_scaling_spelling_is_accepted_as_a_category() -> None:
    assert JobKind.parse("strong-scaling") is JobKind.STRONG_SCALING
    assert JobKind.parse(" Strong-Scaling ") is JobKind.STRONG_SCALING


def test_more_nodes_than_gpus_is_refused() -> None:
    with pytest.raises(OptionError, match="num_nodes"):
        even_placement(3, 2)


def _curves() -> ValidationCurves:
    one = np.array([[1.0], [1.0]])
    return ValidationCurves(np.array([8, 16]), one, one, one,
                            grad_sqr=np.array([[1.0], [3.0]]), grad_var=np.array([[4.0], [8.0]]))


def test_gradient_statistics_outside_the_curves_are_an_option_error() -> None:
    c = _curves()  # one epoch, batches 8..16
    assert grad_stats(c, 12, 0) == (2.0, 6.0)
    with pytest.raises(OptionError, match="epoch 1 outside"):
        grad_stats(c, 12, 1)
    with pytest.raises(OptionError, match="outside the validated range"):
        grad_stats(c, 17, 0)


def test_gradient_statistics_interpolate_towards_the_nearer_validated_batch() -> None:
    # B = 10 between 8 and 16: a quarter of the way, so (3·2 + 1·6) / 8 = 1.5 and (8·2 + 4·6) / 8 = 5.
    # (At the midpoint 12 both weightings give the same answer.)
    assert grad_stats(_curves(), 10, 0) == (1.5, 5.0)


def test_progress_at_an_epoch_end_counts_the_epoch_done() -> None:
    progress = np.array([[100.0, 200.0], [120.0, 260.0]])
    c = ValidationCurves(np.array([8, 16]), progress, progress, progress, grad_sqr=progress, grad_var=progress)
    assert epoch_of(c, 99.0) == 0
    assert epoch_of(c, 100.0) == 1
    assert epoch_of(c, 200.0) == 2


def test_batch_candidates_start_at_the_smallest_batch_every_gpu_can_hold() -> None:
    # 8 GPUs of atomic batch >= 48: the 50 candidates run from max(B0, 48·8) = 384 to 4096, so the
    # best of them is the best of those 50 batches scored one by one (an interior best:
    # a grid from B0 = 32 misses it).
    th = PerfParams(0.05, 0.002, 0.1, 0.01, 0.05, 0.005, 1.5)
    grad = (1.0, 500.0)
    kw = {"num_nodes": 2, "num_replicas": 8, "atomic_range": (48, 512)}
    best, _, _ = optimize_goodput(th, grad, 32, max_batch_size=4096, **kw)  # type: ignore[arg-type]
    one_by_one = [float(optimize_goodput(th, grad, 32, max_batch_size=float(b), tune_batch=False, **kw)[0])  # type: ignore[arg-type]
                  for b in np.geomspace(384.0, 4096.0, CANDIDATES)]
    assert float(best) == pytest.approx(max(one_by_one), rel=1e-12)


def test_one_gpu_at_the_initial_batch_needs_no_accumulation() -> None:
    th = PerfParams(0.05, 0.002, 0.1, 0.01, 0.05, 0.005, 1.5)
    _, atomic, accum = optimize_goodput(th, (1.0, 10.0), 32, 1, 1, 32, (16, 64), tune_batch=False)
    assert (int(atomic), int(accum)) == (32, 0)
    _, atomic, accum = optimize_goodput(th, (1.0, 10.0), 32, 1, 1, 48, (16, 64), tune_batch=False)
    assert (int(atomic), int(accum)) == (24, 1)  # above B0 on one GPU: two micro-batches


def test_an_accumulation_micro_step_costs_the_compute_time_not_a_whole_step() -> None:
    # 2 GPUs on one node, global batch 256, atomic range up to 64: A = 1 accumulation step at b = 64;
    # one optimiser step takes T_step + A·T_acc (the micro-step skips the gradient exchange).
    th = PerfParams(0.05, 0.002, 0.1, 0.01, 0.3, 0.005, 1.0)
    grad = (1.0, 10.0)
    g, atomic, accum = optimize_goodput(th, grad, 32, 1, 2, 256, (16, 64), tune_batch=False)
    assert (int(atomic), int(accum)) == (64, 1)
    acc = float(th.accum_time(64))
    step = float(th.step_time(1, 2, 64))
    assert step > acc  # the case tells the two apart
    want = 256 / (acc + step) * efficiency(256, 32, *grad)
    assert float(g) == pytest.approx(want, rel=1e-12)


def test_a_batch_outside_the_atomic_range_scores_zero() -> None:
    th = PerfParams(0.05, 0.002, 0.1, 0.01, 0.3, 0.005, 1.0)
    grad = (1.0, 10.0)
    # a requested batch of 16 on one GPU is below the smallest atomic batch, 32
    g, atomic, _ = optimize_goodput(th, grad, 16, 1, 1, 16, (32, 64), tune_batch=False)
    assert int(atomic) == 16 and float(g) == 0.0
    # without accumulation, 256 on one GPU is above the largest, 64
    g, atomic, _ = optimize_goodput(th, grad, 16, 1, 1, 256, (32, 64), tune_batch=False, accumulation=False)
    assert int(atomic) == 256 and float(g) == 0.0


# Observations on one node of 1 and 2 GPUs at atomic batches 32 and 64: compute 0.02 + 0.0025·b
# (0.10 and 0.18 s), and 2 GPUs add about 0.05 s of synchronisation.
_ONE_NODE = (np.array([1, 1, 1, 1]), np.array([1, 1, 2, 2]), np.array([32, 64, 32, 64]))
_ONE_NODE_STEP = np.array([0.10, 0.18, 0.15, 0.23])
_ONE_NODE_SYNC = np.array([0.0, 0.0, 0.05, 0.05])


def test_two_gpus_on_one_node_identify_the_intra_node_network_time() -> None:
    # Nothing above 2 GPUs pins β_r, but α_r is free: the fit explains the 2-GPU steps' extra
    # time with it (pinned at 1e-8, every predicted 2-GPU step would be its compute time).
    th = fit_perf_params(*_ONE_NODE, _ONE_NODE_STEP - _ONE_NODE_SYNC, _ONE_NODE_STEP)
    assert th.alpha_r > 0.01 and th.beta_r == TINY
    _, step = th(*_ONE_NODE)
    assert step[2:] == pytest.approx(_ONE_NODE_STEP[2:], rel=0.05)


def test_online_observations_fit_the_compute_time_as_step_minus_sync() -> None:
    obs = ProfileObservations()
    for m, n, b, step, sync in zip(*_ONE_NODE, _ONE_NODE_STEP, _ONE_NODE_SYNC, strict=True):
        obs.add(int(m), int(n), int(b), float(step), float(sync))
    assert obs.params is not None
    # 0.10 s at 32 and 0.18 s at 64 (the step times less sync), not the 2-GPU steps' 0.15 and 0.23
    assert obs.params.accum_time(np.array([32, 64])) == pytest.approx([0.10, 0.18], rel=1e-3)


def _tiny_app() -> Application:
    """Batches 32 and 128 validated over two epochs (P(1) = min(100, 80) = 80, P(2) = min(200,
    190) = 190; μ² = 1, σ² = 15 throughout), profiled on type ``t`` at atomic batches 16 and 64 on
    one GPU and on one node of two, with a slowdown of 2 (κ = 0.5)."""
    progress = np.array([[100.0, 200.0], [80.0, 190.0]])
    ones = np.ones((2, 2))
    curves = ValidationCurves(np.array([32, 128]), progress, ones, ones, grad_sqr=ones, grad_var=15 * ones)
    placements = pd.DataFrame({"placement": ["1", "1", "2", "2"], "local_bsz": [16, 64, 16, 64],
                               "step_time": [0.5, 1.1, 0.6, 1.2], "sync_time": [0.0, 0.0, 0.2, 0.2]})
    scalability = pd.DataFrame({"num_nodes": [2, 2], "num_replicas": [2, 2], "local_bsz": [16, 64],
                                "step_time": [0.9, 1.5], "sync_time": [0.4, 0.4]})
    profile = TypeProfile.from_frames("tiny", "t", placements, scalability)
    return Application("tiny", curves, {"t": profile}, AppSettings(max_epochs=2, slowdown=2.0))


def test_an_epoch_ends_at_the_least_progress_over_the_validated_batches() -> None:
    app = _tiny_app()
    assert (epoch_progress(app.validation, 1), epoch_progress(app.validation, 2)) == (80.0, 190.0)
    assert training_target(app) == TrainingTarget(epochs=2, progress=190.0)


def test_the_progress_rate_by_hand() -> None:
    # 2 GPUs on one node, atomic batch 32 with one accumulation step: global batch 2·32·2 = 128,
    # s = 128/32 = 4, gain (15 + 1)/(15/4 + 1) = 16/4.75.  Placement '2' at batch 32 (a third of
    # the way from 16 to 64): step 0.8 s, sync 0.2 s, so one optimiser step takes 0.8 + 1·0.6 s.
    app = _tiny_app()
    assert BatchChoice(32, 1).global_batch(2) == 128
    rate = progress_rate(app, "t", (2,), BatchChoice(32, 1), 0)
    assert rate == pytest.approx(0.5 * (16 / 4.75) / (0.8 + 0.6), rel=1e-12)


def test_the_measured_step_model_gives_compute_time_as_step_minus_sync() -> None:
    accum, step = ProfileStepModel(_tiny_app().profile("t"))(np.array([1, 1]), np.array([2, 1]), np.array([32, 32]))
    assert accum.tolist() == pytest.approx([0.6, 0.7]) and step.tolist() == pytest.approx([0.8, 0.7])


def test_the_memory_clamps_by_hand() -> None:
    app, profile = _tiny_app(), _tiny_app().profile("t")
    # on 2 GPUs with one accumulation step: b <= Bmax / (2·2) = 32 (the 2-GPU rows allow 64)
    assert clamp_batch(app, profile, 2, BatchChoice(64, 1)) == BatchChoice(32, 1)
    # a batch below both limits is kept (the profile's limit caps it, it does not raise it)
    assert clamp_batch(app, profile, 2, BatchChoice(16, 1)) == BatchChoice(16, 1)
    # on 1 GPU: the 1-GPU rows' 64, below Bmax / 1 = 128
    assert clamp_batch(app, profile, 1, BatchChoice(100, 0)) == BatchChoice(64, 0)


def test_an_adaptive_job_scores_its_placement_as_its_nodes_and_gpus() -> None:
    # One node of 2 GPUs, a step time of 0.2 s at any batch and almost pure noise (efficiency ~1):
    # the best batch is the largest, Bmax = 128 = 2 GPUs x 64, with no accumulation.
    th = PerfParams(0.1, 0.0, 0.1, 0.0, 0.1, 0.0, 1.0)
    choice = choose_batch(_tiny_app(), "t", (2,), step_model=th, grad=(1.0, 1e6))
    assert choice == BatchChoice(64, 0)
