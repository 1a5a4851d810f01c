"""Layer profiles for the pipeline partitioner's tests: builders, hypothesis strategies, the
consistency invariants of a result, and a brute force over every partition (no dynamic program).

Shared by ``test_pipeline_partition.py`` (the dynamic program) and ``test_pipeline_ip.py`` (the
integer program).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

from hypothesis import strategies as st

from pal_opt.pipeline.cost import stage_time
from pal_opt.pipeline.partition import PartitionResult
from pal_opt.pipeline.states import StateGraph


def layer_line(name: str, fwd: float, bwd: float = 0.0, params: float = 0.0, desc: str = "Linear",
               act: str = "4.0") -> str:
    return (f"{name} -- {desc} -- forward_compute_time={fwd}, backward_compute_time={bwd}, "
            f"activation_size={act}, parameter_size={params}")


def profile_text(layers: list[str], edges: list[tuple[str, str]]) -> str:
    return "\n".join(layers + [f"\t{u} -- {v}" for u, v in edges]) + "\n"


def chain(times_ms: list[float], params: list[float] | None = None) -> str:
    params = params or [0.0] * len(times_ms)
    names = [f"node{i + 1}" for i in range(len(times_ms))]
    return profile_text([layer_line(n, t, 0.0, p) for n, t, p in zip(names, times_ms, params, strict=True)],
                        list(itertools.pairwise(names)))


# --------------------------------------------------------------------------- invariants
def check_consistent(result: PartitionResult, states: StateGraph) -> None:
    """The stages tile the model, use every worker, and the outermost level prices to the optimum."""
    cuts = [(s.start, s.end) for s in result.stages]
    assert cuts[0][0] == 0 and cuts[-1][1] == states.n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cuts))
    assert sum(s.replicas for s in result.stages) == math.prod(result.machines)
    assert all(s.replicas == math.prod(s.replicas_per_level) for s in result.stages)
    assert max(s.time for s in result.levels[-1]) == result.time_per_sample
    for index, (level, m) in enumerate(zip(result.levels, result.machines, strict=True)):
        groups = len(result.levels[index + 1]) if index + 1 < len(result.levels) else 1
        assert sum(s.replicas for s in level) == m * groups  # each outer stage's segment uses all m
    positions = [i for s in result.stages for i in range(s.layers[0], s.layers[1] + 1)]
    assert positions == list(range(len(result.layer_order)))
    assert len(set(result.layer_order)) == len(result.layer_order) == len(states.profile.layers)
    if result.straight:
        assert all(s.replicas == 1 for s in result.stages) and result.total_stages == math.prod(result.machines)


def brute_force(states: StateGraph, levels: list[tuple[int, float]], straight: bool) -> float:
    """The best time per sample over every partition, enumerated (no dynamic program).

    A segment ``(p, j)`` runs after state ``p`` (``-1``: the input) up to state ``j``, with ``p``
    an ancestor of ``j``.  At each level a segment is cut into consecutive real segments; each gets
    ``w >= 1`` workers (exactly 1 in a straight pipeline), the workers summing to the level's
    count.  The first stage of a segment pays its synchronisation divided by the inner level's
    worker count, the others not (PipeDream's recurrence).  A stage's time at level 1 is its
    compute; above, the level below's best for that segment.
    """
    n = states.n

    def real(p: int, j: int) -> bool:
        return p == -1 or states.is_ancestor(p, j)

    def compute(p: int, j: int) -> float:
        return states.cum_time[j] - (states.cum_time[p] if p >= 0 else 0.0)

    def params(p: int, j: int) -> float:
        return states.cum_parameter[j] - (states.cum_parameter[p] if p >= 0 else 0.0)

    def cut_chains(p: int, j: int) -> list[list[int]]:
        """Every sequence p < c1 < ... < j of states, each real after the previous."""
        out = [[j]] if real(p, j) else []
        for c in range(p + 1, j):
            if real(p, c):
                out += [[c, *rest] for rest in cut_chains(c, j)]
        return out

    @functools.cache
    def best(level: int, p: int, j: int) -> float:
        m, b = levels[level]
        divisor = float(levels[level - 1][0]) if level > 0 else 1.0
        value = math.inf
        for ends in cut_chains(p, j):
            segments = list(zip([p, *ends[:-1]], ends, strict=True))
            if straight and len(segments) != m:
                continue
            shares = [(1,) * m] if straight else compositions(m, len(segments))
            for workers in shares:
                stage_times = [
                    stage_time(best(level - 1, s, e) if level else compute(s, e), params(s, e), w, b,
                               divisor if i == 0 else 1.0)
                    for i, ((s, e), w) in enumerate(zip(segments, workers, strict=True))
                ]
                value = min(value, max(stage_times))
        return value

    return best(len(levels) - 1, -1, n - 1)


def compositions(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every way to write ``total`` as an ordered sum of ``parts`` positive integers."""
    if parts > total:
        return []
    return [tuple(b - a for a, b in zip((0, *cuts), (*cuts, total), strict=True))
            for cuts in itertools.combinations(range(1, total), parts - 1)]


TIMES = st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, 3.5, 7.0, 12.25])
PARAMS = st.sampled_from([0.0, 0.0, 1e6, 5e7, 2e8, 1e9])
RATES = st.sampled_from([1e9, 1.25e9, 1e10, 2.5e10])


@st.composite
def small_dags(draw: Any, max_layers: int = 6) -> str:
    """A small layer DAG in graph.txt form: a chain, or random forward edges from a spine."""
    n = draw(st.integers(1, max_layers))
    names = [f"node{i + 1}" for i in range(n)]
    layers = [layer_line(x, draw(TIMES), draw(TIMES), draw(PARAMS)) for x in names]
    edges = [(names[i], names[i + 1]) for i in range(n - 1)]  # a spine keeps everything reachable
    if draw(st.booleans()):
        edges += [(names[i], names[j]) for i in range(n) for j in range(i + 2, n) if draw(st.booleans())]
        if n >= 3 and draw(st.booleans()):  # a parallel branch off the spine: node1 -> node3 without node2
            edges = [e for e in edges if e != (names[1], names[2])] + [(names[0], names[2])]
            edges = list(dict.fromkeys(edges))
    return profile_text(layers, edges)


@st.composite
def machine_trees(draw: Any) -> tuple[list[tuple[int, float]], bool]:
    depth = draw(st.integers(1, 2))
    machines = [draw(st.integers(1, 4 if depth == 1 else 3)) for _ in range(depth)]
    return [(m, draw(RATES)) for m in machines], draw(st.booleans())


@st.composite
def wide_two_levels(draw: Any) -> tuple[list[tuple[int, float]], bool]:
    """Two levels with several outer workers, so that a stage after the first one is replicated
    at the outer level (where PipeDream does not divide its synchronisation by the inner count)."""
    return [(draw(st.integers(2, 3)), draw(RATES)), (draw(st.integers(3, 4)), draw(RATES))], False
