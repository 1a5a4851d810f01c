"""Round integer program on the PAL paper's cluster: 16 servers × 4 GPUs, 40 queued jobs.

Runs for about 2 min on the machine of the committed page (its own run time: 116 s); ``--no-scale``
leaves out the 256- and 2,048-GPU rounds.

Each of 20 seeded rounds (:func:`pal_opt.generate.generate_instance`, λ = 1.7, Sia-Philly job
mix; factors drawn from the Longhorn measurements in ``../shared`` when present, else the
synthetic Longhorn-like model) is solved with prefix admission by every installed backend to
proven optimality.  Reported: median and worst ``solve_seconds`` (inside the solver call),
``build_seconds`` (formulation) and their sum, the number of rounds proven optimal, and whether
the backends agree.  Target: median ≤ 25 ms (the Sia ILP reports 96 ms at 64 GPUs).  A warm-up
solve per backend runs first (imports, HiGHS scheduler, CBC binary lookup) and is not counted.

Scale section (HiGHS only): a 256-GPU round (64 × 4, 160 jobs) and 2,048-GPU rounds
(256 × 8, 600 jobs): time to proven optimality (60 s limit) and to a proven 0.5 % gap on the
geometric-mean slowdown (target for later: ≤ 5 s at 2,048 GPUs).

Usage::

    python benchmarks/ilp_paper_cluster.py [--rounds 20] [--no-scale] [--update | --out-dir DIR]

Writes ``ilp_paper_cluster.md``; it replaces the committed one in ``benchmarks/results/`` only
with ``--update`` (see ``benchmarks/_results.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _results import (
    add_output_arguments,
    at_least,
    cpu_model,
    load_average,
    memory_gib,
    output_dir,
    partial_run,
    produced_by,
    progress_bar,
    run_time,
    write_page,
)

from pal_opt.binning import binned_factors
from pal_opt.generate import generate_instance
from pal_opt.ilp import available_backends, build_formulation, get_backend, solve_ilp
from pal_opt.ilp.backends import SolveOptions
from pal_opt.ilp.backends.highs import HighsBackend
from pal_opt.result import PlacementResult, Status
from pal_opt.solve import solve

ROOT = Path(__file__).resolve().parents[1]
LONGHORN = ROOT.parent / "shared" / "data" / "pal-artifact" / "variability" / "longhorn"
TARGET_MS = 25.0


def measurements() -> dict[str, Path] | None:
    """Longhorn measurement files per class, or None when ``../shared`` is absent."""
    if not LONGHORN.is_dir():
        return None
    from pal_opt.io.measurements import longhorn_paths

    return longhorn_paths(LONGHORN)


def paper_round(seed: int, meas: dict[str, Path] | None):  # type: ignore[no-untyped-def]
    return generate_instance(16, 4, 40, seed=seed, locality_penalty=1.7, measurements=meas,
                             name=f"paper-16x4-j40-s{seed}")


def machine() -> list[str]:
    cpu = cpu_model(platform.processor() or "?")
    mem = memory_gib()
    load = load_average()
    versions = ", ".join(f"{b} {get_backend(b).version()}" for b in available_backends())
    return [
        f"- CPU: {cpu}, {os.cpu_count()} logical cores; memory {mem}",
        f"- Python {platform.python_version()} on {platform.system()} {platform.release()}",
        f"- Solvers: {versions}",
        f"- Load average (1/5/15 min) at the start: {load}",
    ]


#: The scale section's rounds: (label, servers, GPUs per server, jobs, seed).
SCALE_CASES = [("64×4, 160 jobs", 64, 4, 160, s) for s in range(2)] + [("256×8, 600 jobs", 256, 8, 600, s) for s in range(3)]


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.1f}"


def _no_tick() -> None:
    pass


def bench_paper(rounds: int, tick: Callable[[], None] = _no_tick) -> tuple[list[str], dict[str, list[PlacementResult]]]:
    meas = measurements()
    insts = [paper_round(s, meas) for s in range(rounds)]
    for inst in insts:
        binned_factors(inst.cluster)  # cached per cluster; not part of any timing below
    source = "Longhorn measurements (../shared)" if meas else "synthetic Longhorn-like factors (../shared absent)"
    results: dict[str, list[PlacementResult]] = {}
    wall: dict[str, list[float]] = {}
    for b in available_backends():
        solve_ilp(insts[0], backend=b)  # warm-up, not counted
        results[b], wall[b] = [], []
        for inst in insts:
            t = time.perf_counter()
            results[b].append(solve_ilp(inst, backend=b))
            wall[b].append(time.perf_counter() - t)
            tick()
    pal = [solve(inst, "pal") for inst in insts]
    lines = [
        f"## 16 × 4 GPUs, 40 queued jobs, prefix admission ({rounds} rounds, seeds 0–{rounds - 1})",
        "",
        f"Factors: {source}; λ = 1.7; binning `pal-artifact`.  Times in milliseconds; "
        f"target: median solve + build ≤ {TARGET_MS:.0f} ms.",
        "",
        "| backend | median solve | worst solve | median build | median solve + build | proven optimal | "
        "median translate | median end-to-end |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b, rs in results.items():
        solve_s = [r.solve_seconds for r in rs]
        build_s = [r.build_seconds for r in rs]
        total = [r.solve_seconds + r.build_seconds for r in rs]
        tr = [float(r.info.get("translate_seconds", 0.0)) for r in rs]
        opt = sum(r.status == Status.OPTIMAL for r in rs)
        lines.append(
            f"| {b} | {_ms(solve_s)} | {max(solve_s) * 1000:.1f} | {_ms(build_s)} | {_ms(total)} | "
            f"{opt}/{len(rs)} | {_ms(tr)} | {_ms(wall[b])} |"
        )
    ref = next(iter(results.values()))
    worst = 0.0
    for rs in results.values():
        for r, q in zip(rs, ref, strict=True):
            worst = max(worst, abs(r.geomean_slowdown / q.geomean_slowdown - 1))
    sizes = [r.info["num_vars"] for r in ref]
    rows = [r.info["num_rows"] for r in ref]
    jobs = [len(r.placements) for r in ref]
    gain = [1 - r.geomean_slowdown / p.geomean_slowdown for r, p in zip(ref, pal, strict=True)]
    lines += [
        "",
        f"- Backends agree on the geometric-mean slowdown within {worst:.1e} (relative).",
        f"- Admitted jobs per round: median {statistics.median(jobs):.0f} (range {min(jobs)}–{max(jobs)}); "
        f"program size: median {statistics.median(sizes):.0f} variables, {statistics.median(rows):.0f} rows.",
        f"- Geometric-mean slowdown vs PAL's greedy placement of its own (pal-order) set: median "
        f"{statistics.median(gain) * 100:.2f} % lower (PAL places the same prefix here in "
        f"{sum(set(r.placements) == set(p.placements) for r, p in zip(ref, pal, strict=True))}/{len(ref)} rounds).",
        "- *solve* is the solver call only; *build* is the formulation; *translate* (formulation → "
        "solver model, outside *solve*); *end-to-end* is the whole `solve_ilp` call (admission, build, "
        "start placements, translate, solve, decode, pricing; the binned factors are cached per cluster "
        "and computed before timing).",
        "",
    ]
    return lines, results


def bench_scale(tick: Callable[[], None] = _no_tick) -> list[str]:
    lines = [
        "## Scale (HiGHS)",
        "",
        "| round | GPUs | admitted jobs | variables | rows | build s | to optimality: solve s | status | gap | "
        "LP gap | to 0.5 % gap: solve s | end-to-end s | gap | start | start gap |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for label, n, g, j, seed in SCALE_CASES:
        inst = generate_instance(n, g, j, seed=seed)
        binned_factors(inst.cluster)
        a = solve_ilp(inst, backend="highs", time_limit=60)
        t = time.perf_counter()
        b = solve_ilp(inst, backend="highs", gap=0.005, time_limit=60)
        wall = time.perf_counter() - t
        d = max(a.gpus_used, 1)
        lp = HighsBackend().relaxation_bound(build_formulation(inst), SolveOptions())
        lp_gap = f"{math.expm1((a.objective - lp) / d) * 100:.3f} %" if lp is not None else "–"
        start = min(v for k, v in b.info.items() if k.startswith("start_") and k.endswith("_objective"))
        sgap = math.expm1((start - (b.bound if b.bound is not None else start)) / d)
        lines.append(
            f"| {label} (seed {seed}) | {n * g} | {len(a.placements)} | {a.info['num_vars']} | {a.info['num_rows']} | "
            f"{a.build_seconds:.2f} | {a.solve_seconds:.2f} | {a.status.value} | {(a.gap or 0) * 100:.3f} % | {lp_gap} | "
            f"{b.solve_seconds:.2f} | {wall:.2f} | {(b.gap or 0) * 100:.3f} % | {b.info['start_source']} | {sgap * 100:.2f} % |"
        )
        tick()
    lines += [
        "",
        "*gap* is the relative gap of the geometric-mean slowdown, exp((objective − bound)/D) − 1, with the bound "
        "the solver proved; *LP gap* is that of the best objective found over the LP relaxation's bound; *start* is "
        "the cheaper start placement (PAL's greedy or the packing greedy) and *start gap* its gap to the bound of the "
        "0.5 % run.  *end-to-end* is the whole `solve_ilp` call (binned factors cached beforehand).",
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--rounds", type=int, default=20, help="seeded 64-GPU rounds (default 20)")
    ap.add_argument("--no-scale", action="store_true", help="skip the 256- and 2,048-GPU scale section")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "rounds")
    # fewer or more rounds, or no scale section: not the committed page's runs
    partial = partial_run(ap, args, "rounds", "no_scale")
    out = output_dir(args, "ilp_paper_cluster", partial=partial) / "ilp_paper_cluster.md"
    head = ["# Round integer program: benchmark", "", f"{produced_by(__file__, argv)}.", "", "Machine:", "", *machine(), ""]
    t0 = time.perf_counter()
    runs = len(available_backends()) * args.rounds + (0 if args.no_scale else len(SCALE_CASES))
    with progress_bar(runs, "ilp_paper_cluster", "round") as bar:  # on a terminal only
        paper, _ = bench_paper(args.rounds, lambda: bar.update(1))
        scale = [] if args.no_scale else bench_scale(lambda: bar.update(1))
    load = load_average()
    tail = [f"Run time {time.perf_counter() - t0:.0f} s; load average at the end: {load}.", ""]
    text = "\n".join(head + paper + scale + tail)
    write_page("ilp_paper_cluster", out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
