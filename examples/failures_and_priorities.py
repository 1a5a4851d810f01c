"""Failures, priorities and restart costs in a scheduler's round loop, on the public API.

One cluster of 4 servers x 4 GPUs (a networkx graph, as a scheduler keeps it), four moments:

1. **Place** a queue with the exact program (``ilp``): a 4-GPU pipeline job (two stages, the
   first twice as heavy), two gangs and a small job.
2. **A GPU fails** under the pipeline.  :func:`pal_opt.repair` re-places only the jobs that lost
   a GPU and keeps every other job exactly where it runs.
3. **A high-priority job arrives** on a full cluster.  ``ilp-preempt`` chooses the victims (only
   jobs of a lower priority; among those, what the round costs decides, here with a restart
   cost) and the placement together; ``jobs_to_terminate`` says whom to stop.
4. **Moving is charged.**  With a restart cost, the next round keeps running jobs (the pipeline
   on its stage map too) unless moving them pays; without one, the program re-places freely.
   The preempted job waits: the higher-priority job is not stopped to make room for it.

Run it::

    python examples/failures_and_priorities.py
"""

from __future__ import annotations

from typing import Any

import networkx as nx

import pal_opt
from pal_opt.streams import PipeSafe

#: GPUs that run ResNet-like (classA) work slowly: 1.4x and 1.25x the median.
SLOW = {1: 1.4, 6: 1.25}


def cluster_graph(failed: frozenset[int] = frozenset()) -> nx.DiGraph:
    """4 servers x 4 GPUs; ``failed`` GPUs are marked so."""
    g = nx.DiGraph()
    for s in range(4):
        g.add_edge(("cluster",), ("server", f"node{s}"))
        for k in range(4):
            gid = 4 * s + k
            g.add_node(("gpu", gid), factors={"classA": SLOW.get(gid, 1.0 + 0.01 * k), "classB": 1.0},
                       state="failed" if gid in failed else "free")
            g.add_edge(("server", f"node{s}"), ("gpu", gid))
    return g


QUEUE: list[dict[str, Any]] = [
    {"id": "pipe", "demand": 4, "class": "classA",
     "pipeline": {"stage_times": [2.0, 1.0], "replicas": [2, 2]}},  # GPUs listed stage by stage
    {"id": "gang-8", "demand": 8, "class": "classA"},
    {"id": "gang-2", "demand": 2, "class": "classB"},
    {"id": "one", "demand": 1, "class": "classB"},
]


def running(queue: list[dict[str, Any]], placements: dict[Any, tuple[int, ...]],
            started: float = 0.0) -> list[dict[str, Any]]:
    """The queue with every placed job marked running where it was placed, the others waiting."""
    waiting = [{k: v for k, v in job.items() if k not in ("placement", "started")} for job in queue]
    return [{**job, "placement": list(placements[job["id"]]), "started": started}
            if job["id"] in placements else job for job in waiting]


def show(title: str, result: pal_opt.PlacementResult) -> None:
    print(f"\n{title}: {result.method} {result.status.value}, geomean slowdown {result.geomean_slowdown:.3f}")
    for jid, gpus in result.placements.items():
        print(f"  {jid:>8} on GPUs {list(gpus)}")
    if result.jobs_to_terminate:
        print(f"  stop: {list(result.jobs_to_terminate)}")
    for jid, reason in result.unplaceable.items():  # {job id: why it can never be placed}
        print(f"  unplaceable: {jid} ({reason})")


def main() -> dict[str, Any]:
    # 1. place the queue exactly
    round1 = pal_opt.make_instance(cluster_graph(), QUEUE)
    first = pal_opt.solve(round1, method="ilp", backend="highs")
    assert pal_opt.check(round1, first) == []
    show("1. first round", first)

    # 2. a GPU under the pipeline fails: repair keeps everyone else in place
    broken = first.placements["pipe"][0]
    round2 = pal_opt.make_instance(cluster_graph(frozenset({broken})), running(QUEUE, first.placements))
    fixed = pal_opt.repair(round2, first, [broken], backend="highs")
    assert pal_opt.check(round2, fixed) == []
    kept = [j for j in first.placements if j != "pipe" and fixed.placements.get(j) == first.placements[j]]
    show(f"2. GPU {broken} failed, repaired", fixed)
    print(f"  kept in place: {kept}")

    # 3. an urgent 2-GPU job arrives on a full cluster (15 healthy GPUs, 15 in use); a move or a
    #    preemption costs 60 s of work per GPU, so the program stops as little as it must
    urgent = {"id": "urgent", "demand": 2, "class": "classB", "priority": 1}
    queue3 = [*running(QUEUE, fixed.placements), urgent]
    round3 = pal_opt.make_instance(cluster_graph(frozenset({broken})), queue3, restart_cost=60.0)
    pre = pal_opt.solve(round3, method="ilp-preempt", backend="highs")
    assert pal_opt.check(round3, pre) == []
    show("3. a priority-1 job arrives", pre)

    # 4. the next round (a preempted job waits in the queue), with and without a charge for moving
    queue4 = running(queue3, pre.placements)
    moved = {}
    for restart_cost in (0.0, 120.0):
        round4 = pal_opt.make_instance(cluster_graph(frozenset({broken})), queue4, restart_cost=restart_cost)
        nxt = pal_opt.solve(round4, method="ilp-preempt", backend="highs")  # priorities still rule
        assert pal_opt.check(round4, nxt) == []
        moved[restart_cost] = list(nxt.jobs_to_terminate)
        waiting = [j["id"] for j in queue4 if j["id"] not in nxt.placements]
        print(f"\n4. next round, restart cost {restart_cost:g} s per GPU: moves {moved[restart_cost] or 'none'}, "
              f"waiting {waiting}, geomean slowdown {nxt.geomean_slowdown:.3f}")
    return {"first": first, "repaired": fixed, "preempted": pre, "moved": moved, "kept": kept, "broken": broken}


if __name__ == "__main__":
    with PipeSafe():  # output piped into head: the rest dropped, no BrokenPipeError
        main()
