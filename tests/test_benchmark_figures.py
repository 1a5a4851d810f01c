"""Figures drawn from a benchmark's committed data: ``warm_resolve.png``, ``stage_scale.png``,
``pipedream_ip.png`` and ``pipedream_partition.png``.

Each page's writer links its figure, the committed page links it where the writer puts it, and
``--plot-only`` draws it again from the committed json or csv without running the benchmark.
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


def _ip_row(case: str, status: str, value: float, ip_s: float) -> dict:
    return {"case": case, "segments": 1, "ip_seconds": ip_s, "ip_status": status, "ip_time_per_sample": value,
            "dp_seconds": 0.1, "dp_time_per_sample": 0.01, "authors_time_per_sample": 0.01,
            "agree_dp": value == 0.01, "match_authors": value == 0.01}


def test_pipedream_ip_draws_its_cases(tmp_path: Path) -> None:
    ip = _module("pipedream_ip")
    rows = [_ip_row("alexnet-8", "solved", 0.01, 0.5), _ip_row("gnmt-8", "solved", 0.01, 3.0),
            _ip_row("gnmt-4x4", "not finished in 5 s", float("nan"), 5.1)]  # drawn at the seconds it ran
    ip.plot(rows, tmp_path / "i.png", 5.0)
    assert (tmp_path / "i.png").read_bytes()[:8] == PNG
    assert f"none.\n\n{ip.FIGURE_LINK}\n\n| case |" in ip.report(rows[:2], 5.0, "Produced by x")


def test_the_pipedream_ip_page_links_its_figure_where_the_writer_puts_it() -> None:
    """The committed page from its description to its machine line is what the writer makes of
    the committed csv (read back with the writer's types), the figure's line included."""
    ip = _module("pipedream_ip")
    rows = ip.read_rows(RESULTS / "pipedream_ip.csv")
    assert isinstance(rows[0]["segments"], int) and rows[0]["agree_dp"] is True
    written = ip.report(rows, 120.0, "Produced by x")
    committed = (RESULTS / "pipedream_ip.md").read_text()
    start, end = "`benchmarks/pipedream_ip.py`:", "\nMachine:"
    assert written[written.index(start):written.index(end)] == committed[committed.index(start):committed.index(end)]
    assert f"none.\n\n{ip.FIGURE_LINK}\n\n| case |" in committed
    assert (RESULTS / ip.FIGURE).read_bytes()[:8] == PNG


def _partition_row(case: str, ours: float, theirs: float) -> dict:
    return {"case": case, "states": 22, "engine": "python", "ours_wall_s": ours, "ours_min_wall_s": ours,
            "ours_cpu_s": ours, "authors_s": theirs, "speedup": theirs / ours, "target": 10.0 if theirs > 2 else 1.0,
            "target_met": theirs / ours >= (10.0 if theirs > 2 else 1.0), "time_per_sample": 0.01,
            "authors_time_per_sample": 0.01, "rel_error": 0.0, "match": True, "stages": 2, "authors_stages": 2}


def test_pipedream_partition_draws_its_cases(tmp_path: Path) -> None:
    pp = _module("pipedream_partition")
    rows = [_partition_row("alexnet-8", 0.2, 0.5), _partition_row("gnmt-8", 0.5, 0.4),  # one slower
            _partition_row("resnet50-8x4", 0.5, 30.0)]
    pp.plot(rows, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == PNG
    assert f"agree.\n\n{pp.FIGURE_LINK}\n\n## Machine" in pp.to_markdown(rows, 5, ("1", "1"), "Produced by x")


def test_the_pipedream_partition_page_links_its_figure_where_the_writer_puts_it() -> None:
    """The committed page from its description to its machine section is what the writer makes of
    the committed csv (its 5 runs a case, the default), the figure's line included."""
    pp = _module("pipedream_partition")
    rows = pp.read_rows(RESULTS / "pipedream_partition.csv")
    assert isinstance(rows[0]["authors_s"], float) and rows[0]["match"] is True
    written = pp.to_markdown(rows, 5, ("1", "1"), "Produced by x")
    committed = (RESULTS / "pipedream_partition.md").read_text()
    start, end = "Each of the", "## Machine"
    assert written[written.index(start):written.index(end)] == committed[committed.index(start):committed.index(end)]
    assert f"agree.\n\n{pp.FIGURE_LINK}\n\n## Machine" in committed
    assert (RESULTS / pp.FIGURE).read_bytes()[:8] == PNG


@pytest.mark.parametrize("name", ["warm_resolve", "stage_scale", "pipedream_ip", "pipedream_partition"])
def test_plot_only_draws_the_figure_from_the_committed_data_and_runs_nothing(name: str, tmp_path: Path) -> None:
    """Nor does it need the data a run reads: ``--shared`` names a directory that is not there."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    shared = ["--shared", str(tmp_path / "absent")] if name.startswith("pipedream") else []
    proc = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), "--plot-only", "--out-dir", str(out),
                           *shared], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [f"{name}.png"]  # no page, no json or csv: nothing ran
    assert (out / f"{name}.png").read_bytes()[:8] == PNG



@pytest.mark.parametrize(("name", "flag"), [("warm_resolve", ["--sizes", "2048"]), ("stage_scale", ["--limits", "5"]),
                                           ("pipedream_ip", ["--cases", "alexnet-8"]),
                                           ("pipedream_partition", ["--runs", "2"])])
def test_plot_only_refuses_an_option_of_the_run_it_would_ignore(name: str, flag: list[str], tmp_path: Path) -> None:
    """``--plot-only --sizes 2048`` drew the committed run's every size without a word."""
    proc = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), "--plot-only", *flag, "--out-dir",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (f"{name}.py: error: --plot-only draws the committed run, so {flag[0]} "
                                            "would not apply")
    assert list(tmp_path.iterdir()) == []
