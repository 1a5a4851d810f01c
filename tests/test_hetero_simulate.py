"""The Sia simulator (pal_opt.hetero.simjob, policy, simulate) and ``pal-opt simulate-sia``.

The long fidelity runs (newtrace-7 against the authors' figures) are in
``benchmarks/sia_fidelity.py``; here: a short newtrace-7 prefix, job-level semantics, metrics and
the command line's bad-input handling.
"""

from __future__ import annotations

import importlib
import json
import math
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pal_opt import cli
from pal_opt.errors import InstanceError, OptionError
from pal_opt.hetero.configs import PAPER_CLUSTER, GpuType
from pal_opt.hetero.goodput import JobKind
from pal_opt.hetero.policy import SiaParams, SiaPolicy
from pal_opt.hetero.profiles import Application, load_applications
from pal_opt.hetero.simjob import SimJob
from pal_opt.hetero.simulate import (
    JobRecord,
    SiaResult,
    SimConfig,
    build_cluster,
    parse_cluster,
    simulate_sia,
    summarize,
)
from pal_opt.hetero.workload import Workload, WorkloadJob, read_workload, workload_from_frame

TYPES = [t.name for t in PAPER_CLUSTER]


@pytest.fixture(scope="module")
def sia_dir(shared_dir: Path) -> Path:
    d = shared_dir / "data" / "sia-artifact"
    if not (d / "profiles").is_dir():
        pytest.skip(f"Sia artifact data not available at {d}")
    return d


@pytest.fixture(scope="module")
def apps(sia_dir: Path) -> dict[str, Application]:
    return dict(load_applications(sia_dir / "profiles", ["bert", "cifar10", "deepspeech2"]))


@pytest.fixture(scope="module")
def prefix(sia_dir: Path) -> Workload:
    """The first 14 jobs of newtrace-7 (bert, cifar10 and deepspeech2)."""
    wl = read_workload(sia_dir / "workloads" / "newtrace-7.csv")
    return workload_from_frame(wl.frame().iloc[:14].copy(), source="newtrace-7[:14]")


def _job(app: Application, name: str = "cifar10-0", kind: JobKind = JobKind.ADAPTIVE, batch: int = 2048) -> SimJob:
    spec = WorkloadJob(name, 0.0, app.name, 4, batch, kind, 2)
    return SimJob(0, spec, app, TYPES)


# -- whole runs ---------------------------------------------------------------------------------
def test_a_newtrace_prefix_finishes_every_job_deterministically(prefix: Workload, apps: dict[str, Application]) -> None:
    first = simulate_sia(prefix, apps, PAPER_CLUSTER)
    second = simulate_sia(prefix, apps, PAPER_CLUSTER)
    assert first.jobs == second.jobs
    assert np.array_equal(first.gpus_in_use, second.gpus_in_use)
    s = first.summary()
    assert s["n_completed"] == s["n_jobs"] == 14
    assert all(r.jct is not None and r.jct > 0 for r in first.jobs)
    assert all(r.epochs == apps[r.application].max_epochs for r in first.jobs)
    # arrivals wait for a round boundary, and every start pays a restart delay
    assert all(r.start_time is not None and r.start_time >= r.submit_time for r in first.jobs)
    assert all(r.start_time % 60 == 0 for r in first.jobs if r.start_time is not None)
    assert first.gpus_in_use.max(axis=0).tolist() <= [t.total_gpus for t in PAPER_CLUSTER]
    assert s["rounds_not_optimal"] == 0


def test_the_round_loop_checks_arguments_at_its_boundary_only(prefix: Workload, apps: dict[str, Application],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # The model's public functions check their arguments (pal_opt.options); the simulator calls
    # their unchecked versions, so the checks it makes are per round (the round input), per job
    # and per epoch of an application (its cached epoch ends), not per job per round.  Before the
    # unchecked versions this run made 30,222 checks (16,820 number_array from gain and
    # optimize_goodput alone); after, 609.
    count: Counter[str] = Counter()

    def counting(check: Any, key: str) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            count[key] += 1
            return check(*args, **kwargs)
        return counted

    checks = ("number_array", "require_type", "require_items", "check_count", "check_finite", "require_mapping")
    for name in ("goodput", "configs", "placer", "typeblind", "perfmodel", "roundstep", "policy", "simjob",
                 "roundprogram", "levelprogram", "round", "simulate", "gpus", "profiles"):
        module = importlib.import_module(f"pal_opt.hetero.{name}")
        for check in checks:
            if hasattr(module, check):
                monkeypatch.setattr(module, check, counting(getattr(module, check), f"{name}.{check}"))
    result = simulate_sia(prefix, apps, PAPER_CLUSTER)
    rounds = result.summary()["rounds"]
    epochs = sum(a.max_epochs + 1 for a in apps.values())
    assert rounds > 50
    assert count["goodput.number_array"] == 0 and count["placer.check_count"] == 0, count  # gain, place_type
    assert sum(count.values()) <= 10 * rounds + 20 * len(prefix.jobs) + 3 * epochs, count


def test_strong_scaling_jobs_keep_their_batch_and_stay_within_their_request(
    prefix: Workload, apps: dict[str, Application]
) -> None:
    frame = prefix.frame().iloc[:6].copy()
    frame["category"] = "scale-gpus"
    wl = workload_from_frame(frame)
    seen: list[tuple[int, int, int, int]] = []
    original = SimJob.update_batch

    def spy(self: SimJob) -> None:
        original(self)
        assert self.choice is not None
        seen.append((sum(self.shape), self.spec.num_replicas, self.choice.global_batch(sum(self.shape)),
                     self.spec.batch_size))

    mp = pytest.MonkeyPatch()
    mp.setattr(SimJob, "update_batch", spy)
    try:
        res = simulate_sia(wl, apps, PAPER_CLUSTER)
    finally:
        mp.undo()
    assert res.summary()["n_completed"] == 6
    assert seen  # the spy saw batches chosen (an empty list passed the checks below)
    assert all(gpus <= req for gpus, req, _, _ in seen)
    assert all(batch == asked for _, _, batch, asked in seen)  # the batch kept (was not checked)
    assert {r.kind for r in res.jobs} == {"scale-gpus"}


def test_rigid_jobs_always_run_their_requested_count(prefix: Workload, apps: dict[str, Application]) -> None:
    frame = prefix.frame().iloc[:6].copy()
    frame["category"] = "rigid"
    wl = workload_from_frame(frame)
    rounds: list[tuple[int, int, int]] = []
    res = simulate_sia(
        wl, apps, PAPER_CLUSTER, on_round=lambda inp, d: rounds.append((inp.num_adaptive, inp.num_rigid, d.rigid.size))
    )
    assert res.summary()["n_completed"] == 6
    assert rounds and all(a == 0 and r == n for a, r, n in rounds)  # every active job is in the rigid block
    shapes: list[tuple[int, int]] = []
    original = SimJob.reallocate

    def spy(self: SimJob, type_index: int | None, shape: tuple[int, ...], now: float, slowdown: float = 1.0) -> None:
        shapes.append((sum(shape), self.spec.num_replicas))
        original(self, type_index, shape, now, slowdown)

    mp = pytest.MonkeyPatch()
    mp.setattr(SimJob, "reallocate", spy)
    try:
        simulate_sia(wl, apps, PAPER_CLUSTER)
    finally:
        mp.undo()
    assert shapes  # the spy saw the jobs placed (an empty list passed the check below)
    assert all(gpus in (0, req) for gpus, req in shapes)


def test_progress_is_told_after_every_round(prefix: Workload, apps: dict[str, Application]) -> None:
    """``simulate_sia(progress=...)``, what ``pal-opt simulate-sia``'s bar counts: (rounds done,
    jobs finished, jobs in the workload, simulated seconds) after each round, the rounds counted
    from 1, up to every job at the last round."""
    calls: list[tuple[int, int, int, float]] = []
    res = simulate_sia(prefix, apps, PAPER_CLUSTER, progress=lambda *a: calls.append(a))
    s = res.summary()
    assert [c[0] for c in calls] == list(range(1, s["rounds"] + 1))
    assert {c[2] for c in calls} == {14}
    done = [c[1] for c in calls]
    assert done == sorted(done) and done[-1] == s["n_completed"] == 14 and done[-2] < 14
    assert [c[3] for c in calls] == [60.0 * k for k in range(1, len(calls) + 1)]


def test_unfinished_jobs_are_reported_at_max_time(prefix: Workload, apps: dict[str, Application]) -> None:
    res = simulate_sia(prefix, apps, PAPER_CLUSTER, SimConfig(max_time=600))
    s = res.summary()
    assert s["n_jobs"] == 14 and s["n_completed"] < 14
    assert s["rounds"] == 10


# -- jobs that can never run --------------------------------------------------------------------
def _rows(*rows: tuple[str, float, str, int, int], category: str = "") -> Workload:
    """A workload of (name, time, application, num_replicas, batch_size) rows, one category."""
    import pandas as pd

    frame = pd.DataFrame(rows, columns=["name", "time", "application", "num_replicas", "batch_size"])
    frame["category"] = category
    return workload_from_frame(frame, source="hand-made")


#: cifar10 fits one 4-GPU aws node; bert asks for 8 GPUs (the audit's w.csv)
TOO_BIG = (("cifar10-0", 0.0, "cifar10", 4, 2048), ("bert-1", 120.0, "bert", 8, 384))
#: what each policy says of the 8-GPU rigid bert job on one node of four aws GPUs
TOO_BIG_REASON = {
    "sia": "a rigid job needs 8 GPUs of one type; the largest type, aws, has 4",
    "ilp": "a rigid job needs 8 GPUs of one type; the largest type, aws, has 4",
    "gavel": "a rigid job needs 8 GPUs of one type; the largest type, aws, has 4",
    "pal": "needs 8 GPUs; the cluster has 4",
    "packed": "needs 8 GPUs; the cluster has 4",
}


@pytest.mark.parametrize("method", sorted(TOO_BIG_REASON))
def test_a_job_no_configuration_of_its_kind_can_hold_is_unplaceable(apps: dict[str, Application], method: str) -> None:
    cluster = build_cluster([("aws", 1, 4)], apps)
    res = simulate_sia(_rows(*TOO_BIG, category="rigid"), apps, cluster, SimConfig(policy=method, max_time=3 * 3600.0))
    assert res.unplaceable == {"bert-1": TOO_BIG_REASON[method]}
    s = res.summary()
    assert (s["n_jobs"], s["n_completed"]) == (2, 1)
    done = res.jobs[0].completion_time
    assert done is not None and res.jobs[1].start_time is None and res.jobs[1].completion_time is None
    # the run ends with the last job that can run, not at max_time
    assert s["rounds"] == math.ceil(done / 60.0) and s["makespan"] == pytest.approx(done)


@pytest.mark.parametrize(("category", "reason"), [("rigid", "a rigid job needs 100 GPUs of one type"),
                                                  ("scale-gpus", None), ("adaptive", None)])
def test_whether_a_job_fits_depends_on_its_kind(apps: dict[str, Application], category: str, reason: str | None) -> None:
    # 100 GPUs on a 4-GPU cluster: a rigid job never runs; the others may use fewer GPUs
    cluster = build_cluster([("aws", 1, 4)], apps)
    res = simulate_sia(_rows(("bert-1", 0.0, "bert", 100, 384), category=category), apps, cluster,
                       SimConfig(max_time=3 * 3600.0))
    why = res.unplaceable.get("bert-1")
    assert why is None if reason is None else why is not None and why.startswith(reason)
    assert res.summary()["n_completed"] == (reason is None)


def test_no_valid_configuration_is_a_reason() -> None:
    import types

    from pal_opt.hetero.policy import configuration_problem

    # the largest batch is below the smallest per-GPU batch: the GPU cap is 0 on every type
    app = types.SimpleNamespace(name="x", max_batch_size=16, profile=lambda t: types.SimpleNamespace(min_local_bsz=32))
    why = configuration_problem(app, JobKind.ADAPTIVE, 4, 16, SiaPolicy(PAPER_CLUSTER).configs)  # type: ignore[arg-type]
    assert why == "no configuration is valid for a job of kind adaptive: its GPU cap is 0 on every type"


def test_cli_reports_unplaceable_jobs(sia_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\n"
                     + "".join(f"{n},{t:g},{a},{r},{b}\n" for n, t, a, r, b in TOO_BIG))
    out = tmp_path / "out.json"
    rc = cli.main(["simulate-sia", str(trace), "--profiles", str(sia_dir / "profiles"), "--cluster", "aws:1x4",
                   "--category", "rigid", "--policy", "sia", "--max-hours", "3", "-o", str(out)])
    captured = capsys.readouterr()
    assert rc == 0 and "stopped at" not in captured.err
    doc = json.loads(out.read_text())
    assert doc["unplaceable"] == [{"job": "bert-1", "reason": TOO_BIG_REASON["sia"]}]
    assert (doc["n_jobs"], doc["n_completed"]) == (2, 1)
    assert f"unplaceable: job bert-1: {TOO_BIG_REASON['sia']}" in captured.out.splitlines()


# -- job semantics ------------------------------------------------------------------------------
def test_restart_rules(apps: dict[str, Application]) -> None:
    app = apps["cifar10"]
    job = _job(app)
    assert job.num_restarts is None
    job.reallocate(2, (2,), now=60)  # first start: a migration from "none"
    assert (job.num_restarts, job.rescale_time, job.start_time) == (0, app.settings.restart_delay, 60)
    job.advance(60, now=60)
    assert job.rescale_time == 0 and job.progress > 0 and job.params[2] is not None
    job.reallocate(2, (2,), now=120)  # same shape on other nodes: nothing happens
    assert job.num_restarts == 0 and job.rescale_time == 0
    job.reallocate(2, (4,), now=120)  # a new shape on the same type: restart
    assert job.num_restarts == 1 and job.rescale_time == app.settings.restart_delay
    progress = job.progress
    job.reallocate(None, (), now=180)  # suspended: no delay, progress kept
    assert job.shape == () and job.type_index is None and job.num_restarts == 1 and job.progress == progress
    job.advance(60, now=180)
    assert job.progress == progress
    job.reallocate(0, (1,), now=240)  # resumed on another type: a migration
    assert job.num_restarts == 2 and job.type_index == 0


def test_restart_delay_comes_first_and_epochs_end_on_whole_seconds(apps: dict[str, Application]) -> None:
    app = apps["cifar10"]
    job = _job(app)
    job.reallocate(1, (8,), now=0)
    delay = app.settings.restart_delay
    job.advance(delay, now=0)  # the whole interval is the delay
    assert job.progress == 0 and job.rescale_time == 0 and job.attained_service == delay * 8
    now = float(delay)
    while not job.done:
        job.advance(60, now)
        now += 60
    assert job.epoch == app.max_epochs
    assert job.completion_time is not None and float(job.completion_time).is_integer()
    assert now - 60 < job.completion_time <= now


def test_adaptive_jobs_tune_their_batch_once_they_have_a_model(apps: dict[str, Application]) -> None:
    app = apps["cifar10"]
    job = _job(app)
    job.reallocate(2, (8,), now=0)
    first = job.choice
    assert first is not None and first.global_batch(8) == max(app.init_batch_size, app.profile("rtx").min_local_bsz * 8)
    job.advance(600, now=0)
    assert job.choice is not None and job.choice != first
    fixed = _job(app, kind=JobKind.STRONG_SCALING, batch=1024)
    fixed.reallocate(2, (8,), now=0)
    fixed.advance(600, now=0)
    assert fixed.choice is not None and fixed.choice.global_batch(8) == 1024


# -- the policy ---------------------------------------------------------------------------------
def test_a_new_job_starts_on_one_gpu_and_a_restarting_job_is_pinned(apps: dict[str, Application]) -> None:
    policy = SiaPolicy(PAPER_CLUSTER, SiaParams())
    job = _job(apps["cifar10"])
    out = policy.optimize([job], now=60)
    t, nodes = out[job.index]
    assert t is not None and len(nodes) == 1
    job.reallocate(t, policy.shape_of(out[job.index]), 60)
    job.allocation = out[job.index]
    assert job.rescale_time > 0
    again = policy.optimize([job], now=120)  # still restarting: the same configuration
    assert policy.shape_of(again[job.index]) == job.shape and again[job.index][0] == t


def test_sia_params_are_checked() -> None:
    with pytest.raises(OptionError, match="negative fairness power"):
        SiaParams(p=0.5)
    with pytest.raises(OptionError, match="lambda_n"):
        SiaParams(lambda_n=0.9)
    with pytest.raises(OptionError, match="round_length must be a number of seconds > 0"):
        SimConfig(round_length=0)


def test_a_policy_name_given_as_policy_runs_that_policy() -> None:
    # pal_opt.simulate.SimConfig(policy="ilp") and --policy name the policy; so does this one
    # (tests/test_sim_names.py has the deprecated names)
    assert SimConfig(policy="ilp").policy == "ilp"
    with pytest.raises(OptionError) as err:
        SimConfig(policy=["sia"])  # type: ignore[arg-type]
    assert str(err.value).startswith("unknown policy ['sia'] for a cluster of GPU types (choose from sia, ")


# -- metrics ------------------------------------------------------------------------------------
def test_summary_uses_the_artifacts_percentile_and_makespan() -> None:
    jobs = tuple(
        JobRecord(f"j{i}", "a" if i % 2 else "b", "adaptive", 10.0 * i, 10.0 * i, 10.0 * i + 100 + i, 0, 1)
        for i in range(10)
    )
    res = SiaResult(jobs, np.array([[2, 0], [1, 1]]), (GpuType("x", 1, 2), GpuType("y", 1, 2)), 60.0, 0.0, 0.0, 0, 0.0)
    s = summarize(res)
    jct = [100 + i for i in range(10)]
    assert s["avg_jct"] == pytest.approx(np.mean(jct))
    assert s["p99_jct"] == 109  # sorted[int(0.99 * 10)] = sorted[9]
    assert s["makespan"] == (90 + 109) - 0
    assert s["utilisation"] == pytest.approx(2 / 4)
    assert s["avg_gpus_in_use_by_type"] == {"x": 1.5, "y": 0.5}
    assert s["n_jobs_by_app"] == {"a": 5, "b": 5}


# -- cluster and command line -------------------------------------------------------------------
def test_cluster_parsing_and_node_limits_from_the_profiles(apps: dict[str, Application]) -> None:
    spec = parse_cluster("aws:6x4,rtx:3x8,dgx-ext:2x8")
    assert spec == [("aws", 6, 4), ("rtx", 3, 8), ("dgx-ext", 2, 8)]
    cluster = build_cluster(spec, apps)
    assert [(t.name, t.max_physical_nodes) for t in cluster] == [("aws", 16), ("rtx", 3), ("dgx-ext", 2)]
    for bad in ("aws", "aws:6", "aws:0x4", "aws:6x4,aws:1x4", ":6x4"):
        with pytest.raises(OptionError, match="--cluster"):
            parse_cluster(bad)
    with pytest.raises(InstanceError, match="no profile for GPU type 'v100'"):
        build_cluster([("v100", 2, 4)], apps)


def _trace(sia_dir: Path, tmp_path: Path, rows: int = 4) -> Path:
    wl = read_workload(sia_dir / "workloads" / "newtrace-7.csv")
    path = tmp_path / "trace.csv"
    wl.frame().iloc[:rows].drop(columns="category").to_csv(path, index=False)
    return path


def test_cli_writes_the_result(sia_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    rc = cli.main([
        "simulate-sia", str(_trace(sia_dir, tmp_path)), "--trace-format", "auto", "--cluster",
        "aws:6x4,rtx:3x8,dgx-ext:2x8", "--profiles", str(sia_dir / "profiles"), "--policy", "sia",
        "--round", "60", "--out", str(out),
    ])
    assert rc == 0
    doc = json.loads(out.read_text())
    for key in ("avg_jct", "p50_jct", "p99_jct", "makespan", "n_jobs", "n_completed", "utilisation", "jobs"):
        assert key in doc
    assert doc["n_jobs"] == doc["n_completed"] == 4
    assert doc["avg_jct"] > 0 and doc["makespan"] >= doc["p99_jct"]
    assert "avg JCT" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "aws:6x4,h100:2x8"], "no profile for GPU type 'h100'"),
        (["--cluster", "aws-6x4"], "--cluster: expected TYPE:SERVERSxGPUS"),
        (["--trace-format", "pal"], "simulate-sia replays Sia newTrace workloads"),
        (["--round", "0"], "--round"),
        (["--backend", "gurobi"], "unknown backend 'gurobi'"),
        (["--category", "elastic"], "--category"),
        (["--ilp-mode", "joint"], "--ilp-mode applies to --policy ilp only, not --policy sia"),
        (["--policy", "ilp", "--ilp-mode", "fast"], "--ilp-mode"),
        # flags that changed nothing were recorded as if they had (review)
        (["--policy", "pal", "--backend", "cpsat"], "--backend does not apply to policy 'pal': it solves no integer "
                                                     "program (sia, ilp do)"),
        (["--policy", "gavel", "--time-limit", "5"], "--time-limit does not apply to policy 'gavel'"),
        (["--seed", "4"], "--seed seeds the per-GPU variability draw: without --variability every GPU is nominal"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    sia_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    out = tmp_path / "out.json"
    rc = cli.main(["simulate-sia", str(_trace(sia_dir, tmp_path, 2)), "--profiles", str(sia_dir / "profiles"),
                   "--out", str(out), "--quiet", *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not out.exists()


def test_cli_missing_profile_for_a_type(sia_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profiles = tmp_path / "profiles"
    shutil.copytree(sia_dir / "profiles" / "bert", profiles / "bert")
    (profiles / "bert" / "placements-rtx.csv").unlink()
    trace = tmp_path / "bert.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\nbert-0,10,bert,2,96\n")
    out = tmp_path / "out.json"
    rc = cli.main(["simulate-sia", str(trace), "--profiles", str(profiles), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "no profile for GPU type 'rtx'" in err and "bert" in err and "\n" not in err
    assert not out.exists()


def test_cli_unknown_application_and_unreadable_trace(sia_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\nx-0,10,resnet,2,96\n")
    out = tmp_path / "out.json"
    assert cli.main(["simulate-sia", str(trace), "--profiles", str(sia_dir / "profiles"), "--out", str(out)]) == 2
    assert "row 2, column application: unknown application 'resnet'" in capsys.readouterr().err
    assert cli.main(["simulate-sia", str(tmp_path / "nope.csv"), "--profiles", str(sia_dir / "profiles"),
                     "--out", str(out)]) == 2
    assert "cannot read trace" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("mode", "flags"),
    [
        (None, (True, False, False)),
        ("anchored", (True, False, False)),
        ("replaced", (False, False, False)),
        ("levels", (False, True, False)),
        ("joint", (False, True, True)),
    ],
)
def test_cli_ilp_mode_reaches_the_policy(
    sia_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str | None, flags: tuple[bool, bool, bool]
) -> None:
    """``--ilp-mode`` on both commands builds ``ilp`` with the matching design, and the run finishes."""
    from pal_opt.hetero.ilptypes import IlpTypesPolicy

    seen: list[tuple[bool, bool, bool]] = []
    init = IlpTypesPolicy.__init__

    def spy(self: IlpTypesPolicy, *a: object, **kw: object) -> None:
        init(self, *a, **kw)  # type: ignore[arg-type]
        seen.append((self.anchor, self.use_levels, self.joint))

    monkeypatch.setattr(IlpTypesPolicy, "__init__", spy)
    extra = [] if mode is None else ["--ilp-mode", mode]
    trace = str(_trace(sia_dir, tmp_path))
    for command in ("simulate-sia", "simulate"):
        out = tmp_path / f"{command}.json"
        rc = cli.main([command, trace, "--trace-format", "sia", "--profiles", str(sia_dir / "profiles"),
                       "--policy", "ilp", "--out", str(out), "--quiet", *extra])
        assert rc == 0
        doc = json.loads(out.read_text())
        assert doc["n_completed"] == doc["n_jobs"] == 4
        assert doc["ilp_mode"] == (mode or "anchored")
    assert seen == [flags, flags]


def test_cli_ilp_mode_on_a_pal_trace_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = Path(__file__).resolve().parents[1] / "examples" / "data" / "trace.csv"
    out = tmp_path / "out.json"
    rc = cli.main(["simulate", str(trace), "--cluster", "4x4", "--ilp-mode", "joint", "-o", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--ilp-mode applies to sia traces" in err and "\n" not in err
    assert not out.exists()


def test_the_row_order_of_a_workload_does_not_change_the_run(tmp_path: Path, sia_dir: Path) -> None:
    """Jobs were indexed by row, and the index breaks ties in the placer: the same jobs with
    their rows reversed gave 23 restarts instead of 25 (review).  They are now read in
    submission order."""
    mini = Path(__file__).resolve().parents[1] / "examples" / "data" / "newtrace-mini.csv"
    rows = mini.read_text().splitlines()
    reversed_file = tmp_path / "reversed.csv"
    reversed_file.write_text("\n".join([rows[0], *rows[:0:-1]]) + "\n")
    docs = []
    for path in (mini, reversed_file):
        out = tmp_path / f"{path.stem}.json"
        assert cli.main(["simulate", str(path), "--cluster", "aws:2x4,rtx:1x8", "--profiles", str(sia_dir / "profiles"),
                         "--policy", "sia", "-o", str(out), "--quiet"]) == 0
        docs.append(json.loads(out.read_text()))
    assert [(d["avg_jct"], d["restarts"]) for d in docs] == [(docs[0]["avg_jct"], docs[0]["restarts"])] * 2


def test_a_profiles_path_that_is_a_file_or_an_empty_folder_says_so(tmp_path: Path) -> None:
    """An empty folder gave "unknown application 'cifar10'; known: " (an empty list)."""
    from pal_opt.errors import InstanceError
    from pal_opt.hetero.profiles import application_names

    with pytest.raises(InstanceError, match="not a Sia profiles folder: no sub-folder holds a placements-<type>.csv"):
        application_names(tmp_path)
    (tmp_path / "f.json").write_text("{}")
    with pytest.raises(InstanceError, match="not a folder"):
        application_names(tmp_path / "f.json")
    with pytest.raises(InstanceError, match="profiles folder not found"):
        application_names(tmp_path / "missing")
