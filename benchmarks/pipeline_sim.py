"""Pipeline jobs in simulation: job completion times under the stage program and flat-gang PAL.

Runs for about 2 min on the machine of the committed page (its own total: 110 s; with
``--restart-cost 30`` about 30 s, ``pipeline_sim_restart.md``: 31 s); ``--traces`` and ``--jobs``
run less.

The trace simulator (``pal-opt simulate``) replays a trace whose ``pipeline`` column gives some
jobs pipeline stages (:mod:`pal_opt.io.traces`); a pipeline job advances each round at the pace
of its slowest stage (stage time x the slowest factor among that stage's GPUs, raw factors) times
the locality penalty of the level its GPUs span, as the round program prices it.

The trace: a Sia-Philly trace of the PAL paper (``../shared/data/pal-artifact/traces``), its
arrivals, GPU counts and models, with

* every 4- and 8-GPU job made a pipeline job with probability 1/2 (seeded), of a kind of that
  size drawn uniformly: PipeDream partitions (``pal-opt partition``, the dynamic program, flat,
  25 GB/s) of vgg16 (class C) and gnmt (class B) on 4 and 8 GPUs, and Sia's ``gpt_pmp``
  (class B) as 2 stages x 2 replicas (4 GPUs) or 8 stages (8 GPUs) -- the kinds of
  ``benchmarks/pipeline_placement.py``; it keeps its ideal run time (iterations x seconds per
  iteration on median GPUs), written as that many iterations of one second;
* every job's ideal run time capped at ``--cap`` hours (default 3; the traces' longest jobs
  run 20-140 h, which alone would set the simulation's length) -- the one change to the jobs;
* the first ``--jobs`` jobs (default: all 160) of the trace.

The trace is written as a CSV (``pipeline_sim_<trace>.csv``, the ``pipeline`` column included)
and read back through :func:`pal_opt.io.traces.read_trace`, as ``pal-opt simulate`` reads it;
to replay one from the command line, name the pipeline models' classes::

    pal-opt simulate benchmarks/results/pipeline_sim_workload-1.csv --cluster 16x4 --policy pal \
        --model-class vgg16=classC,gnmt=classB,gpt_pmp=classB --out run.json

The cluster: 16 servers x 4 GPUs with factors drawn from PAL's Longhorn measurements
(``../shared/data/pal-artifact/variability/longhorn``; classA <- ResNet-50, classB/C <- BERT,
classD <- PageRank), one draw per ``--draws`` seed.  FIFO queue, 360 s rounds, lambda = 1.7, prefix
admission (the PAL artifact's: both methods admit the same jobs each round, so the difference is
where they put them).

Methods: ``pal`` (PAL: every job a flat gang, a pipeline's stages run on its GPUs in the order
PAL lists them), ``ilp-gang`` (the round program with every pipeline's stages hidden, registered
here through :func:`pal_opt.register_method`: the exact set choice without the stage map) and
``ilp`` (``solve_ilp``: the stage program whenever an admitted job is a pipeline).  The programs:
HiGHS, one thread, 10 s per round.  Reported: the average JCT of the pipeline jobs, of the gangs
and of all jobs, per trace and draw, and the ratio ilp / pal.

With ``--restart-cost S`` (seconds lost per GPU of a running job that is moved, stages re-mapped
included, or resumed; default 0) every method runs under that charge: the programs price it
(keep variables, ``formulations/pipeline_round.md`` §7) and PAL does not, and the outputs are
named ``pipeline_sim_restart`` instead of ``pipeline_sim``, with the moves and restarts per job.

Outputs: ``pipeline_sim.md`` (tables and reading), ``pipeline_sim.csv`` (one row per job, draw
and method), ``pipeline_sim.png`` and the traces; they replace the committed ones in
``benchmarks/results/`` only with ``--update`` (see ``benchmarks/_results.py``).

Usage::

    nice -n 10 python benchmarks/pipeline_sim.py [--traces 1,2,3,4] [--draws 0] [--restart-cost 0] [--update]
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
from _results import (  # noqa: E402
    add_output_arguments,
    at_least,
    check_values,
    nonnegative_seconds,
    output_dir,
    package_versions,
    partial_run,
    produced_by,
    run_time,
    split_list,
    wrote,
)

from pal_opt.ilp import solve_ilp  # noqa: E402
from pal_opt.io.measurements import longhorn_paths  # noqa: E402
from pal_opt.io.traces import TraceJob, pipeline_cell, read_trace  # noqa: E402
from pal_opt.methods import METHODS as REGISTRY  # noqa: E402
from pal_opt.methods import Method, register_method  # noqa: E402
from pal_opt.model import MODEL_CLASS, MODEL_ITER_TIME, Pipeline, RoundInstance  # noqa: E402
from pal_opt.options import SolveOptions  # noqa: E402
from pal_opt.pipeline.partition import partition  # noqa: E402
from pal_opt.pipeline.profile import load_profile  # noqa: E402
from pal_opt.result import PlacementResult  # noqa: E402
from pal_opt.simulate import SimConfig, build_cluster, parse_cluster, simulate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("pal", "ilp-gang", "ilp")
#: The page's figure, embedded at its end (``stem``: pipeline_sim or pipeline_sim_restart).
FIGURE = ("\n![pipeline jobs' JCT CDF per method, and each method's mean JCT per job kind against pal's{restart}]"
          "({stem}.png)\n")
TIME_LIMIT = 10.0
#: The restart cost of the committed ``pipeline_sim_restart`` page (``--restart-cost 30``).
COMMITTED_RESTART_COST = 30.0
#: The pipeline models' classes (PAL maps VGG to class C; gnmt and GPT are language models).
PIPELINE_CLASS = {"vgg16": "classC", "gnmt": "classB", "gpt_pmp": "classB"}


# --------------------------------------------------------------------------- the trace
def kinds(shared: Path) -> dict[int, list[tuple[str, str, Pipeline]]]:
    """``{GPUs: [(kind, model, pipeline), ...]}``: the pipeline kinds of 4 and 8 GPUs."""
    out: dict[int, list[tuple[str, str, Pipeline]]] = {4: [], 8: []}
    for model in ("vgg16", "gnmt"):
        profile = load_profile(shared / "data" / "pipedream-profiles" / model / "graph.txt")
        for gpus in (4, 8):
            out[gpus].append((f"{model}-{gpus}", model, partition(profile, [gpus], [25e9]).job_pipeline()))
    out[4].append(("gpt_pmp-2x2", "gpt_pmp", Pipeline((1.0, 1.0), (2, 2))))
    out[8].append(("gpt_pmp-8", "gpt_pmp", Pipeline((1.0,) * 8, (1,) * 8)))
    return out


def write_trace(shared: Path, trace: int, jobs: int, cap_hours: float, path: Path) -> dict[Any, str]:
    """The benchmark's trace (see the module docstring) written to ``path``; ``{job id: kind}``
    (``"gang"`` for gangs)."""
    source = read_trace(shared / "data" / "pal-artifact" / "traces" / f"workload-{trace}.csv")[:jobs]
    by_size = kinds(shared)
    rng = np.random.default_rng([trace, 18])
    kind_of: dict[Any, str] = {}
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["job_id", "num_gpus", "submit_time", "duration", "model", "pipeline"])
        for tj in source:
            seconds = min(tj.ideal_seconds, cap_hours * 3600.0)
            pipe = tj.demand in by_size and bool(rng.random() < 0.5)
            choice = by_size[tj.demand][int(rng.integers(len(by_size[tj.demand])))] if pipe else None
            if choice is None:
                w.writerow([tj.id, tj.demand, repr(tj.submit_time), repr(seconds / tj.iter_time), tj.model, ""])
                kind_of[tj.id] = "gang"
            else:
                w.writerow([tj.id, tj.demand, repr(tj.submit_time), repr(seconds), choice[1], pipeline_cell(choice[2])])
                kind_of[tj.id] = choice[0]
    return kind_of


def load(path: Path) -> list[TraceJob]:
    """The trace as ``pal-opt simulate`` reads it, the pipeline models running 1 s iterations."""
    return read_trace(path, model_class={**MODEL_CLASS, **PIPELINE_CLASS},
                      iter_time={**MODEL_ITER_TIME, **dict.fromkeys(PIPELINE_CLASS, 1.0)})


# --------------------------------------------------------------------------- the methods
def _ilp_gang(instance: RoundInstance, options: SolveOptions) -> PlacementResult:
    """The round program with every pipeline's stages hidden (flat gangs); its GPU lists then run
    the stages in the order it gives them."""
    gangs = RoundInstance(instance.cluster, tuple(replace(j, pipeline=None) for j in instance.jobs),
                          instance.params, name=instance.name)
    return solve_ilp(gangs, time_limit=options.time_limit, threads=options.threads, backend=options.backend,
                     admission=options.admission)


def register_ilp_gang() -> None:
    """``ilp-gang``: the round program, stage-blind (the set choice without the stage map)."""
    if "ilp-gang" not in REGISTRY:
        register_method(Method("ilp-gang", _ilp_gang, "the round program with pipelines as flat gangs",
                               frozenset({"time_limit", "threads", "backend", "admission"}), exact=True))


# --------------------------------------------------------------------------- the runs
def run(shared: Path, traces: list[int], draws: list[int], jobs: int, cap: float,
        out: Path, restart_cost: float = 0.0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every (trace, draw, method): per-job rows and per-run figures."""
    longhorn = longhorn_paths(shared / "data" / "pal-artifact" / "variability" / "longhorn")
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    register_ilp_gang()
    for trace in traces:
        path = out / f"pipeline_sim_workload-{trace}.csv"
        kind_of = write_trace(shared, trace, jobs, cap, path)
        jobs_in = load(path)
        for draw in draws:
            cluster, _ = build_cluster(parse_cluster("16x4"), longhorn, seed=draw)
            for method in METHODS:
                extra: dict[str, Any] = {"time_limit": TIME_LIMIT, "backend": "highs",
                                         "ilp_options": {"threads": 1}} if method != "pal" else {}
                cfg = SimConfig(policy=method, admission="prefix", seed=draw, restart_cost=restart_cost, **extra)
                t0 = time.perf_counter()
                res = simulate(jobs_in, cluster, cfg, source=str(path))
                wall = time.perf_counter() - t0
                s = res.summary
                runs.append({"trace": f"workload-{trace}", "draw": draw, "method": method, "wall": wall,
                             "rounds": s["rounds"], "fallbacks": s["fallbacks"],
                             "solve_max": s["solve_seconds_max"], "solve_mean": s["solve_seconds_mean"]})
                for rec in res.jobs:
                    rows.append({"trace": f"workload-{trace}", "draw": draw, "method": method, "job": rec.job_id,
                                 "kind": kind_of[rec.job_id], "gpus": rec.demand, "jct": rec.jct,
                                 "queueing": rec.queueing_delay, "run_seconds": rec.run_seconds,
                                 "ideal_seconds": rec.ideal_seconds, "mean_slowdown": rec.mean_slowdown,
                                 "moves": rec.moves, "restarts": rec.restarts})
                print(f"workload-{trace} draw {draw} {method}: avg JCT {s['avg_jct'] / 3600:.3f} h, pipelines "
                      f"{s['pipeline_avg_jct'] / 3600:.3f} h, {s['rounds']} rounds, {wall:.0f} s", file=sys.stderr)
    return rows, runs


# --------------------------------------------------------------------------- the report
def _mean(rows: list[dict[str, Any]], key: str = "jct") -> float:
    return float(np.mean([r[key] for r in rows])) if rows else math.nan


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def jct_table(rows: list[dict[str, Any]]) -> tuple[list[str], dict[tuple[str, str], list[float]]]:
    """Average JCT (h) of the pipeline jobs and of all jobs per trace, draw and method; the ratios
    to PAL's (``{(group, method): [ratio per run]}``)."""
    by: dict[tuple[str, int, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        for g in ("pipeline" if r["kind"] != "gang" else "gang", "all"):
            by[(r["trace"], r["draw"], r["method"], g)].append(r)
    head = " | ".join(f"{g}: {m}" for g in ("pipeline", "all") for m in METHODS)
    lines = [f"| trace | draw | pipelines | {head} | pipeline: ilp / pal | gang: ilp / pal | all: ilp / pal |",
             "|---|---:|---:|" + "---:|" * (2 * len(METHODS) + 3)]
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    for trace, draw in sorted({(r["trace"], r["draw"]) for r in rows}):
        mean = {(g, m): _mean(by[(trace, draw, m, g)]) for g in ("pipeline", "gang", "all") for m in METHODS}
        for g in ("pipeline", "gang", "all"):
            for m in METHODS[1:]:
                ratios[(g, m)].append(mean[(g, m)] / mean[(g, "pal")])
        cells = [f"{mean[(g, m)] / 3600:.3f}" for g in ("pipeline", "all") for m in METHODS]
        cells += [f"{mean[(g, 'ilp')] / mean[(g, 'pal')]:.3f}" for g in ("pipeline", "gang", "all")]
        lines.append(f"| {trace} | {draw} | {len(by[(trace, draw, 'pal', 'pipeline')])} | " + " | ".join(cells) + " |")
    lines.append("| **geomean ratio** |" + " |" * (2 + 2 * len(METHODS)) + " "
                 + " | ".join(f"**{_geomean(ratios[(g, 'ilp')]):.3f}**" for g in ("pipeline", "gang", "all")) + " |")
    return lines, ratios


def kind_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per pipeline kind over every run: jobs, mean JCT and mean slowdown while running, per method."""
    lines = ["| kind | n | " + " | ".join(f"JCT (h): {m}" for m in METHODS) + " | ilp / pal | "
             + " | ".join(f"slowdown: {m}" for m in METHODS) + " |", "|---|---:|" + "---:|" * (2 * len(METHODS) + 1)]
    for kind in sorted({r["kind"] for r in rows}, key=lambda k: (k == "gang", k)):
        sel = {m: [r for r in rows if r["kind"] == kind and r["method"] == m] for m in METHODS}
        jct = {m: _mean(sel[m]) for m in METHODS}
        lines.append(f"| {kind} | {len(sel['pal'])} | " + " | ".join(f"{jct[m] / 3600:.3f}" for m in METHODS)
                     + f" | {jct['ilp'] / jct['pal']:.3f} | "
                     + " | ".join(f"{_mean(sel[m], 'mean_slowdown'):.3f}" for m in METHODS) + " |")
    return lines


def restart_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Under a restart cost: the moves and restarts per job, pipelines and gangs, per method."""
    out = []
    for group, sel in (("pipeline jobs", lambda r: r["kind"] != "gang"), ("gangs", lambda r: r["kind"] == "gang")):
        parts = []
        for m in METHODS:
            mine = [r for r in rows if r["method"] == m and sel(r)]
            parts.append(f"{m} {_mean(mine, 'moves'):.2f} moves, {_mean(mine, 'restarts'):.2f} restarts")
        out.append(f"* Per job, {group}: " + "; ".join(parts) + ".")
    return out


def reading(rows: list[dict[str, Any]], ratios: dict[tuple[str, str], list[float]],
            runs: list[dict[str, Any]], restart_cost: float = 0.0) -> list[str]:
    """What the tables say."""
    def share(method: str) -> float:
        sel = [r for r in rows if r["kind"] != "gang" and r["method"] == method]
        return sum(r["run_seconds"] for r in sel) / sum(r["jct"] for r in sel)

    g = {k: _geomean(v) - 1 for k, v in ratios.items()}
    better = sum(x < 1 for x in ratios[("pipeline", "ilp")])
    walls = {m: sum(r["wall"] for r in runs if r["method"] == m) for m in METHODS}
    slow = {m: _mean([r for r in rows if r["kind"] != "gang" and r["method"] == m], "mean_slowdown")
            for m in METHODS}
    return [
        "## Reading", "",
        f"* **Pipeline jobs: average JCT {g[('pipeline', 'ilp')]:+.1%}** under the stage program against "
        f"flat-gang PAL (geometric mean of the ratios over {len(ratios[('pipeline', 'ilp')])} trace x draw runs; "
        f"lower in {better} of them).  Gangs {g[('gang', 'ilp')]:+.1%}, all jobs {g[('all', 'ilp')]:+.1%}.",
        f"* The round program with the stages hidden (`ilp-gang`: exact GPU sets, stage-blind) gives the "
        f"pipeline jobs {g[('pipeline', 'ilp-gang')]:+.1%}"
        + (".  (Its GPU lists keep a running pipeline's set but not its stage order, so the simulator may "
           "charge it a move it did not price.)" if restart_cost else
           ": the set choice (mostly locality: a 4-GPU pipeline on one server) is "
           + ("all of the gain: the stage map adds nothing measurable "
              f"({g[('pipeline', 'ilp')]:+.2%} against {g[('pipeline', 'ilp-gang')]:+.2%})."
              if abs(g[("pipeline", "ilp")] - g[("pipeline", "ilp-gang")]) < 0.005 else
              f"most of the gain; the stage map adds {g[('pipeline', 'ilp')] - g[('pipeline', 'ilp-gang')]:+.1%}.")),
        "* The pipeline jobs' mean slowdown while running (pace x locality, raw factors): "
        + ", ".join(f"{m} {slow[m]:.3f}" for m in METHODS) + f".  Running is {share('pal'):.0%} (PAL) and "
        f"{share('ilp'):.0%} (stage program) of their JCT; the rest is waiting in the queue.",
        *(restart_lines(rows) if restart_cost else [WHY_SMALL]),
        f"* Cost: simulation wall time {', '.join(f'{m} {walls[m]:.0f} s' for m in METHODS)}; "
        f"{sum(r['fallbacks'] for r in runs if r['method'] == 'ilp')} stage-program rounds fell back to PAL at "
        f"the {TIME_LIMIT:.0f} s limit; slowest round "
        f"{max(r['solve_max'] for r in runs if r['method'] == 'ilp'):.1f} s.",
        "",
    ]


#: Why the stage program gains little without a restart cost (read from the committed run).
WHY_SMALL = (
        "* Why the gain is small: (1) with prefix admission every method admits the same jobs each round, so "
        "the queue -- most of a pipeline job's JCT here -- changes only through the other jobs' run times; (2) the 8-GPU "
        "pipelines span two 4-GPU servers under every method and pay lambda = 1.7, which dwarfs the "
        "variability; (3) PipeDream's partitions are balanced and gpt_pmp's stages equal, so a slow GPU is "
        "rarely free on a stage with slack (`pipeline_placement.md`: +1.0% speed from variability alone on "
        "Longhorn rounds); (4) Longhorn's slow GPUs are few (under 1% of the GPUs in PAL's outlier bins for "
        "classes B and C).")


def restart_note(restart_cost: float) -> str:
    """What the figure's title and alt text add for a run with a restart cost (nothing without)."""
    return f", restart cost {restart_cost:g} s per GPU" if restart_cost else ""


def plot(rows: list[dict[str, Any]], path: Path, restart_cost: float = 0.0) -> None:
    """Left: the pipeline jobs' JCT CDF per method.  Right: each method's mean JCT per job kind
    against pal's (the means are hours apart between kinds, their differences a few per cent).
    The title names the restart cost, so that the two committed figures tell themselves apart."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = ("-", "--", ":")
    for k, method in enumerate(METHODS):
        jct: np.ndarray = np.sort([r["jct"] / 3600 for r in rows if r["kind"] != "gang" and r["method"] == method])
        left.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=method,
                  linestyle=styles[k % len(styles)], linewidth=2.2 - 0.5 * k)
    left.set_xscale("log")
    left.set_xlabel("JCT of pipeline jobs (h)")
    left.set_ylabel("fraction of jobs")
    left.legend()
    kinds_ = sorted({r["kind"] for r in rows}, key=lambda k: (k == "gang", k))
    base = [_mean([r for r in rows if r["kind"] == kind and r["method"] == METHODS[0]]) for kind in kinds_]
    for k, method in enumerate(METHODS[1:], start=1):
        means = [_mean([r for r in rows if r["kind"] == kind and r["method"] == method]) for kind in kinds_]
        right.plot(np.arange(len(kinds_)) + (k - 1.5) * 0.15, np.divide(means, base), "o", color=f"C{k}",
                   label=f"{method} / {METHODS[0]}")
    right.axhline(1.0, color="0.5", linewidth=0.8)
    lo, hi = right.get_ylim()
    right.set_ylim(lo, max(hi, 1.01))  # the reference line inside the axes, not on its edge
    right.set_xticks(range(len(kinds_)), kinds_, rotation=30, ha="right", fontsize=8)
    right.set_ylabel(f"mean JCT against {METHODS[0]}'s (below 1: faster)")
    right.grid(True, axis="y", alpha=0.3)
    right.legend()
    fig.suptitle("Pipeline jobs in simulation: Longhorn variability, 16x4 GPUs, stage program (ilp) vs flat-gang PAL"
                 + restart_note(restart_cost), fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def report(args: argparse.Namespace, rows: list[dict[str, Any]], runs: list[dict[str, Any]], command: str) -> str:
    table, ratios = jct_table(rows)
    head = [
        "# Pipeline jobs in simulation: the stage program against flat-gang PAL"
        + (f", restart cost {args.restart_cost:g} s per GPU" if args.restart_cost else ""), "",
        f"{command}.", "",
        f"`benchmarks/pipeline_sim.py` (its docstring gives the setup): Sia-Philly traces "
        f"{', '.join(f'workload-{t}' for t in args.traces)} (first {args.jobs} jobs, ideal run times capped at "
        f"{args.cap:g} h, half the 4- and 8-GPU jobs made pipeline jobs: PipeDream partitions of vgg16 and gnmt, "
        f"Sia's gpt_pmp), on 16 x 4 GPUs with Longhorn variability (draws {', '.join(map(str, args.draws))}); "
        "FIFO, 360 s rounds, lambda 1.7, prefix admission"
        + (f", restart cost {args.restart_cost:g} s per GPU moved or resumed (a re-map of a pipeline's stages "
           "is a move; the programs price it, PAL does not)" if args.restart_cost else "")
        + ".  `pal`: flat-gang PAL; `ilp-gang`: the round program "
        "with the stages hidden; `ilp`: the round program with stage placement (HiGHS, 1 thread, "
        f"{TIME_LIMIT:.0f} s per round).  JCT in hours; ratio = ilp / pal "
        "(below 1: the stage program is better).", "",
    ]
    return "\n".join([*head, *reading(rows, ratios, runs, args.restart_cost), "## Average JCT (h)", "", *table, "",
                      "## Per job kind (all runs)", "", *kind_table(rows), ""])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--traces", default="1,2,3,4", help="Sia-Philly workload numbers (default 1,2,3,4)")
    ap.add_argument("--draws", default="0", help="Longhorn variability draw seeds (default 0)")
    ap.add_argument("--jobs", type=int, default=160, help="first jobs of each trace (default 160: all)")
    ap.add_argument("--cap", type=float, default=3.0, help="cap on a job's ideal run time, hours (default 3)")
    ap.add_argument("--restart-cost", type=float, default=0.0,
                    help="seconds lost per GPU of a running job moved or resumed (default 0); outputs "
                         "pipeline_sim_restart.*")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared",
                    help="the shared data directory (default ../shared)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    args.traces = split_list(ap, "--traces", args.traces, expected="comma-separated workload numbers 1-6")
    check_values(ap, "--traces", args.traces, lambda t: 1 <= t <= 6, "the artifact's workloads are numbered 1-6")
    args.draws = split_list(ap, "--draws", args.draws, expected="comma-separated draw seeds (integers >= 0)")
    check_values(ap, "--draws", args.draws, lambda d: d >= 0, "draw seeds are integers >= 0")
    at_least(ap, args, 1, "jobs")
    if not (math.isfinite(args.cap) and args.cap > 0):
        ap.error(f"--cap {args.cap:g}: hours > 0 expected")
    nonnegative_seconds(ap, args, "restart_cost")
    # the committed pages: pipeline_sim (the defaults) and pipeline_sim_restart (--restart-cost 30)
    partial = partial_run(ap, args, "jobs", "cap", also={
        "--traces": args.traces != split_list(ap, "--traces", ap.get_default("traces")),
        "--draws": args.draws != split_list(ap, "--draws", ap.get_default("draws")),
        "--restart-cost": args.restart_cost not in (ap.get_default("restart_cost"), COMMITTED_RESTART_COST)})
    if not (args.shared / "data" / "pal-artifact").is_dir():
        print(f"pipeline_sim: shared data not found at {args.shared}", file=sys.stderr)
        return 2
    stem = "pipeline_sim_restart" if args.restart_cost else "pipeline_sim"
    out = output_dir(args, "pipeline_sim", partial=partial)
    t0 = time.perf_counter()
    rows, runs = run(args.shared, args.traces, args.draws, args.jobs, args.cap, out, args.restart_cost)
    with open(out / f"{stem}.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    plot(rows, out / f"{stem}.png", args.restart_cost)
    text = report(args, rows, runs, produced_by(__file__, argv))
    machine = (f"Machine: {platform.processor() or platform.machine()}, 2 cores shared with other work, Python "
               f"{platform.python_version()}; packages: {package_versions()}; whole run {time.perf_counter() - t0:.0f} s "
               "under nice -n 10.")
    figure = FIGURE.format(stem=stem, restart=restart_note(args.restart_cost))
    (out / f"{stem}.md").write_text(f"{text}\n{machine}\n" + figure, encoding="utf-8")
    print(text)
    wrote("pipeline_sim", out / f"{stem}.md", out / f"{stem}.csv", out / f"{stem}.png",
          *(out / f"pipeline_sim_workload-{t}.csv" for t in args.traces))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
