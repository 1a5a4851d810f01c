"""Speed and agreement of ``pal-opt partition`` on the 28 reference cases of PipeDream's optimiser.

Runs for about 40 s on the machine of the committed page (the page does not say; timed once under
``nice`` on 2026-12-07 at load 3.5-3.7: 40 s; its 28 cases × 6 runs at the page's medians are 24 s);
``--runs`` and ``--cases`` run fewer.

Each case of ``../shared/reference/pipedream/`` is run through the whole ``pal-opt partition``
process (Python start-up and imports included), ``--runs`` times, the cases taking turns so that
a change in the machine's load touches them all alike.  The table gives our median wall time,
our median CPU time (user + system of the process), the authors' whole-process wall time
(``optimizer_seconds``, median of 3 runs of their ``optimizer_graph_hierarchical.py``), the
speed-up, whether the time per sample agrees (1e-6 relative, as the checker asks), and the stage
counts (partitions that tie on the optimum may differ in it).

Targets: never slower than the authors on any case, and at least 10 times faster on every case
where theirs needs more than 2 s.

The processes run as an installed package does: with compiled bytecode.  One untimed warm-up run
per case fills a private bytecode cache (``PYTHONPYCACHEPREFIX`` in a temporary directory, with
``PYTHONDONTWRITEBYTECODE`` unset), so no source file is compiled while timed and nothing is
written into the source tree.

Writes ``pipedream_partition.{md,csv,png}`` (the figure: each case's speed-up against the authors'
time, with the targets); they replace the committed ones in ``benchmarks/results/`` only
with ``--update``, which ``--cases`` refuses (else they go to ``benchmarks/results/scratch/`` or
``--out-dir``; see ``benchmarks/_results.py``).  ``--plot-only`` draws the figure again from the
committed ``pipedream_partition.csv`` and runs nothing (the page is left as it is).

Usage::

    python benchmarks/pipedream_partition.py [--runs 5] [--update | --out-dir DIR] [--shared ../shared] [--cases 'gnmt-*']
    python benchmarks/pipedream_partition.py --plot-only [--update | --out-dir DIR]   # the figure from the committed csv
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _results import (
    RESULTS,
    add_output_arguments,
    add_plot_only_argument,
    at_least,
    cpu_model,
    load_average,
    output_dir,
    partial_run,
    plot_only,
    produced_by,
    run_time,
)

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["case", "states", "engine", "ours_wall_s", "ours_min_wall_s", "ours_cpu_s", "authors_s", "speedup", "target",
           "target_met", "time_per_sample", "authors_time_per_sample", "rel_error", "match", "stages",
           "authors_stages"]
#: How each column of ``pipedream_partition.csv`` reads back (:func:`read_rows`); the rest are text.
TYPES = {**dict.fromkeys(("ours_wall_s", "ours_min_wall_s", "ours_cpu_s", "authors_s", "speedup", "target",
                          "time_per_sample", "authors_time_per_sample", "rel_error"), float),
         **dict.fromkeys(("states", "stages", "authors_stages"), int),
         **dict.fromkeys(("target_met", "match"), lambda v: v == "True")}
#: The page's figure (:func:`plot`), after the summary.
FIGURE = "pipedream_partition.png"
FIGURE_LINK = (f"![per reference case: pal-opt partition's speed-up over the authors' optimiser against the "
               f"authors' time, with the targets (never slower; 10x faster where theirs takes more than 2 s)]"
               f"({FIGURE})")


def command(case: dict[str, Any], shared: Path, out: Path) -> list[str]:
    """The ``pal-opt partition`` command line of one case (the checker's form)."""
    cmd = [sys.executable, "-m", "pal_opt.cli", "partition",
           str(shared / "data" / "pipedream-profiles" / case["profile"]),
           "--machines", ",".join(map(str, case["machines_per_level"])),
           "--bandwidth", ",".join(repr(b) for b in case["bandwidths"]), "--out", str(out)]
    return cmd + (["--straight"] if case["straight_pipeline"] else [])


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=1200)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def engine_of(case: dict[str, Any], shared: Path) -> tuple[str, int]:
    """Which engine ``auto`` picks for the case, and the number of cut states."""
    from pal_opt.pipeline.profile import load_profile
    from pal_opt.pipeline.states import build_states
    from pal_opt.pipeline.tables import PYTHON_WORK_LIMIT, estimated_work

    states = build_states(load_profile(shared / "data" / "pipedream-profiles" / case["profile"]))
    work = estimated_work(states.n, case["machines_per_level"], case["straight_pipeline"])
    return ("numpy" if work > PYTHON_WORK_LIMIT else "python"), states.n


def measure(cases: list[dict[str, Any]], shared: Path, runs: int, scratch: Path) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    for case in cases:  # warm-up: compiles the bytecode, untimed
        run_once(command(case, shared, scratch / f"{case['name']}.json"), env)
    walls: dict[str, list[float]] = {c["name"]: [] for c in cases}
    cpus: dict[str, list[float]] = {c["name"]: [] for c in cases}
    for r in range(runs):
        for case in cases:
            wall, cpu = run_once(command(case, shared, scratch / f"{case['name']}.json"), env)
            walls[case["name"]].append(wall)
            cpus[case["name"]].append(cpu)
        print(f"run {r + 1}/{runs} done", file=sys.stderr)
    rows = []
    for case in cases:
        got = json.loads((scratch / f"{case['name']}.json").read_text())
        exp = case["expected"]
        ours, theirs = statistics.median(walls[case["name"]]), case["optimizer_seconds"]
        target = 10.0 if theirs > 2.0 else 1.0
        rel = abs(got["time_per_sample"] / exp["time_per_sample"] - 1)
        engine, states = engine_of(case, shared)
        rows.append({
            "case": case["name"], "states": states, "engine": engine, "ours_wall_s": ours,
            "ours_min_wall_s": min(walls[case["name"]]),
            "ours_cpu_s": statistics.median(cpus[case["name"]]), "authors_s": theirs, "speedup": theirs / ours,
            "target": target, "target_met": theirs / ours >= target,
            "time_per_sample": got["time_per_sample"], "authors_time_per_sample": exp["time_per_sample"],
            "rel_error": rel, "match": math.isclose(got["time_per_sample"], exp["time_per_sample"], rel_tol=1e-6),
            "stages": len(got["stages"]), "authors_stages": exp["total_stages"],
        })
    return rows


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``pipedream_partition.csv``, each column of the type the writer gave it."""
    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: TYPES.get(k, str)(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """The speed-up per case (authors' wall seconds / our median, y) against the authors' wall
    seconds (x), log-log, a colour per model; the targets as a step (as fast up to 2 s of theirs,
    10x faster above), the largest speed-up named."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6))
    for m, model in enumerate(sorted({r["case"].split("-")[0] for r in rows})):
        rs = [r for r in rows if r["case"].split("-")[0] == model]
        ax.plot([r["authors_s"] for r in rs], [r["speedup"] for r in rs], "os^D"[m % 4], color=f"C{m}", ms=7,
                ls="none", label=model)
    xs = [r["authors_s"] for r in rows]
    lo, hi = min(min(xs), 2.0) / 1.5, max(max(xs), 2.0) * 1.5
    ax.plot([lo, 2.0, 2.0, hi], [1, 1, 10, 10], "--", color="C3", lw=1.5,
            label="target: never slower; 10x faster where theirs > 2 s")
    best = max(rows, key=lambda r: r["speedup"])
    ax.annotate(f"{best['case']}: theirs {best['authors_s']:.0f} s, ours {best['ours_wall_s']:.2f} s "
                f"({best['speedup']:.0f}x)",
                (best["authors_s"], best["speedup"]), xytext=(-10, 0), textcoords="offset points", ha="right",
                va="center", fontsize=8)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(0.5, 2 * max(max(r["speedup"] for r in rows), 10)),
           xlabel="authors' optimiser (optimizer_graph_hierarchical.py): whole-process wall s, median of 3",
           ylabel="speed-up: authors' wall s / pal-opt partition's median wall s")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left")
    slow = [r for r in rows if r["target"] > 1]
    ax.set_title(f"pal-opt partition against PipeDream's optimiser, whole process, {len(rows)} reference cases: "
                 f"never slower on {sum(r['speedup'] >= 1 for r in rows)},\nat least 10x faster on "
                 f"{sum(r['target_met'] for r in slow)} of the {len(slow)} where theirs takes more than 2 s; "
                 f"time per sample the same on {sum(r['match'] for r in rows)}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def machine() -> list[str]:
    model = cpu_model("unknown CPU")
    try:
        import numpy

        numpy_version = numpy.__version__
    except ImportError:  # pragma: no cover
        numpy_version = "not installed"
    return [
        f"- CPU: {model}; {os.cpu_count()} logical CPUs (nproc), shared with other work while measured",
        f"- Python {platform.python_version()} ({sys.implementation.name}), numpy {numpy_version}, "
        f"{platform.system()} {platform.machine()}",
    ]


def to_markdown(rows: list[dict[str, Any]], runs: int, load: tuple[str, str], command: str) -> str:
    slow = [r for r in rows if r["target"] > 1]
    lines = [
        "# PipeDream partitioner: `pal-opt partition` against the authors' optimiser",
        "",
        f"{command}.",
        "",
        f"Each of the {len(rows)} reference cases run through the whole `pal-opt partition` process "
        f"{runs} times (cases taking turns); median and minimum wall seconds, median CPU (user + system) "
        "seconds of the process; speed-up = authors' time / our median wall time.  "
        "The authors' figure is their whole-process wall time (`optimizer_seconds`, median of 3 runs of "
        "`optimizer_graph_hierarchical.py`, on a 2-core machine shared with other work).  "
        "Engine: what `--engine auto` chose (pure Python below the work limit, which skips importing numpy).  "
        "Bytecode compiled beforehand, as in an installed package (see the script's docstring).",
        "",
        "| case | states | engine | ours wall (s) | ours min wall (s) | ours CPU (s) | authors (s) | speed-up "
        "| target | met | time per sample | rel. error | match | stages ours / theirs |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|:-:|---:|---:|:-:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['states']} | {r['engine']} | {r['ours_wall_s']:.3f} | {r['ours_min_wall_s']:.3f} "
            f"| {r['ours_cpu_s']:.3f} "
            f"| {r['authors_s']:.3f} | {r['speedup']:.1f}x | {r['target']:.0f}x | {'yes' if r['target_met'] else 'NO'} "
            f"| {r['time_per_sample']:.9g} | {r['rel_error']:.1e} | {'yes' if r['match'] else 'NO'} "
            f"| {r['stages']} / {r['authors_stages']} |")
    lines += [
        "",
        f"- Time per sample matches the authors' (1e-6 relative) on {sum(r['match'] for r in rows)} of {len(rows)} cases.",
        f"- Never slower: {sum(r['speedup'] >= 1 for r in rows)} of {len(rows)} cases; "
        f"at least 10x faster where the authors need more than 2 s: {sum(r['target_met'] for r in slow)} of "
        f"{len(slow)} cases" + (f" (smallest speed-up there {min(r['speedup'] for r in slow):.1f}x)." if slow
                                else " (none in this run)."),
        "- Stage counts may differ where several partitions tie on the optimum; the checker does not require them to agree.",
        "",
        FIGURE_LINK,
        "",
        "## Machine",
        "",
        *machine(),
        f"- Load average (1 / 5 / 15 min) at the start: {load[0]}; at the end: {load[1]}",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--runs", type=int, default=5, help="runs per case (default 5; the median is reported)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared", help="the shared data (default ../shared)")
    ap.add_argument("--cases", default="*", help="only the cases whose name matches this pattern")
    add_plot_only_argument(ap, FIGURE, "pipedream_partition.csv")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "runs")
    if args.plot_only:
        drawn = plot_only(ap, args, "pipedream_partition", FIGURE,
                          lambda path: plot(read_rows(RESULTS / "pipedream_partition.csv"), path), used=("shared",))
        print(f"wrote {drawn}", file=sys.stderr)
        return 0
    paths = sorted((args.shared / "reference" / "pipedream").glob("*.json"))
    if not paths:
        print(f"pipedream_partition: no reference cases under {args.shared / 'reference' / 'pipedream'} "
              "(give --shared)", file=sys.stderr)
        return 2
    cases = [c for c in (json.loads(p.read_text()) for p in paths) if fnmatch.fnmatch(c["name"], args.cases)]
    if not cases:
        ap.error(f"--cases {args.cases}: matches no case; the cases are {', '.join(p.stem for p in paths)}")
    out_dir = output_dir(args, "pipedream_partition", partial=partial_run(ap, args, "cases"))
    start = load_average(unknown="unknown")
    with tempfile.TemporaryDirectory() as scratch:
        rows = measure(cases, args.shared, args.runs, Path(scratch))
    text = to_markdown(rows, args.runs, (start, load_average(unknown="unknown")), produced_by(__file__, argv))
    (out_dir / "pipedream_partition.md").write_text(text, encoding="utf-8")
    with open(out_dir / "pipedream_partition.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, out_dir / FIGURE)
    print(text)
    print(f"wrote {out_dir / 'pipedream_partition.md'}, {out_dir / 'pipedream_partition.csv'} and "
          f"{out_dir / FIGURE}", file=sys.stderr)
    return 0 if all(r["match"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
