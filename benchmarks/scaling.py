"""Scaling from 512 to 65,536 GPUs: wall and proven gap per backend, and greedy PAL (issue 15).

Runs for about 2.5 min on the machine of the committed page (its own run time: 135 s); ``--sizes``,
``--seeds`` and ``--backends`` run fewer.

Rounds: :func:`pal_opt.generate.generate_instance`, 8 GPUs per server, 0.29 queued jobs per GPU,
λ = 1.7, factors drawn from the Longhorn measurements in ``../shared`` (synthetic Longhorn-like
factors when absent), seeds 0, 1, 2, at 512, 2,048, 8,192, 32,768 and 65,536 GPUs.

Whole processes, timed from outside (``benchmarks/_procs.py``):

* ``pal-opt solve INSTANCE --method ilp --backend B --gap G --time-limit T`` for every installed
  backend, with the issue's targets per size (:data:`TARGETS`: 0.5 % in 10 s up to 8,192 GPUs,
  1 % in 30 s at 32,768, 2 % in 120 s at 65,536);
* ``pal-opt solve INSTANCE --method pal`` (greedy PAL, the comparator);

and greedy PAL inside one process (seed 0): the policy call, the binning, ``solve(inst, "pal")``.

Reported per size and method: the median over the seeds of the wall time, the CPU seconds and the
proven gap (the worst too), the statuses, and that every written placement passes
:func:`pal_opt.check.check`; the plot (``scaling.png``) shows the median wall and gap against the
GPUs, with the seeds' range.  The processes run at the benchmark's priority (start it under
``nice`` to run all of them under it).

Usage::

    python benchmarks/scaling.py [--update | --out-dir DIR] [--sizes 512,2048,...] [--seeds 3]
        [--backends highs,cpsat,cbc]
"""

from __future__ import annotations

import argparse
import json
import statistics
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
    load_average,
    output_dir,
    produced_by,
    run_time,
    sizes_among,
    split_list,
    wrote,
)
from suite import machine, measurements  # noqa: E402

SIZES = (512, 2048, 8192, 32768, 65536)
#: GPUs -> (gap target, time limit s): the issue's targets from 8,192 GPUs on, 8,192's below.
TARGETS = {512: (0.005, 10.0), 2048: (0.005, 10.0), 8192: (0.005, 10.0), 32768: (0.01, 30.0),
           65536: (0.02, 120.0)}
GREEDY = "greedy PAL"


def runs(sizes: list[int], seeds: int, backends: list[str], work: Path, progress: Any) -> list[dict[str, Any]]:
    rows = []
    for g in sizes:
        gap, limit = TARGETS[g]
        for seed in range(seeds):
            path = instance_file(g, seed, work)
            for b in backends:
                r = solve_row(path, ["--method", "ilp", "--backend", b, "--gap", f"{gap:g}", "--time-limit",
                                     f"{limit:g}"], 3 * limit + 60, work)
                rows.append({"gpus": g, "seed": seed, "method": b, "gap_target": gap, "limit": limit, **r})
                progress(f"{g} seed {seed} {b}: {r['wall']:.2f} s, {r['status']}, gap {r.get('gap')}")
            r = solve_row(path, ["--method", "pal"], 600, work)
            rows.append({"gpus": g, "seed": seed, "method": GREEDY, "gap_target": None, "limit": None, **r})
            progress(f"{g} seed {seed} greedy: {r['wall']:.2f} s")
            path.unlink()
    return rows


def greedy_in_process(sizes: list[int], work: Path, progress: Any) -> list[dict[str, Any]]:
    """Greedy PAL inside one process, seed 0: the policy call on binned factors (median of 3
    after a cold call), the binning (k-means, once per cluster) and ``solve(instance, "pal")`` on
    a freshly loaded round (binning included)."""
    from pal_opt import solve
    from pal_opt.binning import binned_factors, forget_binnings
    from pal_opt.io import load_instance
    from pal_opt.policies import get_policy

    rows = []
    for g in sizes:
        path = instance_file(g, 0, work)
        forget_binnings()
        inst = load_instance(path)
        t0 = time.perf_counter()
        solve(inst, "pal")
        solve_s = time.perf_counter() - t0
        forget_binnings()
        inst = load_instance(path)
        t0 = time.perf_counter()
        factors = binned_factors(inst.cluster)
        bin_s = time.perf_counter() - t0
        place = get_policy("pal")
        times = []
        for _ in range(4):
            t0 = time.perf_counter()
            place(inst, factors)
            times.append(time.perf_counter() - t0)
        rows.append({"gpus": g, "solve": solve_s, "binning": bin_s, "policy_cold": times[0],
                     "policy": statistics.median(times[1:])})
        progress(f"{g} greedy in process: {rows[-1]['policy']:.3f} s")
    return rows


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per size and method: medians over the seeds (and the worst gap, wall and validity)."""
    out = []
    for g in sorted({r["gpus"] for r in rows}):
        for m in dict.fromkeys(r["method"] for r in rows):
            rs = [r for r in rows if r["gpus"] == g and r["method"] == m]
            if not rs:
                continue
            gaps = [r["gap"] for r in rs if r.get("gap") is not None]
            cpus = [r["cpu"] for r in rs if r["cpu"] is not None]
            out.append({"gpus": g, "method": m, "seeds": len(rs), "wall": statistics.median(r["wall"] for r in rs),
                        "wall_min": min(r["wall"] for r in rs), "wall_max": max(r["wall"] for r in rs),
                        "cpu": statistics.median(cpus) if cpus else None,
                        "gap": statistics.median(gaps) if len(gaps) == len(rs) else None,
                        "gap_max": max(gaps) if gaps else None, "gap_min": min(gaps) if gaps else None,
                        "bounded": len(gaps), "statuses": sorted({r["status"] for r in rs}),
                        "valid": all(r["valid"] for r in rs), "limit": rs[0]["limit"],
                        "gap_target": rs[0]["gap_target"], "peak_mib": max(r["peak_mib"] for r in rs)})
    return out


def _f(x: Any, spec: str = ".2f") -> str:
    return "–" if x is None else format(x, spec)


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.3f} %"


def report(rows: list[dict[str, Any]], summ: list[dict[str, Any]], gin: list[dict[str, Any]],
           head: list[str]) -> list[str]:
    greedy = {s["gpus"]: s for s in summ if s["method"] == GREEDY}
    lines = [*head, "## Medians over the seeds", "",
             "| GPUs | method | gap target | T s | median wall s | range s | × greedy wall | median CPU s | "
             "median proven gap | worst gap | with a bound | statuses | valid | max peak MiB |",
             "|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|"]
    for s in summ:
        ratio = s["wall"] / greedy[s["gpus"]]["wall"] if s["gpus"] in greedy else None
        lines.append(
            f"| {s['gpus']:,} | {s['method']} | {_pct(s['gap_target'])} | {_f(s['limit'], '.0f')} | {s['wall']:.2f} | "
            f"{s['wall_min']:.2f}–{s['wall_max']:.2f} | {_f(ratio)} | {_f(s['cpu'])} | {_pct(s['gap'])} | "
            f"{_pct(s['gap_max'])} | {s['bounded']} of {s['seeds']} | {', '.join(s['statuses'])} | "
            f"{'yes' if s['valid'] else 'NO'} | {s['peak_mib']:.0f} |")
    lines += ["", "## Greedy PAL in process (seed 0)", "",
              "| GPUs | policy call s (median of 3) | cold call s | binning s | `solve(inst, \"pal\")` s |",
              "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['gpus']:,} | {r['policy']:.3f} | {r['policy_cold']:.3f} | {r['binning']:.3f} | {r['solve']:.3f} |"
              for r in gin]
    lines += ["", "## Every run", "",
              "| GPUs | seed | method | load | wall s | CPU s | status | proven gap | stopped at | path | answer | valid |",
              "|---:|---:|---|---:|---:|---:|---|---:|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['gpus']:,} | {r['seed']} | {r['method']} | {r['load']:.1f} | {r['wall']:.2f} | "
                     f"{_f(r['cpu'])} | {r['status']} | {_pct(r.get('gap'))} | {r.get('stage') or '–'} | "
                     f"{r.get('path', '–') if r['method'] != GREEDY else '–'} | "
                     f"{r.get('answer', '–') if r['method'] != GREEDY else '–'} | {'yes' if r['valid'] else 'NO'} |")
    return lines


def _lp_by_another(rows: list[dict[str, Any]]) -> set[tuple[int, str]]:
    """(GPUs, backend) whose bound's LP another solver solved (the path names it: CP-SAT solves
    no LP, so at 32,768 GPUs and above its runs' bound is HiGHS's)."""
    return {(r["gpus"], r["method"]) for r in rows
            if r["method"] != GREEDY and "(" in str(r.get("path")) and f"({r['method']})" not in str(r["path"])}


def plot(summ: list[dict[str, Any]], path: Path, rows: list[dict[str, Any]] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator

    other = _lp_by_another(rows or [])
    fig, (wall_ax, gap_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    for m, marker in zip(dict.fromkeys(s["method"] for s in summ), "os^vD", strict=False):
        ss = [s for s in summ if s["method"] == m]
        x = [s["gpus"] for s in ss]
        wall = [s["wall"] for s in ss]
        err = [[w - s["wall_min"] for w, s in zip(wall, ss, strict=True)],
               [s["wall_max"] - w for w, s in zip(wall, ss, strict=True)]]
        style = "k--" if m == GREEDY else "-"
        line = wall_ax.errorbar(x, wall, yerr=err, fmt=style, marker=marker, capsize=3, label=m)
        hollow = [(s["gpus"], s["wall"]) for s in ss if (s["gpus"], m) in other]
        if hollow:  # the same backend's line, its points hollow where another solver did the LP
            wall_ax.plot(*zip(*hollow, strict=True), marker, ms=9, mfc="white", color=line[0].get_color())
        if m != GREEDY:
            gs = [s for s in ss if s["gap"] is not None]
            gap_ax.plot([s["gpus"] for s in gs], [100 * s["gap"] for s in gs], marker=marker, label=m,
                        alpha=0.7, ms=8 - 2 * list(dict.fromkeys(s["method"] for s in summ)).index(m))
    targets = sorted(TARGETS.items())
    gap_ax.step([g for g, _ in targets], [100 * t[0] for _, t in targets], where="mid", color="grey", ls=":",
                label="gap target")
    for ax in (wall_ax, gap_ax):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs")
        ax.legend(fontsize=8)
    wall_ax.set_yscale("log")
    wall_ax.yaxis.set_minor_locator(LogLocator(subs=(0.2, 0.5)))
    wall_ax.yaxis.set_minor_formatter("{x:g}")
    wall_ax.grid(True, which="both", alpha=0.3)
    wall_ax.set_ylabel("wall s, whole process (median of seeds; bars: range)")
    wall_ax.set_title("pal-opt solve: wall time" + (" (hollow: the bound's LP solved by HiGHS)" if other else ""),
                      fontsize="medium")
    gap_ax.set_ylabel("proven gap % (median of seeds)")
    gap_ax.set_title("--method ilp: proven gap (coinciding backends: nested markers)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help=f"comma-separated GPU counts among {', '.join(map(str, TARGETS))} (default: all)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per size (default 3)")
    ap.add_argument("--backends", default=None, help="comma-separated (default: every installed backend)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    from pal_opt.ilp import available_backends

    sizes = sizes_among(ap, args.sizes, TARGETS)
    at_least(ap, args, 1, "seeds")
    backends = split_list(ap, "--backends", args.backends, str, "comma-separated backend names") if args.backends \
        else list(available_backends())
    check_backends(ap, "--backends", backends)
    full = set(sizes) >= set(SIZES) and args.seeds >= 3 and set(backends) >= set(available_backends())
    out_dir = output_dir(args, "scaling", partial=None if full else "partial (a subset of sizes, seeds or backends)")

    def progress(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    head = ["# Scaling from 512 to 65,536 GPUs (whole processes)", "", f"{produced_by(__file__, argv)}.", "",
            "Machine:", "", *machine(), "",
            f"Rounds: generated, 8 GPUs per server, {JOBS_PER_GPU} jobs per GPU, λ = 1.7, seeds 0–{args.seeds - 1}; "
            "factors: " + ("Longhorn measurements (../shared)." if measurements() else "synthetic (../shared absent).")
            + f"  `--method ilp` with each backend and the gap target and time limit of the size; `--method pal` "
            f"(greedy PAL) as the comparator.  Processes ran at niceness {niceness()}; wall times include waiting for "
            "a core (load average before each run in the second table), *CPU s* (user + system) does not.", ""]
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pal_opt_scaling_") as tmp:
        rows = runs(sizes, args.seeds, backends, Path(tmp), progress)
        gin = greedy_in_process(sizes, Path(tmp), progress)
    summ = summary(rows)
    load = load_average()
    lines = report(rows, summ, gin, head)
    lines += ["", f"Run time {time.monotonic() - t_start:.0f} s; load average at the end: {load}.", "",
              "![median wall time and proven gap against GPUs, per backend](scaling.png)", ""]
    (out_dir / "scaling.md").write_text("\n".join(lines), encoding="utf-8")
    (out_dir / "scaling.json").write_text(json.dumps({"runs": rows, "summary": summ, "greedy_in_process": gin}, indent=1), encoding="utf-8")
    plot(summ, out_dir / "scaling.png", rows)
    print("\n".join(lines))
    wrote("scaling", out_dir / "scaling.md", out_dir / "scaling.json", out_dir / "scaling.png")
    return 0 if all(r["valid"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
