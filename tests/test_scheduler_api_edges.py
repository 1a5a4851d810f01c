"""What a scheduler author gets wrong in the first hour, and the one-line error each gets.

Found by an audit of the public API a round loop uses (``make_instance``, ``RoundInstance``,
``solve``, ``RoundPolicy``, the Blox adapter, ``TypedScheduler``): every case here was a raw
``KeyError``, ``TypeError``, ``ValueError`` or ``IndexError`` from inside, or was accepted
without a word, before the audit.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import pal_opt
from pal_opt import Cluster, Job, RoundInstance, RoundParams, RoundPolicy, SolveOptions
from pal_opt.adapters.blox import BloxPlacement
from pal_opt.errors import BackendUnavailableError, InstanceError, OptionError
from pal_opt.ilp.backends import BACKENDS
from pal_opt.options import DEFAULT_ILP_TIME_LIMIT
from pal_opt.seeds import make_rng


def _graph(factors: Any = None, state: Any = None, extra: Any = None) -> nx.DiGraph:
    g = nx.DiGraph()
    for s in range(2):
        g.add_edge(("cluster",), ("server", s))
        for k in range(2):
            attrs: dict[str, Any] = {"factors": {"classA": 1.0 + 0.1 * k} if factors is None else factors}
            if state is not None:
                attrs["state"] = state
            g.add_node(("gpu", 2 * s + k), **attrs)
            g.add_edge(("server", s), ("gpu", 2 * s + k))
    if extra is not None:
        extra(g)
    return g


def _one_line(err: pytest.ExceptionInfo[BaseException], *parts: str) -> None:
    text = str(err.value)
    assert "\n" not in text
    for part in parts:
        assert part in text, (part, text)


def _add_gpu(node: Any) -> Any:
    def add(g: nx.DiGraph) -> None:
        g.add_node(node, factors={"classA": 1.0})
        g.add_edge(("server", 0), node)
    return add


def _set_factor(gpu: int, value: Any) -> Any:
    def put(g: nx.DiGraph) -> None:
        g.nodes[("gpu", gpu)]["factors"] = {"classA": value}
    return put


JOBS = [{"id": "a", "demand": 2, "class": "classA"}]


@pytest.mark.parametrize(("graph", "parts"), [
    (_graph(state="broken"), ("graph.('gpu', 0).state", "free, busy or failed", "'broken'")),
    (_graph(state=1.5), ("graph.('gpu', 0).state", "1.5")),
    (_graph(factors=[1.0]), ("graph.('gpu', 0).factors", "must map class names")),
    (_graph(factors={"classA": "1.0"}), ("factors.classA", "GPU 0 must be a number", "'1.0'")),
    (_graph(factors={"classA": True}), ("factors.classA", "GPU 0 must be a number", "True")),
    (_graph(extra=_add_gpu(("gpu", "x"))), ("graph.('gpu', 'x')", "integer id")),
    (_graph(extra=_add_gpu(("gpu",))), ("graph.('gpu',)", "integer id")),
    (_graph(extra=lambda g: g.nodes[("gpu", 1)].update(factors={"classB": 1.0})),
     ("graph.('gpu', 1).factors", "no factor for class 'classA'")),
    # one GPU's factor wrong among good ones: that GPU's vertex named, the value as given (the
    # text was said of GPU 0, the bool taken as 1.0, 0.0 and NaN shown as np.float64(...))
    (_graph(extra=_set_factor(3, "1.0")), ("graph.('gpu', 3).factors.classA", "GPU 3 must be a number", "'1.0'")),
    (_graph(extra=_set_factor(3, True)), ("graph.('gpu', 3).factors.classA", "GPU 3 must be a number", "True")),
    (_graph(extra=_set_factor(3, 0.0)), ("graph.('gpu', 3).factors.classA", "finite and positive, got 0.0")),
    (_graph(extra=_set_factor(2, float("nan"))), ("graph.('gpu', 2).factors.classA", "finite and positive, got nan")),
    (_graph(extra=_set_factor(1, 1e9)), ("graph.('gpu', 1).factors.classA", "1e-06..1e+06")),
], ids=["state-name", "state-float", "factors-list", "factor-text", "factor-bool", "gpu-id-text", "gpu-vertex-short",
        "class-missing-on-a-gpu", "one-factor-text", "one-factor-bool", "one-factor-zero", "one-factor-nan",
        "one-factor-huge"])
def test_a_malformed_cluster_graph_is_an_instance_error_naming_the_vertex(graph: nx.DiGraph, parts: tuple[str, ...]) -> None:
    with pytest.raises(InstanceError) as err:
        pal_opt.make_instance(graph, JOBS)
    _one_line(err, *parts)


def test_a_graph_may_still_give_states_by_name_value_or_enum_and_numpy_factors() -> None:
    for state in ("busy", "BUSY", 1, np.int64(1), pal_opt.GpuState.BUSY):
        assert pal_opt.make_instance(_graph(state=state), []).free_gpus == 0
    inst = pal_opt.make_instance(_graph(factors={"classA": np.float32(1.25)}), JOBS)
    assert inst.cluster.factors["classA"].tolist() == [1.25] * 4
    # and an ordinary in-memory cluster keeps its arrays as they were
    c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": np.array([1, 2, 1, 1])})
    assert c.factors["classA"].dtype == np.float64 and c.factors["classA"].tolist() == [1.0, 2.0, 1.0, 1.0]
    mixed = Cluster.from_arrays(range(3), [0, 0, 0], {"classA": [1, 1.5, np.float64(1.25)]})
    assert mixed.factors["classA"].tolist() == [1.0, 1.5, 1.25]
    with pytest.raises(InstanceError, match="GPU 1 must be a number, got True"):  # as a list gives it
        Cluster.from_arrays(range(3), [0, 0, 0], {"classA": [1.0, True, 1.0]})


def test_a_long_list_of_numpy_factors_is_judged_by_its_types() -> None:
    """The check that a factor list holds no bool or text (numpy reads ``[1.0, True]`` as floats)
    asked ``isinstance`` of every value that was not a Python float or int: a list of NumPy
    scalars (``list(array)``, a graph's values) took 24 times as long as numpy takes to read it.
    The values' types are judged once each (``_plain_numbers``); no timing here (a unit test must
    not time a busy machine), the columns are read as numpy reads them and a bool is still found."""
    from pal_opt.model import _factor_column, _plain_numbers

    n = 65_536
    ids = np.arange(n)
    values = np.random.default_rng(0).lognormal(0.0, 0.1, n)
    for column in (list(values), list(values.astype(np.float32)), values.tolist(), [1, 2.5, np.int64(3)]):
        assert _plain_numbers(column)
        ids_ = ids[: len(column)]
        assert _factor_column("classA", column, ids_).tolist() == np.asarray(column, dtype=np.float64).tolist()
    for bad in ([1.0, True], [np.float64(1.0), np.True_], [1.0, "1.0"], [1.0, None]):
        assert not _plain_numbers(bad)
    with pytest.raises(InstanceError, match="GPU 7 must be a number"):
        _factor_column("classA", [*values[:7], np.True_, *values[8:]], ids)


def test_a_round_of_the_wrong_parts_is_an_instance_error_naming_the_part() -> None:
    cl = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    for kwargs, parts in [
        ({"cluster": "cluster", "jobs": ()}, ("cluster: must be a Cluster, got str",)),
        ({"cluster": cl, "jobs": None}, ("jobs: must be a sequence of Job objects", "NoneType")),
        ({"cluster": cl, "jobs": (), "params": {"locality_penalty": 2.0}}, ("params: must be a RoundParams, got dict",)),
        ({"cluster": cl, "jobs": (), "name": 5}, ("name: must be a string, got 5",)),
    ]:
        with pytest.raises(InstanceError) as err:
            RoundInstance(**kwargs)
        _one_line(err, *parts)
    with pytest.raises(InstanceError) as err:
        pal_opt.make_instance(cl, 5)  # type: ignore[arg-type]
    _one_line(err, "jobs: must be a sequence of jobs", "got int")
    with pytest.raises(OptionError) as err:
        pal_opt.make_instance(cl, [], localty_penalty=1.5)  # type: ignore[call-arg]
    _one_line(err, "unknown round parameter(s) localty_penalty", "locality_penalty")
    assert pal_opt.make_instance(cl, [], costs={"migration": {"per_job": 0.5}}).params.costs == {
        "migration": {"per_job": 0.5}}


def test_job_objects_and_params_built_in_memory_still_make_rounds() -> None:
    cl = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    inst = RoundInstance(cl, [Job("a", 2, "classA")], RoundParams(locality_penalty=2.0), "r")
    assert isinstance(inst.jobs, tuple) and pal_opt.solve(inst, "pal").placements == {"a": (0, 1)}


def test_a_bad_seed_is_an_option_error_before_anything_is_placed() -> None:
    inst = pal_opt.generate_instance(2, 4, 4, seed=0)
    for call in (lambda: pal_opt.solve(inst, "random", seed=-1), lambda: RoundPolicy("random", seed=-1),
                 lambda: SolveOptions(seed=-3), lambda: SolveOptions(seed="7"), lambda: make_rng(-1)):
        with pytest.raises(OptionError) as err:
            call()
        _one_line(err, "seed must be an integer >= 0")
    gen = np.random.default_rng(4)
    assert SolveOptions(seed=gen).seed is gen and SolveOptions(seed=np.int64(3)).seed == 3


def test_round_policy_refuses_at_construction_what_solve_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(OptionError) as err:
        RoundPolicy("ilp", seed=3)  # pal_opt.solve(inst, "ilp", seed=3) refuses it too
    _one_line(err, "seed do not apply to method 'ilp'")
    with pytest.raises(OptionError) as err:
        RoundPolicy("ilp", backend="gurobi")
    _one_line(err, "unknown backend 'gurobi'")
    with pytest.raises(OptionError) as err:
        RoundPolicy("pal", track_running="no")  # type: ignore[arg-type]
    _one_line(err, "track_running must be True or False")
    with pytest.raises(OptionError) as err:  # the README's warm= example, misremembered (docs review)
        RoundPolicy("ilp", warm_start=pal_opt.WarmStart())  # type: ignore[arg-type]
    _one_line(err, "warm_start must be True or False", "a WarmStart carried between rounds goes in warm=")
    cbc = BACKENDS["cbc"]
    monkeypatch.setattr(cbc, "_available", False)
    monkeypatch.setattr(cbc, "_import_error", "ImportError: no module named 'pulp'")
    with pytest.raises(BackendUnavailableError) as err:
        RoundPolicy("ilp", backend="cbc")
    _one_line(err, "backend 'cbc' is not available", "pulp")
    with pytest.raises(BackendUnavailableError):
        BloxPlacement(None, method="ilp", backend="cbc")
    assert RoundPolicy("random", seed=3).place(pal_opt.generate_instance(2, 4, 4, seed=0)).placements


def test_forget_takes_ids_as_arguments_and_says_so_when_given_a_list() -> None:
    policy = RoundPolicy("pal")
    with pytest.raises(OptionError) as err:
        policy.forget(["a"])  # type: ignore[arg-type]
    _one_line(err, "forget takes job ids as arguments, forget(*ids): got ['a']")
    first = policy.place(pal_opt.generate_instance(2, 4, 4, seed=0))
    with pytest.raises(OptionError):
        policy.forget({0, 1})  # type: ignore[arg-type]
    assert policy.last_placements == first.placements
    policy.forget(np.int64(0), "never-placed")
    assert 0 not in policy.last_placements and len(policy.last_placements) == len(first.placements) - 1


def _blox_round() -> tuple[SimpleNamespace, SimpleNamespace, dict[str, Any]]:
    gpu_df = pd.DataFrame({"GPU_ID": range(4), "Node_ID": [0, 0, 1, 1], "IN_USE": [False] * 4,
                           "JOB_IDS": [None] * 4, "PerfVar_classA": [1.0, 1.3, 0.9, 1.0]})
    jobs = SimpleNamespace(active_jobs={5: {"num_GPUs": 2, "perfclass": "classA", "is_running": False}})
    return jobs, SimpleNamespace(gpu_df=gpu_df), {"job_order": [(5, 0)]}


def test_blox_adapter_numbers_are_checked_and_exact_methods_get_the_documented_time_limit() -> None:
    for args, options, parts in [
        (SimpleNamespace(locality_penalty="high"), {}, ("args.locality_penalty must be a number", "'high'")),
        (None, {"restart_cost": "30s"}, ("restart_cost must be a number", "'30s'")),
        (None, {"round_length": None}, ("round_length must be a number",)),
    ]:
        with pytest.raises(OptionError) as err:
            BloxPlacement(args, **options)
        _one_line(err, *parts)
    # Blox runs rounds back to back: options.DEFAULT_ILP_TIME_LIMIT applies unless a limit is given
    for options, limit in [({}, DEFAULT_ILP_TIME_LIMIT), ({"time_limit": 3}, 3.0), ({"time_limit": None}, None)]:
        policy = BloxPlacement(None, method="ilp", backend="highs", **options)
        assert policy.place(*_blox_round()) == ([], {5: [2, 3]})
        assert policy.last_result is not None and policy.last_result.info["time_limit"] == limit
    assert BloxPlacement(None, method="pal").place(*_blox_round()) == ([], {5: [2, 3]})


@pytest.mark.parametrize("method", ["preempt-greedy", "ilp-preempt"])
def test_blox_adapter_passes_job_priorities_to_the_preemptive_methods(method: str) -> None:
    # Blox's job dicts carry job_priority; the adapter dropped it, so nothing was ever preempted
    gpu_df = pd.DataFrame({"GPU_ID": range(4), "Node_ID": [0, 0, 1, 1], "IN_USE": [True] * 4,
                           "JOB_IDS": [1, 1, 2, 2], "PerfVar_classA": [1.0, 1.3, 0.9, 1.0]})
    active = {1: {"num_GPUs": 2, "perfclass": "classA", "is_running": True, "job_priority": 0, "start_time": 10.0},
              2: {"num_GPUs": 2, "perfclass": "classA", "is_running": True, "priority": 0, "started": 20.0},
              3: {"num_GPUs": 2, "perfclass": "classA", "is_running": False, "job_priority": 1}}
    order = {"job_order": [(3, 0), (1, 0), (2, 0)]}
    policy = BloxPlacement(None, method=method)
    terminate, launch = policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), order)
    assert len(terminate) == 1 and 3 in launch and terminate[0] not in launch
    inst = policy.instance(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), order)
    assert [(j.id, j.priority, j.started) for j in inst.jobs] == [(3, 1, None), (1, 0, 10.0), (2, 0, 20.0)]
    if method == "preempt-greedy":  # the most recently started of the lowest priority goes
        assert terminate == [2]
    active[3]["job_priority"] = -2
    with pytest.raises(InstanceError) as err:
        policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), order)
    _one_line(err, "active_jobs[3].priority", "'-2'")


def test_typed_scheduler_takes_numpy_counts_as_a_data_frame_gives_them(profiles: Path) -> None:
    from pal_opt.hetero import StepTime

    frame = pd.DataFrame({"name": ["a"], "replicas": [2], "batch": [2048], "submit": [0.0]})
    row = frame.iloc[0]
    assert isinstance(row["replicas"], np.integer)
    sched = pal_opt.TypedScheduler([("aws", np.int64(2), np.int64(4))], profiles)
    assert sched.submit(row["name"], "cifar10", row["replicas"], row["batch"], row["submit"]) is None
    assert sched.schedule(np.float64(0.0))["a"].state == "allocated"
    sched.report("a", epoch=np.int64(1), step_times=[StepTime(np.int64(64), np.float32(0.25), 0.01)])
    assert sched.records()[0].epochs == 1 and type(sched.records()[0].epochs) is int
    for call, parts in [(lambda: StepTime(64, "0.2", 0.0), ("a step time must be a positive number", "'0.2'")),
                        (lambda: StepTime(64.0, 0.2, 0.0), ("atomic_bsz must be an integer >= 1",)),  # type: ignore[arg-type]
                        (lambda: sched.submit("b", "cifar10", np.bool_(True), 2048, 0.0), ("num_replicas",))]:
        with pytest.raises(OptionError) as err:
            call()
        _one_line(err, *parts)


def test_typed_scheduler_on_a_cluster_no_application_can_use_says_so_at_once(profiles: Path) -> None:
    with pytest.raises(InstanceError) as err:
        pal_opt.TypedScheduler("v100:2x4", profiles)
    _one_line(err, "no application can run on this cluster", "no profile for GPU type 'v100'", "more left out")


def test_sia_params_of_the_wrong_type_or_range_are_option_errors(profiles: Path) -> None:
    from pal_opt.hetero.policy import SiaParams

    for kwargs, parts in [({"time_limit": 0}, ("time_limit must be a positive number",)),
                          ({"time_limit": -1.0}, ("time_limit must be a positive number",)),
                          ({"time_limit": "5"}, ("time_limit must be a positive number", "'5'")),
                          ({"p": "x"}, ("p must be a finite number",)),
                          ({"lambda_a": None}, ("lambda_a must be a finite number",)),
                          ({"project_throughputs": "no"}, ("project_throughputs must be True or False",)),
                          ({"backend": 5}, ("backend must be a backend name",))]:
        with pytest.raises(OptionError) as err:
            SiaParams(**kwargs)
        _one_line(err, *parts)
    assert SiaParams(time_limit=5).time_limit == 5
    assert pal_opt.TypedScheduler("aws:1x4", profiles, sia_params=SiaParams(time_limit=5.0)).policy == "sia"


def test_typed_scheduler_errors_name_the_cluster_argument_not_a_command_flag(
        profiles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for spec, parts in [("aws:0x4", ("the cluster: aws needs at least one node",)),
                        ("aws:1x", ("the cluster: expected TYPE:SERVERSxGPUS",))]:
        with pytest.raises(OptionError) as err:
            pal_opt.TypedScheduler(spec, profiles)
        _one_line(err, *parts)
        assert "--cluster" not in str(err.value)
    # a cluster given as tuples is held to the size limit the text form has
    monkeypatch.setattr(pal_opt.options, "MAX_CLUSTER_GPUS", 16)
    for spec in ("aws:3x8", [("aws", 3, 8)]):
        with pytest.raises(OptionError) as err:
            pal_opt.TypedScheduler(spec, profiles)  # type: ignore[arg-type]
        _one_line(err, "the cluster", "24 GPUs; pal-opt builds clusters of at most 16")


def test_typed_scheduler_policy_settings_of_the_wrong_type_are_option_errors(profiles: Path) -> None:
    # ilp_levels="x" or ilp_joint=1 switched a mode on without a word; gavel_round="x" was a raw TypeError
    for policy, options, parts in [("gavel", {"gavel_round": "x"}, ("gavel_round must be a number of seconds > 0", "'x'")),
                                   ("ilp", {"ilp_levels": "x"}, ("ilp_levels must be True or False",)),
                                   ("ilp", {"ilp_joint": 1}, ("ilp_joint must be True or False",)),
                                   ("ilp", {"ilp_anchor": "yes"}, ("ilp_anchor must be True or False",)),
                                   ("ilp", {"ilp_move_cost": float("nan")}, ("ilp_move_cost must be None or a number",)),
                                   ("ilp", {"ilp_move_cost": -1}, ("ilp_move_cost must be None or a number",))]:
        with pytest.raises(OptionError) as err:
            pal_opt.TypedScheduler("aws:1x4", profiles, policy, **options)
        _one_line(err, *parts)
    assert pal_opt.TypedScheduler("aws:1x4", profiles, "ilp", ilp_move_cost=None, ilp_levels=True).policy == "ilp"
    assert pal_opt.TypedScheduler("aws:1x4", profiles, "gavel", gavel_round=np.float64(120)).policy == "gavel"


def test_typed_scheduler_variability_that_is_not_a_variability_is_an_option_error(profiles: Path) -> None:
    for bad in ({"classA": [1.0] * 4}, {}, [1.0] * 4):
        with pytest.raises(OptionError) as err:
            pal_opt.TypedScheduler("aws:1x4", profiles, variability=bad)  # type: ignore[arg-type]
        _one_line(err, "variability must be a pal_opt.hetero.gpus.Variability", type(bad).__name__)


def test_round_policy_place_refuses_a_seed_its_method_does_not_take_and_a_negative_one() -> None:
    inst = pal_opt.generate_instance(2, 4, 4, seed=0)
    with pytest.raises(OptionError) as err:
        RoundPolicy("ilp").place(inst, seed=5)  # was ignored without a word
    _one_line(err, "seed do not apply to method 'ilp'")
    with pytest.raises(OptionError) as err:
        RoundPolicy("random").place(inst, seed=-1)
    _one_line(err, "seed must be an integer >= 0")
    a, b = RoundPolicy("random").place(inst, seed=9), RoundPolicy("random", seed=1).place(inst, seed=9)
    assert a.placements == b.placements
    for method in ("pal", "pmfirst", "packed", "packed-sticky", "preempt-greedy"):  # nothing random: was ignored
        with pytest.raises(OptionError) as err:
            RoundPolicy(method).place(inst, seed=9)
        _one_line(err, f"seed do not apply to method {method!r}")
        with pytest.raises(OptionError):
            RoundPolicy(method, seed=9)
        with pytest.raises(OptionError):
            pal_opt.solve(inst, method, seed=9)


def test_repair_given_one_failed_gpu_id_instead_of_a_list_is_an_option_error() -> None:
    inst = pal_opt.generate_instance(2, 4, 4, seed=0)
    result = pal_opt.solve(inst)
    gpu = next(iter(result.placements.values()))[0]
    with pytest.raises(OptionError) as err:
        pal_opt.repair(inst, result, gpu)  # type: ignore[arg-type]  # was a raw "'int' object is not iterable"
    _one_line(err, "failed must be a sequence of GPU ids such as [3], got int")
    fixed = pal_opt.repair(inst, result, [gpu])
    assert gpu not in {g for gpus in fixed.placements.values() for g in gpus}


def test_check_given_something_that_is_not_a_round_or_a_result_is_an_instance_error() -> None:
    from pal_opt.check import check
    from pal_opt.errors import InstanceError
    from pal_opt.generate import generate_instance

    inst = generate_instance(4, 4, 6, seed=1)
    with pytest.raises(InstanceError, match="check takes a PlacementResult"):
        check(inst, None)  # type: ignore[arg-type]
    with pytest.raises(InstanceError, match="check takes a RoundInstance"):
        check(None, {})  # type: ignore[arg-type]


def test_round_policy_options_are_the_same_however_they_are_given() -> None:
    import pal_opt

    by_kwargs = pal_opt.RoundPolicy("ilp", backend="highs", time_limit=5)
    by_options = pal_opt.RoundPolicy("ilp", options=pal_opt.SolveOptions(backend="highs", time_limit=5))
    assert by_kwargs.options == by_options.options == {"backend": "highs", "time_limit": 5.0}


def test_numpy_scalars_are_numbers_for_every_option() -> None:
    """``time_limit=np.int64(2)`` and ``gap=np.float32(0.01)`` were refused while numpy integers
    were taken for ``seed``, and a numpy seed was not recorded in ``result.seed`` (review)."""
    import numpy as np

    import pal_opt
    from pal_opt.generate import generate_instance

    inst = generate_instance(4, 4, 6, seed=1)
    assert pal_opt.solve(inst, "ilp", time_limit=np.int64(30), gap=np.float32(0.01)).status.value == "optimal"
    res = pal_opt.solve(inst, "random", seed=np.int64(3))
    assert res.seed == 3 and type(res.seed) is int
    assert res.placements == pal_opt.solve(inst, "random", seed=3).placements


def _two_servers(state: dict[int, str] | None = None):
    import networkx as nx

    g = nx.DiGraph()
    for s in range(2):
        g.add_edge(("cluster",), ("server", s))
        for k in range(4):
            gid = 4 * s + k
            g.add_node(("gpu", gid), factors={"classA": 1.0}, state=(state or {}).get(gid, "free"))
            g.add_edge(("server", s), ("gpu", gid))
    return g


def test_a_carried_job_that_must_move_is_terminated_not_dropped() -> None:
    """A job the policy carried, whose GPU failed or was taken since, was silently taken for a
    new job: not in jobs_to_terminate, and its GPUs went to another job while it still ran
    there (review).  It is carried, must move, and is listed."""
    import pytest

    import pal_opt
    from pal_opt.errors import InstanceError

    a, b, c = ({"id": i, "demand": 2, "class": "classA"} for i in "abc")
    for state in ({1: "busy"}, {0: "failed"}):
        policy = pal_opt.RoundPolicy("packed-sticky")
        first = policy.place(pal_opt.make_instance(_two_servers(), [a, b]))
        assert first.placements["a"] == (0, 1)
        res = policy.place(pal_opt.make_instance(_two_servers(state), [a, b, c]))
        assert "a" in res.jobs_to_terminate and "a" in res.info["carried"]
        assert pal_opt.check(policy.last_instance, res) == []
    policy = pal_opt.RoundPolicy("packed-sticky")
    policy.place(pal_opt.make_instance(_two_servers(), [a, b]))
    with pytest.raises(InstanceError, match="job 'a' ran on 2 GPUs last round and now asks for 3"):
        policy.place(pal_opt.make_instance(_two_servers(), [dict(a, demand=3), b, c]))


def test_forget_matches_ids_as_a_round_does_and_keeps_the_last_round_checkable() -> None:
    """forget("7") did nothing for job 7 (a round takes 7 and "7" for one id), and forget left
    check(last_instance, last) failing (review)."""
    import pal_opt

    policy = pal_opt.RoundPolicy("packed-sticky")
    policy.place(pal_opt.make_instance(_two_servers(), [{"id": 7, "demand": 2, "class": "classA"}]))
    policy.forget("7")
    assert 7 not in policy.last_placements
    assert pal_opt.check(policy.last_instance, policy.last) == []
    res = policy.place(pal_opt.make_instance(_two_servers(), [{"id": 7, "demand": 2, "class": "classA"}]))
    assert "carried" not in res.info and res.jobs_to_terminate == ()


def test_options_of_one_round_are_refused_by_a_policy() -> None:
    import time

    import pytest

    import pal_opt

    for kw in ({"deadline": time.monotonic() + 1}, {"jobs": ["a"]}):
        with pytest.raises(pal_opt.OptionError, match="applies to one round: give it to pal_opt.solve"):
            pal_opt.RoundPolicy("ilp", **kw)


def test_a_cluster_leaves_the_callers_arrays_writeable() -> None:
    """A round loop updates its factors and states in place between rounds: the cluster keeps
    read-only copies and the caller's arrays stay the caller's."""
    factors = {"classA": np.array([1.0, 1.1, 1.3, 1.0])}
    state, ids, devices = np.zeros(4, dtype=np.int8), np.arange(4), np.array([0, 1, 0, 1])
    cl = Cluster.from_arrays(ids, [0, 0, 1, 1], factors, state=state, devices=devices)
    assert all(a.flags.writeable for a in (factors["classA"], state, ids, devices))
    assert not any(a.flags.writeable for a in (cl.factors["classA"], cl.state, cl.gpu_ids, cl.devices))
    state[2], factors["classA"][0] = 2, 9.0
    assert cl.state.tolist() == [0, 0, 0, 0] and cl.factors["classA"][0] == 1.0
    again = cl.with_state(np.array([0, 0, 2, 0]))  # the cluster's own read-only arrays are shared, not copied
    assert again.factors["classA"] is cl.factors["classA"]


def test_lists_where_the_hints_say_sequences() -> None:
    assert SolveOptions(jobs=["a", 7]).jobs == ("a", 7)
    p = pal_opt.Pipeline([1.0, 2.0], [1, 1])
    assert p.stage_times == (1.0, 2.0) and p.replicas == (1, 1)


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_an_empty_or_unplaceable_queue_is_its_own_bound_under_every_exact_method(backend: str) -> None:
    if backend not in pal_opt.available_backends():
        pytest.skip(f"{backend} not installed")
    inst = pal_opt.generate_instance(nodes=2, gpus_per_node=4, jobs=3, seed=0)
    big = pal_opt.make_instance(inst.cluster, [{"id": "x", "demand": 64, "class": "classA"}])
    for rnd in (RoundInstance(inst.cluster, (), inst.params), big):
        for method in ("ilp", "ilp-preempt"):
            r = pal_opt.solve(rnd, method, backend=backend)
            assert (r.status.value, r.objective, r.bound, r.gap) == ("optimal", 0.0, 0.0, 0.0), (method, r)


@pytest.mark.parametrize("method", pal_opt.method_names())
def test_every_methods_policy_pickles_and_places_the_next_round_as_before(method: str) -> None:
    """A greedy method's run was a closure, so RoundPolicy("pal") could not be pickled (for a
    process pool or a checkpoint of the round loop) while RoundPolicy("ilp") could."""
    import pickle

    inst = pal_opt.generate_instance(nodes=4, gpus_per_node=4, jobs=8, seed=0)
    from pal_opt.methods import get_method

    policy = RoundPolicy(method, seed=3) if "seed" in get_method(method).options else RoundPolicy(method)
    policy.place(inst)
    again = pickle.loads(pickle.dumps(policy))
    assert again.place(inst).placements == policy.place(inst).placements
    # the round's cluster, its memo warmed by the places above, pickles without it (derived data,
    # some held by lru_cache builders, which do not pickle) and places the same
    assert inst.cluster._cache
    copy = pickle.loads(pickle.dumps(inst))
    assert copy.cluster._cache == {} and pal_opt.solve(copy, method).placements == pal_opt.solve(inst, method).placements


def test_job_slowdown_on_no_gpus_is_an_instance_error() -> None:
    inst = pal_opt.generate_instance(nodes=2, gpus_per_node=4, jobs=4, seed=0)
    with pytest.raises(InstanceError, match="no GPUs given"):
        pal_opt.job_slowdown(inst, inst.cluster.factors, inst.jobs[0], ())


def test_a_job_no_round_can_place_that_holds_the_queue_back_is_named_once(caplog: pytest.LogCaptureFixture) -> None:
    """Prefix admission stops at a job larger than the cluster, as the PAL artifact does: a
    round loop that did not act on result.unplaceable stalled without a word.  The result names
    it (info["queue_held_by"]) and the policy warns once; backfill passes it, and a job that only
    waits for failed GPUs is not named."""
    cl = Cluster.uniform(2, 4, {"classA": [1.0] * 8})
    jobs = (Job("huge", 40, "classA", 0), Job("s1", 2, "classA", 1), Job("s2", 1, "classA", 2))
    inst = RoundInstance(cl, jobs)
    for method in ("pal", "ilp"):
        policy = RoundPolicy(method)
        caplog.clear()
        results = [policy.place(inst) for _ in range(3)]
        assert all(r.info["queue_held_by"] == "huge" and not r.placements for r in results)
        warned = [r.getMessage() for r in caplog.records if "can never be placed" in r.getMessage()]
        assert len(warned) == 1 and "so 2 queued jobs behind it wait" in warned[0]
    assert "queue_held_by" not in RoundPolicy("ilp", admission="backfill").place(inst).info
    failed = RoundInstance(Cluster.uniform(2, 4, {"classA": [1.0] * 8}, state=[2] * 3 + [0] * 5),
                           (Job("six", 6, "classA", 0), Job("s1", 2, "classA", 1)))
    res = RoundPolicy("ilp").place(failed)
    assert "six" in res.unplaceable and "queue_held_by" not in res.info


def _priced_round() -> tuple[RoundInstance, pal_opt.PlacementResult]:
    inst = pal_opt.generate_instance(2, 4, 4, seed=0)
    return inst, pal_opt.solve(inst, "pal")


@pytest.mark.parametrize(("call", "error", "parts"), [
    # evaluate given the result itself (check takes one), a list, or a placement that is not GPU ids
    (lambda i, r, f: pal_opt.evaluate(i, r, f), InstanceError,
     ("placements: must map job ids to GPU ids, got PlacementResult (its .placements)",)),
    (lambda i, r, f: pal_opt.evaluate(i, list(r.placements.items()), f), InstanceError, ("placements:", "got list")),
    (lambda i, r, f: pal_opt.evaluate(i, {i.jobs[0].id: None}, f), InstanceError,
     ("placements.0: must be a sequence of GPU ids, got NoneType",)),
    (lambda i, r, f: pal_opt.evaluate(i, {i.jobs[0].id: 3}, f), InstanceError,
     ("placements.0: must be a sequence of GPU ids, got int 3",)),
    (lambda i, r, f: pal_opt.evaluate(i, {i.jobs[0].id: ["a"]}, f), InstanceError,
     ("placements.0[0]: must be a GPU id (integer), got 'a'",)),
    # a string of digits iterated as GPU ids "0" and "1" was priced as GPUs 0 and 1, as job_slowdown refuses it
    (lambda i, r, f: pal_opt.evaluate(i, {i.jobs[0].id: "01"}, f), InstanceError,
     ("placements.0: must be a sequence of GPU ids, got str '01'",)),
    (lambda i, r, f: pal_opt.evaluate(i, {i.jobs[0].id: {0: 0, 1: 0}}, f), InstanceError,
     ("placements.0: must be a sequence of GPU ids, got dict",)),
    # factors that are not {class: one number per GPU}
    (lambda i, r, f: pal_opt.evaluate(i, r.placements, i.cluster), InstanceError,
     ("factors: must map class names to per-GPU factor arrays", "got Cluster")),
    (lambda i, r, f: pal_opt.evaluate(i, r.placements, np.ones(8)), InstanceError, ("factors:", "got ndarray")),
    (lambda i, r, f: pal_opt.evaluate(i, r.placements, {c: np.ones(2) for c in f}), InstanceError,
     ("must be 8 numbers, one per GPU of the cluster, got shape (2,)",)),
    (lambda i, r, f: pal_opt.evaluate(i, r.placements, {c: np.array(["x"] * 8) for c in f}), InstanceError,
     ("must be 8 numbers, one per GPU of the cluster",)),
    # job_slowdown given a job id, no factors, or one GPU id
    (lambda i, r, f: pal_opt.job_slowdown(i, f, i.jobs[0].id, (0,)), InstanceError,
     ("job: must be a Job (instance.job_by_id[job_id]), got int 0",)),
    (lambda i, r, f: pal_opt.job_slowdown(i, None, i.jobs[0], (0,)), InstanceError, ("factors:", "got NoneType")),
    (lambda i, r, f: pal_opt.job_slowdown(i, f, i.jobs[0], 0), InstanceError,
     ("gpu_ids: must be a sequence of GPU ids, got int 0",)),
    (lambda i, r, f: pal_opt.job_slowdown(i, f, i.jobs[0], ["a"]), InstanceError,
     ("gpu_ids[0]: must be a GPU id (integer), got 'a'",)),
    # the instance and the path swapped, or a result for the instance
    (lambda i, r, f: pal_opt.save_instance("round.json", i), TypeError, ("expected a RoundInstance", "got str")),
    (lambda i, r, f: pal_opt.save_instance(r, "round.json"), TypeError, ("expected a RoundInstance", "got PlacementResult")),
    (lambda i, r, f: pal_opt.plot_placement(i, r.placements, "round.png"), InstanceError,
     ("result: must be a PlacementResult", "got dict")),
    (lambda i, r, f: pal_opt.plot_placement(None, r, "round.png"), TypeError, ("expected a RoundInstance",)),
    # the smaller helpers
    (lambda i, r, f: pal_opt.pal_locality(None), InstanceError, ("locality_penalty: must be a finite number >= 1, got None",)),
    (lambda i, r, f: i.cluster.with_state(None), InstanceError, ("state: GPU states must be 0 (free)",)),
    # states that are not 0, 1 or 2 were cast to int8: 0.5 and 1e10 became 0 (free), 300 an OverflowError
    (lambda i, r, f: i.cluster.with_state([0.5] * 8), InstanceError, ("state: GPU states must be 0 (free)", "got [0.5")),
    (lambda i, r, f: i.cluster.with_state(np.full(8, 1e10)), InstanceError, ("state: GPU states must be 0 (free)",)),
    (lambda i, r, f: i.cluster.with_state([300] * 8), InstanceError, ("state: GPU states must be 0 (free)",)),
])
def test_wrong_arguments_to_the_pricing_and_writing_helpers_name_the_argument(
        call: Any, error: type[Exception], parts: tuple[str, ...], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each was a raw ``AttributeError`` (``'PlacementResult' object has no attribute 'items'``,
    ``'str' object has no attribute 'cluster'``, ``'dict' object has no attribute
    'placements'``, ``'int' object has no attribute 'perfclass'``), ``TypeError`` (``object of
    type 'int' has no len()``, ``'Cluster' object is not subscriptable``), ``IndexError`` or
    ``ValueError`` from inside pal_opt; nothing is written."""
    monkeypatch.chdir(tmp_path)
    inst, result = _priced_round()
    with pytest.raises(error) as err:
        call(inst, result, dict(inst.cluster.factors))
    if error is InstanceError:
        assert isinstance(err.value, pal_opt.PalOptError)
    _one_line(err, *parts)
    assert list(tmp_path.iterdir()) == []


def test_the_pricing_helpers_still_price_what_they_priced() -> None:
    inst, result = _priced_round()
    factors = pal_opt.binned_factors(inst.cluster, inst.params.binning)
    assert pal_opt.evaluate(inst, result.placements, factors).cost == pytest.approx(result.objective)
    listed = {j: list(g) for j, g in result.placements.items()}  # lists, numpy ids, numeric strings: as before
    as_numpy = {j: np.asarray(g) for j, g in result.placements.items()}
    assert pal_opt.evaluate(inst, listed, factors).cost == pal_opt.evaluate(inst, as_numpy, factors).cost
    jid, gpus = next(iter(result.placements.items()))
    job = inst.job_by_id[jid]
    assert pal_opt.job_slowdown(inst, factors, job, list(gpus)) == pal_opt.job_slowdown(inst, factors, job, iter(gpus))
    with pytest.raises(InstanceError, match=r"gpu_ids: GPU 999 is not in the round's cluster"):
        pal_opt.job_slowdown(inst, factors, job, [999])
    with pytest.raises(InstanceError, match=r"placements: job 'nope' is not in the round"):
        pal_opt.evaluate(inst, {"nope": [0]}, factors)


def test_typed_scheduler_names_that_are_not_strings_are_option_errors(profiles: Path) -> None:
    """``report(["a"])``, ``finish(["a"], t)`` and ``remove(["a"])`` raised ``TypeError:
    unhashable type: 'list'``; ``applications=[3]`` a ``TypeError`` from a path joined with 3."""
    sched = pal_opt.TypedScheduler("aws:2x4", profiles, applications=["cifar10"])
    assert sched.submit("a", "cifar10", 1, 128, 0.0) is None
    for call in (lambda: sched.report(["a"]), lambda: sched.finish(["a"], 1.0),  # type: ignore[arg-type]
                 lambda: sched.remove(["a"])):  # type: ignore[arg-type]
        with pytest.raises(OptionError) as err:
            call()
        _one_line(err, "a job name must be a string (one job per call), got ['a']")
    with pytest.raises(OptionError) as err:
        pal_opt.TypedScheduler("aws:2x4", profiles, applications=[3])  # type: ignore[list-item]
    _one_line(err, "applications must be application names (strings), got 3")


@pytest.mark.parametrize("name", ["restart_cost", "round_length", "locality_penalty"])
@pytest.mark.parametrize("where", ["policy", "solve"])
def test_a_round_parameter_given_as_a_solve_option_says_it_belongs_to_the_round(name: str, where: str) -> None:
    # the README prices moves with make_instance(..., restart_cost=10, round_length=60); a loop that
    # gave them to RoundPolicy or solve got "unknown option(s) restart_cost; known: ..." and the
    # whole list of solve options, none of which is it
    with pytest.raises(OptionError, match=rf"{name} is a round parameter, not a solve option: give it to "
                                          rf"pal_opt\.make_instance\(\.\.\., {name}=\.\.\.\)"):
        if where == "policy":
            RoundPolicy("ilp", **{name: 10.0})
        else:
            pal_opt.solve(pal_opt.make_instance(_graph(), [{"id": "a", "demand": 1, "class": "classA"}]), "ilp",
                          **{name: 10.0})


def test_the_round_parameters_solve_options_point_to_are_make_instance_s() -> None:
    from pal_opt.model import RoundArguments
    from pal_opt.options import ROUND_PARAMETERS

    assert set(ROUND_PARAMETERS) == set(RoundArguments.__annotations__) - {"binning"}  # binning is both


@pytest.mark.parametrize("name", ["time_limit", "backend", "restart_cost", "gap"])
def test_a_blox_round_given_an_adapter_option_says_it_goes_to_the_constructor(name: str) -> None:
    # place() takes **kwargs and ignores them, as the artifact's PALPlacement.place does; an
    # option of the adapter given there (place(..., time_limit=2)) was ignored without a word
    value = {"time_limit": 2.0, "backend": "highs", "restart_cost": 10.0, "gap": 0.01}[name]
    policy = BloxPlacement(None, method="ilp", backend="highs")
    with pytest.raises(OptionError, match=rf"{name} is an option of the adapter, not of one round: give it to "
                                          rf"BloxPlacement\(args, \.\.\., {name}=\.\.\.\)"):
        policy.place(*_blox_round(), **{name: value})
    assert policy.place(*_blox_round(), some_blox_argument=1) == ([], {5: [2, 3]})  # others: ignored, as before


#: The end of every message about the two pricing calls' arguments in the other's order.
ORDERS = ("the orders are evaluate(instance, placements, factors) and job_slowdown(instance, factors, job, gpu_ids); "
          "named arguments need none (factors=...)")


@pytest.mark.parametrize(("call", "message"), [
    # evaluate's order (what is priced, then the factors): the Job second, the factors last
    (lambda i, f, job, g: pal_opt.job_slowdown(i, job, g, f), f"job: must be a Job, got tuple; the Job was given as factors: {ORDERS}"),
    (lambda i, f, job, g: pal_opt.job_slowdown(i, job, f, g), f"job: must be a Job, got dict; the Job was given as factors: {ORDERS}"),
    (lambda i, f, job, g: pal_opt.job_slowdown(i, f, g, job), f"job: must be a Job, got tuple; the Job was given as gpu_ids: {ORDERS}"),
    (lambda i, f, job, g: pal_opt.job_slowdown(i, g, job, f),
     f"gpu_ids: must be a sequence of GPU ids, got dict (the factors?): {ORDERS}"),
    # job_slowdown's order given to evaluate (the factors second)
    (lambda i, f, job, g: pal_opt.evaluate(i, f, {job.id: g}), f"placements: job 'classA' is not in the round (a class: {ORDERS})"),
])
def test_the_pricing_calls_in_each_others_order_say_both_orders(call: Any, message: str) -> None:
    """``evaluate(instance, placements, factors)`` and ``job_slowdown(instance, factors, job,
    gpu_ids)`` take the factors in different places.  ``job_slowdown`` in evaluate's order said
    ``job: must be a Job (instance.job_by_id[job_id]), got tuple (0, 1)`` (or ``got dict`` and the
    factors' whole multi-line repr, or ``gpu_ids: must be a sequence of GPU ids, got dict``), and
    not that the order was the trouble; each now names the argument and both orders.  The orders
    themselves stay (every positional caller would break), and named arguments take any order."""
    inst, result = _priced_round()
    factors = pal_opt.binned_factors(inst.cluster, inst.params.binning)
    jid, gpus = next(iter(result.placements.items()))
    with pytest.raises(InstanceError) as err:
        call(inst, factors, inst.job_by_id[jid], tuple(gpus))
    assert str(err.value) == message


def test_the_pricing_calls_take_their_arguments_by_name_in_any_order() -> None:
    """The names are the API's (``docs/api``): a caller who does not want to remember which of the
    two takes the factors first names them."""
    inst, result = _priced_round()
    factors = pal_opt.binned_factors(inst.cluster, inst.params.binning)
    jid, gpus = next(iter(result.placements.items()))
    job = inst.job_by_id[jid]
    by_place = pal_opt.job_slowdown(inst, factors, job, gpus)
    assert pal_opt.job_slowdown(inst, job=job, gpu_ids=gpus, factors=factors) == by_place
    assert pal_opt.job_slowdown(instance=inst, gpu_ids=gpus, factors=factors, job=job) == by_place
    assert by_place == pal_opt.evaluate(inst, result.placements, factors).slowdown[jid]
    assert pal_opt.evaluate(inst, factors=factors, placements=result.placements) == \
        pal_opt.evaluate(inst, result.placements, factors)
    # a mapping of GPU ids with the factors in their place is the usual message, no hint of an order
    with pytest.raises(InstanceError, match=r"^gpu_ids: must be a sequence of GPU ids, got dict \{0: 0\}$"):
        pal_opt.job_slowdown(inst, factors, job, {0: 0})
