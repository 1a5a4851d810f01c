"""Why `racked_rounds.py`'s later rounds end at the time limit: the same rounds with and without the restart cost.

Runs for about 6.5 min on the machine of the committed page (the page does not say: its wall times,
HiGHS's medians × 3 runs and CP-SAT's and CBC's single runs, make 371 s, plus the loop's PAL
rounds); ``--reps``, ``--first`` and ``--last`` run fewer.

Rounds: those of ``racked_rounds.py``'s loop (seed 0; PAL's answers as the running jobs, so the
rounds are the same in every run), rounds ``--first`` to ``--last`` (default 10-20), each solved
as the loop saw it (``restart_cost=30``) and with ``restart_cost=0`` (the same jobs, placements
and cluster; only ``params.restart_cost`` changed), interleaved.  Per round and restart cost:
``pal_opt.solve(inst, "ilp", backend=B, time_limit=5)`` ``--reps`` times for HiGHS (default 3,
the median wall time reported) and once each for CP-SAT and CBC; the statuses, the relative
gap (:func:`pal_opt.cost.relative_gap`), the objective, the LP relaxation's bound
(``info["relaxation_bound"]``) and the best start placement's cost.  Every answer passes
:func:`pal_opt.check`.

Usage::

    nice python benchmarks/racked_restart.py [--update | --out-dir DIR] [--reps 3] [--first 10] [--last 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import add_output_arguments, at_least, output_dir, partial_run, produced_by, run_time, wrote  # noqa: E402
from racked_rounds import LIMIT, RESTART, loop_rounds  # noqa: E402
from suite import machine  # noqa: E402

BACKENDS = ("highs", "cpsat", "cbc")


def run(inst: Any, backend: str) -> tuple[float, Any]:
    """One timed, checked solve."""
    import pal_opt

    t = time.perf_counter()
    res = pal_opt.solve(inst, "ilp", backend=backend, time_limit=LIMIT)
    wall = time.perf_counter() - t
    if pal_opt.check(inst, res):
        raise SystemExit(f"racked_restart: an invalid answer ({backend}): {pal_opt.check(inst, res)}")
    return wall, res


def measure(inst: Any, reps: int) -> dict[tuple[float, str], list[tuple[float, Any]]]:
    """Every (restart cost, backend) on one round, interleaved: HiGHS ``reps`` times, the others once."""
    variants = {rc: dataclasses.replace(inst, params=dataclasses.replace(inst.params, restart_cost=rc))
                for rc in (RESTART, 0.0)}
    out: dict[tuple[float, str], list[tuple[float, Any]]] = {}
    for rep in range(reps):
        for backend in BACKENDS if rep == 0 else ("highs",):
            for rc, variant in variants.items():
                out.setdefault((rc, backend), []).append(run(variant, backend))
    return out


def row(r: int, rc: float, backend: str, got: list[tuple[float, Any]]) -> str:
    res = got[0][1]
    starts = [v for k, v in res.info.items() if k.startswith("start_") and k.endswith("_objective")]
    gaps = [x.gap for _, x in got if x.gap is not None]
    lp = res.info.get("relaxation_bound")
    return (f"| {r} | {rc:g} | {backend} | {statistics.median(w for w, _ in got):.2f} | "
            f"{'/'.join(sorted({x.status.value for _, x in got}))} | "
            f"{'' if not gaps else f'{100 * max(gaps):.2f} %'} | {min(x.objective for _, x in got):.4f} | "
            f"{'' if lp is None else f'{lp:.4f}'} | {'' if not starts else f'{min(starts):.4f}'} |")


def summary(runs: dict[int, dict[tuple[float, str], list[tuple[float, Any]]]]) -> list[str]:
    lines = []
    for rc in (RESTART, 0.0):
        for backend in BACKENDS:
            got = [g for per in runs.values() for g in per[(rc, backend)]]
            proven = sum(1 for per in runs.values() if all(x.status.value == "optimal" for _, x in per[(rc, backend)]))
            lines.append(f"- restart cost {rc:g} s, {backend}: proven optimal in every run in {proven} of {len(runs)} rounds; "
                         f"median wall time {statistics.median(w for w, _ in got):.2f} s.")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--first", type=int, default=10, help="the first round (default 10)")
    ap.add_argument("--last", type=int, default=20, help="the last round (default 20)")
    ap.add_argument("--reps", type=int, default=3, help="HiGHS runs per round and restart cost (default 3)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 0, "first")
    if args.last < args.first:
        ap.error(f"--last {args.last}: at least --first ({args.first})")
    at_least(ap, args, 1, "reps")
    out_dir = output_dir(args, "racked_restart", partial=partial_run(ap, args, "first", "last", "reps"))
    instances = loop_rounds(0, args.last + 1)
    runs = {}
    for r in range(args.first, args.last + 1):
        runs[r] = measure(instances[r], args.reps)
        print(f"[{time.strftime('%H:%M:%S')}] round {r}: " + ", ".join(
            f"{rc:g}/{b} {got[0][1].status.value}" for (rc, b), got in runs[r].items()), file=sys.stderr, flush=True)
    lines = ["# The racked rounds that end at the time limit: restart cost 30 s against 0", "",
             f"{produced_by(__file__, argv)}.", "", "Machine:", "", *machine(), "",
             f"Rounds {args.first}-{args.last} of `racked_rounds.py`'s loop (seed 0), each solved as the loop saw it "
             f"(restart cost {RESTART:g} s of a 360 s round) and with the restart cost set to 0 (same jobs, placements "
             "and cluster), interleaved in one session; `pal_opt.solve(inst, \"ilp\", backend=B, time_limit=5)`.  "
             f"HiGHS: median wall time of {args.reps} runs (the gap column: the largest of them); CP-SAT and CBC: one "
             "run.  *gap*: relative gap of the geometric-mean slowdown; *LP*: the round program's LP relaxation; "
             "*best start*: the cheapest start placement (PAL's, the packing greedies).  Round 10 admits a pipeline "
             "(the stage program); the others run the round program.", "",
             *summary(runs), "",
             "| round | restart s | backend | wall s | status | gap | objective | LP | best start |",
             "|---:|---:|---|---:|---|---:|---:|---:|---:|"]
    for r, per in runs.items():
        lines += [row(r, rc, backend, got) for (rc, backend), got in per.items()]
    path = out_dir / "racked_restart.md"
    path.write_text("\n".join([*lines, ""]), encoding="utf-8")
    wrote("racked_restart", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
