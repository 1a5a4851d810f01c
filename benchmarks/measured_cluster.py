"""PAL's real 32-GPU allocation: the artifact's traces on measured factors, against drawn ones.

Runs for about 3 min on the machine of the committed page (its own total: 175 s); ``--workloads``
runs fewer.

The PAL artifact ships the Blox ``gpu_df`` of a real 32-GPU allocation (8 nodes × 4 GPUs) with
each GPU's measured slowdown per application class (``variability/32gpu-variability.csv``).
``pal-opt import blox --gpus`` reads it as a cluster (servers, factors, device numbers) and
``pal-opt simulate --cluster`` replays a trace on exactly that.  This benchmark replays the
artifact's six Sia-Philly workloads on it under PAL, PM-First, Packed and the integer program
(``ilp``, HiGHS, 10 s per round), and on the same 8 × 4 shape with

* every factor 1.0 (*nominal*: what the locality penalty alone costs), and
* factors drawn from PAL's Longhorn measurements (numpy draw, seed 0), the source every other
  simulation in ``benchmarks/`` uses,

so that a reader sees how much the measured allocation's variability moves the policies, and how
it compares with one draw of factors.  FIFO, 360 s rounds, λ = 1.7, no restart cost.  Every run
is deterministic.  Jobs larger than the 32 GPUs (48-GPU jobs in workloads 2, 3, 5 and 6) are
unplaceable and left out, the same ones under every policy and source; the page lists them, and
every other job must finish (the script fails otherwise).

Usage::

    nice -n 10 python benchmarks/measured_cluster.py [--workloads 1 2 3 4 5 6] [--update]

Writes ``measured_cluster.md`` and ``measured_cluster.png`` (needs matplotlib; three panels: what
the measured and the drawn factors cost PAL, and each policy against Packed on both) to
``benchmarks/results/`` with ``--update``, else to the scratch directory
(:mod:`benchmarks._results`).  Skips (exit 0) when ``../shared`` is absent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import add_output_arguments, check_values, output_dir, package_versions, produced_by, run_time  # noqa: E402
from pal_lambda import machine  # noqa: E402

from pal_opt.io import load_blox  # noqa: E402
from pal_opt.io.traces import read_trace  # noqa: E402
from pal_opt.model import Cluster  # noqa: E402
from pal_opt.simulate import SimConfig, build_cluster, parse_cluster, simulate  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "pal-artifact"
GPU_DF = SHARED / "variability" / "32gpu-variability.csv"
TRACES = SHARED / "traces"
LONGHORN = SHARED / "variability" / "longhorn"
os.environ.setdefault("PAL_OPT_SHARED", str(ROOT.parent / "shared"))  # the drawn factors' Longhorn files
ALL_WORKLOADS = [1, 2, 3, 4, 5, 6]
POLICIES = ("pal", "pmfirst", "packed", "ilp")
SOURCES = ("measured", "nominal", "drawn")


def clusters() -> tuple[dict[str, Cluster], dict[str, str]]:
    """The measured allocation, and the same shape with nominal and with drawn factors; and the
    file each class of the drawn factors came from."""
    measured = load_blox(GPU_DF, None).cluster
    shape = parse_cluster(f"{measured.num_servers}x{int(measured.server_sizes.max())}")
    drawn, origins = build_cluster(shape, seed=0)
    if any(o == "synthetic" for o in origins.values()):
        raise SystemExit(f"measured_cluster: the drawn factors fell back to the synthetic model ({origins})")
    nominal = Cluster.uniform(shape.servers, shape.gpus_per_server,
                              {c: np.ones(shape.num_gpus) for c in measured.factors})
    return {"measured": measured, "nominal": nominal, "drawn": drawn}, origins


def spread(cluster: Cluster) -> str:
    """Per class, the range of the factors: ``classA 0.99–1.02``."""
    return ", ".join(f"{c} {float(f.min()):.3f}–{float(f.max()):.3f}" for c, f in cluster.factors.items())


def run(workload: int, source: str, cluster: Cluster, policy: str) -> dict[str, Any]:
    trace = read_trace(TRACES / f"workload-{workload}.csv")
    cfg = SimConfig(policy=policy, backend="highs" if policy == "ilp" else None,
                    time_limit=10.0 if policy == "ilp" else None)
    t0 = time.perf_counter()
    res = simulate(trace, cluster, cfg)
    s = res.summary
    if s["n_completed"] + len(res.unplaceable) != len(trace):
        raise SystemExit(f"measured_cluster: workload-{workload} {source} {policy}: {s['n_completed']} of "
                         f"{len(trace)} jobs finished")
    return {"workload": workload, "source": source, "policy": policy, "avg_jct_h": s["avg_jct"] / 3600,
            "n_jobs": len(trace), "unplaceable": sorted(res.unplaceable),
            "p99_jct_h": s["p99_jct"] / 3600, "queueing_h": s["avg_queueing_delay"] / 3600,
            "slowdown": s["gpu_weighted_slowdown"], "wall_s": time.perf_counter() - t0}


def report(rows: list[dict[str, Any]], meta: dict[str, Any], spreads: dict[str, str], workloads: list[int],
           origins: dict[str, str]) -> str:
    at = {(r["workload"], r["source"], r["policy"]): r for r in rows}
    dropped = {w: at[(w, "measured", "pal")]["unplaceable"] for w in workloads}
    if any(r["unplaceable"] != dropped[r["workload"]] for r in rows):
        raise SystemExit("measured_cluster: the unplaceable jobs differ between runs of one workload")
    names = ", ".join(f"workload-{w}" for w in workloads)
    lines = [
        "# PAL's real 32-GPU allocation: measured factors against nominal and drawn ones",
        "",
        f"{meta['command']} on {meta['date']} at commit {meta['commit']}.",
        "",
        f"Machine: {meta['cpu']}; {meta['platform']}; {meta['python']}; {package_versions()}. Shared with other "
        f"work, niced; {meta['elapsed']:.0f} s in all.",
        "",
        f"The PAL artifact's Sia-Philly workloads ({names}; {at[(workloads[0], 'measured', 'pal')]['n_jobs']} jobs "
        "each) on 8 nodes × 4 GPUs, FIFO, 360 s rounds, λ = 1.7, no restart cost; `ilp` on HiGHS with a 10 s "
        "limit per round.  Jobs of more than 32 GPUs cannot run and are left out of every figure: "
        + ("; ".join(f"workload-{w}: {', '.join(map(str, d))}" for w, d in dropped.items() if d) or "none")
        + " (job ids; the same under every policy and source).  Factors per source (min–max per class):",
        "",
        *[f"- **{src}**: {spreads[src]}" for src in SOURCES],
        "",
        "*measured*: the artifact's `32gpu-variability.csv` (a Blox `gpu_df` of a real allocation), read by "
        "`load_blox(GPU_DF, None)` and simulated as `pal-opt simulate TRACE --cluster` does; *nominal*: every "
        "factor 1.0; *drawn*: one numpy draw (seed 0) from PAL's Longhorn measurements ("
        + ", ".join(f"{c} {Path(f).name}" for c, f in origins.items()) + "); one draw is one sample of "
        "the measurements, and another seed gives other figures.  The queue is long on 32 GPUs (most of each "
        "JCT is queueing).",
        "",
        "## Average JCT (h)",
        "",
        "| workload | factors | " + " | ".join(POLICIES) + " | avg queueing (h, pal) |",
        "|---|---|" + "---:|" * len(POLICIES) + "---:|",
    ]
    for w in workloads:
        for src in SOURCES:
            cells = [f"{at[(w, src, p)]['avg_jct_h']:.2f}" for p in POLICIES]
            lines.append(f"| workload-{w} | {src} | " + " | ".join(cells) + f" | {at[(w, src, 'pal')]['queueing_h']:.2f} |")
    lines += ["", "## Against Packed (average JCT over Packed's on the same factors; geometric mean over the "
              "workloads, and their range)", "",
              "| factors | " + " | ".join(p for p in POLICIES if p != "packed") + " |",
              "|---|" + "---:|" * (len(POLICIES) - 1)]
    for src in SOURCES:
        cells = []
        for p in POLICIES:
            if p == "packed":
                continue
            ratios = [at[(w, src, p)]["avg_jct_h"] / at[(w, src, "packed")]["avg_jct_h"] for w in workloads]
            cells.append(f"{statistics.geometric_mean(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f})")
        lines.append(f"| {src} | " + " | ".join(cells) + " |")
    lines += ["", "## What the factors cost (PAL's average JCT over the nominal cluster's)", "",
              "| workload | measured | drawn |", "|---|---:|---:|"]
    for w in workloads:
        base = at[(w, "nominal", "pal")]["avg_jct_h"]
        lines.append(f"| workload-{w} | {at[(w, 'measured', 'pal')]['avg_jct_h'] / base:.3f} "
                     f"| {at[(w, 'drawn', 'pal')]['avg_jct_h'] / base:.3f} |")
    cost = {src: [at[(w, src, "pal")]["avg_jct_h"] / at[(w, "nominal", "pal")]["avg_jct_h"] - 1 for w in workloads]
            for src in ("measured", "drawn")}
    best = {src: [min(at[(w, src, p)]["avg_jct_h"] for p in POLICIES) / at[(w, src, "packed")]["avg_jct_h"] - 1
                  for w in workloads] for src in ("measured", "drawn")}
    lines += ["", f"The measured allocation's factors cost PAL {min(cost['measured']):.1%}–{max(cost['measured']):.1%} "
              f"of average JCT over the nominal cluster (the drawn ones {min(cost['drawn']):.1%}–"
              f"{max(cost['drawn']):.1%}): on a queue this long a slower gang holds its GPUs longer and every job "
              f"behind it waits.  Placement wins back little of it: the best policy is "
              f"{-max(best['measured']):.1%}–{-min(best['measured']):.1%} below Packed on the measured factors "
              f"({-max(best['drawn']):.1%}–{-min(best['drawn']):.1%} on the drawn ones)."]
    walls = [r["wall_s"] for r in rows if r["policy"] == "ilp"]
    lines += ["", f"Wall time per whole-trace run: `ilp` median {statistics.median(walls):.1f} s, the greedy "
              f"policies median {statistics.median(r['wall_s'] for r in rows if r['policy'] != 'ilp'):.2f} s.",
              "", "![measured cluster](measured_cluster.png)"]
    return "\n".join(lines) + "\n"


def figure(rows: list[dict[str, Any]], workloads: list[int], path: Path) -> bool:
    """Three panels, bars drawn from 1.0: what the factors cost PAL (average JCT over the nominal
    cluster's), and on measured and on drawn factors each policy's average JCT over Packed's."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("measured_cluster: no matplotlib: no figure", file=sys.stderr)
        return False
    at = {(r["workload"], r["source"], r["policy"]): r["avg_jct_h"] for r in rows}
    x = np.arange(len(workloads))
    panels = [("what the factors cost PAL\n(average JCT / nominal cluster's)",
               {src: [at[(w, src, "pal")] / at[(w, "nominal", "pal")] for w in workloads]
                for src in ("measured", "drawn")})]
    for src in ("measured", "drawn"):
        panels.append((f"{src} factors: average JCT / Packed's",
                       {p: [at[(w, src, p)] / at[(w, src, "packed")] for w in workloads]
                        for p in POLICIES if p != "packed"}))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.6))
    for ax, (title, series) in zip(axes, panels, strict=True):
        width = 0.8 / len(series)
        for k, (label, ratios) in enumerate(series.items()):
            ax.bar(x + (k - (len(series) - 1) / 2) * width, np.asarray(ratios) - 1.0, width, bottom=1.0, label=label)
        values = [v for r in series.values() for v in r] + [1.0]
        pad = 0.1 * (max(values) - min(values)) + 0.002
        ax.set_ylim(min(values) - pad, max(values) + pad)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(x, [f"w{w}" for w in workloads])
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle("The PAL artifact's workloads on its real 32-GPU allocation (8 × 4)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--workloads", type=int, nargs="+", default=ALL_WORKLOADS,
                    help="the artifact's workload numbers (default 1-6; a subset cannot --update)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    check_values(ap, "--workloads", args.workloads, lambda w: w in ALL_WORKLOADS,
                 "the artifact's workloads are numbered 1-6")
    if not GPU_DF.is_file() or not TRACES.is_dir() or not LONGHORN.is_dir():
        print(f"measured_cluster: skipped: {GPU_DF}, {TRACES} or {LONGHORN} not found", file=sys.stderr)
        return 0
    out = output_dir(args, "measured_cluster",
                     partial=None if sorted(args.workloads) == ALL_WORKLOADS else "--workloads")
    t0 = time.perf_counter()
    cls, origins = clusters()
    rows = []
    for w in args.workloads:
        for src in SOURCES:
            for policy in POLICIES:
                rows.append(run(w, src, cls[src], policy))
                print(f"measured_cluster: workload-{w} {src} {policy}: avg JCT {rows[-1]['avg_jct_h']:.2f} h",
                      file=sys.stderr)
    meta = {**machine(), "elapsed": time.perf_counter() - t0, "command": produced_by(__file__, argv, date=False, commit=False)}
    figure(rows, args.workloads, out / "measured_cluster.png")
    (out / "measured_cluster.md").write_text(report(rows, meta, {s: spread(c) for s, c in cls.items()},
                                                    args.workloads, origins))
    print(f"measured_cluster: wrote {out / 'measured_cluster.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
