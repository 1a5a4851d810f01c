"""A minimal scheduler written against pal-opt's public API.

Jobs arrive over time on a 4-server × 4-GPU cluster described as a networkx graph.  Every
round the scheduler builds a round from its own state, asks a :class:`pal_opt.RoundPolicy`
where to run the queue, and advances each placed job at the speed the one cost model gives it
(its slowest GPU × the locality penalty).  Run it with either policy::

    python examples/scheduler_loop.py            # exact integer program (HiGHS)
    python examples/scheduler_loop.py pal        # PAL's greedy policy
"""

from __future__ import annotations

import sys

import networkx as nx

import pal_opt
from pal_opt.streams import PipeSafe

ROUND_SECONDS = 60.0


def cluster_graph() -> nx.DiGraph:
    """4 servers × 4 GPUs; GPU 5 and GPU 14 are slow for ResNet-like jobs."""
    g = nx.DiGraph()
    for s in range(4):
        g.add_edge(("cluster",), ("server", f"node{s}"))
        for k in range(4):
            gid = 4 * s + k
            slow_a = 1.35 if gid in (5, 14) else 1.0 + 0.02 * (gid % 3)
            g.add_node(("gpu", gid), factors={"classA": slow_a, "classB": 1.0 + 0.01 * (gid % 2)})
            g.add_edge(("server", f"node{s}"), ("gpu", gid))
    return g


def main(method: str = "ilp") -> dict[str, float]:
    graph = cluster_graph()
    # (arrival second, id, GPUs, model, seconds of work on a median GPU)
    trace = [(0, "a", 4, "resnet50", 300), (0, "b", 2, "BERT", 200), (0, "c", 8, "resnet50", 400),
             (60, "d", 4, "GPT2", 250), (120, "e", 1, "resnet50", 100), (120, "f", 6, "BERT", 300)]
    options = {"backend": "highs", "time_limit": 10} if method == "ilp" else {}
    policy = pal_opt.RoundPolicy(method, **options)
    remaining = {jid: work for _, jid, _, _, work in trace}
    running: dict[str, tuple[int, ...]] = {}
    finished: dict[str, float] = {}
    now = 0.0
    while len(finished) < len(trace):
        queue = [
            {"id": jid, "demand": d, "model": m, **({"placement": list(running[jid])} if jid in running else {})}
            for t, jid, d, m, _ in trace
            if t <= now and jid not in finished
        ]
        if queue:
            round_ = pal_opt.make_instance(graph, queue, locality_penalty=1.7)
            result = policy.place(round_)
            assert pal_opt.check(round_, result) == [], "placement failed the independent checker"
            running = dict(result.placements)
            for jid, gpus in running.items():
                job = round_.job_by_id[jid]
                speed = 1.0 / pal_opt.job_slowdown(round_, round_.cluster.factors, job, gpus)
                done = min(remaining[jid], ROUND_SECONDS * speed)
                remaining[jid] -= done
                if remaining[jid] <= 1e-9:
                    finished[jid] = now + done / speed
            running = {j: g for j, g in running.items() if j not in finished}
            print(f"t={now:5.0f}s  {result.method:>4} {result.status.value:<8} placed {sorted(result.placements)}"
                  f"  geomean slowdown {result.geomean_slowdown:.3f}")
        now += ROUND_SECONDS
    arrival = {jid: t for t, jid, *_ in trace}
    jct = {jid: finished[jid] - arrival[jid] for jid in finished}
    print(f"average JCT {sum(jct.values()) / len(jct):.1f} s over {len(jct)} jobs with {method}")
    return jct


if __name__ == "__main__":
    with PipeSafe():  # output piped into head: the rest dropped, no BrokenPipeError
        try:
            main(sys.argv[1] if len(sys.argv) > 1 else "ilp")
        except pal_opt.PalOptError as exc:  # a bad argument (an unknown method): one line, not a traceback
            sys.exit(f"scheduler_loop: {exc}")
