"""Bottleneck exchanges (pal_opt.ilp.improve): valid, never costlier, used by solve_ilp."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pal_opt.check import check
from pal_opt.cost import evaluate
from pal_opt.generate import generate_instance, generate_typed_instance
from pal_opt.ilp import solve_ilp
from pal_opt.ilp.heuristic import pal_greedy
from pal_opt.ilp.improve import applies, exchange_bottlenecks
from pal_opt.ilp.packing import fast_packing
from pal_opt.ilp.solve import prepare_round
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams
from pal_opt.result import Status

TOL = 1e-9


def _start(inst, how):
    s = prepare_round(inst, None, "highs", "prefix", None)
    if how == "packing" and not inst.cluster.racked:
        return s, fast_packing(inst, s.admitted, s.factors)
    return s, pal_greedy(inst, s.factors, s.admitted)


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(2, 12), gpn=st.sampled_from([2, 4, 8]), racks=st.sampled_from([0, 2, 3]),
       seed=st.integers(0, 10_000), how=st.sampled_from(["packing", "pal"]))
def test_exchanges_keep_a_valid_placement_and_never_cost_more(nodes, gpn, racks, seed, how):
    inst = generate_instance(nodes, gpn, 3 * nodes, racks=min(racks, nodes), seed=seed, busy_fraction=0.2)
    s, start = _start(inst, how)
    if start is None:
        return
    before = evaluate(inst, start, s.factors)
    after_placement, moves = exchange_bottlenecks(inst, start, s.factors)
    after = evaluate(inst, after_placement, s.factors)
    assert set(after_placement) == set(start)
    assert all(len(after_placement[j]) == len(start[j]) for j in start)
    used = [g for gids in after_placement.values() for g in gids]
    assert len(used) == len(set(used))
    free = set(inst.cluster.gpu_ids[inst.cluster.free_mask].tolist())
    assert set(used) <= free
    assert after.cost <= before.cost + TOL
    assert (moves == 0) == (abs(after.cost - before.cost) <= TOL)
    # no job spans a higher topology level than before
    assert all(after.level[j] <= before.level[j] for j in start)
    assert exchange_bottlenecks(inst, start, s.factors) == (after_placement, moves)  # deterministic


def _two_server_round():
    """Server 0: GPUs 0-3, server 1: GPUs 4-7; one class.  Job a (2 GPUs) sits on server 0 with a
    slow GPU (1.5); job b (4 GPUs, spanning) already has a slower one (1.6) and holds the fast
    GPU 2 on server 0."""
    factors = np.array([1.0, 1.5, 1.0, 1.1, 1.6, 1.0, 1.0, 1.2])
    cluster = Cluster.from_arrays(np.arange(8), [0, 0, 0, 0, 1, 1, 1, 1], {"classA": factors})
    jobs = (Job(id="a", demand=2, perfclass="classA", position=0),
            Job(id="b", demand=4, perfclass="classA", position=1))
    return RoundInstance(cluster, jobs, RoundParams(binning="none"), "two-servers")


def test_a_job_hands_its_bottleneck_to_a_slower_gang():
    """b (the costliest) first trades its 1.6 GPU (4) for the free 1.1 GPU (3), then its new
    bottleneck (3) for a's 1.0 GPU (0): a receives a GPU no slower than its own 1.5 on its own
    server, so a's pace is unchanged and b runs at 1.0."""
    inst = _two_server_round()
    s = prepare_round(inst, None, "highs", "prefix", None)
    start = {"a": (0, 1), "b": (2, 4, 5, 6)}
    before = evaluate(inst, start, s.factors)
    out, moves = exchange_bottlenecks(inst, start, s.factors)
    assert (out, moves) == ({"a": (1, 3), "b": (0, 2, 5, 6)}, 2)
    after = evaluate(inst, out, s.factors)
    assert after.slowdown["a"] == before.slowdown["a"]
    assert after.slowdown["b"] < before.slowdown["b"]
    assert after.cost < before.cost


def test_no_move_when_the_receiver_would_span_more():
    """b's bottleneck (GPU 7, 1.2) is slower than a's GPUs 0 and 2, but a sits on server 0 and
    would span servers with GPU 7; every other GPU is slower for b."""
    inst = _two_server_round()
    s = prepare_round(inst, None, "highs", "prefix", None)
    start = {"a": (0, 2), "b": (3, 5, 6, 7)}
    assert exchange_bottlenecks(inst, start, s.factors) == (start, 0)


def test_give_up_stops_at_once():
    inst = _two_server_round()
    s = prepare_round(inst, None, "highs", "prefix", None)
    start = {"a": (0, 1), "b": (2, 4, 5, 6)}
    assert exchange_bottlenecks(inst, start, s.factors, give_up=lambda: True) == (start, 0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(["aws:3x4,rtx:3x4", "aws:2x8,rtx:2x8,dgx-ext:2x8",
                                                          "aws:4x2,rtx:2x4"]),
       busy=st.sampled_from([0.0, 0.2]))
def test_typed_exchanges_keep_every_job_on_its_gpu_types(seed, spec, busy):
    """With GPU types only GPUs of one hardware type change hands: every job keeps its count of
    GPUs per type, the placement stays valid (check.py) and costs no more."""
    inst = generate_typed_instance(spec, 12, seed=seed, busy_fraction=busy, guaranteed_fraction=0.3)
    s = prepare_round(inst, None, "highs", "prefix", None)
    assert applies(inst, s.admitted)
    start = pal_greedy(inst, s.factors, s.admitted)
    if start is None or len(start) != len(s.admitted):
        return
    out, moves = exchange_bottlenecks(inst, start, s.factors)
    cl = inst.cluster
    for jid, gids in start.items():
        assert np.array_equal(np.bincount(cl.type_of[cl.positions(gids)], minlength=cl.num_types),
                              np.bincount(cl.type_of[cl.positions(out[jid])], minlength=cl.num_types))
    assert check(inst, {"placements": {str(j): list(g) for j, g in out.items()}, "admission": "given"}) == []
    assert evaluate(inst, out, s.factors).cost <= evaluate(inst, start, s.factors).cost + TOL


def test_a_one_gpu_job_may_take_a_gpu_on_another_server():
    """Server 0 (GPUs 0-3) and server 1 (GPUs 4-7), all of type a but GPU 7.  Gang b spans both
    servers with its bottleneck GPU 4 (1.6); one-GPU job a holds GPU 0 (1.0) of server 0; the free
    GPUs 5 and 6 are slower still, GPU 7 is fast but of type b.  The one exchange: a takes GPU 4
    on the other server (a one-GPU job spans a server wherever it is; its cost rises by
    ln 1.6, b's falls by 4 ln 1.6); b never receives GPU 7."""
    factors = np.array([1.0, 1.0, 1.0, 1.0, 1.6, 1.7, 1.7, 0.5])
    cluster = Cluster.from_arrays(np.arange(8), [0, 0, 0, 0, 1, 1, 1, 1], {"classA": factors},
                                  gpu_types="aaaaaaab")
    jobs = (Job(id="a", demand=1, perfclass="classA", position=0),
            Job(id="b", demand=4, perfclass="classA", position=1))
    inst = RoundInstance(cluster, jobs, RoundParams(binning="none"), "one-gpu-holder")
    s = prepare_round(inst, None, "highs", "prefix", None)
    start = {"a": (0,), "b": (1, 2, 3, 4)}
    out, moves = exchange_bottlenecks(inst, start, s.factors)
    assert (out, moves) == ({"a": (4,), "b": (0, 1, 2, 3)}, 1)
    assert evaluate(inst, out, s.factors).cost < evaluate(inst, start, s.factors).cost


def test_not_for_pipeline_rounds_or_charged_moves():
    flat = generate_instance(4, 4, 6, seed=0)
    assert applies(flat, [0, 1, 2])
    typed = generate_typed_instance("aws:2x4,rtx:2x4", 6, seed=0)
    assert applies(typed, list(range(len(typed.jobs))))


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_solve_ilp_takes_the_exchanged_start_when_it_is_cheaper(backend):
    """Seed 8 (16 × 4 GPUs): neither greedy start is within 0.1 % of the LP bound; the exchanged
    PAL start reaches the bound, so every backend proves the target without its search."""
    inst = generate_instance(16, 4, 20, seed=8)
    exact = solve_ilp(inst, backend="highs")
    assert exact.status == Status.OPTIMAL
    res = solve_ilp(inst, backend=backend, gap=0.001)
    assert check(inst, res) == []
    assert res.info["start_source"] == "exchange" and res.info["exchange_moves"] >= 1
    cheapest_greedy = min(res.info["start_pal_objective"], res.info["start_packing_objective"])
    assert res.info["start_exchange_objective"] <= cheapest_greedy - 0.05
    assert res.objective == pytest.approx(res.info["start_exchange_objective"])
    assert res.objective >= exact.objective - 1e-6
    assert res.gap is not None and res.gap <= 0.001


def _round(factors: dict[str, list[float]], servers: list[int], jobs: list[tuple[str, int, str]],
           racks: dict[int, int] | None = None) -> tuple[RoundInstance, dict[str, np.ndarray]]:
    """A round of the given per-class factors (binning off) and its factors as the program sees them."""
    cluster = Cluster.from_arrays(np.arange(len(servers)), servers, {c: np.array(f) for c, f in factors.items()},
                                  rack_of_server=racks)
    inst = RoundInstance(cluster, tuple(Job(id=j, demand=d, perfclass=c, position=k) for k, (j, d, c) in enumerate(jobs)),
                         RoundParams(binning="none"), "by-hand")
    return inst, prepare_round(inst, None, "highs", "prefix", None).factors


def test_applies_refuses_pipeline_rounds_and_charged_moves_of_running_jobs() -> None:
    """No exchanges with a pipeline job admitted (its cost is its stages' pace), nor with a running
    admitted job whose move is charged (a restart cost): the bottleneck is then not the whole cost."""
    cl = Cluster.uniform(2, 4, {"classA": [1.0] * 8})
    pipe = RoundInstance(cl, (Job("p", 2, "classA", pipeline=Pipeline((1.0, 1.0), (1, 1))), Job("g", 2, "classA")))
    assert not applies(pipe, [0, 1]) and applies(pipe, [1])
    running = (Job("r", 2, "classA", placement=(0, 1)), Job("q", 2, "classA"))
    charged = RoundInstance(cl, running, RoundParams(restart_cost=60.0))
    assert not applies(charged, [0, 1]) and applies(charged, [1])
    assert applies(RoundInstance(cl, running), [0, 1])  # no charge: a running job is any job


def test_a_job_takes_gpus_only_where_it_already_spans() -> None:
    """Racks {servers 0, 1} and {2, 3}, two GPUs each.  Job a lies on server 0 with a 2.0 GPU, the
    free GPUs 2 and 3 (1.0) are on server 1 of its rack; job b spans servers 2 and 3 of rack 1 with
    a 2.0 GPU, and the free 2.5 GPUs of its rack are slower.  Neither may reach out: a taking GPU 2
    would span its rack, b taking GPU 2 the cluster, each cheaper under a penalty equal at both
    levels, but no exchange makes a job span more: no move."""
    inst, factors = _round({"classA": [1.0, 2.0, 1.0, 1.0, 1.0, 2.5, 2.0, 2.5]}, [0, 0, 1, 1, 2, 2, 3, 3],
                           [("a", 2, "classA"), ("b", 2, "classA")], racks={0: 0, 1: 0, 2: 1, 3: 1})
    start = {"a": (0, 1), "b": (4, 6)}
    assert exchange_bottlenecks(inst, start, factors) == (start, 0)


def test_an_exchange_takes_a_strictly_faster_gpu_only() -> None:
    """a (3 GPUs) has its bottleneck GPU 2 (2.0); free GPU 4 is as slow, and one-GPU job b holds
    GPU 3 (1.0), which b cannot give without getting slower.  The strict pass finds nothing; the
    second takes GPU 3 (b's rise ln 2 is less than a's gain 3 ln 2), not the equally slow free
    GPU, which gains nothing: one move."""
    inst, factors = _round({"classA": [1.0, 1.0, 2.0, 1.0, 2.0]}, [0] * 5, [("a", 3, "classA"), ("b", 1, "classA")])
    out, moves = exchange_bottlenecks(inst, {"a": (0, 1, 2), "b": (3,)}, factors)
    assert (out, moves) == ({"a": (0, 1, 3), "b": (2,)}, 1)


def test_a_holder_as_slow_as_what_it_receives_is_an_exchange_of_the_first_pass() -> None:
    """a (one GPU, 2.0) and b (one GPU of another class, 1.3 for b) on one server; free GPU 2
    is 1.5 for a.  b's GPU 1 (1.0 for a) for a's GPU 0 (1.3 for b, no slower for b) is taken in the
    strict pass, the fastest for a.  Taking the free GPU first (as if b had to get strictly
    faster) ends with b on GPU 2, at 1.8."""
    inst, factors = _round({"classA": [2.0, 1.0, 1.5], "classB": [1.3, 1.3, 1.8]}, [0, 0, 0],
                           [("a", 1, "classA"), ("b", 1, "classB")])
    assert exchange_bottlenecks(inst, {"a": (0,), "b": (1,)}, factors) == ({"a": (1,), "b": (0,)}, 1)


def test_a_holder_does_not_receive_a_gpu_off_its_server() -> None:
    """Servers {0, 1, 2} and {3, 4, 5}; a spans both with its bottleneck GPU 0 (3.0) on server 0;
    b holds GPUs 4 and 5 on server 1, the fastest for a.  b may not receive GPU 0 (it would span
    servers) even in the strict pass, where it would be no slower: a takes the free GPU 1 (2.0)
    on server 0, and b stays."""
    inst, factors = _round({"classA": [3.0, 2.0, 2.0, 1.0, 1.0, 1.0], "classB": [1.0] * 6}, [0, 0, 0, 1, 1, 1],
                           [("a", 2, "classA"), ("b", 2, "classB")])
    assert exchange_bottlenecks(inst, {"a": (0, 3), "b": (4, 5)}, factors) == ({"a": (1, 3), "b": (4, 5)}, 1)


def test_free_gpus_before_held_ones_on_ties() -> None:
    """a's bottleneck GPU 0 (2.0): free GPU 3 and b's GPU 2 are both 1.0 for a, and b (another
    class) is indifferent; the free one is taken (the documented tie-break)."""
    inst, factors = _round({"classA": [2.0, 1.0, 1.0, 1.0], "classB": [1.0] * 4}, [0] * 4,
                           [("a", 2, "classA"), ("b", 1, "classB")])
    assert exchange_bottlenecks(inst, {"a": (0, 1), "b": (2,)}, factors) == ({"a": (1, 3), "b": (2,)}, 1)


def test_a_job_changed_is_tried_again_at_once() -> None:
    """a (3 GPUs: 3.0, 2.8, 2.6) and free GPUs 1.0, 1.5 and 2.0 on one server: three exchanges in
    a row, each on a's new bottleneck; a job tried only once per pass made two."""
    inst, factors = _round({"classA": [3.0, 2.8, 2.6, 2.0, 1.0, 1.5]}, [0] * 6, [("a", 3, "classA")])
    assert exchange_bottlenecks(inst, {"a": (0, 1, 2)}, factors) == ({"a": (3, 4, 5)}, 3)


def test_a_holders_rise_is_weighted_by_its_gpus() -> None:
    """In the second pass a (one GPU, 2.0) may take GPU 1 of b (4 GPUs, 1.6 for its class) or GPU 5
    of c (one GPU, 1.2); both would receive GPU 0 (2.0 for them).  b's cost would rise by
    4·ln(2/1.6) = 0.89, c's by ln(2/1.2) = 0.51: c's GPU is taken (a gains ln 2 = 0.69).  Weighing
    the factor's rise alone chose b's GPU, and the move, dearer than a's gain, was not made."""
    inst, factors = _round({"classA": [2.0, 1.0, 5.0, 5.0, 5.0, 1.0], "classB": [2.0, 1.6, 1.6, 1.6, 1.6, 1.2]},
                           [0] * 6, [("a", 1, "classA"), ("b", 4, "classB"), ("c", 1, "classB")])
    start = {"a": (0,), "b": (1, 2, 3, 4), "c": (5,)}
    assert exchange_bottlenecks(inst, start, factors) == ({"a": (5,), "b": (1, 2, 3, 4), "c": (0,)}, 1)


def test_an_exchange_gives_every_bottleneck_gpu_or_none() -> None:
    """a has two GPUs at its slowest (2.0) and only one faster GPU to take, b's GPU 2; a's move is
    not made by halves.  b (its GPU 2 at 3.0 for its class) then makes its own: it takes GPU 1
    (0.9 for b, the fastest) and a gets GPU 2: one move.  Half of a's exchange (GPU 0 for GPU 2,
    which lowered the cost only through b) came first and took two."""
    inst, factors = _round({"classA": [2.0, 2.0, 1.0], "classB": [1.0, 0.9, 3.0]}, [0, 0, 0],
                           [("a", 2, "classA"), ("b", 1, "classB")])
    assert exchange_bottlenecks(inst, {"a": (0, 1), "b": (2,)}, factors) == ({"a": (0, 2), "b": (1,)}, 1)
