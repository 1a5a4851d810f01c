"""``pal-opt solve/repair --plot``: a placement drawn (``pal_opt/placement_figure.py``).

The cells are checked against the placement they draw (each held GPU in its job's colour at its
server's row, failed GPUs black, each held GPU's factor that of its job's class), the figure is
written with ``--out`` all or none, and bad ``--plot`` values are one line with exit 2 before any
work.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import pal_opt
from pal_opt.binning import binned_factors
from pal_opt.cli import main
from pal_opt.model import GpuState

pytest.importorskip("matplotlib")

from pal_opt.placement_figure import placement_cells, placement_figure, plot_placement  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "instances" / "paper-16x4.json"
PNG = b"\x89PNG\r\n\x1a\n"


def _racked_round() -> pal_opt.RoundInstance:
    """Two racks; servers of 4, 2 and 3 GPUs listed out of rack order; one GPU busy, one failed."""
    servers = ["a", "a", "a", "a", "b", "b", "c", "c", "c"]
    factors = {"classA": [1.0, 1.1, 1.2, 1.3, 1.0, 1.05, 0.9, 1.0, 1.4], "classB": [1.0] * 9}
    state = [0, 0, 0, 0, 0, 1, 0, 0, 2]
    cluster = pal_opt.Cluster.from_arrays(range(10, 19), servers, factors, state, {"a": "r1", "b": "r0", "c": "r1"})
    jobs = (pal_opt.Job(id="x", demand=3, perfclass="classA"), pal_opt.Job(id="y", demand=2, perfclass="classB"),
            pal_opt.Job(id="z", demand=1, perfclass="classA"))
    return pal_opt.RoundInstance(cluster, jobs, pal_opt.RoundParams(), name="racked")


def test_cells_draw_every_gpu_where_it_is() -> None:
    inst = _racked_round()
    result = pal_opt.solve(inst, "ilp", backend="highs")
    assert result.placements and not pal_opt.check(inst, result)
    factors = binned_factors(inst.cluster, "none")
    held = {g: j for j, gpus in result.placements.items() for g in gpus}
    spare = next(g for g in range(10, 18) if g not in held and inst.cluster.state[g - 10] == GpuState.FREE)
    cells = placement_cells(inst, result.placements, factors, failed=[spare])
    cl = inst.cluster
    # rows rack by rack: r1's servers a and c, then r0's b; a new rack starts at row 2
    assert [cl.server_ids[s] for s in cells.row_server] == ["a", "c", "b"] and cells.rack_ends == [2]
    assert cells.image.shape == (3, 4, 4)
    row = {"a": 0, "c": 1, "b": 2}
    col = {10: 0, 11: 1, 12: 2, 13: 3, 16: 0, 17: 1, 18: 2, 14: 0, 15: 1}
    server = dict(zip(range(10, 19), ["a"] * 4 + ["b"] * 2 + ["c"] * 3, strict=True))
    perfclass = {j.id: j.perfclass for j in inst.jobs}
    for g in range(10, 19):
        r, c = row[server[g]], col[g]
        if g == spare:
            assert tuple(cells.image[r, c]) == (0.0, 0.0, 0.0, 1.0)  # failed by the caller
        elif g in held:
            assert tuple(cells.image[r, c]) == cells.colours[held[g]] and cells.job_at[(r, c)] == held[g]
            assert cells.speed[r, c] == factors[perfclass[held[g]]][g - 10]
        else:
            assert (r, c) not in cells.job_at and np.isnan(cells.speed[r, c])
    assert tuple(cells.image[row["c"], col[18]]) == (0.0, 0.0, 0.0, 1.0)  # failed in the round
    assert tuple(cells.image[row["b"], col[15]]) == pytest.approx((0.62, 0.62, 0.62, 1.0))  # busy
    assert tuple(cells.image[2, 3]) == pytest.approx((0.94, 0.94, 0.94, 1.0))  # server b has no 4th GPU
    assert len(set(cells.colours.values())) == len(result.placements)
    assert inst.cluster.state[8] == GpuState.FAILED


def test_a_job_keeps_its_colour_in_every_picture_of_the_round() -> None:
    """``solve --plot`` and ``repair --plot`` of one round drew a job in different colours (they
    went by the placed jobs' first GPUs); a job's colour is its position in the queue's."""
    inst = pal_opt.load_instance(PAPER)
    placed = pal_opt.solve(inst, "pal").placements
    factors = binned_factors(inst.cluster, "none")
    whole = placement_cells(inst, placed, factors).colours
    kept = dict(list(placed.items())[1::2])  # every other job, as a repair might leave them
    assert placement_cells(inst, kept, factors).colours == {j: whole[j] for j in kept}


def test_the_factor_panel_keeps_a_small_spread_pale(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its colour scale spans at least 5 % from 1.0: a 0.987-1.002 spread was painted from pale
    yellow to dark red."""
    from pal_opt import placement_figure as pf

    seen: dict[str, float] = {}

    class _Ax:
        def imshow(self, data: object, **kw: float) -> None:
            seen.update(vmin=kw["vmin"], vmax=kw["vmax"])

        def __getattr__(self, name: str) -> object:
            return lambda *a, **k: None

    class _Fig:
        def colorbar(self, *a: object, **k: object) -> None:
            return None

    speed = np.array([[0.987, 1.002, np.nan]])
    pf._draw_speed(_Fig(), _Ax(), pf.Cells(np.zeros((1, 3, 4)), speed, {}, np.zeros(1, dtype=np.int64), [], {}))
    assert seen == {"vmin": 0.987, "vmax": pytest.approx(1.037)}
    pf._draw_speed(_Fig(), _Ax(), pf.Cells(np.zeros((1, 2, 4)), np.array([[1.0, 1.4]]), {},
                                           np.zeros(1, dtype=np.int64), [], {}))
    assert seen == {"vmin": 1.0, "vmax": 1.4}  # a wide spread keeps its own range


def test_the_figure_is_an_image_of_the_asked_format_and_repeats(tmp_path: Path) -> None:
    inst = pal_opt.load_instance(PAPER)
    result = pal_opt.solve(inst, "pal")
    one = placement_figure(inst, result, "a.png")
    assert one.startswith(PNG) and placement_figure(inst, result, "b.png") == one
    assert placement_figure(inst, result, "a.svg").lstrip().startswith(b"<?xml")
    plot_placement(inst, result, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes() == one


def test_a_format_matplotlib_cannot_write_is_an_option_error_and_writes_nothing(tmp_path: Path) -> None:
    """``plot_placement(..., "p.txt")`` and the simulator's ``plot_result(..., "r.txt")`` raised
    matplotlib's ``ValueError: Format 'txt' is not supported`` after drawing; the commands'
    ``--plot`` checked it, the library did not.  A name without a suffix stays a PNG."""
    from pal_opt.errors import OptionError
    from pal_opt.io.traces import TraceJob
    from pal_opt.simulate import SimConfig, build_cluster, parse_cluster, plot_jct_cdf, plot_result, simulate

    inst = pal_opt.load_instance(PAPER)
    result = pal_opt.solve(inst, "pal")
    says = r"^path {}: the file name must end in one of \.avif, .*\.png, .*\.svg"
    with pytest.raises(OptionError, match=says.format(".*p\\.txt")):
        plot_placement(inst, result, tmp_path / "p.txt")
    with pytest.raises(OptionError, match=says.format("p\\.txt")):
        placement_figure(inst, result, "p.txt")
    cluster, _ = build_cluster(parse_cluster("1x2"))
    runs = {"pal": simulate([TraceJob(0, 1, 0.0, 10, "resnet50", "classA", 1.0)], cluster, SimConfig())}
    for plot in (plot_result, plot_jct_cdf):
        with pytest.raises(OptionError, match=says.format(".*r\\.txt")):
            plot(runs, tmp_path / "r.txt")
    assert list(tmp_path.iterdir()) == []
    plot_placement(inst, result, tmp_path / "p")
    assert (tmp_path / "p").read_bytes().startswith(PNG)


def test_a_large_round_and_an_empty_placement_draw() -> None:
    inst = pal_opt.generate_instance(nodes=64, gpus_per_node=8, jobs=150, seed=2)
    result = pal_opt.solve(inst, "pal")
    assert len(result.placements) > 40  # drawn as a histogram
    assert placement_figure(inst, result, "big.png").startswith(PNG)
    none = replace(result, placements={})
    assert placement_figure(inst, none, "none.png").startswith(PNG)


def test_solve_and_repair_write_the_figure_with_the_placement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, plot = tmp_path / "p.json", tmp_path / "p.png"
    assert main(["solve", str(PAPER), "--method", "pal", "--out", str(out), "--plot", str(plot), "--quiet"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"  {out}, {plot}")
    assert plot.read_bytes().startswith(PNG) and json.loads(out.read_text())["method"] == "pal"
    gpu = json.loads(out.read_text())["placements"]
    failed = next(iter(gpu.values()))[0]
    rep, rplot = tmp_path / "r.json", tmp_path / "r.png"
    assert main(["repair", str(PAPER), str(out), "--failed", str(failed), "--out", str(rep), "--plot", str(rplot),
                 "--quiet"]) == 0
    assert rplot.read_bytes().startswith(PNG) and rep.exists()
    # the figure alone, without --out
    alone = tmp_path / "alone.pdf"
    assert main(["solve", str(PAPER), "--method", "packed", "--plot", str(alone), "--quiet"]) == 0
    assert alone.read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize(("plot", "message"), [
    ("p.xyz", "--plot {d}/p.xyz: the file name must end in one of"),
    ("missing/p.png", "{d}/missing/p.png: cannot write: directory {d}/missing does not exist"),
    ("p.json", "--plot {d}/p.json: the same file as --out"),
    ("../instances/paper-16x4.json", "--plot"),
])
def test_a_bad_plot_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   plot: str, message: str) -> None:
    (tmp_path / "p.json").write_text("earlier\n")
    if plot.startswith(".."):  # the instance itself
        target = str(PAPER)
        args = ["solve", target, "--method", "pal", "--plot", target]
    else:
        target = str(tmp_path / plot)
        args = ["solve", str(PAPER), "--method", "pal", "--out", str(tmp_path / "p.json"), "--plot", target]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(d=tmp_path) in err, err
    assert (tmp_path / "p.json").read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


def test_gangs_are_outlined_and_a_gang_on_one_server_has_no_inner_line() -> None:
    from pal_opt import placement_figure as pf

    # one server of three GPUs (a, a, b) over a second with one of b's and two free GPUs
    job_at = {(0, 0): "a", (0, 1): "a", (0, 2): "b", (1, 0): "b"}
    cells = pf.Cells(np.zeros((2, 3, 4)), np.full((2, 3), np.nan), job_at, np.arange(2), [], {})
    segments = {tuple(map(tuple, s)) for s in pf.gang_outline(cells).tolist()}
    vertical = {(s[0][0], s[0][1] + 0.5) for s in segments if s[0][0] == s[1][0]}  # (x, row)
    horizontal = {(s[0][0] + 0.5, s[0][1]) for s in segments if s[0][1] == s[1][1]}  # (column, y)
    assert vertical == {(-0.5, 0), (1.5, 0), (2.5, 0), (-0.5, 1), (0.5, 1)}  # none between a's GPUs
    assert horizontal == {(0, -0.5), (1, -0.5), (2, -0.5), (0, 0.5), (1, 0.5), (2, 0.5), (0, 1.5)}
    assert all(abs(s[1][0] - s[0][0]) + abs(s[1][1] - s[0][1]) == 1.0 for s in segments)  # unit edges
    empty = pf.Cells(np.zeros((1, 2, 4)), np.full((1, 2), np.nan), {}, np.arange(1), [], {})
    assert pf.gang_outline(empty).shape == (0, 2, 2)
