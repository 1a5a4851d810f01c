"""The heterogeneous-GPU performance model (pal_opt.hetero): profiles, goodput, workloads.

Tests on the Sia artifact's files skip when ``../shared`` is absent; the bad-input tests build
their own small files and always run.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pal_opt.errors import InstanceError, OptionError
from pal_opt.hetero.goodput import (
    BatchChoice,
    JobKind,
    ProfileStepModel,
    choose_batch,
    efficiency,
    epoch_of,
    epoch_progress,
    gain,
    grad_stats,
    initial_batch,
    optimize_goodput,
    progress_rate,
    training_target,
)
from pal_opt.hetero.profiles import (
    APP_SETTINGS,
    Application,
    canonical_placement,
    load_application,
    load_applications,
)
from pal_opt.hetero.workload import check_workload, read_philly, read_workload, workload_from_frame

#: Every (application, GPU type) the artifact profiles.
APP_TYPES = [
    (app, t)
    for app in ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
    for t in ("aws", "dgx-ext", "rtx")
] + [("gpt_pmp", "dgx-ext"), ("gpt_pmp", "rtx")]
DATA_PARALLEL = sorted({a for a, _ in APP_TYPES} - {"gpt_pmp"})
GPUS_PER_NODE = {"aws": 4, "dgx-ext": 8, "rtx": 8}


@pytest.fixture(scope="module")
def sia_dir(shared_dir: Path) -> Path:
    d = shared_dir / "data" / "sia-artifact"
    if not d.is_dir():
        pytest.skip(f"Sia artifact data not available at {d}")
    return d


@pytest.fixture(scope="module")
def apps(sia_dir: Path) -> dict[str, Application]:
    return dict(load_applications(sia_dir / "profiles"))


# -- loading -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("app", "gpu_type"), APP_TYPES)
def test_every_profile_loads(apps: dict[str, Application], app: str, gpu_type: str) -> None:
    a = apps[app]
    prof = a.profile(gpu_type)
    assert len(prof.placements) > 0 and len(prof.scalability) > 0
    assert 1 <= prof.min_local_bsz <= prof.max_local_bsz
    assert a.init_batch_size < a.max_batch_size
    assert a.max_epochs == APP_SETTINGS[app].max_epochs == a.validation.epochs
    # every placement id is canonical and its digits add up to its GPU count
    assert prof.placements.placement is not None
    for pid, n in zip(prof.placements.placement[:50], prof.placements.num_replicas[:50], strict=True):
        assert "".join(map(str, canonical_placement(int(d) for d in pid))) == pid
        assert sum(map(int, pid)) == n


def test_applications_and_types(apps: dict[str, Application]) -> None:
    assert sorted(apps) == sorted({a for a, _ in APP_TYPES})
    assert apps["cifar10"].gpu_types == ("aws", "dgx-ext", "rtx")
    assert apps["gpt_pmp"].gpu_types == ("dgx-ext", "rtx")
    assert apps["deepspeech2"].profile("rtx").max_local_bsz == 57  # the artifact's override
    assert apps["deepspeech2"].profile("aws").max_local_bsz == 80
    with pytest.raises(OptionError, match="no profile for GPU type 'aws'"):
        apps["gpt_pmp"].profile("aws")


# -- hand-checked values ---------------------------------------------------------------------------
def test_spot_check_placement_interpolation(apps: dict[str, Application]) -> None:
    # bert/placements-aws.csv rows "1,4,0.45532354712486267,0.013738612174987792" and
    # "1,6,0.5693899691104889,0.013729131996631623": local_bsz 5 is halfway,
    # step = (0.45532354712486267 + 0.5693899691104889) / 2 = 0.5123567581176758,
    # sync = (0.013738612174987792 + 0.013729131996631623) / 2 = 0.013733872085809708.
    step, sync = apps["bert"].profile("aws").step_time((1,), 5)
    assert step == pytest.approx(0.5123567581176758, rel=1e-12)
    assert sync == pytest.approx(0.013733872085809708, rel=1e-12)
    # cifar10/placements-rtx.csv, placement 2: local_bsz 64 -> 0.0699358582496643 and
    # 91 -> 0.07109667360782623; at 80 (16/27 of the way):
    # 0.0699358582496643 + (80 - 64) / (91 - 64) * (0.07109667360782623 - 0.0699358582496643)
    #   = 0.0699358582496643 + 0.5925925925925926 * 0.0011608153581619263 = 0.07062374883227879.
    step, _ = apps["cifar10"].profile("rtx").step_time((2,), 80)
    assert step == pytest.approx(0.07062374883227879, rel=1e-12)
    # A row itself is reproduced exactly; rotations and empty nodes do not matter.
    assert apps["cifar10"].profile("rtx").step_time((0, 2), 64)[0] == pytest.approx(
        0.0699358582496643, rel=1e-15
    )


def test_spot_check_unprofiled_shape_uses_scalability_rows(apps: dict[str, Application]) -> None:
    # (1,1,1,1,1,1) on aws has no placement row (at most 4 nodes are profiled), so the 3-D
    # interpolation answers; (6 nodes, 6 GPUs, local_bsz 4) is a row of bert/scalability-aws.csv:
    # "6,6,4,1.4923269003629684,1.0928203125", a vertex of the triangulation.
    prof = apps["bert"].profile("aws")
    assert not prof.is_profiled((1,) * 6)
    step, sync = prof.step_time((1,) * 6, 4)
    assert step == pytest.approx(1.4923269003629684, rel=1e-9)
    assert sync == pytest.approx(1.0928203125, rel=1e-9)
    # The same query vectorised, and the sentinel the artifact returns outside a placement's range.
    steps, _ = prof.step_time((1,) * 6, np.array([4, 4]))
    assert steps.shape == (2,)
    assert prof.step_time((4,), 2, artifact_sentinel=True) == (-1.0, -1.0)
    assert math.isnan(prof.step_time((4,), 2)[0])


def test_spot_check_gradient_statistics_and_gain(apps: dict[str, Application]) -> None:
    cur = apps["cifar10"].validation
    # validation-2048.csv row 1: grad_sqr 10.73321269096998, grad_var 5.4859538034431825;
    # validation-4096.csv row 1: grad_sqr 14.297054109491588, grad_var 11.815138409160218.
    # B = 3072 is halfway: sqr = 12.515133400230784, var = 8.6505461063017.
    sqr, var = grad_stats(cur, 3072, 0)
    assert sqr == pytest.approx(12.515133400230784, rel=1e-12)
    assert var == pytest.approx(8.6505461063017, rel=1e-12)
    assert grad_stats(cur, 2048, 0) == (10.73321269096998, 5.4859538034431825)
    # gain at B = 2048 = 16 × B0 (B0 = 128), epoch 0:
    # (5.4859538034431825 + 10.73321269096998) / (5.4859538034431825 / 16 + 10.73321269096998)
    #   = 16.219166494413162 / 11.076084803685179 = 1.4643411261185726
    assert gain(2048, 128, 10.73321269096998, 5.4859538034431825) == pytest.approx(
        1.4643411261185726, rel=1e-12
    )
    # P(1) = the smallest first-row progress over the six curves (validation-256.csv: 390.71438596642224).
    assert epoch_progress(cur, 1) == 390.71438596642224
    assert epoch_progress(cur, 0) == 0.0
    assert epoch_of(cur, 0.0) == 0 and epoch_of(cur, 391.0) == 1


def test_spot_check_progress_rate(apps: dict[str, Application]) -> None:
    # cifar10 on one 4-GPU aws node at atomic batch 32, no accumulation: B = 128 = B0, so gain = 1;
    # placements-aws.csv row "4,32,0.05821514129638672,0.01432212142944336" gives the step time, and
    # the calibration is 1/1.8: rate = 1 / 1.8 / 0.05821514129638672 = 9.543145360192... B0-steps/s.
    rate = progress_rate(apps["cifar10"], "aws", (4,), BatchChoice(32, 0), 0)
    assert rate == pytest.approx(1 / 1.8 / 0.05821514129638672, rel=1e-12)
    # One accumulation step adds one compute part (step - sync) and doubles the batch.
    step, sync = 0.05821514129638672, 0.01432212142944336
    s_sqr, s_var = grad_stats(apps["cifar10"].validation, 256, 3)
    expect = gain(256, 128, s_sqr, s_var) / 1.8 / (step + (step - sync))
    assert progress_rate(apps["cifar10"], "aws", (4,), BatchChoice(32, 1), 3) == pytest.approx(
        expect, rel=1e-12
    )


# -- sanity properties -----------------------------------------------------------------------------
@pytest.mark.parametrize(("app", "gpu_type"), [(a, t) for a, t in APP_TYPES if a != "gpt_pmp"])
def test_throughput_grows_with_gpus_on_one_node(
    apps: dict[str, Application], app: str, gpu_type: str
) -> None:
    prof = apps[app].profile(gpu_type)
    b = prof.min_local_bsz
    shapes = [(k,) for k in (1, 2, 4, 8) if k <= GPUS_PER_NODE[gpu_type]]
    xput = [sum(s) * b / prof.step_time(s, b)[0] for s in shapes]
    assert all(np.diff(xput) > 0), xput


@pytest.mark.parametrize("app", DATA_PARALLEL)
def test_efficiency_in_unit_interval_and_gain_bounded(apps: dict[str, Application], app: str) -> None:
    a = apps[app]
    batches = np.geomspace(a.init_batch_size, a.max_batch_size, 25)
    for e in range(a.max_epochs):
        sqr, var = grad_stats(a.validation, batches, e)
        eff = efficiency(batches, a.init_batch_size, sqr, var)
        assert np.all((eff > 0) & (eff <= 1 + 1e-12))
        g = gain(batches, a.init_batch_size, sqr, var)
        assert np.all((g >= 1 - 1e-12) & (g <= batches / a.init_batch_size * (1 + 1e-12)))


@pytest.mark.parametrize("app", DATA_PARALLEL)
def test_gain_rises_and_efficiency_falls_with_batch_at_fixed_statistics(
    apps: dict[str, Application], app: str
) -> None:
    # The scheduler's model scores every batch with the job's current (μ², σ²) (SIA_MODEL.md A.7):
    # then gain is non-decreasing and efficiency non-increasing in B.
    a = apps[app]
    batches = np.geomspace(a.init_batch_size, a.max_batch_size, 40)
    for e in (0, a.max_epochs - 1):
        sqr, var = grad_stats(a.validation, a.init_batch_size, e)
        assert np.all(np.diff(gain(batches, a.init_batch_size, sqr, var)) >= 0)
        assert np.all(np.diff(efficiency(batches, a.init_batch_size, sqr, var)) <= 0)


@pytest.mark.parametrize(("app", "gpu_type"), [(a, t) for a, t in APP_TYPES if a != "gpt_pmp"])
def test_tuned_batch_never_worse_than_the_requested_batch(
    apps: dict[str, Application], app: str, gpu_type: str
) -> None:
    # The tuned candidates end at the requested batch, so the best of them is at least its goodput.
    a = apps[app]
    prof = a.profile(gpu_type)
    model = ProfileStepModel(prof)
    stats = grad_stats(a.validation, a.max_batch_size, 0)
    nodes, gpus = np.array([1, 1, 1]), np.array([1, 2, 4])
    rng = (prof.min_local_bsz, prof.max_local_bsz)
    tuned, atomic, accum = optimize_goodput(
        model, stats, a.init_batch_size, nodes, gpus, a.max_batch_size, rng
    )
    fixed, _, _ = optimize_goodput(
        model, stats, a.init_batch_size, nodes, gpus, a.max_batch_size, rng, tune_batch=False
    )
    assert np.all(tuned >= fixed) and np.all(tuned > 0)
    assert np.all((atomic >= rng[0]) & (atomic <= rng[1]) & (accum >= 0))
    assert np.all(gpus * atomic * (accum + 1) >= a.init_batch_size)


def test_batch_choice_rules(apps: dict[str, Application]) -> None:
    a = apps["cifar10"]
    # No model yet: B = max(B0, b_min·n) = max(128, 32·4) = 128 -> 32 per GPU, no accumulation.
    assert choose_batch(a, "aws", (4,)) == BatchChoice(32, 0)
    # One GPU at a batch above B0 always accumulates at least once: B = 2048 on one T4
    # (b_hi = 1024): local 2048, A = ceil(2048/1024) - 1 = 1, b = 1024.
    assert initial_batch(a, a.profile("aws"), (1,), 2048) == BatchChoice(1024, 1)
    # Strong-scaling keeps the requested batch: 2048 over 8 GPUs (2 nodes) = 256 per GPU.
    c = choose_batch(a, "aws", (4, 4), JobKind.STRONG_SCALING, requested_batch=2048)
    assert c == BatchChoice(256, 0) and c.global_batch(8) == 2048
    with pytest.raises(OptionError, match="requested batch"):
        choose_batch(a, "aws", (4,), JobKind.RIGID)
    # 17 nodes exceed every profiled shape: no batch limit b_hi, a clear error (the artifact gets NaN).
    with pytest.raises(OptionError, match="no profiled batch limit"):
        choose_batch(a, "aws", (1,) * 17)
    # With a model the adaptive job picks a larger batch than B0 later in training.
    model = ProfileStepModel(a.profile("dgx-ext"))
    late = choose_batch(a, "dgx-ext", (8,), step_model=model, grad=grad_stats(a.validation, 4096, 60))
    assert late.global_batch(8) > a.init_batch_size


def test_training_targets(apps: dict[str, Application]) -> None:
    for name, a in apps.items():
        t = training_target(a)
        assert t.epochs == APP_SETTINGS[name].max_epochs
        assert t.progress == pytest.approx(a.validation.progress[:, -1].min())


# -- workloads -----------------------------------------------------------------------------------
NEWTRACE = {
    1: (487.661836, 172603.693348),
    2: (775.661874, 172233.693335),
    3: (320.661812, 172732.693361),
    4: (697.66186, 172605.693351),
    5: (328.661816, 172753.693363),
    6: (32.661786, 172482.693343),
    7: (163.661794, 171693.693315),
}


@pytest.mark.parametrize("n", sorted(NEWTRACE))
def test_newtrace_workloads(sia_dir: Path, apps: dict[str, Application], n: int,
                            caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="pal_opt"):
        w = read_workload(sia_dir / "workloads" / f"newtrace-{n}.csv", applications=apps)
    assert caplog.records == []  # no column taken for a misspelling
    check_workload(w, apps)
    assert len(w) == 960
    first, last = NEWTRACE[n]
    assert w[0].submit_time == first and w[-1].submit_time == last
    assert w.applications() == ("bert", "cifar10", "deepspeech2", "imagenet", "yolov3")
    assert all(j.kind is JobKind.ADAPTIVE for j in w)
    assert {j.num_replicas for j in w} <= {4, 6, 8, 10, 12, 14, 16}
    assert w[0].row == 2 and w[-1].row == 961


def test_newtrace_7_application_mix(sia_dir: Path) -> None:
    # The counts the authors' reference run reports (reference/sia/newtrace-7-sia.json).
    w = read_workload(sia_dir / "workloads" / "newtrace-7.csv")
    counts = w.frame().application.value_counts().to_dict()
    assert counts == {"cifar10": 508, "deepspeech2": 203, "bert": 198, "yolov3": 40, "imagenet": 11}


def test_philly_trace(sia_dir: Path) -> None:
    p = read_philly(sia_dir / "philly.csv")
    assert len(p) == 82_247
    assert str(p.timestamp[0]) == "2017-10-09T07:01:55" and p.duration[0] == 66.0
    assert str(p.timestamp[-1]) == "2017-11-08T07:33:10" and p.cluster[-1] == "6c71a0"
    assert p.num_gpus.max() == 128 and p.num_gpus.min() == 1
    assert p.submit_seconds().min() == 0.0


# -- bad input -----------------------------------------------------------------------------------
def _write_app(root: Path, *, placements: str | None = None, validation: str | None = None) -> Path:
    d = root / "toy"
    d.mkdir(parents=True, exist_ok=True)
    (d / "placements-t4.csv").write_text(
        placements
        or "placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n1,8,2.0,0.0\n2,4,1.5,0.5\n2,8,2.5,0.5\n"
    )
    (d / "scalability-t4.csv").write_text(
        "num_nodes,num_replicas,local_bsz,step_time,sync_time\n2,2,4,3.0,2.0\n2,2,8,4.0,2.0\n"
    )
    body = validation or "progress,iteration,metric,grad_sqr,grad_var\n10,10,0.5,1.0,2.0\n20,20,0.6,0.5,2.0\n"
    (d / "validation-8.csv").write_text(body)
    (d / "validation-16.csv").write_text(body)
    return root


def test_toy_application_loads(tmp_path: Path) -> None:
    a = load_application(_write_app(tmp_path), "toy")
    assert a.gpu_types == ("t4",) and a.init_batch_size == 8 and a.max_batch_size == 16
    assert a.max_epochs == 2  # not in APP_SETTINGS: the number of validation rows
    assert a.profile("t4").step_time((2,), 6) == (2.0, 0.5)


@pytest.mark.parametrize(
    ("placements", "where"),
    [
        (
            "placement,local_bsz,step_time\n1,4,1.0\n",
            "placements-t4.csv: header: missing column(s) sync_time",
        ),
        ("placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n1,8,abc,0.0\n", "row 3, column step_time"),
        ("placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n1,-8,2.0,0.0\n", "row 3, column local_bsz"),
        ("placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n21,8,2.0,0.0\n", "row 3, column placement"),
        ("placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n1,4,2.0,0.0\n", "row 3, column local_bsz"),
        ("placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n1,8,nan,0.0\n", "row 3, column step_time"),
        ("placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n1,8,2.0,0.0,9\n",
         "line 3: has 5 fields but the header has 4"),
        # a file cut in the middle of a row: pandas padded it, "must be a positive number, got an empty cell"
        ("placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n1,8\n", "line 3: has 2 fields but the header has 4"),
        ("placement,local_bsz,step_time,sync_time\n1,4,1.0,\"0.0\n", "line 2: malformed CSV: unexpected end of data"),
    ],
)
def test_bad_profile_names_file_and_field(tmp_path: Path, placements: str, where: str) -> None:
    with pytest.raises(InstanceError) as err:
        load_application(_write_app(tmp_path, placements=placements), "toy")
    assert "placements-t4.csv" in str(err.value) and where in str(err.value)


def test_bad_validation_names_file_and_field(tmp_path: Path) -> None:
    bad = "progress,iteration,metric,grad_sqr,grad_var\n10,10,0.5,1.0,-2.0\n"
    with pytest.raises(
        InstanceError, match=r"validation-(8|16)\.csv: row 2, column grad_var: must be a finite number ≥ 0"
    ):
        load_application(_write_app(tmp_path, validation=bad), "toy")
    with pytest.raises(InstanceError, match=r"no profiles for application 'nope' \(this folder has toy\)"):
        load_application(tmp_path, "nope")
    # a folder that is not there at all is named as such, not as its first application (docs review)
    with pytest.raises(InstanceError, match="missing: profiles folder not found"):
        load_application(tmp_path / "missing", "bert")


@pytest.mark.parametrize(
    ("validation", "where"),
    [  # a progress of 0 made every job of the application "finish" without training
        ("progress,iteration,metric,grad_sqr,grad_var\n0,10,0.5,1.0,2.0\n", "row 2, column progress: must be a positive"),
        # 1e308 passed as finite and overflowed the efficiency into a NaN progress rate (a traceback)
        ("progress,iteration,metric,grad_sqr,grad_var\n10,10,0.5,1.0,1e308\n", "column grad_var: must be a finite "
                                                                              "number ≥ 0 and ≤ 1e+200"),
    ],
)
def test_validation_values_that_make_no_training_are_refused(tmp_path: Path, validation: str, where: str) -> None:
    with pytest.raises(InstanceError, match=r"validation-(8|16)\.csv: ") as err:
        load_application(_write_app(tmp_path, validation=validation), "toy")
    assert where in str(err.value)


def test_validation_file_names_are_one_ascii_batch_each(tmp_path: Path) -> None:
    """A batch size is named once, in ASCII digits, within the integers a float holds exactly."""
    root = _write_app(tmp_path)
    body = (root / "toy" / "validation-8.csv").read_text()
    (root / "toy" / "validation-008.csv").write_text(body)  # one of the two was dropped silently
    with pytest.raises(InstanceError, match="batch size 8 has two validation files, validation-008.csv and "
                                            "validation-8.csv"):
        load_application(root, "toy")
    (root / "toy" / "validation-008.csv").unlink()
    (root / "toy" / "validation-99999999999999999999.csv").write_text(body)  # an OverflowError traceback
    with pytest.raises(InstanceError, match="validation-99999999999999999999.csv: validated batch size must be "
                                            "between 1 and 9,007,199,254,740,992"):
        load_application(root, "toy")
    (root / "toy" / "validation-99999999999999999999.csv").unlink()
    (root / "toy" / "validation-\u0661\u0662.csv").write_text(body)  # Arabic-Indic 12: not a validation file
    assert load_application(root, "toy").validation.batch_sizes.tolist() == [8, 16]


def test_a_sync_time_not_below_the_step_time_is_named_where_it_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The step-time model is fitted to the compute part, step_time - sync_time: a profile whose
    sync_time reaches its step_time stopped the run with "observed compute and step times must be
    finite and positive", naming no file, application or shape."""
    from pal_opt import cli

    root = _write_app(tmp_path / "p", placements="placement,local_bsz,step_time,sync_time\n1,4,1.0,2.0\n"
                                                 "1,8,2.0,3.0\n2,4,1.5,0.5\n2,8,2.5,0.5\n")
    trace, out = tmp_path / "t.csv", tmp_path / "o.json"
    trace.write_text("name,time,application,num_replicas,batch_size\ntoy-0,0,toy,1,8\n")
    assert cli.main(["simulate-sia", str(trace), "--profiles", str(root), "--cluster", "t4:1x2", "-o", str(out),
                     "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{root / 'toy'}: toy-0: toy on t4, placement (1,) at atomic batch 8: sync_time 3 is not below " \
           "step_time 2" in err and not out.exists()


def test_an_atomic_batch_limit_far_above_the_batch_makes_no_negative_accumulation(tmp_path: Path) -> None:
    """A 1-GPU row at local_bsz 2^40: ceil(local / limit - EPS) - 1 was -1 accumulation steps, a
    division by zero and invalid integer casts (numpy warnings, garbage batch choices)."""
    import warnings

    from pal_opt import cli

    root = _write_app(tmp_path / "p", placements="placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n"
                                                 "1,8,2.0,0.0\n2,4,1.5,0.5\n2,8,2.5,0.5\n1,1099511627776,1.0,0.01\n")
    trace, out = tmp_path / "t.csv", tmp_path / "o.json"
    trace.write_text("name,time,application,num_replicas,batch_size\ntoy-0,0,toy,1,8\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert cli.main(["simulate-sia", str(trace), "--profiles", str(root), "--cluster", "t4:1x2", "-o", str(out),
                         "--quiet"]) == 0


def test_generate_names_the_profile_without_one_gpu_rows(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The message named "profiles/bert" whatever the folder, and said bert was profiled on the
    very type it lacked 1-GPU rows for."""
    import shutil

    from pal_opt import cli

    src = shared_dir / "data" / "sia-artifact" / "profiles"
    if not src.is_dir():
        pytest.skip(f"Sia artifact profiles not available at {src}")
    root = tmp_path / "mine"
    for app in ("bert", "cifar10", "imagenet", "ncf"):
        shutil.copytree(src / app, root / app)
    rows = (root / "bert" / "placements-aws.csv").read_text().splitlines()
    header = rows[0].split(",")
    kept = [r for r in rows[1:] if r.split(",")[header.index("placement")] != "1"]
    (root / "bert" / "placements-aws.csv").write_text("\n".join([rows[0], *kept]) + "\n")
    out = tmp_path / "g.json"
    rc = cli.main(["generate", "--cluster", "aws:1x4,rtx:1x8", "--profiles", str(root), "--jobs", "2", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists(), err
    assert f"{root / 'bert'}: no 1-GPU rows (placement 1) for GPU type 'aws' " \
           "(placements-aws.csv); bert has 1-GPU rows on: " in err and "aws" not in err.rsplit("rows on: ", 1)[1]


WORKLOAD_OK = (
    "name,time,application,num_replicas,batch_size\ncifar10-0,1.5,cifar10,4,2048\nbert-1,9.0,bert,8,384\n"
)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "name,time,application,num_replicas\ncifar10-0,1.5,cifar10,4\n",
            "header: missing column(s) batch_size",
        ),
        (
            WORKLOAD_OK.replace(",8,384", ",0,384"),
            "row 3, column num_replicas: must be a positive integer, got '0'",
        ),
        (WORKLOAD_OK.replace(",1.5,", ",-1,"), "row 2, column time"),
        (WORKLOAD_OK.replace("bert-1", "cifar10-0"), "row 3, column name: duplicate job name 'cifar10-0'"),
        (WORKLOAD_OK.replace(",384", ",3.5"), "row 3, column batch_size"),
        (WORKLOAD_OK.replace(",bert,", ",,"), "row 3, column application: must not be empty"),
        # cut in the middle of a row: its missing cells were read as empty ("application: must not be empty")
        (WORKLOAD_OK.rstrip("\n").rsplit(",", 3)[0] + "\n", "line 3: has 2 fields but the header has 5"),
        # rows are named by their file lines, blank lines counted
        (WORKLOAD_OK.replace("\n", "\n\n", 1).replace(",384", ",3.5"), "row 4, column batch_size"),
        (WORKLOAD_OK.replace("\n", "\n\n").replace("bert-1", "cifar10-0"),
         "row 5, column name: duplicate job name 'cifar10-0' (first on row 3)"),
        ("name,time\n", "has a header but no rows"),
        ("", "is empty"),
    ],
)
def test_bad_workload_names_file_and_field(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "w.csv"
    path.write_text(text)
    with pytest.raises(InstanceError) as err:
        read_workload(path)
    assert str(err.value).startswith(str(path)) and where in str(err.value)


def test_workload_column_names_are_case_insensitive(tmp_path: Path) -> None:
    """``Name,Time,Application,...`` is newTrace's header (it was "missing column(s) name, ...")."""
    path = tmp_path / "w.csv"
    header, rest = WORKLOAD_OK.split("\n", 1)
    path.write_text(header.title().replace(",", " , ") + ",Category\n" + rest.replace("\n", ",rigid\n"))
    w = read_workload(path)
    assert [(j.name, j.submit_time, j.num_replicas, j.kind) for j in w] == [
        (j.name, j.submit_time, j.num_replicas, JobKind.RIGID) for j in read_workload_text(tmp_path, WORKLOAD_OK)]
    path.write_text("Name,time,NAME,application,num_replicas,batch_size\nx,0,y,bert,2,96\n")
    with pytest.raises(InstanceError, match="header: column 'Name' appears twice \\('Name' and 'NAME'; column names "
                                            "are case-insensitive\\)"):
        read_workload(path)
    frame = pd.read_csv(io.StringIO(WORKLOAD_OK)).rename(columns=str.upper)
    assert len(workload_from_frame(frame)) == 2


def test_a_misspelt_category_column_is_warned_of(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``categry`` was ignored without a word: every job became adaptive."""
    path = tmp_path / "w.csv"
    header, rest = WORKLOAD_OK.split("\n", 1)
    path.write_text(header + ",categry,note\n" + rest.replace("\n", ",rigid,x\n"))
    with caplog.at_level("WARNING", logger="pal_opt"):
        assert {j.kind for j in read_workload(path)} == {JobKind.ADAPTIVE}
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: column 'categry' is not used; did you mean 'category'?"]


def read_workload_text(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "plain.csv"
    path.write_text(text)
    return read_workload(path)


def test_workload_categories_and_known_applications(tmp_path: Path) -> None:
    df = pd.read_csv(io.StringIO(WORKLOAD_OK))
    df["category"] = ["scale-gpus", ""]
    w = workload_from_frame(df)
    assert [j.kind for j in w] == [JobKind.STRONG_SCALING, JobKind.ADAPTIVE]
    df["category"] = ["scale-gpus", "elastic"]
    with pytest.raises(InstanceError, match="row 3, column category: unknown job category 'elastic'"):
        workload_from_frame(df, source="mem.csv")
    with pytest.raises(InstanceError, match="row 3, column application: unknown application 'bert'"):
        workload_from_frame(df.drop(columns="category"), applications={"cifar10"})


def test_workload_batch_outside_validated_range(tmp_path: Path) -> None:
    a = load_application(_write_app(tmp_path), "toy")
    w = workload_from_frame(
        pd.DataFrame(
            {"name": ["j"], "time": [0], "application": ["toy"], "num_replicas": [1], "batch_size": [64]}
        ),
        source="w.csv",
    )
    with pytest.raises(
        InstanceError,
        match=r"w.csv: row 2, column batch_size: batch size 64 outside toy's validated range 8..16",
    ):
        check_workload(w, {"toy": a})


def test_bad_philly_names_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "philly.csv"
    head = "timestamp,duration,num_gpus,gpu_time,cluster\n"
    path.write_text(head + "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-13-09 07:01:55,10,1,10,x\n")
    with pytest.raises(InstanceError, match="philly.csv: row 3, column timestamp"):
        read_philly(path)
    path.write_text(head + "2017-10-09 07:01:55,66.0,2,66.0,11cb48\n")
    with pytest.raises(InstanceError, match="row 2, column gpu_time: must be duration × num_gpus = 132"):
        read_philly(path)


def test_an_application_the_simulator_does_not_model_is_named_with_its_row(tmp_path: Path) -> None:
    # gpt_pmp's profiles are of pipeline model parallelism: refused by row, before its profiles
    # (which lack aws and do not interpolate on rtx) could fail in a less telling way
    w = workload_from_frame(
        pd.DataFrame({"name": ["a", "g"], "time": [0, 5], "application": ["toy", "gpt_pmp"], "num_replicas": [1, 8],
                      "batch_size": [8, 48]}),
        source="w.csv",
    )
    with pytest.raises(InstanceError, match=r"w.csv: row 3, column application: application 'gpt_pmp' is not simulated"):
        check_workload(w, {})


def test_a_workload_jobs_row_is_its_file_line_as_its_cells_errors_say(tmp_path: Path) -> None:
    """A job's ``row`` (named by the checks after reading: an unknown or unmodelled application,
    a batch outside the profiles) is its file line, blank lines counted, as the reader's cell
    errors name it (it was counted as in a file without blank lines: row 3 for line 5)."""
    path = tmp_path / "w.csv"
    path.write_text(WORKLOAD_OK.replace("\n", "\n\n").replace(",bert,", ",gpt_pmp,"))
    w = read_workload(path)
    assert [j.row for j in w] == [3, 5]
    with pytest.raises(InstanceError, match=r"w.csv: row 5, column application: application 'gpt_pmp' is not simulated"):
        check_workload(w, {})


def test_app_settings_refuse_values_a_simulated_round_cannot_use() -> None:
    """``AppSettings(slowdown=0)`` was built and divided by zero in its job's first round
    (``calibration``); a negative restart delay or a zero epoch count went through too."""
    from pal_opt.hetero import APP_SETTINGS, AppSettings

    for kwargs, says in [({"slowdown": 0}, "slowdown must be a finite number > 0, got 0"),
                         ({"restart_delay": -1}, "restart_delay must be a number of seconds >= 0"),
                         ({"max_epochs": 0}, "max_epochs must be an integer >= 1, got 0")]:
        with pytest.raises(OptionError, match=f"^{says}"):
            AppSettings(**kwargs)
    assert APP_SETTINGS["bert"].restart_delay == 120 and AppSettings(restart_penalty=0).restart_penalty == 0


# ---------------------------------------------------------------- workload rules pinned (eighteenth session's mutants)
@pytest.mark.parametrize(("field", "bad", "says"), [
    ("submit_time", math.inf, "submit_time must be a finite number >= 0, got inf"),
    ("batch_size", 0, "batch_size must be an integer >= 1, got 0"),
    ("name", "", "WorkloadJob: name must be a non-empty str, got ''"),
    ("application", "", "application must be a non-empty str, got ''"),
])
def test_a_workload_job_refuses_what_its_quick_check_must_not_pass(field: str, bad: object, says: str) -> None:
    """The quick check of a well-typed job (``WorkloadJob._canonical``) lets none of these
    through unchecked: an infinite submit time, a batch of 0, an empty name."""
    from pal_opt.hetero.workload import WorkloadJob

    args = {"name": "j", "submit_time": 0.0, "application": "toy", "num_replicas": 1, "batch_size": 8}
    with pytest.raises(OptionError, match=says):
        WorkloadJob(**{**args, field: bad})


def _frame(names: list[str], times: list[float], apps: list[str] | None = None) -> pd.DataFrame:
    return pd.DataFrame({"name": names, "time": times, "application": apps or ["toy"] * len(names),
                         "num_replicas": [1] * len(names), "batch_size": [8] * len(names)})


@pytest.mark.parametrize(("known", "more"), [(12, ""), (13, ", ... (1 more)"), (15, ", ... (3 more)")])
def test_an_unknown_application_lists_at_most_twelve_known_ones(known: int, more: str) -> None:
    apps = {f"app{k:02d}" for k in range(known)}
    with pytest.raises(InstanceError) as err:
        workload_from_frame(_frame(["x"], [0.0], ["zz"]), applications=apps)
    listed = ", ".join(f"app{k:02d}" for k in range(12))
    assert str(err.value).endswith(f"unknown application 'zz'; known: {listed}{more}"), str(err.value)


def test_the_first_unknown_application_is_named() -> None:
    with pytest.raises(InstanceError, match=r"row 3, column application: unknown application 'yy'"):
        workload_from_frame(_frame(["a", "b", "c"], [0.0, 1.0, 2.0], ["toy", "yy", "zz"]), applications={"toy"})


def test_a_workload_is_in_submission_order_rows_breaking_ties() -> None:
    w = workload_from_frame(_frame(["z", "y", "b", "a"], [5.0, 1.0, 5.0, 1.0]))
    assert [j.name for j in w] == ["y", "a", "z", "b"]
    assert [j.row for j in w] == [3, 5, 2, 4]


def test_a_batch_at_either_end_of_the_validated_range_is_taken(tmp_path: Path) -> None:
    a = load_application(_write_app(tmp_path), "toy")
    assert (a.init_batch_size, a.max_batch_size) == (8, 16)
    for batch in (8, 16):
        frame = _frame(["j"], [0.0])
        frame["batch_size"] = [batch]
        check_workload(workload_from_frame(frame), {"toy": a})
    frame["batch_size"] = [7]
    with pytest.raises(InstanceError, match="batch size 7 outside toy's validated range 8..16"):
        check_workload(workload_from_frame(frame), {"toy": a})


PHILLY_HEAD = "timestamp,duration,num_gpus,gpu_time,cluster\n"
PHILLY_ROW = "2017-10-09 07:01:55,66.0,2,132.0,11cb48\n"


@pytest.mark.parametrize(("rows", "says"), [
    (PHILLY_ROW + "2017-10-09 07:01:56,100.0,1,100.5,x\n", "row 3, column gpu_time: must be duration × num_gpus = 100, got 100.5"),
    (PHILLY_ROW + "2017-10-09 07:01:56,100.0,1,99,x\n2017-10-09 07:01:57,10.0,1,11,x\n", "row 3, column gpu_time"),
    (PHILLY_ROW + "2017-10-09 07:01:56,0,1,0,x\n", "row 3, column duration: must be"),
    (PHILLY_ROW + "2017-10-09 25:01:56,10.0,1,10,x\n2017-10-09 26:01:56,10.0,1,10,x\n", "row 3, column timestamp"),
])
def test_a_philly_row_that_does_not_add_up_is_named_the_first_of_them(tmp_path: Path, rows: str, says: str) -> None:
    """``gpu_time`` is ``duration × num_gpus`` to 1e-9 (0.5 % off is refused), a duration is
    positive, and the first bad row is the one named."""
    path = tmp_path / "philly.csv"
    path.write_text(PHILLY_HEAD + rows)
    with pytest.raises(InstanceError, match=says):
        read_philly(path)
    path.write_text(PHILLY_HEAD + PHILLY_ROW)
    assert len(read_philly(path)) == 1
