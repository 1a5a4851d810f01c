"""The Sia-Philly trace reader: good files, and each kind of bad row named by file, row and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from pal_opt.errors import InstanceError
from pal_opt.io.traces import TRACE_COLUMNS, read_trace, trace_name
from pal_opt.model import MODEL_CLASS, MODEL_ITER_TIME

HEADER = ",".join(TRACE_COLUMNS)


def _write(tmp_path: Path, body: str, name: str = "trace.csv") -> Path:
    p = tmp_path / name
    p.write_text(body, encoding="utf-8")
    return p


def test_reads_good_trace(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        f"{HEADER}\n0,1,98,1481.0,vgg19\n1,12,115,4037.0,DCGAN\n\n2,4,115,10.5,resnet50\n",
    )
    jobs = read_trace(p)
    assert [j.id for j in jobs] == [0, 1, 2]
    j = jobs[1]
    assert (j.demand, j.submit_time, j.iterations, j.model) == (12, 115.0, 4037.0, "DCGAN")
    assert j.perfclass == MODEL_CLASS["DCGAN"] == "classB"
    assert j.iter_time == MODEL_ITER_TIME["DCGAN"]
    assert j.ideal_seconds == pytest.approx(4037.0 * 0.0469)
    assert jobs[2].row == 5  # the blank line still counts as a file line
    assert trace_name(p) == "trace"


def test_column_order_free_extra_columns_ignored_string_ids(tmp_path: Path) -> None:
    p = _write(tmp_path, "model,extra,duration,submit_time,num_gpus,job_id\nBERT,x,100,0,2,a\nGPT2,y,5,3.5,4.0,b\n")
    jobs = read_trace(p)
    assert [j.id for j in jobs] == ["a", "b"]
    assert jobs[1].demand == 4 and jobs[1].submit_time == 3.5


def test_a_misspelt_optional_column_is_warned_of(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A ``priorty`` column was ignored without a word: every job ran at priority 0."""
    p = _write(tmp_path, f"{HEADER},priorty,extra\n0,1,98,1481.0,vgg19,2,x\n")
    with caplog.at_level("WARNING", logger="pal_opt"):
        assert read_trace(p)[0].priority == 0
    assert [r.getMessage() for r in caplog.records] == [f"{p}: column 'priorty' is not used; did you mean 'priority'?"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="pal_opt"):
        read_trace(_write(tmp_path, f"{HEADER},Priority,extra\n0,1,98,1481.0,vgg19,2,x\n", "ok.csv"))
    assert caplog.records == []


def test_column_names_are_case_insensitive(tmp_path: Path) -> None:
    """``Job_ID,Num_GPUs,...`` is the trace's header (it was "missing column(s) job_id, ..."); bad
    cells are named by the column as written; one name twice, in any case, is an error."""
    p = _write(tmp_path, "Job_ID,NUM_GPUS,Submit_Time,Duration,Model,Priority\n0,1,98,1481.0,vgg19,2\n1,2,9,5,BERT,\n")
    jobs = read_trace(p)
    assert [(j.id, j.demand, j.submit_time, j.model, j.priority) for j in jobs] == [(0, 1, 98.0, "vgg19", 2),
                                                                                   (1, 2, 9.0, "BERT", 0)]
    with pytest.raises(InstanceError, match="row 2, column NUM_GPUS: must be a positive integer"):
        read_trace(_write(tmp_path, "Job_ID,NUM_GPUS,Submit_Time,Duration,Model\n0,0,98,1481.0,vgg19\n", "z.csv"))
    with pytest.raises(InstanceError, match="row 1: column 'job_id' appears twice \\('Job_ID' and 'job_id'; column "
                                            "names are case-insensitive\\)"):
        read_trace(_write(tmp_path, f"Job_ID,{HEADER}\n7,0,1,98,1481.0,vgg19\n", "twice.csv"))


@pytest.mark.parametrize(
    ("row", "column", "fragment"),
    [
        ("0,0,1,10,vgg19", "num_gpus", "positive integer"),
        ("0,2.5,1,10,vgg19", "num_gpus", "positive integer"),
        ("0,x,1,10,vgg19", "num_gpus", "positive integer"),
        ("0,1,-5,10,vgg19", "submit_time", "must be at least 0, got '-5'"),
        ("0,1,nan,10,vgg19", "submit_time", "finite"),
        ("0,1,0,0,vgg19", "duration", "must be a positive number, got '0'"),
        ("0,1,0,inf,vgg19", "duration", "finite"),
        ("0,1,0,10,AlexNet", "model", "unknown model 'AlexNet'"),
        ("0,1,0,10,", "model", "empty"),
        (",1,0,10,vgg19", "job_id", "empty"),
    ],
)
def test_bad_rows_name_file_row_and_column(tmp_path: Path, row: str, column: str, fragment: str) -> None:
    p = _write(tmp_path, f"{HEADER}\n1,1,0,10,vgg19\n{row}\n")
    with pytest.raises(InstanceError) as ei:
        read_trace(p)
    msg = str(ei.value)
    assert msg.startswith(str(p))
    assert f"row 3, column {column}" in msg
    assert fragment in msg


def test_unknown_model_accepted_with_a_class(tmp_path: Path) -> None:
    p = _write(tmp_path, f"{HEADER}\n0,2,0,10,AlexNet\n1,1,0,10,vgg19\n")
    jobs = read_trace(p, default_class="classA")
    assert jobs[0].perfclass == "classA" and jobs[0].iter_time == 1.0
    assert jobs[1].perfclass == "classC"
    jobs = read_trace(p, model_class={"AlexNet": "classD"}, iter_time={"AlexNet": 0.25})
    assert (jobs[0].perfclass, jobs[0].iter_time) == ("classD", 0.25)


def test_duplicate_id(tmp_path: Path) -> None:
    p = _write(tmp_path, f"{HEADER}\n7,1,0,10,vgg19\n7,1,0,10,vgg19\n")
    with pytest.raises(InstanceError, match=r"row 3, column job_id: duplicate job id '7' \(first on row 2\)"):
        read_trace(p)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("job_id,num_gpus,submit_time,model\n0,1,0,vgg19\n", r"missing column\(s\) duration"),
        (f"{HEADER}\n", "no rows"),
        ("", "empty"),
        (f"{HEADER}\n0,1,0,10\n", "fields"),
    ],
)
def test_bad_files(tmp_path: Path, body: str, fragment: str) -> None:
    p = _write(tmp_path, body)
    with pytest.raises(InstanceError, match=fragment):
        read_trace(p)


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(InstanceError, match="cannot read trace"):
        read_trace(tmp_path / "nope.csv")
    b = tmp_path / "bin.csv"
    b.write_bytes(b"job_id\x00\xff\n")
    with pytest.raises(InstanceError, match=str(b)):
        read_trace(b)


def test_shared_traces_read(shared_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    traces = sorted((shared_dir / "data" / "pal-artifact" / "traces").glob("workload-*.csv"))
    assert len(traces) == 6
    for t in traces:
        with caplog.at_level("WARNING", logger="pal_opt"):
            jobs = read_trace(t)
        assert caplog.records == []  # no column taken for a misspelling
        assert len(jobs) == 160
        assert {j.model for j in jobs} <= set(MODEL_CLASS)
        assert all(j.demand >= 1 and j.iterations > 0 for j in jobs)
