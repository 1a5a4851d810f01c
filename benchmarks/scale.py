"""The two headline scale targets of the round program.

Runs for about 2.5 min on the machine of the committed page (its own run time: 145 s); ``--ks`` runs
fewer partitionings.

1. **2,048 GPUs** (256 servers × 8, flat), 594 queued jobs (0.29 per GPU, as in
   ``scale_large.py``), prefix admission: a proven gap of at most 0.5 % on the geometric-mean
   slowdown within 5 s (5.5 s of wall time for the whole process) and at most 2 GiB, with *each*
   backend (HiGHS, CP-SAT, CBC).  Every run is a whole process ``pal-opt solve INSTANCE --method
   ilp --backend B --gap 0.005 --time-limit 5``, timed from outside (spawn to exit, GNU ``time``
   for the peak resident memory and CPU), :data:`REPS_2048` times per seed and backend; the
   table gives the median wall time and the worst peak; a seed *meets* the target when the
   median run is within 5.5 s at a gap of at most 0.5 %, every run's placement passes
   :func:`pal_opt.check.check` and the peak is at most 2 GiB.  Each backend bounds the round
   with its own LP solver (HiGHS's simplex, GLOP for CP-SAT, CLP for CBC) and returns the start
   placement when it is within the gap of that bound; otherwise its search runs in what is left.
2. **8,192 GPUs** (1,024 × 8, flat and in 32 racks), 2,400 queued jobs: a gap of at most 2 % within 30 s, both
   directly (HiGHS, ``gap=0.02``, 30 s limit) and partitioned POP-style
   (:func:`pal_opt.ilp.partition.solve_partitioned`, k = 2, 4, 8 parts of the same make-up solved
   in parallel on a local process pool of two workers; each part with gap 0.01 and a 20 s
   limit; the gap is against the LP relaxation of the *whole* round, computed concurrently as
   one more task, 25 s limit).

Rounds: :func:`pal_opt.generate.generate_instance` with λ = 1.7, the Sia-Philly job mix and
factors drawn from the Longhorn measurements in ``../shared`` (synthetic Longhorn-like factors
when absent), seeds 0–4 (2,048) and 0–2 (8,192).  Medians over seeds.

Timing: *time* is the whole ``solve_ilp`` / ``solve_partitioned`` call (admission, formulation,
start placements, LP bound, MIP, decoding, pricing).  Instance generation and the per-cluster
binning (k-means, cached on the cluster; reported separately) are outside it.  The partitioned
runs use a pool started (and warmed with one import task) before timing, as a scheduler would
keep it across rounds; the pool's cold start is reported once.

Memory: direct runs each run in a fresh process (a one-worker pool with
``max_tasks_per_child=1``); the figure is that process's peak RSS while the solve ran
(:func:`pal_opt.parallel.measure_peak`: Linux high-water mark reset before the call), which
includes the interpreter and libraries (~150-250 MiB).  Partitioned runs report the peak of
the parent process during the call, each worker task's peak, and their sum over the processes
alive at once (parent + the LP-bound worker + the largest part), an upper bound of the total.

Usage::

    python benchmarks/scale.py [--seeds-2048 5] [--reps-2048 3] [--seeds-8192 3] [--update | --out-dir DIR]

Writes ``scale.md``; it replaces the committed one in ``benchmarks/results/`` only with
``--update``, which ``--skip-2048`` or ``--skip-8192`` refuses (see ``benchmarks/_results.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _procs import cli, run  # noqa: E402
from _results import (  # noqa: E402
    add_output_arguments,
    at_least,
    check_values,
    load_average,
    output_dir,
    partial_run,
    produced_by,
    run_time,
    split_list,
    write_page,
)
from suite import machine, measurements  # noqa: E402

MiB = 2**20
#: 2,048-GPU target: the gap, the solver's time limit, the wall-time allowance, the memory cap.
GAP_2048, LIMIT_2048, WALL_2048, MEM_2048 = 0.005, 5.0, 5.5, 2 * 1024**3
JOBS_2048 = 594
REPS_2048 = 3
BACKENDS_2048 = ("highs", "cpsat", "cbc")



def _dash(x: object) -> str:
    """A count, or "–" when there is none (no program was built)."""
    return "–" if x is None else str(x)

def make_round(nodes: int, jobs: int, seed: int, racks: int = 0):  # type: ignore[no-untyped-def]
    from pal_opt.generate import generate_instance

    return generate_instance(nodes, 8, jobs, seed=seed, racks=racks, locality_penalty=1.7, measurements=measurements(),
                             name=f"scale-{nodes}x8-r{racks}-j{jobs}-s{seed}")


def direct_run(nodes: int, jobs: int, seed: int, backend: str, gap: float, time_limit: float,
               racks: int = 0) -> dict[str, Any]:
    """One direct solve in this (fresh) process."""
    from pal_opt.binning import binned_factors
    from pal_opt.check import check
    from pal_opt.ilp import solve_ilp
    from pal_opt.parallel import measure_peak

    inst = make_round(nodes, jobs, seed, racks)
    t0 = time.perf_counter()
    binned_factors(inst.cluster)
    bin_s = time.perf_counter() - t0
    res, mem = measure_peak(solve_ilp, inst, backend=backend, gap=gap, time_limit=time_limit)
    starts = {k: v for k, v in res.info.items() if k.startswith("start_") and k.endswith("_objective")}
    start = min(starts.values()) if starts else None
    return {
        "seed": seed, "backend": backend, "gap_target": gap, "time_limit": time_limit,
        "time": mem.seconds, "build": res.build_seconds, "solve": res.solve_seconds,
        "status": res.status.value, "gap": res.gap, "bound": res.bound, "objective": res.objective,
        "geomean": res.geomean_slowdown, "jobs": res.jobs_placed, "gpus_used": res.gpus_used,
        "vars": res.info.get("num_vars"), "rows": res.info.get("num_rows"),
        "levels": res.info.get("levels"), "solver_status": res.info.get("solver_status"),
        "start_source": res.info.get("start_source"), "incumbent": res.info.get("incumbent"),
        "relaxation": res.info.get("relaxation"),
        "start_gap": (math.expm1((start - res.bound) / res.gpus_used) if start is not None and res.bound is not None
                      else None),
        "peak_rss": mem.peak_rss, "mem_method": mem.method, "binning": bin_s,
        "violations": len(check(inst, res)),
    }


def _warm() -> int:
    import pal_opt.ilp.partition  # noqa: F401
    import pal_opt.policies.pal  # noqa: F401

    return os.getpid()


def fresh(fn: Any, *args: Any) -> Any:
    from pal_opt.parallel import make_executor

    with make_executor(None, workers=1, max_tasks_per_child=1) as ex:
        return ex.submit(fn, *args).result()


def _pct(x: float | None, nd: int = 3) -> str:
    return "–" if x is None else f"{x * 100:.{nd}f} %"


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def whole_run(path: Path, backend: str, work: Path) -> dict[str, Any]:
    """One whole ``pal-opt solve`` process on the instance file ``path`` (2,048-GPU target)."""
    import json

    from pal_opt.check import check
    from pal_opt.io import load_instance

    out = work / f"out-{path.stem}-{backend}.json"
    out.unlink(missing_ok=True)
    load = os.getloadavg()[0]
    cmd = [*cli(), "solve", str(path), "--method", "ilp", "--backend", backend, "--gap", str(GAP_2048),
           "--time-limit", f"{LIMIT_2048:g}", "-o", str(out)]
    r = run(cmd, LIMIT_2048 * 6 + 30, work)
    doc = json.loads(out.read_text()) if r["code"] == 0 and out.exists() else {}
    info = doc.get("info", {})
    return {"wall": r["wall"], "cpu": r["cpu"], "peak_rss": r["peak_rss"], "load": load, "code": r["code"],
            "status": doc.get("status", "error"), "gap": doc.get("gap"), "lp_s": info.get("relaxation_seconds"),
            "solver_status": info.get("solver_status"), "start": info.get("start_source"),
            "vars": info.get("num_vars"), "valid": bool(doc) and not check(load_instance(path), doc)}


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median wall time (the middle one of an odd number)."""
    return sorted(runs, key=lambda r: r["wall"])[(len(runs) - 1) // 2]


def bench_2048(seeds: int, reps: int, progress: Any) -> tuple[list[str], dict[str, Any]]:
    import tempfile

    from pal_opt.io import save_instance

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for seed in range(seeds):
            path = work / f"scale-256x8-s{seed}.json"
            save_instance(make_round(256, JOBS_2048, seed), path)
            for b in BACKENDS_2048:
                runs = []
                for _ in range(reps):
                    runs.append(whole_run(path, b, work))
                    progress(f"2048 s{seed} {b}: {runs[-1]['wall']:.2f} s")
                mid = _median_run(runs)
                ok = (mid["gap"] is not None and mid["gap"] <= GAP_2048 + 1e-12 and mid["wall"] <= WALL_2048
                      and all(r["valid"] for r in runs) and max(r["peak_rss"] for r in runs) <= MEM_2048)
                rows.append({**mid, "seed": seed, "backend": b, "walls": [r["wall"] for r in runs],
                             "peak_max": max(r["peak_rss"] for r in runs), "all_valid": all(r["valid"] for r in runs),
                             "met": ok})
    lines = [
        f"## 2,048 GPUs (256 × 8, flat), {JOBS_2048} queued jobs, prefix admission (whole processes)",
        "",
        f"Target, for every backend and seed: `pal-opt solve --method ilp --gap {GAP_2048:g} --time-limit "
        f"{LIMIT_2048:g}` proves a gap ≤ 0.5 % within {WALL_2048:g} s of wall time, peak memory ≤ 2 GiB.  "
        f"{reps} runs per seed and backend; *wall* is the median run's (all runs listed), *peak* the largest.",
        "",
        "| seed | backend | wall s (runs) | CPU s | load | status | gap | path | LP s | variables | peak RSS MiB | "
        "valid | meets |",
        "|---:|---|---|---:|---:|---|---:|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        path = ("LP bound + start" if str(r["solver_status"]).startswith("start placement") else
                f"search ({r['solver_status']})")
        walls = ", ".join(f"{w:.2f}" for w in r["walls"])
        cpu = "–" if r["cpu"] is None else f"{r['cpu']:.2f}"
        lp = "–" if r["lp_s"] is None else f"{r['lp_s']:.2f}"
        lines.append(
            f"| {r['seed']} | {r['backend']} | {r['wall']:.2f} ({walls}) | {cpu} | {r['load']:.1f} | {r['status']} | "
            f"{_pct(r['gap'])} | {path} | {lp} | {r['vars'] or '–'} | {r['peak_max'] / MiB:.0f} | "
            f"{'yes' if r['all_valid'] else 'NO'} | {'yes' if r['met'] else 'no'} |"
        )
    summary: dict[str, Any] = {}
    lines += ["", "Per backend (medians over seeds of each seed's median run):", "",
              "| backend | median wall s | worst wall s | median gap | worst gap | max peak RSS MiB | seeds meeting | "
              "target met |",
              "|---|---:|---:|---:|---:|---:|---:|---|"]
    for b in BACKENDS_2048:
        rs = [r for r in rows if r["backend"] == b]
        gaps = [r["gap"] for r in rs if r["gap"] is not None]
        met = sum(r["met"] for r in rs)
        summary[b] = {"met": met == len(rs), "seeds_met": met, "n": len(rs)}
        lines.append(
            f"| {b} | {_med([r['wall'] for r in rs]):.2f} | {max(r['wall'] for r in rs):.2f} | "
            f"{_pct(_med(gaps) if gaps else None)} | {_pct(max(gaps) if gaps else None)} | "
            f"{max(r['peak_max'] for r in rs) / MiB:.0f} | {met}/{len(rs)} | {'yes' if met == len(rs) else 'no'} |"
        )
    lines += [
        "",
        "*path*: `LP bound + start` = the backend's LP solver (HiGHS's simplex, GLOP for CP-SAT, CLP in the CBC "
        "binary) bounded the round program's LP relaxation and the better start placement (PAL's greedy or the "
        "packing greedy) was already within 0.5 % of it, so no search ran; `search (...)` = the start was not "
        "within 0.5 % of the LP bound and the backend's search ran in the time left (its status).  *LP s*: the LP "
        "relaxation alone.  The time limit covers the whole solve; the wall time also includes starting Python, "
        "importing the solvers, reading the instance and writing the answer.",
        "",
    ]
    return lines, summary


def bench_8192(seeds: int, ks: tuple[int, ...], progress: Any, racks: int = 0) -> tuple[list[str], dict[str, Any]]:
    from pal_opt.binning import binned_factors
    from pal_opt.check import check
    from pal_opt.ilp.partition import solve_partitioned
    from pal_opt.parallel import make_executor, measure_peak

    direct = []
    for seed in range(seeds):
        direct.append(fresh(direct_run, 1024, 2400, seed, "highs", 0.02, 30.0, racks))
        progress(f"8192 r{racks} s{seed} direct")
    t0 = time.perf_counter()
    pool = make_executor(None, workers=2)
    [f.result() for f in [pool.submit(_warm) for _ in range(2)]]
    cold = time.perf_counter() - t0
    part = []
    try:
        for seed in range(seeds):
            inst = make_round(1024, 2400, seed, racks)
            binned_factors(inst.cluster)
            for k in ks:
                res, mem = measure_peak(solve_partitioned, inst, k, backend="highs", gap=0.01, time_limit=20.0,
                                        bound_time_limit=25.0, executor=pool)
                pi = res.info["partition"]
                peaks = [p["peak_rss"] for p in pi["parts"] if p["peak_rss"] is not None]
                bpk = res.info.get("bound_peak_rss") or 0
                part.append({
                    "seed": seed, "k": pi["k"], "time": mem.seconds, "build": res.build_seconds,
                    "wall_parts": pi["parts_wall_seconds"], "bound_s": res.info.get("bound_seconds"),
                    "gap": res.gap, "status": res.status.value, "geomean": res.geomean_slowdown,
                    "jobs": res.jobs_placed, "scheme": pi["scheme"], "dealing": pi["job_dealing"],
                    "part_gaps": [p["gap"] for p in pi["parts"]],
                    "part_max_s": max(p["seconds"] or 0 for p in pi["parts"]),
                    "parts_bound_sum": pi["parts_bound_sum"], "bound": res.bound, "gpus_used": res.gpus_used,
                    "parent_peak": mem.peak_rss, "part_peak": max(peaks) if peaks else 0, "bound_peak": bpk,
                    "violations": len(check(inst, res)), "bound_source": res.info.get("bound_source"),
                })
                progress(f"8192 r{racks} s{seed} k={k}")
    finally:
        pool.close()
    shape = "flat" if not racks else f"{racks} racks of {1024 // racks} servers"
    lines = [
        f"## 8,192 GPUs (1,024 × 8, {shape}), 2,400 queued jobs, prefix admission",
        "",
        "Target: gap ≤ 2 % within 30 s.",
        "",
        "### Direct (HiGHS, whole round, gap target 2 %, 30 s limit)",
        "",
        "| seed | time s | build s | solve s | status | gap | path | admitted jobs | variables | rows | classA levels | "
        "peak RSS MiB | binning s |",
        "|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in direct:
        path = ("flow-free LP bound + start" if r.get("relaxation") else "LP bound + start") \
            if str(r["solver_status"]).startswith("start placement") else f"MIP ({r['incumbent']})"
        lv = (r["levels"] or {}).get("classA", "–")
        lines.append(
            f"| {r['seed']} | {r['time']:.2f} | {r['build']:.2f} | {r['solve']:.2f} | {r['status']} | {_pct(r['gap'])} | "
            f"{path} | {r['jobs']} | {_dash(r['vars'])} | {_dash(r['rows'])} | {lv} | {r['peak_rss'] / MiB:.0f} | {r['binning']:.2f} |"
        )
    lines += [
        "",
        f"### Partitioned (POP-style, HiGHS, local pool of 2 workers; pool cold start {cold:.1f} s, not counted)",
        "",
        "| seed | k | time s | partition s | parts + bound wall s | LP bound s | slowest part s | gap vs whole LP | "
        "part gaps | parts' bounds over whole LP | status | peak MiB: parent / LP task / largest part / sum |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|",
    ]
    for r in part:
        over = (math.expm1((r["parts_bound_sum"] - r["bound"]) / r["gpus_used"])
                if r["parts_bound_sum"] is not None and r["bound"] is not None else None)
        pg = ", ".join(_pct(g, 2) for g in r["part_gaps"])
        tot = (r["parent_peak"] + r["bound_peak"] + r["part_peak"]) / MiB
        lines.append(
            f"| {r['seed']} | {r['k']} | {r['time']:.2f} | {r['build']:.2f} | {r['wall_parts']:.2f} | "
            f"{(r['bound_s'] or 0):.2f} | {r['part_max_s']:.2f} | {_pct(r['gap'])} | {pg} | {_pct(over)} | {r['status']} | "
            f"{r['parent_peak'] / MiB:.0f} / {r['bound_peak'] / MiB:.0f} / {r['part_peak'] / MiB:.0f} / {tot:.0f} |"
        )
    summary: dict[str, Any] = {
        "direct": {"median_time": _med([r["time"] for r in direct]), "median_gap": _med([r["gap"] for r in direct]),
                   "max_gap": max(r["gap"] for r in direct), "max_time": max(r["time"] for r in direct),
                   "peak": max(r["peak_rss"] for r in direct) / MiB},
    }
    lines += ["", "Medians over seeds:", "",
              "| method | median time s | worst time s | median gap | worst gap | max peak MiB (sum of processes) | "
              "≤ 2 % within 30 s |",
              "|---|---:|---:|---:|---:|---:|---|"]
    d = summary["direct"]
    met_d = all(r["gap"] is not None and r["gap"] <= 0.02 and r["time"] <= 30 for r in direct)
    lines.append(f"| direct HiGHS | {d['median_time']:.2f} | {d['max_time']:.2f} | {_pct(d['median_gap'])} | "
                 f"{_pct(d['max_gap'])} | {d['peak']:.0f} | {'yes' if met_d else 'no'} ({len(direct)} seeds) |")
    summary["direct"]["met"] = met_d
    for k in sorted({r["k"] for r in part}):
        rs = [r for r in part if r["k"] == k]
        met = all(r["gap"] is not None and r["gap"] <= 0.02 and r["time"] <= 30 for r in rs)
        peak = max((r["parent_peak"] + r["bound_peak"] + r["part_peak"]) for r in rs) / MiB
        summary[f"k{k}"] = {"median_time": _med([r["time"] for r in rs]), "median_gap": _med([r["gap"] for r in rs]),
                            "met": met, "peak": peak}
        lines.append(
            f"| partitioned k = {k} | {_med([r['time'] for r in rs]):.2f} | {max(r['time'] for r in rs):.2f} | "
            f"{_pct(_med([r['gap'] for r in rs]))} | {_pct(max(r['gap'] for r in rs))} | {peak:.0f} | "
            f"{'yes' if met else 'no'} ({len(rs)} seeds) |"
        )
    sources = sorted({str(r["bound_source"]) for r in part})
    best = min(summary.items(), key=lambda kv: kv[1]["median_time"])[0]
    lines += [
        "",
        f"Fastest by median time: **{'direct' if best == 'direct' else 'partitioned k = ' + best[1:]}**.",
        "",
        f"Bound of the partitioned runs: {'; '.join(sources)}.  Above 4,096 free GPUs it is the LP optimum of the "
        "whole round's flow-free relaxation (`formulations/round_ilp.md` §11), below it the LP relaxation of the "
        "whole round's program "
        "(every placement of the admitted jobs is an integral point of that program with the same cost, so the LP "
        "optimum is below every placement's cost, the merged one included).  The parts' own bounds summed "
        "(*parts' bounds over whole LP*) are not a bound of the whole round (each part is restricted to its "
        "servers); their excess over the whole LP shows what the partition itself costs at most.",
        "",
    ]
    return lines, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--seeds-2048", type=int, default=5, help="2,048-GPU seeds 0..N-1 (default 5)")
    ap.add_argument("--reps-2048", type=int, default=REPS_2048,
                    help=f"timed runs per 2,048-GPU seed and backend (default {REPS_2048})")
    ap.add_argument("--seeds-8192", type=int, default=3, help="8,192-GPU seeds 0..N-1 (default 3)")
    ap.add_argument("--ks", default="2,4,8", help="comma-separated part counts of the partitioned runs (default 2,4,8)")
    ap.add_argument("--racks-8192", default="0,32",
                    help="8,192-GPU rounds to run: racks per round, 0 = flat (default 0,32)")
    ap.add_argument("--skip-2048", action="store_true", help="skip the 2,048-GPU target")
    ap.add_argument("--skip-8192", action="store_true", help="skip the 8,192-GPU target")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "seeds_2048", "reps_2048", "seeds_8192")
    ks = split_list(ap, "--ks", args.ks, expected="comma-separated part counts (integers >= 1)")
    check_values(ap, "--ks", ks, lambda k: k >= 1, "part counts are integers >= 1")
    racks = split_list(ap, "--racks-8192", args.racks_8192, expected="comma-separated rack counts (0 = flat to 1024)")
    check_values(ap, "--racks-8192", racks, lambda r: 0 <= r <= 1024,
                 "racks per round are integers from 0 (flat) to 1024 (the servers)")
    partial = partial_run(ap, args, "skip_2048", "skip_8192", "seeds_2048", "reps_2048", "seeds_8192", also={
        "--ks": ks != split_list(ap, "--ks", ap.get_default("ks")),
        "--racks-8192": racks != split_list(ap, "--racks-8192", ap.get_default("racks_8192"))})
    out = output_dir(args, "scale", partial=partial) / "scale.md"
    from tqdm import tqdm

    n = (0 if args.skip_2048 else args.seeds_2048 * len(BACKENDS_2048) * args.reps_2048) + (
        0 if args.skip_8192 else args.seeds_8192 * (1 + len(ks)) * len(racks))
    bar = tqdm(total=n, desc="scale", file=sys.stderr, disable=None)  # drawn only when stderr is a terminal

    def progress(label: str) -> None:
        bar.set_postfix_str(label)
        bar.update(1)

    head = ["# Scale targets", "", f"{produced_by(__file__, argv)}.", "", "Machine:", "", *machine(), ""]
    src = "Longhorn measurements (../shared)" if measurements() else "synthetic Longhorn-like factors (../shared absent)"
    head += [f"Factors: {src}; λ = 1.7; binning `pal-artifact`.", ""]
    t0 = time.perf_counter()
    body: list[str] = []
    if not args.skip_2048:
        lines, _ = bench_2048(args.seeds_2048, args.reps_2048, progress)
        body += lines
    if not args.skip_8192:
        for r in racks:
            lines, _ = bench_8192(args.seeds_8192, tuple(ks), progress, r)
            body += lines
    bar.close()
    load = load_average()
    tail = [f"Run time {time.perf_counter() - t0:.0f} s; load average at the end: {load} (other work shared the "
            "two cores during the run).", ""]
    text = "\n".join(head + body + tail)
    write_page("scale", out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
