"""Greedy policies: validity on random rounds (hypothesis), determinism, and hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pal_opt.admission import pal_order
from pal_opt.check import check
from pal_opt.errors import InputTypeError, InstanceError, OptionError
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams, pal_locality
from pal_opt.policies import POLICIES, GreedyPlacement, get_policy, pal, pmfirst
from pal_opt.policies.base import FreeGpus, class_index
from pal_opt.policies.packed import packed_select, place_sticky
from pal_opt.policies.pal import traversal_order
from pal_opt.policies.pmfirst import pmfirst_select
from pal_opt.solve import solve

F, B, X = GpuState.FREE, GpuState.BUSY, GpuState.FAILED
ORDER_RULE = {"pal": "pal", "pmfirst": "pal", "packed": "queue", "random": "queue"}


def _seed(method: str, seed: int) -> dict[str, int]:
    """``seed=`` for a method that takes one (the others refuse it)."""
    from pal_opt.methods import get_method

    return {"seed": seed} if "seed" in get_method(method).options else {}


# --------------------------------------------------------------------------- random rounds
@st.composite
def rounds(draw: st.DrawFn) -> RoundInstance:
    """Small rounds: uneven servers, racks sometimes, busy/failed GPUs, running jobs, ties."""
    n_servers = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(1, 6), min_size=n_servers, max_size=n_servers))
    server = np.repeat(np.arange(n_servers), sizes)
    if draw(st.booleans()):  # servers that are not blocks of consecutive positions
        server = np.asarray(draw(st.permutations(server.tolist())))
        n_servers = len(set(server.tolist()))
    g = server.size
    classes = ["classA", "classB", "classC"][: draw(st.integers(1, 3))]
    levels = [0.9, 1.0, 1.0, 1.05, 1.3]
    factors = {c: [draw(st.sampled_from(levels)) for _ in range(g)] for c in classes}
    state = np.asarray(draw(st.lists(st.sampled_from([F, F, F, F, B, X]), min_size=g, max_size=g)), dtype=np.int8)
    racks = None
    if n_servers > 1 and draw(st.booleans()):
        ids = list(dict.fromkeys(server.tolist()))
        racks = {s: k % 2 for k, s in enumerate(ids)}
    cluster = Cluster.from_arrays(np.arange(100, 100 + g), server, factors, state, racks)
    lam = draw(st.sampled_from([1.0, 1.2, 1.7, 2.5]))
    free = [int(cluster.gpu_ids[i]) for i in np.flatnonzero(state == F)]
    n_jobs = draw(st.integers(0, 10))
    jobs = []
    for k in range(n_jobs):
        d = draw(st.integers(1, max(1, min(10, g))))
        placement = None
        if free and draw(st.integers(0, 3)) == 0 and d <= len(free):
            take = draw(st.permutations(free))[:d]
            free = [x for x in free if x not in take]
            placement = tuple(sorted(take))
        loc = pal_locality(lam) if draw(st.booleans()) else (1.0, lam, lam * 1.1)
        jobs.append(Job(f"j{k}", d, draw(st.sampled_from(classes)), k, loc, placement))
    return RoundInstance(cluster, tuple(jobs), RoundParams(locality_penalty=lam, binning="none"))


def _basic_violations(inst: RoundInstance, out: GreedyPlacement) -> list[str]:
    cl = inst.cluster
    jobs = inst.job_by_id
    seen: set[int] = set()
    bad = []
    for jid, gpus in out.placements.items():
        if len(gpus) != jobs[jid].demand or len(set(gpus)) != len(gpus):
            bad.append(f"{jid}: {gpus} for demand {jobs[jid].demand}")
        for g in gpus:
            if g in seen:
                bad.append(f"GPU {g} used twice")
            seen.add(g)
            if cl.state[cl.position[g]] != F:
                bad.append(f"GPU {g} is not free")
    return bad


def _segment_ok(inst: RoundInstance, order: list[int], out: GreedyPlacement) -> None:
    placed = out.placements
    ids = [inst.jobs[i].id for i in order]
    k = 0
    while k < len(ids) and ids[k] in placed:
        k += 1
    assert set(placed) == set(ids[:k]), "placed set is not an initial segment of the order"
    if k < len(ids):
        left = inst.free_gpus - sum(inst.job_by_id[j].demand for j in placed)
        assert inst.job_by_id[ids[k]].demand > left, "stopped although the next job fits"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=rounds(), seed=st.integers(0, 2**16))
def test_every_policy_valid(inst: RoundInstance, seed: int) -> None:
    factors = inst.cluster.factors
    for name, fn in POLICIES.items():
        out = fn(inst, factors, seed=seed)
        assert _basic_violations(inst, out) == [], name
        if name in ORDER_RULE:
            order = pal_order(inst) if ORDER_RULE[name] == "pal" else list(range(len(inst.jobs)))
            _segment_ok(inst, order, out)
            want_term = tuple(
                j.id for j in inst.jobs
                if j.placement is not None and set(out.placements.get(j.id, ())) != set(j.placement)
            )
            assert out.jobs_to_terminate == want_term, name
        else:  # packed-sticky: running jobs keep their GPUs unless terminated
            for j in inst.jobs:
                if j.placement is not None and j.id not in out.jobs_to_terminate:
                    assert set(out.placements[j.id]) == set(j.placement)
        res = solve(inst, name, **_seed(name, seed))
        assert check(inst, res) == [], (name, check(inst, res))


@settings(max_examples=60, deadline=None)
@given(inst=rounds())
def test_place_sequence_respects_free_mask(inst: RoundInstance) -> None:
    rng = np.random.default_rng(len(inst.jobs))
    mask = (inst.cluster.state == F) & (rng.random(inst.cluster.num_gpus) < 0.7)
    allowed = set(inst.cluster.gpu_ids[mask].tolist())
    order = list(range(len(inst.jobs)))[::-1]
    for module in (pal, pmfirst):
        got = module.place_sequence(inst, inst.cluster.factors, order, free_mask=mask)
        used = [g for gpus in got.values() for g in gpus]
        assert set(used) <= allowed and len(used) == len(set(used))
        ids = [inst.jobs[i].id for i in order]
        assert list(got) == ids[: len(got)]
        if len(got) < len(ids):
            assert inst.jobs[order[len(got)]].demand > len(allowed) - len(used)


# --------------------------------------------------------------------------- determinism
def _gen_round(seed: int = 3) -> RoundInstance:
    from pal_opt.generate import generate_instance

    return generate_instance(8, 4, 30, seed=seed, busy_fraction=0.1, running_fraction=0.3, binning="none")


def test_random_is_seeded() -> None:
    inst = _gen_round()
    f = inst.cluster.factors
    a = get_policy("random")(inst, f, seed=11)
    b = get_policy("random")(inst, f, seed=11)
    c = get_policy("random")(inst, f, seed=12)
    assert a == b
    assert a.placements != c.placements
    assert get_policy("random")(inst, f) == get_policy("random")(inst, f, seed=0)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_repeatable(name: str) -> None:
    inst = _gen_round(5)
    f = inst.cluster.factors
    assert POLICIES[name](inst, f, seed=1) == POLICIES[name](inst, f, seed=1)


def test_registry() -> None:
    assert set(POLICIES) == {"pal", "pmfirst", "packed", "packed-sticky", "random"}
    with pytest.raises(OptionError, match="pal, pmfirst, packed, packed-sticky, random"):
        get_policy("fastest")


def test_admission_labels() -> None:
    inst = _gen_round()
    want = {"pal": "pal-order", "pmfirst": "pal-order", "packed": "queue-order",
            "packed-sticky": "sticky", "random": "queue-order"}
    for name, adm in want.items():
        assert get_policy(name)(inst, inst.cluster.factors).admission == adm


# --------------------------------------------------------------------------- PM-First by hand
def _round(factors: list[float], server: list[int], state: list[int] | None = None,
           jobs: tuple[Job, ...] = ()) -> RoundInstance:
    cl = Cluster.from_arrays(range(len(factors)), server, {"classA": factors}, state)
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


def test_pmfirst_prefers_best_matching_group() -> None:
    # servers 0, 1, 2 have 3, 2 and 4 free GPUs, all at factor 1.0: a 2-GPU job fits server 1 exactly
    inst = _round([1.0] * 12, [0] * 4 + [1] * 4 + [2] * 4, [F, F, F, B, F, B, F, B, F, F, F, F])
    st_ = FreeGpus(inst.cluster, inst.cluster.state == F, inst.cluster.factors)
    assert pmfirst_select(st_, "classA", 2).tolist() == [4, 6]
    # 3 GPUs: |3-3| on server 0 wins
    assert pmfirst_select(st_, "classA", 3).tolist() == [0, 1, 2]
    # 4 GPUs: server 2 matches exactly
    assert pmfirst_select(st_, "classA", 4).tolist() == [8, 9, 10, 11]


def test_pmfirst_factor_first_then_ties_in_position_order() -> None:
    inst = _round([1.1, 1.0, 1.1, 1.0, 1.0, 1.1], [0, 0, 0, 1, 1, 1])
    st_ = FreeGpus(inst.cluster, inst.cluster.state == F, inst.cluster.factors)
    # fast GPUs first: 1 (server 0, group of 1), 3 and 4 (server 1, group of 2)
    assert pmfirst_select(st_, "classA", 2).tolist() == [3, 4]
    assert pmfirst_select(st_, "classA", 1).tolist() == [1]
    # 3: all fast GPUs, the better-matching group (server 1) first
    assert pmfirst_select(st_, "classA", 3).tolist() == [3, 4, 1]
    # 4: then the slow GPU whose (factor, server) group best matches 4: server 0's pair
    assert pmfirst_select(st_, "classA", 4).tolist() == [3, 4, 1, 0]
    assert pmfirst_select(st_, "classA", 7) is None


def test_pmfirst_groupings_differ() -> None:
    # server 0: one fast + one slow GPU; server 1: two fast.  d = 2.
    inst = _round([1.0, 1.2, 1.0, 1.0], [0, 0, 1, 1])
    st_ = FreeGpus(inst.cluster, inst.cluster.state == F, inst.cluster.factors)
    assert pmfirst_select(st_, "classA", 2, grouping="factor-server").tolist() == [2, 3]
    # grouped by server only both servers have 2 candidates: the position tie-break picks GPU 0
    assert pmfirst_select(st_, "classA", 2, grouping="server").tolist() == [0, 2]


def test_pmfirst_non_block_servers() -> None:
    # servers interleaved by position: GPU order, not server order, breaks ties
    inst = _round([1.0] * 6, [0, 1, 0, 1, 0, 1], [F, F, F, F, B, F])
    st_ = FreeGpus(inst.cluster, inst.cluster.state == F, inst.cluster.factors)
    assert not st_.blocks
    assert pmfirst_select(st_, "classA", 2).tolist() == [0, 2]
    assert pmfirst_select(st_, "classA", 3).tolist() == [1, 3, 5]
    assert pmfirst_select(st_, "classA", 4).tolist() == [1, 3, 5, 0]


# --------------------------------------------------------------------------- PAL by hand
def _pal(factors: list[float], server: list[int], jobs: tuple[Job, ...], state: list[int] | None = None) -> dict:
    inst = _round(factors, server, state, jobs)
    return pal.place(inst, inst.cluster.factors).placements


def test_pal_within_beats_across_when_lambda_is_high() -> None:
    f = [1.0, 1.0, 1.3, 1.3, 1.0, 1.0, 1.3, 1.3]
    srv = [0] * 4 + [1] * 4
    # cells: (1.0 within) infeasible; (1.3 within) = 1.3 < (1.0 across) = 1.7
    assert _pal(f, srv, (Job("a", 3, "classA", 0, pal_locality(1.7)),)) == {"a": (0, 1, 2)}
    # with λ = 1.2 the across cell (1.2) comes before (1.3 within): PM-First on the fast GPUs
    assert _pal(f, srv, (Job("a", 3, "classA", 0, pal_locality(1.2)),)) == {"a": (0, 1, 4)}


def test_pal_cells_of_equal_price_keep_the_order_their_levels_first_appear() -> None:
    """Cells of equal price stay in traversal order, their levels in order of first appearance
    over GPU positions (a stable sort; sorting ties by level index or by within/across fails one
    of the two rounds)."""
    # λ = 1.5: (1.5 within) and (1.0 across) both cost 1.5; the 1.0 GPUs are on two servers
    fast_last = [1.5, 1.5, 1.0, 1.0]  # level 1.5 appears first: its within cell first
    srv = [0, 0, 1, 2]
    ci = class_index(Cluster.from_arrays(range(4), srv, {"classA": fast_last}), np.asarray(fast_last))
    assert traversal_order(ci, 1.0, 1.5) == ((0, True), (1, True), (0, False), (1, False))
    assert _pal(fast_last, srv, (Job("a", 2, "classA", 0, pal_locality(1.5)),)) == {"a": (0, 1)}
    fast_first = [1.0, 1.0, 1.5, 1.5]  # level 1.0 first: its across cell first
    srv = [0, 1, 2, 2]
    ci = class_index(Cluster.from_arrays(range(4), srv, {"classA": fast_first}), np.asarray(fast_first))
    assert traversal_order(ci, 1.0, 1.5) == ((0, True), (0, False), (1, True), (1, False))
    assert _pal(fast_first, srv, (Job("a", 2, "classA", 0, pal_locality(1.5)),)) == {"a": (0, 1)}


def test_pal_within_prefers_server_with_most_eligible() -> None:
    # both servers offer two 1.0 GPUs; server 1 has more eligible free GPUs (value_counts order)
    f = [1.0, 1.0, 1.2, 1.2, 1.0, 1.0, 1.0, 1.2]
    srv = [0] * 4 + [1] * 4
    state = [F, F, B, F, F, F, F, F]
    assert _pal(f, srv, (Job("a", 2, "classA", 0, pal_locality(1.7)),), state) == {"a": (4, 5)}


def test_pal_within_takes_least_max_then_first_combination() -> None:
    # at level 1.2 every server is eligible; server 0 reaches a max of 1.0 with GPUs 1 and 2
    f = [1.2, 1.0, 1.0, 1.2, 1.1, 1.1, 1.2, 1.2]
    srv = [0] * 4 + [1] * 4
    assert _pal(f, srv, (Job("a", 2, "classA", 0, pal_locality(1.7)),)) == {"a": (1, 2)}
    # 3 GPUs: server 0 best max is 1.2 and server 1 best is 1.2 too; equal eligible counts -> server 0,
    # first combination in GPU order among factor <= 1.2
    assert _pal(f, srv, (Job("a", 3, "classA", 0, pal_locality(1.7)),)) == {"a": (0, 1, 2)}


def test_pal_within_ties_follow_first_eligible_gpu() -> None:
    # interleaved servers: server 0 = GPUs 0, 3, 5; server 1 = GPUs 1, 2, 4.  GPU 0 and 4 busy, so both
    # servers offer 2 free GPUs; server 1's first eligible GPU (1) comes before server 0's (3):
    # pandas value_counts lists server 1 first, and so does PAL
    f = [1.0] * 6
    srv = [0, 1, 1, 0, 1, 0]
    state = [B, F, F, F, B, F]
    assert _pal(f, srv, (Job("a", 2, "classA", 0, pal_locality(1.7)),), state) == {"a": (1, 2)}


def test_pal_single_gpu_and_large_jobs_use_pmfirst() -> None:
    f = [1.1, 1.0, 1.1, 1.1, 1.0, 1.0]
    srv = [0] * 3 + [1] * 3
    assert _pal(f, srv, (Job("a", 1, "classA", 0),)) == {"a": (1,)}
    # 4 > 3 GPUs per server: fast ones (server 1's pair first) then a slow one whose group best matches 4
    assert _pal(f, srv, (Job("a", 4, "classA", 0),)) == {"a": (4, 5, 1, 0)}


def test_pal_order_and_stop() -> None:
    f = [1.0] * 4
    jobs = (
        Job("d", 2, "classA", 0),
        Job("big", 3, "classA", 1),
        Job("small", 1, "classA", 2),
    )
    inst = _round(f, [0, 0, 1, 1], None, jobs)
    out = pal.place(inst, inst.cluster.factors)
    # pal order: prefix that fits 4 GPUs is [d]; 'big' does not fit the 2 left; stop before 'small'
    assert list(out.placements) == ["d"]


def test_pal_terminates_moved_running_jobs() -> None:
    f = [1.3, 1.3, 1.0, 1.0]
    jobs = (Job("r", 2, "classA", 0, pal_locality(1.7), placement=(0, 1)),)
    inst = _round(f, [0, 0, 1, 1], None, jobs)
    out = pal.place(inst, inst.cluster.factors)
    assert out.placements == {"r": (2, 3)} and out.jobs_to_terminate == ("r",)
    f2 = [1.0, 1.0, 1.3, 1.3]
    inst2 = _round(f2, [0, 0, 1, 1], None, jobs)
    out2 = pal.place(inst2, inst2.cluster.factors)
    assert out2.placements == {"r": (0, 1)} and out2.jobs_to_terminate == ()


def test_class_index_levels_in_first_seen_order() -> None:
    f = np.array([1.2, 1.0, 1.2, 1.5])
    c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": f})
    ci = class_index(c, f)
    assert ci.first_seen == (1, 0, 2)
    assert ci.by_level.tolist() == [1, 0, 2, 3]


# --------------------------------------------------------------------------- packed by hand
def test_packed_exact_then_smallest_then_spill() -> None:
    # free per server: 3, 2, 4, 1
    state = [F, F, F, B, F, F, B, B, F, F, F, F, F, B, B, B]
    inst = _round([1.0] * 16, [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4, state)
    s = FreeGpus(inst.cluster, inst.cluster.state == F)
    assert packed_select(s, 2).tolist() == [4, 5]  # exact fit on server 1
    assert packed_select(s, 1).tolist() == [12]  # exact fit on server 3
    assert packed_select(s, 3).tolist() == [0, 1, 2]  # exact fit on server 0
    s.take(np.array([0]))  # free now 2, 2, 4, 1
    assert packed_select(s, 3).tolist() == [8, 9, 10]  # smallest server with >= 3
    assert packed_select(s, 6).tolist() == [8, 9, 10, 11, 1, 2]  # spill: most free first, ties by server
    assert packed_select(s, 10) is None


def test_packed_takes_the_roomy_server_with_the_fewest_free_gpus() -> None:
    """No server has exactly 2 free GPUs: of servers 0 (4 free) and 1 (3 free) the 2-GPU job takes
    server 1, the one with the fewest, though server 0 comes first."""
    inst = _round([1.0] * 8, [0] * 4 + [1] * 4, [F] * 7 + [B])
    assert packed_select(FreeGpus(inst.cluster, inst.cluster.state == F), 2).tolist() == [4, 5]


def test_packed_backfill_skips_a_job_that_cannot_fit_and_keeps_its_victims() -> None:
    """'big' (8 GPUs) cannot fit on the 7 GPUs in service even with 'r' preempted: with backfill
    it is skipped, 'r' keeps its GPUs (the sticky rule gives its victims back) and 'small' behind
    it is placed; without backfill the round ends at 'big'.  (Non-sticky, 'r' is placed afresh.)"""
    jobs = (Job("big", 8, "classA", 0), Job("r", 2, "classA", 1, placement=(0, 1)), Job("small", 1, "classA", 2))
    inst = _round([1.0] * 8, [0] * 4 + [1] * 4, [F] * 7 + [B], jobs)
    sticky = place_sticky(inst, inst.cluster.factors, backfill=True)
    assert (sticky.placements, sticky.jobs_to_terminate) == ({"r": (0, 1), "small": (2,)}, ())
    assert place_sticky(inst, inst.cluster.factors).placements == {}
    packed = get_policy("packed")
    assert packed(inst, inst.cluster.factors, backfill=True).placements == {"r": (4, 5), "small": (6,)}
    assert packed(inst, inst.cluster.factors).placements == {}


def test_packed_sticky_preempts_from_the_back() -> None:
    jobs = (
        Job("new", 3, "classA", 0),
        Job("r1", 2, "classA", 1, placement=(0, 1)),
        Job("r2", 2, "classA", 2, placement=(4, 5)),
    )
    inst = _round([1.0] * 8, [0] * 4 + [1] * 4, [F, F, F, F, F, F, B, B], jobs)
    out = place_sticky(inst, inst.cluster.factors)
    # free: 2, 3 -> 'new' needs 3: preempt r2 (the back), then server 1 has 0 free... spill
    assert out.jobs_to_terminate == ("r2",)
    assert set(out.placements) == {"new", "r1"}
    assert out.placements["r1"] == (0, 1)
    assert set(out.placements["new"]) <= {2, 3, 4, 5}
    assert check(inst, solve(inst, "packed-sticky")) == []


@pytest.mark.parametrize("state", [GpuState.FAILED, GpuState.BUSY])
def test_packed_sticky_moves_a_running_job_off_a_gpu_out_of_service(state: GpuState) -> None:
    states = [F] * 8
    states[0] = state
    alone = _round([1.0] * 8, [0] * 4 + [1] * 4, states, (Job("r", 2, "classA", 0, placement=(0, 1)),))
    res = solve(alone, "packed-sticky")
    assert res.jobs_to_terminate == ("r",) and 0 not in res.placements["r"] and check(alone, res) == []
    # behind a waiting job that needs its GPUs: preempted, the GPU out of service goes to nobody
    jobs = (Job("w", 6, "classA", 0), Job("r", 2, "classA", 1, placement=(0, 1)))
    inst = _round([1.0] * 8, [0] * 4 + [1] * 4, states, jobs)
    for admission in (None, "backfill"):
        res = solve(inst, "packed-sticky", admission=admission)
        assert set(res.placements) == {"w"} and 0 not in res.placements["w"] and check(inst, res) == []


def test_packed_nonsticky_frees_running_jobs() -> None:
    jobs = (Job("a", 4, "classA", 0), Job("r", 2, "classA", 1, placement=(0, 1)))
    inst = _round([1.0] * 8, [0] * 4 + [1] * 4, None, jobs)
    out = get_policy("packed")(inst, inst.cluster.factors)
    assert out.placements == {"a": (0, 1, 2, 3), "r": (4, 5)}
    assert out.jobs_to_terminate == ("r",)


def test_policies_on_tiny_instance(tiny_instance: RoundInstance) -> None:
    for name in POLICIES:
        res = solve(tiny_instance, name, **_seed(name, 3))
        assert check(tiny_instance, res) == [], name


def test_bad_demand_is_an_instance_error() -> None:
    # the model checks a job once, where it is built, so no policy ever sees a bad demand
    with pytest.raises(InstanceError, match=r"jobs\[1\]\.demand"):
        _round([1.0] * 4, [0, 0, 1, 1], None, (Job("a", 1, "classA", 0), Job("b", 0, "classA", 1)))


# --------------------------------------------------------------------------- slow spec oracle
def _slow_pmfirst(cands: list[int], f: np.ndarray, server: np.ndarray, d: int) -> list[int]:
    """PM-First straight from its definition: sort by (factor, |group size − d|, position)."""
    group: dict[tuple[float, int], int] = {}
    for p in cands:
        group[(f[p], server[p])] = group.get((f[p], server[p]), 0) + 1
    return sorted(cands, key=lambda p: (f[p], abs(group[(f[p], server[p])] - d), p))[:d]


def _slow_pal(inst: RoundInstance, order: list[int]) -> dict:
    """PAL straight from its definition, with itertools over every combination."""
    from itertools import combinations

    cl = inst.cluster
    server = cl.server_of
    per_node = int(np.bincount(server).max())
    free = set(np.flatnonzero(cl.state == F).tolist())
    out = {}
    for i in order:
        job = inst.jobs[i]
        f = cl.factors[job.perfclass]
        d = job.demand
        cands = sorted(free)
        best = None
        if len(cands) < d:
            break
        if d == 1 or d > per_node:
            best = _slow_pmfirst(cands, f, server, d)
        else:
            seen = list(dict.fromkeys(f.tolist()))
            # stable sort of the list (v, within), (v, across) per level in order of first appearance
            cells = sorted(
                [c for v in seen for c in ((v * job.locality[0], v, True), (v * job.locality[2], v, False))],
                key=lambda t: t[0],
            )
            for _, v, within in cells:
                elig = [p for p in cands if f[p] <= v]
                if within:
                    counts: dict[int, int] = {}
                    first: dict[int, int] = {}
                    for p in elig:
                        counts[server[p]] = counts.get(server[p], 0) + 1
                        first.setdefault(server[p], p)
                    servers = sorted((s for s in counts if counts[s] >= d), key=lambda s: (-counts[s], first[s]))
                    combos = [
                        (max(f[list(c)]), c)
                        for s in servers
                        for c in combinations([p for p in elig if server[p] == s], d)
                    ]
                    if combos:
                        best = list(min(combos, key=lambda t: t[0])[1])
                        break
                elif len(elig) >= d:
                    best = _slow_pmfirst(elig, f, server, d)
                    break
        if best is None:
            break
        out[job.id] = tuple(int(cl.gpu_ids[p]) for p in best)
        free -= set(best)
    return out


@settings(max_examples=120, deadline=None)
@given(inst=rounds())
def test_pal_and_pmfirst_match_their_definitions(inst: RoundInstance) -> None:
    order = pal_order(inst)
    f = inst.cluster.factors
    assert list(pal.place_sequence(inst, f, order).items()) == list(_slow_pal(inst, order).items())
    slow_pm = {}
    free = set(np.flatnonzero(inst.cluster.state == F).tolist())
    for i in order:
        job = inst.jobs[i]
        if job.demand > len(free):
            break
        pick = _slow_pmfirst(sorted(free), f[job.perfclass], inst.cluster.server_of, job.demand)
        slow_pm[job.id] = tuple(int(inst.cluster.gpu_ids[p]) for p in pick)
        free -= set(pick)
    assert list(pmfirst.place_sequence(inst, f, order).items()) == list(slow_pm.items())


def test_round_policy_takes_options_or_keywords_not_half_of_each() -> None:
    # keywords beside options= were dropped without a word; the seed in options= was replaced
    from pal_opt import RoundPolicy, SolveOptions, solve
    from pal_opt.errors import InputTypeError
    from pal_opt.generate import generate_instance

    # a pal-opt error (a TypeError too, as before): it was Python's own TypeError
    with pytest.raises(InputTypeError, match=r"^options: give either options= or keyword options \(admission\), not both$"):
        RoundPolicy("pal", options=SolveOptions(), admission="backfill")
    with pytest.raises(InputTypeError, match="not both"):
        RoundPolicy("pal", options=SolveOptions(), binning="none")
    with pytest.raises(InputTypeError, match=r"^seed: give the seed as seed= or in options=, not both$"):
        RoundPolicy("random", seed=1, options=SolveOptions(seed=2))
    with pytest.raises(InputTypeError, match="not both"):
        solve(generate_instance(4, 4, 10, seed=3), "ilp", options=SolveOptions(), gap=0.1)
    inst = generate_instance(4, 4, 10, seed=3)
    a = [RoundPolicy("random", options=SolveOptions(seed=5)).place(inst).placements for _ in range(2)]
    b = RoundPolicy("random", seed=5).place(inst).placements
    assert a[0] == a[1] == b
    assert RoundPolicy("pal", options=SolveOptions(admission="backfill")).place(inst).admission == "pal-order-backfill"


def test_a_missing_instance_is_a_clear_type_error() -> None:
    from pal_opt import RoundPolicy, solve

    for call in (lambda: solve(None, "pal"), lambda: RoundPolicy("pal").place(None), lambda: solve({"jobs": []})):
        with pytest.raises(InputTypeError, match="expected a RoundInstance"):
            call()


@pytest.mark.parametrize("method", ["pal", "packed-sticky", "ilp"])
def test_round_policy_does_not_carry_a_job_onto_gpu_types_it_may_no_longer_use(method: str) -> None:
    from pal_opt import RoundPolicy

    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 8}, gpu_types="aaaabbbb")
    policy = RoundPolicy(method)
    first = policy.place(RoundInstance(cl, (Job("x", 2, "classA", 0, allowed_types=("a",)),)))
    assert set(first.placements["x"]) <= {0, 1, 2, 3}
    # the scheduler now lets x run on type b only: kept on type a, the round would be refused
    later = RoundInstance(cl, (Job("x", 2, "classA", 0, allowed_types=("b",)),))
    res = policy.place(later)
    assert set(res.placements["x"]) <= {4, 5, 6, 7} and check(later, res) == []


@pytest.mark.parametrize("method", ["pal", "packed", "ilp"])
def test_round_policy_hands_back_the_round_it_placed_with_the_jobs_it_carried(method: str) -> None:
    from pal_opt import RoundPolicy

    cl = Cluster.uniform(2, 4, {"classA": [1.0, 1.0, 1.2, 1.2, 1.0, 1.0, 1.0, 1.0]})
    policy = RoundPolicy(method)
    first = RoundInstance(cl, (Job("x", 2, "classA", 0),), RoundParams(restart_cost=30))
    policy.place(first)
    assert policy.last_instance is first
    # x, placed last round and not marked running now, is carried: it runs there, and moving it costs
    later = RoundInstance(cl, (Job("y", 4, "classA", 0), Job("x", 2, "classA", 1)), RoundParams(restart_cost=30))
    res = policy.place(later)
    assert res.info["carried"] == ["x"] and res.jobs_to_terminate == ("x",)
    assert policy.last_instance is not None and policy.last_instance.job_by_id["x"].running
    assert check(policy.last_instance, res) == []
    policy.reset()
    assert policy.last is None and policy.last_instance is None


def test_round_policy_last_round_needs_no_none_test_and_says_when_there_is_none() -> None:
    """``last`` and ``last_instance`` are Optional, so a round loop (and its type checker) had to
    test each for None; ``last_round`` is the pair, or an ``OptionError`` before the first round
    and after ``reset``.  It follows ``place`` and ``repair``; the two attributes are unchanged."""
    from pal_opt import RoundPolicy

    cl = Cluster.uniform(2, 4, {"classA": [1.0, 1.0, 1.2, 1.2, 1.0, 1.0, 1.0, 1.0]})
    policy = RoundPolicy("packed-sticky")
    with pytest.raises(OptionError, match=r"^this policy has placed no round yet \(or was reset\)"):
        _ = policy.last_round
    assert policy.last is None and policy.last_instance is None
    policy.place(RoundInstance(cl, (Job("x", 2, "classA", 0),)))
    res = policy.place(RoundInstance(cl, (Job("y", 2, "classA", 0), Job("x", 2, "classA", 1))))
    last = policy.last_round
    assert last.result is res is policy.last and last.instance is policy.last_instance
    assert last.instance.job_by_id["x"].running and check(last.instance, last.result) == []
    result, instance = policy.last_round  # unpacks as (result, instance)
    assert (result, instance) == (res, policy.last_instance)
    fixed = policy.repair([res.placements["x"][0]])
    assert policy.last_round.result is fixed and check(policy.last_round.instance, fixed) == []
    policy.reset()
    with pytest.raises(OptionError, match="no round yet"):
        _ = policy.last_round


def test_round_policy_last_round_is_absent_to_hasattr_and_getmembers_before_the_first_round() -> None:
    """``last_round`` raises an error that is also an ``AttributeError`` (``NoRoundYet``), so
    introspection that probes attributes does not blow up on a fresh policy."""
    import inspect

    from pal_opt import RoundPolicy
    from pal_opt.errors import NoRoundYet

    policy = RoundPolicy("pal")
    assert not hasattr(policy, "last_round") and getattr(policy, "last_round", None) is None
    assert "last_round" not in dict(inspect.getmembers(policy))
    with pytest.raises(NoRoundYet):
        _ = policy.last_round
    cl = Cluster.uniform(1, 4, {"classA": [1.0, 1.0, 1.2, 1.2]})
    policy.place(RoundInstance(cl, (Job("x", 2, "classA", 0),)))
    assert hasattr(policy, "last_round") and policy.last_round.result is policy.last


@pytest.mark.parametrize("method", ["pal", "packed-sticky", "ilp"])
def test_round_policy_does_not_carry_a_new_job_that_reuses_a_finished_jobs_id(method: str) -> None:
    from pal_opt import RoundPolicy

    cl = Cluster.uniform(2, 4, {"classA": [1.0] * 8, "classB": [1.0] * 8})
    params = RoundParams(restart_cost=30)
    policy = RoundPolicy(method)
    policy.place(RoundInstance(cl, (Job("x", 2, "classA", 0, model="resnet50"),), params))
    # x finished; a job of another class or model now goes by "x": new, not carried, and named
    for new in (Job("x", 2, "classB", 0, model="resnet50"), Job("x", 2, "classA", 0, model="bert")):
        again = RoundPolicy(method)
        again.place(RoundInstance(cl, (Job("x", 2, "classA", 0, model="resnet50"),), params))
        res = again.place(RoundInstance(cl, (new,), params))
        assert res.info.get("carried") is None and res.info["reused_ids"] == ["x"]
        assert res.jobs_to_terminate == () and not again.last_instance.job_by_id["x"].running
    # the same class and model cannot be told apart: the scheduler says x finished
    policy.forget("x", "never-placed")
    assert policy.last_placements == {}
    res = policy.place(RoundInstance(cl, (Job("x", 2, "classA", 0, model="resnet50"),), params))
    assert "carried" not in res.info and "reused_ids" not in res.info
    # without forget, the same job is carried as before
    res = policy.place(RoundInstance(cl, (Job("x", 2, "classA", 0, model="resnet50"),), params))
    assert res.info["carried"] == ["x"]


@pytest.mark.parametrize("slow_first", [True, False])
def test_a_job_of_several_types_gets_the_group_of_least_slowdown(slow_first: bool) -> None:
    """A job that may use either type (not mixed) goes on the faster type's gang, whichever group
    is listed first (a mutant that kept the slowest gang passed the other tests)."""
    f = [1.5, 1.5, 1.0, 1.0] if slow_first else [1.0, 1.0, 1.5, 1.5]
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": f}, gpu_types="aabb")
    inst = RoundInstance(cl, (Job("m", 2, "classA"),), RoundParams(binning="none"))
    fast = (2, 3) if slow_first else (0, 1)
    assert pal.place(inst, cl.factors).placements == {"m": fast}
