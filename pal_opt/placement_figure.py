"""A placement as a picture: where each job runs, how fast its GPUs are for it, and what it costs.

``pal-opt solve ... --plot PLACEMENT.png`` and ``pal-opt repair ... --plot`` draw it;
:func:`plot_placement` does the same from Python.  Three panels:

1. **The cluster.**  One row per server (grouped by rack, racks separated by a line), one cell per
   GPU in the cluster's order; a cell has its job's colour, free GPUs are white, busy ones (held
   by work outside the round) grey and failed ones black.  On small clusters each cell names its
   job; on every cluster each gang is outlined, so two neighbouring gangs that share a colour
   (the palette has 18) stay apart.
2. **Each GPU's factor for the job on it** (the binned factor the cost uses, divided by the
   class's throughput on the GPU's type where the cluster has types): higher is slower, and a
   gang runs at its slowest GPU's pace.  Free GPUs are blank; gangs are outlined as on the first
   panel.
3. **The jobs by slowdown** (a job's slowest GPU's factor × the locality penalty of the level it
   spans): a bar per placed job, hatched by that level; beyond 40 jobs, a histogram of their
   slowdowns stacked by level.

The figure is drawn in memory (:func:`placement_figure`) so that a command writes it together
with its other outputs, all or none.  It needs matplotlib (``pip install 'pal-opt[plot]'``).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InstanceError
from .model import GpuState, JobId, RoundInstance, is_id_collection, require_gpu_ids, require_instance
from .options import figure_format, file_path
from .result import PlacementResult

__all__ = ["Cells", "gang_outline", "placement_cells", "placement_figure", "plot_placement"]

#: Most bars in the third panel (beyond, a histogram).
MAX_BARS = 40
#: Most GPUs whose cells name their job.
MAX_LABELLED = 256
#: Most servers named on the first panel's axis (beyond it, every k-th).
MAX_TICKS = 48
#: Least span of the factor panel's colour scale (5 %: a small spread stays pale).
SPEED_SPAN = 0.05

_FREE, _BUSY, _FAILED, _NONE = (1.0, 1.0, 1.0, 1.0), (0.62, 0.62, 0.62, 1.0), (0.0, 0.0, 0.0, 1.0), (0.94, 0.94, 0.94, 1.0)
_HATCH = {0: "", 1: "//", 2: "xx"}
#: What each topology level a gang spans is called, on a flat cluster and on a racked one.
_LEVEL = {False: {0: "one server", 2: "several servers"}, True: {0: "one server", 1: "one rack", 2: "several racks"}}


def _grid(instance: RoundInstance) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Rows (servers, rack by rack) and each GPU's (row, column); the row where each rack ends."""
    cl = instance.cluster
    n_servers = len(cl.server_ids)
    racks = cl.rack_of_server
    order = np.lexsort((np.arange(n_servers), racks))  # rack by rack, the cluster's order within
    row_of_server = np.empty(n_servers, dtype=np.int64)
    row_of_server[order] = np.arange(n_servers)
    row = row_of_server[cl.server_of]
    # column: the GPU's rank on its server, in the cluster's order (a stable sort by server)
    by_server = np.argsort(cl.server_of, kind="stable")
    starts = np.searchsorted(cl.server_of[by_server], np.arange(n_servers))
    col = np.empty(cl.num_gpus, dtype=np.int64)
    col[by_server] = np.arange(cl.num_gpus) - starts[cl.server_of[by_server]]
    ends = [int(k) for k in np.flatnonzero(np.diff(racks[order]) != 0) + 1] if cl.rack_ids else []
    return row, col, ends


def _job_colours(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]]) -> dict[JobId, tuple]:
    """A colour per placed job, cycling a qualitative map by the job's position in the round's
    queue: a job keeps its colour in every picture of the round (``solve --plot`` and ``repair
    --plot`` of one round; it once went by the order of the placed jobs' first GPUs, and a job
    changed colour between the two)."""
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    # tab20 without its two greys, which a reader would take for busy GPUs
    palette = [tuple(cmap(i)) for i in range(cmap.N) if i not in (14, 15)]
    index = {job.id: k for k, job in enumerate(instance.jobs)}
    return {j: palette[index.get(j, 0) % len(palette)] for j in placements}


def _server_label(instance: RoundInstance, row_server: np.ndarray, r: int) -> str:
    cl = instance.cluster
    s = int(row_server[r])
    name = str(cl.server_ids[s])
    if cl.type_names:
        t = cl.type_of[cl.server_of == s]
        name += f" ({cl.type_names[int(t[0])]})" if t.size else ""
    return name


def _title(instance: RoundInstance, result: PlacementResult) -> str:
    gap = f", gap {result.gap:.2%}" if result.gap is not None else ""
    name = instance.name or "round"
    return (f"{name}: {result.method}, {result.status.value}{gap}; {result.jobs_placed} of {len(instance.jobs)} jobs on "
            f"{result.gpus_used} GPUs, geometric-mean slowdown {result.geomean_slowdown:.4f}")


@dataclass(frozen=True)
class Cells:
    """What the first two panels show, cell by cell (row: a server, rack by rack; column: its
    GPUs in the cluster's order).

    Attributes
    ----------
    image
        (rows, columns, 4) RGBA: the job's colour, or white (free), grey (busy), black (failed),
        light grey where the server has no GPU.
    speed
        (rows, columns): the binned factor of each held GPU for its job's class; NaN elsewhere.
    job_at
        ``{(row, column): job id}`` for every held GPU.
    row_server
        Each row's server position.
    rack_ends
        The rows at which a new rack starts.
    colours
        Each placed job's colour.
    """

    image: np.ndarray
    speed: np.ndarray
    job_at: dict[tuple[int, int], JobId]
    row_server: np.ndarray
    rack_ends: list[int]
    colours: dict[JobId, tuple]


def placement_cells(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]],
                    factors: Mapping[str, np.ndarray], failed: Collection[int] = ()) -> Cells:
    """The :class:`Cells` of ``placements`` on ``instance`` under the binned ``factors``;
    ``failed`` GPU ids are drawn failed besides those the round marks so."""
    cl = instance.cluster
    colours = _job_colours(instance, placements)
    row, col, rack_ends = _grid(instance)
    n_rows, n_cols = int(row.max()) + 1 if row.size else 0, int(col.max()) + 1 if col.size else 0
    row_server = np.empty(n_rows, dtype=np.int64)
    row_server[row] = cl.server_of
    image = np.empty((n_rows, n_cols, 4))
    image[:] = _NONE
    state = cl.state
    for value, colour in ((GpuState.FREE, _FREE), (GpuState.BUSY, _BUSY)):
        image[row[state == value], col[state == value]] = colour
    down = (state == GpuState.FAILED) | np.isin(cl.gpu_ids, np.asarray(_failed_ids(failed), dtype=np.int64))
    image[row[down], col[down]] = _FAILED
    speed = np.full((n_rows, n_cols), np.nan)
    job_at: dict[tuple[int, int], JobId] = {}
    by_id = instance.job_by_id
    for j, gpus in placements.items():
        pos = cl.positions(gpus)
        image[row[pos], col[pos]] = colours[j]
        speed[row[pos], col[pos]] = factors[by_id[j].perfclass][pos]
        job_at.update({(int(r), int(c)): j for r, c in zip(row[pos], col[pos], strict=True)})
    return Cells(image, speed, job_at, row_server, rack_ends, colours)


def _failed_ids(failed: Any) -> list[int]:
    """``failed`` as a list of GPU ids; an :class:`InstanceError` at ``failed`` if it is not one
    (``1.5`` was drawn as GPU 1, ``"0"`` as GPU 0)."""
    if not is_id_collection(failed):
        raise InstanceError(f"must be a collection of GPU ids such as [3], got {type(failed).__name__}", path="failed")
    ids = list(failed)
    require_gpu_ids(ids, "failed")
    return ids


def gang_outline(cells: Cells) -> np.ndarray:
    """The segments that outline each gang on the grid of ``cells``: ``(k, 2, 2)``, each segment's
    two (column, row) end points in the panels' data coordinates (cell centres on integers).  A
    segment lies between two neighbouring cells held by different jobs, or between a held cell
    and one that is not held or the grid's edge; the cells of one job on one server therefore
    share no segment, and a gang over several servers is outlined server by server."""
    n_rows, n_cols = cells.image.shape[:2]
    index = {j: k for k, j in enumerate(sorted(set(cells.job_at.values()), key=str))}
    held = np.full((n_rows + 2, n_cols + 2), -1, dtype=np.int64)  # a border of unheld cells
    for (r, c), j in cells.job_at.items():
        held[r + 1, c + 1] = index[j]
    # a vertical segment at x = c - 0.5 where cells (r, c-1) and (r, c) differ and one is held
    vert = (held[:, 1:] != held[:, :-1]) & ((held[:, 1:] >= 0) | (held[:, :-1] >= 0))
    horiz = (held[1:, :] != held[:-1, :]) & ((held[1:, :] >= 0) | (held[:-1, :] >= 0))
    vr, vc = np.nonzero(vert[1:-1, :])  # padded row r+1 is grid row r; padded column c is x c - 0.5
    hr, hc = np.nonzero(horiz[:, 1:-1])
    x_v = vc - 0.5
    y_h = hr - 0.5
    v = np.stack([np.stack([x_v, vr - 0.5], axis=1), np.stack([x_v, vr + 0.5], axis=1)], axis=1)
    h = np.stack([np.stack([hc - 0.5, y_h], axis=1), np.stack([hc + 0.5, y_h], axis=1)], axis=1)
    return np.concatenate([v, h]).astype(float) if v.size + h.size else np.zeros((0, 2, 2))


def _draw_outline(ax: Any, cells: Cells) -> None:
    from matplotlib.collections import LineCollection

    segments = gang_outline(cells)
    if len(segments):
        # thinner as the grid grows (a 65,536-GPU cluster has 8,192 rows in 14 inches)
        width = 0.8 if cells.image.shape[0] <= 64 else 0.4 if cells.image.shape[0] <= 512 else 0.15
        ax.add_collection(LineCollection(list(segments), colors="black", linewidths=width))


def placement_figure(instance: RoundInstance, result: PlacementResult, path: str | os.PathLike[str], *,
                     failed: Collection[int] = ()) -> bytes:
    """The figure of the module docstring for ``result`` on ``instance``, as bytes in ``path``'s
    format (its suffix; ``.png`` when it has none).  ``failed``: GPU ids drawn as failed (a
    repair's), besides those the round marks failed.  Nothing is written."""
    from .binning import binned_factors
    from .cost import evaluate
    from .simulate.metrics import agg_pyplot, figure_bytes

    require_instance(instance)
    if not isinstance(result, PlacementResult):  # a placements dict: AttributeError 'placements' otherwise
        raise InstanceError(f"must be a PlacementResult (what pal_opt.solve or pal_opt.repair return), got "
                            f"{type(result).__name__}", path="result")
    # a format matplotlib cannot write: an OptionError now, not its ValueError after drawing
    figure_format(file_path(path), "path", default="png")
    plt = agg_pyplot()
    placements = {j: tuple(g) for j, g in result.placements.items()}
    factors = binned_factors(instance.cluster, str(result.info.get("binning", instance.params.binning)))
    summary = evaluate(instance, placements, factors)
    cells = placement_cells(instance, placements, factors, failed)
    bars = len(placements) if len(placements) <= MAX_BARS else 0
    height = min(max(3.2, 0.22 * max(cells.image.shape[0], bars) + 1.6), 14.0)
    fig, axes = plt.subplots(1, 3, figsize=(15, height), gridspec_kw={"width_ratios": [1, 1.15, 1.3]},
                             layout="constrained")
    try:
        _draw_map(axes[0], instance, cells)
        _draw_speed(fig, axes[1], cells)
        _draw_slowest(axes[2], summary, cells.colours, racked=bool(instance.cluster.rack_ids))
        fig.suptitle(_title(instance, result), fontsize="medium")
        return figure_bytes(fig, path, dpi=110)
    finally:
        plt.close(fig)


def _draw_map(ax: Any, instance: RoundInstance, cells: Cells) -> None:
    n_rows, n_cols = cells.image.shape[:2]
    ax.imshow(cells.image, aspect="auto", interpolation="nearest")
    if instance.cluster.num_gpus <= MAX_LABELLED:
        for (r, c), j in cells.job_at.items():
            ax.text(c, r, str(j), ha="center", va="center", fontsize="x-small")
    step = max(1, -(-n_rows // MAX_TICKS))
    ticks = list(range(0, n_rows, step))
    ax.set_yticks(ticks, [_server_label(instance, cells.row_server, r) for r in ticks], fontsize="x-small")
    ax.set_xticks(range(n_cols), [str(c) for c in range(n_cols)] if n_cols <= 16 else [""] * n_cols)
    _draw_outline(ax, cells)
    for end in cells.rack_ends:
        ax.axhline(end - 0.5, color="black", linewidth=1.2)
    ax.set_xlabel("GPU on the server")
    ax.set_ylabel("server" + (" (racks separated by lines)" if cells.rack_ends else ""))
    no_gpu = bool(np.all(cells.image == _NONE, axis=-1).any())
    ax.set_title("Jobs on GPUs (white: free, grey: busy, black: failed"
                 + (", light grey: no GPU)" if no_gpu else ")"), fontsize="small")


def _draw_speed(fig: Any, ax: Any, cells: Cells) -> None:
    shown = cells.speed[np.isfinite(cells.speed)]
    # the scale spans at least SPEED_SPAN from the nominal 1.0 (or the fastest GPU below it): a
    # 1.5 % spread was painted from pale yellow to dark red, as if the GPUs were far apart
    low = min(float(shown.min()), 1.0) if shown.size else 1.0
    high = max(float(shown.max()) if shown.size else 1.0, low + SPEED_SPAN)
    im = ax.imshow(np.ma.masked_invalid(cells.speed), aspect="auto", interpolation="nearest", cmap="YlOrRd",
                   vmin=low, vmax=high)
    _draw_outline(ax, cells)
    for end in cells.rack_ends:
        ax.axhline(end - 0.5, color="black", linewidth=1.2)
    ax.set_yticks([])
    ax.set_xticks([])
    ax.set_xlabel("GPU on the server")
    ax.set_title("Each GPU's factor for its job's class (higher is slower)", fontsize="small")
    fig.colorbar(im, ax=ax, fraction=0.08, pad=0.02, label="binned factor")


def _draw_slowest(ax: Any, summary: Any, colours: Mapping[JobId, tuple], *, racked: bool) -> None:
    """One bar per placed job, slowest at the top; beyond :data:`MAX_BARS` jobs a histogram of
    their slowdowns, stacked by the level they span."""
    from matplotlib.patches import Patch

    slow = sorted(summary.slowdown.items(), key=lambda kv: (-kv[1], str(kv[0])))
    names = _LEVEL[racked]
    if not slow:
        ax.text(0.5, 0.5, "no job placed", transform=ax.transAxes, ha="center", va="center")
        ax.set_axis_off()
        return
    ax.set_xlabel("slowdown: slowest GPU's factor × locality penalty")
    if len(slow) > MAX_BARS:
        levels = sorted({summary.level.get(j, 0) for j, _ in slow})
        groups = [[s for j, s in slow if summary.level.get(j, 0) == v] for v in levels]
        ax.hist(groups, bins=30, stacked=True, color=["#4c72b0", "#dd8452", "#c44e52"][:len(levels)],
                label=[names[v] for v in levels], edgecolor="white", linewidth=0.3)
        ax.set_ylabel("jobs")
        ax.set_title(f"Jobs by slowdown ({len(slow)} placed)", fontsize="small")
        ax.legend(fontsize="x-small", title="spans", title_fontsize="x-small")
        return
    shown = slow[::-1]  # slowest at the top
    ys = np.arange(len(shown))
    for y, (j, s) in zip(ys, shown, strict=True):
        ax.barh(y, s - 1.0, left=1.0, color=colours.get(j, _BUSY), edgecolor="black", linewidth=0.5,
                hatch=_HATCH.get(summary.level.get(j, 0), ""))
    ax.set_yticks(ys, [str(j) for j, _ in shown], fontsize="x-small")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("job")
    ax.set_title("Jobs by slowdown", fontsize="small")
    levels = sorted({summary.level.get(j, 0) for j, _ in shown})
    ax.legend(handles=[Patch(facecolor="white", edgecolor="black", hatch=_HATCH[v], label=names[v]) for v in levels],
              fontsize="x-small", loc="lower right", title="spans", title_fontsize="x-small")


def plot_placement(instance: RoundInstance, result: PlacementResult, path: str | os.PathLike[str], *,
                   failed: Collection[int] = ()) -> None:
    """Write :func:`placement_figure` to ``path`` atomically (its format from the suffix)."""
    from .io.atomic import atomic_write_bytes

    name = file_path(path)  # before the drawing, which reads its format from the suffix
    atomic_write_bytes(name, placement_figure(instance, result, name, failed=failed))
