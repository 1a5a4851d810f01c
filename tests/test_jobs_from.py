"""``pal-opt solve --jobs-from PLACEMENT.json``: the optimum of the job set a greedy placed, and
the greedy's gap to it, in one command (README §2, from the command line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pal_opt.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "instances" / "paper-16x4.json"


def _solve(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["solve", str(PAPER), *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("greedy", ["pal", "packed"])
def test_the_greedys_jobs_placed_best_and_its_gap(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  greedy: str) -> None:
    mine, best, same = tmp_path / "g.json", tmp_path / "best.json", tmp_path / "same.json"
    assert _solve(capsys, "--method", greedy, "--out", str(mine))[0] == 0
    rc, out, _ = _solve(capsys, "--method", "ilp", "--jobs-from", str(mine), "--out", str(best))
    assert rc == 0
    g, b = json.loads(mine.read_text()), json.loads(best.read_text())
    assert b["admission"] == "given" and sorted(b["placements"]) == sorted(g["placements"])
    assert b["status"] == "optimal" and b["objective"] <= g["objective"] + 1e-9
    # the same answer as --jobs with the ids spelled out
    assert _solve(capsys, "--method", "ilp", "--jobs", ",".join(g["placements"]), "--out", str(same))[0] == 0
    assert json.loads(same.read_text())["placements"] == b["placements"]
    line = next(ln for ln in out.splitlines() if ln.startswith("against"))
    ratio = g["geomean_slowdown"] / b["geomean_slowdown"]
    assert line == (f"against    {mine} ({greedy}): slowdown {g['geomean_slowdown']:.4f}, {ratio - 1:+.2%} against "
                    f"this answer, {ratio * (1 + b['gap']) - 1:+.2%} against the proven bound")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--method", "pal"], "--jobs-from applies to the exact methods that take --jobs, not to 'pal'"),
        (["--method", "ilp-preempt"], "--jobs-from applies to the exact methods that take --jobs, not to 'ilp-preempt'"),
        (["--method", "ilp", "--jobs", "1"], "give --jobs or --jobs-from, not both"),
    ],
)
def test_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                               message: str) -> None:
    mine, out = tmp_path / "g.json", tmp_path / "o.json"
    assert _solve(capsys, "--method", "pal", "--out", str(mine))[0] == 0
    rc, _, err = _solve(capsys, *args, "--jobs-from", str(mine), "--out", str(out))
    assert rc == 2 and err == f"pal-opt: error: {message}\n" and not out.exists()


def test_an_instance_file_is_not_a_placement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _solve(capsys, "--method", "ilp", "--jobs-from", str(PAPER))
    assert rc == 2 and "paper-16x4.json: format: must be 'pal-opt/placement' (a placement file)" in err
    out = tmp_path / "o.json"
    rc, _, err = _solve(capsys, "--method", "ilp", "--jobs-from", str(out), "--out", str(out))
    assert rc == 2 and "which it would overwrite" in err


def test_the_bound_line_counts_the_gap_of_an_answer_not_proven_optimal(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """With ``--gap`` the answer stops short of optimal: the proven bound lies ``gap`` below it,
    so the greedy is ``(its slowdown / the answer's) * (1 + gap) - 1`` above the bound, more than
    it is above the answer (on the optimal solves above the two figures round alike)."""
    mine, best = tmp_path / "g.json", tmp_path / "best.json"
    assert _solve(capsys, "--method", "pal", "--out", str(mine))[0] == 0
    rc, out, _ = _solve(capsys, "--method", "ilp", "--jobs-from", str(mine), "--gap", "0.05", "--out", str(best))
    assert rc == 0
    g, b = json.loads(mine.read_text()), json.loads(best.read_text())
    assert b["status"] == "feasible" and b["gap"] > 1e-4  # (0.015% on this round)
    ratio = g["geomean_slowdown"] / b["geomean_slowdown"]
    against, bound = f"{ratio - 1:+.2%}", f"{ratio * (1 + b['gap']) - 1:+.2%}"
    assert against != bound and f"{ratio / (1 + b['gap']) - 1:+.2%}" != bound
    line = next(ln for ln in out.splitlines() if ln.startswith("against"))
    assert line.endswith(f"{against} against this answer, {bound} against the proven bound")
