"""Experiment A1 of the PAL artifact: Sia-Philly traces on a 16 × 4 cluster.

Runs for about 23 min on the machine of the committed page (its own total: 1,378 s with 2 worker
processes); ``--quick``, ``--no-ilp`` and ``--no-lambda`` run less.

Setup (as in the paper's main simulation): 16 servers × 4 GPUs, FIFO queue, 360 s rounds,
λ = 1.7, GPU factors drawn from the Longhorn measurements (classA ← ResNet-50, classB/C ←
BERT, classD ← PageRank), the six traces ``../shared/data/pal-artifact/traces/workload-{1..6}``.
Policies: Packed-Sticky (the baseline), PM-First, PAL and the integer program, each with prefix
admission (the queue is served in order and stops at the first job that does not fit, as in the
artifact) and with backfill admission (jobs that do not fit are skipped); the integer program
runs with a per-round time limit and one thread. The equal-admission table compares the integer
program with PAL at the same admission rule: prefix against prefix, backfill against backfill.

Variability draws:

* ``artifact``: the PAL artifact's own cluster (its seeded draw, replayed exactly);
* ``seed0`` .. ``seedN``: numpy draws from the same files, because a single draw is noisy.
  Whether a draw contains one of the rare slow ResNet GPUs (≈ 1.4 % of runs are ≥ 2× the
  median) decides most of the gap between policies.

Also a λ sweep (1.0 .. 3.0) on workload-6.

Targets (from the paper): PAL improves average JCT over Packed-Sticky by 43 % geomean (min
21 %, max 59 %), PM-First by 40 %; the ILP with backfill should be ≥ 10 % below PAL.

Outputs: ``pal_a1.csv`` (one row per simulation), ``pal_a1.md`` (tables), ``pal_a1.png``
(average JCT normalised to Packed-Sticky per trace and policy, like the paper's figure),
``pal_a1_equal.png`` (ILP against PAL at equal admission), ``pal_a1_lambda.png`` and
``pal_a1_w6_cdf.png``. They replace the committed ones in ``benchmarks/results/`` only with
``--update`` (see ``benchmarks/_results.py``).

Usage::

    python benchmarks/pal_a1.py [--seeds 5] [--workers 2] [--time-limit 10] [--no-ilp] [--quick] [--update]
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from _results import (
    add_output_arguments,
    output_dir,
    partial_run,
    positive_seconds,
    produced_by,
    run_time,
    write_rows_6g,
)
from pal_lambda import artifact_traces, check_draws, draw_cluster, geomean  # (which sets PAL_OPT_SHARED)
from pal_lambda import ratios as jct_ratios
from suite import machine

#: the page's figures, embedded at its end with what each shows (those the run drew: `figure_links`)
FIGURES = (
    ("pal_a1.png", "average JCT against Packed-Sticky per workload and policy"),
    ("pal_a1_equal.png", "ILP against PAL at equal admission"),
    ("pal_a1_lambda.png", "the locality penalty sweep on workload-6: average JCT against Packed-Sticky"),
    ("pal_a1_w6_cdf.png", "workload-6: JCT CDF and utilisation per policy"),
)


def figure_links(drawn: set[str]) -> str:
    """The page's image links, of the figures ``drawn`` only: a ``--quick`` or ``--no-lambda`` run
    has no λ sweep to draw, and its page linked a ``pal_a1_lambda.png`` that was not there."""
    return "".join(f"\n\n![{alt}]({name})" for name, alt in FIGURES if name in drawn) + "\n"


GREEDY = ("packed-sticky", "pmfirst", "pal", "packed-sticky-backfill", "pmfirst-backfill", "pal-backfill")
ILP = ("ilp-prefix", "ilp-backfill")
#: (admission, PAL's column, the integer program's column) for the equal-admission table
EQUAL = (("prefix", "pal", "ilp-prefix"), ("backfill", "pal-backfill", "ilp-backfill"))
BASE = "packed-sticky"
LAMBDAS = (1.0, 1.25, 1.5, 1.7, 2.0, 2.5, 3.0)
PAPER = {"pal": (0.43, 0.21, 0.59), "pmfirst": (0.40, None, None)}
COLUMNS = (
    "experiment", "trace", "draw", "lambda", "policy", "avg_jct_h", "p99_jct_h", "makespan_h",
    "utilization", "avg_queueing_h", "gpu_weighted_slowdown", "spanning_round_fraction",
    "preemptions", "moves", "fallbacks", "rounds", "solve_seconds_total", "solve_seconds_max",
    "wall_seconds", "classA_slow_gpus",
)


def _policy_config(policy: str, lam: float, time_limit: float) -> Any:
    from pal_opt.simulate import SimConfig

    if policy.startswith("ilp-"):
        return SimConfig(policy="ilp", locality_penalty=lam, admission=policy[4:], time_limit=time_limit,
                         ilp_options={"threads": 1})
    if policy.endswith("-backfill"):
        return SimConfig(policy=policy.removesuffix("-backfill"), locality_penalty=lam, admission="backfill")
    return SimConfig(policy=policy, locality_penalty=lam)


def run_group(task: tuple[str, str, str, float, tuple[str, ...], float]) -> list[dict[str, Any]]:
    """Simulate one (trace, draw, λ) under each policy; one worker process runs one group."""
    from pal_opt.io.traces import read_trace
    from pal_opt.simulate import result_to_dict, simulate

    experiment, trace_path, draw, lam, policies, time_limit = task
    trace = read_trace(trace_path)
    cluster = draw_cluster(draw)
    slow_a = int((cluster.factors["classA"] > 2.0).sum())
    rows = []
    for policy in policies:
        res = simulate(trace, cluster, _policy_config(policy, lam, time_limit), source=trace_path)
        s = res.summary
        row = {
            "experiment": experiment,
            "trace": Path(trace_path).stem,
            "draw": draw,
            "lambda": lam,
            "policy": policy,
            "avg_jct_h": s["avg_jct"] / 3600,
            "p99_jct_h": s["p99_jct"] / 3600,
            "makespan_h": s["makespan"] / 3600,
            "utilization": s["utilisation"],
            "avg_queueing_h": s["avg_queueing_delay"] / 3600,
            "gpu_weighted_slowdown": s["gpu_weighted_slowdown"],
            "spanning_round_fraction": s["spanning_round_fraction"],
            "preemptions": s["preemptions"],
            "moves": s["moves"],
            "fallbacks": s["fallbacks"],
            "rounds": s["rounds"],
            "solve_seconds_total": s["solve_seconds_total"],
            "solve_seconds_max": s["solve_seconds_max"],
            "wall_seconds": s["wall_seconds"],
            "classA_slow_gpus": slow_a,
        }
        if experiment == "main" and draw == "artifact" and Path(trace_path).stem == "workload-6":
            row["_doc"] = result_to_dict(res)
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- analysis
def _ratios(rows: list[dict[str, Any]], experiment: str) -> dict[tuple[str, str, float], dict[str, float]]:
    """{(trace, draw, λ): {policy: avg JCT / Packed-Sticky's}} of the ``experiment``'s rows
    (:func:`pal_lambda.ratios`)."""
    return jct_ratios([r for r in rows if r["experiment"] == experiment])


def _fmt(x: float | None, nd: int = 3) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def write_markdown(rows: list[dict[str, Any]], policies: Sequence[str], meta: dict[str, Any]) -> str:
    out = io.StringIO()
    w = out.write
    ratios = _ratios(rows, "main")
    traces = sorted({k[0] for k in ratios})
    draws = sorted({k[1] for k in ratios}, key=lambda d: (d != "artifact", d))
    seeds = [d for d in draws if d != "artifact"]
    w("# A1: Sia-Philly traces, 16 × 4 GPUs, FIFO, 360 s rounds, λ = 1.7\n\n")
    w(f"{meta['command']} on {meta['date']}; ILP per-round time limit {meta['time_limit']:g} s, 1 thread, "
      "default backend.\n\n")
    w("Machine:\n\n" + "".join(f"{line}\n" for line in meta["machine"]) + "\n")
    w("Average JCT normalised to Packed-Sticky (lower is better); improvement = 1 − ratio.\n\n")

    def table(draw_set: list[str], title: str) -> None:
        w(f"## {title}\n\n")
        w("| trace | " + " | ".join(policies) + " | Packed-Sticky avg JCT (h) |\n")
        w("|---" * (len(policies) + 2) + "|\n")
        per_pol: dict[str, list[float]] = defaultdict(list)
        for t in traces:
            cells = []
            for p in policies:
                vals = [ratios[(t, d, 1.7)][p] for d in draw_set if p in ratios.get((t, d, 1.7), {})]
                if vals:
                    g = geomean(vals)
                    per_pol[p].append(g)
                    cells.append(_fmt(g))
                else:
                    cells.append("–")
            base = [r["avg_jct_h"] for r in rows if r["experiment"] == "main" and r["trace"] == t
                    and r["draw"] in draw_set and r["policy"] == BASE]
            w(f"| {t} | " + " | ".join(cells) + f" | {_fmt(geomean(base), 2) if base else '–'} |\n")
        w("| **geomean** | " + " | ".join(_fmt(geomean(per_pol[p])) if per_pol[p] else "–" for p in policies) + " | |\n\n")
        w("| policy | geomean improvement | min | max | paper |\n|---|---|---|---|---|\n")
        for p in policies:
            if p == BASE or not per_pol[p]:
                continue
            imp = [1 - x for x in per_pol[p]]
            paper = PAPER.get(p)
            ptxt = "–" if paper is None else (
                _pct(paper[0]) + (f" (min {_pct(paper[1])}, max {_pct(paper[2])})" if paper[1] is not None else ""))
            w(f"| {p} | {_pct(1 - geomean(per_pol[p]))} | {_pct(min(imp))} | {_pct(max(imp))} | {ptxt} |\n")
        for admission, pal, ilp in EQUAL:
            if per_pol.get(pal) and per_pol.get(ilp):
                w(f"\nAt {admission} admission, {ilp} vs {pal}: geomean avg JCT "
                  f"{_pct(1 - geomean(per_pol[ilp]) / geomean(per_pol[pal]))} lower.")
        w("\n\n")

    table(["artifact"], "The artifact's cluster (its own variability draw)")
    if seeds:
        table(seeds, f"Mean over {len(seeds)} numpy variability draws (geomean of ratios per trace)")
        w("### Per draw: geomean over the six traces of the ratio to Packed-Sticky\n\n")
        w("| draw | classA GPUs ≥ 2× | " + " | ".join(p for p in policies if p != BASE) + " |\n")
        w("|---" * (len(policies) + 1) + "|\n")
        slow = {r["draw"]: r["classA_slow_gpus"] for r in rows if r["experiment"] == "main"}
        for d in draws:
            cells = []
            for p in policies:
                if p == BASE:
                    continue
                vals = [ratios[(t, d, 1.7)][p] for t in traces if p in ratios.get((t, d, 1.7), {})]
                cells.append(_fmt(geomean(vals)) if vals else "–")
            w(f"| {d} | {slow.get(d, '–')} | " + " | ".join(cells) + " |\n")
        w("\n")

    _equal_admission(w, rows)

    # slowdown decomposition
    w("## Why: GPU-time-weighted slowdown (artifact draw)\n\n")
    w("| trace | " + " | ".join(policies) + " |\n" + "|---" * (len(policies) + 1) + "|\n")
    for t in traces:
        cells = []
        for p in policies:
            v = [r["gpu_weighted_slowdown"] for r in rows if r["experiment"] == "main" and r["trace"] == t
                 and r["draw"] == "artifact" and r["policy"] == p]
            cells.append(_fmt(v[0]) if v else "–")
        w(f"| {t} | " + " | ".join(cells) + " |\n")
    w("\n")

    # λ sweep
    lam_rows = [r for r in rows if r["experiment"] == "lambda"]
    if lam_rows:
        lr = _ratios(rows, "lambda")
        lam_draws = sorted({k[1] for k in lr}, key=lambda d: (d != "artifact", d))
        lams = sorted({k[2] for k in lr})
        lam_pols = [p for p in policies if any(p in v for v in lr.values())]
        for group, dset in (("artifact draw", ["artifact"]),
                            (f"geomean over {len([d for d in lam_draws if d != 'artifact'])} numpy draws",
                             [d for d in lam_draws if d != "artifact"])):
            if not dset:
                continue
            w(f"## λ sweep on workload-6 ({group}): average JCT / Packed-Sticky's\n\n")
            w("Why these ratios hardly move with λ (97% of workload-6's GPU-time is in jobs wider than a "
              "server, which pay λ under every policy), and the six-trace sweep: `pal_lambda.md`.\n\n")
            w("| λ | " + " | ".join(lam_pols) + " | Packed-Sticky avg JCT (h) |\n")
            w("|---" * (len(lam_pols) + 2) + "|\n")
            for lam in lams:
                cells = []
                for p in lam_pols:
                    vals = [lr[("workload-6", d, lam)][p] for d in dset if p in lr.get(("workload-6", d, lam), {})]
                    cells.append(_fmt(geomean(vals)) if vals else "–")
                base = [r["avg_jct_h"] for r in lam_rows if r["lambda"] == lam and r["draw"] in dset and r["policy"] == BASE]
                w(f"| {lam:g} | " + " | ".join(cells) + f" | {_fmt(geomean(base), 2)} |\n")
            w("\n")

    # run times
    w("## Run time per simulation (160 jobs, all rows)\n\n")
    w("| policy | simulations | median wall (s) | max wall (s) | median placement time (s) | max round (s) | fallbacks |\n")
    w("|---|---|---|---|---|---|---|\n")
    for p in policies:
        rs = [r for r in rows if r["policy"] == p]
        if not rs:
            continue
        w(f"| {p} | {len(rs)} | {np.median([r['wall_seconds'] for r in rs]):.2f} | "
          f"{max(r['wall_seconds'] for r in rs):.2f} | {np.median([r['solve_seconds_total'] for r in rs]):.2f} | "
          f"{max(r['solve_seconds_max'] for r in rs):.2f} | {sum(r['fallbacks'] for r in rs)} |\n")
    w(f"\nTotal wall time of the experiment: {meta['elapsed']:.0f} s with {meta['workers']} worker processes.\n")
    return out.getvalue()


def _equal_ratios(rows: list[dict[str, Any]], draws: Sequence[str]) -> dict[str, dict[str, float]]:
    """{admission: {trace: geomean over draws of ILP avg JCT / PAL avg JCT}} at λ = 1.7."""
    jct = {(r["trace"], r["draw"], r["policy"]): r["avg_jct_h"] for r in rows
           if r["experiment"] == "main" and r["lambda"] == 1.7}
    traces = sorted({t for t, _, _ in jct})
    out: dict[str, dict[str, float]] = {}
    for admission, pal, ilp in EQUAL:
        per = {}
        for t in traces:
            vals = [jct[(t, d, ilp)] / jct[(t, d, pal)] for d in draws if (t, d, ilp) in jct and (t, d, pal) in jct]
            if vals:
                per[t] = geomean(vals)
        if per:
            out[admission] = per
    return out


def _equal_admission(w: Any, rows: list[dict[str, Any]]) -> None:
    """The like-with-like table: the integer program against PAL under the same admission rule."""
    main = [r for r in rows if r["experiment"] == "main"]
    draws = sorted({r["draw"] for r in main}, key=lambda d: (d != "artifact", d))
    seeds = [d for d in draws if d != "artifact"]
    groups = [("artifact draw", ["artifact"])] + ([(f"geomean over {len(seeds)} numpy draws", seeds)] if seeds else [])
    jct = {(r["trace"], r["draw"], r["policy"]): r["avg_jct_h"] for r in main}
    w("## Equal admission: the integer program against PAL under the same queue rule\n\n")
    w("Prefix admission serves the queue in order and stops at the first job that does not fit (the "
      "artifact's rule); backfill skips such jobs and goes on. Admission, not the placement method, decides "
      "most of the difference between `pal` and `ilp-backfill` in the tables above; this table separates the "
      "two. Cells are PAL's average JCT in hours and the integer program's relative to it "
      "(negative = the integer program is better).\n\n")
    for title, dset in groups:
        ratios = _equal_ratios(rows, dset)
        if not ratios:
            continue
        w(f"### {title.capitalize()}\n\n")
        head = " | ".join(f"PAL {a} (h) | ILP {a} vs PAL {a}" for a in ratios)
        w(f"| trace | {head} | backfill vs prefix, PAL |\n" + "|---" * (2 * len(ratios) + 2) + "|\n")
        for t in sorted(next(iter(ratios.values()))):
            cells = []
            for admission, pal, _ in EQUAL:
                if admission in ratios:
                    base = [jct[(t, d, pal)] for d in dset if (t, d, pal) in jct]
                    cells += [_fmt(geomean(base), 2), f"{100 * (ratios[admission][t] - 1):+.1f}%"]
            pal_bf = [jct[(t, d, "pal-backfill")] / jct[(t, d, "pal")] for d in dset
                      if (t, d, "pal-backfill") in jct and (t, d, "pal") in jct]
            w(f"| {t} | " + " | ".join(cells) + f" | {f'{100 * (geomean(pal_bf) - 1):+.1f}%' if pal_bf else '–'} |\n")
        gms = []
        for admission in ratios:
            gms += ["", f"**{100 * (geomean(list(ratios[admission].values())) - 1):+.1f}%**"]
        w("| **geomean** | " + " | ".join(gms) + " | |\n\n")


def plot_equal(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = [r for r in rows if r["experiment"] == "main"]
    draws = sorted({r["draw"] for r in main}, key=lambda d: (d != "artifact", d))
    seeds = [d for d in draws if d != "artifact"]
    panels = [("artifact draw", ["artifact"])] + ([(f"geomean of {len(seeds)} numpy draws", seeds)] if seeds else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 3.6), squeeze=False)
    for ax, (title, dset) in zip(axes[0], panels, strict=True):
        ratios = _equal_ratios(rows, dset)
        if not ratios:
            continue
        traces = sorted(next(iter(ratios.values())))
        x = np.arange(len(traces) + 1)
        width = 0.8 / len(ratios)
        for k, (admission, per) in enumerate(ratios.items()):
            vals = [100 * (per.get(t, np.nan) - 1) for t in traces] + [100 * (geomean(list(per.values())) - 1)]
            ax.bar(x + (k - (len(ratios) - 1) / 2) * width, vals, width, label=f"{admission} vs {admission}")
        ax.axhline(0.0, color="k", linewidth=0.6)
        ax.set_xticks(x, [t.replace("workload-", "W") for t in traces] + ["geomean"])
        ax.set_ylabel("ILP avg JCT vs PAL [%]")
        ax.set_title(f"ILP vs PAL at equal admission ({title})")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_main(rows: list[dict[str, Any]], policies: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratios = _ratios(rows, "main")
    traces = sorted({k[0] for k in ratios})
    draws = sorted({k[1] for k in ratios}, key=lambda d: (d != "artifact", d))
    seeds = [d for d in draws if d != "artifact"]
    panels = [("artifact draw", ["artifact"])] + ([(f"geomean of {len(seeds)} numpy draws", seeds)] if seeds else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 3.8), squeeze=False)
    for ax, (title, dset) in zip(axes[0], panels, strict=True):
        labels = [t.replace("workload-", "W") for t in traces] + ["geomean"]
        x = np.arange(len(labels))
        width = 0.8 / len(policies)
        for k, p in enumerate(policies):
            vals = []
            for t in traces:
                v = [ratios[(t, d, 1.7)][p] for d in dset if p in ratios.get((t, d, 1.7), {})]
                vals.append(geomean(v) if v else np.nan)
            finite = [v for v in vals if np.isfinite(v)]
            vals.append(geomean(finite) if finite else np.nan)
            ax.bar(x + (k - (len(policies) - 1) / 2) * width, vals, width, label=p)
        ax.axhline(1.0, color="k", linewidth=0.6)
        ax.set_xticks(x, labels)
        ax.set_ylabel("avg JCT / Packed-Sticky")
        ax.set_title(f"A1, 16×4, FIFO, λ=1.7 ({title})")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_lambda(rows: list[dict[str, Any]], policies: Sequence[str], path: Path) -> bool:
    """The λ sweep's figure; False (nothing drawn) when the rows have no sweep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lr = _ratios(rows, "lambda")
    if not lr:
        return False
    lams = sorted({k[2] for k in lr})
    draws = sorted({k[1] for k in lr}, key=lambda d: (d != "artifact", d))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    # one colour per policy, one line style per draw (the colour cycle repeated after 10 series, so
    # two policies shared a colour)
    colours = plt.get_cmap("tab20").colors
    shown = [p for p in policies if p != BASE and any(p in v for v in lr.values())]
    for k, p in enumerate(shown):
        colour = colours[(2 * k) % len(colours)] if len(shown) <= 10 else colours[k % len(colours)]
        for dset, style in ((["artifact"], "-o"), ([d for d in draws if d != "artifact"], "--s")):
            ys = []
            for lam in lams:
                v = [lr[("workload-6", d, lam)][p] for d in dset if p in lr.get(("workload-6", d, lam), {})]
                ys.append(geomean(v) if v else np.nan)
            if not np.all(np.isnan(ys)):
                ax.plot(lams, ys, style, color=colour,
                        label=f"{p} ({'artifact' if dset == ['artifact'] else 'numpy draws'})")
    ax.axhline(1.0, color="k", linewidth=0.6)
    ax.set_xlabel("locality penalty λ")
    ax.set_ylabel("avg JCT / Packed-Sticky")
    ax.set_title("λ sweep, workload-6, 16×4, FIFO")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: clear of the lines
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--seeds", type=int, default=5, help="numpy variability draws besides the artifact's (default 5)")
    ap.add_argument("--workers", type=int, default=2, help="simulations run at a time (default 2)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="ILP seconds per round (default 10)")
    ap.add_argument("--no-ilp", action="store_true", help="the greedy policies only, no integer program")
    ap.add_argument("--no-lambda", action="store_true", help="skip the λ sweep on workload-6")
    ap.add_argument("--quick", action="store_true", help="artifact draw only, no λ sweep")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    check_draws(ap, args)
    positive_seconds(ap, args, "time_limit")
    partial = partial_run(ap, args, "quick", "seeds", "no_ilp", "no_lambda")

    traces = artifact_traces("pal_a1")
    if not traces:
        return 0
    out = output_dir(args, "pal_a1", partial=partial)  # checked before any work
    policies = GREEDY + (() if args.no_ilp else ILP)
    draws = ["artifact"] + ([] if args.quick else [f"seed{s}" for s in range(args.seeds)])
    tasks = [("main", str(t), d, 1.7, policies, args.time_limit) for t in traces for d in draws]
    w6 = [t for t in traces if t.stem == "workload-6"]
    if w6 and not (args.quick or args.no_lambda):
        for d in draws:
            for lam in LAMBDAS:
                if lam != 1.7:
                    tasks.append(("lambda", str(w6[0]), d, lam, policies, args.time_limit))
    # largest traces first so the pool ends evenly
    weight = {"workload-5": 0, "workload-2": 1, "workload-6": 2, "workload-3": 3}
    tasks.sort(key=lambda t: (weight.get(Path(t[1]).stem, 9), t[0] != "main"))

    host = machine()  # before the runs: its load average is the one at the start
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    from tqdm import tqdm

    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        # the bar is drawn only when stderr is a terminal (disable=None); the lines always
        done = tqdm(pool.map(run_group, tasks), total=len(tasks), desc="pal_a1", unit="group", file=sys.stderr,
                    disable=None)
        for k, group in enumerate(done, 1):
            rows.extend(group)
            g = group[0]
            tqdm.write(f"[{k}/{len(tasks)}] {g['experiment']} {g['trace']} {g['draw']} λ={g['lambda']:g}: "
                       + ", ".join(f"{r['policy']} {r['avg_jct_h']:.2f} h" for r in group), file=sys.stderr)
    elapsed = time.perf_counter() - t0
    # λ = 1.7 of the sweep is the main experiment's workload-6 run
    rows.extend({**r, "experiment": "lambda"} for r in list(rows)
                if r["experiment"] == "main" and r["trace"] == "workload-6" and not (args.quick or args.no_lambda))

    from pal_opt.simulate import plot_result, write_json_atomic, write_text_atomic

    docs = {r["policy"]: r.pop("_doc") for r in rows if "_doc" in r}
    for r in rows:
        r.pop("_doc", None)
    write_rows_6g(out / "pal_a1.csv", sorted(rows, key=lambda r: (r["experiment"], r["trace"], r["draw"], r["lambda"],
                                                                  r["policy"])), COLUMNS)
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "command": produced_by(__file__, argv, date=False),
        "machine": host,
        "time_limit": args.time_limit,
        "elapsed": elapsed,
        "workers": args.workers,
    }
    plot_main(rows, policies, out / "pal_a1.png")
    plot_equal(rows, out / "pal_a1_equal.png")
    drawn = {"pal_a1.png", "pal_a1_equal.png"} | ({"pal_a1_lambda.png"} if plot_lambda(
        rows, policies, out / "pal_a1_lambda.png") else set())
    if docs:
        plot_result(docs, out / "pal_a1_w6_cdf.png")
        drawn.add("pal_a1_w6_cdf.png")
    write_text_atomic(out / "pal_a1.md", write_markdown(rows, policies, meta) + figure_links(drawn))
    if docs:
        write_json_atomic(out / "pal_a1_w6_summary.json",
                          {p: {k: v for k, v in d.items() if k not in ("job_results", "round_log")} for p, d in docs.items()})
    print(f"pal_a1: {len(rows)} rows in {elapsed:.0f} s -> {out}/pal_a1.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
