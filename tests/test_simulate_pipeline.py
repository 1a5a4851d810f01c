"""Pipeline jobs in the trace simulator: the trace's ``pipeline`` column, progress at the slowest
stage's pace, the round program against flat-gang PAL, the summary's pipeline figures, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pal_opt.errors import InstanceError
from pal_opt.io.traces import TraceJob, parse_pipeline_cell, pipeline_cell, read_trace
from pal_opt.model import Cluster, Pipeline
from pal_opt.simulate import JOB_COLUMNS, SimConfig, jobs_csv_text, simulate
from pal_opt.simulate.cli import main as simulate_main

HEADER = "job_id,num_gpus,submit_time,duration,model,pipeline\n"
#: 3 replicas of a slow stage, then a stage with half the time: a slow GPU is free on stage 1.
SLACK = Pipeline((1.0, 0.5), (3, 1))


def _job(jid: int, demand: int, iters: float, pipeline: Pipeline | None = None, submit: float = 0.0) -> TraceJob:
    return TraceJob(id=jid, demand=demand, submit_time=submit, iterations=iters, model="BERT", perfclass="classB",
                    iter_time=1.0, pipeline=pipeline)


def _slow_first() -> Cluster:
    """One server of 4 GPUs; GPU 0 is 1.5x slower (raw factor), the others median."""
    return Cluster.uniform(1, 4, {"classB": [1.5, 1.0, 1.0, 1.0]})


# ----------------------------------------------------------------------------- the trace column
def test_pipeline_cells_read_and_write() -> None:
    assert parse_pipeline_cell("0.0102x3;0.0098") == Pipeline((0.0102, 0.0098), (3, 1))
    assert parse_pipeline_cell(" 1 * 2 ; 2X1 ") == Pipeline((1.0, 2.0), (2, 1))
    assert parse_pipeline_cell(pipeline_cell(SLACK)) == SLACK


def test_a_trace_with_a_pipeline_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "1,4,0,100,BERT,1.0x3;0.5x1\n2,2,5,10,resnet50,\n", encoding="utf-8")
    pipe, gang = read_trace(path)
    assert pipe.pipeline == SLACK and gang.pipeline is None
    # without the column every job is a gang, as before
    path.write_text("job_id,num_gpus,submit_time,duration,model\n1,4,0,100,BERT\n", encoding="utf-8")
    assert read_trace(path)[0].pipeline is None


@pytest.mark.parametrize(("cell", "message"), [
    ("fast", "stage 0 is 'fast'"),
    ("1.0x3;", "stage 1 is ''"),
    ("1.0x0;1x4", "pipeline.replicas[0]: must be a positive integer"),
    ("-1x4", "pipeline.stage_times[0]"),
    ("0x4", "at least one stage must take time"),
    ("1.0x3", "the stages' replicas add up to 3, num_gpus is 4"),
])
def test_bad_pipeline_cells_name_row_and_column(tmp_path: Path, cell: str, message: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + f"1,4,0,100,BERT,{cell}\n", encoding="utf-8")
    with pytest.raises(InstanceError, match="row 2, column pipeline") as err:
        read_trace(path)
    assert message in str(err.value)


def test_the_cli_refuses_a_bad_pipeline_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "1,4,0,100,BERT,1.0x2\n", encoding="utf-8")
    out = tmp_path / "r.json"
    assert simulate_main([str(path), "--cluster", "1x4", "--synthetic-variability", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "row 2, column pipeline" in err[0] and "add up to 2, num_gpus is 4" in err[0]
    assert not out.exists()


def test_the_engine_refuses_a_pipeline_of_another_size() -> None:
    bad = _job(7, 4, 10, Pipeline((1.0,), (2,)))
    with pytest.raises(InstanceError, match="job 7: its pipeline's replicas must add up to num_gpus=4"):
        simulate([bad], _slow_first(), SimConfig(policy="pal"))


# ----------------------------------------------------------------------------- progress by stage
def test_a_pipeline_runs_at_its_slowest_stage_by_hand() -> None:
    """GPU 0 is 1.5x slow.  The stage program puts it on stage 1 (0.5 x 1.5 < 1.0): pace 1, 100 s.
    PAL places the job as a flat gang on GPUs 0-3 in id order, so stage 0 holds GPU 0: pace 1.5,
    150 s.  As a gang (no pipeline) the job runs at its slowest GPU under both: 150 s."""
    cluster = _slow_first()
    trace = [_job(0, 4, 100, SLACK)]
    stage = simulate(trace, cluster, SimConfig(policy="ilp", backend="highs"), validate=True)
    flat = simulate(trace, cluster, SimConfig(policy="pal"), validate=True)
    assert stage.jobs[0].finish_time == pytest.approx(100.0) and stage.jobs[0].mean_slowdown == pytest.approx(1.0)
    assert flat.jobs[0].finish_time == pytest.approx(150.0) and flat.jobs[0].mean_slowdown == pytest.approx(1.5)
    for policy in ("ilp", "pal"):
        gang = simulate([_job(0, 4, 100)], cluster, SimConfig(policy=policy))
        assert gang.jobs[0].finish_time == pytest.approx(150.0)
    assert stage.jobs[0].stages == 2 and stage.summary["pipeline_avg_jct"] == pytest.approx(100.0)


def test_a_spanning_pipeline_pays_the_locality_penalty() -> None:
    """Two 2-GPU servers, a 4-GPU pipeline spans both: pace x λ = 1.0 x 1.7."""
    cluster = Cluster.uniform(2, 2, {"classB": [1.0, 1.0, 1.0, 1.5]})
    res = simulate([_job(0, 4, 100, SLACK)], cluster, SimConfig(policy="ilp", locality_penalty=1.7), validate=True)
    assert res.jobs[0].finish_time == pytest.approx(170.0) and res.jobs[0].rounds_spanning == 1


def test_mixed_trace_summary_and_tables() -> None:
    """Pipelines and gangs together: every method finishes every job, the summary splits the mean
    JCT between pipeline jobs and gangs, the per-job table has the stage count."""
    cluster = Cluster.uniform(2, 4, {"classB": [1.5, 1.0, 1.0, 1.0, 1.0, 1.3, 1.0, 1.0]})
    trace = [_job(0, 4, 500, SLACK), _job(1, 2, 300), _job(2, 4, 400, Pipeline((0.2, 1.0), (1, 3)), submit=100.0),
             _job(3, 1, 200, submit=400.0), _job(4, 2, 900, Pipeline((1.0, 1.0), (1, 1)), submit=500.0)]
    results = {p: simulate(trace, cluster, SimConfig(policy=p), validate=True) for p in ("pal", "ilp")}
    for res in results.values():
        s = res.summary
        assert s["n_completed"] == 5 and s["pipeline_jobs"] == 3
        pipes = [j.jct for j in res.jobs if j.stages > 1]
        gangs = [j.jct for j in res.jobs if j.stages == 1]
        assert s["pipeline_avg_jct"] == pytest.approx(sum(pipes) / 3)
        assert s["gang_avg_jct"] == pytest.approx(sum(gangs) / 2)
    # the stage program never runs a pipeline slower than flat-gang PAL does in this trace
    assert results["ilp"].summary["pipeline_avg_jct"] <= results["pal"].summary["pipeline_avg_jct"] + 1e-9
    text = jobs_csv_text(results["ilp"]).splitlines()
    assert text[0].split(",") == list(JOB_COLUMNS) and "stages" in JOB_COLUMNS
    stages = JOB_COLUMNS.index("stages")
    assert [line.split(",")[stages] for line in text[1:]] == ["2", "1", "2", "1", "2"]


def test_no_pipeline_no_pipeline_figures() -> None:
    res = simulate([_job(0, 2, 10)], _slow_first(), SimConfig(policy="pal"))
    assert "pipeline_avg_jct" not in res.summary and res.jobs[0].stages == 1


def test_the_stage_program_takes_a_restart_cost() -> None:
    """Refused until 2026-11-27 ("placed non-sticky").  The stage program puts the slow GPU on the
    slack stage in the first round and keeps the job there after (its keep variable): 1,000
    iterations at pace 1, no restart."""
    res = simulate([_job(0, 4, 1000, SLACK)], _slow_first(), SimConfig(policy="ilp", restart_cost=30.0), validate=True)
    assert res.jobs[0].finish_time == pytest.approx(1000.0) and res.jobs[0].restarts == 0


def test_the_cli_reports_pipeline_figures(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "1,4,0,100,BERT,1.0x3;0.5x1\n2,1,0,50,BERT,\n", encoding="utf-8")
    out = tmp_path / "r.json"
    argv = [str(path), "--cluster", "2x4", "--synthetic-variability", "3", "--policy", "pal,ilp", "--out", str(out),
            "--quiet"]
    assert simulate_main(argv) == 0
    doc = json.loads(out.read_text())
    for policy in ("pal", "ilp"):
        result = doc["results"][policy]
        assert result["pipeline_jobs"] == 1 and result["pipeline_avg_jct"] > 0
        assert [r["stages"] for r in result["job_results"]] == [2, 1]
