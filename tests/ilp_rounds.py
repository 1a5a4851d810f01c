"""Random small rounds and an independent brute force for the ILP tests (not a test module)."""

from __future__ import annotations

import importlib
import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st

from pal_opt.cost import evaluate, job_slowdown_pos
from pal_opt.cost.restart import restart_cost_seconds, restart_units
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams

LEVELS = (0.9, 1.0, 1.1, 1.25, 1.5)
PENALTIES = ((1.0, 1.0, 1.0), (1.0, 1.3, 1.3), (1.0, 1.7, 1.7), (1.0, 1.2, 1.5), (1.1, 1.2, 2.0))


@st.composite
def rounds(draw, max_gpus: int = 16, max_jobs: int = 6, max_demand: int = 5, restart: bool = True) -> RoundInstance:
    """A small round: uneven servers, sometimes racks, busy/failed GPUs, several classes,
    running jobs, per-job locality penalties and (sometimes) a restart cost.  Raw factors
    (``binning="none"``) drawn from a few levels, so levels tie and classes may share profiles."""
    n_servers = draw(st.integers(1, 5))
    sizes = [draw(st.integers(1, 4)) for _ in range(n_servers)]
    while sum(sizes) > max_gpus:
        sizes[sizes.index(max(sizes))] -= 1
    sizes = [s for s in sizes if s > 0]
    g = sum(sizes)
    server = np.repeat(np.arange(len(sizes)), sizes)
    racks = None
    if len(sizes) >= 2 and draw(st.booleans()):
        n_racks = draw(st.integers(1, len(sizes)))
        racks = {s: min(s * n_racks // len(sizes), n_racks - 1) for s in range(len(sizes))}
    n_classes = draw(st.integers(1, 3))
    names = ["classA", "classB", "classC"][:n_classes]
    factors: dict[str, list[float]] = {}
    for k, c in enumerate(names):
        if k and draw(st.integers(0, 3)) == 0:
            factors[c] = list(factors[names[k - 1]])  # identical arrays share a profile
        else:
            factors[c] = [draw(st.sampled_from(LEVELS)) for _ in range(g)]
    state = [draw(st.sampled_from((0, 0, 0, 0, 0, 1, 2))) for _ in range(g)]
    if not any(s == 0 for s in state):
        state[0] = 0
    free = [i for i in range(g) if state[i] == GpuState.FREE]
    n_jobs = draw(st.integers(1, max_jobs))
    jobs = []
    taken: set[int] = set()
    for j in range(n_jobs):
        d = draw(st.integers(1, max_demand))
        loc = draw(st.sampled_from(PENALTIES))
        placement = None
        if restart and draw(st.integers(0, 3)) == 0:
            avail = [p for p in free if p not in taken]
            if len(avail) >= d:
                start = draw(st.integers(0, len(avail) - d))
                placement = tuple(avail[start : start + d])
                taken.update(placement)
        jobs.append(Job(j, d, draw(st.sampled_from(names)), j, loc, placement))
    rc = draw(st.sampled_from((0.0, 0.0, 0.05, 0.4))) if restart else 0.0  # round-cost units per GPU
    rc = restart_cost_seconds(rc, RoundParams().round_length)
    cl = Cluster.from_arrays(np.arange(g), server, factors, state, racks)
    return RoundInstance(cl, tuple(jobs), RoundParams(binning="none", restart_cost=rc), name="hypothesis")


def brute_force(instance: RoundInstance, admitted: list[int], factors: Mapping[str, np.ndarray]) -> tuple[float, dict]:
    """Least round cost over every assignment of the admitted jobs to disjoint free GPU sets.

    Independent of the program: it enumerates GPU subsets job by job and prices each job with
    :func:`pal_opt.cost.job_slowdown_pos` (memoised per job and set); the best placement is
    repriced with :func:`pal_opt.cost.evaluate`.
    """
    cl = instance.cluster
    free = [int(p) for p in np.flatnonzero(cl.state == GpuState.FREE)]
    rc = restart_units(instance.params)
    memo: dict[tuple[int, tuple[int, ...]], float] = {}

    def price(j: int, combo: tuple[int, ...]) -> float:
        key = (j, combo)
        if key not in memo:
            job = instance.jobs[j]
            s = job_slowdown_pos(cl, np.asarray(factors[job.perfclass]), job, np.asarray(combo))
            moved = job.placement is not None and set(job.placement) != {int(cl.gpu_ids[p]) for p in combo}
            memo[key] = job.demand * math.log(s) + (rc * job.demand if moved else 0.0)
        return memo[key]

    best: list = [math.inf, None]
    # largest demand first keeps the search small; costs can be negative (factors < 1), so
    # partial sums are not pruned
    order = sorted(admitted, key=lambda j: -instance.jobs[j].demand)

    def rec(k: int, avail: tuple[int, ...], acc: float, chosen: dict[int, tuple[int, ...]]) -> None:
        if k == len(order):
            if acc < best[0] - 1e-12:
                best[0] = acc
                best[1] = dict(chosen)
            return
        j = order[k]
        for combo in itertools.combinations(avail, instance.jobs[j].demand):
            rest = tuple(p for p in avail if p not in combo)
            chosen[j] = combo
            rec(k + 1, rest, acc + price(j, combo), chosen)
        chosen.pop(j, None)

    rec(0, tuple(free), 0.0, {})
    placement = {instance.jobs[j].id: tuple(int(cl.gpu_ids[p]) for p in combo) for j, combo in best[1].items()}
    return evaluate(instance, placement, factors).cost, placement


def count_assignments(instance: RoundInstance, admitted: list[int]) -> int:
    """How many assignments :func:`brute_force` enumerates."""
    n = int((instance.cluster.state == GpuState.FREE).sum())
    total = 1
    for j in sorted(admitted, key=lambda j: -instance.jobs[j].demand):
        d = instance.jobs[j].demand
        total *= math.comb(n, d)
        n -= d
    return total


def pin_solver_time_limit(monkeypatch: Any, seconds: float) -> None:
    """Give the solver stage of ``solve_ilp`` exactly ``seconds`` and no deadline.

    ``time_limit`` bounds the whole call (issue 15): a limit of a millisecond ends the solve
    before the program is built.  Tests of what happens when the *solver* has (almost) no time
    pin its limit here and call ``solve_ilp`` without a time limit.
    """
    from dataclasses import replace

    solve_module = importlib.import_module("pal_opt.ilp.solve")
    monkeypatch.setattr(solve_module._Attempt, "stage_options",
                        lambda self, opts, *, then_decode: replace(opts, time_limit=seconds, deadline=None))
