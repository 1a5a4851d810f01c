"""``RoundPolicy`` holds the GPUs a repair was told of out of service until ``restore``, as
``TypedScheduler`` does between ``fail`` and ``restore``: a caller whose cluster still lists a
failed GPU as free (monitoring a round late) does not get jobs put back on it.  Before, the
policy forgot them after the repair."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import pal_opt
from pal_opt import Cluster, GpuState, RoundPolicy
from pal_opt.adapters.blox import BloxPlacement
from pal_opt.errors import OptionError

#: four jobs of four GPUs: the whole 16-GPU cluster, so a free GPU is always used
QUEUE = [{"id": k, "demand": 4, "class": "classA"} for k in "abcd"]
METHODS = ["pal", "packed-sticky", "ilp"]


def _cluster(failed: tuple[int, ...] = (), gpus: range = range(16)) -> Cluster:
    ids = list(gpus)
    state = [GpuState.FAILED if g in failed else GpuState.FREE for g in ids]
    return Cluster.from_arrays(ids, [g // 4 for g in ids], {"classA": [1.0 + 0.05 * (g % 5) for g in ids]},
                               state=state)


def _round(failed: tuple[int, ...] = (), gpus: range = range(16)) -> pal_opt.RoundInstance:
    return pal_opt.make_instance(_cluster(failed, gpus), QUEUE)


def _used(result: pal_opt.PlacementResult) -> set[int]:
    return {g for gs in result.placements.values() for g in gs}


def _repaired(method: str) -> tuple[RoundPolicy, int]:
    policy = RoundPolicy(method)
    first = policy.place(_round())
    assert _used(first) == set(range(16))
    bad = first.placements["b"][0]
    fixed = policy.repair([bad])
    assert fixed.info["held_out"] == [bad] and policy.held_out == (bad,)
    return policy, bad


@pytest.mark.parametrize("method", METHODS)
def test_a_repaired_gpu_is_not_used_by_the_next_rounds_while_the_cluster_lists_it_free(method: str) -> None:
    policy, bad = _repaired(method)
    for _ in range(2):  # held round after round, not for one round only
        nxt = policy.place(_round())  # the caller's cluster still says GPU `bad` is free
        assert bad not in _used(nxt) and len(nxt.placements) == 3
        assert nxt.info["held_out"] == [bad] and policy.held_out == (bad,)
        last = policy.last_round
        held_state = last.instance.cluster.state[last.instance.cluster.positions([bad])]
        assert held_state.tolist() == [GpuState.FAILED]
        assert pal_opt.check(last.instance, last.result) == []


@pytest.mark.parametrize("method", METHODS)
def test_restore_puts_the_gpu_back_in_service(method: str) -> None:
    policy, bad = _repaired(method)
    policy.place(_round())
    policy.restore([bad])
    assert policy.held_out == ()
    back = policy.place(_round())
    assert _used(back) == set(range(16)) and len(back.placements) == 4
    assert "held_out" not in back.info
    assert pal_opt.check(policy.last_instance, back) == []


def test_a_cluster_that_marks_the_held_gpu_failed_too_gives_the_same_round() -> None:
    """Marking it failed as well changes nothing: the round solved is the same either way."""
    lagging, bad = _repaired("ilp")
    marking, _ = _repaired("ilp")
    a = lagging.place(_round())
    b = marking.place(_round(failed=(bad,)))
    assert a.placements == b.placements and a.info["held_out"] == b.info["held_out"] == [bad]
    assert np.array_equal(lagging.last_instance.cluster.state, marking.last_instance.cluster.state)
    # and a GPU the caller marks failed is not held by the policy: the next round may use it
    marking.restore([bad])
    other = next(g for g in range(16) if g != bad)
    marking.place(_round(failed=(other,)))
    assert marking.held_out == ()
    assert _used(marking.place(_round())) == set(range(16))


def test_held_gpus_are_deterministic() -> None:
    runs = []
    for _ in range(2):
        policy = RoundPolicy("random", seed=4)
        first = policy.place(_round())
        policy.repair([first.placements["c"][1], first.placements["a"][0]])
        nxt = policy.place(_round())
        runs.append((policy.held_out, nxt.placements, nxt.info["held_out"], nxt.info["policy_round"]))
    assert runs[0] == runs[1]
    assert list(runs[0][0]) == runs[0][2] == sorted(runs[0][2])


def test_repairs_add_up_and_restore_takes_some() -> None:
    policy, bad = _repaired("pal")
    second = next(iter(policy.last_placements["c"]))
    assert policy.repair([second]).info["held_out"] == sorted([bad, second])
    policy.restore([second, 15 if bad != 15 else 14])  # a GPU that is not held: left as it is
    assert policy.held_out == (bad,)


def test_restore_refuses_what_is_not_a_gpu_of_the_last_round() -> None:
    policy = RoundPolicy("pal")
    with pytest.raises(OptionError, match="^nothing to restore: this policy has placed no round yet"):
        policy.restore([0])
    policy, bad = _repaired("pal")
    for gpus, what in (([99], "99"), ([bad, "1"], "'1'"), ([True], "True"), ([1.0], "1.0")):
        with pytest.raises(OptionError, match=rf"^restore: {what} is not a GPU id of the last round's cluster$"):
            policy.restore(gpus)
    for gpus in (bad, "01", {bad: 1}, None):
        with pytest.raises(OptionError, match="^restore takes an iterable of GPU ids, got"):
            policy.restore(gpus)  # type: ignore[arg-type]
    assert policy.held_out == (bad,)  # a refused restore restores nothing
    policy.restore([np.int64(bad)])
    assert policy.held_out == ()


def test_a_held_gpu_the_cluster_no_longer_has_leaves_the_held_set() -> None:
    policy, bad = _repaired("pal")
    server = bad // 4
    rest = [g for g in range(16) if g // 4 != server]
    smaller = pal_opt.make_instance(Cluster.from_arrays(rest, [g // 4 for g in rest], {"classA": [1.0] * 12}),
                                    QUEUE)
    res = policy.place(smaller)
    assert policy.held_out == () and "held_out" not in res.info
    assert _used(policy.place(_round())) == set(range(16))  # back under the same id: in service


def test_reset_clears_the_held_gpus_and_forget_keeps_them() -> None:
    policy, bad = _repaired("pal")
    policy.forget("a", "b")
    assert policy.held_out == (bad,)
    assert bad not in _used(policy.place(_round()))
    policy.reset()
    assert policy.held_out == ()
    assert _used(policy.place(_round())) == set(range(16))


def test_a_failed_place_keeps_the_held_set() -> None:
    """A round refused (a carried job's new demand) drops nothing from the held set."""
    policy, bad = _repaired("pal")
    rest = [g for g in range(16) if g // 4 != bad // 4]
    queue = [{"id": "a", "demand": 2, "class": "classA"}]
    with pytest.raises(pal_opt.InstanceError, match="demand cannot change"):
        policy.place(pal_opt.make_instance(Cluster.from_arrays(rest, [g // 4 for g in rest],
                                                               {"classA": [1.0] * 12}), queue))
    assert policy.held_out == (bad,)


def test_blox_adapter_holds_a_gpu_its_policy_repaired() -> None:
    """The adapter's policy is a ``RoundPolicy``: a GPU given to ``adapter.policy.repair`` stays
    out of the rounds whose ``gpu_df`` still lists it free, until ``restore``."""
    n = 8
    gpu_df = pd.DataFrame({"GPU_ID": range(n), "Node_ID": [g // 4 for g in range(n)], "IN_USE": [False] * n,
                           "JOB_IDS": [None] * n, "PerfVar_classA": [1.0] * n})
    jobs = {k: {"num_GPUs": 4, "perfclass": "classA", "is_running": False} for k in (1, 2)}
    state, schedule = SimpleNamespace(active_jobs=jobs), {"job_order": [(1, 0), (2, 0)]}
    adapter = BloxPlacement(None, method="pal")
    _, launch = adapter.place(state, SimpleNamespace(gpu_df=gpu_df), schedule)
    assert sorted(g for gs in launch.values() for g in gs) == list(range(n))
    adapter.policy.repair([launch[2][0]])
    _, launch = adapter.place(state, SimpleNamespace(gpu_df=gpu_df), schedule)
    assert list(launch) == [1] and adapter.last_result is not None
    assert adapter.last_result.info["held_out"] == [adapter.policy.held_out[0]]
    adapter.policy.restore(adapter.policy.held_out)
    _, launch = adapter.place(state, SimpleNamespace(gpu_df=gpu_df), schedule)
    assert sorted(launch) == [1, 2]


def test_a_cluster_that_marks_only_some_held_gpus_failed_gets_the_others_held_too() -> None:
    """Two GPUs held; the caller's cluster marks one of them failed and lists the other free:
    both are marked failed in the round solved, and no job is placed on either (a round is left
    as given only when the caller marks every held GPU failed)."""
    policy = RoundPolicy("pal")
    first = policy.place(_round())
    one, two = first.placements["a"][0], first.placements["c"][0]
    policy.repair([one, two])
    nxt = policy.place(_round(failed=(one,)))
    assert not {one, two} & _used(nxt) and nxt.info["held_out"] == sorted([one, two])
    cl = policy.last_instance.cluster
    assert cl.state[cl.positions(sorted([one, two]))].tolist() == [GpuState.FAILED] * 2
    assert pal_opt.check(policy.last_instance, nxt) == []


@pytest.mark.parametrize("gpus", ["01", b"01", 3, None, {0: 1}, [True], [1.0], ["1"], [0, 99], [-1]], ids=repr)
def test_the_three_checks_of_given_gpu_ids_refuse_the_same_values(gpus: object, profiles: object) -> None:
    """``RoundPolicy.restore``, ``TypedScheduler.fail``/``restore`` and ``inforce.failed_gpus``
    ask one question (``pal_opt.model.checked_gpu_ids``), each in its own words.  Before, they
    were three copies, and ``TypedScheduler`` took a mapping as its keys (``fail({0: 1})`` failed
    GPU 0), which the other two refused."""
    from pal_opt.inforce import failed_gpus

    policy, _ = _repaired("pal")  # GPU ids 0..15
    assert policy.last_instance is not None
    sched = pal_opt.TypedScheduler("aws:4x4", profiles, "sia", applications=["cifar10"])  # GPUs 0..15
    calls = {"RoundPolicy.restore": policy.restore, "TypedScheduler.fail": sched.fail,
             "TypedScheduler.restore": sched.restore,
             "failed_gpus": lambda g: failed_gpus(policy.last_instance, g)}  # type: ignore[arg-type]
    for name, call in calls.items():
        with pytest.raises(OptionError):
            call(gpus)
            pytest.fail(f"{name} took {gpus!r}")
    assert sched.out_of_service == () and len(policy.held_out) == 1  # nothing taken on the way
    for call in calls.values():  # and the same ids taken by all
        call([np.int64(1), 2])
