"""Rules of pal_opt/ilp/decode.py that no test held (mutation review round 5, 2026-12-06): each
test fails on a one-rule change of decode.py that the rest of the suite let pass."""

from __future__ import annotations

import pytest

from pal_opt.cost import evaluate
from pal_opt.errors import InstanceError
from pal_opt.ilp import solve_ilp
from pal_opt.ilp.decode import decode, encode
from pal_opt.ilp.formulation import build_formulation
from pal_opt.model import Cluster, Job, RoundInstance, RoundParams


def _cluster() -> Cluster:
    return Cluster.uniform(2, 2, {"classA": [1.0, 1.1, 1.0, 1.2]})


def test_decode_returns_the_jobs_in_queue_order() -> None:
    """decode's result is ``{job id: GPUs}`` in queue order (its docstring), whatever pool each
    job's slot is in.  Mutant D8 returned the jobs in the order they were decoded (kept jobs,
    then pool by pool, the largest demand first in a pool): ``c`` before ``b`` here."""
    inst = RoundInstance(_cluster(), (Job("a", 1, "classA"), Job("b", 2, "classA"), Job("c", 1, "classA")))
    form = build_formulation(inst)
    # a and c share server 0, b has server 1: b's pool comes after a's and c's
    got = decode(form, encode(form, {"a": (0,), "b": (2, 3), "c": (1,)}))
    assert got == {"a": (0,), "b": (2, 3), "c": (1,)}
    assert list(got) == ["a", "b", "c"]


def test_the_exact_programs_placements_are_in_queue_order() -> None:
    """A user reading ``PlacementResult.placements`` (and the JSON written from it) gets the
    jobs in queue order.  Mutant D8 (decode no longer sorting) gave ``a, c, b``."""
    inst = RoundInstance(_cluster(), (Job("a", 1, "classA"), Job("b", 2, "classA", placement=(2, 3)),
                                      Job("c", 1, "classA")))
    res = solve_ilp(inst)
    assert set(res.placements) == {"a", "b", "c"}
    assert list(res.placements) == ["a", "b", "c"]


# ---- step 4/5 of decode: GPUs of a rack or cluster pool, then split among the pool's jobs
def _servers(cl: Cluster, gpus: tuple[int, ...]) -> set[int]:
    return {int(cl.server_of[cl.position[g]]) for g in gpus}


def _racks(cl: Cluster, gpus: tuple[int, ...]) -> set[int]:
    return {int(cl.rack_of_server[s]) for s in _servers(cl, gpus)}


def _roundtrip(inst: RoundInstance, placement: dict) -> dict:
    form = build_formulation(inst)
    return decode(form, encode(form, placement))


def test_a_cluster_slot_takes_gpus_from_the_server_with_most_left() -> None:
    """A job in a cluster slot gets its GPUs from the servers with the most leftover GPUs first,
    so here it lands on one server (D12 took the emptiest server first: two servers)."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 1, 1, 1], {"classA": [1.0] * 4})
    got = _roundtrip(RoundInstance(cl, (Job("a", 2, "classA"),)), {"a": (0, 1)})
    assert len(_servers(cl, got["a"])) == 1


def test_a_cluster_slot_on_a_racked_cluster_takes_the_rack_with_most_left_first() -> None:
    """Racked: the cluster pool's GPUs come from the rack with the most leftover GPUs, its servers
    first, so the job stays inside one rack (D13 ignored racks, D14 took the emptiest rack
    first: the job spanned both racks)."""
    cl = Cluster.from_arrays(list(range(7)), [0, 0, 1, 1, 2, 2, 2], {"classA": [1.0] * 7},
                             rack_of_server={0: "r0", 1: "r0", 2: "r1"})
    got = _roundtrip(RoundInstance(cl, (Job("a", 4, "classA"),)), {"a": (0, 1, 4, 5)})
    assert got["a"] == (0, 1, 2, 3)
    assert len(_racks(cl, got["a"])) == 1


def test_a_pools_gpus_go_to_the_largest_job_first_best_fit() -> None:
    """The pool's jobs are split largest demand first, each on the server it fits most tightly:
    all three jobs here get one server each (D16 placed the smallest first and a 3-GPU job
    spanned servers)."""
    cl = Cluster.from_arrays(list(range(8)), [0] * 5 + [1] * 3, {"classA": [1.0] * 8})
    inst = RoundInstance(cl, (Job("a", 3, "classA"), Job("b", 3, "classA"), Job("c", 2, "classA")))
    got = _roundtrip(inst, {"a": (0, 1, 5), "b": (2, 3, 6), "c": (4, 7)})
    assert {j: len(g) for j, g in got.items()} == {"a": 3, "b": 3, "c": 2}, got  # every job, whole
    assert all(len(_servers(cl, g)) == 1 for g in got.values()), got


def test_best_fit_keeps_every_job_of_the_pool_on_one_server() -> None:
    """Best fit by server (the server with the fewest GPUs left that still holds the job): every
    job of this round lands on one server (D17 did not count an exact fit as a fit, D18 took
    the loosest fit: the 2-GPU job spanned both servers)."""
    facs = [1.0, 1.3, 1.0, 1.3, 1.3, 1.0, 1.3, 1.3, 1.3]
    cl = Cluster.from_arrays(list(range(9)), [0] * 5 + [1] * 4, {"classA": facs}, rack_of_server={0: 0, 1: 1})
    inst = RoundInstance(cl, (Job("j0", 3, "classA"), Job("j1", 4, "classA"), Job("j2", 2, "classA")))
    got = _roundtrip(inst, {"j0": (6, 0, 3), "j1": (4, 7, 5, 1), "j2": (2, 8)})
    assert {j: len(g) for j, g in got.items()} == {"j0": 3, "j1": 4, "j2": 2}, got  # every job, whole
    assert all(len(_servers(cl, g)) == 1 for g in got.values()), got


def test_a_job_that_fits_no_server_stays_inside_one_rack_when_one_holds_it() -> None:
    """Racked cluster pool: a job that fits on no single server takes its GPUs from one rack
    (the tightest that holds it) if it can; every 4-GPU job here stays in one rack (D19
    spread it over the largest servers: one job spanned both racks)."""
    facs = [1.3, 1.3, 1.3, 1.0, 1.0, 1.0, 1.3, 1.3, 1.0, 1.3, 1.0, 1.0, 1.0, 1.0, 1.3, 1.3, 1.0]
    server = [0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 4]
    cl = Cluster.from_arrays(list(range(17)), server, {"classA": facs},
                             rack_of_server={0: 0, 1: 1, 2: 0, 3: 1, 4: 0})
    jobs = (Job("j0", 1, "classA"), Job("j1", 1, "classA"), Job("j2", 4, "classA"), Job("j3", 4, "classA"),
            Job("j4", 4, "classA"), Job("j5", 1, "classA"))
    pl = {"j0": (4,), "j1": (16,), "j2": (9, 2, 12, 11), "j3": (5, 14, 7, 6), "j4": (15, 3, 8, 10), "j5": (13,)}
    got = _roundtrip(RoundInstance(cl, jobs), pl)
    assert all(len(_racks(cl, got[j])) == 1 for j in ("j2", "j3", "j4")), got


def test_kept_jobs_gpus_are_not_given_to_other_jobs() -> None:
    """With the restart cost on, running jobs that keep their GPUs hold them; the other jobs
    are placed on the GPUs left (D30 let a waiting job's pool take a kept job's GPUs: two jobs
    on one GPU)."""
    cl = Cluster.from_arrays(list(range(8)), [0] * 4 + [1] * 4, {"classA": [1.0] * 8})
    jobs = (Job("j0", 1, "classA", placement=(4,)), Job("j1", 3, "classA", placement=(5, 0, 1)), Job("j2", 3, "classA"))
    got = _roundtrip(RoundInstance(cl, jobs, RoundParams(restart_cost=30.0)),
                     {"j0": (4,), "j1": (5, 0, 1), "j2": (2, 3, 6)})
    assert got["j0"] == (4,) and got["j1"] == (0, 1, 5)
    used = [g for gs in got.values() for g in gs]
    assert len(used) == len(set(used)) == 7


def test_a_running_job_that_moves_is_encoded_as_moved() -> None:
    """``encode``: the vector's objective is the placement's round cost; a running job placed on
    other GPUs than it holds pays its restart there (D25 encoded it as keeping its GPUs: the
    objective lost the restart charge)."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    inst = RoundInstance(cl, (Job("r", 2, "classA", placement=(0, 1)), Job("w", 2, "classA")),
                         RoundParams(restart_cost=30.0))
    form = build_formulation(inst)
    moved = {"r": (2, 3), "w": (0, 1)}
    cost = evaluate(inst, moved, cl.factors).cost
    assert cost > 0
    assert form.objective(encode(form, moved)) == pytest.approx(cost)
    stays = {"r": (0, 1), "w": (2, 3)}
    assert form.objective(encode(form, stays)) == pytest.approx(evaluate(inst, stays, cl.factors).cost)


@pytest.mark.parametrize("placement, msg", [
    ({"a": (0, 0), "b": (2,)}, "needs 2 distinct GPUs"),         # D23
    ({"a": (0, 1), "b": (1,)}, "uses a GPU that is not free"),   # D24
    ({"a": (0, 1)}, "does not cover exactly the admitted jobs"),  # D29
])
def test_encode_refuses_a_placement_that_is_not_valid(placement: dict, msg: str) -> None:
    """``encode`` raises ValueError for an invalid placement: a GPU twice in a job (D23 let it
    through), a GPU of two jobs (D24), an admitted job left out that may not be (D29 crashed
    with KeyError)."""
    inst = RoundInstance(_cluster(), (Job("a", 2, "classA"), Job("b", 1, "classA")))
    with pytest.raises(InstanceError, match=msg):
        encode(build_formulation(inst), placement)


def test_a_job_that_fits_no_server_takes_the_largest_leftovers_first() -> None:
    """A job of a cluster pool that fits on no server takes GPUs from the servers with the most
    left first, so it spans as few servers as it can: two here (D21 took the smallest
    leftovers first: three servers)."""
    facs = [1.0, 1.3, 1.3, 1.3, 1.3, 1.0, 1.0, 1.0, 1.3, 1.3]
    cl = Cluster.from_arrays(list(range(10)), [0, 0, 0, 1, 1, 1, 2, 3, 3, 3], {"classA": facs})
    inst = RoundInstance(cl, (Job("j0", 4, "classA"), Job("j1", 2, "classA")))
    got = _roundtrip(inst, {"j0": (6, 0, 2, 9), "j1": (8, 1)})
    assert len(_servers(cl, got["j0"])) == 2, got


def test_a_job_that_fits_no_server_takes_the_tightest_rack_that_holds_it() -> None:
    """Racked cluster pool: a job that fits on no server goes to the rack with the fewest GPUs
    left that holds it, leaving the other rack's servers whole for the pool's next jobs; here
    each smaller job then gets one server (D20 took the loosest rack: the 2-GPU job spanned
    two servers)."""
    facs = [1.3, 1.3, 1.3, 1.0, 1.3, 1.3, 1.3, 1.3, 1.3, 1.0]
    cl = Cluster.from_arrays(list(range(10)), [0, 0, 1, 1, 2, 2, 2, 3, 3, 3], {"classA": facs},
                             rack_of_server={0: 0, 1: 1, 2: 0, 3: 1})
    inst = RoundInstance(cl, (Job("j0", 4, "classA"), Job("j1", 3, "classA"), Job("j2", 2, "classA")),
                         RoundParams(restart_cost=30.0))
    got = _roundtrip(inst, {"j0": (9, 0, 5, 1), "j1": (4, 2, 3), "j2": (8, 6)})
    assert len(_racks(cl, got["j0"])) == 1, got
    assert len(_servers(cl, got["j1"])) == 1 and len(_servers(cl, got["j2"])) == 1, got


def test_encode_finds_the_lane_of_each_gpu_type() -> None:
    """Two GPU types, a job type with a lane per type: ``encode`` puts each job in the lane of
    the type it is placed on, so a placement on the second type's GPUs encodes and decodes
    (D26 took the first lane even where its GPUs are not of that lane's types: ValueError
    "no slot variable")."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types=["A", "A", "B", "B"])
    inst = RoundInstance(cl, (Job("a", 2, "classA", allowed_types=("A", "B")),
                              Job("b", 2, "classA", allowed_types=("A", "B"))))
    form = build_formulation(inst)
    got = decode(form, encode(form, {"a": (0, 1), "b": (2, 3)}))
    assert sorted(got.values()) == [(0, 1), (2, 3)]


def test_encode_gives_a_feasible_vector() -> None:
    """``encode`` of a valid placement is a feasible program vector (used as a warm start): the
    flow of a pool counts all its GPUs (D28 set it to 1 for a pool of 3 GPUs: infeasible)."""
    inst = RoundInstance(_cluster(), (Job("a", 3, "classA"), Job("b", 1, "classA")))
    form = build_formulation(inst)
    assert form.is_feasible(encode(form, {"a": (0, 1, 2), "b": (3,)}))
