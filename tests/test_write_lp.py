"""``pal-opt solve --method ilp --write-lp`` and :func:`pal_opt.ilp.round_program`: the program a
solve builds, exported as CPLEX LP, read back by HiGHS to the solve's optimum."""

from __future__ import annotations

import json
from pathlib import Path

import highspy
import pytest

import pal_opt
from pal_opt.cli import main
from pal_opt.errors import OptionError
from pal_opt.ilp import round_program
from pal_opt.ilp.lpwriter import lp_text
from pal_opt.model import Cluster, GpuState, Job, Pipeline, RoundInstance, RoundParams

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "instances" / "paper-16x4.json"


def _lp_optimum(path: Path) -> float:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    h.run()
    assert h.modelStatusToString(h.getModelStatus()) == "Optimal"
    return float(h.getInfo().objective_function_value)


@pytest.mark.parametrize("extra", [[], ["--admission", "backfill"], ["--jobs", "0,1,3,28"]])
def test_the_written_program_is_the_solves_and_has_its_optimum(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               extra: list[str]) -> None:
    lp, out = tmp_path / "round.lp", tmp_path / "p.json"
    assert main(["solve", str(PAPER), "--method", "ilp", "--write-lp", str(lp), "--out", str(out), *extra]) == 0
    assert f"wrote      {out}, {lp}" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    inst = pal_opt.load_instance(PAPER)
    admission = extra[1] if extra[:1] == ["--admission"] else None
    jobs = [int(j) for j in extra[1].split(",")] if extra[:1] == ["--jobs"] else None
    form, label = round_program(inst, admission=admission, jobs=jobs)
    assert label == doc["admission"]
    assert [inst.jobs[i].id for i in form.admitted] == sorted(int(j) for j in doc["placements"])
    text = lp.read_text()
    plain = lp_text(form)
    assert text[text.index("\nMinimize\n"):] == plain[plain.index("\nMinimize\n"):]  # past the comment lines
    assert f"admission {label}, binning pal-artifact; {len(form.admitted)} admitted jobs: " in " ".join(
        ln.lstrip("\\ ") for ln in text.splitlines()[1:3])
    assert _lp_optimum(lp) == pytest.approx(doc["objective"], abs=1e-6)
    assert doc["info"]["num_vars"] == form.num_vars and doc["info"]["num_rows"] == form.num_rows


def test_the_same_round_writes_the_same_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.lp", tmp_path / "b.lp"
    for path in (a, b):
        assert main(["solve", str(PAPER), "--method", "ilp", "--write-lp", str(path), "--quiet"]) == 0
    assert a.read_bytes() == b.read_bytes()


def test_write_lp_is_for_ilp_only_and_writes_nothing_else(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lp, out = tmp_path / "x.lp", tmp_path / "p.json"
    capsys.readouterr()
    assert main(["solve", str(PAPER), "--method", "pal", "--write-lp", str(lp), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == "pal-opt: error: --write-lp writes the program of --method ilp, not of 'pal'\n"
    assert not lp.exists() and not out.exists()
    assert main(["solve", str(PAPER), "--method", "ilp", "--write-lp", str(PAPER)]) == 2
    assert "which it would overwrite" in capsys.readouterr().err


def test_a_round_with_a_pipeline_job_is_not_exported() -> None:
    cluster = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 8})
    jobs = (Job("p", 4, "classA", 0, pipeline=Pipeline((2.0, 1.0), (3, 1))), Job("g", 2, "classA", 1))
    inst = RoundInstance(cluster, jobs, RoundParams(binning="none"))
    with pytest.raises(OptionError, match="job 'p' is a pipeline job: its round is the stage program"):
        round_program(inst)
    form, label = round_program(inst, jobs=["g"])  # the gang alone is the round program's
    assert label == "given" and [inst.jobs[i].id for i in form.admitted] == ["g"]
    with pytest.raises(OptionError, match="unknown binning mode 'x'"):
        round_program(inst, binning="x")


def test_a_program_shows_its_size_not_its_arrays() -> None:
    """``print(build_formulation(inst))`` printed every coefficient, bound and name (over 200 lines
    for the paper's 64 GPUs)."""
    from pal_opt.hetero.jointprogram import JointProgram
    from pal_opt.hetero.levelprogram import LevelProgram
    from pal_opt.hetero.roundprogram import RoundProgram
    from pal_opt.ilp import Formulation, Program

    form, _ = round_program(pal_opt.load_instance(PAPER))
    assert repr(form) == "<Formulation: 126 variables (35 integer), 64 rows, 292 nonzeros>"
    small = Program.from_arrays(c=[1, 2], A=[[1, 1]], row_lo=[1], row_hi=[2], col_lo=[0, 0], col_hi=[1, 1],
                                integrality=[True, False])
    assert repr(small) == "<Program: 2 variables (1 integer), 1 row, 2 nonzeros>"
    assert all(cls.__repr__ is Program.__repr__ for cls in (Formulation, RoundProgram, LevelProgram, JointProgram))


# --------------------------------------------------------------------------- an infeasible round
def _save(tmp_path: Path, *jobs: Job, state: list[GpuState] | None = None) -> Path:
    """``aws:2x4,rtx:1x8`` (GPUs 0-7 aws, 8-15 rtx) with ``jobs``, saved."""
    cl = Cluster.from_arrays(range(16), [0] * 4 + [1] * 4 + [2] * 8, {"classA": [1.0] * 16},
                             gpu_types=["aws"] * 8 + ["rtx"] * 8, state=state)
    path = tmp_path / "round.json"
    pal_opt.save_instance(RoundInstance(cl, jobs, RoundParams(binning="none"), name="typed"), path)
    return path


def test_an_infeasible_round_writes_its_program_and_says_where(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Jobs of 6, 6 and 4 GPUs on 8 aws and 8 rtx GPUs each fit alone, not together: the solver
    proves the program infeasible.  The program was built and then dropped with exit 1, though it
    is the one a user takes to another solver to see why; ``--out`` stays unwritten."""
    path = _save(tmp_path, Job("a", 6, "classA", 0), Job("b", 6, "classA", 1), Job("c", 4, "classA", 2))
    lp, out = tmp_path / "round.lp", tmp_path / "p.json"
    capsys.readouterr()
    assert main(["solve", str(path), "--method", "ilp", "--jobs", "a,b,c", "--write-lp", str(lp),
                 "--out", str(out)]) == 1
    o, e = capsys.readouterr()
    assert o == ""
    assert e.splitlines() == [
        "pal-opt: error: infeasible round: jobs a, b, c (3 jobs): jobs a, b, c need 16 GPUs but cannot all get "
        "GPUs of their types at once (free per type: aws 8, rtx 8); each fits alone",
        f"pal-opt: wrote the infeasible round program to {lp}"]
    assert sorted(tmp_path.iterdir()) == sorted([path, lp])  # no --out, no temporary left
    inst = pal_opt.load_instance(path)
    form, label = round_program(inst, jobs=["a", "b", "c"])
    text, plain = lp.read_text(), lp_text(form)
    assert label == "given" and text[text.index("\nMinimize\n"):] == plain[plain.index("\nMinimize\n"):]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(lp))
    h.run()
    assert h.modelStatusToString(h.getModelStatus()) == "Infeasible"


def test_given_jobs_no_program_is_built_for_write_nothing_and_say_so(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Jobs needing more GPUs than are free: no program is built (``round_program`` refuses).  The
    command said so as ``error: InfeasibleRoundError: the admitted jobs need 12 GPUs but only 10
    are free``, not in the words of the same round without ``--write-lp``; now it says those and
    that nothing was written."""
    failed = [GpuState.FAILED] * 6 + [GpuState.FREE] * 10
    path = _save(tmp_path, Job("a", 6, "classA", 0), Job("b", 6, "classA", 1), state=failed)
    lp = tmp_path / "round.lp"
    capsys.readouterr()
    assert main(["solve", str(path), "--method", "ilp", "--jobs", "a,b"]) == 1
    alone = capsys.readouterr().err
    assert main(["solve", str(path), "--method", "ilp", "--jobs", "a,b", "--write-lp", str(lp)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        alone.rstrip("\n"),
        f"pal-opt: nothing written to {lp}: no round program is built for given jobs that cannot fit the free "
        "GPUs (of their types)"]
    assert alone.startswith("pal-opt: error: infeasible round: jobs a, b (2 jobs): jobs a, b need 12 GPUs but only "
                            "10 are free") and not lp.exists()
def test_the_comment_is_wrapped_between_words_never_inside_a_hyphenated_one() -> None:
    """``solve --write-lp`` on the paper round headed its program with ``binning pal-`` and, on
    the next comment line, ``artifact``: textwrap broke the name at its hyphen."""
    form, _ = round_program(pal_opt.load_instance(PAPER))
    comment = "round paper-16x4 (instances/paper-16x4.json); admission prefix, binning pal-artifact; 11 jobs"
    lines = [ln.removeprefix("\\ ") for ln in lp_text(form, comment).splitlines()[1:3]]
    assert lines[0].endswith("binning") and lines[1].startswith("pal-artifact;")
    assert " ".join(lines) == comment
