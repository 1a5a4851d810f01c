"""Warm re-solving (pal_opt.ilp.warm): a round solved from the last one's LP basis and placement
gives an answer no costlier than a cold solve, a bound that is the new round's (≤ the proven
optimum), falls back to cold on another cluster, and is deterministic."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pal_opt import WarmStart, check, solve
from pal_opt.errors import OptionError
from pal_opt.generate import generate_instance, sample_jobs
from pal_opt.ilp import scale
from pal_opt.ilp.relaxation import build_relaxation
from pal_opt.ilp.solve import prepare_round
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams
from pal_opt.result import PlacementResult, Status

pytest.importorskip("highspy")


def _next(inst: RoundInstance, k: int, share: float = 0.1) -> RoundInstance:
    """``share`` of the jobs finish, as many arrive (ids never reused)."""
    rng = np.random.default_rng(k)
    jobs = list(inst.jobs)
    n = max(1, round(share * len(jobs)))
    gone = set(rng.choice(len(jobs), n, replace=False).tolist())
    new = sample_jobs(n, rng, max_demand=inst.cluster.num_gpus // 4)
    queue = [j for i, j in enumerate(jobs) if i not in gone] + [replace(j, id=k * 1000 + j.id) for j in new]
    return RoundInstance(inst.cluster, tuple(replace(j, position=i) for i, j in enumerate(queue)), inst.params)


def _sequence(nodes: int, per: int, jobs: int, rounds: int, seed: int = 0) -> list[RoundInstance]:
    out = [generate_instance(nodes, per, jobs, seed=seed)]
    for k in range(1, rounds):
        out.append(_next(out[-1], 100 * seed + k))
    return out


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small rounds take the large-round path (flow-free bound), so that it can be checked
    against proven optima."""
    monkeypatch.setattr(scale, "LARGE_ROUND_GPUS", 16)
    monkeypatch.setattr(scale.is_large_round, "__defaults__", (16,))


def test_warm_sequence_is_no_worse_than_cold_and_its_bound_is_valid(small_threshold: None) -> None:
    ws = WarmStart()
    hot = 0
    for k, inst in enumerate(_sequence(24, 4, 60, 5)):
        cold = solve(inst, "ilp", backend="highs", gap=0.02)
        warm = solve(inst, "ilp", backend="highs", gap=0.02, warm=ws)
        exact = solve(inst, "ilp", backend="highs")
        assert exact.status.value == "optimal"
        assert check(inst, warm) == []
        assert warm.info["relaxation"] == "flow-free (highs)"
        if warm.info["pal_deferred"]:  # PAL's greedy only if the packing is not within the gap
            assert warm.gap is not None and warm.gap <= 0.02
        else:
            assert warm.objective <= cold.objective + 1e-9
        # the bound is the new round's LP optimum: the cold one, and at most the proven optimum
        assert warm.bound == pytest.approx(cold.bound, rel=1e-7, abs=1e-7)
        assert warm.bound <= exact.objective + 1e-6 * max(1.0, abs(exact.objective))
        assert warm.gap is not None and warm.gap <= 0.02
        if k == 0:
            assert warm.info["warm"] == "cold: first round"
        else:
            assert warm.info["warm"].startswith("warm: ")
            hot += warm.info["relaxation_start"].startswith("hot")
    assert hot >= 3  # the LP restarted from the last basis in most rounds
    assert ws.rounds == 5


def test_relaxation_with_absent_types_has_the_same_optimum() -> None:
    from pal_opt.ilp.backends import SolveOptions, get_backend

    inst = generate_instance(16, 4, 40, seed=3)
    setup = prepare_round(inst, None, "highs", None, None)
    plain = build_relaxation(inst, setup.admitted, setup.factors)
    assert plain is not None
    extra = ("classA", 3, (1.0, 1.7, 1.7))
    assert extra not in plain.types
    wide = build_relaxation(inst, setup.admitted, setup.factors, also=[extra])
    assert wide is not None and extra in wide.types and wide.program.num_vars > plain.program.num_vars
    solver = get_backend("highs")()
    a, b = solver.relaxation_bound(plain.program, SolveOptions()), solver.relaxation_bound(wide.program, SolveOptions())
    assert a == pytest.approx(b, rel=1e-9)


def test_hot_lp_equals_a_fresh_lp() -> None:
    from pal_opt.ilp.backends import SolveOptions, get_backend
    from pal_opt.ilp.backends.base import RelaxationState

    first, second = _sequence(16, 8, 50, 2, seed=4)
    state = RelaxationState()
    solver = get_backend("highs")()
    bounds = []
    types: tuple = ()
    for inst in (first, second):
        setup = prepare_round(inst, None, "highs", None, None)
        relax = build_relaxation(inst, setup.admitted, setup.factors, also=types)
        assert relax is not None
        types = relax.types
        hot = solver.relaxation_bound(relax.program, SolveOptions(), state)
        fresh = solver.relaxation_bound(relax.program, SolveOptions())
        assert hot == pytest.approx(fresh, rel=1e-9, abs=1e-9)
        bounds.append(state.last)
    assert bounds[0].startswith("cold") and bounds[1].startswith("hot")


def test_another_cluster_falls_back_to_cold(small_threshold: None) -> None:
    ws = WarmStart()
    a = generate_instance(16, 4, 40, seed=1)
    solve(a, "ilp", backend="highs", gap=0.02, warm=ws)
    b = generate_instance(16, 4, 40, seed=2)  # other measurements
    res = solve(b, "ilp", backend="highs", gap=0.02, warm=ws)
    assert res.info["warm"].startswith("cold: another cluster")
    assert res.info["relaxation_start"].startswith("cold")
    assert check(b, res) == []
    res2 = solve(b, "ilp", backend="highs", gap=0.02, binning="none", warm=ws)
    assert res2.info["warm"] == "cold: another binning mode or backend"
    assert ws.rounds == 1


def test_invalid_kept_placements_are_dropped() -> None:
    inst = generate_instance(8, 4, 12, seed=1)
    setup = prepare_round(inst, None, "highs", None, None)
    ws = WarmStart()
    i, j = setup.admitted[0], setup.admitted[1]
    a, b = inst.jobs[i], inst.jobs[j]
    gpus = inst.cluster.gpu_ids.tolist()
    ws.placements = {a.id: tuple(gpus[:a.demand]), b.id: tuple(gpus[:b.demand]), "gone": (gpus[-1],)}
    kept = ws.kept(inst, setup.admitted)
    assert kept == {a.id: tuple(gpus[:a.demand])}  # b shares a GPU with a; "gone" is not queued
    ws.placements = {a.id: tuple(gpus[:a.demand - 1]) + (10**9,)}
    assert ws.kept(inst, setup.admitted) == {}  # an unknown GPU


def test_warm_is_deterministic(small_threshold: None) -> None:
    seq = _sequence(24, 4, 60, 3, seed=5)

    def run() -> list[tuple]:
        ws = WarmStart()
        out = []
        for inst in seq:
            r = solve(inst, "ilp", backend="highs", gap=0.02, warm=ws)
            out.append((r.placements, r.objective, r.bound, r.info["warm"]))
        return out

    assert run() == run()


def test_warm_must_be_a_warm_start() -> None:
    inst = generate_instance(4, 4, 5, seed=0)
    with pytest.raises(OptionError, match="warm must be a pal_opt.WarmStart"):
        solve(inst, "ilp", backend="highs", warm={})
    with pytest.raises(OptionError):
        solve(inst, "pal", warm=WarmStart())  # not an option of the greedy methods


def test_a_round_policy_refuses_a_warm_that_is_not_a_warm_start_when_built() -> None:
    """``RoundPolicy("ilp", warm=5)`` was built and failed in its first round, unlike every other
    option a policy checks when it is built (and so ``BloxPlacement(..., warm=5)``)."""
    from pal_opt import RoundPolicy, SolveOptions
    from pal_opt.adapters.blox import BloxPlacement

    for build in (lambda: RoundPolicy("ilp", warm=5), lambda: RoundPolicy("ilp", options=SolveOptions(warm={})),
                  lambda: BloxPlacement(None, method="ilp", warm="ws")):
        with pytest.raises(OptionError, match=r"^warm must be a pal_opt\.WarmStart, got (int|dict|str)$"):
            build()
    RoundPolicy("ilp", warm=WarmStart())  # the real one is taken


def test_program_path_records_and_says_nothing_was_reused() -> None:
    ws = WarmStart()
    seq = _sequence(8, 4, 16, 2, seed=6)
    solve(seq[0], "ilp", backend="highs", warm=ws)
    res = solve(seq[1], "ilp", backend="highs", warm=ws)
    assert res.info["warm"].startswith("warm: nothing reused")
    assert res.status.value == "optimal" and check(seq[1], res) == []


def test_the_kept_relaxation_is_the_one_a_fresh_build_gives(small_threshold: None) -> None:
    """On the same free GPUs the relaxation is not built again: the kept one with this round's
    counts is exactly what build_relaxation gives with the kept job types (costs, matrix,
    bounds, constant); another free set builds it anew."""
    ws = WarmStart()
    rounds = _sequence(24, 4, 60, 4, seed=3)
    for k, inst in enumerate(rounds):
        res = solve(inst, "ilp", backend="highs", gap=0.02, warm=ws)
        assert res.info["relaxation_reused"] is (k > 0)
        setup = prepare_round(inst, None, "highs", None, None)
        kept = ws.relaxation(inst, setup.admitted, couple=True)
        assert kept is not None
        fresh = build_relaxation(inst, setup.admitted, setup.factors, couple=True, also=ws.types)
        assert fresh is not None and fresh.types == kept.types
        a, b = kept.program, fresh.program
        assert np.array_equal(a.c, b.c) and (a.A != b.A).nnz == 0
        for name in ("row_lo", "row_hi", "col_lo", "col_hi"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert a.obj_offset == b.obj_offset
        assert np.array_equal(kept.slots, fresh.slots)
    # a GPU failing changes the free set: built anew (and the LP is solved cold)
    last = rounds[-1]
    state = last.cluster.state.copy()
    state[int(np.flatnonzero(state == 0)[0])] = 2
    broken = RoundInstance(last.cluster.with_state(state), last.jobs, last.params)
    res = solve(broken, "ilp", backend="highs", gap=0.02, warm=ws)
    assert res.info["relaxation_reused"] is False
    assert check(broken, res) == []


def test_pal_is_deferred_only_after_a_round_it_did_not_win(small_threshold: None) -> None:
    """PAL's greedy comes after the packing when the last answer was not PAL's: it is then
    computed only if the packing is not within the gap, and a round where it is not deferred
    equals the cold answer."""
    ws = WarmStart()
    seen = []
    for inst in _sequence(24, 4, 60, 6, seed=5):
        last = ws.last_start
        cold = solve(inst, "ilp", backend="highs", gap=0.02)
        warm = solve(inst, "ilp", backend="highs", gap=0.02, warm=ws)
        assert check(inst, warm) == []
        deferred = warm.info["pal_deferred"]
        assert deferred == (ws.rounds > 1 and last not in (None, "pal"))
        if deferred and "start_pal_objective" not in warm.info:
            assert warm.gap is not None and warm.gap <= 0.02  # the packing settled it
        if not deferred:
            assert warm.objective <= cold.objective + 1e-9
        seen.append(deferred)
    assert any(seen)


def test_kept_types_are_the_last_rounds_not_every_rounds(small_threshold: None) -> None:
    """A scheduler that gives jobs their own locality penalties makes new job types every round;
    the warm state kept every type it had seen (1,196 after 100 rounds in a review's loop, the
    relaxation 18,071 columns and growing, the LP cold every round).  It keeps the last round's."""
    ws = WarmStart()
    inst = generate_instance(16, 4, 24, seed=5)
    for k in range(6):
        jobs = tuple(replace(j, locality=(1.0, 1.2 + 0.01 * k, 2.3 + 0.01 * k)) for j in inst.jobs)
        this = RoundInstance(inst.cluster, jobs, inst.params)
        res = solve(this, "ilp", backend="highs", gap=0.02, warm=ws)
        assert check(this, res) == []
        mine = {(j.perfclass, j.demand, tuple(map(float, j.locality))) for j in jobs}
        assert ws.types and set(ws.types) <= mine  # this round's types only


def test_kept_drops_a_wrong_length_a_repeated_gpu_and_a_busy_gpu() -> None:
    """Hand-made: six free-or-busy GPUs on three servers; only a's last placement is still valid
    (b repeats GPU 2, c's GPU 3 is busy now, d needs 2 GPUs but had 1)."""
    state = [GpuState.FREE] * 6
    state[3] = GpuState.BUSY
    cl = Cluster.from_arrays(range(6), [0, 0, 1, 1, 2, 2], {"k": [1.0] * 6}, state=state)
    jobs = (Job("a", 2, "k"), Job("b", 2, "k"), Job("c", 1, "k"), Job("d", 2, "k"))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    ws = WarmStart()
    ws.placements = {"a": (0, 1), "b": (2, 2), "c": (3,), "d": (4,)}
    assert ws.kept(inst, range(4)) == {"a": (0, 1)}


def test_the_key_covers_racks_and_throughput() -> None:
    """Two clusters that differ only in which rack a server is in, or only in a class's
    throughput on a type, are other clusters to a warm state."""
    flat = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"k": [1.0] * 4}, gpu_types="aabb",
                               throughput={"k": {"a": 1.0, "b": 1.0}})
    jobs = (Job("j", 2, "k"),)
    one = replace(flat, rack_of_server=np.array([0, 0]), rack_ids=("r0", "r1"))
    two = replace(flat, rack_of_server=np.array([0, 1]), rack_ids=("r0", "r1"))
    faster = replace(flat, throughput={"k": {"a": 1.0, "b": 2.0}})
    ws = WarmStart()
    assert ws.match(RoundInstance(one, jobs), "none", "highs") == "first round"
    assert ws.match(RoundInstance(one, jobs), "none", "highs") is None
    assert ws.match(RoundInstance(two, jobs), "none", "highs").startswith("another cluster")
    assert ws.match(RoundInstance(flat, jobs), "none", "highs").startswith("another cluster")
    assert ws.match(RoundInstance(faster, jobs), "none", "highs").startswith("another cluster")


def test_a_kept_relaxation_serves_only_the_same_coupling() -> None:
    inst = generate_instance(8, 4, 12, seed=1)
    setup = prepare_round(inst, None, "highs", None, None)
    relax = build_relaxation(inst, setup.admitted, setup.factors, couple=False)
    assert relax is not None
    ws = WarmStart()
    ws.keep_relaxation(inst, relax, couple=False)
    assert ws.relaxation(inst, setup.admitted, couple=False) is not None
    assert ws.relaxation(inst, setup.admitted, couple=True) is None


def test_an_infeasible_round_leaves_no_placements() -> None:
    ws = WarmStart()
    ok = PlacementResult({"a": (0, 1)}, "ilp", Status.FEASIBLE, 1.0, 1.0, 2, 0.0, "prefix")
    ws.record(ok)
    assert ws.placements == {"a": (0, 1)}
    ws.record(replace(ok, status=Status.INFEASIBLE))
    assert ws.placements == {} and ws.rounds == 2
