"""The two simulators' results share one vocabulary (``pal_opt.simulate.fields``); the former
names are deprecated aliases holding the same values."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pal_opt import cli
from pal_opt.hetero.configs import GpuType
from pal_opt.hetero.simulate import JobRecord, SiaResult, summarize
from pal_opt.hetero.workload import read_workload
from pal_opt.io.traces import read_trace
from pal_opt.model import Cluster
from pal_opt.simulate import SimConfig, simulate
from pal_opt.simulate.fields import (
    CLASS_ALIASES,
    PAL_ALIASES,
    PER_JOB_FIELD,
    SHARED_FIELDS,
    SIA_ALIASES,
    SIA_FILE_ALIASES,
)

CLASSES = ("classA", "classB", "classC", "classD")


def _pal_trace(tmp_path: Path) -> Path:
    p = tmp_path / "pal.csv"
    p.write_text("job_id,num_gpus,submit_time,duration,model,priority\n"
                 "0,1,0,600,resnet50,0\n1,2,0,900,resnet50,1\n2,1,30,300,resnet50,0\n3,4,60,1200,resnet50,1\n")
    return p


def _sia_result() -> SiaResult:
    jobs = tuple(JobRecord(f"j{i}", "a" if i % 2 else "b", "adaptive", 10.0 * i, 10.0 * i + 60,
                           10.0 * i + 100 + i, i % 3, 1) for i in range(10))
    return SiaResult(jobs, np.array([[2, 0], [1, 1]]), (GpuType("x", 1, 2), GpuType("y", 1, 2)), 60.0, 1.5, 0.75, 0,
                     3.0)


def _check_aliases(doc: dict[str, Any], aliases: dict[str, str] | Any) -> None:
    for old, new in aliases.items():
        assert old in doc and new in doc, (old, new)
        assert doc[old] == doc[new], (old, new)


def _check_pal(doc: dict[str, Any]) -> None:
    assert set(SHARED_FIELDS) <= set(doc)
    _check_aliases(doc, PAL_ALIASES)
    assert len(doc["by_priority"]) == 2
    for figures in doc["by_priority"].values():
        _check_aliases(figures, CLASS_ALIASES)
    assert doc["avg_restarts_per_job"] == pytest.approx(doc["restarts"] / doc["n_jobs"])


def _check_sia(doc: dict[str, Any]) -> None:
    assert set(SHARED_FIELDS) <= set(doc)
    _check_aliases(doc, SIA_ALIASES)


def test_both_summaries_carry_the_shared_names_and_the_aliases_their_values(tmp_path: Path) -> None:
    cluster = Cluster.uniform(2, 4, {c: [1.0] * 8 for c in CLASSES})
    res = simulate(read_trace(_pal_trace(tmp_path)), cluster, SimConfig(policy="pal"))
    pal = res.summary
    _check_pal(pal)
    assert (pal["n_jobs"], pal["n_completed"]) == (4, 4)
    assert pal["p50_jct"] == pytest.approx(float(np.median([j.jct for j in res.jobs])))
    sia = summarize(_sia_result())
    _check_sia(sia)
    assert sia["restarts"] == sum(i % 3 for i in range(10))
    assert (sia["solve_seconds_total"], sia["solve_seconds_max"]) == (1.5, 0.75)
    assert set(SHARED_FIELDS) <= set(pal) & set(sia)
    for name in SHARED_FIELDS:  # the same kind of value under each name
        assert isinstance(pal[name], (int, float)) and isinstance(sia[name], (int, float)), name
        assert isinstance(pal[name], int) == isinstance(sia[name], int), name


def test_the_deprecated_names_are_not_shared_names() -> None:
    for aliases in (PAL_ALIASES, SIA_ALIASES, CLASS_ALIASES):
        assert not set(aliases) & set(SHARED_FIELDS)
        assert all(new != old for old, new in aliases.items())


def test_both_result_files_carry_the_shared_names(tmp_path: Path, shared_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``pal-opt simulate`` writes the same names for a PAL trace and for a Sia newTrace."""
    pal_out, sia_out = tmp_path / "pal.json", tmp_path / "sia.json"
    assert cli.main(["simulate", str(_pal_trace(tmp_path)), "--cluster", "2x4", "--synthetic-variability", "1",
                     "--out", str(pal_out)]) == 0
    pal_line = capsys.readouterr().out.splitlines()[0]
    assert pal_line.startswith("pal: 4/4 jobs finished")  # the printed line reads the shared names
    sia_dir = shared_dir / "data" / "sia-artifact"
    if not (sia_dir / "profiles").is_dir():
        pytest.skip(f"Sia artifact data not available at {sia_dir}")
    trace = tmp_path / "sia.csv"
    read_workload(sia_dir / "workloads" / "newtrace-7.csv").frame().iloc[:3].drop(columns="category").to_csv(
        trace, index=False)
    assert cli.main(["simulate", str(trace), "--profiles", str(sia_dir / "profiles"), "--policy", "sia",
                     "--out", str(sia_out)]) == 0
    sia_line = capsys.readouterr().out.splitlines()[0]
    # the two simulators' lines name the shared figures alike, in one order (the Sia line said
    # "3/3 jobs", without the queueing delay, the rounds and the placement time)
    shared = (r": (\d+)/(\d+) jobs finished, avg JCT [\d.]+ h, p99 JCT [\d.]+ h, makespan [\d.]+ h, "
              r"utilisation [\d.]+, avg queueing [\d.]+ h, rounds \d+, ")
    assert re.match("pal" + shared + r"fallbacks 0, placement time [\d.]+ s -> ", pal_line), pal_line
    assert re.match("sia" + shared + r"restarts/job [\d.]+, placement time [\d.]+ s, \d+ s wall -> ", sia_line), sia_line
    pal, sia = json.loads(pal_out.read_text()), json.loads(sia_out.read_text())
    assert f"rounds {sia['rounds']}, " in sia_line and f"rounds {pal['rounds']}, " in pal_line
    _check_pal(pal)
    _check_sia(sia)
    assert (sia["n_jobs"], sia["n_completed"]) == (3, 3)


def test_both_result_files_give_the_count_as_n_jobs_and_the_per_job_list_as_job_results(
        tmp_path: Path, shared_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``jobs`` was the count in a PAL result file and the per-job list in a Sia one.  Both files
    now have ``n_jobs`` (the count) and ``job_results`` (one record per job); each old ``jobs``
    stays for this release as a deprecated alias with its old value."""
    pal_out, sia_out = tmp_path / "pal.json", tmp_path / "sia.json"
    assert cli.main(["simulate", str(_pal_trace(tmp_path)), "--cluster", "2x4", "--synthetic-variability", "1",
                     "--out", str(pal_out), "--quiet"]) == 0
    pal = json.loads(pal_out.read_text())
    assert PER_JOB_FIELD == "job_results" and PAL_ALIASES["jobs"] == "n_jobs"
    assert pal["n_jobs"] == pal["jobs"] == len(pal["job_results"]) == 4
    sia_dir = shared_dir / "data" / "sia-artifact"
    if not (sia_dir / "profiles").is_dir():
        pytest.skip(f"Sia artifact data not available at {sia_dir}")
    trace = tmp_path / "sia.csv"
    read_workload(sia_dir / "workloads" / "newtrace-7.csv").frame().iloc[:3].drop(columns="category").to_csv(
        trace, index=False)
    assert cli.main(["simulate", str(trace), "--profiles", str(sia_dir / "profiles"), "--policy", "sia",
                     "--out", str(sia_out), "--quiet"]) == 0
    sia = json.loads(sia_out.read_text())
    assert sia["n_jobs"] == len(sia["job_results"]) == 3
    assert [r["name"] for r in sia["job_results"]] == list(read_workload(trace).frame()["name"])
    _check_aliases(sia, SIA_FILE_ALIASES)  # "jobs": the same list
    assert not set(SIA_FILE_ALIASES) & set(SHARED_FIELDS) and PER_JOB_FIELD not in SHARED_FIELDS


def test_the_sia_result_gives_queueing_delays_over_the_jobs_that_started() -> None:
    """First start − submission, as the PAL result gives it; p99 by the Sia result's index rule."""
    waits = [0.0, 30.0, 60.0, 600.0]
    jobs = [JobRecord(f"j{i}", "a", "adaptive", 100.0 * i, 100.0 * i + w, 100.0 * i + w + 50, 0, 1)
            for i, w in enumerate(waits)]
    jobs.append(JobRecord("never", "a", "adaptive", 5.0, None, None, 0, 0))
    sia = summarize(SiaResult(tuple(jobs), np.array([[1]]), (GpuType("x", 1, 1),), 60.0, 0.0, 0.0, 0, 0.0))
    assert sia["avg_queueing_delay"] == pytest.approx(np.mean(waits))
    assert sia["p50_queueing_delay"] == pytest.approx(45.0)
    assert sia["p99_queueing_delay"] == 600.0
    empty = summarize(SiaResult((jobs[-1],), np.zeros((0, 1)), (GpuType("x", 1, 1),), 60.0, 0.0, 0.0, 0, 0.0))
    assert (empty["avg_queueing_delay"], empty["p50_queueing_delay"], empty["p99_queueing_delay"]) == (None, None, None)
