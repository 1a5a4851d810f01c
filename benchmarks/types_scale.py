"""Scale check of the round program with GPU types: 2,048 GPUs of three types, HiGHS, 5 s.

Runs for about 2 min on the machine of the committed page (the page does not say; timed once under
``nice`` on 2026-12-07 at load 3.5-4.7: 131 s; its 15 rounds × 3 runs at the page's median times are
71 s); ``--seeds``, ``--backends`` and ``--repeats`` run fewer.

Rounds: :func:`pal_opt.generate.generate_typed_instance` on ``aws:64x8,rtx:96x8,dgx-ext:96x8``
(512 + 768 + 768 GPUs, flat), 600 queued jobs of the Sia-Philly mix, 20 % of them guaranteed on
one type, λ = 1.7, factors drawn from the Longhorn measurements (synthetic when ``../shared``
is absent) and, when the Sia profiles are in ``../shared``, each class's relative throughput
per type from them (:data:`pal_opt.generate.SIA_APP_OF_CLASS`); without them every type runs
at 1.0 and types only constrain.  Seeds 0-4 by default.

Each round is solved by ``solve_ilp(backend=B, gap=0.005, time_limit=5)`` for each backend
``B`` of ``--backends`` (default all three), prefix admission; *time* is the whole call
(admission, formulation, start placements, LP bound, MIP, decoding, pricing), generation and
binning outside it.

Usage::

    python benchmarks/types_scale.py [--seeds 5] [--backends highs,cpsat,cbc] [--repeats 3] [--update | --out-dir DIR]

Writes ``types_scale.md`` (the committed one in ``benchmarks/results/`` only with ``--update``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import (  # noqa: E402
    add_output_arguments,
    at_least,
    check_backends,
    load_average,
    output_dir,
    partial_run,
    produced_by,
    progress_bar,
    run_time,
    split_list,
    write_page,
)
from suite import machine, measurements  # noqa: E402

CLUSTER = "aws:64x8,rtx:96x8,dgx-ext:96x8"
PROFILES = Path(__file__).resolve().parents[2] / "shared" / "data" / "sia-artifact" / "profiles"


def throughput() -> dict[str, dict[str, float]] | None:
    """PAL's classes' relative throughput per type from the Sia profiles (None if absent)."""
    if not PROFILES.is_dir():
        return None
    from pal_opt.generate import SIA_APP_OF_CLASS
    from pal_opt.gputypes import parse_cluster_spec
    from pal_opt.hetero import load_applications, throughput_table

    apps = load_applications(PROFILES, sorted(set(SIA_APP_OF_CLASS.values())))
    return throughput_table(apps, [t for t, _, _ in parse_cluster_spec(CLUSTER)], SIA_APP_OF_CLASS)


def run_repeated(seed: int, table: dict[str, dict[str, float]] | None, backend: str, repeats: int) -> dict[str, Any]:
    """:func:`run` ``repeats`` times: the last run's figures (every run gives the same placement),
    its *time* the median over the runs and *times* all of them."""
    runs = [run(seed, table, backend) for _ in range(max(1, repeats))]
    times = sorted(r["time"] for r in runs)
    return {**runs[-1], "time": float(statistics.median(times)), "times": times}


def run(seed: int, table: dict[str, dict[str, float]] | None, backend: str = "highs") -> dict[str, Any]:
    """One round: generated, binned, then solved with ``backend`` for at most 5 s."""
    from pal_opt.binning import binned_factors
    from pal_opt.check import check
    from pal_opt.generate import generate_typed_instance
    from pal_opt.ilp import solve_ilp

    inst = generate_typed_instance(CLUSTER, 600, seed=seed, guaranteed_fraction=0.2, measurements=measurements(),
                                   throughput=table)
    binned_factors(inst.cluster, inst.params.binning)
    t0 = time.perf_counter()
    res = solve_ilp(inst, backend=backend, gap=0.005, time_limit=5.0)
    seconds = time.perf_counter() - t0
    info = res.info
    starts = {k[len("start_"):-len("_objective")]: v for k, v in info.items()
              if k.startswith("start_") and k.endswith("_objective")}
    return {"seed": seed, "backend": backend, "time": seconds, "status": str(res.status), "gap": res.gap, "jobs": res.jobs_placed,
            "guaranteed": sum(1 for j in inst.jobs if j.kind == "guaranteed"), "vars": info.get("num_vars"),
            "rows": info.get("num_rows"), "lanes": info.get("num_profiles"), "source": info.get("start_source"),
            "starts": starts, "lp": info.get("program_relaxation"), "bound": res.bound, "objective": res.objective, "valid": not check(inst, res)}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.3f} %"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def _meets(r: dict[str, Any]) -> bool:
    """The target: a proven gap of at most 0.5 % within 5 s, a valid placement."""
    return r["gap"] is not None and r["gap"] <= 0.005 and max(r.get("times", [r["time"]])) <= 5.0 and r["valid"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    ap.add_argument("--backends", default="highs,cpsat,cbc", help="comma-separated backends (default highs,cpsat,cbc)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per seed and backend; time = their median (default 3)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "seeds")
    backends = split_list(ap, "--backends", args.backends, str, "comma-separated backend names")
    check_backends(ap, "--backends", backends)
    at_least(ap, args, 1, "repeats")
    partial = partial_run(ap, args, "seeds", "repeats", also={"--backends": backends != ap.get_default("backends").split(",")})
    out = output_dir(args, "types_scale", partial=partial) / "types_scale.md"
    table = throughput()
    host = machine()  # before the runs: its load average is the one at the start
    rows = []
    with progress_bar(len(backends) * args.seeds, "types_scale", "round") as bar:  # on a terminal only
        for b in backends:
            for seed in range(args.seeds):
                rows.append(run_repeated(seed, table, b, args.repeats))
                bar.update(1)
    src = "Longhorn measurements (../shared)" if measurements() else "synthetic Longhorn-like factors"
    tput = "Sia profiles (1-GPU throughput ratios)" if table else "1.0 on every type (profiles absent)"
    lines = ["# Round program with GPU types at 2,048 GPUs", "", f"{produced_by(__file__, argv)}.", "",
             "Machine:", "", *host, "",
             f"*time s*: the median of the {args.repeats} runs (every run gives the same "
             "placement; the other columns are the same in each), the slowest in brackets; *meets* takes the slowest.", "",
             f"Cluster `{CLUSTER}`; 600 queued jobs, 20 % guaranteed; factors: {src}; throughput: {tput}; "
             "gap target 0.5 %, 5 s limit.", "",
             "| seed | backend | time s (slowest) | status | gap at 5 s | admitted jobs | guaranteed in queue | variables | rows | "
             "profiles | start | start objectives | objective | bound | LP by | valid | meets |",
             "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---|---|---|"]
    for r in rows:
        starts = ", ".join(f"{k} {v:.1f}" for k, v in r["starts"].items())
        lines.append(f"| {r['seed']} | {r['backend']} | {r['time']:.2f} ({max(r['times']):.2f}) | {r['status']} | {_pct(r['gap'])} | {r['jobs']} | "
                     f"{r['guaranteed']} | {r['vars']} | {r['rows']} | {r['lanes']} | {r['source']} | {starts} | "
                     f"{r['objective']:.1f} | {_num(r['bound'])} | {r['lp'] or '–'} | {'yes' if r['valid'] else 'NO'} | "
                     f"{'yes' if _meets(r) else 'no'} |")
    load = load_average()
    lines += ["", "*start*: the start placement the solver was given (the cheapest): `packing` places jobs by size, "
              "each on its cheapest type that leaves room for the rest; `packing-regret` first gives every job a "
              "type by regret (`pal_opt.ilp.heuristic`); `pal` is PAL's greedy with types (left out when it "
              "cannot place every admitted job); when the cheapest is not within the gap of the LP bound, "
              "`packing-lp` packs the jobs on the lanes the LP relaxation chose (`pal_opt.ilp.lanelp`), and "
              "`exchange` / `exchange-lp` are the cheapest start and the `packing-lp` one after bottleneck "
              "exchanges (`pal_opt.ilp.improve`).  *LP by*: the LP solver of the round program's relaxation "
              "(HiGHS under every backend on rounds with GPU types, `pal_opt.ilp.solve.PROGRAM_LP_OWN_MAX_ENTRIES`).  *meets*: gap ≤ 0.5 % within 5 s, valid placement.", "",
              f"Load average at the end: {load} (other work shared the two cores).", ""]
    text = "\n".join(lines)
    write_page("types_scale", out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
