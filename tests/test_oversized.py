"""A job needing more GPUs than the cluster has is a fact of the queue, not bad input: it is kept,
reported as unplaceable with its reason, and the other jobs are placed by the queue rule (prefix
admission stops at it, as the PAL artifact does; backfill skips it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pal_opt import solve
from pal_opt.admission import admit, pal_order
from pal_opt.check import check
from pal_opt.cli import main
from pal_opt.errors import InstanceError
from pal_opt.io import load_instance
from pal_opt.model import Cluster, Job, RoundInstance, RoundParams

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


def _huge_round(*demands: int) -> RoundInstance:
    """8 GPUs; jobs h0, h1, ... with ``demands`` (up to 2**63 - 1), then ``ok`` (2 GPUs)."""
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 8})
    jobs = tuple(Job(f"h{k}", d, "classA", k) for k, d in enumerate(demands))
    return RoundInstance(cl, (*jobs, Job("ok", 2, "classA", len(jobs))), RoundParams(binning="none"))


@pytest.mark.parametrize("method", ["ilp", "ilp-partitioned", "pal", "packed"])
@pytest.mark.parametrize("demands", [(9_200_000_000_000_000_000,), (2**62, 2**62, 2**62), (2**63 - 1, 2**63 - 1)],
                         ids=["9.2e18", "three-2^62", "two-int64-max"])
def test_demands_near_int64_are_unplaceable_and_do_not_overflow(method: str, demands: tuple[int, ...]) -> None:
    inst = _huge_round(*demands)
    reasons = {f"h{k}": f"needs {d} GPUs; the cluster has 8" for k, d in enumerate(demands)}
    for admission, placed in (("prefix", set()), ("backfill", {"ok"})):
        opts = {"executor": "serial"} if method == "ilp-partitioned" else {}
        res = solve(inst, method, admission=admission, **opts)
        assert res.unplaceable == reasons and set(res.placements) == placed and check(inst, res) == []
    assert admit(inst, "prefix") == [] and admit(inst, "backfill") == [len(demands)]
    assert pal_order(inst) == list(range(len(demands) + 1))


def test_a_demand_beyond_64_bits_is_bad_input_as_in_the_instance_file() -> None:
    with pytest.raises(InstanceError, match=r"^jobs\[0\]\.demand: must be a positive integer that fits in 64 bits"):
        Job("h", 2**63, "classA")
    with pytest.raises(InstanceError, match=r"^jobs\[0\]\.allowed_counts: must be a non-empty list"):
        Job("h", 2, "classA", kind="strong-scaling", allowed_counts=(2, 2**64))
    assert Job("h", 2**63 - 1, "classA").demand == 2**63 - 1
