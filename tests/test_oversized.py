"""A job needing more GPUs than the cluster has is a fact of the queue, not bad input: it is kept,
reported as unplaceable with its reason, and the other jobs are placed by the queue rule (prefix
admission stops at it, as the PAL artifact does; backfill skips it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pal_opt.check import check
from pal_opt.cli import main
from pal_opt.io import load_instance

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
REASON = "needs 10000 GPUs; the cluster has 16"


@pytest.fixture
def imported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "round.json"
    rc = main(["import", "blox", "--gpus", str(DATA / "gpu_df.csv"), "--jobs", str(DATA / "queue-oversized.csv"),
               "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0 and out.exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pal-opt: warning:") and "job 3 needs 10000 GPUs" in lines[0]
    return out


@pytest.mark.parametrize(
    ("argv", "placed"),
    [
        (["--method", "pal"], {"1", "2"}),  # PAL's order stops at the oversized job, as the artifact
        (["--method", "pal", "--admission", "backfill"], {"1", "2", "4", "5"}),
        (["--method", "ilp", "--admission", "backfill"], {"1", "2", "4", "5"}),
        (["--method", "ilp"], {"1", "2"}),  # prefix admission stops at it
    ],
    ids=["pal", "pal-backfill", "ilp-backfill", "ilp-prefix"],
)
def test_solve_reports_the_oversized_job(imported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         argv: list[str], placed: set[str]) -> None:
    out = tmp_path / "placement.json"
    rc = main(["solve", str(imported), *argv, "--out", str(out)])
    stdout = capsys.readouterr().out
    assert rc == 0
    doc = json.loads(out.read_text())
    assert set(doc["placements"]) == placed
    assert doc["unplaceable"] == [{"job": 3, "reason": REASON}]
    assert f"job 3: {REASON}" in stdout
    assert check(load_instance(imported), doc) == []
