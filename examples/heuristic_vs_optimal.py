"""How far is PAL's greedy placement from the optimum of the same round?

For a few generated rounds, place the queue with each greedy policy, then ask the integer
program for the best placement of exactly the jobs that policy placed (``jobs=...``), and report
the gap in geometric-mean slowdown.  The exact optimum is never worse than the greedy.

    python examples/heuristic_vs_optimal.py
"""

from __future__ import annotations

import pal_opt
from pal_opt.streams import PipeSafe


def main(rounds: int = 5, nodes: int = 16, gpus_per_node: int = 4, jobs: int = 40) -> list[dict[str, object]]:
    rows = []
    for seed in range(rounds):
        inst = pal_opt.generate_instance(nodes, gpus_per_node, jobs, seed=seed)
        for method in ("pal", "pmfirst", "packed"):
            greedy = pal_opt.solve(inst, method)
            exact = pal_opt.solve(inst, "ilp", backend="highs", jobs=list(greedy.placements), time_limit=30)
            assert exact.objective <= greedy.objective + 1e-9
            gap = greedy.geomean_slowdown / exact.geomean_slowdown - 1.0
            rows.append({"seed": seed, "method": method, "greedy": greedy.geomean_slowdown,
                         "optimal": exact.geomean_slowdown, "status": exact.status.value, "gap": gap})
    # "optimal" is the program's answer; its status says whether it was proven (a 30 s limit can
    # leave it "feasible", its gap to the bound in exact.gap)
    print(f"{'seed':>4} {'method':<8} {'greedy':>8} {'optimal':>8} {'gap':>7}  status")
    for r in rows:
        print(f"{r['seed']:>4} {r['method']:<8} {r['greedy']:8.4f} {r['optimal']:8.4f} {r['gap']:7.2%}  {r['status']}")
    return rows


if __name__ == "__main__":
    with PipeSafe():  # output piped into head: the rest dropped, no BrokenPipeError
        main()
