"""The trace-driven simulator: queue orders, hand-checked runs, determinism, CLI, shared traces."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pal_opt.errors import InstanceError, OptionError
from pal_opt.io.traces import TraceJob, read_trace
from pal_opt.methods import greedy_names
from pal_opt.model import Cluster
from pal_opt.simulate import (
    JOB_COLUMNS,
    QueueEntry,
    SimConfig,
    build_cluster,
    jobs_csv_text,
    order_queue,
    parse_cluster,
    restart_cost_units,
    result_to_dict,
    simulate,
)
from pal_opt.simulate.cli import main as simulate_main
from pal_opt.simulate.variability import artifact_draw_factors, class_files, draw_cluster_factors

TRACE_HEADER = "job_id,num_gpus,submit_time,duration,model\n"


def _job(jid: int, demand: int, submit: float, iters: float, iter_time: float = 1.0, cls: str = "classA") -> TraceJob:
    return TraceJob(id=jid, demand=demand, submit_time=submit, iterations=iters, model="m",
                    perfclass=cls, iter_time=iter_time)


def _strip_timing(d: dict) -> dict:
    d = dict(d)
    for k in ("solve_seconds_total", "solve_seconds_mean", "solve_seconds_max", "wall_seconds"):
        d.pop(k)
    d["round_log"] = {k: v for k, v in d["round_log"].items() if k != "solve_seconds"}
    return d


# ----------------------------------------------------------------------------- queue policies
def test_queue_orders_and_ties() -> None:
    es = [
        QueueEntry(0, submit_time=10.0, attained=720.0, remaining_seconds=50.0),
        QueueEntry(1, submit_time=5.0, attained=0.0, remaining_seconds=900.0),
        QueueEntry(2, submit_time=5.0, attained=0.0, remaining_seconds=50.0),
        QueueEntry(3, submit_time=1.0, attained=360.0, remaining_seconds=400.0),
    ]
    assert order_queue(es, "fifo") == [3, 1, 2, 0]  # submit time, then trace order
    assert order_queue(es, "las") == [1, 2, 3, 0]  # attained GPU-seconds, then submit, then index
    assert order_queue(es, "srtf") == [2, 0, 3, 1]  # remaining seconds, then submit time
    assert order_queue(es, "FIFO") == order_queue(es, "fifo")
    with pytest.raises(OptionError, match="unknown queue policy 'edf'"):
        order_queue(es, "edf")


def test_parse_cluster() -> None:
    assert parse_cluster("16x4").num_gpus == 64
    spec = parse_cluster("2x3x4")
    assert (spec.racks, spec.servers, spec.gpus_per_server, str(spec)) == (2, 6, 4, "2x3x4")
    for bad in ("16", "0x4", "16x4x", "axb", "4x0"):
        with pytest.raises(OptionError):
            parse_cluster(bad)


def test_restart_cost_units() -> None:
    assert restart_cost_units(0.0, 360.0) == 0.0
    assert restart_cost_units(180.0, 360.0) == pytest.approx(math.log(2.0))
    assert math.isfinite(restart_cost_units(1e9, 360.0))


# ----------------------------------------------------------------------------- hand-checked runs
@pytest.mark.parametrize("policy", ["pal", "pmfirst"])
def test_two_jobs_one_server_by_hand(policy: str) -> None:
    """One 4-GPU server, GPUs 0-1 at factor 1.0 and 2-3 at 1.5; 360 s rounds.

    Round t=0: only J0 (2 GPUs, 1000 it × 0.5 s) is there; it takes GPUs 0-1 and runs 720 it.
    Round t=360: J1 (2 GPUs, 100 it × 1 s, submitted at 20) joins.  J0 keeps the fast pair and
    finishes its 280 it at 360 + 140 = 500; J1 runs on the 1.5 pair: 150 s -> 510.
    """
    cluster = Cluster.uniform(1, 4, {"classA": [1.0, 1.0, 1.5, 1.5]})
    trace = [_job(0, 2, 0.0, 1000, 0.5), _job(1, 2, 20.0, 100, 1.0)]
    res = simulate(trace, cluster, SimConfig(policy=policy, round_length=360.0), validate=True)
    j0, j1 = res.jobs
    assert j0.finish_time == pytest.approx(500.0) and j0.jct == pytest.approx(500.0)
    assert j1.finish_time == pytest.approx(510.0) and j1.jct == pytest.approx(490.0)
    assert (j0.queueing_delay, j1.queueing_delay) == (0.0, 340.0)
    assert j1.mean_slowdown == pytest.approx(1.5) and j0.mean_slowdown == pytest.approx(1.0)
    s = res.summary
    assert s["avg_jct"] == pytest.approx(495.0)
    assert s["makespan"] == pytest.approx(510.0)
    busy = 2 * 360 + 2 * 140 + 2 * 150
    assert s["busy_gpu_seconds"] == pytest.approx(busy)
    assert s["utilisation"] == pytest.approx(busy / (4 * 510.0))
    assert s["avg_queueing_delay"] == pytest.approx(170.0)
    assert s["rounds"] == 2 and s["fallbacks"] == 0 and s["preemptions"] == 0


def test_locality_penalty_slows_a_spanning_gang() -> None:
    """A 2-GPU job on two 1-GPU servers spans: slowdown λ × max factor = 2.0 × 1.1."""
    cluster = Cluster.uniform(2, 1, {"classA": [1.0, 1.1]})
    res = simulate([_job(0, 2, 0.0, 100, 1.0)], cluster, SimConfig(policy="pal", locality_penalty=2.0))
    assert res.jobs[0].finish_time == pytest.approx(100 * 2.2)
    assert res.jobs[0].rounds_spanning == 1


@pytest.mark.parametrize(("restart", "jct_a", "jct_b"), [(0.0, 860.0, 1120.0), (60.0, 920.0, 1180.0)])
def test_las_preemption_and_restart_cost_by_hand(restart: float, jct_a: float, jct_b: float) -> None:
    """One GPU, LAS.  A (500 s) runs round 0; B (500 s, submitted at 100) has less service and
    runs round 1 (first start, no cost); at t=720 both attained 360 GPU-s, A is older and
    resumes (pays the restart cost), finishing 140 s of work; B resumes at 1080."""
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    trace = [_job(0, 1, 0.0, 500), _job(1, 1, 100.0, 500)]
    cfg = SimConfig(policy="pal", queue="las", restart_cost=restart)
    res = simulate(trace, cluster, cfg, validate=True)
    a, b = res.jobs
    assert a.jct == pytest.approx(jct_a) and b.jct == pytest.approx(jct_b)
    assert (a.preemptions, b.preemptions, a.restarts, b.restarts) == (1, 1, 1, 1)
    assert b.first_start == 360.0
    assert res.summary["preemptions"] == 2


def test_idle_gap_is_skipped_and_arrivals_wait_for_a_round_boundary() -> None:
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    trace = [_job(0, 1, 0.0, 10), _job(1, 1, 36000.5, 10)]
    res = simulate(trace, cluster, SimConfig(policy="packed"))
    assert res.jobs[1].first_start == 36360.0 and res.jobs[1].jct == pytest.approx(369.5)
    assert res.summary["rounds"] == 2


def test_progress_is_told_after_every_round_of_the_jobs_finished() -> None:
    """``simulate(progress=...)``, what ``pal-opt simulate``'s bar counts: (jobs finished, jobs in
    the trace, the round's end) after each round, up to every job (the by-hand run above: J0 and J1
    both finish in the second round); with ``max_time`` it stops short, as the run does."""
    cluster = Cluster.uniform(1, 4, {"classA": [1.0, 1.0, 1.5, 1.5]})
    trace = [_job(0, 2, 0.0, 1000, 0.5), _job(1, 2, 20.0, 100, 1.0)]
    calls: list[tuple[int, int, float]] = []
    res = simulate(trace, cluster, SimConfig(policy="pal", round_length=360.0), progress=lambda *a: calls.append(a))
    assert calls == [(0, 2, 360.0), (2, 2, 720.0)] and len(calls) == res.summary["rounds"]
    one = Cluster.uniform(1, 1, {"classA": [1.0]})
    calls.clear()
    simulate([_job(0, 1, 0.0, 100), _job(1, 1, 0.0, 1000)], one, SimConfig(policy="pal", max_time=720.0),
             progress=lambda *a: calls.append(a))
    assert calls == [(1, 2, 360.0), (1, 2, 720.0)]


def test_max_time_stops_the_run_with_jobs_unfinished() -> None:
    """One GPU, 360 s rounds, FIFO.  J0 (100 s) runs round 0; J1 (1000 s) runs round 360; with
    max_time 720 no round starts at 720: J1 is left with 640 s to go, and the summary says so."""
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    trace = [_job(0, 1, 0.0, 100), _job(1, 1, 0.0, 1000)]
    full = simulate(trace, cluster, SimConfig(policy="pal"))
    assert full.jobs[1].finish_time == pytest.approx(1360.0) and full.summary["stopped_at"] is None
    res = simulate(trace, cluster, SimConfig(policy="pal", max_time=720.0), validate=True)
    j0, j1 = res.jobs
    assert j0.finish_time == pytest.approx(100.0) and j1.finish_time is None and j1.attained == pytest.approx(360.0)
    s = res.summary
    assert (s["n_jobs"], s["n_completed"], s["rounds"], s["stopped_at"]) == (2, 1, 2, 720.0)
    assert s["avg_jct"] == pytest.approx(100.0) and s["utilisation"] == pytest.approx((100 + 360) / 720)
    assert res.config["max_time"] == 720.0 and "max_time" not in full.config
    # a cap after the last finish changes nothing
    same = simulate(trace, cluster, SimConfig(policy="pal", max_time=1e6))
    assert same.jobs[1].finish_time == full.jobs[1].finish_time and same.summary["stopped_at"] is None
    with pytest.raises(OptionError, match="max_time must be a number of seconds > 0"):
        simulate(trace, cluster, SimConfig(policy="pal", max_time=0.0))


@pytest.mark.parametrize(("ilp_options", "given"), [(3, "int 3"), ([("gap", 0.1)], "list"), ("gap=0.1", "str")])
def test_ilp_options_that_are_not_a_mapping_are_a_pal_opt_error(ilp_options: Any, given: str) -> None:
    """``SimConfig(ilp_options=[...]).validate()`` raised Python's ``TypeError: cannot convert
    dictionary update sequence element #0 to a sequence`` (3: ``'int' object is not iterable``)."""
    from pal_opt.errors import InputTypeError

    with pytest.raises(InputTypeError, match=rf"^ilp_options: must be a mapping of option names to values, got {given}"):
        SimConfig(policy="ilp", ilp_options=ilp_options).validate()


def test_max_time_inside_an_idle_gap_stops_at_the_cap() -> None:
    """J0 (100 s) finishes in round 0, J1 arrives 10 hours later; with max_time one hour the run
    stops at 3600 s, not at J1's arrival (the idle skip jumped past the cap: ``stopped_at``
    was 36000 and the utilisation was taken over ten hours)."""
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    trace = [_job(0, 1, 0.0, 100), _job(1, 1, 36000.0, 10)]
    res = simulate(trace, cluster, SimConfig(policy="pal", max_time=3600.0))
    s = res.summary
    assert (s["n_completed"], s["rounds"], s["stopped_at"]) == (1, 1, 3600.0)
    assert s["utilisation"] == pytest.approx(100 / 3600)
    assert res.jobs[1].first_start is None and res.jobs[1].finish_time is None


class _Axes:
    """Records what a panel draws (the figure's data, not its pixels)."""

    def __init__(self) -> None:
        self.steps: dict[str, tuple[list[float], list[float]]] = {}
        self.texts: list[str] = []
        self.labels: list[str] = []

    def step(self, x: Any, y: Any, where: str, label: str, **kw: Any) -> None:
        self.steps[label.split(" (avg")[0]] = (list(map(float, x)), list(map(float, y)))
        self.labels.append(label)

    def text(self, x: float, y: float, s: str, **kw: Any) -> None:
        self.texts.append(s)

    def __getattr__(self, name: str) -> Any:  # set_xlabel, legend, xaxis.set_major_formatter...: nothing to record
        return _Nothing()


class _Nothing:
    """A call or an attribute that records nothing."""

    def __call__(self, *a: Any, **k: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return _Nothing()


#: The figure titles :func:`_drawn` saw.
TITLES: list[str] = []


def _drawn(monkeypatch: pytest.MonkeyPatch, results: dict) -> list[_Axes]:
    from pal_opt.simulate import metrics

    axes: list[_Axes] = []

    def subplots(self: Any, rows: int, cols: int, **k: Any) -> tuple[Any, list[list[_Axes]]]:
        axes.extend(_Axes() for _ in range(cols))
        return fig, [axes]

    fig = type("Fig", (), {"tight_layout": lambda self: None, "savefig": lambda self, buf, **k: buf.write(b"x"),
                           "suptitle": lambda self, text, **k: TITLES.append(text)})()
    plt = type("Plt", (), {"subplots": subplots, "close": lambda self, f: None})()
    monkeypatch.setattr(metrics, "agg_pyplot", lambda: plt)
    metrics.result_figure(results, "f.png")
    return axes


def test_plots_of_a_stopped_run_and_of_an_idle_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The JCT CDF of a run stopped early ends at n_completed / n_jobs, not at 1; the utilisation
    is 0 over an idle gap (no round: the step held the last round's value across it) and the last
    round is drawn to its end; a run where no job finished draws no CDF line and says so."""
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    stopped = simulate([_job(0, 1, 0.0, 100), _job(1, 1, 0.0, 1000)], cluster, SimConfig(max_time=720.0))
    gap = simulate([_job(0, 1, 0.0, 180), _job(1, 1, 3600.0, 360)], cluster, SimConfig())
    cdf, util, ratio = _drawn(monkeypatch, {"stopped": stopped, "gap": gap})
    assert cdf.steps["stopped"][1] == [0.5] and cdf.steps["gap"][1] == [0.5, 1.0]
    # with several policies a third panel: each job's JCT against the first policy's, over the
    # jobs both finished (job 0 only: 180 s against 100 s)
    assert ratio.steps == {"gap": ([1.8], [1.0])}
    assert cdf.labels == ["stopped (avg 0.03 h)", "gap (avg 0.07 h)"]  # 270 s
    assert util.steps["stopped"] == ([0.0, 0.1, 0.2], [100 / 360, 1.0, 1.0])
    assert util.steps["gap"] == ([0.0, 0.1, 1.0, 1.1], [0.5, 0.0, 1.0, 1.0])
    none = simulate([_job(0, 1, 0.0, 1000)], cluster, SimConfig(max_time=360.0))
    cdf, _ = _drawn(monkeypatch, {"none": none})
    assert cdf.steps == {} and cdf.texts == ["no job finished"]


def test_the_jct_cdf_of_a_run_with_an_unplaceable_job_reaches_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job no cluster GPU set can hold (2 GPUs on 1) is not counted: the one other job finished,
    and the CDF ends at 1, not at 1/2."""
    cluster = Cluster.uniform(1, 1, {"classA": [1.0]})
    res = simulate([_job(0, 1, 0.0, 100), _job(1, 2, 0.0, 100)], cluster, SimConfig())
    assert list(res.unplaceable) == [1]
    cdf, _ = _drawn(monkeypatch, {"alone": res})
    assert cdf.steps["alone"][1] == [1.0]
    assert TITLES[-1] == "360 s rounds, seed 0"  # what was simulated (a CLI run adds the trace and cluster)


# ----------------------------------------------------------------------------- bad input
BAD_CONFIGS = [  # (fields, the message pinned: the same as simulate() gave when it alone checked them)
    ({"queue": "lifo"}, "unknown queue policy 'lifo'; choose one of fifo, las, srtf"),
    ({"round_length": 0}, "round_length must be a number of seconds > 0 and at most 1e+15, got 0"),
    ({"rack_penalty": 0.5}, "rack_penalty must be a finite number >= 1, got 0.5"),
    ({"restart_cost": 360.0}, "restart-cost must be below the round length (360 s ≥ 360 s): jobs that trade GPUs "
                              "every round would never end"),
    ({"max_time": 0.0}, "max_time must be a number of seconds > 0 and at most 1e+15, got 0.0"),
    ({"seed": -1}, "seed must be an integer >= 0, got -1"),
    ({"failures": {"scale": 2}}, "failures must be a FailureConfig or None, got dict"),
    ({"locality_penalty": 0.5}, "locality_penalty must be a finite number >= 1, got 0.5"),
    ({"policy": "pal", "backend": "highs"}, "option(s) backend do not apply to method 'pal'"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_CONFIGS, ids=[",".join(f) for f, _ in BAD_CONFIGS])
def test_a_bad_config_is_refused_when_built(fields: dict[str, Any], message: str) -> None:
    """``SimConfig`` checks itself when built, as the Sia simulator's ``SimConfig`` and
    ``ClusterSpec``: only :func:`simulate` checked it, so a bad value was reported when the run
    started, far from the line that built it.  :func:`dataclasses.replace` checks the copy too;
    ``validate()`` is still there and passes on a config that was built."""
    import dataclasses

    with pytest.raises(OptionError, match=f"^{re.escape(message)}$"):
        SimConfig(**fields)
    with pytest.raises(OptionError, match=f"^{re.escape(message)}$"):
        dataclasses.replace(SimConfig(), **fields)
    SimConfig().validate()


def test_bad_input_errors() -> None:
    cluster = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    with pytest.raises(InstanceError, match="class 'classB' has no GPU factors"):
        simulate([_job(0, 1, 0.0, 10, cls="classB")], cluster, SimConfig(policy="pal"))
    with pytest.raises(InstanceError, match="no jobs"):
        simulate([], cluster, SimConfig())
    with pytest.raises(OptionError, match="unknown policy"):
        simulate([_job(0, 1, 0.0, 10)], cluster, SimConfig(policy="best"))
    with pytest.raises(OptionError, match="do not apply to method 'pal'"):
        simulate([_job(0, 1, 0.0, 10)], cluster, SimConfig(policy="pal", backend="highs"))
    with pytest.raises(OptionError, match="locality_penalty"):
        SimConfig(locality_penalty=0.5).validate()
    with pytest.raises(OptionError, match="unknown variability draw"):
        build_cluster(parse_cluster("1x1"), draw="python")


def test_a_run_that_would_not_end_is_refused_unless_capped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job of 10**15 iterations kept the simulator going for ever (about 5e11 rounds).  Without
    max_time such a trace is bad input naming its row; with max_time it runs to the cap."""
    from pal_opt.simulate.engine import MAX_ROUNDS

    cluster = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    huge = [_job(0, 1, 0.0, 1e15), _job(1, 1, 0.0, 10)]
    with pytest.raises(InstanceError, match="job 0 runs 2.78e\\+12 rounds of 360 s"):
        simulate(huge, cluster, SimConfig(policy="pal"))
    res = simulate(huge, cluster, SimConfig(policy="pal", max_time=3600.0))
    assert res.summary["n_completed"] == 1 and res.summary["stopped_at"] == 3600.0
    # many jobs, each short enough, that would fill the cluster for too long
    many = [_job(i, 2, 0.0, 360.0 * MAX_ROUNDS / 4) for i in range(8)]
    with pytest.raises(InstanceError, match="the trace's work fills the cluster for 2e\\+06 rounds"):
        simulate(many, cluster, SimConfig(policy="pal"))
    # a job bigger than the cluster never runs: its length does not count
    simulate([_job(0, 3, 0.0, 1e15), _job(1, 1, 0.0, 10)], cluster, SimConfig(policy="pal"))
    # a submit time past the last round: at 1e300 s a 10 s job reported a JCT of 0 (review)
    with pytest.raises(InstanceError, match="job 1 is submitted after 2.78e\\+297 rounds of 360 s"):
        simulate([_job(0, 1, 0.0, 10), _job(1, 1, 1e300, 10)], cluster, SimConfig(policy="pal"))
    # on the command line: one line naming the file, row and column, exit 2, nothing written
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE_HEADER + "0,1,0,1e15,resnet50\n1,1,0,10,resnet50\n", encoding="utf-8")
    out = tmp_path / "r.json"
    capsys.readouterr()
    assert simulate_main([str(trace), "--cluster", "1x2", "--synthetic-variability", "0", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"pal-opt: error: {trace}: row 2, column duration: job 0 runs ") and "--max-hours" in err
    assert len(err.splitlines()) == 1 and not out.exists()


# ----------------------------------------------------------------------------- variability
def test_variability_draws() -> None:
    f1, o1 = draw_cluster_factors(64, seed=5)
    f2, _ = draw_cluster_factors(64, seed=5)
    f3, _ = draw_cluster_factors(64, seed=6)
    assert all(np.array_equal(f1[c], f2[c]) for c in f1)
    assert not np.array_equal(f1["classA"], f3["classA"])
    assert set(o1) == {"classA", "classB", "classC", "classD"}
    for c, v in f1.items():
        assert v.shape == (64,) and np.all(v > 0), c


def test_synthetic_fallback_without_shared(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PAL_OPT_SHARED", str(tmp_path))
    assert set(class_files().values()) == {None}
    f, o = draw_cluster_factors(16, seed=0)
    assert set(o.values()) == {"synthetic"} and f["classA"].shape == (16,)
    fa, _ = artifact_draw_factors(16)
    assert fa["classD"].shape == (16,)


def test_measurement_file_override(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    p.write_text("uuid,perf\na,10\nb,20\nc,40\n", encoding="utf-8")
    f, o = draw_cluster_factors(50, {"classA": p}, seed=1)
    assert o["classA"] == str(p)
    assert set(np.unique(f["classA"])) <= {0.5, 1.0, 2.0}
    bad = tmp_path / "bad.csv"
    bad.write_text("uuid,perf\na,10\nb,-1\n", encoding="utf-8")
    with pytest.raises(InstanceError, match="line 3, column perf"):
        draw_cluster_factors(4, {"classA": bad}, seed=1)


def test_artifact_draw_on_shared_files(shared_dir: Path) -> None:
    f, o = artifact_draw_factors(64)
    g, _ = artifact_draw_factors(64)
    assert all(np.array_equal(f[c], g[c]) for c in f)
    assert o["classA"].endswith("resnet-longhorn-agg.csv")
    # classB and classC read the same file but draw separately, as the artifact does
    assert not np.array_equal(f["classB"], f["classC"])
    # the artifact's 16x4 cluster holds one slow ResNet outlier GPU (2.83x the median run)
    assert int((f["classA"] > 2.0).sum()) == 1


# ----------------------------------------------------------------------------- determinism
def _small_trace(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    models = ["vgg19", "PointNet", "resnet50", "BERT", "DCGAN", "GPT2"]
    lines = [TRACE_HEADER]
    for i in range(24):
        g = int(rng.choice([1, 1, 2, 4, 6, 8]))
        lines.append(f"{i},{g},{int(i * 200)},{int(rng.integers(500, 5000))},{models[i % len(models)]}\n")
    p = tmp_path / "small.csv"
    p.write_text("".join(lines), encoding="utf-8")
    return p


@pytest.mark.parametrize("policy", ["random", "pal"])
def test_deterministic(tmp_path: Path, policy: str) -> None:
    trace = read_trace(_small_trace(tmp_path))
    spec = parse_cluster("4x4")
    runs = []
    for seed in (3, 3, 4):
        cluster, _ = build_cluster(spec, seed=seed)
        res = simulate(trace, cluster, SimConfig(policy=policy, seed=seed, queue="las"))
        runs.append(_strip_timing(result_to_dict(res)))
    assert runs[0] == runs[1]
    assert runs[0]["job_results"] != runs[2]["job_results"]


# ----------------------------------------------------------------------------- CLI
def test_cli_writes_outputs(tmp_path: Path) -> None:
    trace = _small_trace(tmp_path)
    out, jobs, png = tmp_path / "r.json", tmp_path / "j.csv", tmp_path / "p.png"
    rc = simulate_main([str(trace), "--cluster", "4x4", "--policy", "pmfirst", "--queue", "srtf",
                        "--out", str(out), "--jobs-csv", str(jobs), "--plot", str(png), "--quiet"])
    assert rc == 0
    doc = json.loads(out.read_text())
    for key in ("avg_jct", "p99_jct", "makespan", "utilisation", "queueing_delay", "fallbacks",
                "job_results", "config"):
        assert key in doc
    assert doc["config"]["policy"] == "pmfirst" and doc["config"]["cluster"] == "4x4"
    assert len(doc["job_results"]) == 24
    rows = list(csv.DictReader(jobs.open()))
    assert tuple(rows[0]) == JOB_COLUMNS and len(rows) == 24
    assert png.stat().st_size > 1000


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--cluster", "4"], "--cluster"),
        (["--policy", "pal", "--time-limit", "3"], "--time-limit do not apply to method 'pal'"),
        (["--variability", "classA"], "CLASS=FILE"),
        (["--variability", "classA=/no/such.csv"], "no such file"),
    ],
)
def test_cli_bad_input_exit_2_and_no_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            args: list[str], fragment: str) -> None:
    trace = _small_trace(tmp_path)
    out = tmp_path / "r.json"
    rc = simulate_main([str(trace), "--out", str(out), "--quiet", *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert fragment in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_bad_trace_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(TRACE_HEADER + "0,1,0,10,vgg19\n1,-2,0,10,vgg19\n", encoding="utf-8")
    out = tmp_path / "r.json"
    assert simulate_main([str(bad), "--out", str(out), "--quiet"]) == 2
    assert f"{bad}: row 3, column num_gpus" in capsys.readouterr().err
    assert not out.exists()


def test_registered_in_pal_opt_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = pytest.importorskip("pal_opt.cli")
    trace = _small_trace(tmp_path)
    out = tmp_path / "r.json"
    assert cli.main(["simulate", str(trace), "--cluster", "4x4", "--out", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["n_completed"] == 24
    # jobs larger than the cluster are kept, reported as unplaceable, and the others finish
    capsys.readouterr()
    assert cli.main(["simulate", str(trace), "--cluster", "1x1", "--out", str(tmp_path / "x.json")]) == 0
    doc = json.loads((tmp_path / "x.json").read_text())
    assert doc["unplaceable"] and all("the cluster has 1" in u["reason"] for u in doc["unplaceable"])
    assert doc["n_completed"] + len(doc["unplaceable"]) == 24
    assert "unplaceable: job" in capsys.readouterr().out


def test_cli_max_hours_on_a_pal_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--max-hours applies to PAL traces too (it was refused as a Sia-only flag): the run stops,
    exit 0, and both the file and the printed line say how many jobs finished."""
    cli = pytest.importorskip("pal_opt.cli")
    trace = _small_trace(tmp_path)
    out = tmp_path / "r.json"
    capsys.readouterr()
    assert cli.main(["simulate", str(trace), "--cluster", "4x4", "--synthetic-variability", "1",
                     "--max-hours", "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["n_jobs"] == 24 and doc["n_completed"] < 24 and doc["config"]["max_time"] == 3600.0
    assert doc["stopped_at"] == 3600.0 and max(doc["round_log"]["time"]) < 3600.0
    assert f"{doc['n_completed']}/24 jobs finished" in capsys.readouterr().out
    # so short that no job finishes: the summary line still prints, with no JCT
    assert cli.main(["simulate", str(trace), "--cluster", "4x4", "--synthetic-variability", "1",
                     "--max-hours", "0.01", "--out", str(out)]) == 0
    stopped = json.loads(out.read_text())
    assert stopped["n_completed"] == 0 and stopped["makespan"] is None  # no job gave one
    printed = capsys.readouterr().out
    assert "0/24 jobs finished, avg JCT - h" in printed and "makespan - h" in printed


# ----------------------------------------------------------------------------- shared trace
@pytest.fixture(scope="module")
def truncated_trace(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = shared_dir / "data" / "pal-artifact" / "traces" / "workload-1.csv"
    lines = src.read_text().splitlines(keepends=True)[:31]  # header + 30 jobs
    p = tmp_path_factory.mktemp("trace") / "workload-1-head30.csv"
    p.write_text("".join(lines), encoding="utf-8")
    return p


@pytest.mark.parametrize("policy", greedy_names())
def test_shared_trace_every_greedy_policy(truncated_trace: Path, policy: str) -> None:
    trace = read_trace(truncated_trace)
    cluster, origins = build_cluster(parse_cluster("16x4"), draw="artifact")
    assert all(o.endswith(".csv") for o in origins.values())
    res = simulate(trace, cluster, SimConfig(policy=policy), validate=True)
    s = res.summary
    assert s["n_completed"] == 30 and s["fallbacks"] == 0
    assert 0 < s["utilisation"] <= 1
    ideal = {j.job_id: j.ideal_seconds for j in res.jobs}
    for j in res.jobs:
        # a job never beats its ideal run time by more than the fastest GPU allows
        assert j.jct >= 0.9 * ideal[j.job_id]
        assert j.finish_time >= j.first_start >= j.submit_time
    assert jobs_csv_text(res).count("\n") == 31


@pytest.mark.parametrize("admission", ["prefix", "backfill"])
def test_shared_trace_ilp(truncated_trace: Path, admission: str) -> None:
    pytest.importorskip("pal_opt.ilp")
    trace = read_trace(truncated_trace)[:12]
    cluster, _ = build_cluster(parse_cluster("4x4"), draw="artifact")
    cfg = SimConfig(policy="ilp", admission=admission, time_limit=5.0)
    res = simulate(trace, cluster, cfg, validate=True)
    assert res.summary["n_completed"] == 12
    assert res.summary["fallbacks"] >= 0 and res.summary["solve_seconds_total"] > 0
    assert {r.status for r in res.rounds} <= {"optimal", "feasible", "fallback"}


@pytest.mark.parametrize("policy", ["pal", "ilp"])
def test_an_oversized_job_is_reported_and_the_rest_finish(policy: str) -> None:
    cluster = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    trace = [_job(0, 1, 0.0, 10), _job(1, 3, 5.0, 10), _job(2, 2, 10.0, 10)]
    res = simulate(trace, cluster, SimConfig(policy=policy, round_length=60.0))
    assert res.unplaceable == {1: "needs 3 GPUs; the cluster has 2"}
    assert res.summary["n_completed"] == 2 and res.summary["n_jobs"] == 3
    doc = result_to_dict(res)
    assert doc["unplaceable"] == [{"job": 1, "reason": "needs 3 GPUs; the cluster has 2"}]


# ----------------------------------------------------------------------------- observing rounds
def test_on_round_sees_every_round_and_the_answer_that_ran() -> None:
    """``on_round`` is called once per round that ran, before it runs, with the round instance
    and the method's result; the simulation is the same with and without it."""
    cluster = Cluster.uniform(2, 4, {"classA": [1.0, 1.1, 1.0, 1.3, 1.0, 1.0, 1.2, 1.0]})
    trace = [_job(0, 4, 0.0, 700.0), _job(1, 2, 0.0, 200.0), _job(2, 8, 400.0, 300.0), _job(3, 1, 1200.0, 50.0)]
    seen: list[tuple[float, dict]] = []

    def observe(inst, res) -> None:
        assert {j.id for j in inst.jobs} >= set(res.placements)
        seen.append((float(inst.name.rsplit("t=", 1)[-1]), {k: tuple(v) for k, v in res.placements.items()}))

    cfg = SimConfig(policy="pal", round_length=360.0)
    observed = simulate(trace, cluster, cfg, on_round=observe)
    plain = simulate(trace, cluster, cfg)
    assert [r.time for r in observed.rounds] == [t for t, _ in seen]
    assert [sum(len(g) for g in pl.values()) for _, pl in seen] == [r.gpus_placed for r in observed.rounds]
    assert _strip_timing(result_to_dict(observed)) == _strip_timing(result_to_dict(plain))


def test_minor_tick_labels_only_where_they_fit() -> None:
    """Over 0.01 h to 2,000 h the labels ran into each other ("0.020.03"); a review of the change."""
    from types import SimpleNamespace

    from pal_opt.simulate.metrics import _minor_label

    narrow, wide = SimpleNamespace(get_xlim=lambda: (0.5, 8.0)), SimpleNamespace(get_xlim=lambda: (0.01, 2000.0))
    assert [_minor_label(narrow, v) for v in (0.6, 2.0, 3.0, 4.0, 5.0)] == ["", "2", "3", "", "5"]
    assert {_minor_label(wide, v) for v in (0.02, 0.03, 20.0, 300.0)} == {""}


def test_restore_time_is_not_progress() -> None:
    """One 2-GPU server, LAS, restart cost 60 s.  A and B (700 s each on 2 GPUs, B submitted at
    100) take turns:
    A 360 s; B 360 s; A resumes (60 s restoring, 300 s of work: 40 s left); B likewise; A
    resumes at 1440 and finishes at 1440 + 60 + 40; B at 1800 + 60 + 40."""
    cluster = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    trace = [_job(0, 2, 0.0, 700), _job(1, 2, 100.0, 700)]
    res = simulate(trace, cluster, SimConfig(policy="pal", queue="las", restart_cost=60.0), validate=True)
    a, b = res.jobs
    assert a.finish_time == pytest.approx(1540.0) and b.finish_time == pytest.approx(1900.0)
    assert (a.restarts, b.restarts) == (2, 2)
    assert a.run_seconds == pytest.approx(700.0) and b.run_seconds == pytest.approx(700.0)  # restoring is not running
    assert a.preempted_gpu_hours == pytest.approx(2 * 2 * 360 / 3600)  # twice, 2 GPUs for a round


def test_a_moved_job_pays_the_restart_cost() -> None:
    """One server, GPU 0 twice as fast as GPU 1, LAS, restart cost 60 s.  A (500 s) runs round 0
    on GPU 0; B (500 s, submitted at 100) has less service in round 1 and takes GPU 0, A moves to
    GPU 1: 60 s restoring, then its last 140 iterations at 2 s each, done at 360 + 60 + 280."""
    cluster = Cluster.uniform(1, 2, {"classA": [1.0, 2.0]})
    trace = [_job(0, 1, 0.0, 500), _job(1, 1, 100.0, 500)]
    res = simulate(trace, cluster, SimConfig(policy="pal", queue="las", restart_cost=60.0), validate=True)
    a, b = res.jobs
    assert (a.moves, a.restarts, b.moves, b.restarts) == (1, 1, 0, 0)
    assert a.finish_time == pytest.approx(700.0) and b.finish_time == pytest.approx(860.0)
