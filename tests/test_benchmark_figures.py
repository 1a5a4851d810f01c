"""Figures drawn from a benchmark's committed data: ``warm_resolve.png`` and ``stage_scale.png``.

Each page's writer links its figure, the committed page links it where the writer puts it, and
``--plot-only`` draws it again from the committed json without running the benchmark.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"
PNG = b"\x89PNG\r\n\x1a\n"


def _module(name: str) -> ModuleType:
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def _warm_row(gpus: int, seed: int, k: int, cold: float, warm: float) -> dict:
    return {"gpus": gpus, "seed": seed, "round": k, "load": 1.0, "cold_s": cold, "warm_s": warm, "ratio": cold / warm,
            "cold_objective": 10.0, "warm_objective": 10.0, "cold_gap": 0.004, "warm_gap": 0.004, "cold_bound": 9.9,
            "warm_bound": 9.9, "path": "flow-free", "cold_start": "packing", "warm_start": "packing", "warm": "",
            "lp_start": None, "valid": True}


def test_warm_resolve_draws_its_rounds(tmp_path: Path) -> None:
    wr = _module("warm_resolve")
    rows = [_warm_row(g, 0, k, 1.0, 0.2 if k else 1.1) for g in (64, 16) for k in range(3)]
    wr.plot(rows, tmp_path / "w.png")
    assert (tmp_path / "w.png").read_bytes()[:8] == PNG
    assert wr.FIGURE_LINK in wr.report(rows, "Produced by x")


def test_the_warm_resolve_page_links_its_figure_where_the_writer_puts_it() -> None:
    """The committed page from its summary on is what the writer makes of the committed json
    (its header names the machine and the command of the run, which the json does not keep)."""
    wr = _module("warm_resolve")
    rows = json.loads((RESULTS / "warm_resolve.json").read_text())
    written = "\n".join(wr.report(rows, "Produced by x")) + "\n"
    committed = (RESULTS / "warm_resolve.md").read_text()
    part = "## Summary"
    assert written[written.index(part):] == committed[committed.index(part):]
    assert (RESULTS / wr.FIGURE).read_bytes()[:8] == PNG


def test_stage_scale_draws_its_sizes(tmp_path: Path) -> None:
    ss = _module("stage_scale")
    solves = [{"limit": t, "wall": t, "status": "feasible", "cost": -1.0 - t / 10, "gap": 0.01, "reached": None,
               "start": None, "search": None} for t in (10.0, 30.0)]
    rows = {code: [{"gpus": g, "jobs": g // 4, "pipelines": g // 16, "demand": g, "pal_cost": 2.0, "solves": solves,
                    "build": g / 1000, "cols": 10 * g, "rows": 3 * g, "nnz": 30 * g, "peak_mib": g / 2}
                   for g in (256, 512)] for code in ("now", "before (abc1234)")}
    rows["before (abc1234)"].append({"gpus": 1024, "error": "killed"})  # a failed run is left out
    ss.plot(rows, tmp_path / "s.png")
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG
    assert ss.FIGURE_LINK in ss.page(rows, "Produced by x", "1", "1", False)


def test_the_stage_scale_page_links_its_figure_where_the_writer_puts_it() -> None:
    ss = _module("stage_scale")
    rows = json.loads((RESULTS / "stage_scale.json").read_text())
    committed = (RESULTS / "stage_scale.md").read_text()
    written = ss.page(rows, "Produced by x", "1", "1", False)
    for text in (committed, written):  # after the last table row, before the closing note
        assert f"|\n\n{ss.FIGURE_LINK}\n\n*peak MiB*" in text
    assert (RESULTS / ss.FIGURE).read_bytes()[:8] == PNG


@pytest.mark.parametrize("name", ["warm_resolve", "stage_scale"])
def test_plot_only_draws_the_figure_from_the_committed_json_and_runs_nothing(name: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    proc = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), "--plot-only", "--out-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}.png"]  # no page, no json: nothing ran
    assert (tmp_path / f"{name}.png").read_bytes()[:8] == PNG
