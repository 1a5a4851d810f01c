"""A round loop bounded by work, not time, is reproducible (README, *In a scheduler*;
``docs/determinism.md``; ``benchmarks/reproducible_loop.py`` runs it at 256 GPUs).

The loop: 64 GPUs (8 servers x 8 in 2 racks), seeded arrivals, run lengths and failures, a
restart cost; ``RoundPolicy("ilp", backend=B, time_limit=..., backend_params=...)`` places every
round and the jobs run on its answers, so a round that differs changes the later ones.  Each
backend runs it twice with a work bound small enough to stop its search on some rounds, and the
two runs must place every job alike in every round.  The time limit is a safety net far above
what these rounds take; no timing is asserted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pal_opt
from pal_opt import Cluster, GpuState, RoundPolicy
from pal_opt.ilp.backends import available_backends

SERVERS, PER_SERVER, ROUNDS = 8, 8, 15
CLASSES = ("classA", "classB")
#: Work bounds that stop the search before a proof on some of these rounds (the README's recipe,
#: smaller, as these rounds are smaller).
BOUNDS: dict[str, dict[str, Any]] = {"highs": {"mip_max_nodes": 1}, "cpsat": {"max_deterministic_time": 0.02},
                                     "cbc": {"maxNodes": 1}}


def _cluster(factors: dict[str, np.ndarray], failed: set[int]) -> Cluster:
    state = [GpuState.FAILED if g in failed else GpuState.FREE for g in range(SERVERS * PER_SERVER)]
    return Cluster.uniform(SERVERS, PER_SERVER, {c: v.tolist() for c, v in factors.items()}, state=state,
                           racks=2)


def _loop(backend: str) -> list[tuple[dict[Any, tuple[int, ...]], str]]:
    """Each round's placements and status."""
    rng = np.random.default_rng(3)
    factors = {c: rng.lognormal(0, 0.1, SERVERS * PER_SERVER).clip(0.7, 1.6) for c in CLASSES}
    policy = RoundPolicy("ilp", backend=backend, time_limit=120, backend_params=BOUNDS[backend])
    jobs: dict[str, dict[str, Any]] = {}
    left: dict[str, int] = {}
    failed: set[int] = set()
    out = []
    for r in range(ROUNDS):
        for k in range(int(rng.poisson(3))):
            jid = f"j{r}.{k}"
            jobs[jid] = {"id": jid, "demand": int(rng.choice([1, 2, 2, 4, 4, 8, 16])), "class": str(rng.choice(CLASSES))}
            left[jid] = int(rng.integers(1, 6))
        if rng.random() < 0.2:
            failed.add(int(rng.integers(SERVERS * PER_SERVER)))
        res = policy.place(pal_opt.make_instance(_cluster(factors, failed), list(jobs.values()),
                                                 locality_penalty=1.7, restart_cost=30))
        assert pal_opt.check(policy.last_round.instance, res) == []
        out.append((dict(res.placements), res.status.value))
        for j in res.placements:
            left[j] -= 1
        done = [j for j in res.placements if left[j] <= 0]
        for j in done:
            del jobs[j], left[j]
        policy.forget(*done)
    return out


@pytest.mark.parametrize("backend", available_backends())
def test_a_loop_bounded_by_work_places_every_round_alike_twice(backend: str) -> None:
    first, second = _loop(backend), _loop(backend)
    parted = [r for r, (a, b) in enumerate(zip(first, second, strict=True)) if a != b]
    assert parted == [], f"{backend}: the runs part at rounds {parted}"
    statuses = [s for _, s in first]
    assert "feasible" in statuses, f"{backend}: the work bound stopped no round ({statuses})"
    assert sum(len(p) for p, _ in first) > ROUNDS  # jobs were placed, rounds after rounds
