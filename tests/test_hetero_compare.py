"""``pal-opt simulate`` on Sia traces, variability per GPU, and the comparators of ``sia``:
pal-opt's ``ilp`` with types (level program + core round program) and type-blind PAL / Packed."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pal_opt import cli
from pal_opt.check import violations
from pal_opt.errors import InstanceError, OptionError
from pal_opt.hetero.cli import detect_trace_format
from pal_opt.hetero.configs import GpuType, enumerate_configs
from pal_opt.hetero.goodput import JobKind
from pal_opt.hetero.gpus import Layout, Variability, draw_variability, parse_variability, placement_floor
from pal_opt.hetero.ilptypes import IlpTypesPolicy
from pal_opt.hetero.levelprogram import LevelRound, build_level_program
from pal_opt.hetero.profiles import Application, load_applications
from pal_opt.hetero.round import solve_program
from pal_opt.hetero.simjob import SimJob
from pal_opt.hetero.simulate import SimConfig, build_cluster, parse_cluster, simulate_sia
from pal_opt.hetero.typeblind import TypeBlindPolicy, gang_problem, gang_state
from pal_opt.hetero.workload import Workload, WorkloadJob, read_workload, workload_from_frame
from pal_opt.model import Cluster, Job, RoundInstance

PAPER = "aws:6x4,rtx:3x8,dgx-ext:2x8"


@pytest.fixture(scope="module")
def sia_dir(shared_dir: Path) -> Path:
    d = shared_dir / "data" / "sia-artifact"
    if not (d / "profiles").is_dir():
        pytest.skip(f"Sia artifact data not available at {d}")
    return d


@pytest.fixture(scope="module")
def longhorn(shared_dir: Path) -> Path:
    d = shared_dir / "data" / "pal-artifact" / "variability" / "longhorn"
    if not d.is_dir():
        pytest.skip(f"PAL Longhorn measurements not available at {d}")
    return d


@pytest.fixture(scope="module")
def apps(sia_dir: Path) -> dict[str, Application]:
    return dict(load_applications(sia_dir / "profiles", ["bert", "cifar10", "deepspeech2"]))


@pytest.fixture(scope="module")
def prefix(sia_dir: Path) -> Workload:
    wl = read_workload(sia_dir / "workloads" / "newtrace-7.csv")
    return workload_from_frame(wl.frame().iloc[:14].copy(), source="newtrace-7[:14]")


def _trace(sia_dir: Path, tmp_path: Path, rows: int = 4) -> Path:
    wl = read_workload(sia_dir / "workloads" / "newtrace-7.csv")
    path = tmp_path / "trace.csv"
    wl.frame().iloc[:rows].drop(columns="category").to_csv(path, index=False)
    return path


# -- the command line ----------------------------------------------------------------------------
def test_trace_format_from_the_header(tmp_path: Path) -> None:
    sia = tmp_path / "a.csv"
    sia.write_text("name,time,application,num_replicas,batch_size\nx,0,bert,2,96\n")
    pal = tmp_path / "b.csv"
    pal.write_text("job_id,num_gpus,submit_time,duration,model\n1,2,0,100,BERT\n")
    assert detect_trace_format(str(sia)) == "sia" and detect_trace_format(str(pal)) == "pal"
    for path in (sia, pal):  # a byte-order mark (Excel's "CSV UTF-8") does not hide the header
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert detect_trace_format(str(sia)) == "sia" and detect_trace_format(str(pal)) == "pal"
    # column names are case-insensitive (a header in title case was "cannot tell the trace format")
    sia.write_text("Name,Time,Application,Num_Replicas,Batch_Size\nx,0,bert,2,96\n")
    pal.write_text('"Job_ID",NUM_GPUS,Submit_Time,Duration,Model\n1,2,0,100,BERT\n')
    assert detect_trace_format(str(sia)) == "sia" and detect_trace_format(str(pal)) == "pal"
    # old Mac line endings (CR only) end the header too (the csv module refused the whole chunk)
    sia.write_bytes(b"name,time,application,num_replicas,batch_size\rx,0,bert,2,96\r")
    pal.write_bytes(b"job_id,num_gpus,submit_time,duration,model\r1,2,0,100,BERT\r")
    assert detect_trace_format(str(sia)) == "sia" and detect_trace_format(str(pal)) == "pal"


def test_simulate_on_a_sia_trace_equals_simulate_sia(sia_dir: Path, tmp_path: Path) -> None:
    trace = _trace(sia_dir, tmp_path)
    docs = []
    for command in ("simulate", "simulate-sia"):
        out = tmp_path / f"{command}.json"
        rc = cli.main([command, str(trace), "--cluster", PAPER, "--profiles", str(sia_dir / "profiles"),
                       "--policy", "sia", "--round", "60", "--out", str(out), "--quiet"])
        assert rc == 0
        docs.append(json.loads(out.read_text()))
    for key in ("avg_jct", "p50_jct", "p99_jct", "makespan", "n_jobs", "n_completed"):
        assert docs[0][key] == docs[1][key]
    assert docs[0]["n_completed"] == 4 and docs[0]["trace_format"] == "sia"
    # several policies, as simulate takes them (simulate-sia took one: "invalid choice 'sia,gavel'")
    for command in ("simulate", "simulate-sia"):
        out = tmp_path / f"{command}-two.json"
        rc = cli.main([command, str(trace), "--cluster", PAPER, "--profiles", str(sia_dir / "profiles"),
                       "--policy", "sia,gavel", "--out", str(out), "--quiet"])
        assert rc == 0
        docs.append(json.loads(out.read_text()))
    assert docs[2]["policies"] == docs[3]["policies"] == ["sia", "gavel"]
    for policy in ("sia", "gavel"):
        for key in ("avg_jct", "p99_jct", "makespan", "n_completed"):
            assert docs[2]["results"][policy][key] == docs[3]["results"][policy][key]
    assert docs[2]["results"]["sia"]["avg_jct"] == docs[0]["avg_jct"]



def test_simulate_with_variability_keeps_the_files_and_reports_the_slowdown(
    sia_dir: Path, longhorn: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(sia_dir, tmp_path)
    out = tmp_path / "var.json"
    f = str(longhorn / "resnet-longhorn-agg.csv")
    rc = cli.main(["simulate", str(trace), "--cluster", PAPER, "--profiles", str(sia_dir / "profiles"), "--policy", "ilp",
                   "--variability", f"aws:classA={f}", "--variability", f"dgx-ext:classA={f}", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert rc == 0 and doc["variability"] == {"aws:classA": f, "dgx-ext:classA": f}
    v = doc["variability_slowdown"]
    assert v["placement_floor"] <= v["mean"] and f"slowdown {v['mean']:.3f}" in capsys.readouterr().out

@pytest.mark.parametrize(
    ("which", "args", "message"),
    [
        ("sia", ["--queue", "las"], "--queue does not apply to a sia trace"),
        ("sia", ["--gap", "0.01"], "--gap does not apply to a sia trace"),
        ("sia", ["--profiles", "P", "--policy", "sia,pmfirst"], "--policy on a sia trace takes sia, ilp, pal, packed, "
                                                                "gavel, got pmfirst"),
        ("sia", ["--profiles", "P", "--policy", "pmfirst"], "--policy on a sia trace takes sia, ilp, pal, packed, gavel, "
                                                            "got pmfirst"),
        ("sia", ["--profiles", "P", "--variability", "aws=x.csv"], "'aws' is a GPU type; give TYPE:CLASS=FILE"),
        ("sia", ["--profiles", "P", "--variability", "aws:classA"], "expects TYPE:CLASS=FILE, CLASS=FILE"),
        ("sia", ["--profiles", "P", "--variability", "nodir"], "nodir: --variability: no such directory"),
        # a class's file for every type, of a class no job uses
        ("sia", ["--profiles", "P", "--variability", "imagenet=V"], "--variability aws:imagenet: no job of"),
        ("sia", ["--profiles", "P", "--variability", "h100:classA=V"], "unknown GPU type 'h100'"),
        # a file no job draws from was read and changed nothing (the run looked like one with variability)
        ("sia", ["--profiles", "P", "--variability", "aws:imagenet=V"], "--variability aws:imagenet: no job of"),
        ("sia", ["--profiles", "P", "--variability", "aws:cifar10=V", "aws:classA=V"],
         "--variability aws:classA: no job of"),
        ("pal", ["--profiles", "P"], "--profiles does not apply to a pal trace"),
        ("pal", ["--policy", "sia"], "--policy sia does not apply to a pal trace"),
        ("odd", [], "cannot tell the trace format from the header"),
        ("sia", ["--trace-format", "pal"], "missing column(s) job_id"),
        ("pal", ["--trace-format", "sia", "--profiles", "P"], "missing column(s) name"),
    ],
)
def test_simulate_bad_combinations_are_one_line_and_exit_2(
    sia_dir: Path, longhorn: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str, args: list[str],
    message: str,
) -> None:
    traces = {"sia": _trace(sia_dir, tmp_path, 2), "pal": tmp_path / "pal.csv", "odd": tmp_path / "odd.csv"}
    traces["pal"].write_text("job_id,num_gpus,submit_time,duration,model\n1,2,0,100,BERT\n")
    traces["odd"].write_text("a,b,c\n1,2,3\n")
    subst = {"P": str(sia_dir / "profiles"), "V": str(longhorn / "resnet-longhorn-agg.csv")}
    out = tmp_path / "out.json"
    rc = cli.main(["simulate", str(traces[which]), "--out", str(out), "--quiet", *[subst.get(a, a) if not a.endswith("=V") else a[:-1] + subst["V"] for a in args]])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not out.exists()


def test_simulate_without_profiles_takes_the_shared_ones_or_says_where_it_looked(
    sia_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --profiles a sia trace runs on the Sia artifact's profiles in the shared data, with a
    warning naming them (the same run as with them given); with no shared data it is one line, exit 2."""
    trace = _trace(sia_dir, tmp_path, 2)
    given, defaulted = tmp_path / "given.json", tmp_path / "defaulted.json"
    monkeypatch.setenv("PAL_OPT_SHARED", str(sia_dir.parents[1]))
    assert cli.main(["simulate", str(trace), "--profiles", str(sia_dir / "profiles"), "--out", str(given),
                     "--quiet"]) == 0
    for command in ("simulate", "simulate-sia"):
        caplog.clear()
        assert cli.main([command, str(trace), "--out", str(defaulted), "--quiet"]) == 0
        assert f"using the Sia artifact's profiles in {sia_dir / 'profiles'}" in caplog.text
        a, b = json.loads(given.read_text()), json.loads(defaulted.read_text())
        assert a["avg_jct"] == b["avg_jct"] and a["n_completed"] == b["n_completed"] == 2
    defaulted.unlink()
    monkeypatch.setenv("PAL_OPT_SHARED", str(tmp_path / "none"))
    capsys.readouterr()
    assert cli.main(["simulate-sia", str(trace), "--out", str(defaulted), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    looked = tmp_path / "none" / "data" / "sia-artifact" / "profiles"
    assert f"--profiles DIR is required for a sia trace: no Sia artifact profiles in {looked} " in err
    assert "\n" not in err
    assert not defaulted.exists()


# -- variability ----------------------------------------------------------------------------------
def test_variability_draw_is_per_type_seeded_and_nominal_without_files(longhorn: Path) -> None:
    types = (GpuType("aws", 2, 4), GpuType("rtx", 1, 8))
    layout = Layout(types)
    files = parse_variability([f"aws:classA={longhorn / 'resnet-longhorn-agg.csv'}"], types)
    a, b = draw_variability(layout, files, seed=3), draw_variability(layout, files, seed=3)
    assert np.array_equal(a.raw["classA"], b.raw["classA"])
    assert np.all(a.raw["classA"][8:] == 1.0) and np.ptp(a.raw["classA"][:8]) > 0  # rtx nominal
    assert len(np.unique(a.binned["classA"][:8])) <= 4  # PAL's binning: K = 2 + outliers
    assert a.slowdown("cifar10", [0, 1, 2]) == a.raw["classA"][:3].max()
    assert a.slowdown("bert", [0, 1]) == 1.0  # classB has no file
    nominal = draw_variability(layout, {}, seed=3)
    assert not nominal.active and nominal.slowdown("cifar10", [0, 1]) == 1.0
    with pytest.raises(OptionError, match="given twice"):
        parse_variability([f"aws:classA={longhorn / 'resnet-longhorn-agg.csv'}"] * 2, types)


def test_variability_for_every_type_from_a_file_or_the_longhorn_directory(longhorn: Path) -> None:
    types = (GpuType("aws", 2, 4), GpuType("rtx", 1, 8), GpuType("dgx-ext", 1, 8))
    resnet, bert = str(longhorn / "resnet-longhorn-agg.csv"), str(longhorn / "bert-longhorn-agg.csv")
    # CLASS=FILE: the file for every type
    assert parse_variability([f"classA={resnet}"], types) == {(t.name, "classA"): resnet for t in types}
    # DIR: every type classA from ResNet's runs and classB from BERT's, as benchmarks/sia_compare.py's
    # "longhorn" (its _files), so the same seed draws the same factors
    by_dir = parse_variability([str(longhorn)], types)
    spelled = {(t.name, c): f for t in types for c, f in (("classA", resnet), ("classB", bert))}
    assert by_dir == spelled
    a, b = draw_variability(Layout(types), by_dir, seed=5), draw_variability(Layout(types), spelled, seed=5)
    assert all(np.array_equal(a.raw[c], b.raw[c]) for c in ("classA", "classB"))
    assert np.ptp(a.raw["classB"][8:]) > 0  # every type drew, the later ones too
    with pytest.raises(OptionError, match="aws:classA given twice"):
        parse_variability([str(longhorn), f"aws:classA={resnet}"], types)


def test_simulate_with_the_longhorn_directory_on_a_workload_of_one_class(
    sia_dir: Path, longhorn: Path, tmp_path: Path,
) -> None:
    """--variability DIR gives every type classA and classB: a workload with no classB job is not
    refused for the classB file it did not name (a file named for an unused class still is)."""
    trace = tmp_path / "cifar.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\nc0,0,cifar10,2,256\nc1,60,cifar10,1,128\n")
    base = ["simulate", str(trace), "--profiles", str(sia_dir / "profiles"), "--quiet"]
    out = tmp_path / "dir.json"
    assert cli.main([*base, "--variability", str(longhorn), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert sorted(doc["variability"]) == sorted(f"{t}:{c}" for t in ("aws", "rtx", "dgx-ext") for c in ("classA", "classB"))
    assert doc["n_completed"] == 2 and doc["variability_slowdown"]["mean"] != 1.0
    bad = tmp_path / "bad.json"
    assert cli.main([*base, "--variability", f"classB={longhorn / 'bert-longhorn-agg.csv'}", "--out", str(bad)]) == 2
    assert not bad.exists()


@pytest.mark.parametrize("cls", ["classa", "classZ", "resnet50"])
def test_variability_of_a_class_no_application_draws_from_is_an_error(cls: str, tmp_path: Path) -> None:
    # a typo would otherwise leave every GPU nominal without a word
    f = tmp_path / "m.csv"
    f.write_text("perf\n1.0\n")
    with pytest.raises(OptionError, match=f"unknown class '{cls}'.*classA"):
        parse_variability([f"aws:{cls}={f}"], (GpuType("aws", 1, 4),))


def test_variability_item_naming_a_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(InstanceError, match="a directory, not a measurement CSV file"):
        parse_variability([f"aws:classA={tmp_path}"], (GpuType("aws", 1, 4),))


# -- the level program: a round that can be checked by hand ---------------------------------------
def _level_round(levels: list[float], counts: list[int]) -> LevelRound:
    cs = enumerate_configs([GpuType("a", 2, 4)])  # (1,1), (1,2), (1,4), (2,8)
    g = np.array([[1.0, 1.9, 3.6, 6.0]] * 2)
    return LevelRound(cs, g, np.zeros(2, dtype=np.int64), [[np.array(levels)]], [[np.array(counts)]],
                      np.full((2, 2), -1), np.zeros((0, 1)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def test_level_program_gives_the_fast_gpus_to_one_job_and_prices_the_other_slow() -> None:
    # nominal: both jobs get 4 GPUs (2 x 3.6^-0.5 = 2 x 0.53, better than 6^-0.5 = 0.41 for one)
    prog = build_level_program(_level_round([1.0], [8]))
    values, status, _ = solve_program(prog, "highs", None)
    conf, level, _ = prog.decode(values)
    assert status == "optimal" and conf.tolist() == [2, 2] and level.tolist() == [0, 0]
    assert prog.objective(values) == pytest.approx(53 + 53)  # Σ A + λ_n · (jobs left out), hundredths
    # 4 GPUs at 1.0 and 4 at 1.5: only one job can be on the fast level; the other's 4 GPUs are
    # worth 3.6 / 1.5 = 2.4 -> 0.65 (two fast GPUs, 1.9 -> 0.73, or two slow, 1.27 -> 0.89, are worse)
    prog = build_level_program(_level_round([1.0, 1.5], [4, 4]))
    values, status, _ = solve_program(prog, "highs", None)
    conf, level, _ = prog.decode(values)
    assert conf.tolist() == [2, 2] and sorted(level.tolist()) == [0, 1]
    assert prog.objective(values) == pytest.approx(53 + 65)


def _new_job(index: int, app: Application) -> SimJob:
    spec = WorkloadJob(f"{app.name}-{index}", 0.0, app.name, 4, 2048 if app.name == "cifar10" else 96, JobKind.ADAPTIVE,
                       index + 2)
    return SimJob(index, spec, app, ["aws"])


def test_ilp_puts_a_job_on_the_fast_gpu_that_sia_does_not_see(apps: dict[str, Application]) -> None:
    cluster = build_cluster([("aws", 2, 4)], apps)
    factors = np.full(8, 1.3)
    factors[6] = 1.0  # one fast GPU, on node 1
    var = Variability({"classA": factors}, {"classA": factors})
    job = _new_job(0, apps["cifar10"])  # a new job: its one-GPU configuration is the one worth taking
    from pal_opt.hetero.policy import SiaPolicy

    sia = SiaPolicy(cluster).allocate([job], 60.0)
    ilp = IlpTypesPolicy(cluster, variability=var).allocate([_new_job(0, apps["cifar10"])], 60.0)
    assert sia == {0: (0,)}  # Sia's placer: node 0, first slot
    assert ilp == {0: (6,)}
    assert var.slowdown("cifar10", ilp[0]) == 1.0 < var.slowdown("cifar10", sia[0])
    nominal = IlpTypesPolicy(cluster).allocate([_new_job(0, apps["cifar10"])], 60.0)
    assert len(nominal[0]) == 1


# -- the comparators' placements through the checker ---------------------------------------------
def test_a_gang_across_types_runs_as_its_slowest_type(apps: dict[str, Application]) -> None:
    layout = Layout((GpuType("aws", 3, 4, 16), GpuType("dgx-ext", 1, 8, 2)))
    t, shape = gang_state(layout, apps["cifar10"], [8, 9, 10, 11, 12, 13, 14, 15, 16, 17])
    assert t == 0 and shape == (4, 4, 2)  # 4 T4 + 6 A100 -> as T4s, the A100 node split by 4


def test_a_gang_spanning_types_needs_a_shape_on_its_slowest_type(apps: dict[str, Application]) -> None:
    layout = Layout((GpuType("rtx", 3, 8, 3), GpuType("dgx-ext", 1, 8, 2)))
    # 24 GPUs on two RTX nodes and the A100 node run as three RTX nodes
    assert gang_state(layout, apps["bert"], list(range(8, 32))) == (0, (8, 8, 8))
    # 25 GPUs do not fit three 8-GPU RTX nodes: no shape, rather than 9 GPUs on a node
    with pytest.raises(OptionError, match="slowest type, rtx, which holds at most 24"):
        gang_state(layout, apps["bert"], list(range(25)))


def _bert(n: int) -> Workload:
    return workload_from_frame(pd.DataFrame({"name": ["bert-1"], "time": [0.0], "application": ["bert"],
                                             "num_replicas": [n], "batch_size": [384]}))


@pytest.mark.parametrize("method", ["pal", "packed"])
@pytest.mark.parametrize("n", [16, 20, 24, 25, 32])
def test_type_blind_gangs_larger_than_any_type_are_unplaceable(apps: dict[str, Application], method: str, n: int) -> None:
    cluster = build_cluster(parse_cluster(PAPER), apps)
    res = simulate_sia(_bert(n), apps, cluster, SimConfig(policy=method, max_time=3600.0))
    if n <= 24:  # one type holds it (aws 6x4 and rtx 3x8 hold 24)
        assert not res.unplaceable and res.summary()["n_completed"] == 1
    else:
        assert res.unplaceable == {"bert-1": f"needs {n} GPUs; no GPU type holds more than 24 and a gang "
                                              "spanning types runs as its slowest type"}
        assert res.summary()["n_completed"] == 0 and res.summary()["rounds"] == 0


@pytest.mark.parametrize("method", ["pal", "packed"])
def test_a_type_blind_gang_its_slowest_type_cannot_hold_is_unplaceable(apps: dict[str, Application], method: str) -> None:
    # a takes six A100s; b's six GPUs are then the four T4s and two A100s: it would run as six T4s
    cluster = build_cluster([("aws", 1, 4), ("dgx-ext", 1, 8)], apps)
    wl = workload_from_frame(pd.DataFrame({"name": ["a", "b"], "time": [0.0, 0.0], "application": ["cifar10"] * 2,
                                           "num_replicas": [6, 6], "batch_size": [2048, 2048]}))
    res = simulate_sia(wl, apps, cluster, SimConfig(policy=method, max_time=3600.0))
    assert res.unplaceable == {"b": f"{method} placed it where it cannot run: its 6 GPUs span aws and dgx-ext, and a "
                                    "gang spanning types runs as its slowest type, aws, which holds at most 4"}
    assert res.summary()["n_completed"] == 1 and res.jobs[0].completion_time is not None


def _record(monkeypatch: pytest.MonkeyPatch, cls: type, seen: list[Any]) -> None:
    original = cls.allocate

    def spy(self: Any, active: Any, now: float) -> Any:
        out = original(self, active, now)
        seen.append(({j.index: j for j in active}, dict(out), self))
        return out

    monkeypatch.setattr(cls, "allocate", spy)


@pytest.mark.parametrize("method", ["pal", "packed", "ilp", "ilp-joint"])
def test_comparator_rounds_are_valid_for_the_checker(
    prefix: Workload, apps: dict[str, Application], longhorn: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    cluster = build_cluster(parse_cluster(PAPER), apps)
    layout = Layout(cluster)
    files = {(t.name, c): str(longhorn / f) for t in cluster for c, f in (("classA", "resnet-longhorn-agg.csv"),
                                                                        ("classB", "bert-longhorn-agg.csv"))}
    var = draw_variability(layout, files, seed=0)
    seen: list[Any] = []
    joint = method == "ilp-joint"
    method = "ilp" if joint else method
    _record(monkeypatch, IlpTypesPolicy if method == "ilp" else TypeBlindPolicy, seen)
    result = simulate_sia(prefix, apps, cluster, SimConfig(policy=method, variability=var, max_time=6 * 3600.0,
                                                           ilp_joint=joint))
    assert result.summary()["n_completed"] > 0 and seen
    names = [cluster[t].name for t in layout.type_of.tolist()]
    core = Cluster.from_arrays(range(layout.num_gpus), layout.server_of(), {"classA": np.ones(layout.num_gpus)},
                               gpu_types=names if method == "ilp" else None)
    menu = {(c.gpu_type, c.num_gpus) for c in enumerate_configs(cluster).configs}
    for jobs, alloc, _ in seen:
        placed = {i: g for i, g in alloc.items() if g}
        if method == "ilp":
            typed = {i: names[g[0]] for i, g in placed.items()}
            assert all((typed[i], len(g)) in menu for i, g in placed.items())
            queue = [Job(i, len(g), "classA", position=k, kind="guaranteed", gpu_type=typed[i])
                     for k, (i, g) in enumerate(placed.items())]
        else:
            assert all(len(g) == jobs[i].spec.num_replicas for i, g in placed.items())
            queue = [Job(i, len(g), "classA", position=k) for k, (i, g) in enumerate(placed.items())]
        inst = RoundInstance(core, tuple(queue))
        assert violations(inst, {"placements": {i: list(g) for i, g in placed.items()}}) == []
        if joint:  # never fragmented: n ≤ g GPUs on one node, or whole nodes
            server = layout.server_of()
            for g in placed.values():
                per = np.unique(server[list(g)], return_counts=True)[1]
                size = cluster[layout.type_of[g[0]]].gpus_per_node
                assert len(per) == 1 or all(c == size for c in per)


def test_ilp_without_variability_runs_a_prefix_deterministically(prefix: Workload, apps: dict[str, Application]) -> None:
    cluster = build_cluster(parse_cluster(PAPER), apps)
    a = simulate_sia(prefix, apps, cluster, SimConfig(policy="ilp")).summary()
    b = simulate_sia(prefix, apps, cluster, SimConfig(policy="ilp")).summary()
    assert a["n_completed"] == 14 and a["avg_jct"] == b["avg_jct"] and a["p99_jct"] == b["p99_jct"]


def test_anchored_ilp_without_variability_is_sia_round_for_round(prefix: Workload, apps: dict[str, Application]) -> None:
    """Stage 2 leaves Sia's GPUs only for a strictly better placement: on nominal GPUs, where
    Sia's placer packs every configuration whole, ``ilp`` allocates exactly as ``sia`` does."""
    from pal_opt.hetero.policy import SiaPolicy

    cluster = build_cluster(parse_cluster(PAPER), apps)
    seen: dict[str, list[Any]] = {"sia": [], "ilp": []}
    for method in seen:
        original = IlpTypesPolicy.allocate if method == "ilp" else SiaPolicy.allocate
        log = seen[method]

        def spy(self: Any, active: Any, now: float, _orig: Any = original, _log: list[Any] = log,
                _cls: type = IlpTypesPolicy if method == "ilp" else SiaPolicy) -> Any:
            out = _orig(self, active, now)
            if type(self) is _cls:
                _log.append((now, dict(out)))
            return out

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(IlpTypesPolicy if method == "ilp" else SiaPolicy, "allocate", spy)
            simulate_sia(prefix, apps, cluster, SimConfig(policy=method, max_time=6 * 3600.0))
    assert len(seen["ilp"]) == len(seen["sia"]) > 10
    assert seen["ilp"] == seen["sia"]


def test_anchored_stage2_never_prices_worse_than_sias_placer(
    prefix: Workload, apps: dict[str, Application], longhorn: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With variability, every stage-2 placement costs at most what Sia's placement of the same
    configurations costs in the round program's terms, and some round gains."""
    import importlib

    from pal_opt.binning import binned_factors
    from pal_opt.cost.evaluate import evaluate

    cluster = build_cluster(parse_cluster(PAPER), apps)
    files = {(t.name, c): str(longhorn / f) for t in cluster for c, f in (("classA", "resnet-longhorn-agg.csv"),
                                                                        ("classB", "bert-longhorn-agg.csv"))}
    var = draw_variability(Layout(cluster), files, seed=0)
    solve_mod = importlib.import_module("pal_opt.solve")  # the module (``pal_opt.solve`` is also the function)
    original = solve_mod.solve
    pairs: list[tuple[float, float]] = []

    def spy(inst: RoundInstance, *args: Any, **kwargs: Any) -> Any:
        res = original(inst, *args, **kwargs)
        f = binned_factors(inst.cluster, inst.params.binning)
        sia = {j.id: tuple(j.placement) for j in inst.jobs if j.placement is not None}
        pairs.append((evaluate(inst, sia, f).cost, evaluate(inst, res.placements, f).cost))
        return res

    monkeypatch.setattr(solve_mod, "solve", spy)
    simulate_sia(prefix, apps, cluster, SimConfig(policy="ilp", variability=var, max_time=6 * 3600.0))
    assert len(pairs) > 10
    assert all(ours <= theirs + 1e-9 for theirs, ours in pairs)
    assert any(ours < theirs - 1e-6 for theirs, ours in pairs)


# -- the placement floor: what placement could win back ------------------------------------------
def test_placement_floor_by_hand() -> None:
    layout = Layout((GpuType("a", 3, 4), GpuType("b", 1, 2)))
    f = np.array([1.0, 1.0, 1.0, 2.0,  # node 0: three fast, one slow
                  0.9, 1.1, 1.1, 1.1,  # node 1: one faster than nominal
                  1.2, 1.2, 1.2, 1.2,  # node 2: all slow
                  1.5, 0.8])  # type b
    var = Variability({"classA": f}, {"classA": f})
    floor = placement_floor(layout, var)
    assert floor("cifar10", [11]) == 0.9  # one GPU anywhere on type a: node 1's fastest
    assert floor("cifar10", [8, 9, 10]) == 1.0  # three on one node: node 0's three fast ones
    assert floor("cifar10", [0, 1, 2, 3]) == 1.1  # a whole node: node 1 (1.1) beats 2 (1.2) and 0 (2.0)
    assert floor("cifar10", [0, 1, 2, 4, 5]) == 1.1  # 3 + 2: node 0 takes 3, node 1 takes 2 (1.1)
    assert floor("cifar10", [0, 4, 8]) == 1.2  # three nodes, one each: every node, so node 2's 1.2
    assert floor("cifar10", [0, 13]) == 0.9  # one GPU of each type: max(a's best 0.9, b's best 0.8)
    assert floor("cifar10", [12, 13]) == 1.5 and floor("cifar10", [12]) == 0.8
    assert floor("bert", [0, 1, 2, 3]) == 1.0 and floor("cifar10", []) == 1.0  # classB nominal; no GPUs


@given(st.integers(1, 4), st.integers(1, 4), st.data())
@settings(max_examples=150, deadline=None)
def test_placement_floor_is_the_brute_force_minimum(nodes: int, per_node: int, data: st.DataObject) -> None:
    import itertools

    f = np.array(data.draw(st.lists(st.sampled_from([0.9, 1.0, 1.05, 1.1, 1.3, 2.0]),
                                    min_size=nodes * per_node, max_size=nodes * per_node)))
    k = data.draw(st.integers(1, nodes))
    counts = data.draw(st.lists(st.integers(1, per_node), min_size=k, max_size=k))
    layout = Layout((GpuType("a", nodes, per_node),))
    gpus = [n * per_node + s for n, c in enumerate(counts) for s in range(c)]  # counts[i] GPUs on node i
    rows = f.reshape(nodes, per_node)
    brute = min(max(np.sort(rows[n])[c - 1] for n, c in zip(ns, counts, strict=True))
                for ns in itertools.permutations(range(nodes), k))
    assert placement_floor(layout, Variability({"classA": f}, {"classA": f}))("imagenet", gpus) == brute


def test_a_run_with_variability_reports_its_slowdown_above_the_floor(
    prefix: Workload, apps: dict[str, Application], longhorn: Path
) -> None:
    cluster = build_cluster(parse_cluster(PAPER), apps)
    layout = Layout(cluster)
    var = draw_variability(layout, {(t.name, "classA"): str(longhorn / "resnet-longhorn-agg.csv") for t in cluster}, seed=0)
    floor = placement_floor(layout, var)
    seen: list[tuple[float, float]] = []
    for method in ("sia", "ilp"):
        result = simulate_sia(prefix, apps, cluster, SimConfig(policy=method, variability=var))
        v = result.summary()["variability_slowdown"]
        assert v is not None and 0.9 < v["placement_floor"] <= v["mean"] + 1e-12
        assert 0 < result.job_rounds <= result.gpus_in_use.sum()  # a job holding GPUs holds at least one
        seen.append((v["mean"], v["placement_floor"]))
    assert seen[1][0] <= seen[0][0]  # ilp sees the factors; sia does not
    assert floor("cifar10", list(range(64))) == var.raw["classA"].max()  # the whole cluster: its slowest GPU
    nominal = simulate_sia(prefix, apps, cluster, SimConfig(policy="sia")).summary()
    assert nominal["variability_slowdown"] is None


def test_several_policies_on_a_sia_trace_share_one_run_with_a_table_and_a_figure(
    sia_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sia against ilp and PAL on one workload, cluster and draw took three runs and a plot by
    hand: now one command, as on a PAL trace (the results, a per-job table, a JCT CDF)."""
    pytest.importorskip("matplotlib")
    trace = _trace(sia_dir, tmp_path)
    out, table, fig = tmp_path / "r.json", tmp_path / "jobs.csv", tmp_path / "cdf.png"
    rc = cli.main(["simulate", str(trace), "--cluster", PAPER, "--profiles", str(sia_dir / "profiles"),
                   "--policy", "sia,pal", "--jobs-csv", str(table), "--plot", str(fig), "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["policies"] == ["sia", "pal"] and set(doc["results"]) == {"sia", "pal"}
    sia, pal = doc["results"]["sia"], doc["results"]["pal"]
    alone = tmp_path / "sia.json"  # the same run as a single-policy one
    assert cli.main(["simulate", str(trace), "--cluster", PAPER, "--profiles", str(sia_dir / "profiles"),
                     "--quiet", "--out", str(alone)]) == 0
    assert json.loads(alone.read_text())["avg_jct"] == sia["avg_jct"]
    rows = list(csv.DictReader(table.open()))
    assert [r["policy"] for r in rows] == ["sia"] * sia["n_jobs"] + ["pal"] * pal["n_jobs"]
    assert float(rows[0]["jct"]) == sia["job_results"][0]["jct"]
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"avg JCT against sia: pal {pal['avg_jct'] / sia['avg_jct'] - 1:+.1%}" in text
    assert f"wrote {out}, {table}, {fig}" in text


def test_a_sia_result_logs_its_rounds_and_its_figure_draws_the_utilisation(
    sia_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The figure of a Sia run had the JCT CDF alone (no per-round log to draw the utilisation
    from); the result now logs each round's GPUs in use, as a PAL result logs its busy GPU-seconds."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    titles: list[list[str]] = []
    save = Figure.savefig

    def spy(self: Figure, *a: Any, **kw: Any) -> Any:
        titles.append([ax.get_title() for ax in self.axes])
        return save(self, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", spy)
    trace, out, fig = _trace(sia_dir, tmp_path), tmp_path / "r.json", tmp_path / "f.png"
    assert cli.main(["simulate", str(trace), "--cluster", PAPER, "--profiles", str(sia_dir / "profiles"), "--quiet",
                     "--policy", "sia,pal", "--plot", str(fig), "--out", str(out)]) == 0
    assert titles == [["JCT CDF", "Utilisation per round", "Per-job JCT against sia"]]
    for res in json.loads(out.read_text())["results"].values():
        log = res["round_log"]
        assert log["time"] == [60.0 * (k + 1) for k in range(res["rounds"])]
        by_type = np.array(list(log["gpus_in_use_by_type"].values()))
        assert list(log["gpus_in_use_by_type"]) == ["aws", "rtx", "dgx-ext"]
        assert by_type.sum(axis=0).tolist() == log["gpus_in_use"]
        assert np.mean(log["gpus_in_use"]) / 64 == pytest.approx(res["utilisation"])
        assert np.mean(by_type[0]) == pytest.approx(res["avg_gpus_in_use_by_type"]["aws"])


def test_a_gang_across_types_runs_as_its_slowest_type_whatever_its_place(apps: dict[str, Application]) -> None:
    """The slowest type listed after a faster one: 6 A100s and 4 T4s still run as T4s (type 1;
    taking the first type the gang touches gave the A100s)."""
    layout = Layout((GpuType("dgx-ext", 1, 8, 2), GpuType("aws", 3, 4, 16)))
    t, shape = gang_state(layout, apps["cifar10"], [2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    assert t == 1 and sorted(shape, reverse=True) == [4, 4, 2]


# -- TypeBlindPolicy.allocate by hand (mutants of typeblind.py) ------------------------------------
def _blind_job(index: int, app: Application, n: int, submit: float = 0.0, batch: int = 2048,
               kind: JobKind = JobKind.ADAPTIVE) -> SimJob:
    spec = WorkloadJob(f"{app.name}-{index}", submit, app.name, n, batch, kind, index + 2)
    return SimJob(index, spec, app, ["aws", "dgx-ext"])


@pytest.mark.parametrize("method", ["pal", "packed"])
def test_type_blind_waiting_jobs_go_in_submission_order_not_index_order(apps: dict[str, Application], method: str) -> None:
    """Job 0 submitted after job 1 (a hand-made workload out of order): job 1 gets the one node."""
    policy = TypeBlindPolicy(Layout(build_cluster([("aws", 1, 4)], apps)), method)
    late, early = _blind_job(0, apps["cifar10"], 4, submit=120.0), _blind_job(1, apps["cifar10"], 4, submit=0.0)
    assert policy.allocate([late, early], 180.0) == {0: (), 1: (0, 1, 2, 3)}


@pytest.mark.parametrize("method", ["pal", "packed"])
def test_type_blind_gpus_of_a_finished_job_are_free_again(apps: dict[str, Application], method: str) -> None:
    policy = TypeBlindPolicy(Layout(build_cluster([("aws", 1, 4)], apps)), method)
    a, b = _blind_job(0, apps["cifar10"], 4), _blind_job(1, apps["cifar10"], 4)
    assert policy.allocate([a, b], 60.0) == {0: (0, 1, 2, 3), 1: ()}
    assert policy.allocate([b], 120.0) == {1: (0, 1, 2, 3)}  # a finished: no longer active
    assert policy.holding == {1: (0, 1, 2, 3)}


@pytest.mark.parametrize("method", ["pal", "packed"])
def test_type_blind_round_is_placed_again_without_the_job_that_cannot_run(apps: dict[str, Application], method: str) -> None:
    """b lands on 4 T4s and 2 A100s (it would run as 6 T4s), leaving no room for c: the same
    round is placed again without b, and both a and c get their GPUs."""
    policy = TypeBlindPolicy(Layout(build_cluster([("aws", 1, 4), ("dgx-ext", 1, 8)], apps)), method)
    a, b, c = (_blind_job(i, apps["cifar10"], n) for i, n in enumerate((6, 6, 2)))
    alloc = policy.allocate([a, b, c], 60.0)
    assert list(policy.unplaceable) == [1] and alloc[1] == ()
    assert [len(alloc[0]), len(alloc[2])] == [6, 2] and policy.holding == {0: alloc[0], 2: alloc[2]}


def test_type_blind_gang_problem_asks_the_profile_for_a_step_time(apps: dict[str, Application]) -> None:
    """A rigid bert job at batch 2048 has no measured step time on one T4 (the profile's batch
    limit): the one type holds the gang, yet it cannot train there."""
    layout = Layout(build_cluster([("aws", 1, 4), ("dgx-ext", 1, 8)], apps))
    job = _blind_job(0, apps["bert"], 1, kind=JobKind.RIGID)
    assert gang_problem(layout, job, [0]) == "bert has no measured step time on aws for its shape there, (1,)"
    assert gang_problem(layout, _blind_job(0, apps["bert"], 1, batch=96), [0]) is None


@pytest.mark.parametrize("method", ["pal", "packed"])
def test_type_blind_never_places_on_gpus_out_of_service(apps: dict[str, Application], method: str) -> None:
    policy = TypeBlindPolicy(Layout(build_cluster([("aws", 2, 4)], apps)), method)
    policy.out_of_service = np.array([True] * 4 + [False] * 4)
    assert policy.allocate([_blind_job(0, apps["cifar10"], 4)], 60.0) == {0: (4, 5, 6, 7)}
    policy.out_of_service = np.array([True] + [False] * 7)  # 7 GPUs in service: no room for 8
    assert policy.allocate([_blind_job(1, apps["cifar10"], 8)], 120.0) == {1: ()}
