"""Failures in the simulator: one Sia-Philly trace on 16 × 4 GPUs, PAL and the integer program.

Runs for about 40 s on the machine of the committed page (its own total: 41 s); ``--seeds`` runs
fewer.

``workload-1`` of the PAL artifact (160 jobs) on a 16 × 4 cluster (the numpy variability draw,
seed 0), FIFO, 360 s rounds, λ = 1.7, no restart cost: first without failures, then with the
default failure process (:mod:`pal_opt.simulate.failures`: Llama 3's per-GPU and per-server
MTBFs, 4 h repairs, hourly checkpoints) scaled 100× (``FailureConfig(scale=100)``: a server
fails every ~6 days, a GPU every ~5 weeks), so that failures happen in a run of a few days on
64 GPUs, for each failure seed.  The same seed gives both policies the same failures.

Reported per policy and seed: failures (GPU / server), jobs hit, lost GPU-hours, restarts per
job (mean / max, every restart: moves, resumptions, restarts after a failure), repairs run
inside rounds, average JCT and makespan, each JCT against the same policy without failures.
Every run must finish every job (the script fails otherwise).

Usage::

    nice -n 10 python benchmarks/failures.py [--seeds 0 1 2] [--update]

Writes ``failures.md`` to ``benchmarks/results/`` with ``--update``, else to the scratch
directory (:mod:`benchmarks._results`).  Skips (exit 0) when ``../shared`` is absent.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import add_output_arguments, check_values, output_dir, partial_run, produced_by, run_time  # noqa: E402
from pal_lambda import machine  # noqa: E402

from pal_opt.io.traces import read_trace  # noqa: E402
from pal_opt.simulate import SimConfig, build_cluster, parse_cluster, simulate  # noqa: E402
from pal_opt.simulate.failures import FailureConfig  # noqa: E402

TRACE = ROOT.parent / "shared" / "data" / "pal-artifact" / "traces" / "workload-1.csv"
POLICIES = ("pal", "ilp")
SCALE = 100.0


def run(policy: str, seed: int | None) -> dict[str, Any]:
    """One simulation: ``seed`` None = no failures; its figures."""
    trace = read_trace(TRACE)
    cluster, _ = build_cluster(parse_cluster("16x4"), seed=0)
    failures = None if seed is None else FailureConfig(scale=SCALE, seed=seed)
    cfg = SimConfig(policy=policy, backend="highs" if policy == "ilp" else None,
                    time_limit=10.0 if policy == "ilp" else None, failures=failures)
    t0 = time.perf_counter()
    res = simulate(trace, cluster, cfg)
    s = res.summary
    if s["n_completed"] + len(res.unplaceable) != len(trace):
        raise SystemExit(f"failures: {policy} seed {seed} lost a job: {s['n_completed']} of {len(trace)} finished")
    f = s.get("failures") or {}
    return {"policy": policy, "seed": seed, "avg_jct_h": s["avg_jct"] / 3600, "makespan_h": s["makespan"] / 3600,
            "wall_s": time.perf_counter() - t0, "n_completed": s["n_completed"],
            "restarts_mean": statistics.fmean(j.restarts for j in res.jobs),
            "restarts_max": max(j.restarts for j in res.jobs), **{k: v for k, v in f.items() if k != "config"}}


def report(rows: list[dict[str, Any]], meta: dict[str, Any], seeds: list[int]) -> str:
    base = {r["policy"]: r for r in rows if r["seed"] is None}
    lines = [
        "# Failures in the simulator: workload-1 on 16 × 4 GPUs, PAL and the integer program",
        "",
        f"{meta['command']} on {meta['date']} at commit {meta['commit']}.",
        "",
        f"Machine: {meta['cpu']}; {meta['platform']}; {meta['python']}. Shared with other work, niced; "
        f"{meta['elapsed']:.0f} s in all.",
        "",
        f"Failure process: Llama 3's rates (per-GPU MTBF 86,332 h, per-server MTBF 15,338 h) ÷ {SCALE:g}, "
        "4 h repairs, checkpoints every hour of work; FIFO, 360 s rounds, λ = 1.7, restart cost 0, "
        "`ilp` on HiGHS with a 10 s limit per round. Seeds are the failure process's; the cluster's "
        "variability draw is the same (numpy, seed 0) in every run. JCT ratio = average JCT / the same "
        "policy's without failures. Every run finished all 160 jobs.",
        "",
        "| policy | failure seed | failures (GPU / server) | jobs hit | lost GPU-h | restarts per job mean / max "
        "| failure restarts max | repairs in rounds | avg JCT (h) | JCT ratio | makespan (h) | wall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        b = base[r["policy"]]
        if r["seed"] is None:
            lines.append(f"| {r['policy']} | no failures | – | – | – | {r['restarts_mean']:.2f} / {r['restarts_max']} "
                         f"| – | – | {r['avg_jct_h']:.2f} | 1 | {r['makespan_h']:.2f} | {r['wall_s']:.1f} |")
            continue
        lines.append(
            f"| {r['policy']} | {r['seed']} | {r['failures']} ({r['gpu_failures']} / {r['server_failures']}) "
            f"| {r['jobs_hit']} | {r['lost_gpu_hours']:.1f} | {r['restarts_mean']:.2f} / {r['restarts_max']} "
            f"| {r['failure_restarts_per_job_max']} | {r['repairs']} | {r['avg_jct_h']:.2f} "
            f"| {r['avg_jct_h'] / b['avg_jct_h']:.3f} | {r['makespan_h']:.2f} | {r['wall_s']:.1f} |")
    lines += ["", f"## Medians over the {len(seeds)} failure seeds", "",
              "| policy | failures | lost GPU-h | restarts per job (mean) | avg JCT (h) | JCT ratio |",
              "|---|---|---|---|---|---|"]
    for p in POLICIES:
        rs = [r for r in rows if r["policy"] == p and r["seed"] is not None]
        med = {k: statistics.median(r[k] for r in rs) for k in ("failures", "lost_gpu_hours", "restarts_mean",
                                                               "avg_jct_h")}
        lines.append(f"| {p} | {med['failures']:g} | {med['lost_gpu_hours']:.1f} | {med['restarts_mean']:.2f} "
                     f"| {med['avg_jct_h']:.2f} | {med['avg_jct_h'] / base[p]['avg_jct_h']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="failure seeds (default 0 1 2)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    check_values(ap, "--seeds", args.seeds, lambda s: s >= 0, "failure seeds are integers >= 0")
    partial = partial_run(ap, args, "seeds")
    if not TRACE.is_file():
        print(f"failures: skipped: {TRACE} not found", file=sys.stderr)
        return 0
    out = output_dir(args, "failures", partial=partial)
    t0 = time.perf_counter()
    rows = []
    for policy in POLICIES:
        for seed in [None, *args.seeds]:
            rows.append(run(policy, seed))
            print(f"failures: {policy} seed {seed}: avg JCT {rows[-1]['avg_jct_h']:.2f} h", file=sys.stderr)
    meta = {**machine(), "elapsed": time.perf_counter() - t0, "command": produced_by(__file__, argv, date=False, commit=False)}
    (out / "failures.md").write_text(report(rows, meta, args.seeds))
    print(f"failures: wrote {out / 'failures.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
