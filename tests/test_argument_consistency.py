"""Argument checks made alike (fifteenth session).

* The two simulators' configurations test their times with one predicate
  (:func:`pal_opt.options.check_seconds`): a bool, NaN, infinity, a negative or a text is
  refused by both, in the same words (the PAL simulator's took ``True`` as a 1 s round).
* Records a user builds (:class:`~pal_opt.hetero.GpuType`, :class:`~pal_opt.hetero.WorkloadJob`,
  :class:`~pal_opt.hetero.Workload`, :class:`~pal_opt.simulate.ClusterSpec`) check their fields
  when built, instead of running on 0 GPUs or failing deep inside the simulator.
* Public callables check the arguments a call does not read (a mode that leaves them out).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pal_opt.errors import OptionError, PalOptError
from pal_opt.hetero import GpuType, JobKind, Workload, WorkloadJob
from pal_opt.hetero.simulate import SimConfig as SiaConfig
from pal_opt.simulate import ClusterSpec, SimConfig

SIA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sia-artifact"
BAD_TIMES = [True, False, math.nan, math.inf, -math.inf, -1.0, 0, 2e15, "60", None]


def _message(make) -> str:
    with pytest.raises(OptionError) as err:
        make()
    assert "\n" not in str(err.value)
    return str(err.value)


# ----------------------------------------------------------------------------- the simulators
@pytest.mark.parametrize("name", ["round_length", "max_time"])
@pytest.mark.parametrize("bad", BAD_TIMES, ids=repr)
def test_both_simulators_refuse_a_bad_time_in_the_same_words(name: str, bad: object) -> None:
    if bad is None and name == "max_time":
        pytest.skip("the PAL simulator's max_time=None means no cap (the Sia one's has no None)")
    pal = _message(lambda: SimConfig(**{name: bad}).validate())
    sia = _message(lambda: SiaConfig(**{name: bad}))
    assert pal == sia == f"{name} must be a number of seconds > 0 and at most 1e+15, got {bad!r}"


@pytest.mark.parametrize("value", [np.int64(60), np.float64(60.0), 60, 1e15])
def test_both_simulators_take_a_number_of_seconds(value: object) -> None:
    SimConfig(round_length=value, max_time=value).validate()  # type: ignore[arg-type]
    assert SiaConfig(round_length=value, max_time=value).round_length == value  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"restart_cost": True}, "restart_cost must be a number of seconds >= 0 and at most 1e+15, got True"),
    ({"restart_cost": math.nan}, "restart_cost must be a number of seconds >= 0 and at most 1e+15, got nan"),
    ({"restart_cost": "5"}, "restart_cost must be a number of seconds >= 0 and at most 1e+15, got '5'"),
    ({"restart_cost": -1}, "restart_cost must be a number of seconds >= 0 and at most 1e+15, got -1"),
    ({"rack_penalty": True}, "rack_penalty must be a finite number >= 1, got True"),
    ({"rack_penalty": "2"}, "rack_penalty must be a finite number >= 1, got '2'"),
    ({"seed": True}, "seed must be an integer >= 0, got True"),
    ({"seed": 1.5}, "seed must be an integer >= 0, got 1.5"),
])
def test_the_pal_simulator_refuses_its_other_bad_numbers(kwargs: dict, expected: str) -> None:
    # True was a 1 s restart cost and a rack penalty of 1; "5" and "2" raised TypeError from math.isfinite
    assert _message(lambda: SimConfig(**kwargs).validate()) == expected


def test_gavels_round_is_a_number_of_seconds_in_the_same_words() -> None:
    from pal_opt.hetero import GavelPolicy

    assert (_message(lambda: SiaConfig(gavel_round=True))
            == "gavel_round must be a number of seconds > 0 and at most 1e+15, got True")
    # "x" raised TypeError from math.isfinite; True was a round of 1 s
    for bad in ("x", True):
        assert (_message(lambda: GavelPolicy((GpuType("a", 1, 1),), round_length=bad))  # noqa: B023
                == f"round_length must be a number of seconds > 0 and at most 1e+15, got {bad!r}")


# ----------------------------------------------------------------------------- records
@pytest.mark.parametrize(("args", "expected"), [
    (("aws", 0, 4), "GpuType 'aws': nodes must be an integer >= 1, got 0"),
    (("aws", -1, 4), "GpuType 'aws': nodes must be an integer >= 1, got -1"),
    (("aws", "2", 4), "GpuType 'aws': nodes must be an integer >= 1, got '2'"),
    (("aws", 1.5, 4), "GpuType 'aws': nodes must be an integer >= 1, got 1.5"),
    (("aws", 2, True), "GpuType 'aws': gpus_per_node must be an integer >= 1, got True"),
    (("aws", 2, 4, 0), "GpuType 'aws': max_physical_nodes must be an integer >= 1, got 0"),
    ((None, 2, 4), "GpuType: name must be a non-empty str (a profiled type such as 'aws'), got None"),
    (("", 2, 4), "GpuType: name must be a non-empty str (a profiled type such as 'aws'), got ''"),
])
def test_a_gpu_type_checks_its_fields(args: tuple, expected: str) -> None:
    # 0 or -1 nodes ran a simulation on no GPUs; "2" failed in min() deep inside
    assert _message(lambda: GpuType(*args)) == expected


def test_a_gpu_type_keeps_numpy_counts_as_ints() -> None:
    t = GpuType("aws", np.int64(2), np.int32(4), np.int64(16))
    assert (t.nodes, t.gpus_per_node, t.max_physical_nodes) == (2, 4, 16)
    assert type(t.nodes) is int and type(t.max_physical_nodes) is int
    assert GpuType("aws", 2, 4).max_physical_nodes is None


GOOD_JOB = ("cifar10-0", 0.0, "cifar10", 2, 128, JobKind.RIGID, 2)


@pytest.mark.parametrize(("index", "bad", "expected"), [
    (1, math.nan, "WorkloadJob 'cifar10-0': submit_time must be a finite number >= 0, got nan"),
    (1, -5.0, "WorkloadJob 'cifar10-0': submit_time must be a finite number >= 0, got -5.0"),
    (1, "0", "WorkloadJob 'cifar10-0': submit_time must be a finite number >= 0, got '0'"),
    (3, 0, "WorkloadJob 'cifar10-0': num_replicas must be an integer >= 1, got 0"),
    (3, True, "WorkloadJob 'cifar10-0': num_replicas must be an integer >= 1, got True"),
    (4, "128", "WorkloadJob 'cifar10-0': batch_size must be an integer >= 1, got '128'"),
    (4, 128.5, "WorkloadJob 'cifar10-0': batch_size must be an integer >= 1, got 128.5"),
    (5, "rigid", "WorkloadJob 'cifar10-0': kind must be a JobKind (JobKind.parse('rigid')), got 'rigid'"),
    (6, -1, "WorkloadJob 'cifar10-0': row must be an integer >= 0, got -1"),
    (2, None, "WorkloadJob 'cifar10-0': application must be a non-empty str, got None"),
    (0, None, "WorkloadJob: name must be a non-empty str, got None"),
])
def test_a_workload_job_checks_its_fields(index: int, bad: object, expected: str) -> None:
    # a NaN or negative submit time, 0 replicas, a name None ran; "rigid" raised AttributeError
    # ('str' object has no attribute 'tunes_batch') and "128" TypeError deep inside the simulator
    args = list(GOOD_JOB)
    args[index] = bad
    assert _message(lambda: WorkloadJob(*args)) == expected


def test_a_workload_job_of_numpy_values_is_kept_in_python_types() -> None:
    j = WorkloadJob("a", np.float64(3.5), "cifar10", np.int64(2), np.int64(128), JobKind.ADAPTIVE, np.int64(4))
    assert (j.submit_time, j.num_replicas, j.batch_size, j.row) == (3.5, 2, 128, 4)
    assert all(type(v) is t for v, t in ((j.submit_time, float), (j.num_replicas, int), (j.batch_size, int)))
    assert WorkloadJob("a", 7, "cifar10", 1, 32).submit_time == 7.0


def test_a_workload_holds_workload_jobs() -> None:
    job = WorkloadJob(*GOOD_JOB)
    assert Workload("x", [job]).jobs == (job,)  # a list, kept as a tuple
    with pytest.raises(PalOptError) as err:  # tuples of fields raised AttributeError in check_workload
        Workload("x", (GOOD_JOB,))  # type: ignore[arg-type]
    assert str(err.value).startswith("Workload.jobs: must be a list of WorkloadJobs, got tuple ('cifar10-0'")


@pytest.mark.parametrize(("args", "expected"), [
    ((0, 4), "ClusterSpec: servers must be an integer >= 1, got 0"),
    (("4", 4), "ClusterSpec: servers must be an integer >= 1, got '4'"),
    ((4, True), "ClusterSpec: gpus_per_server must be an integer >= 1, got True"),
    ((4, 4, -1), "ClusterSpec: racks must be an integer >= 0, got -1"),
    ((4, 4, 3), "ClusterSpec: 4 servers do not split into 3 racks of equal size"),
    ((1 << 20, 8), "ClusterSpec 1048576x8: 8,388,608 GPUs; pal-opt builds clusters of at most 1,048,576"),
])
def test_a_cluster_spec_checks_its_fields(args: tuple, expected: str) -> None:
    # ("4", 4) said "n_gpus must be an integer >= 1, got '4444'"; 4 servers in 3 racks and
    # 8 million GPUs were built
    assert _message(lambda: ClusterSpec(*args)) == expected


def test_parse_cluster_keeps_its_own_words() -> None:
    from pal_opt.simulate import parse_cluster

    assert parse_cluster("2x8x4") == ClusterSpec(16, 4, racks=2)
    assert _message(lambda: parse_cluster("4x0")) == "--cluster sizes must be positive, got '4x0'"
    assert _message(lambda: parse_cluster("2048x1024")).startswith("--cluster 2048x1024: 2,097,152 GPUs")


# ----------------------------------------------------------------------------- unread arguments
def test_draw_variability_checks_seed_and_binning_without_files() -> None:
    from pal_opt.hetero import Layout, draw_variability

    layout = Layout((GpuType("aws", 1, 4),))
    assert not draw_variability(layout, {}).active
    # with no files neither was read: any value passed
    assert _message(lambda: draw_variability(layout, {}, seed="x")).startswith("seed must be an integer >= 0")
    assert _message(lambda: draw_variability(layout, {}, binning="k")).startswith("unknown binning mode 'k'")


def _proven_round():
    from pal_opt.hetero import RoundInput, enumerate_configs, fairness_costs, solve_round

    cs = enumerate_configs((GpuType("aws", 2, 4),))
    inp = RoundInput(cs, fairness_costs(np.linspace(1.0, 2.0, len(cs))[None, :]))
    assert solve_round(inp, decompose=True).backend == "bounds"  # the bounds prove it: no backend runs
    return inp


@pytest.mark.parametrize(("kwargs", "start"), [
    ({"backend": "nope"}, "unknown backend 'nope'"),
    ({"time_limit": -1}, "time_limit must be a positive number of seconds or None, got -1"),
    ({"time_limit": "5"}, "time_limit must be a positive number of seconds or None, got '5'"),
    ({"prune": "no"}, "prune must be True or False, got 'no'"),
    ({"decompose": 1}, "decompose must be True or False or None, got 1"),
])
def test_solve_round_checks_its_options_when_the_bounds_prove_the_round(kwargs: dict, start: str) -> None:
    from pal_opt.hetero import solve_round

    inp = _proven_round()
    assert _message(lambda: solve_round(inp, **{"decompose": True, **kwargs})).startswith(start)


def test_solve_partitioned_checks_the_bound_time_limit_it_does_not_read() -> None:
    import pal_opt
    from pal_opt.ilp import solve_partitioned

    inst = pal_opt.generate_instance(nodes=2, gpus_per_node=4, jobs=3, seed=0)
    for kwargs in ({"bound": "none"}, {}):
        with pytest.raises(OptionError) as err:
            solve_partitioned(inst, 2, executor="serial", bound_time_limit=-1.0, **kwargs)
        assert str(err.value) == "bound_time_limit must be a positive number of seconds or None, got -1.0"


def test_build_cluster_checks_the_seed_the_artifact_draw_does_not_read() -> None:
    from pal_opt.simulate import build_cluster

    for kwargs in ({"draw": "artifact", "seed": "x"}, {"draw": "artifact", "seed": -1}, {"synthetic_seed": 1.5}):
        assert _message(lambda: build_cluster(ClusterSpec(2, 4), **kwargs)).startswith(  # noqa: B023
            ("seed must be an integer >= 0", "synthetic_seed must be an integer >= 0"))


@pytest.mark.skipif(not SIA.is_dir(), reason="Sia artifact profiles not available")
def test_choose_batch_checks_what_an_adaptive_job_does_not_read() -> None:
    from pal_opt.hetero import choose_batch, load_applications

    app = load_applications(SIA / "profiles", ["cifar10"])["cifar10"]
    choose_batch(app, "aws", (2,), JobKind.ADAPTIVE)
    # an adaptive job reads no requested batch, nor a step model without gradient statistics
    assert _message(lambda: choose_batch(app, "aws", (2,), JobKind.ADAPTIVE, requested_batch="x")) == (
        "requested_batch must be an integer >= 1, got 'x'")
    with pytest.raises(PalOptError, match=r"^step_model: must be a Callable"):
        choose_batch(app, "aws", (2,), JobKind.ADAPTIVE, step_model=5)  # type: ignore[arg-type]
    with pytest.raises(PalOptError, match=r"^grad: must be a pair"):
        choose_batch(app, "aws", (2,), JobKind.RIGID, requested_batch=128, grad=3)  # type: ignore[arg-type]
    with pytest.raises(PalOptError, match=r"^kind: must be a JobKind"):  # was AttributeError: 'tunes_batch'
        choose_batch(app, "aws", (2,), "rigid", requested_batch=128)  # type: ignore[arg-type]


def test_simulate_checks_its_flag_and_functions_before_running() -> None:
    import pal_opt
    from pal_opt.io.traces import TraceJob
    from pal_opt.simulate import simulate

    cluster = pal_opt.generate_instance(nodes=2, gpus_per_node=4, jobs=1, seed=0).cluster
    trace = [TraceJob(0, 2, 0.0, 100.0, "resnet50", "classA", 1.0)]
    # "no" ran the checker on every round; progress=5 raised TypeError after the first round
    assert _message(lambda: simulate(trace, cluster, validate="no")) == "validate must be True or False, got 'no'"
    for name in ("progress", "on_round"):
        with pytest.raises(PalOptError, match=rf"^{name}: must be a function or None, got int 5$"):
            simulate(trace, cluster, **{name: 5})


@pytest.mark.parametrize(("functions", "expected"), [
    ({"progress": 5}, "progress: must be a function or None, got int 5"),
    ({"on_round": "print"}, "on_round: must be a function or None, got str 'print'"),
    ({"progress": [], "on_round": 5}, "progress: must be a function or None, got list []"),  # the first named
    ({"progress": None, "on_round": 5}, "on_round: must be a function or None, got int 5"),
])
def test_both_simulators_check_their_functions_with_one_check(functions: dict, expected: str) -> None:
    """``progress`` and ``on_round``: one check (``pal_opt.options.check_callbacks``) where each
    simulator had its own copy, in the same words, before anything runs (the Sia simulator's
    unchecked data shows it: an empty workload and cluster are never reached)."""
    import pal_opt
    from pal_opt.errors import InputTypeError
    from pal_opt.hetero.simulate import simulate_sia
    from pal_opt.io.traces import TraceJob
    from pal_opt.options import check_callbacks
    from pal_opt.simulate import simulate

    cluster = pal_opt.generate_instance(nodes=2, gpus_per_node=4, jobs=1, seed=0).cluster
    trace = [TraceJob(0, 2, 0.0, 100.0, "resnet50", "classA", 1.0)]
    for run in (lambda: check_callbacks(**functions), lambda: simulate(trace, cluster, **functions),
                lambda: simulate_sia([], {}, [], **functions)):  # type: ignore[arg-type]
        with pytest.raises(InputTypeError) as err:
            run()
        assert str(err.value) == expected
    check_callbacks(progress=None, on_round=None)
    check_callbacks(progress=print, on_round=lambda *a: None)


# ----------------------------------------------------------------------------- a solver's time limit
@pytest.mark.parametrize("bad", [0, 0.0, -1, math.nan, math.inf, -math.inf, True, False, "5", [5]], ids=repr)
def test_check_time_limit_refuses_what_is_not_a_positive_finite_number(bad: object) -> None:
    from pal_opt.options import check_time_limit

    assert (_message(lambda: check_time_limit(bad, "bound_time_limit"))
            == f"bound_time_limit must be a positive number of seconds or None, got {bad!r}")


@pytest.mark.parametrize("value", [np.int64(5), np.float64(0.5), 5, 1e-9, 1e15])
def test_check_time_limit_gives_a_float(value: object) -> None:
    from pal_opt.options import check_time_limit

    got = check_time_limit(value)
    assert type(got) is float and got == value
    assert check_time_limit(None) is None


BIG = 10**400  # an integer past a float's range: Python and JSON read one


@pytest.mark.parametrize(("build", "start"), [
    (lambda: __import__("pal_opt.options", fromlist=["SolveOptions"]).SolveOptions(time_limit=BIG),
     "time_limit must be a positive number of seconds, got "),
    (lambda: __import__("pal_opt.options", fromlist=["SolveOptions"]).SolveOptions(gap=BIG),
     "gap must be a finite number >= 0, got "),
    (lambda: __import__("pal_opt.options", fromlist=["SolveOptions"]).SolveOptions(deadline=BIG),
     "deadline must be a time.monotonic() value, got "),
    (lambda: SimConfig(round_length=BIG), "round_length must be a number of seconds > 0 and at most 1e+15, got "),
    (lambda: SiaConfig(round_length=BIG), "round_length must be a number of seconds > 0 and at most 1e+15, got "),
    (lambda: __import__("pal_opt.options", fromlist=["check_time_limit"]).check_time_limit(BIG),
     "time_limit must be a positive number of seconds or None, got "),
])
def test_an_integer_past_a_floats_range_is_refused_in_one_line(build, start: str) -> None:
    """``math.isfinite(10**400)`` raises ``OverflowError``: these checks let that traceback out
    instead of their one line; the value is shown by its first and last digits."""
    with pytest.raises(OptionError) as info:
        build()
    assert str(info.value) == start + "100000000000000000...0000000000000000000"


def test_a_cost_parameter_past_a_floats_range_is_refused_in_one_line() -> None:
    from pal_opt.cost import COST_TERMS

    with pytest.raises(OptionError, match=r"^costs\.migration\.per_gpu must be a finite number >= 0, got 1000"):
        COST_TERMS["migration"].validate_params({"per_gpu": BIG})


def _trace_job(**given: object) -> object:
    from pal_opt.io.traces import TraceJob

    fields = {"id": 1, "demand": 2, "submit_time": 0.0, "iterations": 100, "model": "BERT", "perfclass": "classA",
              "iter_time": 0.1}
    return TraceJob(**{**fields, **given})  # type: ignore[arg-type]


def _simulate(**given: object) -> object:
    from pal_opt.simulate import build_cluster, parse_cluster, simulate

    return simulate([_trace_job(**given)], build_cluster(parse_cluster("2x4"))[0])


def _read_trace(tmp_path: Path, value: object) -> object:
    from pal_opt.io.traces import read_trace

    path = tmp_path / "trace.csv"
    path.write_text("job_id,num_gpus,submit_time,duration,model\n1,2,0,100,BERT\n")
    return read_trace(path, default_iter_time=value)  # type: ignore[arg-type]


def _repair(value: object) -> object:
    import pal_opt

    inst = pal_opt.generate_instance(2, 4, 3, seed=0)
    placed = dict(pal_opt.solve(inst, "pal").placements)
    return pal_opt.repair(inst, placed, [next(iter(placed.values()))[0]], allow_migration=value)  # type: ignore[arg-type]


def _cluster(throughput: object) -> object:
    from pal_opt import Cluster

    return Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types="aabb",
                               throughput={"classA": {"a": throughput, "b": 1.0}})


_SHOWN = "100000000000000000...0000000000000000000"
_NAN_OR_BIG = [  # (label, build from the value, error class, message: NaN's with the value shown as given)
    ("RoundParams(locality_penalty)", lambda v, d: __import__("pal_opt").RoundParams(locality_penalty=v),
     "InstanceError", "params.locality_penalty: must be a finite number >= 1, got {}"),
    ("RoundParams(restart_cost)", lambda v, d: __import__("pal_opt").RoundParams(restart_cost=v),
     "InstanceError", "params.restart_cost: must be a finite number >= 0, got {}"),
    ("RoundParams(round_length)", lambda v, d: __import__("pal_opt").RoundParams(round_length=v),
     "InstanceError", "params.round_length: must be a finite number > 0, got {}"),
    ("Pipeline(stage_times)", lambda v, d: __import__("pal_opt").Pipeline((v, 1.0), (1, 1)),
     "InstanceError", "pipeline.stage_times[0]: must be a finite number >= 0, got {}"),
    ("Cluster(throughput)", lambda v, d: _cluster(v),
     "InstanceError", "throughput.classA.a: must be a finite number > 0, got {}"),
    ("fairness_costs(p)", lambda v, d: __import__("pal_opt.hetero", fromlist=["x"]).fairness_costs([1.0], p=v),
     "OptionError", "the fairness power p must be finite and non-zero, got {}"),
    ("SiaParams(lambda_n)", lambda v, d: __import__("pal_opt.hetero", fromlist=["x"]).SiaParams(lambda_n=v),
     "OptionError", "lambda_n must be a finite number, got {}"),
    ("StepTime(step_time)", lambda v, d: __import__("pal_opt.hetero", fromlist=["x"]).StepTime(4, v, 0.0),
     "OptionError", "a step time must be a positive number of seconds, got {}"),
    ("StepTime(sync_time)", lambda v, d: __import__("pal_opt.hetero", fromlist=["x"]).StepTime(4, 1.0, v),
     "OptionError", "a sync time must be >= 0 and below the step time 1.0, got {}"),
    ("FailureConfig(gpu_mtbf_hours)", lambda v, d: __import__("pal_opt.simulate.failures", fromlist=["x"]).FailureConfig(
        gpu_mtbf_hours=v).validate(), "OptionError", "gpu-mtbf must be a number > 0 (inf: never), got {}"),
    ("FailureConfig(repair_time)", lambda v, d: __import__("pal_opt.simulate.failures", fromlist=["x"]).FailureConfig(
        repair_time=v).validate(), "OptionError", "repair-time must be a finite number > 0, got {}"),
    ("read_trace(default_iter_time)", lambda v, d: _read_trace(d, v),
     "InstanceError", "trace.csv: default iteration time must be > 0, got {}"),
    ("repair(allow_migration)", lambda v, d: _repair(v),
     "OptionError", "allow_migration must be a positive number (round-cost units per GPU moved), got {}"),
    ("solve_ilp(gap)", lambda v, d: __import__("pal_opt.ilp", fromlist=["x"]).solve_ilp(
        __import__("pal_opt").generate_instance(2, 4, 3, seed=0), gap=v), "OptionError",
     "gap must be a finite number >= 0, got {}"),
    ("solve_ilp(deadline)", lambda v, d: __import__("pal_opt.ilp", fromlist=["x"]).solve_ilp(
        __import__("pal_opt").generate_instance(2, 4, 3, seed=0), deadline=v), "OptionError",
     "deadline must be a time.monotonic() value, got {}"),
    ("geomean_slowdown(cost)", lambda v, d: __import__("pal_opt").geomean_slowdown(v, 2),
     "InstanceError", "cost: must be a number or inf (a round cost), got {}"),
    ("simulate(submit_time)", lambda v, d: _simulate(submit_time=v),
     "InstanceError", "job 1: submit_time: job 1 has submit time {}; expected a finite number ≥ 0"),
    ("simulate(iterations)", lambda v, d: _simulate(iterations=v),
     "InstanceError", "job 1: duration: job 1 needs finite positive iterations and iteration time"),
    ("kmeans_1d(values)", lambda v, d: __import__("pal_opt.kmeans", fromlist=["x"]).kmeans_1d([1.0, v, 2.0], 2),
     "OptionError", "k-means values must be finite"),
]


@pytest.mark.parametrize(("build", "error", "message"), [c[1:] for c in _NAN_OR_BIG], ids=[c[0] for c in _NAN_OR_BIG])
def test_an_integer_past_a_floats_range_is_refused_as_nan_is(build, error: str, message: str, tmp_path: Path) -> None:
    """These checks called ``math.isfinite`` (or ``math.isnan``, or numpy's float conversion) on
    the value, which raises ``OverflowError`` on ``10**400``: a traceback where NaN gets one line.
    Now both get the same error (the value shown by its first and last digits)."""
    for value, shown in ((math.nan, "nan"), (BIG, _SHOWN)):
        with pytest.raises(PalOptError) as info:
            build(value, tmp_path)
        assert type(info.value).__name__ == error, info.value
        assert str(info.value).endswith(message.format(shown)), str(info.value)


def test_read_trace_refuses_a_default_iteration_time_that_is_no_number_as_a_type_error(tmp_path: Path) -> None:
    from pal_opt.errors import InputTypeError

    with pytest.raises(InputTypeError, match="default_iter_time: must be a number of seconds, got str '1'"):
        _read_trace(tmp_path, "1")  # a TypeError from math.isfinite before: still a TypeError


def test_relative_gap_takes_a_bound_past_a_floats_range_as_no_bound_as_nan() -> None:
    from pal_opt.cost import relative_gap

    assert relative_gap(1.0, math.nan, 4) is None and relative_gap(1.0, BIG, 4) is None  # OverflowError before


@pytest.mark.parametrize("call", [
    lambda: __import__("pal_opt.hetero", fromlist=["x"]).fit_perf_params([1], [1], [32], [BIG], [1.0]),
    lambda: __import__("pal_opt.hetero", fromlist=["x"]).gavel_allocation([[1.0, BIG]], [1], [1, 1]),
], ids=["fit_perf_params", "gavel_allocation"])
def test_arrays_with_an_integer_past_a_floats_range_are_refused_in_one_line(call) -> None:
    from pal_opt.errors import InputTypeError

    with pytest.raises(InputTypeError, match=r"must be numbers that float64 holds, got list \[") as info:
        call()
    assert "\n" not in str(info.value)


def _graph_of_factors(value: object) -> object:
    import networkx as nx

    g = nx.DiGraph()
    for gpu, factor in ((0, 1.0), (7, value)):
        g.add_edge(("server", 0), ("gpu", gpu))
        g.nodes[("gpu", gpu)]["factors"] = {"classA": factor}
    return g


@pytest.mark.parametrize("build", [
    lambda v: __import__("pal_opt").Cluster.from_arrays([0, 7], [0, 0], {"classA": [1.0, v]}, source="c.json"),
    lambda v: __import__("pal_opt").Cluster.from_arrays([0, 7], [0, 0], {"classA": np.array([1.0, v], dtype=object)},
                                                        source="c.json"),
    lambda v: __import__("pal_opt").Cluster.from_graph(_graph_of_factors(v), source="c.json"),
], ids=["list", "object array", "graph"])
def test_a_factor_past_a_floats_range_names_its_gpu_and_class_as_nan_does(build) -> None:
    """``Cluster.from_arrays`` said ``malformed cluster data: int too large to convert to float`` of
    a factor of ``10**400``, naming neither the GPU nor the class; NaN's error names both."""
    from pal_opt.options import shown_number

    for value, shown in ((math.nan, "nan"), (BIG, _SHOWN), (-BIG, shown_number(-BIG))):
        with pytest.raises(PalOptError) as info:
            build(value)
        assert str(info.value).startswith("c.json: ") and str(info.value).endswith(
            "factors.classA: factor of GPU 7 must be finite and positive, got " + shown), str(info.value)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: __import__("pal_opt.options", fromlist=["x"]).number_array([1, BIG], "row"),
     f"row: {_SHOWN} at index 1 is too large to be a float"),
    (lambda: __import__("pal_opt.options", fromlist=["x"]).number_array([[1.0, 2.0], [-BIG, 3.0]], "row"),
     "row: -10000000000000000...0000000000000000000 at index (1, 0) is too large to be a float"),
    (lambda: __import__("pal_opt.hetero", fromlist=["x"]).fairness_costs([1.0, BIG]),
     f"goodput: {_SHOWN} at index 1 is too large to be a float"),
], ids=["list", "nested", "fairness_costs"])
def test_number_array_says_an_integer_past_a_floats_range_is_too_large(call, message: str) -> None:
    """``number_array`` without a dtype said such a list "must be numbers": it holds numbers, one
    too large for a float."""
    from pal_opt.errors import InputTypeError

    with pytest.raises(InputTypeError) as info:
        call()
    assert str(info.value) == message


def test_number_array_takes_integers_past_int64_that_a_float_holds() -> None:
    """numpy keeps ``[10**20, 1]`` as objects; ``number_array`` called it "must be numbers" though
    a float holds 10**20.  Such a list is floats now, as ``[1e20, 1]`` is; a list with a string
    in it is still refused."""
    from pal_opt.errors import InputTypeError
    from pal_opt.options import number_array

    got = number_array([10**20, 1], "row")
    assert got.dtype.kind == "f" and got.tolist() == [1e20, 1.0]
    assert number_array([[10**20], [2]], "row").tolist() == [[1e20], [2.0]]
    with pytest.raises(InputTypeError, match="must be numbers"):
        number_array([10**20, "x"], "row")
    with pytest.raises(InputTypeError, match="must be numbers"):
        number_array([10**20, None], "row")
