"""Where the exact program should matter: PAL against the integer program on 1,024 GPUs.

Runs for about 23 min on the machine of the committed page (its own run time: 1,365 s, also in
``pal_1024_meta.json``); ``--quick`` is a smoke run on 16 × 8 GPUs.

The per-round gap of PAL's greedy placement against the program's bound grows with scale
(``suite.md``: about 0 % at 64 GPUs, 8-9 % at 1,024, on generated rounds).  This benchmark asks
what that gap is worth in job completion time on a trace:

* cluster: 128 servers × 8 GPUs (1,024 GPUs), one numpy variability draw from the Longhorn
  measurements (``--draw-seed``), λ = 1.7, 360 s rounds, FIFO;
* trace: a Sia-Philly workload of the PAL artifact scaled up 16-fold in arrival rate: 16 copies
  of its 160 jobs over the same time span, each copy's submit times shifted by a seeded uniform
  offset in [0, mean inter-arrival time) (``--copies``, ``--trace-seed``), so 2,560 jobs
  arrive 16 times as fast onto a cluster 16 times as large;
* policies at **equal admission**: PAL against the program with prefix admission (the queue
  stops at the first job that does not fit, as in the artifact) and with backfill admission;
  Packed-Sticky for scale.  The program runs with a per-round time limit and one thread.

Where the per-round gap goes: while PAL runs, every ``--sample-every``-th round is kept; each is
re-solved by the program on PAL's own admitted jobs (the suite's ``heur_gap``), and both
placements are priced with the raw factors the simulator runs at.  The results file relates
that per-round gap to the JCT gap through the share of JCT spent running.

Outputs: ``pal_1024.csv`` (one row per policy), ``pal_1024_rounds.csv`` (the sampled rounds),
``pal_1024.md`` and ``pal_1024.png`` (JCT CDF per policy; per-round gap of the sampled rounds).
They replace the committed ones in ``benchmarks/results/`` only with ``--update``.  The
committed ``pal_1024_run.log`` is the standard error of the 2026-11-27 run, kept because it shows
one HiGHS crash (SIGSEGV) that the run survived (``docs/limits.md``, Known problems); runs since
then count crashes per policy in the ``solver_crashes`` column.

Usage::

    python benchmarks/pal_1024.py [--trace workload-1] [--time-limit 10] [--workers 2] [--quick] [--update]
    python benchmarks/pal_1024.py --render DIR [--update]   # tables and plot again from a run's files
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from _results import (
    add_output_arguments,
    at_least,
    check_values,
    command_line,
    load_average,
    output_dir,
    partial_run,
    positive_seconds,
    produced_by,
    run_time,
    source_commit,
    split_list,
)

#: the page's figure(s), embedded at its end with what each shows
FIGURE = "\n\n![JCT CDF per policy on 128 x 8 GPUs, and the per-round gap on PAL's own rounds](pal_1024.png)\n"


ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
os.environ.setdefault("PAL_OPT_SHARED", str(SHARED))
TRACES = SHARED / "data" / "pal-artifact" / "traces"

POLICIES = ("packed-sticky", "pal", "ilp-prefix", "pal-backfill", "ilp-backfill")
EQUAL = (("prefix", "pal", "ilp-prefix"), ("backfill", "pal-backfill", "ilp-backfill"))
COLUMNS = (
    "policy", "jobs", "avg_jct_h", "median_jct_h", "p99_jct_h", "makespan_h", "avg_queueing_h",
    "avg_run_h", "run_share", "utilization", "gpu_weighted_slowdown", "job_mean_slowdown", "spanning_round_fraction",
    "moves", "fallbacks", "rounds", "solve_seconds_median", "solve_seconds_max", "wall_seconds", "solver_crashes",
)
ROUND_COLUMNS = (
    "admission", "round", "time_h", "queued_jobs", "admitted_jobs", "gpus_used", "pal_gm_binned",
    "ilp_gm_binned", "bound_gm_binned", "heur_gap", "ilp_gap", "pal_gm_raw", "ilp_gm_raw", "raw_gap", "pal_locality_share",
    "ilp_status", "ilp_seconds",
)


def scaled_trace(path: Path, copies: int, seed: int) -> list[Any]:
    """``copies`` copies of the trace, job ids ``copy * 10**6 + id``, each copy's submit times
    shifted by one seeded uniform offset in [0, mean inter-arrival time)."""
    from pal_opt.io.traces import read_trace

    base = read_trace(path)
    submits = sorted(j.submit_time for j in base)
    gap = (submits[-1] - submits[0]) / max(1, len(submits) - 1)
    rng = np.random.default_rng(seed)
    out = []
    for c in range(copies):
        shift = 0.0 if c == 0 else float(rng.uniform(0.0, gap))
        out.extend(dataclasses.replace(j, id=c * 10**6 + int(j.id), submit_time=j.submit_time + shift) for j in base)
    return out


def _config(policy: str, time_limit: float) -> Any:
    from pal_opt.simulate import SimConfig

    if policy.startswith("ilp-"):
        return SimConfig(policy="ilp", admission=policy[4:], time_limit=time_limit, ilp_options={"threads": 1})
    if policy.endswith("-backfill"):
        return SimConfig(policy=policy.removesuffix("-backfill"), admission="backfill")
    return SimConfig(policy=policy)


class _Sampler:
    """Keeps every n-th round PAL met, with PAL's answer, for re-solving afterwards."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.k = 0
        self.kept: list[tuple[int, Any, Any]] = []

    def __call__(self, inst: Any, res: Any) -> None:
        if self.k % self.every == 0 and res.placements:
            self.kept.append((self.k, inst, res))
        self.k += 1


def _raw_gm(inst: Any, placements: dict[Any, Sequence[int]]) -> tuple[float, float]:
    """Geometric-mean slowdown over GPUs with the raw (unbinned) factors, what the jobs run at,
    and the share of its logarithm that is the locality penalty (the rest: the slowest GPU)."""
    from pal_opt.cost import job_slowdown_pos

    cl = inst.cluster
    by_id = {j.id: j for j in inst.jobs}
    num = loc = den = 0.0
    for jid, gids in placements.items():
        job = by_id[jid]
        pos = cl.positions(tuple(gids))
        s = job_slowdown_pos(cl, cl.factors[job.perfclass], job, pos)
        num += len(gids) * math.log(s)
        loc += len(gids) * math.log(float(job.locality[cl.span_level_pos(pos)]))
        den += len(gids)
    return (math.exp(num / den) if den else 1.0), (loc / num if num > 0 else 0.0)


def _round_rows(admission: str, kept: list[tuple[int, Any, Any]], time_limit: float) -> list[dict[str, Any]]:
    from pal_opt.cost import relative_gap
    from pal_opt.solve import solve

    rows = []
    for k, inst, res in kept:
        t0 = time.perf_counter()
        ref = solve(inst, "ilp", jobs=list(res.placements), time_limit=time_limit, threads=1)
        d = res.gpus_used
        bound_gm = math.exp(ref.bound / d) if ref.bound is not None and d else None
        (pal_raw, pal_loc), (ilp_raw, _) = _raw_gm(inst, res.placements), _raw_gm(inst, ref.placements)
        rows.append({
            "admission": admission, "round": k, "time_h": _time_of(inst) / 3600,
            "queued_jobs": len(inst.jobs), "admitted_jobs": len(res.placements), "gpus_used": d,
            "pal_gm_binned": res.geomean_slowdown, "ilp_gm_binned": ref.geomean_slowdown,
            "bound_gm_binned": bound_gm,
            "heur_gap": relative_gap(res.objective, ref.bound, d) if ref.bound is not None else None,
            "ilp_gap": ref.gap,
            "pal_gm_raw": pal_raw, "ilp_gm_raw": ilp_raw, "raw_gap": pal_raw / ilp_raw - 1,
            "pal_locality_share": pal_loc,
            "ilp_status": ref.status.value, "ilp_seconds": time.perf_counter() - t0,
        })
    return rows


def _time_of(inst: Any) -> float:
    return float(inst.name.rsplit("t=", 1)[-1])


def run_policy(task: tuple[str, str, int, int, int, int, float, int]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Simulate one policy (one worker process); PAL's runs also sample rounds for the gap study."""
    from pal_opt.simulate import build_cluster, parse_cluster, simulate

    policy, trace_name, copies, trace_seed, draw_seed, servers, time_limit, every = task
    trace = scaled_trace(TRACES / f"{trace_name}.csv", copies, trace_seed)
    cluster, _ = build_cluster(parse_cluster(f"{servers}x8"), seed=draw_seed)
    sampler = _Sampler(every) if policy in ("pal", "pal-backfill") and every > 0 else None
    last = [time.perf_counter()]

    def progress(done: int, total: int, t: float) -> None:
        now = time.perf_counter()
        if now - last[0] > 60:
            last[0] = now
            print(f"  {policy}: {done}/{total} jobs done, simulated {t / 3600:.1f} h", file=sys.stderr, flush=True)

    res = simulate(trace, cluster, _config(policy, time_limit), progress=progress, on_round=sampler)
    s = res.summary
    jobs = [j for j in res.jobs if j.jct is not None]
    jct = np.array([j.jct for j in jobs])
    run = np.array([j.jct - (j.queueing_delay or 0.0) for j in jobs])
    solve_s = [r.solve_seconds for r in res.rounds]
    row = {
        "policy": policy, "jobs": len(jobs), "avg_jct_h": s["avg_jct"] / 3600,
        "median_jct_h": float(np.median(jct)) / 3600, "p99_jct_h": s["p99_jct"] / 3600,
        "makespan_h": s["makespan"] / 3600, "avg_queueing_h": s["avg_queueing_delay"] / 3600,
        "avg_run_h": float(run.mean()) / 3600, "run_share": float(run.sum() / jct.sum()),
        "utilization": s["utilisation"], "gpu_weighted_slowdown": s["gpu_weighted_slowdown"],
        # every job counts once, as in the average JCT (the GPU-weighted one favours the large gangs)
        "job_mean_slowdown": float(np.mean([j.mean_slowdown for j in jobs if j.mean_slowdown is not None])),
        "spanning_round_fraction": s["spanning_round_fraction"], "moves": s["moves"],
        "fallbacks": s["fallbacks"], "rounds": s["rounds"],
        "solve_seconds_median": float(np.median(solve_s)) if solve_s else 0.0,
        "solve_seconds_max": max(solve_s, default=0.0), "wall_seconds": s["wall_seconds"],
        "solver_crashes": s.get("solver_crashes", 0),
        "_jct": jct.tolist(),
    }
    admission = "backfill" if policy.endswith("backfill") else "prefix"
    rounds = _round_rows(admission, sampler.kept, time_limit) if sampler is not None else []
    print(f"  {policy}: done, avg JCT {row['avg_jct_h']:.2f} h, {s['rounds']} rounds, "
          f"{s['wall_seconds']:.0f} s", file=sys.stderr, flush=True)
    return row, rounds


# ----------------------------------------------------------------------------- analysis
def _median(xs: Sequence[float | None]) -> float | None:
    v = [x for x in xs if x is not None and math.isfinite(x)]
    return float(np.median(v)) if v else None


def _q(xs: Sequence[float | None], q: float) -> float | None:
    v = [x for x in xs if x is not None and math.isfinite(x)]
    return float(np.quantile(v, q)) if v else None


def _pct(x: float | None, nd: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{nd}f} %"


def write_markdown(rows: list[dict[str, Any]], rounds: list[dict[str, Any]], meta: dict[str, Any],
                   rendered_by: str | None = None) -> str:
    """The results page; ``rendered_by``: the ``--render`` line that rewrote it from a run's files."""
    out = io.StringIO()
    w = out.write
    by = {r["policy"]: r for r in rows}
    w(f"# PAL against the integer program on {meta['gpus']:,} GPUs ({meta['servers']} × 8)\n\n")
    run = (f"Produced by `{meta['command']}`" if "command" in meta
           else "Generated by `benchmarks/pal_1024.py` (command not recorded: the run predates the script recording it)")
    at = f" at commit {meta['commit']}" if "commit" in meta else ""
    w(f"{run} on {meta['date']}{at} ({meta['python']}, {meta['machine']}, "
      f"{meta['cpus']} cores; load average at start {meta['load_start']}, at end {meta['load_end']}); "
      f"run time {meta['seconds']:.0f} s.\n\n")
    if rendered_by:
        w(f"Tables and plot: {rendered_by[0].lower()}{rendered_by[1:]}, from that run's files.\n\n")
    w(f"Trace: `{meta['trace']}` of the PAL artifact scaled up {meta['copies']}-fold in arrival rate "
      f"({meta['copies']} copies of its jobs over the same span, copy offsets seeded with {meta['trace_seed']}): "
      f"{meta['jobs']:,} jobs.  Cluster: Longhorn variability, numpy draw seed {meta['draw_seed']}; λ = 1.7; "
      f"360 s rounds; FIFO.  Integer program: default backend ({meta['backend']}), per-round time limit "
      f"{meta['time_limit']:g} s, 1 thread.\n\n")
    w("## Average JCT at equal admission\n\n")
    w("| policy | avg JCT (h) | median JCT (h) | p99 JCT (h) | makespan (h) | avg queueing (h) | avg run (h) "
      "| run share of JCT | GPU-weighted slowdown | per-job mean slowdown | spanning rounds | rounds | median solve s | max solve s |\n")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for p in POLICIES:
        r = by.get(p)
        if r is None:
            continue
        w(f"| {p} | {r['avg_jct_h']:.2f} | {r['median_jct_h']:.2f} | {r['p99_jct_h']:.2f} | {r['makespan_h']:.1f} "
          f"| {r['avg_queueing_h']:.2f} | {r['avg_run_h']:.2f} | {100 * r['run_share']:.0f} % "
          f"| {r['gpu_weighted_slowdown']:.4f} | {r['job_mean_slowdown']:.4f} | {100 * r['spanning_round_fraction']:.1f} % | {r['rounds']} "
          f"| {r['solve_seconds_median']:.3f} | {r['solve_seconds_max']:.3f} |\n")
    w("\n")
    for p in POLICIES:
        crashes = float(by[p].get("solver_crashes") or 0) if p in by else 0.0
        crashes = int(crashes) if math.isfinite(crashes) else 0  # NaN: a run from before the column
        if crashes:
            w(f"* **{p}**: HiGHS crashed {crashes} time(s) during the run; each time the round was solved again "
              "without its start (`docs/limits.md`, Known problems).\n")
    for admission, pal, ilp in EQUAL:
        if pal in by and ilp in by:
            gain = 1 - by[ilp]["avg_jct_h"] / by[pal]["avg_jct_h"]
            run = 1 - by[ilp]["avg_run_h"] / by[pal]["avg_run_h"]
            slow = 1 - by[ilp]["gpu_weighted_slowdown"] / by[pal]["gpu_weighted_slowdown"]
            w(f"* **{admission}**: {ilp} vs {pal}: average JCT {_pct(gain)} lower; average run time "
              f"{_pct(run)} lower; GPU-weighted slowdown {_pct(slow, 2)} lower.\n")
    w("\n")
    if rounds:
        w("## The per-round gap on PAL's own rounds\n\n")
        w(f"Every {meta['sample_every']}-th round of PAL's run, re-solved by the program on the jobs PAL "
          "admitted (time limit as above).  *heur gap* = gm slowdown of PAL's placement / gm of the "
          "program's proven bound − 1, on the binned factors both methods see (the suite's `heur_gap`); "
          "*raw gap* = the same two placements priced with the raw factors the simulator runs at (PAL's "
          "gm / the program's gm − 1).\n\n")
        w("| admission | rounds | median admitted jobs | median GPUs used | median heur gap | p90 | "
          "median raw gap | p90 | median PAL gm (raw) | median program gm (raw) |\n")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
        for admission in ("prefix", "backfill"):
            rs = [r for r in rounds if r["admission"] == admission]
            if not rs:
                continue
            w(f"| {admission} | {len(rs)} | {_median([r['admitted_jobs'] for r in rs]):.0f} "
              f"| {_median([r['gpus_used'] for r in rs]):.0f} | {_pct(_median([r['heur_gap'] for r in rs]), 2)} "
              f"| {_pct(_q([r['heur_gap'] for r in rs], 0.9), 2)} | {_pct(_median([r['raw_gap'] for r in rs]), 2)} "
              f"| {_pct(_q([r['raw_gap'] for r in rs], 0.9), 2)} | {_median([r['pal_gm_raw'] for r in rs]):.4f} "
              f"| {_median([r['ilp_gm_raw'] for r in rs]):.4f} |\n")
        w("\n")
    w("## Where the per-round gap goes\n\n")
    for line in gap_accounting(by, rounds, meta['gpus']):
        w(f"* {line}\n")
    return out.getvalue()


def gap_accounting(by: dict[str, dict[str, Any]], rounds: list[dict[str, Any]], gpus: int) -> list[str]:
    """The chain from the per-round gap to the JCT gap, in figures of this run (no hand-written
    numbers: the results file is regenerated, never edited)."""
    lines = []
    for admission, pal, ilp in EQUAL:
        if pal not in by or ilp not in by:
            continue
        p, q = by[pal], by[ilp]
        rs = [r for r in rounds if r["admission"] == admission]
        heur, raw = _median([r["heur_gap"] for r in rs]), _median([r["raw_gap"] for r in rs])
        used = _median([r["gpus_used"] for r in rs]) or 0.0
        loc = _median([r["pal_locality_share"] for r in rs])
        zero = sum(1 for r in rs if (r["heur_gap"] or 0.0) < 1e-3)
        # every "lower" on the page is 1 - program / PAL, as in the summary lines above
        slow = 1 - q["gpu_weighted_slowdown"] / p["gpu_weighted_slowdown"]
        jslow = 1 - q["job_mean_slowdown"] / p["job_mean_slowdown"]
        jct = 1 - q["avg_jct_h"] / p["avg_jct_h"]
        by_runs = (p["avg_run_h"] - q["avg_run_h"]) / p["avg_jct_h"]  # the JCT the shorter runs save
        by_queue = (p["avg_queueing_h"] - q["avg_queueing_h"]) / p["avg_jct_h"]
        lines.append(
            f"**{admission}: the rounds.** The suite's 8-9 % at 1,024 GPUs is on generated rounds whose queue asks for "
            f"1.9 times the cluster, so every GPU is taken.  On this trace PAL's rounds use a median of {used:.0f} of "
            f"{gpus:,} GPUs: PAL can leave the slow GPUs idle.  On the {len(rs)} sampled rounds the program's bound is "
            f"{_pct(heur, 2)} below PAL's geometric-mean slowdown at the median, {zero} rounds within 0.1 % "
            f"(p90 {_pct(_q([r['heur_gap'] for r in rs], 0.9), 2)}); priced with the raw factors the jobs run at, "
            f"the program's placement is {_pct(raw, 2)} faster at the median.  " + _busy_sentence(rs, gpus)
            + _locality_sentence(loc))
        lines.append(
            f"**{admission}: the run.** The GPU-weighted slowdown is {p['gpu_weighted_slowdown']:.4f} under PAL and "
            f"{q['gpu_weighted_slowdown']:.4f} under the program ({_pct(slow, 2)} lower); the per-job mean slowdown, "
            f"where each job counts once as in the average JCT, {p['job_mean_slowdown']:.4f} against "
            f"{q['job_mean_slowdown']:.4f} ({_pct(jslow, 2)} lower): the program keeps more small gangs on one server "
            f"(spanning rounds {100 * q['spanning_round_fraction']:.1f} % against "
            f"{100 * p['spanning_round_fraction']:.1f} %), and the per-round gap, GPU-weighted, hardly sees a small job: "
            f"a 2-GPU gang split across two servers raises the geometric mean of a {used:.0f}-GPU round by "
            f"{_pct(1.7 ** (2 / used) - 1, 2)} but slows that job by 70 %.  Running is {100 * p['run_share']:.0f} % of PAL's "
            f"average JCT and queueing the rest.  Of the measured {_pct(jct, 1)} lower average JCT, the shorter runs "
            f"(average run {p['avg_run_h']:.2f} h under PAL, {q['avg_run_h']:.2f} h under the program) give "
            f"{_pct(by_runs, 1)} of PAL's average JCT and the queue draining sooner (average queueing "
            f"{p['avg_queueing_h']:.2f} h against {q['avg_queueing_h']:.2f} h) {_pct(by_queue, 1)}: a job that runs "
            "faster frees its GPUs for the queue sooner, which one trace and one draw cannot separate from the two "
            "runs' different trajectories.")
    return lines


def _busy_sentence(rs: list[dict[str, Any]], gpus: int) -> str:
    """The per-round gap while the cluster is busy against while the queue drains."""
    busy = [r for r in rs if r["gpus_used"] >= 0.75 * gpus]
    rest = [r for r in rs if r["gpus_used"] < 0.75 * gpus]
    if not busy or not rest:
        return ""
    hours = [r["time_h"] for r in busy]
    return (f"The gap is where the cluster is busy: in the {len(busy)} sampled rounds in which PAL used at least "
            f"75 % of the GPUs (between {min(hours):.0f} h and {max(hours):.0f} h) it is "
            f"{_pct(_median([r['heur_gap'] for r in busy]), 2)} at the median and up to "
            f"{_pct(max((r['heur_gap'] for r in busy if r['heur_gap'] == r['heur_gap']), default=None), 2)}, in the other "
            f"{len(rest)}, while the queue drains, {_pct(_median([r['heur_gap'] for r in rest]), 2)}; most rounds "
            "of the run are of the second kind.  ")


def _locality_sentence(share: float | None) -> str:
    """What share of ln(slowdown) of PAL's placements the locality penalty is (a share above 100 %:
    the slowest GPUs of PAL's gangs are faster than the median GPU, factors below 1)."""
    if share is None:
        return ""
    head = (f"The locality penalty is {_pct(share, 0)} of ln(slowdown) of PAL's placements at the median "
            "round: every gang larger than one 8-GPU server pays λ = 1.7 whoever places it")
    if share >= 1:
        return head + ("; the GPUs themselves add nothing, PAL's gangs run on GPUs at least as fast as the "
                       "median one (factors below 1), so the program has little left to win per round.")
    return head + f"; only the other {_pct(1 - share, 0)}, the slowest GPU's factor, is the placement's to choose."


def plot(rows: list[dict[str, Any]], rounds: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in rows:
        x = np.sort(np.array(r["_jct"]) / 3600)
        a.plot(x, np.arange(1, len(x) + 1) / len(x), label=r["policy"],
               linestyle="--" if r["policy"].startswith("ilp") else "-")
    a.set_xscale("log")
    a.set_xlabel("JCT (h, log scale)")
    a.set_ylabel("fraction of jobs")
    a.set_title("JCT CDF, 128 × 8 GPUs")
    a.legend()
    for admission, marker in (("prefix", "o"), ("backfill", "s")):
        rs = [r for r in rounds if r["admission"] == admission and r["heur_gap"] is not None]
        if rs:
            b.scatter([r["time_h"] for r in rs], [100 * r["heur_gap"] for r in rs], marker=marker,
                      label=f"{admission}: heur gap (binned)", alpha=0.7)
            b.scatter([r["time_h"] for r in rs], [100 * r["raw_gap"] for r in rs], marker=marker,
                      facecolors="none", edgecolors="k", label=f"{admission}: raw gap", alpha=0.7)
    b.set_xlabel("simulated time (h)")
    b.set_ylabel("PAL's gm slowdown over the program's − 1 (%)")
    b.set_title("Per-round gap on PAL's own rounds")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render(src: Path, out: Path, rendered_by: str | None = None) -> int:
    """Rewrite ``pal_1024.md`` and ``pal_1024.png`` from a run's CSV and meta files in ``src``."""
    import pandas as pd

    meta = json.loads((src / "pal_1024_meta.json").read_text())
    rows = pd.read_csv(src / "pal_1024.csv").to_dict("records")
    jct = pd.read_csv(src / "pal_1024_jobs.csv")
    for r in rows:
        r["_jct"] = (jct.loc[jct["policy"] == r["policy"], "jct_h"] * 3600).tolist()
    rounds = pd.read_csv(src / "pal_1024_rounds.csv").to_dict("records")
    for name in ("pal_1024.csv", "pal_1024_jobs.csv", "pal_1024_rounds.csv", "pal_1024_meta.json"):
        if (src / name).resolve() != (out / name).resolve():
            (out / name).write_bytes((src / name).read_bytes())
    (out / "pal_1024.md").write_text(write_markdown(rows, rounds, meta, rendered_by) + FIGURE)
    plot(rows, rounds, out / "pal_1024.png")
    print(f"pal_1024: rendered {out}/pal_1024.md from {src}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--trace", default="workload-1", help="Sia-Philly workload of the PAL artifact (default workload-1)")
    ap.add_argument("--copies", type=int, default=16, help="arrival-rate multiplier: copies of the trace (default 16)")
    ap.add_argument("--servers", type=int, default=128, help="servers of 8 GPUs (default 128)")
    ap.add_argument("--trace-seed", type=int, default=0, help="seed of the trace copies' arrivals (default 0)")
    ap.add_argument("--draw-seed", type=int, default=0, help="seed of the Longhorn variability draw (default 0)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="program's per-round time limit (default 10 s)")
    ap.add_argument("--sample-every", type=int, default=25,
                    help="keep every n-th PAL round for the gap study (default 25; 0: none)")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help=f"comma-separated, among {', '.join(POLICIES)} (default: all)")
    ap.add_argument("--workers", type=int, default=2, help="simulations run at a time (default 2)")
    ap.add_argument("--quick", action="store_true", help="2 copies on 16 × 8, for a smoke test")
    ap.add_argument("--render", type=Path, default=None, metavar="DIR",
                    help="no simulation: rewrite the tables and the plot from a run's files in DIR")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "copies", "servers")
    at_least(ap, args, 0, "trace_seed", "draw_seed", "sample_every")
    at_least(ap, args, 1, "workers")
    positive_seconds(ap, args, "time_limit")
    policies = split_list(ap, "--policies", args.policies, str, "comma-separated policy names")
    check_values(ap, "--policies", policies, lambda p: p in POLICIES, f"choose among {', '.join(POLICIES)}")
    if args.render is not None and not (args.render / "pal_1024_meta.json").is_file():
        ap.error(f"--render {args.render}: no pal_1024_meta.json there (the files of a run)")
    partial = partial_run(ap, args, "quick", "trace", "copies", "servers", "trace_seed", "draw_seed", "time_limit",
                          "sample_every", also={"--policies": set(policies) != set(POLICIES)})
    if args.render is None and TRACES.is_dir():
        known = sorted(p.stem for p in TRACES.glob("*.csv"))
        check_values(ap, "--trace", [args.trace], lambda t: t in known, f"choose among {', '.join(known)}")
    if args.quick:
        args.copies, args.servers, args.time_limit, args.sample_every = 2, 16, 2.0, 10
    out = output_dir(args, "pal_1024", partial=partial)
    if args.render is not None:
        return render(args.render, out, produced_by(__file__, argv))
    if not TRACES.is_dir():
        print(f"pal_1024: {TRACES} not found (the PAL artifact's traces in ../shared)", file=sys.stderr)
        return 2
    from pal_opt.ilp.backends import get_backend

    t0 = time.time()
    load0 = load_average()
    tasks = [(p, args.trace, args.copies, args.trace_seed, args.draw_seed, args.servers, args.time_limit,
              args.sample_every) for p in policies]
    # the slow integer-program runs first, so two workers finish together
    tasks.sort(key=lambda t: not t[0].startswith("ilp"))
    print(f"pal_1024: {len(tasks)} simulations of {args.copies * 160:,} jobs on {args.servers * 8:,} GPUs, "
          f"{args.workers} workers", file=sys.stderr, flush=True)
    with ProcessPoolExecutor(max_workers=args.workers) as ex:
        results = list(ex.map(run_policy, tasks))
    rows = sorted((r for r, _ in results), key=lambda r: POLICIES.index(r["policy"]))
    rounds = [x for _, rs in results for x in rs]
    meta = {
        "date": time.strftime("%Y-%m-%d"), "python": f"Python {platform.python_version()}",
        "machine": f"{platform.machine()}, {platform.system()}", "cpus": os.cpu_count(),
        "load_start": load0, "load_end": load_average(), "seconds": time.time() - t0, "trace": args.trace,
        "copies": args.copies, "trace_seed": args.trace_seed, "draw_seed": args.draw_seed,
        "jobs": args.copies * 160, "gpus": args.servers * 8, "servers": args.servers,
        "time_limit": args.time_limit, "backend": get_backend().name, "sample_every": args.sample_every,
        "command": command_line(__file__, argv), "commit": source_commit(),
    }
    with open(out / "pal_1024.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        wr.writeheader()
        wr.writerows(rows)
    with open(out / "pal_1024_rounds.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=ROUND_COLUMNS, extrasaction="ignore")
        wr.writeheader()
        wr.writerows(rounds)
    with open(out / "pal_1024_jobs.csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["policy", "jct_h"])
        wr.writerows((r["policy"], f"{x / 3600:.6f}") for r in rows for x in r["_jct"])
    (out / "pal_1024_meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    (out / "pal_1024.md").write_text(write_markdown(rows, rounds, meta) + FIGURE)
    plot(rows, rounds, out / "pal_1024.png")
    print(f"pal_1024: wrote {out}/pal_1024.md ({meta['seconds']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
