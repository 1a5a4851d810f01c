"""A scheduler's process runs for weeks: what one round leaves behind must not pile up.

Each test runs many rounds (or calls) in this process and counts what stays: per-cluster caches,
per-process caches.  No timing is asserted.
"""

from __future__ import annotations

import gc
import itertools
import types
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from pal_opt import solve
from pal_opt.binning import binned_factors
from pal_opt.model import Cluster, Job, RoundInstance
from pal_opt.policies.base import FOREIGN_CLASS_INDEXES_KEPT, ClassIndex, FreeGpus, class_index


def _held(cluster: Cluster, counted: Callable[[object], bool]) -> int:
    """How many objects that ``counted`` accepts the cluster's caches hold, wherever they keep
    them: in dicts and tuples, in functools caches, in closures (what ``gc`` says an object refers
    to; a function's module globals are not the cluster's)."""
    seen: set[int] = set()
    found = 0
    todo: list[object] = [vars(cluster)["_cache"]]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType):
            continue
        seen.add(id(obj))
        if counted(obj):
            found += 1
        if isinstance(obj, types.FunctionType):
            todo.extend(obj.__closure__ or ())
        elif not isinstance(obj, np.ndarray):
            todo.extend(gc.get_referents(obj))
    return found


def _code_tables(cluster: Cluster) -> int:
    """How many per-GPU code tables (``num_gpus × columns`` integer arrays) the cluster's caches hold."""
    return _held(cluster, lambda obj: isinstance(obj, np.ndarray) and obj.ndim == 2
                 and obj.shape[0] == cluster.num_gpus and obj.dtype == np.int64)


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


def test_a_kept_cluster_given_new_factor_arrays_counts_as_a_fresh_one() -> None:
    """The code tables are kept per set of :class:`~pal_opt.policies.base.ClassIndex` objects (by
    identity), not per set of class names: a kept cluster given new factor arrays under the same
    class names (a new ``ClassIndex`` each) builds their table, and one given an array again (ten
    sets in turn, more than the tables kept) gets the table of that array.  The free-GPU counts are
    those of a fresh cluster every time, and only a few tables stay."""
    rng = np.random.default_rng(2)
    kept = Cluster.from_arrays(range(32), np.arange(32) // 8, {"classA": np.ones(32)})
    sets = [{c: 1.0 + 0.1 * rng.integers(0, 1 + (k + n) % 6, 32) for n, c in enumerate(("classA", "classB"))}
            for k in range(10)]
    for k in range(30):
        factors = sets[(k * 7) % 10] if k >= 10 else sets[k]
        free = rng.random(32) < 0.7
        got = FreeGpus(kept, free, factors)
        want = FreeGpus(replace(kept), free, factors)  # a new cluster: nothing cached
        assert np.array_equal(got.counts, want.counts)
        for c in factors:
            assert np.array_equal(got.tot[c], want.tot[c]) and np.array_equal(got.cell_free[c], want.cell_free[c])
    assert _code_tables(kept) <= 8


def test_a_kept_cluster_given_a_new_factor_array_every_round_keeps_a_few_class_indexes() -> None:
    """``class_index`` kept a :class:`~pal_opt.policies.base.ClassIndex` (and the factor array it
    holds) per array it was ever given, keyed by ``id``: a scheduler that keeps one cluster and
    passes a new array every round grew the cache by one each round (100 after 100 rounds).  Now
    the last few caller arrays are kept; the cluster's own arrays (its measurements and binned
    factors, what the library's methods pass) stay kept however many caller arrays come."""
    rng = np.random.default_rng(3)
    kept = Cluster.from_arrays(range(32), np.arange(32) // 8, {"classA": rng.lognormal(0.0, 0.1, 32)})
    own = [kept.factors["classA"], binned_factors(kept, "pal-artifact")["classA"]]
    own_index = [class_index(kept, f) for f in own]
    for k in range(100):
        f = 1.0 + 0.1 * rng.integers(0, 1 + k % 5, 32)
        got = class_index(kept, f)
        assert class_index(kept, f) is got  # kept while in use
        want = class_index(replace(kept), f)  # a new cluster: nothing cached
        assert np.array_equal(got.level_of, want.level_of) and np.array_equal(got.cell_of, want.cell_of)
        free = rng.random(32) < 0.7
        assert np.array_equal(FreeGpus(kept, free, {"classA": f}).counts, FreeGpus(replace(kept), free, {"classA": f}).counts)
    assert [class_index(kept, f) for f in own] == own_index  # the same objects: never dropped
    assert _held(kept, lambda obj: isinstance(obj, ClassIndex) and obj not in own_index) <= (
        FOREIGN_CLASS_INDEXES_KEPT + 8)  # and up to one per code table kept (CODE_TABLES_KEPT)
    for _ in range(FOREIGN_CLASS_INDEXES_KEPT):  # caller arrays only: the code tables are not built
        class_index(kept, rng.lognormal(0.0, 0.1, 32))
    assert _held(kept, lambda obj: isinstance(obj, ClassIndex) and obj not in own_index) <= (
        FOREIGN_CLASS_INDEXES_KEPT + 8)


def test_cbc_keeps_a_bounded_number_of_parameter_checks(tmp_path) -> None:
    """CBC takes any option silently, so each backend parameter is first tried on a CBC that reads
    it and quits, and the answer is kept per option *and value*: a scheduler passing a new value
    every round (a seed) kept one more answer per round for the life of its process.  Only the
    last ``PARAM_CHECKS_KEPT`` answers are kept; a rejected option is still refused (also when
    its answer is a kept one), and a CBC that could not be asked is asked again next time."""
    import pulp
    import pytest

    from pal_opt.errors import BackendError, OptionError
    from pal_opt.generate import generate_instance
    from pal_opt.ilp.backends import cbc

    if not cbc.CbcBackend.is_available():
        pytest.skip("CBC is not installed")
    inst = generate_instance(2, 4, 3, seed=1)
    for seed in range(1, 4):
        assert solve(inst, "ilp", backend="cbc", backend_params={"randomCbcSeed": seed}).status.value == "optimal"
    for _ in range(2):
        with pytest.raises(OptionError, match="noSuchOption"):
            solve(inst, "ilp", backend="cbc", backend_params={"noSuchOption": 1})
    # many new values, asked of a stand-in CBC (a shell script: cheaper to start than CBC)
    real = pulp.PULP_CBC_CMD(msg=False).path
    fake = tmp_path / "cbc"
    model = types.SimpleNamespace(cmd=types.SimpleNamespace(path=str(fake)), args=[])
    with pytest.raises(BackendError, match="could not be asked"):
        cbc.CbcBackend()._set_param(model, "randomCbcSeed", 0)  # not there yet
    fake.write_text('#!/bin/sh\n[ "$2" = -1 ] && echo "-1 is illegal for randomCbcSeed"\nexit 0\n')
    fake.chmod(0o755)
    with pytest.raises(ValueError, match="CBC says: -1 is illegal"):
        cbc.CbcBackend()._set_param(model, "randomCbcSeed", -1)
    for seed in range(cbc.PARAM_CHECKS_KEPT + 50):
        cbc.CbcBackend()._set_param(model, "randomCbcSeed", seed)
    assert model.args[:2] == ["-randomCbcSeed", "0"] and len(model.args) == 2 * (cbc.PARAM_CHECKS_KEPT + 50)
    assert cbc._rejection.cache_info().currsize <= cbc.PARAM_CHECKS_KEPT
    assert cbc._rejection(real, ("-noSuchOption", "1"))  # the real CBC's answer is its own
