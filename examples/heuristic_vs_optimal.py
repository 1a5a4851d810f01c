"""How far is PAL's greedy placement from the optimum of the same round?

For a few generated rounds, place the queue with each greedy policy, then ask the integer
program for the best placement of exactly the jobs that policy placed (``jobs=...``), and report
the gap in geometric-mean slowdown.  The exact optimum is never worse than the greedy.

    python examples/heuristic_vs_optimal.py [--rounds 5] [--first-seed 0] [--nodes 16]
        [--gpus-per-node 4] [--jobs 40] [--time-limit 30] [--csv gaps.csv]

``gap`` is the greedy's slowdown over the program's answer; ``proven`` bounds it from above by the
program's proven bound (the same as ``gap`` when the answer is proven optimal; larger when the
time limit left it ``feasible``).  Rounds of 16 x 4 GPUs take a few milliseconds each; larger ones
need a ``--time-limit`` long enough for the program: one that runs out first leaves a
``fallback`` (a greedy placement of the job set, PAL's or the packing greedy's, with no bound:
``proven`` is ``-``), which may be worse than the policy measured (``gap`` below 0).
"""

from __future__ import annotations

import argparse
import csv
import sys

import pal_opt
from pal_opt.streams import PipeSafe

COLUMNS = ("seed", "method", "greedy", "optimal", "status", "gap", "proven")


def main(rounds: int = 5, nodes: int = 16, gpus_per_node: int = 4, jobs: int = 40, *, first_seed: int = 0,
         time_limit: float = 30.0, csv_path: str | None = None) -> list[dict[str, object]]:
    rows = []
    for seed in range(first_seed, first_seed + rounds):
        inst = pal_opt.generate_instance(nodes, gpus_per_node, jobs, seed=seed)
        for method in ("pal", "pmfirst", "packed"):
            greedy = pal_opt.solve(inst, method)
            exact = pal_opt.solve(inst, "ilp", backend="highs", jobs=list(greedy.placements), time_limit=time_limit)
            if exact.status.value == "optimal":  # the optimum of the greedy's own job set
                assert exact.objective <= greedy.objective + 1e-9
            gap = greedy.geomean_slowdown / exact.geomean_slowdown - 1.0
            # exact.gap: the answer's own gap to the proven bound (0 when optimal; None without a
            # bound, when the time limit ran out before the program: a "fallback")
            proven = None if exact.gap is None else (1.0 + gap) * (1.0 + exact.gap) - 1.0
            rows.append({"seed": seed, "method": method, "greedy": greedy.geomean_slowdown,
                         "optimal": exact.geomean_slowdown, "status": exact.status.value, "gap": gap,
                         "proven": proven})
    print(f"{'seed':>4} {'method':<8} {'greedy':>8} {'optimal':>8} {'gap':>7} {'proven':>7}  status")
    for r in rows:
        proven = "-" if r["proven"] is None else f"{r['proven']:.2%}"
        print(f"{r['seed']:>4} {r['method']:<8} {r['greedy']:8.4f} {r['optimal']:8.4f} {r['gap']:7.2%} "
              f"{proven:>7}  {r['status']}")
    if csv_path:
        with open(csv_path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {csv_path}")
    return rows


def _arguments(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Greedy policies against the optimum of the jobs they placed, on "
                                            "generated rounds (pal_opt.generate_instance).")
    p.add_argument("--rounds", type=int, default=5, help="rounds, one per seed (default 5)")
    p.add_argument("--first-seed", type=int, default=0, help="the first round's seed (default 0)")
    p.add_argument("--nodes", type=int, default=16, help="servers (default 16)")
    p.add_argument("--gpus-per-node", type=int, default=4, help="GPUs per server (default 4)")
    p.add_argument("--jobs", type=int, default=40, help="queued jobs (default 40)")
    p.add_argument("--time-limit", type=float, default=30.0, help="seconds per program (default 30)")
    p.add_argument("--csv", default=None, metavar="FILE", help="write the rows as CSV")
    return p.parse_args(argv)


if __name__ == "__main__":
    with PipeSafe():  # output piped into head: the rest dropped, no BrokenPipeError
        args = _arguments(sys.argv[1:])
        main(args.rounds, args.nodes, args.gpus_per_node, args.jobs, first_seed=args.first_seed,
             time_limit=args.time_limit, csv_path=args.csv)
