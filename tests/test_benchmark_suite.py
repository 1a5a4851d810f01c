"""The benchmark suite's --quick profile runs end to end (local pool and Dask)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "benchmarks" / "suite.py"
KEYS = ["case_id", "method"]
RESULT_COLS = ["status", "objective", "bound", "gap", "jobs_placed", "gpus_used", "heur_gap", "violations"]


def _run(out: Path, *extra: str) -> pd.DataFrame:
    cmd = [sys.executable, str(SUITE), "--quick", "--out-dir", str(out), "--no-progress", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return pd.read_csv(out / "suite.csv")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    return out, _run(out)


def test_quick_profile_writes_everything(quick):
    out, df = quick
    for name in ("suite.csv", "suite.md", "suite_time_vs_gpus.png", "suite_heuristic_gap.png",
                 "suite_gap_vs_load.png"):
        p = out / name
        assert p.is_file() and p.stat().st_size > 0, name
    assert (out / "suite_time_vs_gpus.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "suite.md").read_text(encoding="utf-8")
    assert "Heuristic vs optimal" in md and "Load average" in md
    assert {"size-flat", "size-racked", "load", "lambda"} <= set(df["family"])
    assert {"pal", "pmfirst", "packed", "random", "ilp-highs", "ilp-cpsat", "ilp-cbc", "ilp-partitioned"} <= set(
        df["method"])
    assert int(df["violations"].sum()) == 0
    assert df["peak_rss_mib"].gt(0).all()


def test_quick_profile_figures_are_consistent(quick):
    _, df = quick
    ilp = df[df["method"].str.startswith("ilp")]
    assert (ilp["bound"] <= ilp["objective"] + 1e-6).all()
    greedy = df[df["method"].isin(["pal", "pmfirst", "packed", "random"])]
    assert greedy["heur_gap"].notna().all()
    assert (greedy["heur_gap"] >= -1e-9).all()
    # the three backends agree on every round they prove within the target
    # (a backend stopped by the 5 s limit on a loaded machine proves less, and is left out)
    proven = ilp[ilp["method"].isin(["ilp-highs", "ilp-cpsat", "ilp-cbc"]) & (ilp["gap"] <= 1e-3 + 1e-9)]
    assert proven["case_id"].nunique() >= ilp["case_id"].nunique() // 2
    for _, g in proven.groupby("case_id"):
        gm = g["geomean_slowdown"].to_numpy()
        assert max(gm) / min(gm) - 1 <= 2e-3 + 1e-9
    # backfill never places fewer jobs than prefix on the same round
    ld = df[(df["family"] == "load") & (df["method"] == "ilp-highs")]
    for _, g in ld.groupby(["load", "seed"]):
        by = dict(zip(g["admission"], g["jobs_placed"], strict=True))
        assert by["backfill"] >= by["prefix"]


def test_dask_sweep_matches_process_pool(quick, tmp_path):
    distributed = pytest.importorskip("distributed")
    _, ref = quick
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, host="127.0.0.1",
                                  dashboard_address=None, protocol="tcp") as cluster:
        df = _run(tmp_path, "--scheduler", cluster.scheduler_address, "--families", "size-flat,load",
                  "--max-tasks", "3")
    assert len(df) > 0
    assert "Dask at tcp://" in (tmp_path / "suite.md").read_text(encoding="utf-8")
    merged = df.merge(ref, on=KEYS, suffixes=("_dask", "_pool"))
    assert len(merged) == len(df)
    for col in RESULT_COLS:
        a, b = merged[f"{col}_dask"], merged[f"{col}_pool"]
        for x, y in zip(a, b, strict=True):
            if isinstance(x, float) and isinstance(y, float):
                assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-9, abs=1e-9), col
            else:
                assert x == y, col
