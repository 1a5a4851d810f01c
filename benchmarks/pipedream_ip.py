"""Two methods, one optimum: ``pal-opt partition --method ip`` against the dynamic program on every
PipeDream reference case.

Runs for about 4 min on the machine of the committed page (the page does not say: the sum of its
per-case ``ip`` and ``dp`` process times is 220 s); ``--cases`` runs fewer.

For each case of ``../shared/reference/pipedream/*.json`` (28: alexnet, vgg16, gnmt, resnet50 on 8
and 16 workers flat and straight, 4x4, 8x4, 2x16), the whole ``pal-opt partition --method ip``
process (HiGHS, the threshold programs of :mod:`pal_opt.pipeline.ip`) runs once under a wall-time
limit (``--timeout``, default 120 s); its ``time_per_sample`` is compared with the dynamic
program's (``--method dp``, the default method, run the same way) and with the authors'
optimiser's.  A case that does not finish in time is reported as such, with the number of
integer programs its levels need (one threshold search per real segment at every inner level).

Outputs: ``pipedream_ip.md``, ``pipedream_ip.csv`` and ``pipedream_ip.png`` (per case, the time
per sample of both methods and the authors', and both methods' process seconds); they replace the
committed ones in ``benchmarks/results/`` only with ``--update`` (see ``benchmarks/_results.py``).
``--plot-only`` draws the figure again from the committed ``pipedream_ip.csv`` and runs nothing (the
page is left as it is).

Usage::

    nice -n 10 python benchmarks/pipedream_ip.py [--timeout 120] [--cases vgg16-8,gnmt-16] [--update]
    python benchmarks/pipedream_ip.py --plot-only [--update | --out-dir DIR]   # the figure from the committed csv
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import (  # noqa: E402
    RESULTS,
    add_output_arguments,
    add_plot_only_argument,
    check_values,
    output_dir,
    partial_run,
    plot_only,
    positive_seconds,
    produced_by,
    run_time,
    split_list,
    wrote,
)

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["case", "segments", "ip_seconds", "ip_status", "ip_time_per_sample", "dp_seconds", "dp_time_per_sample",
           "authors_time_per_sample", "agree_dp", "match_authors"]
#: How each column of ``pipedream_ip.csv`` reads back (:func:`read_rows`); the rest are text.
TYPES = {"segments": int, "ip_seconds": float, "ip_time_per_sample": float, "dp_seconds": float,
         "dp_time_per_sample": float, "authors_time_per_sample": float,
         "agree_dp": lambda v: v == "True", "match_authors": lambda v: v == "True"}
#: The page's figure (:func:`plot`), after the summary.
FIGURE = "pipedream_ip.png"
FIGURE_LINK = (f"![per reference case: the time per sample (the slowest stage's time) of the integer program, "
               f"the dynamic program and the authors' optimiser, and the process seconds of both methods]({FIGURE})")


def run_case(case: dict[str, Any], shared: Path, method: str, timeout: float) -> tuple[float, str, float]:
    """``(wall seconds, status, time per sample)`` of one whole ``pal-opt partition`` process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [sys.executable, "-m", "pal_opt.cli", "partition",
               str(shared / "data" / "pipedream-profiles" / case["profile"]),
               "--machines", ",".join(map(str, case["machines_per_level"])),
               "--bandwidth", ",".join(repr(b) for b in case["bandwidths"]), "--method", method, "--out", str(out)]
        cmd += ["--straight"] if case["straight_pipeline"] else []
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return time.perf_counter() - t0, f"not finished in {timeout:g} s", math.nan
        wall = time.perf_counter() - t0
        if proc.returncode:
            return wall, f"exit {proc.returncode}: {proc.stderr.strip()[-120:]}", math.nan
        return wall, "solved", float(json.loads(out.read_text())["time_per_sample"])


def segments(case: dict[str, Any], shared: Path) -> int:
    """Threshold searches the integer-program method runs: one per real segment at each inner
    level, one at the outermost."""
    from pal_opt.pipeline.ip import real_segments
    from pal_opt.pipeline.profile import load_profile
    from pal_opt.pipeline.states import build_states

    states = build_states(load_profile(shared / "data" / "pipedream-profiles" / case["profile"]))
    return (len(case["machines_per_level"]) - 1) * len(real_segments(states)) + 1


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``pipedream_ip.csv``, each column of the type the writer gave it."""
    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: TYPES.get(k, str)(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def _model_bounds(ax: Any, cases: list[str]) -> None:
    """A light line between the models (the cases are sorted by name, so each model's are together)."""
    models = [c.split("-")[0] for c in cases]
    for i in range(1, len(models)):
        if models[i] != models[i - 1]:
            ax.axvline(i - 0.5, color="0.8", lw=0.8, zorder=0)


def plot(rows: list[dict[str, Any]], path: Path, timeout: float) -> None:
    """Per case (x, by name), above: the time per sample of the authors' optimiser, the dynamic
    program and the integer program, in ms on a log axis (coinciding markers are one optimum);
    below: the wall seconds of both methods' whole process, the integer program's time limit
    ``timeout`` dashed, a case not solved in time marked at the seconds it ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases, x = [r["case"] for r in rows], range(len(rows))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 7.5), sharex=True, height_ratios=(1.1, 1))
    top.plot(x, [1e3 * r["authors_time_per_sample"] for r in rows], "o", ms=11, mfc="none", mew=1.5, color="C2",
             label="authors' optimiser (reference)")
    top.plot(x, [1e3 * r["dp_time_per_sample"] for r in rows], "x", ms=8, mew=1.5, color="C0",
             label="pal-opt partition --method dp")
    top.plot(x, [1e3 * r["ip_time_per_sample"] for r in rows], ".", ms=7, color="C1",
             label="pal-opt partition --method ip (HiGHS)")
    solved = [r for r in rows if r["ip_status"] == "solved"]
    top.set_title(f"time per sample (the slowest stage's time): the integer program's equals the dynamic program's "
                  f"on {sum(r['agree_dp'] for r in solved)} and the authors' on "
                  f"{sum(r['match_authors'] for r in solved)} of {len(rows)} cases (1e-6 relative)", fontsize="medium")
    top.set_ylabel("time per sample, ms (log)")
    bottom.plot(x, [r["ip_seconds"] for r in rows], "s", color="C1", label="--method ip")
    bottom.plot(x, [r["dp_seconds"] for r in rows], "x", ms=8, mew=1.5, color="C0", label="--method dp")
    late = [(i, r["ip_seconds"]) for i, r in enumerate(rows) if r["ip_status"] != "solved"]
    if late:
        bottom.plot([i for i, _ in late], [s for _, s in late], "v", ms=10, color="C3", label="ip not solved in time")
    bottom.axhline(timeout, color="C3", ls="--", lw=1, label=f"ip time limit ({timeout:g} s)")
    bottom.set_title(f"whole process, wall s (one run each): solved in time {len(solved)} of {len(rows)}",
                     fontsize="medium")
    bottom.set_ylabel("wall s (log)")
    bottom.set_xticks(list(x), cases, rotation=60, ha="right", fontsize=8)
    bottom.set_xlabel("PipeDream reference case: model-workers (straight: one worker per stage), "
                      "or model-AxB (B machines of A workers)")
    for ax in (top, bottom):
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3, which="both", axis="y")
        ax.legend(fontsize=8, loc="upper left")
        _model_bounds(ax, cases)
    fig.suptitle("Two methods, one optimum: pal-opt partition's integer program against its dynamic program "
                 "and PipeDream's optimiser", fontsize="large")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    # the first paragraph, one line (argparse reflows it)
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()),
                                 epilog=run_time(__doc__))
    ap.add_argument("--timeout", type=float, default=120.0, help="wall seconds per ip process (default 120)")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared",
                    help="the shared data directory (default ../shared)")
    add_plot_only_argument(ap, FIGURE, "pipedream_ip.csv", ", the time limit's line at --timeout")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    positive_seconds(ap, args, "timeout")
    if args.plot_only:
        drawn = plot_only(ap, args, "pipedream_ip", FIGURE,
                          lambda path: plot(read_rows(RESULTS / "pipedream_ip.csv"), path, args.timeout),
                          used=("timeout", "shared"))
        wrote("pipedream_ip", drawn)
        return 0
    chosen = split_list(ap, "--cases", args.cases, str, "comma-separated case names") if args.cases else []
    ref = args.shared / "reference" / "pipedream"
    if not ref.is_dir():
        print(f"pipedream_ip: reference cases not found at {ref}", file=sys.stderr)
        return 2
    known = sorted(p.stem for p in ref.glob("*.json"))
    check_values(ap, "--cases", chosen, lambda n: n in known, f"no such case; choose among {', '.join(known)}")
    names = chosen or known
    out = output_dir(args, "pipedream_ip", partial=partial_run(ap, args, "cases"))
    rows = []
    for name in names:
        case = json.loads((ref / f"{name}.json").read_text())
        expected = float(case["expected"]["time_per_sample"])
        ip_wall, status, ip_value = run_case(case, args.shared, "ip", args.timeout)
        dp_wall, _, dp_value = run_case(case, args.shared, "dp", args.timeout)
        rows.append({"case": name, "segments": segments(case, args.shared), "ip_seconds": round(ip_wall, 2),
                     "ip_status": status, "ip_time_per_sample": ip_value, "dp_seconds": round(dp_wall, 2),
                     "dp_time_per_sample": dp_value, "authors_time_per_sample": expected,
                     "agree_dp": math.isclose(ip_value, dp_value, rel_tol=1e-6),
                     "match_authors": math.isclose(ip_value, expected, rel_tol=1e-6)})
        print(f"{name}: ip {status} {ip_wall:.1f} s, {ip_value!r} (dp {dp_value!r})", file=sys.stderr)
    with open(out / "pipedream_ip.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    (out / "pipedream_ip.md").write_text(report(rows, args.timeout, produced_by(__file__, argv)), encoding="utf-8")
    plot(rows, out / FIGURE, args.timeout)
    wrote("pipedream_ip", out / "pipedream_ip.md", out / "pipedream_ip.csv", out / FIGURE)
    return 0


def report(rows: list[dict[str, Any]], timeout: float, command: str) -> str:
    solved = [r for r in rows if r["ip_status"] == "solved"]
    lines = ["# Two methods, one optimum: the partition integer program against the dynamic program", "",
             f"{command}.", "",
             "`benchmarks/pipedream_ip.py`: every PipeDream reference case through the whole `pal-opt partition "
             f"--method ip` process (HiGHS, threshold programs), once, limited to {timeout:g} s wall; the dynamic "
             "program (`--method dp`) the same way.  `segments`: the real segments of the case's inner levels plus "
             "the outermost one, the searches an eager method would run; the lazy method solves an inner segment "
             "only when the outer pipeline uses it.", "",
             f"- Solved in time: {len(solved)} of {len(rows)} cases; the integer program's time per sample equals "
             f"the dynamic program's (1e-6 relative) on {sum(r['agree_dp'] for r in solved)} of them and the "
             f"authors' on {sum(r['match_authors'] for r in solved)}.",
             "- Not finished in time: " + (", ".join(f"{r['case']} ({r['segments']} segments)" for r in rows
                                                       if r['ip_status'] != 'solved') or "none") + ".", "",
             FIGURE_LINK, "",
             "| case | segments | ip (s) | ip status | ip time per sample | dp (s) | agrees with dp | matches authors |",
             "|---|---:|---:|---|---:|---:|:-:|:-:|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['segments']} | {r['ip_seconds']:.2f} | {r['ip_status']} | "
                     f"{r['ip_time_per_sample']:.9g} | {r['dp_seconds']:.2f} | {'yes' if r['agree_dp'] else 'no'} | "
                     f"{'yes' if r['match_authors'] else 'no'} |")
    lines += ["", f"Machine: {platform.processor() or platform.machine()}, 2 cores shared with other work, Python "
              f"{platform.python_version()}; run under nice -n 10.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
