"""Pipeline jobs in mixed rounds: the stage program against flat-gang PAL, on measured variability.

Runs for about 25 s on the machine of the committed page (the page does not say; timed once under
``nice`` on 2026-12-07 at load 3.5-3.7 with the page's ``--shared ../shared``: 25 s); ``--rounds``
runs fewer.

A pipeline job runs at its slowest *stage* (stage time x the slowest factor among that stage's
GPUs), so a slow GPU costs nothing on a stage with slack.  The round program places the stages
(:mod:`pal_opt.ilp.stageround`, what ``solve_ilp`` runs when a round has pipeline jobs); PAL places
every job as a gang, ignoring stages, and its GPUs then run the stages in GPU-id order.

Clusters (measured variability, ``../shared/data/pal-artifact``):

* ``longhorn``: 16 servers x 4 GPUs, factors drawn from PAL's Longhorn measurements (classA <-
  ResNet-50, classB/C <- BERT, classD <- PageRank), a new draw per round;
* ``alloc32``: the real 32-GPU allocation of Blox's ``32gpu-variability.csv`` (8 nodes x 4),
  its measured factors.

(The PAL artifact's Frontera measurements are not among the shared files, so there is no
Frontera cluster here.)

Pipeline jobs: PipeDream partitions (``pal-opt partition``, the dynamic program, flat, 25 GB/s)
of vgg16 (class C, as PAL maps VGG) and gnmt (class B, a language model) on 4 and 8 GPUs, and
Sia's ``gpt_pmp`` (class B): a 2-stage pipeline per replica, 2 replicas (4 GPUs), and the 8-stage
RTX form (8 GPUs), whose stages are equal (the profile gives only whole-pipeline step times).
Each round: a queue of pipeline jobs and gangs (models of the Sia-Philly traces, 1-8 GPUs) that
fills the cluster's GPUs, in random order; every method places all of them.

Methods:

* ``pal``: PAL's placement, stages in GPU-id order (flat gang, the comparator);
* ``pal+map``: PAL's GPU sets, each pipeline's stages mapped best (slowest stage on the fastest
  GPUs): the gain of the stage map alone;
* ``ilp-gang``: the round program with the pipelines' stages hidden (gangs), stages mapped best
  afterwards: the gain of the exact set choice without stage awareness;
* ``stage``: the stage program (``solve_ilp`` on the round with its pipelines).

Speeds are measured on the raw (unbinned) factors, as the simulator runs jobs: speed =
1 / (pace factor x locality penalty).  Reported: the geometric-mean speed of the pipeline jobs,
of the gangs, and per pipeline model, over all rounds, and the stage program's solve time.

Outputs: ``pipeline_placement.md`` (tables), ``pipeline_placement.csv`` (one row per job, round
and method) and ``pipeline_placement.png``; they replace the committed ones in
``benchmarks/results/`` only with ``--update`` (see ``benchmarks/_results.py``).

Usage::

    nice -n 10 python benchmarks/pipeline_placement.py [--rounds 8] [--update] [--shared ../shared]
"""

from __future__ import annotations

import argparse
import csv
import math
import platform
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import add_output_arguments, at_least, output_dir, partial_run, produced_by, run_time, wrote  # noqa: E402

from pal_opt import solve  # noqa: E402
from pal_opt.binning import binned_factors  # noqa: E402
from pal_opt.cost import job_slowdown_pos, pace_factor  # noqa: E402
from pal_opt.generate import generate_instance  # noqa: E402
from pal_opt.ilp import solve_ilp  # noqa: E402
from pal_opt.ilp.stageround import best_stage_order  # noqa: E402
from pal_opt.io.measurements import longhorn_paths  # noqa: E402
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams  # noqa: E402
from pal_opt.pipeline.partition import partition  # noqa: E402
from pal_opt.pipeline.profile import load_profile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("pal", "pal+map", "ilp-gang", "stage")
#: Each method's colour and marker in the plot (ilp-gang and stage, the pair compared, as blue
#: and orange: a pair colour-blind readers can tell apart)
COLOURS = {"pal": "tab:grey", "pal+map": "tab:purple", "ilp-gang": "tab:blue", "stage": "tab:orange"}
MARKERS = {"pal": "o", "pal+map": "D", "ilp-gang": "s", "stage": "^"}
#: Gangs of the Sia-Philly traces: (model, class, demand weights over 1, 2, 4, 8 GPUs).
GANGS = (("resnet50", "classA"), ("BERT", "classB"), ("DCGAN", "classB"), ("vgg19", "classC"),
         ("PointNet", "classD"))
GANG_SIZES = (1, 2, 4, 8)
TIME_LIMIT = 120.0
HEADER = """# Pipeline jobs in mixed rounds: the stage program against flat-gang PAL

{command}.

{rounds} rounds on each cluster (`benchmarks/pipeline_placement.py`; its docstring gives the setup).{partial}
Each round fills the cluster: about half its GPUs in pipeline jobs (PipeDream partitions of vgg16
and gnmt on 4 and 8 GPUs, Sia's gpt_pmp as 2 stages x 2 replicas and as 8 stages), the rest
gangs of the Sia-Philly models.  Methods: `pal` (flat gang, stages in GPU-id order), `pal+map`
(PAL's sets, stages mapped best), `ilp-gang` (the round program with the stages hidden, then
mapped best), `stage` (the stage program, `solve_ilp` on the round as it is).  Speeds on the raw
measured factors; `n` counts jobs over all rounds.
"""


# --------------------------------------------------------------------------- inputs
def pipelines(shared: Path, sizes: tuple[int, ...] = (4, 8)) -> list[tuple[str, str, Pipeline]]:
    """``(name, class, pipeline)`` of every pipeline job kind (vgg16 and gnmt partitioned on each
    of ``sizes`` GPUs)."""
    out = []
    for model, perfclass in (("vgg16", "classC"), ("gnmt", "classB")):
        profile = load_profile(shared / "data" / "pipedream-profiles" / model / "graph.txt")
        for gpus in sizes:
            out.append((f"{model}-{gpus}", perfclass, partition(profile, [gpus], [25e9]).job_pipeline()))
    out.append(("gpt_pmp-2x2", "classB", Pipeline((1.0, 1.0), (2, 2))))  # 2 stages, 2 replicas (A100 form)
    out.append(("gpt_pmp-8", "classB", Pipeline((1.0,) * 8, (1,) * 8)))  # 8 stages (RTX form)
    return out


def longhorn_cluster(shared: Path, seed: int) -> Cluster:
    paths = longhorn_paths(shared / "data" / "pal-artifact" / "variability" / "longhorn")
    return generate_instance(16, 4, 1, seed=seed, measurements=paths).cluster


def allocation_cluster(shared: Path) -> Cluster:
    import pandas as pd

    df = pd.read_csv(shared / "data" / "pal-artifact" / "variability" / "32gpu-variability.csv")
    factors = {c: df[f"PerfVar_{c}"].to_numpy(dtype=float) for c in ("classA", "classB", "classC", "classD")}
    return Cluster.from_arrays(df["GPU_ID"].to_numpy(), df["Node_ID"].to_numpy(), factors)


def make_round(cluster: Cluster, kinds: list[tuple[str, str, Pipeline]], rng: np.random.Generator,
               label: str) -> tuple[RoundInstance, dict[Any, str]]:
    """A queue that fills the cluster: about half its GPUs in pipeline jobs, the rest gangs."""
    jobs: list[Job] = []
    names: dict[Any, str] = {}
    room = cluster.num_gpus
    while room > cluster.num_gpus // 2:
        fit = [k for k in kinds if k[2].gpus <= room - 4 or k[2].gpus == room]
        if not fit:
            break
        name, perfclass, pipe = fit[int(rng.integers(len(fit)))]
        jobs.append(Job(f"p{len(jobs)}", pipe.gpus, perfclass, pipeline=pipe))
        names[jobs[-1].id] = name
        room -= pipe.gpus
    while room > 0:
        size = min(int(rng.choice(GANG_SIZES, p=[0.4, 0.3, 0.2, 0.1])), room)
        model, perfclass = GANGS[int(rng.integers(len(GANGS)))]
        jobs.append(Job(f"g{len(jobs)}", size, perfclass, model=model))
        names[jobs[-1].id] = "gang"
        room -= size
    order = rng.permutation(len(jobs))
    queue = tuple(replace(jobs[k], position=i) for i, k in enumerate(order.tolist()))
    return RoundInstance(cluster, queue, RoundParams(), name=label), names


# --------------------------------------------------------------------------- the methods
def place(inst: RoundInstance) -> tuple[dict[str, dict[Any, tuple[int, ...]]], dict[str, Any]]:
    """Every method's placement (GPU lists in stage order) and the stage program's figures."""
    factors = binned_factors(inst.cluster, inst.params.binning)
    pos = inst.cluster.position

    def mapped(placements: dict[Any, tuple[int, ...]]) -> dict[Any, tuple[int, ...]]:
        return {j: best_stage_order(inst.job_by_id[j], g, factors[inst.job_by_id[j].perfclass], pos)
                for j, g in placements.items()}

    out: dict[str, dict[Any, tuple[int, ...]]] = {}
    pal = solve(inst, "pal").placements
    out["pal"] = {j: tuple(sorted(g)) for j, g in pal.items()}
    out["pal+map"] = mapped(out["pal"])
    gangs = RoundInstance(inst.cluster, tuple(replace(j, pipeline=None) for j in inst.jobs), inst.params)
    out["ilp-gang"] = mapped(dict(solve_ilp(gangs, time_limit=TIME_LIMIT, threads=1).placements))
    t0 = time.perf_counter()
    res = solve_ilp(inst, time_limit=TIME_LIMIT, threads=1)
    out["stage"] = dict(res.placements)
    figures = {"seconds": time.perf_counter() - t0, "status": res.status.value, "gap": res.gap,
               "vars": res.info.get("num_vars"), "rows": res.info.get("num_rows")}
    return out, figures


def speeds(inst: RoundInstance, placements: dict[Any, tuple[int, ...]]) -> dict[Any, tuple[float, float]]:
    """Per job on the raw factors (GPU lists in stage order): 1 / slowdown, and 1 / pace factor
    (the variability part alone, without the locality penalty)."""
    cl = inst.cluster
    out = {}
    for j, g in placements.items():
        job, pos = inst.job_by_id[j], cl.positions(g)
        values = cl.factors[job.perfclass]
        out[j] = (1.0 / job_slowdown_pos(cl, values, job, pos), 1.0 / pace_factor(job, values[pos]))
    return out


# --------------------------------------------------------------------------- the run
def run(shared: Path, rounds: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    kinds = pipelines(shared)
    rows: list[dict[str, Any]] = []
    solves: list[dict[str, Any]] = []
    alloc = allocation_cluster(shared)
    seen: dict[str, list[Cluster]] = {"longhorn": [], "alloc32": [alloc]}
    for r in range(rounds):
        for cname in ("longhorn", "alloc32"):
            rng = np.random.default_rng([r, 0 if cname == "longhorn" else 1])
            cluster = longhorn_cluster(shared, seed=1000 + r) if cname == "longhorn" else alloc
            if cname == "longhorn":
                seen[cname].append(cluster)
            inst, names = make_round(cluster, kinds, rng, f"{cname}-{r}")
            placed, figures = place(inst)
            solves.append({"cluster": cname, "round": r, **figures})
            for method in METHODS:
                for j, (v, p) in speeds(inst, placed[method]).items():
                    rows.append({"cluster": cname, "round": r, "method": method, "job": j, "kind": names[j],
                                 "gpus": inst.job_by_id[j].demand, "speed": v, "pace_speed": p,
                                 "servers": len({int(inst.cluster.server_of[q])
                                                 for q in inst.cluster.positions(placed[method][j])})})
            print(f"{cname} round {r}: stage program {figures['seconds']:.1f} s, {figures['status']}", file=sys.stderr)
    levels = {c: binned_levels(cls) for c, cls in seen.items()}
    return rows, solves, levels


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


#: What a cell of a job kind with no job on a cluster shows (a run of fewer rounds draws fewer kinds).
NOT_DRAWN = "—"


def table(rows: list[dict[str, Any]], key: str) -> list[str]:
    """Geometric means of ``key`` per cluster, job group and method, each over the jobs drawn
    (``n``); a kind drawn on one cluster only (a short ``--rounds`` run) shows :data:`NOT_DRAWN`
    on the other, with a footnote, rather than the ``nan`` of an empty mean."""
    by: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        group = "gang" if row["kind"] == "gang" else "pipeline"
        by[(row["cluster"], group, row["method"])].append(row[key])
        if group == "pipeline":
            by[(row["cluster"], row["kind"], row["method"])].append(row[key])
    lines = ["| cluster | jobs | n | " + " | ".join(METHODS) + " | stage vs pal |", "|---|---|---:|"
             + "---:|" * (len(METHODS) + 1)]
    missing = []
    for cluster in ("longhorn", "alloc32"):
        groups = ["pipeline", "gang"] + sorted({r["kind"] for r in rows if r["kind"] != "gang"})
        for group in groups:
            vals = {m: geomean(by[(cluster, group, m)]) for m in METHODS}
            n = len(by[(cluster, group, "pal")])
            if n == 0:
                missing.append(f"{group} on {cluster}")
            lines.append(f"| {cluster} | {group} | {n} | " + " | ".join(shown(vals[m], ".4f") for m in METHODS)
                         + f" | {shown(vals['stage'] / vals['pal'] - 1, '+.2%')} |")
    if missing:
        lines += ["", f"{NOT_DRAWN}: no such job was drawn in the rounds run ({', '.join(missing)}); every "
                  "mean is over the jobs drawn (`n`), and the pipeline rows over the kinds drawn."]
    return lines


def shown(value: float, spec: str) -> str:
    """``value`` formatted by ``spec``, or :data:`NOT_DRAWN` when it is the ``nan`` of no jobs."""
    return NOT_DRAWN if math.isnan(value) else format(value, spec)


def reading(rows: list[dict[str, Any]], kinds: list[tuple[str, str, Pipeline]], levels: dict[str, str]) -> list[str]:
    """What the tables say, with the figures that explain it."""
    def g(cluster: str, method: str, key: str) -> float:
        return geomean([r[key] for r in rows if r["cluster"] == cluster and r["kind"] != "gang"
                        and r["method"] == method])

    out = ["## Reading", ""]
    for cluster in ("longhorn", "alloc32"):
        pal, gang, stage = (g(cluster, m, "speed") for m in ("pal", "ilp-gang", "stage"))
        vpal, vgang, vstage = (g(cluster, m, "pace_speed") for m in ("pal", "ilp-gang", "stage"))
        small = {m: [r["servers"] > 1 for r in rows if r["cluster"] == cluster and r["kind"] != "gang"
                     and r["gpus"] <= 4 and r["method"] == m] for m in ("pal", "stage")}
        spread = (f"{sum(small['pal'])} of {len(small['pal'])} under PAL, {sum(small['stage'])} of "
                  f"{len(small['stage'])} under the stage program" if small["pal"] else
                  f"{NOT_DRAWN} (none was drawn in the rounds run)")
        out.append(f"* **{cluster}**: the stage program gives the pipeline jobs {shown(stage / pal - 1, '+.1%')} "
                   f"geometric-mean speed over flat-gang PAL: {shown(gang / pal - 1, '+.1%')} from choosing the GPU "
                   f"sets exactly (the round program with the stages hidden, `ilp-gang`) and "
                   f"{shown(stage / gang - 1, '+.1%')} more from placing the stages.  Pipelines of at most 4 GPUs "
                   f"spread over servers (paying the locality penalty 1.7): {spread}.  The variability part alone "
                   f"(1 / pace): {shown(vstage / vpal - 1, '+.2%')} over PAL, {shown(vstage / vgang - 1, '+.2%')} "
                   f"over `ilp-gang`.  PAL's binned factors there: {levels[cluster]}.")
    slack = "; ".join(f"{name} {', '.join(f'{t / max(p.stage_times):.2f}x{r}' for t, r in zip(p.stage_times, p.replicas, strict=True))}"
                      for name, _, p in kinds)
    out += ["", "Why the stage gain is small:", "",
            "* A slow GPU is free only on a stage with slack, and PipeDream's partitions are balanced: "
            f"stage times relative to the slowest, x replicas: {slack}.  The gpt_pmp stages are equal "
            "(the profile gives whole-pipeline step times only), so for them the stage program can only "
            "match a gang placement.",
            "* The measured variability is mostly small: PAL's binning leaves a few factor levels, most "
            "GPUs at the median level, the slow ones rare (Longhorn) or absent (the 32-GPU allocation: "
            "every factor within a few percent of the median).",
            "* 8-GPU pipelines span two 4-GPU servers whatever the method, and the locality penalty "
            "(1.7) dwarfs the variability: their speed is near 1 / 1.7 = 0.59 under every method.",
            "* The program minimises the whole round's cost on PAL's *binned* factors; the speeds are "
            "measured on the raw ones, and a single model's pipelines can come out slightly slower "
            "(negative entries) when the program gives a better GPU to another job.",
            "", "Job completion times with pipeline jobs in simulation: `pipeline_sim.md` "
            "(`benchmarks/pipeline_sim.py`).", ""]
    return out


def binned_levels(clusters: list[Cluster]) -> str:
    """PAL's binned factors of the pipelines' classes (B and C share the BERT measurements) over
    the clusters: the range of the levels at most 1.05, the levels above, and the share of GPUs
    there."""
    low: list[float] = []
    high: set[float] = set()
    slow = []
    for cl in clusters:
        f = np.round(binned_factors(cl, "pal-artifact")["classB"], 3)
        low += f[f <= 1.05].tolist()
        high |= set(f[f > 1.05].tolist())
        slow.append(float(np.mean(f > 1.05)))
    text = f"classB/C levels {min(low):.3f}-{max(low):.3f}"
    if not high:
        return text + ", no GPU above 1.05"
    return text + (f", and outlier levels {min(high):.2f}-{max(high):.2f} on {100 * float(np.mean(slow)):.1f} % of "
                   "the GPUs")


def tables(rows: list[dict[str, Any]], solves: list[dict[str, Any]]) -> str:
    lines = ["## Geometric-mean speed (1 / (pace factor x locality penalty), raw factors)", ""]
    lines += table(rows, "speed")
    lines += ["", "## Variability alone: geometric-mean 1 / pace factor", ""]
    lines += table(rows, "pace_speed")
    secs = [s["seconds"] for s in solves]
    proven = sum(s["status"] == "optimal" for s in solves)
    built = [s["vars"] for s in solves if s["vars"] is not None]  # (none: the start met the jobs-alone bound)
    unbuilt = f"; {len(solves) - len(built)} needed no program (the start met the jobs-alone bound)" if len(
        built) < len(solves) else ""
    lines += ["", f"Stage program: {len(solves)} rounds, {proven} proven optimal, solve time median "
              f"{float(np.median(secs)):.1f} s, max {max(secs):.1f} s (HiGHS, one thread, limit {TIME_LIMIT:.0f} s); "
              + (f"columns {min(built)}-{max(built)}" if built else "no program built") + f"{unbuilt}."]
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Top: geometric-mean speed per job kind and method.  Bottom: the variability part alone
    (1 / pace factor), as the change from PAL's."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    kinds = sorted({r["kind"] for r in rows if r["kind"] != "gang"}) + ["gang"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 7), sharex=True)
    width = 0.8 / len(METHODS)
    for col, cluster in enumerate(("longhorn", "alloc32")):
        def mean(kind: str, method: str, key: str, cluster: str = cluster) -> float:
            return geomean([r[key] for r in rows if r["cluster"] == cluster and r["kind"] == kind
                            and r["method"] == method])

        for k, method in enumerate(METHODS):
            x = np.arange(len(kinds)) + (k - (len(METHODS) - 1) / 2) * width
            # points: bars on an axis cut at 0.5 drew a 28 % difference as 1.8x
            axes[0, col].plot(x, [mean(kind, method, "speed") for kind in kinds], MARKERS[method],
                              color=COLOURS[method], ms=7, label=method)
            gain = [100 * (mean(kind, method, "pace_speed") / mean(kind, "pal", "pace_speed") - 1) for kind in kinds]
            axes[1, col].bar(x, gain, width, color=COLOURS[method], label=method)
        axes[0, col].axhline(1.0, color="k", linewidth=0.8)
        axes[0, col].grid(True, axis="y", alpha=0.3)
        axes[0, col].set_title(f"{cluster}: speed = 1 / (pace x locality), geometric mean", fontsize=9)
        axes[1, col].axhline(0, color="k", linewidth=0.8)
        axes[1, col].set_title(f"{cluster}: variability alone, 1 / pace: change from pal (%)", fontsize=9)
        axes[1, col].set_xticks(range(len(kinds)), kinds, rotation=30, ha="right", fontsize=8)
    axes[0, 0].set_ylabel("speed on raw factors")
    axes[1, 0].set_ylabel("%")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(labels))  # clear of the data
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--rounds", type=int, default=8, help="rounds per cluster (default 8)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared",
                    help="the shared data directory (default ../shared)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "rounds")
    if not (args.shared / "data" / "pal-artifact").is_dir():
        print(f"pipeline_placement: shared data not found at {args.shared}", file=sys.stderr)
        return 2
    out = output_dir(args, "pipeline_placement",  # other round counts are not the committed page's rounds
                     partial=partial_run(ap, args, "rounds"))
    rows, solves, levels = run(args.shared, args.rounds)
    default = ap.get_default("rounds")
    partial = f"  A partial run: the committed page has {default} rounds." if args.rounds != default else ""
    with open(out / "pipeline_placement.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(rows, out / "pipeline_placement.png")
    text = "\n".join([HEADER.format(rounds=args.rounds, partial=partial, command=produced_by(__file__, argv)), *reading(rows, pipelines(args.shared), levels),
                      tables(rows, solves)])
    (out / "pipeline_placement.md").write_text(f"{text}\n\nMachine: {platform.processor() or platform.machine()}, "
                                                f"Python {platform.python_version()}\n\n![speed per job kind and method, and the variability part as the change from pal](pipeline_placement.png)\n", encoding="utf-8")
    print(text)
    wrote("pipeline_placement", out / "pipeline_placement.md", out / "pipeline_placement.csv",
          out / "pipeline_placement.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
