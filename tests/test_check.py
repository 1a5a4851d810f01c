"""The checker: for each kind of violation it reports, a placement that commits it, and the
exact report.  A placement that commits none is valid."""

from __future__ import annotations

import math

import pytest

from pal_opt.check import Kind, check, violations
from pal_opt.model import Cluster, GpuState, Job, Pipeline, RoundInstance, RoundParams
from pal_opt.result import PlacementResult, Status
from pal_opt.solve import solve


@pytest.fixture
def inst() -> RoundInstance:
    """Two servers of two GPUs (0-3) and a failed one (4, on a third server); jobs a, b need 2."""
    state = [0, 0, 0, 0, GpuState.FAILED]
    cl = Cluster.from_arrays([0, 1, 2, 3, 4], [0, 0, 1, 1, 2], {"classA": [1.0, 1.2, 1.0, 1.0, 1.0]}, state)
    jobs = (Job("a", 2, "classA", 0), Job("b", 2, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


@pytest.fixture
def running() -> RoundInstance:
    """As ``inst``, with job r running on GPUs 0 and 1 and job w waiting."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0, 1.2, 1.0, 1.0]})
    jobs = (Job("r", 2, "classA", 0, placement=(0, 1)), Job("w", 2, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


@pytest.fixture
def typed() -> RoundInstance:
    """GPUs 0-3 of type a (server 0) and 4-7 of type b (server 1); g is guaranteed 2 GPUs of a,
    m needs 2 GPUs of one type, s scales to 2 or 4 GPUs."""
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 8}, gpu_types="aaaabbbb")
    jobs = (Job("g", 2, "classA", 0, kind="guaranteed", gpu_type="a"), Job("m", 2, "classA", 1),
            Job("s", 4, "classA", 2, kind="strong-scaling", allowed_counts=(2, 4)))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


@pytest.fixture
def piped() -> RoundInstance:
    """One server of four GPUs (0-3; GPU 2 is 1.5x slow); job p is a pipeline of two stages (2 and
    1 time units) on 2 + 1 GPUs, job g a 1-GPU gang."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 0, 0], {"classA": [1.0, 1.0, 1.5, 1.0]})
    jobs = (Job("p", 3, "classA", 0, pipeline=Pipeline((2.0, 1.0), (2, 1))), Job("g", 1, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


CASES: dict[Kind, tuple[str, dict, list[str]]] = {
    Kind.FORM: ("inst", {"placements": [0, 1]}, ["placements: must be an object"]),
    Kind.UNKNOWN_JOB: ("inst", {"placements": {"zz": [0, 1]}}, ["job 'zz': not in the queue"]),
    Kind.ADMISSION_RULE: (
        "inst", {"placements": {"a": [0, 1]}, "admission": "fifo"},
        ["admission 'fifo' is not one of pal-order, queue-order, sticky, pal-order-backfill, queue-order-backfill, sticky-backfill, prefix, backfill, given, repair, preempt"],
    ),
    Kind.GANG_SIZE: ("inst", {"placements": {"a": [0]}}, ["job 'a': needs 2 distinct GPUs, got [0]"]),
    Kind.UNKNOWN_GPU: ("inst", {"placements": {"a": [0, 9]}}, ["job 'a': GPU 9 does not exist"]),
    Kind.GPU_NOT_FREE: ("inst", {"placements": {"a": [0, 4]}}, ["job 'a': GPU 4 is failed"]),
    Kind.GPU_SHARED: (
        "inst", {"placements": {"a": [0, 1], "b": [1, 2]}}, ["GPU 1: used by jobs 'a' and 'b'"],
    ),
    Kind.ORDER: (
        "inst", {"placements": {"b": [2, 3]}, "admission": "queue-order"},
        ["queue-order: jobs ['b'] are placed after job 'a', which was not"],
    ),
    Kind.LEFT_OUT: (
        "inst", {"placements": {"a": [0, 1]}, "admission": "queue-order"},
        ["queue-order: job 'b' needs 2 GPUs and 2 are still free, but it was not placed"],
    ),
    Kind.STICKY: (
        "running", {"placements": {"r": [2, 3], "w": [0, 1]}, "admission": "sticky"},
        ["sticky: running job 'r' was moved without being terminated"],
    ),
    Kind.ADMISSION: (
        "inst", {"placements": {"a": [0, 1]}, "admission": "prefix"},
        ["prefix: admitted set differs (missing ['b'], extra [])"],
    ),
    Kind.OBJECTIVE: (
        "inst", {"placements": {"a": [2, 3]}, "admission": "given", "objective": 1.0},
        ["objective 1.0 differs from the recomputed round cost 0.0"],
    ),
    Kind.COUNT: ("typed", {"placements": {"s": [0, 1, 2]}}, ["job 's': may run on [2, 4] GPUs, got 3"]),
    Kind.GPU_TYPE: (
        "typed", {"placements": {"g": [4, 5]}}, ["job 'g': GPUs [4, 5] are not of its type (guaranteed GPU type 'a')"],
    ),
    Kind.MIXED_TYPES: (
        "typed", {"placements": {"m": [3, 4]}}, ["job 'm': GPUs of types 'a', 'b', but it does not mix types"],
    ),
    Kind.STAGE_COUNT: (
        "piped", {"placements": {"p": [0, 1, 2]}, "stages": {"p": [[0, 1, 2]]}},
        ["job 'p': its pipeline has 2 stages, got 1"],
    ),
    Kind.STAGE_REPLICAS: (
        "piped", {"placements": {"p": [0, 1, 2]}, "stages": {"p": [[0], [1, 2]]}},
        ["job 'p': stage 0 needs 2 GPUs (its replicas), got [0]",
         "job 'p': stage 1 needs 1 GPU (its replicas), got [1, 2]"],
    ),
    Kind.STAGE_GPUS: (
        "piped", {"placements": {"p": [0, 1, 2]}, "stages": {"p": [[0, 1], [1]]}},
        ["job 'p': GPUs [1] are in more than one stage"],
    ),
    Kind.UNREPORTED: (
        "running", {"placements": {"r": [2, 3], "w": [0, 1]}, "admission": "preempt"},
        ["preempt: running job 'r' is moved but not in jobs_to_terminate"],
    ),
    Kind.PRIORITY: (
        "running", {"placements": {"w": [0, 1]}, "admission": "preempt", "jobs_to_terminate": ["r"]},
        ["preempt: running job 'r' (priority 0) is preempted, but no waiting job of a higher priority was started"],
    ),
}


def test_every_kind_has_a_case() -> None:
    assert set(CASES) == set(Kind)


@pytest.mark.parametrize("kind", list(Kind), ids=str)
def test_each_violation_is_reported_exactly(kind: Kind, request: pytest.FixtureRequest) -> None:
    fixture, doc, expected = CASES[kind]
    instance = request.getfixturevalue(fixture)
    assert check(instance, doc) == expected
    assert [v.kind for v in violations(instance, doc)] == [kind] * len(expected)


def test_a_job_placed_under_both_forms_of_its_id_is_placed_twice() -> None:
    # {2: [0, 1], "2": [2, 3]} kept the last entry and passed (determinism review)
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    instance = RoundInstance(cl, (Job(2, 2, "classA", 0),), RoundParams(binning="none"))
    assert check(instance, {"placements": {2: [0, 1]}, "admission": "given"}) == []
    assert check(instance, {"placements": {2: [0, 1], "2": [2, 3]}, "admission": "given"}) == [
        "job '2': placed twice (also under the key 2)"]


def test_sticky_terminated_but_placed_on_its_own_gpus(running: RoundInstance) -> None:
    doc = {"placements": {"r": [0, 1]}, "admission": "sticky", "jobs_to_terminate": ["r"]}
    assert check(running, doc) == [
        "sticky: job 'r' is terminated but placed on its own GPUs",
        "sticky: job 'w' needs 2 GPUs and 2 are still free, but it was not placed",
    ]


def test_sticky_a_terminated_job_may_be_placed_again_elsewhere_in_its_turn() -> None:
    """A job preempted for one waiting job may fit once a later one has preempted others: here
    i preempts k (1 GPU), j preempts p (4), p no longer fits and is skipped (backfill), and k
    fits on GPUs p left, in its turn.  ``packed-sticky`` with backfill gives such answers (and,
    with GPU types, without it); the checker rejected each as "terminated but placed"."""
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 8})
    jobs = (Job("i", 4, "classA", 0), Job("j", 2, "classA", 1),
            Job("p", 4, "classA", 2, placement=(0, 1, 2, 3)), Job("k", 1, "classA", 3, placement=(4,)))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    doc = {"placements": {"i": [4, 5, 6, 7], "j": [0, 1], "k": [2]}, "admission": "sticky-backfill",
           "jobs_to_terminate": ["p", "k"]}
    assert check(inst, doc) == []
    res = solve(inst, "packed-sticky", admission="backfill")
    assert sorted(res.placements) == ["i", "j", "k"] and check(inst, res) == []
    # without backfill the round ends at p, so k placed after it breaks the queue rule
    assert check(inst, {**doc, "admission": "sticky"}) == [
        "sticky: jobs ['k'] are placed after job 'p', which was not"]


def test_sticky_a_running_job_on_a_failed_gpu_may_be_placed_again(running: RoundInstance) -> None:
    state = running.cluster.state.copy()
    state[0] = GpuState.FAILED  # r must move
    moved = RoundInstance(running.cluster.with_state(state), running.jobs, running.params)
    doc = {"placements": {"r": [2, 3]}, "admission": "sticky", "jobs_to_terminate": ["r"]}
    assert check(moved, doc) == []
    assert check(moved, {**doc, "jobs_to_terminate": []}) == [
        "sticky: running job 'r' was moved without being terminated"]


def test_a_valid_placement_has_no_violation(inst: RoundInstance) -> None:
    doc = {"placements": {"a": [2, 3], "b": [0, 1]}, "admission": "prefix", "objective": 2 * math.log(1.2)}
    assert check(inst, doc) == []


def test_a_valid_typed_placement_has_no_violation(typed: RoundInstance) -> None:
    doc = {"placements": {"g": [0, 1], "m": [4, 5], "s": [2, 3]}, "admission": "prefix"}
    assert check(typed, doc) == []


def test_left_out_counts_free_gpus_per_type(typed: RoundInstance) -> None:
    # g takes two GPUs of a and s the other two; m could still have two of b
    doc = {"placements": {"g": [0, 1], "s": [2, 3]}, "admission": "pal-order-backfill"}
    assert check(typed, doc) == [
        "pal-order-backfill: job 'm' needs 2 GPUs and 4 of its GPU types are still free, but it was not placed"]
    # a guaranteed job whose type is full may be left out though other GPUs are free
    full = {"placements": {"m": [0, 1], "s": [2, 3]}, "admission": "queue-order-backfill"}
    assert check(typed, full) == []


def test_a_one_gpu_job_left_out_needs_1_gpu_not_1_gpus(piped: RoundInstance) -> None:
    assert check(piped, {"placements": {"p": [0, 1, 3]}, "admission": "queue-order"}) == [
        "queue-order: job 'g' needs 1 GPU and 1 are still free, but it was not placed"]


def test_allowed_types_and_mixing(typed: RoundInstance) -> None:
    cl = typed.cluster
    jobs = (Job("b", 2, "classA", 0, allowed_types=("b",)), Job("x", 4, "classA", 1, mix_types=True))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    assert check(inst, {"placements": {"b": [4, 5], "x": [0, 1, 2, 6]}}) == []
    assert check(inst, {"placements": {"b": [3, 4]}}) == [
        "job 'b': GPUs [3] are not of its type (usable GPU types: 'b')",
        "job 'b': GPUs of types 'a', 'b', but it does not mix types"]


def test_a_class_without_throughput_on_a_type_may_not_use_it() -> None:
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types="aabb",
                             throughput={"classA": {"a": 1.0}})
    inst = RoundInstance(cl, (Job("j", 2, "classA"),), RoundParams(binning="none"))
    assert check(inst, {"placements": {"j": [2, 3]}}) == ["job 'j': GPUs [2, 3] are not of its type (usable GPU types: 'a')"]
    assert check(inst, {"placements": {"j": [0, 1]}, "admission": "prefix"}) == []
# --------------------------------------------------------------------------- pipeline stages
def test_stages_must_hold_exactly_the_jobs_gpus(piped: RoundInstance) -> None:
    doc = {"placements": {"p": [0, 1, 2]}, "stages": {"p": [[0, 1], [3]]}}
    assert check(piped, doc) == ["job 'p': its stages hold GPUs [0, 1, 3], it is placed on [0, 1, 2]"]
    assert [v.kind for v in violations(piped, doc)] == [Kind.STAGE_GPUS]


def test_a_gang_is_one_stage(piped: RoundInstance) -> None:
    assert check(piped, {"placements": {"g": [3]}, "stages": {"g": [[3]]}}) == []
    doc = {"placements": {"p": [0, 1, 2], "g": [3]}, "stages": {"g": [[3], []]}}
    assert check(piped, doc) == ["job 'g': a gang is one stage, got 2"]
    assert [v.kind for v in violations(piped, doc)] == [Kind.STAGE_COUNT]


@pytest.mark.parametrize("stages, expected", [
    ({"g": [[3]]}, "stages of job 'g': the job is not placed"),
    ({"p": [0, 1, 2]}, "stages of job 'p': must be a list of GPU id lists"),
    ([[0, 1], [2]], "stages: must be an object {job id: [[GPU ids], ...]}"),
])
def test_malformed_stages(piped: RoundInstance, stages: object, expected: str) -> None:
    doc = {"placements": {"p": [0, 1, 2]}, "stages": stages}
    assert check(piped, doc) == [expected]
    assert [v.kind for v in violations(piped, doc)] == [Kind.FORM]


def test_a_pipeline_is_priced_in_stage_order(piped: RoundInstance) -> None:
    # the slow GPU 2 on the 1-unit stage: the pipeline keeps its pace (factor 1, cost 0);
    # on the 2-unit stage it runs at 1.5 (cost 3 ln 1.5)
    fast = {"placements": {"p": [0, 1, 2]}, "stages": {"p": [[0, 1], [2]]}, "objective": 0.0}
    slow = {"placements": {"p": [0, 1, 2]}, "stages": {"p": [[1, 2], [0]]}, "objective": 0.0}
    assert check(piped, fast) == []
    assert check(piped, {**fast, "stages": {}}) == []  # without stages: the GPU order
    assert check(piped, slow) == [f"objective 0.0 differs from the recomputed round cost {3 * math.log(1.5)!r}"]
    assert check(piped, {**slow, "objective": 3 * math.log(1.5)}) == []


def test_a_result_carries_its_stages(piped: RoundInstance) -> None:
    from pal_opt.result import priced_result

    factors = {"classA": piped.cluster.factors["classA"]}
    res = priced_result(piped, {"p": (3, 0, 2), "g": (1,)}, factors, method="given", status=Status.FEASIBLE,
                        admission="given", solve_seconds=0.0)
    assert res.stages == {"p": ((3, 0), (2,))}
    assert res.to_dict()["stages"] == {"p": [[3, 0], [2]]}
    assert check(piped, res) == [] and check(piped, res.to_dict()) == []
    broken = PlacementResult(**{**res.__dict__, "stages": {"p": ((3, 0, 2),)}})
    assert check(piped, broken) == ["job 'p': its pipeline has 2 stages, got 1"]
    gangs = priced_result(piped, {"g": (1,)}, factors, method="given", status=Status.FEASIBLE, admission="given",
                          solve_seconds=0.0)
    assert "stages" not in gangs.to_dict()  # rounds without pipelines write what they always wrote


def test_a_bare_placement_mapping_is_checked(inst: RoundInstance) -> None:
    # result.placements ({job id: GPU ids}) is what repair() takes too; it is checked, not read as "no placements"
    assert check(inst, {"a": [0, 0], "nope": [99]}) == ["job 'nope': not in the queue"]
    assert check(inst, {"a": [0, 0]}) == ["job 'a': needs 2 distinct GPUs, got [0, 0]"]
    assert check(inst, {"a": [0, 1], "b": (2, 3)}) == []
    assert check(inst, {}) == []
    from pal_opt.solve import solve

    res = solve(inst, "pal")
    assert check(inst, res.placements) == [] and check(inst, res) == [] and check(inst, res.to_dict()) == []


def test_a_result_dict_without_placements_is_ambiguous(inst: RoundInstance) -> None:
    from pal_opt.errors import InstanceError

    with pytest.raises(InstanceError, match=r"^placements: missing"):
        check(inst, {"admission": "prefix", "objective": 0.0})


@pytest.mark.parametrize(("extra", "expected"), [
    ({"unplaceable": [{"job": "w", "reason": "needs 99 GPUs"}]}, ["unplaceable: job 'w' is placed"]),
    ({"unplaceable": [{"job": "zz", "reason": "?"}]}, ['unplaceable: job "zz" is not in the queue']),
    ({"unplaceable": "x"}, ['unplaceable: must be a list of {"job", "reason"} objects']),
    ({"jobs_to_terminate": [999]}, ["jobs_to_terminate: job 999 is not in the queue"]),
    ({"jobs_to_terminate": ["w"]}, ["jobs_to_terminate: job 'w' is not running"]),
    ({"jobs_to_terminate": "x"}, ["jobs_to_terminate: must be a list of job ids"]),
    ({"jobs_to_terminate": 3}, ["jobs_to_terminate: must be a list of job ids"]),  # a traceback before
    ({"jobs_to_terminate": 1.5}, ["jobs_to_terminate: must be a list of job ids"]),
    ({"jobs_to_terminate": True}, ["jobs_to_terminate: must be a list of job ids"]),
    ({"jobs_to_terminate": [[]]}, ["jobs_to_terminate: job [] is not in the queue"]),
    ({"jobs_to_terminate": [{"r": 1}]}, ['jobs_to_terminate: job {"r": 1} is not in the queue']),
    ({"objective": "abc"}, ['objective: must be a number, got "abc"']),
    ({"status": "great"}, ['status: must be one of optimal, feasible, infeasible, fallback, got "great"']),
    ({"status": [1] * 100}, ["status: must be one of optimal, feasible, infeasible, fallback, got "
                             "[" + "1, " * 18 + "1,..."]),
    ({"status": "infeasible"}, ["status: infeasible, but 2 jobs are placed"]),
    ({"admission": None}, ["admission: must be a queue rule's name, got null"]),
])
def test_what_a_result_declares_besides_its_placements_is_checked(
        running: RoundInstance, extra: dict, expected: list[str]) -> None:
    """Each of these edits of a valid result file was reported valid (found by review)."""
    doc = {"placements": {"r": [0, 1], "w": [2, 3]}, "admission": "queue-order", "jobs_to_terminate": []}
    assert check(running, doc) == []
    assert check(running, {**doc, **extra}) == expected


def test_jobs_to_terminate_is_exactly_the_running_jobs_that_lose_their_gpus(running: RoundInstance) -> None:
    moved = {"placements": {"r": [2, 3], "w": [0, 1]}, "admission": "queue-order"}
    assert check(running, moved) == []  # a result that declares none is not held to it
    assert check(running, {**moved, "jobs_to_terminate": []}) == [
        "running job 'r' is moved but not in jobs_to_terminate"]
    assert check(running, {**moved, "jobs_to_terminate": ["r"]}) == []
    kept = {"placements": {"r": [0, 1], "w": [2, 3]}, "admission": "queue-order", "jobs_to_terminate": ["r"]}
    assert check(running, kept) == ["job 'r' is in jobs_to_terminate but keeps its GPUs"]
