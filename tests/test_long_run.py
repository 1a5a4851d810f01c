"""A scheduler's process runs for weeks: what one round leaves behind must not pile up.

Each test runs many rounds (or calls) in this process and counts what stays: per-cluster caches,
per-process caches.  No timing is asserted.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from pal_opt import solve
from pal_opt.model import Cluster, Job, RoundInstance


def _code_tables(cluster: Cluster) -> int:
    """How many per-GPU code tables (``num_gpus × columns`` integer arrays) the cluster's caches hold."""
    seen: set[int] = set()
    found = 0
    todo: list[object] = [vars(cluster)["_cache"]]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            found += obj.ndim == 2 and obj.shape[0] == cluster.num_gpus and obj.dtype == np.int64
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, tuple | list):
            todo.extend(obj)
    return found


def test_a_cluster_kept_across_rounds_keeps_a_few_code_tables() -> None:
    """The greedy policies' per-GPU code table was cached on the cluster under the classes in the
    order the queue showed them, and never dropped: a scheduler that keeps one ``Cluster`` and
    builds each round on it kept a table for every order of classes its queues ever had (305
    tables, 33 MB after 2,000 rounds of PAL on 1,024 GPUs with 8 classes, still growing).  Now
    one table per set of classes, the last few sets only; the placements are those of a fresh
    cluster."""
    classes = [f"class{c}" for c in "ABCDEF"]
    rng = np.random.default_rng(0)
    factors = {c: rng.lognormal(0.0, 0.1, 32) for c in classes}
    kept = Cluster.from_arrays(range(32), np.arange(32) // 8, factors)
    orders = [p for n in (2, 3) for p in itertools.permutations(classes, n)]  # 150 orders of 35 sets of classes
    for k, order in enumerate(orders):
        queue = tuple(Job(f"{k}-{i}", 1 + i % 3, c, i) for i, c in enumerate(order * 2))
        method = ("pal", "pmfirst")[k % 2]
        got = solve(RoundInstance(kept, queue), method).placements
        if k % 5 == 0:
            fresh = replace(kept, factors=dict(factors))  # a new cluster: nothing cached
            assert got == solve(RoundInstance(fresh, queue), method).placements
    assert _code_tables(kept) <= 8


def test_cbc_keeps_a_bounded_number_of_parameter_checks(monkeypatch) -> None:
    """CBC takes any option silently, so each backend parameter is first tried on a CBC that reads
    it and quits, and the answer is kept per option *and value*: a scheduler passing a new value
    every round (a seed) kept one more answer per round for the life of its process.  The oldest
    answers are now dropped beyond ``PARAM_CHECKS_KEPT``; a rejected option is still refused."""
    import pytest

    from pal_opt.errors import OptionError
    from pal_opt.generate import generate_instance
    from pal_opt.ilp.backends import cbc

    if not cbc.CbcBackend.is_available():
        pytest.skip("CBC is not installed")
    monkeypatch.setattr(cbc, "PARAM_CHECKS_KEPT", 3, raising=False)
    monkeypatch.setattr(cbc.CbcBackend, "_param_checks", {})
    inst = generate_instance(2, 4, 3, seed=1)
    for seed in range(1, 9):
        assert solve(inst, "ilp", backend="cbc", backend_params={"randomCbcSeed": seed}).status.value == "optimal"
    assert len(cbc.CbcBackend._param_checks) <= 3
    with pytest.raises(OptionError, match="noSuchOption"):
        solve(inst, "ilp", backend="cbc", backend_params={"noSuchOption": 1})
