"""Failures on a cluster of GPU types: ``sia`` and ``ilp`` on newtrace-7 with GPUs that fail.

Runs for about 8 min on the machine of the committed page (its own total: 455 s, 2 runs at a time);
``--seeds`` runs fewer.

newtrace-7 (960 jobs) on the paper's cluster ``aws:6x4,rtx:3x8,dgx-ext:2x8``, 60 s rounds, with
PAL's Longhorn variability on every type (classA from its ResNet runs, classB from its BERT runs,
draw 0, as ``benchmarks/sia_compare.py``), first without failures, then with the failure process
of ``pal-opt simulate`` (:mod:`pal_opt.hetero.failures`: Llama 3's per-GPU and per-server MTBFs,
4 h repairs, a checkpoint at every re-allocation and every hour of training) scaled ``--scale``
times (default 300: on 64 GPUs over some 55 h that is a couple of dozen failures), for each failure
seed.  The same seed gives both policies the same failure process (the same failure times; which
jobs they hit depends on the placements).

Reported per policy and seed: failures, job interruptions, GPU-hours of work lost, restarts per
job, average and p99 JCT, each average JCT against the same policy's without failures, and
``ilp``'s against ``sia``'s under the same failures.

Usage::

    PYTHONPATH=$PWD nice -n 10 python benchmarks/sia_failures.py [--seeds 0 1] [--scale 300]
        [--workers 2] [--update | --out-dir DIR]

Writes ``sia_failures.md`` (and the runs as ``sia_failures_runs.json``) to ``benchmarks/results/``
with ``--update``, else to the scratch directory.  Skips (exit 0) when ``../shared`` is absent.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from _results import (
    add_output_arguments,
    at_least,
    check_values,
    output_dir,
    package_versions,
    partial_run,
    produced_by,
    run_time,
)
from sia_compare import CLUSTER, DATA, HOUR, _files

ROOT = Path(__file__).resolve().parents[1]
TRACE = 7
POLICIES = ("sia", "ilp")


def run(policy: str, seed: int | None, scale: float) -> dict[str, Any]:
    """One simulation in a worker: ``seed`` None = no failures."""
    sys.path.insert(0, str(ROOT))
    from threadpoolctl import threadpool_limits

    from pal_opt.hetero.gpus import Layout, draw_variability
    from pal_opt.hetero.profiles import load_applications
    from pal_opt.hetero.simulate import SimConfig, build_cluster, parse_cluster, simulate_sia
    from pal_opt.hetero.workload import read_workload
    from pal_opt.simulate.failures import FailureConfig

    workload = read_workload(DATA / "workloads" / f"newtrace-{TRACE}.csv")
    apps = load_applications(DATA / "profiles", workload.applications())
    cluster = build_cluster(parse_cluster(CLUSTER), apps)
    var = draw_variability(Layout(cluster), _files(cluster, "longhorn"), seed=0)
    failures = None if seed is None else FailureConfig(scale=scale, seed=seed)
    t0 = time.perf_counter()
    with threadpool_limits(limits=1):
        result = simulate_sia(workload, apps, cluster, SimConfig(policy=policy, variability=var, failures=failures))
    s = result.summary()
    if s["n_completed"] + len(result.unplaceable) != s["n_jobs"]:
        raise SystemExit(f"sia_failures: {policy} seed {seed} left jobs unfinished")
    f = s.get("failures") or {}
    return {"policy": policy, "seed": seed, "avg_jct": s["avg_jct"], "p99_jct": s["p99_jct"],
            "restarts": s["avg_restarts_per_job"], "events": f.get("failures"),
            "interrupted": f.get("jobs_hit"), "lost_gpu_hours": f.get("lost_gpu_hours"),
            "wall_seconds": time.perf_counter() - t0}


def report(rows: list[dict[str, Any]], args: argparse.Namespace, elapsed: float, command: str) -> str:
    by = {(r["policy"], r["seed"]): r for r in rows}
    lines = [
        f"# Failures on a cluster of GPU types: sia and ilp on newtrace-{TRACE}",
        "",
        f"{command} on {time.strftime('%Y-%m-%d')} (Python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs shared with other work, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; {package_versions()}; {elapsed:.0f} s in all, "
        f"{args.workers} runs at a time, each single-threaded).",
        "",
        f"Cluster `{CLUSTER}`, 60 s rounds, Longhorn variability (draw 0) on every type.  Failures: Llama 3's "
        f"rates (per-GPU MTBF 86,332 h, per-server 15,338 h) x {args.scale:g}, 4 h repairs, checkpoints at "
        "every re-allocation and every hour of training (`pal_opt/hetero/failures.py`).  *vs none*: average "
        "JCT over the same policy's without failures; *ilp / sia*: under the same failure seed.",
        "",
        "| policy | failure seed | failures | jobs interrupted | lost GPU-h | restarts per job | avg JCT (h) "
        "| vs none | ilp / sia | p99 JCT (h) | wall (s) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        base = by[(r["policy"], None)]
        sia = by.get(("sia", r["seed"]))
        ratio = f"{r['avg_jct'] / sia['avg_jct']:.3f}" if r["policy"] == "ilp" and sia else "–"
        none = r["seed"] is None
        lines.append(
            f"| {r['policy']} | {'no failures' if none else r['seed']} | {'–' if none else r['events']} "
            f"| {'–' if none else r['interrupted']} | {'–' if none else format(r['lost_gpu_hours'], '.1f')} "
            f"| {r['restarts']:.2f} | {r['avg_jct'] / HOUR:.3f} | {r['avg_jct'] / base['avg_jct']:.3f} | {ratio} "
            f"| {r['p99_jct'] / HOUR:.2f} | {r['wall_seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="failure seeds (default 0 1)")
    ap.add_argument("--scale", type=float, default=300.0, help="failure rates x this (default 300)")
    ap.add_argument("--workers", type=int, default=2, help="runs at a time (default 2)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    check_values(ap, "--seeds", args.seeds, lambda s: s >= 0, "failure seeds are integers >= 0")
    if not (math.isfinite(args.scale) and args.scale > 0):
        ap.error(f"--scale {args.scale:g}: a factor > 0 expected")
    at_least(ap, args, 1, "workers")
    partial = partial_run(ap, args, "seeds", "scale")
    if not (DATA / "profiles").is_dir():
        print(f"sia_failures: skipped: {DATA} not found", file=sys.stderr)
        return 0
    out = output_dir(args, "sia_failures", partial=partial)
    t0 = time.perf_counter()
    tasks = [(p, s, args.scale) for p in POLICIES for s in [None, *args.seeds]]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(run, *zip(*tasks, strict=True)))
    for r in rows:
        print(f"sia_failures: {r['policy']} seed {r['seed']}: avg JCT {r['avg_jct'] / HOUR:.3f} h", file=sys.stderr)
    (out / "sia_failures_runs.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / "sia_failures.md").write_text(report(rows, args, time.perf_counter() - t0, produced_by(__file__, argv, date=False)))
    print(f"sia_failures: wrote {out / 'sia_failures.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
