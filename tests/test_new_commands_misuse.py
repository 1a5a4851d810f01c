"""An operator's bad day with the fifteenth session's commands (``pal-opt compare``, ``solve
--jobs-from``, ``solve --write-lp``), as ``tests/test_operator_misuse.py`` has it for the older
ones: each case one error line naming the file (and the field), exit 2, no traceback and no output
written; and the Python API of ``pal_opt.simulate.compare`` raising pal-opt's errors.

The result files replay the committed ``examples/data/trace.csv`` (24 jobs) on 4 x 4 GPUs with the
synthetic variability, so that they need no shared data.
"""

from __future__ import annotations

import copy
import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pal_opt.cli import main
from pal_opt.errors import InputTypeError, PalOptError
from pal_opt.simulate.compare import comparison_report, job_jcts_csv_text, load_runs, summary_csv_text

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "data" / "trace.csv"
PAPER = ROOT / "instances" / "paper-16x4.json"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two runs of one trace (λ 1.7 and 2.5), and a run of the trace with every job submitted
    100 s later (another trace under the same job ids)."""
    d = tmp_path_factory.mktemp("results")
    later = d / "later.csv"
    with TRACE.open() as f:
        rows = list(csv.DictReader(f))
    with later.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({**r, "submit_time": str(int(float(r["submit_time"])) + 100)} for r in rows)
    base = ["--cluster", "4x4", "--quiet", "--synthetic-variability", "0"]
    files = {"a": d / "a.json", "b": d / "b.json", "later": d / "later.json"}
    assert main(["simulate", str(TRACE), *base, "-o", str(files["a"])]) == 0
    assert main(["simulate", str(TRACE), *base, "--locality-penalty", "2.5", "-o", str(files["b"])]) == 0
    assert main(["simulate", str(later), *base, "-o", str(files["later"])]) == 0
    return files


def _one_error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert out == "" and err.count("\n") == 1 and err.startswith("pal-opt") and "Traceback" not in err, err
    return err.split(" error: ", 1)[1].rstrip("\n")


def _edited(results: dict[str, Path], tmp_path: Path, edit: Callable[[dict[str, Any]], Any]) -> Path:
    doc = json.loads(results["a"].read_text())
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda d: d.__setitem__(key, value)


def _job(key: str, value: Any, k: int = 0) -> Callable[[dict[str, Any]], Any]:
    return lambda d: d["job_results"][k].__setitem__(key, value)


# --------------------------------------------------------------------------- compare
def test_the_same_result_file_twice_is_one_line(results, tmp_path, capsys):
    """``compare a.json a.json`` ended in ``ValueError: zip() argument 2 is shorter than argument 1``;
    the same file by two paths compared a run with itself."""
    out = tmp_path / "s.csv"
    msg = _one_error(capsys, main(["compare", str(results["a"]), str(results["a"]), "--csv", str(out)]))
    assert msg == f"{results['a']}: given twice; compare each result file once (a file of several policies gives a run per policy)"
    other = f"{results['a'].parent}/./a.json"
    msg = _one_error(capsys, main(["compare", str(results["a"]), other, "--csv", str(out)]))
    assert msg.startswith(f"{other}: given twice (as {results['a']})")
    assert not out.exists()
    with pytest.raises(PalOptError, match="given twice"):
        load_runs([results["b"], results["b"]])


@pytest.mark.parametrize(("edit", "message"), [
    # each a raw KeyError, TypeError or AttributeError before
    (_set("job_results", [1, 2]), "job_results[0]: must be an object, got 1"),
    (_job("jct", "x"), "job_results[0].jct: must be a finite number or null, got 'x'"),
    (lambda d: d["job_results"][0].pop("jct"), "job_results[0].jct: is required"),
    (lambda d: d["job_results"][0].pop("job_id"),
     "job_results[0]: a job's record needs its job_id (PAL traces) or name (Sia traces)"),
    (_set("avg_jct", "abc"), "avg_jct: must be a finite number or null, got 'abc'"),
    (_set("n_completed", "24"), "n_completed: must be a non-negative integer, got '24'"),
    (_set("config", [1]), "config: must be an object, got an array"),
    (_set("round_log", 5), "round_log: must be an object, got 5"),
    # taken before: a job counted twice, more jobs finished than run
    (_job("job_id", 0, 1), "job_results[1].job_id: 0 again (job_results[0] is that job)"),
    (_set("n_completed", 99), "n_completed: 99 jobs finished of 24"),
])
def test_a_damaged_result_file_is_one_line(results, tmp_path, capsys, edit, message):
    bad = _edited(results, tmp_path, edit)
    outs = [tmp_path / "s.csv", tmp_path / "j.csv"]
    msg = _one_error(capsys, main(["compare", str(bad), str(results["b"]), "--csv", str(outs[0]),
                                   "--jobs-csv", str(outs[1])]))
    assert msg == f"{bad}: {message}"
    assert not any(p.exists() for p in outs)


def test_a_damaged_round_log_is_one_line_before_the_figure(results, tmp_path, capsys):
    """A round log whose columns disagree drew the figure from ``IndexError`` onwards."""
    pytest.importorskip("matplotlib")
    bad = _edited(results, tmp_path, lambda d: d["round_log"].__setitem__("time", d["round_log"]["time"][:3]))
    png = tmp_path / "c.png"
    msg = _one_error(capsys, main(["compare", str(bad), str(results["b"]), "--plot", str(png)]))
    assert msg.startswith(f"{bad}: round_log.busy_gpu_seconds: ") and msg.endswith(", but round_log.time has 3")
    assert not png.exists()


@pytest.mark.parametrize(("which", "kind"), [("round", "instance"), ("placement", "placement")])
def test_an_instance_or_placement_file_is_named_as_such(results, tmp_path, capsys, which, kind):
    path = PAPER
    if which == "placement":
        path = tmp_path / "pal.json"
        assert main(["solve", str(PAPER), "--method", "pal", "--out", str(path), "--quiet"]) == 0
        capsys.readouterr()
    msg = _one_error(capsys, main(["compare", str(path), str(results["a"])]))
    assert msg.startswith(f"{path}: is a pal-opt {kind} file, not a result of pal-opt simulate")


def test_runs_of_another_trace_are_not_compared_job_by_job(results, tmp_path, capsys):
    """Jobs of another trace that share ids were set against each other as the same jobs (``median
    1.0xx, ... (of 24)``), in the report, the per-job table and the figure's panel."""
    table = tmp_path / "jobs.csv"
    capsys.readouterr()
    assert main(["compare", str(results["a"]), str(results["later"]), "--jobs-csv", str(table)]) == 0
    last = capsys.readouterr().out.splitlines()[-2]
    assert last == ("  later  no job finished under both (job 0 was submitted at 307 s in a, at 407 s in later: "
                    "another trace? a job is compared only with itself)")
    with table.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 48 and not any(r["ratio:later"] for r in rows)
    assert {r["submit_time"] for r in rows if r["job"] == "0"} == {"307.0", "407.0"}
    assert main(["compare", str(results["a"]), str(results["b"])]) == 0  # one trace: every job compared
    assert capsys.readouterr().out.splitlines()[-1].endswith("(of 24)")


def _runs(results: dict[str, Path]) -> dict[str, Any]:
    return load_runs([results["a"], results["b"]])


@pytest.mark.parametrize("call", [comparison_report, summary_csv_text, job_jcts_csv_text])
@pytest.mark.parametrize(("edit", "path"), [
    (lambda r: r.__setitem__("job_results", 5), "runs['b'].job_results"),
    (lambda r: r["job_results"].__setitem__(0, 5), "runs['b'].job_results[0]"),
    (lambda r: r.__setitem__("avg_jct", "x"), "runs['b'].avg_jct"),
    (lambda r: r.__setitem__("n_completed", "x"), "runs['b'].n_completed"),
    (lambda r: r.__setitem__("config", [1]), "runs['b'].config"),
    (lambda r: r["job_results"][0].__setitem__("jct", "x"), "runs['b'].job_results[0].jct"),
])
def test_the_python_api_raises_pal_opts_errors(results, call, edit, path):
    runs = copy.deepcopy(_runs(results))
    edit(runs["b"])
    with pytest.raises(InputTypeError) as info:
        call(runs)
    assert info.value.path == path


def test_labels_that_are_not_text_are_refused(results):
    runs = _runs(results)
    with pytest.raises(InputTypeError, match="a run's label must be a str, got int 1"):
        comparison_report({1: runs["a"], 2: runs["b"]})


# --------------------------------------------------------------------------- solve --jobs-from
@pytest.fixture(scope="module")
def pal_placement(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("placement") / "pal.json"
    assert main(["solve", str(PAPER), "--method", "pal", "--out", str(path), "--quiet"]) == 0
    return path


def test_jobs_from_a_placement_of_another_round_is_refused(pal_placement, tmp_path, capsys):
    """The paper round's PAL placement given for ``mid-32x8`` (whose job ids it shares) was solved
    and priced there: ``slowdown 1.6336, +39.17% against this answer``, a gap of nothing."""
    mid, out, lp = ROOT / "instances" / "mid-32x8.json", tmp_path / "o.json", tmp_path / "o.lp"
    capsys.readouterr()
    msg = _one_error(capsys, main(["solve", str(mid), "--method", "ilp", "--jobs-from", str(pal_placement),
                                   "--out", str(out), "--write-lp", str(lp)]))
    assert msg.startswith(f"{pal_placement}: not a placement of {mid}: job 2: needs 6 distinct GPUs, got [")
    assert msg.endswith("more violations: pal-opt check lists them); it was solved for " + str(PAPER))
    assert not out.exists() and not lp.exists()


@pytest.mark.parametrize(("content", "message"), [
    # each solved no job and exited 0 before
    ({"format": "pal-opt/placement", "version": 1, "placements": {}}, "placements: places no job"),
    ({}, "placements: places no job"),
    # named --jobs, which was not given: "--jobs 999: not a job of ... (its 40 jobs: ...)"
    ({"placements": {"999": [0]}}, f"not a placement of {PAPER}: job '999': not in the queue"),
    ({"placements": {"1": [0, 1, 2, 3]}}, f"not a placement of {PAPER}: job 1: needs 1 distinct GPU, got [0, 1, 2, 3]"),
])
def test_jobs_from_a_placement_that_places_nothing_here_is_refused(tmp_path, capsys, content, message):
    given, out = tmp_path / "given.json", tmp_path / "o.json"
    given.write_text(json.dumps(content))
    msg = _one_error(capsys, main(["solve", str(PAPER), "--method", "ilp", "--jobs-from", str(given),
                                   "--out", str(out)]))
    assert msg.startswith(f"{given}: {message}")
    assert not out.exists()


def test_jobs_from_a_valid_placement_is_still_taken(pal_placement, tmp_path, capsys):
    out = tmp_path / "o.json"
    capsys.readouterr()
    assert main(["solve", str(PAPER), "--method", "ilp", "--jobs-from", str(pal_placement), "--out", str(out)]) == 0
    assert sorted(json.loads(out.read_text())["placements"]) == sorted(json.loads(pal_placement.read_text())["placements"])


# --------------------------------------------------------------------------- simulate --seed
@pytest.mark.parametrize("command", ["simulate", "simulate-sia"])
def test_a_seed_beside_a_failure_seed_on_a_sia_trace_is_refused(tmp_path, capsys, command):
    """On a Sia trace without ``--variability``, ``--failures --failure-seed 2 --seed 1`` ran (seeds
    1, 3 and none gave the same run, ``pal-opt compare`` found: 6 of 6 jobs the same), as a PAL
    trace refuses it."""
    out = tmp_path / "r.json"
    msg = _one_error(capsys, main([command, str(ROOT / "examples" / "data" / "newtrace-mini.csv"), "--failures",
                                   "--failure-seed", "2", "--seed", "1", "--quiet", "-o", str(out)]))
    assert msg == ("--seed 1 changes nothing: without --variability every GPU is nominal, and the failures are "
                   "drawn from --failure-seed 2")
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--jobs-from", "--jobs"])
def test_admission_beside_given_jobs_is_said_in_the_flags_words(pal_placement, tmp_path, capsys, flag):
    """``give either admission= or jobs=, not both``: the Python API's words, for flags."""
    out = tmp_path / "o.json"
    value = str(pal_placement) if flag == "--jobs-from" else "1,2"
    msg = _one_error(capsys, main(["solve", str(PAPER), "--method", "ilp", flag, value, "--admission", "backfill",
                                   "--out", str(out)]))
    assert msg == f"give --admission or {flag}, not both: {flag} places exactly its jobs, with no admission rule"
    assert not out.exists()
    # a method that takes no --jobs is told so first, as before
    msg = _one_error(capsys, main(["solve", str(PAPER), "--method", "pal", "--jobs", "1,2", "--admission", "backfill"]))
    assert msg == "option(s) --jobs do not apply to method 'pal'"


# --------------------------------------------------------------------------- simulate --variability on a Sia trace
def test_a_variability_item_is_named_as_it_was_typed(tmp_path):
    """``--variability classA=DIR`` was named ``--variability aws:classA`` (the first type it was
    spelled out for), and an item repeating another's (type, class) did not say which item."""
    from pal_opt.errors import InstanceError, OptionError
    from pal_opt.hetero.gpus import GpuType, parse_variability

    types = (GpuType("aws", 1, 4), GpuType("rtx", 1, 8))
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("perf\n1.0\n")
    b.write_text("perf\n1.1\n")
    with pytest.raises(InstanceError) as info:
        parse_variability([f"classA={tmp_path}"], types)
    assert str(info.value) == f"{tmp_path}: --variability classA={tmp_path}: a directory, not a measurement CSV file"
    with pytest.raises(OptionError) as twice:
        parse_variability([f"classA={a}", f"rtx:classA={b}"], types)
    assert str(twice.value) == f"--variability rtx:classA={b}: rtx:classA given twice (by --variability classA={a} too)"
