"""Failures in the simulator: the default rates, a pinned run, hand-checked loss, properties, CLI."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pal_opt.errors import InstanceError, OptionError
from pal_opt.io.traces import TraceJob, read_trace
from pal_opt.model import Cluster
from pal_opt.simulate import SimConfig, result_to_dict, simulate
from pal_opt.simulate.cli import main as simulate_main
from pal_opt.simulate.failures import (
    DEFAULT_GPU_MTBF_HOURS,
    DEFAULT_SERVER_MTBF_HOURS,
    FailureConfig,
    FailureProcess,
)

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "data" / "trace.csv"
CLASSES = ("classA", "classB", "classC", "classD")


def _cluster(servers: int = 4, gpus: int = 4, seed: int = 7) -> Cluster:
    rng = np.random.default_rng(seed)
    n = servers * gpus
    return Cluster.uniform(servers, gpus, {c: rng.uniform(0.9, 1.3, n).round(3).tolist() for c in CLASSES})


def _job(jid: int, demand: int, submit: float, seconds: float, priority: int = 0) -> TraceJob:
    return TraceJob(id=jid, demand=demand, submit_time=submit, iterations=seconds, model="m", perfclass="classA",
                    iter_time=1.0, priority=priority)


def _strip(doc: dict) -> dict:
    doc = dict(doc)
    for k in ("solve_seconds_total", "solve_seconds_mean", "solve_seconds_max", "wall_seconds"):
        doc.pop(k)
    doc["round_log"] = {k: v for k, v in doc["round_log"].items() if k != "solve_seconds"}
    if "failures" in doc:
        doc["failures"] = {k: v for k, v in doc["failures"].items() if k != "repair_seconds"}
    return doc


# ----------------------------------------------------------------------------- the default rates
def test_default_rates_derive_from_llama3() -> None:
    """419 interruptions in 54 days on 16,384 GPUs (8 per server), 58.7 % GPU-caused."""
    hours = 54 * 24
    assert DEFAULT_GPU_MTBF_HOURS == pytest.approx(16384 * hours / (0.587 * 419))
    assert DEFAULT_SERVER_MTBF_HOURS == pytest.approx(2048 * hours / (0.413 * 419))
    assert round(DEFAULT_GPU_MTBF_HOURS) == 86332 and round(DEFAULT_SERVER_MTBF_HOURS) == 15338
    # both together: the all-cause figure per GPU, 16,384 × 54 × 24 / 419 ≈ 50,700 GPU-hours
    per_gpu = 1 / (1 / DEFAULT_GPU_MTBF_HOURS + 1 / (8 * DEFAULT_SERVER_MTBF_HOURS))
    assert per_gpu == pytest.approx(16384 * hours / 419) and round(per_gpu, -2) == 50700


def test_failure_process_is_seeded_and_chunk_free() -> None:
    """Same seed, same failures, however time is cut into rounds; a server failure takes all its GPUs."""
    cl = _cluster(8, 4)
    cfg = FailureConfig(scale=2000, repair_time=3600)
    whole = FailureProcess(cl, cfg, 5).pop_until(500_000)
    cut = FailureProcess(cl, cfg, 5)
    pieces = [e for t in np.arange(360, 500_000 + 360, 360) for e in cut.pop_until(min(float(t), 500_000))]
    assert whole == pieces and len(whole) > 10
    assert whole != FailureProcess(cl, cfg, 6).pop_until(500_000)
    assert all(e.gpus == tuple(range(4 * e.component, 4 * e.component + 4)) for e in whole if e.kind == "server")
    assert all(e.until == e.time + 3600 for e in whole)
    assert [e.time for e in whole] == sorted(e.time for e in whole)


def test_failure_config_validation() -> None:
    FailureConfig(gpu_mtbf_hours=math.inf, checkpoint_interval=math.inf).validate()
    for bad, msg in ((dict(gpu_mtbf_hours=0), "gpu-mtbf"), (dict(server_mtbf_hours=-1.0), "server-mtbf"),
                     (dict(repair_time=math.inf), "repair-time"), (dict(checkpoint_interval=math.nan), "checkpoint"),
                     (dict(scale=0), "failure-scale"), (dict(seed=1.5), "failure-seed")):
        with pytest.raises(OptionError, match=msg):
            SimConfig(failures=FailureConfig(**bad)).validate()
    with pytest.raises(OptionError, match="FailureConfig"):
        SimConfig(failures={"scale": 2}).validate()  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- the pinned run
def test_pinned_run_loses_no_job_and_reports_lost_gpu_hours() -> None:
    """The done-when test: examples/data/trace.csv (24 jobs) on 4 × 4 GPUs, PAL, Llama 3's rates
    ×1000, 2 h repairs, 30-minute checkpoints, seed 0.  Every job finishes; the figures are pinned."""
    trace = read_trace(TRACE)
    cfg = SimConfig(policy="pal", restart_cost=30.0, seed=0,
                    failures=FailureConfig(scale=1000, repair_time=7200, checkpoint_interval=1800))
    res = simulate(trace, _cluster(), cfg, validate=True)
    s, f = res.summary, res.summary["failures"]
    assert s["n_jobs"] == 24 and s["n_completed"] == 24 and not res.unplaceable
    assert all(j.finish_time is not None for j in res.jobs)
    assert (f["failures"], f["gpu_failures"], f["server_failures"]) == (5, 1, 4)
    assert (f["jobs_hit"], f["repairs"], f["replaced_by_repair"]) == (6, 5, 3)
    assert f["lost_gpu_hours"] == pytest.approx(13.433484188458864, rel=1e-9)
    assert [(round(t, 3), jid, g, round(lost, 3)) for t, jid, g, lost in res.failures.hits] == [
        (13668.605, 13, 8, 1758.605), (13668.605, 17, 2, 1788.605), (22246.14, 13, 8, 1336.14),
        (30185.234, 22, 8, 635.234), (31871.546, 22, 8, 1601.546), (37736.392, 22, 8, 266.392)]
    assert f["restarts_per_job_max"] == 9 and f["failure_restarts_per_job_max"] == 3
    assert s["makespan"] / 3600 == pytest.approx(13.359978215733502, rel=1e-9)
    assert sum(j.failures for j in res.jobs) == 6
    assert sum(j.lost_gpu_seconds for j in res.jobs) / 3600 == pytest.approx(f["lost_gpu_hours"])
    # the same run again: the same figures (wall-clock fields aside)
    again = simulate(trace, _cluster(), cfg)
    assert _strip(result_to_dict(again)) == _strip(result_to_dict(res))


def test_ilp_policy_with_failures_loses_no_job() -> None:
    trace = read_trace(TRACE)
    cfg = SimConfig(policy="ilp", backend="highs", time_limit=10, seed=2,
                    failures=FailureConfig(scale=1000, repair_time=7200, checkpoint_interval=1800))
    res = simulate(trace, _cluster(), cfg, validate=True)
    assert res.summary["n_completed"] == 24 and res.summary["failures"]["jobs_hit"] > 0


# ----------------------------------------------------------------------------- by hand
def test_one_job_one_gpu_by_hand() -> None:
    """One GPU (factor 1), one job of 20 h, checkpoints every 1,000 s, 2 h repairs, 360 s rounds.
    The first failure at time tf loses tf mod 1000 s of work; the job restarts at the first round
    boundary at or after tf + 7200 and pays the 60 s restart cost."""
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    cfg = SimConfig(policy="pal", restart_cost=60.0, seed=0,
                    failures=FailureConfig(gpu_mtbf_hours=25.0, server_mtbf_hours=math.inf, repair_time=7200,
                                           checkpoint_interval=1000))
    res = simulate([_job(0, 1, 0.0, 72_000.0)], cluster, cfg, validate=True)
    events = res.failures.events
    job = res.jobs[0]
    hits = [e for e in events if e.time < job.finish_time]
    assert len(hits) == 1, [e.time for e in events]  # the seed is chosen so: one failure while it runs
    tf = hits[0].time
    lost = math.fmod(tf, 1000.0)
    back = math.ceil((tf + 7200) / 360) * 360
    assert job.lost_gpu_seconds == pytest.approx(lost)
    assert res.summary["failures"]["lost_gpu_hours"] == pytest.approx(lost / 3600)
    assert job.finish_time == pytest.approx(back + 60 + (72_000 - (tf - lost)))
    assert (job.failures, job.restarts, job.preemptions) == (1, 1, 0)
    assert job.run_seconds == pytest.approx(72_000 + lost)


def test_mid_round_failure_is_repaired_on_a_spare_gpu() -> None:
    """Two servers of 2 GPUs, one 1-GPU job: a failure of its server mid-round makes the repair
    code move it to the other server for the rest of the round (not wait for the next round)."""
    cluster = Cluster.uniform(2, 2, {"classA": [1.0, 1.0, 1.0, 1.0]})
    cfg = SimConfig(policy="pal", seed=2,
                    failures=FailureConfig(gpu_mtbf_hours=math.inf, server_mtbf_hours=20.0, repair_time=36_000,
                                           checkpoint_interval=600))
    res = simulate([_job(0, 1, 0.0, 50_000.0)], cluster, cfg, validate=True)
    f = res.failures
    assert [(e.kind, e.component) for e in f.events] == [("server", 0)]
    assert (len(f.hits), f.repairs, f.replaced) == (1, 1, 1)
    t_hit, _, _, lost = f.hits[0]
    assert t_hit % 360 != 0 and lost == pytest.approx(math.fmod(t_hit, 600))  # mid-round
    # GPU 0 up to the failure, GPU 2 (the other server) from that instant, GPU 0 again from the
    # first round boundary after its server's repair (PAL's choice; a move costs nothing here)
    back = math.ceil((t_hit + 36_000) / 360) * 360
    assert [(g, a) for g, a, _ in f.runs] == [(0, 0.0), (2, t_hit), (0, back)]
    assert res.jobs[0].finish_time == pytest.approx(50_000 + lost)


# ----------------------------------------------------------------------------- properties
@st.composite
def _scenario(draw: st.DrawFn) -> tuple[list[TraceJob], Cluster, SimConfig]:
    servers = draw(st.integers(1, 3))
    gpus = draw(st.integers(1, 3))
    n = draw(st.integers(1, 6))
    trace = [_job(i, draw(st.integers(1, servers * gpus)), draw(st.integers(0, 4)) * 500.0,
                  draw(st.integers(1, 30)) * 600.0, draw(st.integers(0, 2))) for i in range(n)]
    cluster = Cluster.uniform(servers, gpus, {"classA": [1.0] * (servers * gpus)})
    checkpoint = draw(st.sampled_from([300.0, 1000.0, math.inf]))
    # without checkpoints a job restarts from zero at every hit: frequent failures must not make
    # finishing hopeless (a 5-hour job on 9 GPUs at 5-hour MTBFs would need e^12 attempts)
    cfg = SimConfig(
        policy=draw(st.sampled_from(["pal", "packed-sticky", "pmfirst"])), locality_penalty=1.0,
        restart_cost=draw(st.sampled_from([0.0, 45.0])), seed=draw(st.integers(0, 2**16)),
        failures=FailureConfig(gpu_mtbf_hours=draw(st.sampled_from([5.0, 20.0, math.inf] if checkpoint < math.inf
                                                                   else [math.inf])),
                               server_mtbf_hours=draw(st.sampled_from([5.0, 20.0] if checkpoint < math.inf
                                                                      else [20.0])),
                               repair_time=draw(st.sampled_from([600.0, 3600.0])),
                               checkpoint_interval=checkpoint))
    return trace, cluster, cfg


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_failure_properties(scenario: tuple[list[TraceJob], Cluster, SimConfig]) -> None:
    """Every job finishes; no job runs on a GPU while it is out of service; each hit loses at most
    a checkpoint interval; lost GPU-hours = Σ over hits of GPUs × seconds since the checkpoint; and
    (all factors 1, λ = 1) each job's seconds of work = its ideal seconds + the seconds it lost."""
    trace, cluster, cfg = scenario
    res = simulate(trace, cluster, cfg, validate=True)
    f = res.failures
    assert f is not None and cfg.failures is not None
    assert res.summary["n_completed"] == len(trace) and all(j.finish_time is not None for j in res.jobs)
    outages: dict[int, list[tuple[float, float]]] = {}
    for e in f.events:
        for g in e.gpus:
            outages.setdefault(g, []).append((e.time, e.until))
    for g, a, b in f.runs:
        assert all(b <= lo or a >= hi for lo, hi in outages.get(g, [])), (g, a, b, outages.get(g))
    interval = cfg.failures.checkpoint_interval
    assert all(0 <= lost <= interval + 1e-9 for _, _, _, lost in f.hits)
    by_hits = sum(gpus * lost for _, _, gpus, lost in f.hits) / 3600
    assert res.summary["failures"]["lost_gpu_hours"] == pytest.approx(by_hits)
    assert sum(j.lost_gpu_seconds for j in res.jobs) / 3600 == pytest.approx(by_hits)
    assert sum(j.failures for j in res.jobs) == len(f.hits) == res.summary["failures"]["jobs_hit"]
    # the log names, under each failure, the jobs it stopped: each job as often as it was hit,
    # while the failure's GPUs were out
    log = f.log()
    assert len(log) == len(f.events)
    named = Counter(jid for e in log for jid in e["jobs"])
    assert named == Counter({j.job_id: j.failures for j in res.jobs if j.failures})
    when = {jid: sorted(t for t, hj, _, _ in f.hits if hj == jid) for jid in named}
    for e in log:
        for jid in e["jobs"]:
            assert any(e["time"] <= t < e["until"] for t in when[jid]), (e, when[jid])
    for j in res.jobs:
        assert j.run_seconds == pytest.approx(j.ideal_seconds + j.lost_gpu_seconds / j.demand, rel=1e-9, abs=1e-6)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_failures_that_never_happen_change_nothing(scenario: tuple[list[TraceJob], Cluster, SimConfig]) -> None:
    """Failures off and failures on with infinite MTBFs give the same run, to the bit."""
    trace, cluster, cfg = scenario
    off = simulate(trace, cluster, SimConfig(**{**asdict(cfg), "failures": None}))
    never = FailureConfig(gpu_mtbf_hours=math.inf, server_mtbf_hours=math.inf)
    on = simulate(trace, cluster, SimConfig(**{**asdict(cfg), "failures": never}))
    a, b = _strip(result_to_dict(off)), _strip(result_to_dict(on))
    assert b.pop("failures")["failures"] == 0 and b.pop("failure_log") == []
    b["config"].pop("failures")
    assert a == b
    assert "failures" not in result_to_dict(off)["config"]


# ----------------------------------------------------------------------------- priority classes
def test_priority_column_and_jct_by_priority(tmp_path: Path) -> None:
    """The summary's ``by_priority`` (JCT per priority class) from a trace's priority column."""
    p = tmp_path / "t.csv"
    p.write_text("job_id,num_gpus,submit_time,duration,model,priority\n0,1,0,100,resnet50,2\n1,1,0,100,resnet50,\n"
                 "2,1,0,100,resnet50,2\n")
    trace = read_trace(p)
    assert [t.priority for t in trace] == [2, 0, 2]
    assert [t.priority for t in read_trace(TRACE)] == [0] * 24
    res = simulate(trace, Cluster.uniform(1, 1, {c: [1.0] for c in CLASSES}), SimConfig(policy="pal"))
    by = res.summary["by_priority"]
    assert list(by) == ["0", "2"] and by["0"]["n_jobs"] == 1 and by["2"]["n_jobs"] == 2
    assert by["2"]["avg_jct"] == pytest.approx(np.mean([j.jct for j in res.jobs if j.priority == 2]))
    p.write_text("job_id,num_gpus,submit_time,duration,model,priority\n0,1,0,100,resnet50,high\n")
    with pytest.raises(InstanceError, match=r"row 2, column priority"):
        read_trace(p)


# ----------------------------------------------------------------------------- the command
def test_cli_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, jobs = tmp_path / "r.json", tmp_path / "j.csv"
    argv = [str(TRACE), "--cluster", "4x4", "--synthetic-variability", "1", "--quiet", "-o", str(out)]
    assert simulate_main([*argv, "--failures", "--failure-scale", "1000", "--repair-time", "7200",
                          "--checkpoint-interval", "1800", "--jobs-csv", str(jobs)]) == 0
    doc = json.loads(out.read_text())
    f = doc["failures"]
    assert doc["n_completed"] == 24 and f["failures"] > 0 and f["lost_gpu_hours"] > 0
    assert f["config"]["scale"] == 1000 and len(doc["failure_log"]) == f["failures"]
    header = jobs.read_text().splitlines()[0].split(",")
    assert header[-5:] == ["priority", "preempted_gpu_hours", "stages", "failures", "lost_gpu_seconds"]
    assert simulate_main(argv) == 0
    assert "failures" not in json.loads(out.read_text())


@pytest.mark.parametrize(("flags", "message"), [
    (["--gpu-mtbf", "100"], "--gpu-mtbf needs --failures"),
    (["--failures", "--server-mtbf", "0"], "argument --server-mtbf: must be > 0"),
    (["--failures", "--repair-time", "inf"], "argument --repair-time: must be finite"),
    (["--failures", "--checkpoint-interval", "x"], "argument --checkpoint-interval: not a number"),
])
def test_cli_bad_failure_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
                               message: str) -> None:
    from pal_opt.cli import main

    out = tmp_path / "r.json"
    assert main(["simulate", str(TRACE), "-o", str(out), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and not out.exists()


def test_a_later_failure_in_the_round_is_not_known_early() -> None:
    """Regression (found by the property test): a GPU failure at t=2580 in the round from 2520 while a
    server failure later in the same round had been drawn already: the repair at 2580 must see only
    the GPUs out at 2580, so the 5-GPU job on the surviving GPUs is not hit and keeps them."""
    trace = [TraceJob(id=0, demand=1, submit_time=500.0, iterations=1800.0, model="m", perfclass="classA",
                      iter_time=1.0),
             TraceJob(id=1, demand=5, submit_time=0.0, iterations=4800.0, model="m", perfclass="classA",
                      iter_time=1.0)]
    cfg = SimConfig(policy="packed-sticky", locality_penalty=1.0, seed=179,
                    failures=FailureConfig(gpu_mtbf_hours=5.0, server_mtbf_hours=5.0, repair_time=600.0,
                                           checkpoint_interval=300.0))
    res = simulate(trace, Cluster.uniform(3, 3, {"classA": [1.0] * 9}), cfg, validate=True)
    assert all(j.finish_time is not None for j in res.jobs)
    f = res.summary["failures"]
    assert f["failures"] >= 3 and f["jobs_hit"] >= 2


def test_a_restart_cost_that_runs_past_the_round_is_paid_in_full() -> None:
    """The job of the test above restarts mid-round on the spare GPU and pays a 300 s restart
    cost of a 360 s round: what the round's end left of it was dropped, so the job finished
    early (review: 71.8 s of 300 lost in one such case)."""
    cluster = Cluster.uniform(2, 2, {"classA": [1.0, 1.0, 1.0, 1.0]})
    cfg = SimConfig(policy="pal", seed=2, restart_cost=300.0,
                    failures=FailureConfig(gpu_mtbf_hours=math.inf, server_mtbf_hours=20.0, repair_time=36_000,
                                           checkpoint_interval=600))
    res = simulate([_job(0, 1, 0.0, 50_000.0)], cluster, cfg, validate=True)
    t_hit, _, _, lost = res.failures.hits[0]
    assert 360 - t_hit % 360 < 300  # the restore crosses the round's end
    job = res.jobs[0]
    assert (job.restarts, job.moves) == (2, 1)  # the failure's, and PAL's move back once server 0 is repaired
    assert job.finish_time == pytest.approx(t_hit + 2 * 300 + 50_000 - (t_hit - lost))
    assert job.run_seconds == pytest.approx(50_000 + lost)


def test_a_restart_cost_of_a_whole_round_is_refused() -> None:
    """Two jobs trading one GPU every round (LAS), each resume losing the whole round, never end:
    the run went on for ever, growing (review)."""
    with pytest.raises(OptionError, match="restart-cost must be below the round length"):
        simulate([_job(0, 1, 0.0, 1000.0)], Cluster.uniform(1, 1, {"classA": [1.0]}),
                 SimConfig(policy="pal", restart_cost=400.0))


def test_a_run_whose_failures_undo_all_work_stops(caplog: pytest.LogCaptureFixture) -> None:
    """A job failing every few minutes with no checkpoint never finishes: the run went on for
    ever (review).  It stops after STALL_FACTOR times the rounds its work needs, saying why."""
    from pal_opt.simulate.engine import STALL_FACTOR

    cfg = SimConfig(policy="pal", seed=0, failures=FailureConfig(gpu_mtbf_hours=0.05, server_mtbf_hours=math.inf,
                                                                 checkpoint_interval=math.inf))
    res = simulate([_job(0, 1, 0.0, 3600.0)], Cluster.uniform(1, 1, {"classA": [1.0]}), cfg)
    assert res.summary["n_completed"] == 0 and res.stopped_at is not None
    assert len(res.rounds) <= STALL_FACTOR * 10 + 1000
    assert "restarts or failures undo their work" in caplog.text
