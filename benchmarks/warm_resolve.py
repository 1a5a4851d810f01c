"""Warm re-solve (issue 15): a round 5 % of whose jobs changed, solved cold and warm-started from the last.

Runs for about 1 min on the machine of the committed page (the page does not say; timed once under
``nice`` on 2026-12-07 at load 3.5-4.4: 64 s, and the cold and warm solves in ``warm_resolve.json``
add up to 65 s); ``--sizes``, ``--seeds`` and ``--rounds`` run fewer.

Sequences: round 0 is the large-round benchmark's (:mod:`scale_large`: 8 GPUs per server, 0.29
queued jobs per GPU, λ = 1.7, Longhorn measurements from ``../shared``; synthetic Longhorn-like
factors when absent), seeds 0, 1, 2.  Each next round: 5 % of the queue's jobs finish (drawn
at random, seeded; their GPUs are free again) and as many new jobs arrive at the queue's tail
(drawn from the Sia-Philly mix); the cluster is the same.

Every round is solved in this process twice, one after the other, with the same options
(``method="ilp"``, HiGHS, ``gap=0.005``, prefix admission): cold (no state) and warm (one
:class:`pal_opt.WarmStart` carried along the sequence; round 0 fills it and is not counted).
Reported per round: both wall times, the ratio, both objectives, gaps and bounds, the path
(flow-free bound, or the round program when that bound was not within the gap), how the LP
started and that both placements pass :func:`pal_opt.check.check`.  The summary gives medians
over the changed rounds of every seed, and ``warm_resolve.png`` the time of every round, cold
and warm, per size and seed.  The machine is shared: the load average is recorded.

Usage::

    python benchmarks/warm_resolve.py [--update | --out-dir DIR] [--sizes 8192,2048] [--seeds 3] [--rounds 10]
    python benchmarks/warm_resolve.py --plot-only [--update | --out-dir DIR]   # the figure from the committed json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import (  # noqa: E402
    RESULTS,
    add_output_arguments,
    add_plot_only_argument,
    at_least,
    check_values,
    output_dir,
    plot_only,
    produced_by,
    run_time,
    split_list,
)
from suite import factor_source, machine, measurements  # noqa: E402

JOBS_PER_GPU = 0.29
CHANGE = 0.05
GAP = 0.005


def first_round(gpus: int, seed: int) -> Any:
    from pal_opt.generate import generate_instance

    nodes, jobs = gpus // 8, round(gpus * JOBS_PER_GPU)
    return generate_instance(nodes, 8, jobs, seed=seed, locality_penalty=1.7, measurements=measurements(),
                             name=f"warm-{nodes}x8-j{jobs}-s{seed}")


def next_round(inst: Any, seed: int, k: int) -> Any:
    """5 % of the jobs finish, as many arrive (ids never reused), seeded by (seed, k)."""
    import numpy as np

    from pal_opt.generate import sample_jobs
    from pal_opt.model import RoundInstance

    rng = np.random.default_rng([seed, k])
    jobs = list(inst.jobs)
    n = round(CHANGE * len(jobs))
    gone = set(rng.choice(len(jobs), n, replace=False).tolist())
    new = sample_jobs(n, rng, locality_penalty=1.7, max_demand=48)
    queue = [j for i, j in enumerate(jobs) if i not in gone] + [replace(j, id=k * 1_000_000 + j.id) for j in new]
    return RoundInstance(inst.cluster, tuple(replace(j, position=i) for i, j in enumerate(queue)), inst.params,
                         name=inst.name)


def _timed(inst: Any, warm: Any) -> tuple[Any, float]:
    from pal_opt import solve

    t0 = time.perf_counter()
    res = solve(inst, "ilp", backend="highs", gap=GAP, warm=warm)
    return res, time.perf_counter() - t0


def run_sequence(gpus: int, seed: int, rounds: int) -> list[dict[str, Any]]:
    from pal_opt import WarmStart, check

    ws = WarmStart()
    inst = first_round(gpus, seed)
    rows = []
    for k in range(rounds + 1):
        if k:
            inst = next_round(inst, seed, k)
        load = os.getloadavg()[0]
        cold, tc = _timed(inst, None)
        warm, tw = _timed(inst, ws)
        info = warm.info
        rows.append({"gpus": gpus, "seed": seed, "round": k, "load": load, "cold_s": tc, "warm_s": tw,
                     "ratio": tc / tw, "cold_objective": cold.objective, "warm_objective": warm.objective,
                     "cold_gap": cold.gap, "warm_gap": warm.gap, "cold_bound": cold.bound, "warm_bound": warm.bound,
                     "path": "flow-free" if str(info.get("solver_status", "")).endswith("flow-free relaxation")
                     else "program", "cold_start": cold.info.get("start_source"),
                     "warm_start": info.get("start_source"), "warm": info.get("warm"),
                     "lp_start": info.get("relaxation_start"),
                     "valid": not check(inst, cold) and not check(inst, warm)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.3f} %"


#: The page's figure (:func:`plot`), after the summary.
FIGURE = "warm_resolve.png"
FIGURE_LINK = (f"![time per round, cold and warm-started, of every seed's sequence at each size; round 0 "
               f"fills the warm state]({FIGURE})")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """The rounds' solve times, cold and warm, one panel per size (largest first): a line per
    seed's sequence, round 0 (which only fills the warm state) shaded, on a log axis of seconds,
    with each panel's median ratio over the changed rounds in its title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["gpus"] for r in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4), squeeze=False, sharey=True)
    for ax, g in zip(axes[0], sizes, strict=True):
        seq = [r for r in rows if r["gpus"] == g]
        for i, seed in enumerate(sorted({r["seed"] for r in seq})):
            rs = sorted((r for r in seq if r["seed"] == seed), key=lambda r: r["round"])
            x = [r["round"] for r in rs]
            ax.plot(x, [r["cold_s"] for r in rs], "o--", color="C0", mfc="none", lw=1,
                    label="cold" if i == 0 else None)
            ax.plot(x, [r["warm_s"] for r in rs], "s-", color="C1", lw=1, label="warm (WarmStart)" if i == 0 else None)
        ax.axvspan(-0.5, 0.5, color="0.9", zorder=0)
        changed = [r["ratio"] for r in seq if r["round"] > 0]
        ratio = f"median cold / warm {statistics.median(changed):.2f}" if changed else "round 0 only"
        paths = " and ".join(sorted({r["path"] for r in seq if r["round"] > 0}))
        ax.set_title(f"{g:,} GPUs ({paths or '-'} path): {ratio}", fontsize="medium")
        ax.set_yscale("log")
        ax.set_xlabel("round (0: fills the warm state)")
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("solve s (one process)")
    fig.suptitle(f"pal_opt.solve(round, \"ilp\", backend=\"highs\", gap={GAP}) after {CHANGE:.0%} of the jobs changed, "
                 "one line per seed", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(rows: list[dict[str, Any]], command: str) -> list[str]:
    lines = ["# Warm re-solve: 5 % of the jobs changed since the last round", "", f"{command}.", "", "Machine:", "",
             *machine(), "",
             f"Rounds: generated, 8 GPUs per server, {JOBS_PER_GPU} queued jobs per GPU, λ = 1.7, "
             f"{factor_source()}; each next round: {CHANGE:.0%} of the jobs finish, as many arrive.  Both solves: "
             f"`pal_opt.solve(round, \"ilp\", backend=\"highs\", gap={GAP})` in one process, cold then warm "
             "(a `pal_opt.WarmStart` carried along the sequence).  Round 0 only fills the warm state and "
             "is left out of the summary.", "",
             "## Summary (medians over the changed rounds of every seed)", "",
             "| GPUs | rounds | median cold s | median warm s | median ratio | ratio of medians | "
             "flow-free rounds | median ratio there | warm no costlier | max gap cold | max gap warm | valid |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for g in sorted({r["gpus"] for r in rows}, reverse=True):
        rs = [r for r in rows if r["gpus"] == g and r["round"] > 0]
        ff = [r for r in rs if r["path"] == "flow-free"]
        mc, mw = statistics.median(r["cold_s"] for r in rs), statistics.median(r["warm_s"] for r in rs)
        no_worse = sum(r["warm_objective"] <= r["cold_objective"] + 1e-9 for r in rs)
        lines.append(
            f"| {g:,} | {len(rs)} | {mc:.3f} | {mw:.3f} | {statistics.median(r['ratio'] for r in rs):.2f} | "
            f"{mc / mw:.2f} | {len(ff)} | {statistics.median(r['ratio'] for r in ff) if ff else float('nan'):.2f} | "
            f"{no_worse}/{len(rs)} | {_pct(max(r['cold_gap'] or 0 for r in rs))} | "
            f"{_pct(max(r['warm_gap'] or 0 for r in rs))} | {'yes' if all(r['valid'] for r in rs) else 'NO'} |")
    lines += ["", FIGURE_LINK, "", "## Rounds", "",
              "| GPUs | seed | round | load | cold s | warm s | ratio | path | cold gap | warm gap | "
              "warm − cold objective | bound difference | warm start | LP start |",
              "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        bd = None if r["cold_bound"] is None or r["warm_bound"] is None else r["warm_bound"] - r["cold_bound"]
        lines.append(f"| {r['gpus']:,} | {r['seed']} | {r['round']} | {r['load']:.1f} | {r['cold_s']:.3f} | "
                     f"{r['warm_s']:.3f} | {r['ratio']:.2f} | {r['path']} | {_pct(r['cold_gap'])} | "
                     f"{_pct(r['warm_gap'])} | {r['warm_objective'] - r['cold_objective']:+.4f} | "
                     f"{'–' if bd is None else f'{bd:+.1e}'} | {r['warm_start']} | {r['lp_start'] or '–'} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--sizes", default="8192,2048",
                    help="comma-separated GPU counts, multiples of 8 (default 8192,2048)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per size (default 3)")
    ap.add_argument("--rounds", type=int, default=10, help="rounds re-solved after the first (default 10)")
    add_plot_only_argument(ap, FIGURE, "warm_resolve.json")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    if args.plot_only:
        drawn = plot_only(ap, args, "warm_resolve", FIGURE,
                          lambda path: plot(json.loads((RESULTS / "warm_resolve.json").read_text()), path))
        print(f"wrote {drawn}")
        return 0
    sizes = split_list(ap, "--sizes", args.sizes, expected="comma-separated GPU counts (multiples of 8)")
    check_values(ap, "--sizes", sizes, lambda g: g >= 8 and g % 8 == 0, "GPU counts are positive multiples of 8")
    at_least(ap, args, 1, "seeds", "rounds")
    partial = None if set(sizes) >= {8192, 2048} and args.seeds >= 3 and args.rounds >= 10 else "partial (fewer sizes, seeds or rounds)"
    out = output_dir(args, "warm_resolve", partial=partial)
    rows = [row for g in sizes for seed in range(args.seeds) for row in run_sequence(g, seed, args.rounds)]
    (out / "warm_resolve.md").write_text("\n".join(report(rows, produced_by(__file__, argv))) + "\n")
    (out / "warm_resolve.json").write_text(json.dumps(rows, indent=1) + "\n")
    plot(rows, out / FIGURE)
    print(f"wrote {out / 'warm_resolve.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
