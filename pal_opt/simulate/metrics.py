"""Tables, files and plots of a simulation.

The headline figures (:func:`summarize`) and their definitions are in :mod:`.summary`; this
module re-exports :func:`summarize`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import OptionError
from ..options import check_count, figure_format, file_path, require_mapping, require_type
from ..result import finite_or_none
from .fields import with_shared_names
from .records import SimulationResult
from .summary import SIM_HINT, summarize

__all__ = [
    "JOB_COLUMNS",
    "summarize",
    "result_to_dict",
    "jobs_table",
    "write_json_atomic",
    "write_text_atomic",
    "json_text",
    "jobs_csv_text",
    "plot_jct_cdf",
    "plot_utilization",
    "plot_result",
    "result_figure",
    "jct_figure",
    "comparison_lines",
    "unfinished_line",
    "interrupted_line",
    "require_matplotlib",
    "agg_pyplot",
    "figure_bytes",
]

#: Columns of the per-job table, in order.
JOB_COLUMNS: tuple[str, ...] = (
    "job_id",
    "model",
    "perfclass",
    "num_gpus",
    "submit_time",
    "iterations",
    "ideal_seconds",
    "first_start",
    "finish_time",
    "jct",
    "queueing_delay",
    "run_seconds",
    "mean_slowdown",
    "preemptions",
    "moves",
    "restarts",
    "rounds_run",
    "rounds_spanning",
    "priority",
    "preempted_gpu_hours",
    "stages",
    "failures",
    "lost_gpu_seconds",
)


def result_to_dict(result: SimulationResult, *, extra_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-ready dict: summary figures at the top level, then config, jobs and rounds.

    ``rounds`` is stored column-wise (one list per field) to keep the file small.
    """
    require_type(result, SimulationResult, "result", SIM_HINT)
    if extra_config is not None:
        require_mapping(extra_config, "extra_config", "a mapping of configuration names to values")
    summary = result.summary
    rounds = result.rounds
    cols = {
        "time": [r.time for r in rounds],
        "active": [r.active for r in rounds],
        "running": [r.running for r in rounds],
        "gpus_placed": [r.gpus_placed for r in rounds],
        "busy_gpu_seconds": [round(r.busy_gpu_seconds, 6) for r in rounds],
        "spanning": [r.spanning for r in rounds],
        "preempted": [r.preempted for r in rounds],
        "moved": [r.moved for r in rounds],
        "status": [r.status for r in rounds],
        "solve_seconds": [round(r.solve_seconds, 6) for r in rounds],
        "note": [r.note for r in rounds],
    }
    config = dict(result.config)
    config.update(extra_config or {})
    doc = {
        **summary,
        "queueing_delay": summary["avg_queueing_delay"],  # deprecated (PAL_FILE_ALIASES)
        "unplaceable": [{"job": k, "reason": v} for k, v in result.unplaceable.items()],
        "config": config,
        "num_gpus": result.num_gpus,
        "job_results": [j.to_row() for j in result.jobs],
        "round_log": cols,
    }
    if result.failures is not None:
        doc["failure_log"] = result.failures.log()
    return doc


def jobs_table(result: SimulationResult) -> Any:
    """Per-job results as a pandas DataFrame with :data:`JOB_COLUMNS`."""
    import pandas as pd

    require_type(result, SimulationResult, "result", SIM_HINT)
    return pd.DataFrame([j.to_row() for j in result.jobs], columns=list(JOB_COLUMNS))


def jobs_csv_text(result: SimulationResult | Mapping[str, SimulationResult]) -> str:
    """The per-job table as CSV text (empty cells for jobs that never ran or finished).

    Given ``{policy: result}``, the tables of every policy one after the other, with a
    ``policy`` column first.
    """
    runs = result if isinstance(result, Mapping) else {None: result}
    for policy, res in runs.items():
        require_type(res, SimulationResult, "result" if policy is None else f"result[{policy!r}]", SIM_HINT)
    several = isinstance(result, Mapping)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow((("policy",) if several else ()) + JOB_COLUMNS)
    for policy, res in runs.items():
        for j in res.jobs:
            row = j.to_row()
            cells = ["" if row[c] is None else (repr(row[c]) if isinstance(row[c], float) else row[c])
                     for c in JOB_COLUMNS]
            w.writerow([policy, *cells] if several else cells)
    return buf.getvalue()


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`pal_opt.io.safe.atomic_write_text`)."""
    from ..io.safe import atomic_write_text

    atomic_write_text(path, text)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _finite(o: Any) -> Any:
    """``o`` with every non-finite float in its dicts and lists replaced by None."""
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_finite(v) for v in o]
    return finite_or_none(o)


def json_text(obj: Any, indent: int | None = 1) -> str:
    """``obj`` as the text of a JSON file (numpy numbers as numbers, non-finite floats as null,
    a final newline)."""
    return json.dumps(_finite(obj), indent=indent, default=_json_default) + "\n"


def write_json_atomic(path: str | os.PathLike[str], obj: Any, indent: int | None = 1) -> None:
    """Write ``obj`` as JSON (non-finite floats become null), atomically."""
    if indent is not None:
        check_count(indent, "indent", 0)
    write_text_atomic(path, json_text(obj, indent))


# ---------------------------------------------------------------------------- plots
def _as_dict(r: Any) -> Mapping[str, Any]:
    if isinstance(r, Mapping):
        return r
    return result_to_dict(r)


def _jcts(r: Mapping[str, Any]) -> np.ndarray:
    return np.sort(np.array([j["jct"] for j in r["job_results"] if j["jct"] is not None], dtype=np.float64))


def _cdf_total(r: Mapping[str, Any]) -> int:
    """The jobs a JCT CDF counts: every job but the unplaceable ones, so that a run stopped early
    (``--max-hours``) ends below 1 (at ``n_completed / n_jobs``) rather than at 1."""
    return len(r["job_results"]) - len(r.get("unplaceable") or ())


def _round_use(r: Mapping[str, Any]) -> tuple[float, np.ndarray]:
    """The round length and each round's utilisation: a PAL result's busy GPU-seconds over its
    GPUs, or a Sia result's GPUs in use (its ``round_log``) over its cluster's."""
    log = r["round_log"]
    if "busy_gpu_seconds" in log:
        length = float(r["config"]["round_length"])
        return length, np.asarray(log["busy_gpu_seconds"], dtype=np.float64) / (float(r["num_gpus"]) * length)
    gpus = sum(int(t["nodes"]) * int(t["gpus_per_node"]) for t in r["cluster"].values())
    length = with_shared_names(r)["round_length"]  # a file written before: round_seconds
    return float(length), np.asarray(log["gpus_in_use"], dtype=np.float64) / gpus


def _util_series(r: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Utilisation per round as a step series for ``where="post"``: 0 over the idle gaps the run
    skipped (no round), and the last round drawn to its end."""
    log = r["round_log"]
    length, u = _round_use(r)
    times: list[float] = []
    values: list[float] = []
    for k, start in enumerate(log["time"]):
        if times and start > times[-1] + length * (1 + 1e-9):
            times.append(times[-1] + length)
            values.append(0.0)
        times.append(float(start))
        values.append(float(u[k]))
    if times:
        times.append(times[-1] + length)
        values.append(values[-1])
    return np.asarray(times, dtype=np.float64), np.asarray(values, dtype=np.float64)


def require_matplotlib() -> None:
    """Raise :class:`~pal_opt.errors.OptionError` (one line: how to install it) unless
    matplotlib, the optional ``[plot]`` extra, can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise OptionError("plots need matplotlib, which is not installed: pip install 'pal-opt[plot]'") from None


def agg_pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed); :class:`OptionError` when
    matplotlib is missing (:func:`require_matplotlib`)."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: Line styles in policy order, so that policies whose lines coincide stay told apart.
LINE_STYLES = ("-", "--", ":", "-.")


def _style(k: int) -> dict[str, Any]:
    """The ``k``-th policy's line: its own style, and thinner than the ones drawn before it, so
    that a line drawn over an equal one leaves it visible."""
    return {"linestyle": LINE_STYLES[k % len(LINE_STYLES)], "linewidth": max(2.2 - 0.4 * k, 0.9)}


def _label(name: str, doc: Mapping[str, Any]) -> str:
    """A policy's legend entry: its name and average JCT."""
    avg = doc.get("avg_jct")
    return name if avg is None or not math.isfinite(avg) else f"{name} (avg {avg / 3600:.2f} h)"


def _draw_cdf(ax: Any, results: Mapping[str, Any]) -> None:
    drawn = 0
    for k, (name, r) in enumerate(results.items()):
        doc = _as_dict(r)
        jct = _jcts(doc) / 3600.0
        if jct.size:
            y = np.arange(1, jct.size + 1) / max(_cdf_total(doc), jct.size)
            ax.step(jct, y, where="post", label=_label(name, doc), **_style(k))
            drawn += 1
    ax.set_xlabel("JCT (hours)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("JCT CDF")
    ax.grid(True, alpha=0.3)
    if not drawn:  # a run stopped before any job finished (--max-hours): no line, and no legend warning
        ax.text(0.5, 0.5, "no job finished", ha="center", va="center", transform=ax.transAxes)
        return
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter

    # 0.5, 2, 3 instead of 5×10⁻¹, 2×10⁰, 3×10⁰; minor ticks labelled (2, 3 and 5 per decade)
    # only over two decades or less, where they do not run into each other
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: _minor_label(ax, v)))
    ax.legend(fontsize="small")


def _minor_label(ax: Any, v: float) -> str:
    """A log axis's minor tick label: 2, 3 or 5 times a power of ten, when the axis spans at most
    two decades ("" otherwise)."""
    lo, hi = ax.get_xlim()
    if v <= 0 or lo <= 0 or hi / lo > 100:
        return ""
    return f"{v:g}" if round(v / 10 ** math.floor(math.log10(v))) in (2, 3, 5) else ""


def _draw_util(ax: Any, results: Mapping[str, Any]) -> None:
    for k, (name, r) in enumerate(results.items()):
        t, u = _util_series(_as_dict(r))
        ax.step(t / 3600.0, u, where="post", label=name, **{**_style(k), "linewidth": _style(k)["linewidth"] / 2})
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("GPU utilisation")
    ax.set_ylim(0, 1.05)
    ax.set_title("Utilisation per round")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def job_key(job: Mapping[str, Any]) -> tuple[Any, Any]:
    """A job's identity across runs: its id (PAL traces) or name (Sia traces), and its submit time,
    so that the jobs of another trace that share ids are not taken for the same jobs."""
    return job.get("job_id", job.get("name")), job.get("submit_time")


def job_ratios(first: Mapping[str, Any], other: Mapping[str, Any]) -> np.ndarray:
    """Sorted per-job JCT ratios ``other / first`` over the jobs both runs finished."""
    base = {job_key(j): j["jct"] for j in first["job_results"] if j["jct"]}
    out = [j["jct"] / base[k] for j in other["job_results"]
           if j["jct"] is not None and (k := job_key(j)) in base]
    return np.sort(np.asarray(out, dtype=np.float64))


def _draw_ratio(ax: Any, results: Mapping[str, Any]) -> None:
    """Per-job JCT of every policy but the first against the first's, as a CDF over the jobs both
    finished: which jobs gain, and by how much, where the averages hide it."""
    (first, ref), *rest = ((n, _as_dict(r)) for n, r in results.items())
    drawn = 0
    for k, (name, doc) in enumerate(rest, start=1):
        ratio = job_ratios(ref, doc)
        if ratio.size:
            y = np.arange(1, ratio.size + 1) / ratio.size
            ax.step(ratio, y, where="post", color=f"C{k}", label=name, **_style(k))
            drawn += 1
    ax.axvline(1.0, color="0.5", linewidth=0.8)
    ax.set_xlabel(f"per-job JCT / {first}'s")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"Per-job JCT against {first}")
    ax.grid(True, alpha=0.3)
    if not drawn:
        ax.text(0.5, 0.5, "no job finished under both", ha="center", va="center", transform=ax.transAxes)
        return
    ax.legend(fontsize="small")


def _require_results(results: Any, path: Any = "") -> None:
    """An :class:`~pal_opt.errors.InputTypeError` naming the argument unless ``results`` maps labels
    to results (or their dicts) and ``path`` is a file path."""
    if file_path(path):  # a format matplotlib cannot write: an OptionError now, not its ValueError after drawing
        figure_format(os.fspath(path), "path", default="png")
    require_mapping(results, "results", "a mapping of labels to SimulationResults (or their dicts)")
    for label, res in results.items():
        require_type(res, (SimulationResult, Mapping), f"results[{label!r}]", f" or its dict{SIM_HINT}")


def _panels(results: Mapping[str, Any], *panels: Callable[[Any, Mapping[str, Any]], None]
            ) -> tuple[Callable[[Any, Mapping[str, Any]], None], ...]:
    """``panels``, and the per-job comparison (:func:`_draw_ratio`) when there are several policies."""
    _require_results(results)
    return (*panels, _draw_ratio) if len(results) > 1 else panels


def _figure_bytes(
    path: str | os.PathLike[str],
    figsize: tuple[float, float],
    results: Mapping[str, Any],
    *panels: Callable[[Any, Mapping[str, Any]], None],
) -> bytes:
    """Draw ``panels`` side by side, one axes each: the figure in ``path``'s format (its suffix)."""
    _require_results(results, path)
    plt = agg_pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=figsize, squeeze=False)
    try:
        for ax, draw in zip(axes[0], panels, strict=True):
            draw(ax, results)
        title = _figure_title(results)
        if title:
            fig.suptitle(title, fontsize="medium")
        fig.tight_layout()
        return figure_bytes(fig, path)
    finally:
        plt.close(fig)


def figure_bytes(fig: Any, path: str | os.PathLike[str], dpi: int = 120) -> bytes:
    """``fig`` encoded in ``path``'s format (its suffix; PNG without one), as bytes: drawn in
    memory, so that a command writes it with its other outputs, all or none."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format=os.path.splitext(os.fspath(path))[1].lstrip(".").lower() or "png")
    return buf.getvalue()


def _title_parts(doc: Mapping[str, Any]) -> list[str]:
    """What one result simulated: trace file, cluster, round length and seed, as title parts."""
    cfg = doc.get("config") or with_shared_names(doc)  # the simulator of GPU types: at the top
    cluster = cfg.get("cluster")
    if isinstance(cluster, Mapping):  # {type: {nodes, gpus_per_node, ...}}
        cluster = ",".join(f"{t}:{c['nodes']}x{c['gpus_per_node']}" for t, c in cluster.items())
    length = cfg.get("round_length")
    parts = [os.path.basename(str(cfg["trace"])) if cfg.get("trace") else None,
             f"cluster {cluster}" if cluster else None,
             f"{length:g} s rounds" if length else None,
             f"seed {cfg['seed']}" if cfg.get("seed") is not None else None]
    return [p for p in parts if p]


def _figure_title(results: Mapping[str, Any]) -> str:
    """What was simulated, from the results' configs: trace file, cluster, round length and seed,
    those that every result shares ("" when the results carry no config).  The policies of one
    run share them all; runs compared (``pal-opt compare``) may not, and a title naming the first
    run's seed would say it of them all."""
    parts = [_title_parts(_as_dict(r)) for r in results.values()]
    if not parts:
        return ""
    return ", ".join(p for p in parts[0] if all(p in other for other in parts[1:]))


def _save_figure(
    path: str | os.PathLike[str],
    figsize: tuple[float, float],
    results: Mapping[str, Any],
    *panels: Callable[[Any, Mapping[str, Any]], None],
) -> None:
    """Draw ``panels`` side by side and write the figure to ``path`` atomically."""
    from ..io.atomic import atomic_write_bytes

    atomic_write_bytes(path, _figure_bytes(path, figsize, results, *panels))


def result_figure(results: Mapping[str, Any], path: str | os.PathLike[str]) -> bytes:
    """The figure :func:`plot_result` writes to ``path``, as bytes in ``path``'s format (drawn
    before any output is written, so that a failure to draw leaves no output behind)."""
    panels = _panels(results, _draw_cdf, _draw_util)
    return _figure_bytes(path, (6 * len(panels), 4), results, *panels)


def unfinished_line(policy: str, summary: Mapping[str, Any], unplaceable: int) -> str | None:
    """The summary's line for a run stopped with jobs unfinished (``--max-hours``, or the PAL
    simulator's stall guard), whose JCT figures are of the finished jobs only; None otherwise.
    ``summary``: a result's ``n_jobs``, ``n_completed`` and ``stopped_at`` (seconds)."""
    unfinished = summary["n_jobs"] - summary["n_completed"] - unplaceable
    if unfinished <= 0:
        return None
    stopped = summary.get("stopped_at")
    hours = "-" if stopped is None else f"{stopped / 3600:.2f}"
    return (f"{policy}: stopped at {hours} h with {unfinished} job{'s' * (unfinished != 1)} unfinished; the JCT "
            f"figures are of the {summary['n_completed']} that finished")


def interrupted_line(rounds: int, finished: int, total: int, policy: str | None = None) -> str:
    """The one line a simulation stopped by Ctrl-C ends with (exit 130), the same for PAL and Sia
    traces: how far it got, and that nothing was written.  ``policy``: named when several ran.

    >>> interrupted_line(16, 3, 24, "ilp")
    'pal-opt: interrupted after 16 rounds of ilp (3 of 24 jobs finished); nothing written'
    """
    which = f" of {policy}" if policy else ""
    return f"pal-opt: interrupted after {rounds} rounds{which} ({finished} of {total} jobs finished); nothing written"


def comparison_lines(avg_jct: Mapping[str, float | None], written: Sequence[str],
                     completed: Mapping[str, int] | None = None) -> list[str]:
    """The last lines of a simulation's summary: with several policies, each one's average JCT
    against the first's (those with one); with several files, the files written.  ``completed``
    (jobs finished per policy): where the policies finished different numbers of jobs (a run
    stopped early), the comparison says so, since its averages are over different jobs."""
    lines = []
    (first, ref), *rest = avg_jct.items()
    parts = [f"{p} {v / ref - 1:+.1%}" for p, v in rest if ref and v is not None]
    if parts:
        line = f"avg JCT against {first}: {', '.join(parts)}"
        if completed and len(set(completed.values())) > 1:
            line += (" (over different jobs: " + ", ".join(f"{n} finished under {p}" for p, n in completed.items())
                     + ")")
        lines.append(line)
    if len(written) > 1:
        lines.append(f"wrote {', '.join(written)}")
    return lines


def jct_figure(results: Mapping[str, Any], path: str | os.PathLike[str]) -> bytes:
    """The JCT CDF alone (one line per ``{label: result dict}``), as bytes in ``path``'s format:
    the figure of a simulation without a per-round log (the simulator of GPU types)."""
    panels = _panels(results, _draw_cdf)
    return _figure_bytes(path, (6.5 * len(panels), 4), results, *panels)


def plot_jct_cdf(results: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """JCT CDF, one line per entry of ``{label: SimulationResult or its dict}``, to ``path``."""
    _save_figure(path, (6, 4), results, _draw_cdf)


def plot_utilization(results: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Per-round GPU utilisation over time, one line per entry of ``results``, to ``path``."""
    _save_figure(path, (8, 4), results, _draw_util)


def plot_result(results: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Both panels side by side (JCT CDF, utilisation over time) in one figure, written atomically."""
    from ..io.atomic import atomic_write_bytes

    atomic_write_bytes(path, result_figure(results, path))
