"""``--time-limit T`` bounds the whole ``pal-opt`` process, 64 to 65,536 GPUs (issue 15).

Runs for about 4 min on the machine of the committed page (its own run time: 228 s); ``--sizes``,
``--limits`` and ``--backends`` run fewer.

Rounds: :func:`pal_opt.generate.generate_instance`, 8 GPUs per server, 0.29 queued jobs per GPU,
λ = 1.7, factors drawn from the Longhorn measurements in ``../shared`` (synthetic Longhorn-like
factors when absent), seed 0 (``--seed``), at 64, 512, 2,048, 8,192, 32,768 and 65,536 GPUs,
written to a temporary directory as instance files.

Whole processes ``pal-opt solve INSTANCE --method ilp --backend B --time-limit T -o OUT`` for
every installed backend and every T in ``--limits`` (default 3, 5 and 10 s), timed from outside
(wall clock from spawn to exit; CPU seconds, user + system, and peak memory from GNU ``time``).
Reported: wall − T (target ≤ 0.5 s; at 32,768 GPUs with T = 3 the wall itself ≤ 3.5 s), the
status, the stage the time limit stopped (``info["time_limit_reached"]``), the bound and gap
known, and that the written placement passes :func:`pal_opt.check.check`.  The comparator run in
the same session: ``pal-opt solve INSTANCE --method pal`` (the greedy answer every time-limited
solve starts from), once per size.

The processes run at the benchmark's priority (start it under ``nice`` to run all of them under
it; the niceness and the load are in the results).  Wall times on a shared machine include
waiting for a core, CPU seconds do not.  The package's bytecode is compiled first, as an installed
package has it.

Usage::

    python benchmarks/time_limit.py [--update | --out-dir DIR] [--sizes 64,512,...] [--limits 3,5,10]
        [--backends highs,cpsat,cbc] [--seed 0]
"""

from __future__ import annotations

import argparse
import compileall
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _procs import JOBS_PER_GPU, instance_file, niceness, solve_row  # noqa: E402
from _results import (  # noqa: E402
    add_output_arguments,
    at_least,
    check_backends,
    check_values,
    load_average,
    output_dir,
    produced_by,
    run_time,
    split_list,
    wrote,
)
from suite import machine, measurements  # noqa: E402

SIZES = (64, 512, 2048, 8192, 32768, 65536)
LIMITS = (3.0, 5.0, 10.0)
#: The issue's targets.
SLACK = 0.5
T3_AT_32K = 3.5


def ilp_runs(paths: dict[int, Path], backends: list[str], limits: list[float], work: Path,
             progress: Any) -> list[dict[str, Any]]:
    rows = []
    for g, path in paths.items():
        for b in backends:
            for t in limits:
                r = solve_row(path, ["--method", "ilp", "--backend", b, "--time-limit", f"{t:g}"], t + 300, work)
                rows.append({"gpus": g, "backend": b, "limit": t, "over": r["wall"] - t, **r})
                progress(f"{g} {b} T={t:g}: {r['wall']:.2f} s, {r['status']}, {r.get('stage')}")
    return rows


def greedy_runs(paths: dict[int, Path], work: Path, progress: Any) -> list[dict[str, Any]]:
    rows = []
    for g, path in paths.items():
        rows.append({"gpus": g, **solve_row(path, ["--method", "pal"], 600, work)})
        progress(f"{g} greedy: {rows[-1]['wall']:.2f} s")
    return rows


def _f(x: Any, spec: str = ".2f") -> str:
    return "–" if x is None else f"{x:{spec}}"


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.2f} %"


def report(rows: list[dict[str, Any]], greedy: list[dict[str, Any]], head: list[str]) -> list[str]:
    floor = {r["gpus"]: r for r in greedy}
    lines = [*head, "## `pal-opt solve --method ilp --time-limit T` (whole process)", "",
             f"Target: wall ≤ T + {SLACK:g} s at every size; always a valid placement and the best bound known. "
             "*greedy s*: `pal-opt solve --method pal` on the same round in this session (the floor: the "
             "greedy answer a time-limited solve starts from).", "",
             "| GPUs | backend | T s | wall s | wall − T s | CPU s | greedy s | status | stopped at | gap | path | "
             "answer | valid | peak MiB | load |",
             "|---:|---|---:|---:|---:|---:|---:|---|---|---:|---|---|---|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['gpus']:,} | {r['backend']} | {r['limit']:g} | {r['wall']:.2f} | {r['over']:+.2f} | {_f(r['cpu'])} | "
            f"{_f(floor.get(r['gpus'], {}).get('wall'))} | {r['status']} | {r.get('stage') or '–'} | "
            f"{_pct(r.get('gap'))} | {r.get('path', '–')} | {r.get('answer', '–')} | {'yes' if r['valid'] else 'NO'} | "
            f"{r['peak_mib']:.0f} | {r['load']:.1f} |")
    met = [r for r in rows if r["over"] <= SLACK and r["valid"]]
    worst = max(rows, key=lambda r: r["over"]) if rows else None
    lines += ["", f"Within T + {SLACK:g} s and valid: {len(met)} of {len(rows)} runs"
              + (f"; worst wall − T {worst['over']:+.2f} s ({worst['gpus']:,} GPUs, {worst['backend']}, "
                 f"T = {worst['limit']:g})." if worst else "."),
              f"With a bound: {sum(1 for r in rows if r.get('bound') is not None)} of {len(rows)}.", ""]
    t3 = [r for r in rows if r["gpus"] == 32768 and r["limit"] == 3]
    if t3:
        lines += [f"32,768 GPUs, `--time-limit 3` (target ≤ {T3_AT_32K:g} s): "
                  + ", ".join(f"{r['backend']} {r['wall']:.2f} s" for r in t3) + ".", ""]
    return lines


def plot(rows: list[dict[str, Any]], greedy: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # the target is wall <= T + 0.5 s for every T: plot wall - T against one line (colour: backend,
    # marker: T), with the wall times themselves beside it
    fig, (ax, wall_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    backends = sorted({r["backend"] for r in rows})
    limits = sorted({r["limit"] for r in rows})
    colour = {b: f"C{k}" for k, b in enumerate(backends)}
    marker = dict(zip(limits, "os^vD", strict=False))
    offset = {b: 1.0 + 0.06 * (k - (len(backends) - 1) / 2) for k, b in enumerate(backends)}  # side by side
    for b in backends:
        for t in limits:
            pts = sorted((r["gpus"], r["wall"]) for r in rows if r["backend"] == b and r["limit"] == t)
            if not pts:
                continue
            ax.plot([g * offset[b] for g, _ in pts], [w - t for _, w in pts], marker[t], color=colour[b], ms=6,
                    mfc="none" if t != limits[0] else colour[b])
            wall_ax.plot([g for g, _ in pts], [w for _, w in pts], "-", marker=marker[t], color=colour[b], lw=0.8)
    ax.axhline(SLACK, color="tab:red", ls="--", lw=1.0)
    ax.axhline(0.0, color="k", lw=0.6)
    pts = sorted((r["gpus"], r["wall"]) for r in greedy)
    wall_ax.plot([p[0] for p in pts], [p[1] for p in pts], "k--", marker=".", label="greedy PAL")
    from matplotlib.lines import Line2D

    keys = ([Line2D([], [], color=colour[b], marker="o", ls="", label=b) for b in backends]
            + [Line2D([], [], color="grey", marker=marker[t], ls="", mfc="none" if t != limits[0] else "grey",
                      label=f"T = {t:g} s") for t in limits]
            + [Line2D([], [], color="tab:red", ls="--", label=f"target: T + {SLACK:g} s")])
    ax.set_ylim(top=SLACK + 0.6)  # the target line clear of the frame
    fig.legend(handles=keys, fontsize=7, loc="lower center", ncol=len(keys))  # below: clear of the points
    for a in (ax, wall_ax):
        a.set_xscale("log", base=2)
        a.set_xlabel("GPUs")
        a.grid(True, alpha=0.3)
    ax.set_ylabel("wall − T  (s, whole process)")
    ax.set_title("pal-opt solve --method ilp --time-limit T: past the limit?", fontsize="medium")
    wall_ax.set_yscale("log")
    wall_ax.set_ylabel("wall s (whole process)")
    wall_ax.set_title("wall time (colour: backend, marker: T)", fontsize="medium")
    wall_ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="comma-separated GPU counts, multiples of 8 (default " + ",".join(map(str, SIZES)) + ")")
    ap.add_argument("--limits", default=",".join(f"{t:g}" for t in LIMITS),
                    help="comma-separated time limits T in seconds (default " + ",".join(f"{t:g}" for t in LIMITS) + ")")
    ap.add_argument("--backends", default=None, help="comma-separated (default: every installed backend)")
    ap.add_argument("--seed", type=int, default=0, help="the rounds' generator seed (default 0)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    sizes = split_list(ap, "--sizes", args.sizes, expected="comma-separated GPU counts (multiples of 8)")
    check_values(ap, "--sizes", sizes, lambda g: g >= 8 and g % 8 == 0, "GPU counts are positive multiples of 8")
    limits = split_list(ap, "--limits", args.limits, float, "comma-separated seconds")
    check_values(ap, "--limits", limits, lambda t: math.isfinite(t) and t > 0, "time limits are seconds > 0")
    at_least(ap, args, 0, "seed")
    import pal_opt
    from pal_opt.ilp import available_backends

    backends = split_list(ap, "--backends", args.backends, str, "comma-separated backend names") if args.backends \
        else list(available_backends())
    check_backends(ap, "--backends", backends)
    full = set(sizes) >= set(SIZES) and set(limits) >= set(LIMITS) and set(backends) >= set(available_backends())
    out_dir = output_dir(args, "time_limit", partial=None if full else "partial (a subset of sizes, limits or backends)")
    compileall.compile_dir(str(Path(pal_opt.__path__[0])), quiet=1)

    def progress(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    head = ["# `--time-limit` bounds the whole process", "", f"{produced_by(__file__, argv)}.", "",
            "Machine:", "", *machine(), "",
            f"Rounds: generated, 8 GPUs per server, {JOBS_PER_GPU} jobs per GPU, λ = 1.7, seed {args.seed}; factors: "
            + ("Longhorn measurements (../shared)." if measurements() else "synthetic Longhorn-like (../shared absent).")
            + f"  Processes ran at niceness {niceness()}; the load average (1 min) before each run is in the "
            "table: wall times include waiting for a core, *CPU s* (user + system, GNU `time`) is the work done.", ""]
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pal_opt_time_limit_") as tmp:
        work = Path(tmp)
        paths = {g: instance_file(g, args.seed, work) for g in sizes}
        progress("instances written")
        greedy = greedy_runs(paths, work, progress)
        rows = ilp_runs(paths, backends, limits, work, progress)
    load = load_average()
    lines = report(rows, greedy, head)
    lines += [f"Run time {time.monotonic() - t_start:.0f} s; load average at the end: {load}.", "",
              "![wall - T per run against the T + 0.5 s target, and the wall times](time_limit.png)", ""]
    (out_dir / "time_limit.md").write_text("\n".join(lines), encoding="utf-8")
    (out_dir / "time_limit.json").write_text(json.dumps({"ilp": rows, "greedy": greedy}, indent=1), encoding="utf-8")
    plot(rows, greedy, out_dir / "time_limit.png")
    print("\n".join(lines))
    wrote("time_limit", out_dir / "time_limit.md", out_dir / "time_limit.json", out_dir / "time_limit.png")
    return 0 if all(r["valid"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
