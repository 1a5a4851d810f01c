"""Property tests: on random rounds every method's placement passes the independent checker.

Rounds are drawn by hypothesis: uneven servers (1-8 GPUs each), optional racks, non-contiguous
GPU ids and mixed int/str server and job ids, one to four classes with ties and outliers among
the factors, busy and failed GPUs, running jobs (on free GPUs, as the format requires), custom
per-job locality penalties, every binning mode and a restart cost.  For each round:

* every greedy method (``pal``, ``pmfirst``, ``packed``, ``packed-sticky``, ``random``) returns a
  placement that :func:`pal_opt.check.check` accepts, also after a JSON round trip (as the CLI
  writes it), and with ``admission="backfill"`` where the method takes it;
* on small rounds the ILP (HiGHS) does too, and its cost is at most the cost of its own start
  placements;
* the instance survives ``instance_to_dict`` → JSON → ``instance_from_dict`` unchanged.

The default run draws :data:`N_DEFAULT` rounds for the greedy methods and :data:`N_ILP` small
rounds for the ILP; ``pytest -m slow tests/test_properties.py`` draws thousands.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pal_opt.binning import BINNING_MODES
from pal_opt.check import check
from pal_opt.errors import InstanceError
from pal_opt.io import instance_from_dict, instance_to_dict, load_instance, save_instance
from pal_opt.methods import get_method, greedy_names
from pal_opt.model import PAL_CLASSES, Cluster, GpuState, Job, RoundInstance, RoundParams, pal_locality
from pal_opt.result import Status
from pal_opt.solve import solve

N_DEFAULT = 250
N_ILP = 40
N_SLOW = 3000

_SET = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def rounds(draw: Any, max_servers: int = 8, max_per_server: int = 8, max_jobs: int = 14) -> RoundInstance:
    n_servers = draw(st.integers(1, max_servers))
    sizes = [draw(st.integers(1, max_per_server)) for _ in range(n_servers)]
    g = sum(sizes)
    gpu_ids = draw(st.lists(st.integers(0, 10_000), min_size=g, max_size=g, unique=True))
    server_ids: list[Any] = [s if draw(st.booleans()) else f"node-{s}" for s in range(n_servers)]
    server = [server_ids[s] for s, k in enumerate(sizes) for _ in range(k)]
    racks = None
    if draw(st.booleans()) and n_servers > 1:
        n_racks = draw(st.integers(1, n_servers))
        racks = {s: f"r{draw(st.integers(0, n_racks - 1))}" for s in server_ids}
    classes = draw(st.lists(st.sampled_from(PAL_CLASSES), min_size=1, max_size=4, unique=True))
    factors = {}
    for c in classes:
        base = draw(st.lists(st.sampled_from([0.9, 0.95, 1.0, 1.0, 1.02, 1.05, 1.1, 1.3, 2.0]), min_size=g,
                             max_size=g))
        jitter = draw(st.lists(st.floats(0.0, 0.05), min_size=g, max_size=g)) if draw(st.booleans()) else [0.0] * g
        factors[c] = [b + j for b, j in zip(base, jitter, strict=True)]
    state = [draw(st.sampled_from([GpuState.FREE] * 6 + [GpuState.BUSY, GpuState.FAILED])) for _ in range(g)]
    cluster = Cluster.from_arrays(gpu_ids, server, factors, state, racks)
    lam = draw(st.sampled_from([1.0, 1.3, 1.7, 3.0]))
    n_jobs = draw(st.integers(0, max_jobs))
    free_pos = [i for i in range(g) if state[i] == GpuState.FREE]
    draw(st.randoms()).shuffle(free_pos)
    jobs = []
    for k in range(n_jobs):
        demand = draw(st.one_of(st.integers(1, 2), st.integers(1, max(1, min(g, 16)))))
        cls = draw(st.sampled_from(classes))
        loc = pal_locality(lam)
        if draw(st.integers(0, 4)) == 0:
            a = draw(st.floats(1.0, 2.0))
            b = draw(st.floats(a, 3.0))
            loc = (1.0, a, b)
        placement = None
        if draw(st.integers(0, 2)) == 0 and len(free_pos) >= demand:
            placement = tuple(int(gpu_ids[free_pos.pop()]) for _ in range(demand))
        jid: Any = k if draw(st.booleans()) else f"job-{k}"
        jobs.append(Job(jid, demand, cls, k, loc, placement))
    # k-means binning costs a few ms per class, so most rounds use raw factors
    mode = draw(st.sampled_from(["none"] * 6 + [m for m in BINNING_MODES if m != "none"]))
    params = RoundParams(locality_penalty=lam, binning=mode,
                         restart_cost=draw(st.sampled_from([0.0, 0.0, 3.6, 144.0])))  # seconds of a 360 s round
    return RoundInstance(cluster, tuple(jobs), params, name="prop")


def _check_greedy(inst: RoundInstance, seed: int) -> None:
    for m in greedy_names():
        kw = {"seed": seed} if "seed" in get_method(m).options else {}  # the others refuse one
        r = solve(inst, m, **kw)
        assert r.status == Status.FEASIBLE
        problems = check(inst, r)
        assert problems == [], (m, problems)
        if "admission" in get_method(m).options:
            problems = check(inst, solve(inst, m, **kw, admission="backfill"))
            assert problems == [], (m, "backfill", problems)
        doc = json.loads(r.to_json())
        assert check(inst, doc) == [], (m, "after JSON")
        assert r.gpus_used == sum(len(v) for v in r.placements.values())
        assert math.isfinite(r.objective)


def _check_round_trip(inst: RoundInstance) -> None:
    d = instance_to_dict(inst)
    doc = json.loads(json.dumps(d, allow_nan=False))
    # a job larger than the cluster is kept too (it is unplaceable, not bad input)
    back = instance_from_dict(doc, "rt.json")
    assert instance_to_dict(back) == d


@settings(max_examples=N_DEFAULT, **_SET)
@given(rounds(), st.integers(0, 2**31))
def test_greedy_placements_are_valid(inst, seed):
    _check_greedy(inst, seed)
    _check_round_trip(inst)


@pytest.mark.slow
@settings(max_examples=N_SLOW, **_SET)
@given(rounds(max_servers=24, max_jobs=40), st.integers(0, 2**31))
def test_greedy_placements_are_valid_long(inst, seed):
    _check_greedy(inst, seed)
    _check_round_trip(inst)


def _check_ilp(inst: RoundInstance) -> None:
    r = solve(inst, "ilp", backend="highs")
    assert r.status in (Status.OPTIMAL, Status.FEASIBLE), (r.status, r.message)
    assert check(inst, r) == [], check(inst, r)
    assert check(inst, json.loads(r.to_json())) == []
    starts = [v for k, v in r.info.items() if k.startswith("start_") and k.endswith("_objective")]
    if starts:
        assert r.objective <= min(starts) + 1e-9
    if r.bound is not None:
        assert r.bound <= r.objective + 1e-6


@settings(max_examples=N_ILP, **_SET)
@given(rounds(max_servers=4, max_per_server=4, max_jobs=6))
def test_ilp_placements_are_valid(inst):
    _check_ilp(inst)


@pytest.mark.slow
@settings(max_examples=N_SLOW // 3, **_SET)
@given(rounds(max_servers=5, max_per_server=6, max_jobs=8))
def test_ilp_placements_are_valid_long(inst):
    _check_ilp(inst)


@settings(max_examples=30, **_SET)
@given(rounds(max_servers=4, max_per_server=4, max_jobs=6), st.sampled_from(["cpsat", "cbc"]))
def test_ilp_other_backends_agree_with_highs(inst, backend):
    """Every backend is valid, and proven optima have the same cost."""
    a = solve(inst, "ilp", backend="highs")
    b = solve(inst, "ilp", backend=backend)
    assert check(inst, b) == []
    assume(a.status == b.status == Status.OPTIMAL)
    assert b.objective == pytest.approx(a.objective, rel=1e-6, abs=1e-6)


# --------------------------------------------------------------------------- what the model accepts, a file holds
_IDS = st.one_of(st.integers(-3, 3), st.sampled_from(["1", "", "a", 0.5, 1.0, None, True, (0, 1)]),
                 st.integers(-3, 3).map(np.int64), st.just(2**63))


@st.composite
def model_rounds(draw: Any) -> RoundInstance | None:
    """A round built through the model's constructors from loosely drawn values (ids of many
    kinds, GPUs in every state under running jobs, any positive locality); None if the model
    rejects it."""
    g = draw(st.integers(1, 6))
    server = draw(st.lists(_IDS, min_size=g, max_size=g))
    racks = None
    if draw(st.booleans()):
        racks = {s: draw(_IDS) for s in server if isinstance(s, Hashable)}
    gpu_types = draw(st.one_of(st.none(), st.lists(st.sampled_from(["a", "b"]), min_size=g, max_size=g)))
    throughput = {}
    if gpu_types is not None and draw(st.booleans()):
        throughput = {"classA": {t: draw(st.floats(0.25, 4.0)) for t in set(gpu_types)}}
    state = draw(st.lists(st.sampled_from(list(GpuState)), min_size=g, max_size=g))
    jobs = []
    for _ in range(draw(st.integers(0, 4))):
        demand = draw(st.integers(1, 3))
        placement = None
        if draw(st.booleans()):
            placement = tuple(draw(st.lists(st.integers(0, g), min_size=demand, max_size=demand)))
        loc = tuple(draw(st.lists(st.floats(0.5, 3.0), min_size=3, max_size=3)))
        jobs.append((draw(_IDS), demand, loc, placement, draw(st.one_of(st.none(), st.floats(0, 1e6)))))
    first = draw(st.sampled_from([0, 0, 0, -1]))  # a negative GPU id is rejected
    try:
        c = Cluster.from_arrays(range(first, first + g), server, {"classA": [1.0 + 0.1 * i for i in range(g)]},
                                state, racks, gpu_types=gpu_types, throughput=throughput)
        return RoundInstance(c, tuple(Job(jid, d, "classA", k, loc, pl, started=s)
                                      for k, (jid, d, loc, pl, s) in enumerate(jobs)),
                             RoundParams(locality_penalty=draw(st.floats(1.0, 3.0))))
    except InstanceError:
        return None


@settings(max_examples=300, **_SET)
@given(model_rounds())
def test_what_the_model_accepts_survives_save_and_load(tmp_path_factory, inst):
    assume(inst is not None)
    path = tmp_path_factory.mktemp("rt") / "i.json"
    save_instance(inst, path)
    back = load_instance(path)
    a, b = inst.cluster, back.cluster
    for f in ("gpu_ids", "server_of", "rack_of_server", "state", "type_of"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    for f in ("server_ids", "rack_ids", "type_names"):
        assert [(type(x), x) for x in getattr(a, f)] == [(type(x), x) for x in getattr(b, f)], f
    assert {k: v.tolist() for k, v in a.factors.items()} == {k: v.tolist() for k, v in b.factors.items()}
    assert a.throughput == b.throughput
    assert back.jobs == inst.jobs and back.params == inst.params and back.name == inst.name
