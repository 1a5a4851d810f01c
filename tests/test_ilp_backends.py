"""Backends, options, statuses and errors of ``solve_ilp`` (real solvers)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from typing import ClassVar

import numpy as np
import pytest

from pal_opt.admission import admit, class_rank
from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import evaluate
from pal_opt.errors import BackendUnavailableError, OptionError
from pal_opt.generate import generate_instance
from pal_opt.ilp import available_backends, build_formulation, get_backend, solve_ilp
from pal_opt.ilp.backends import BACKENDS, Backend
from pal_opt.ilp.backends.cpsat import OBJECTIVE_PRECISION, scaled_objective
from pal_opt.ilp.heuristic import start_placements
from pal_opt.model import Cluster, Job, RoundInstance, RoundParams
from pal_opt.policies.pal import place_sequence
from pal_opt.result import Status
from pal_opt.solve import solve

ALL = ("highs", "cpsat", "cbc")


def _installed(name: str) -> None:
    if name not in available_backends():
        pytest.skip(f"{name} not installed: {BACKENDS[name].import_error()}")


# --------------------------------------------------------------------------- registry
def test_available_backends_in_preference_order():
    avail = available_backends()
    assert avail == [n for n in ALL if n in avail]
    assert set(avail) == set(ALL), {n: BACKENDS[n].import_error() for n in ALL}
    assert get_backend() is BACKENDS[avail[0]]


def test_backend_classes_declare_their_features():
    with pytest.raises(TypeError):
        Backend()  # type: ignore[abstract]
    assert BACKENDS["cpsat"].integer_coefficients
    assert not BACKENDS["highs"].integer_coefficients and not BACKENDS["cbc"].integer_coefficients
    for name, cls in BACKENDS.items():
        assert cls.name == name
        assert cls.supports_warm_start
        if cls.is_available():
            assert cls.import_error() is None and cls.version()


class _Missing(Backend):
    name: ClassVar[str] = "missing"

    @classmethod
    def _probe(cls) -> None:
        import pal_opt_no_such_solver  # noqa: F401

    @classmethod
    def version(cls) -> str:  # pragma: no cover
        return "?"

    def solve(self, form, options, start=None):  # pragma: no cover
        raise AssertionError("never called")


def test_missing_backend_names_the_error_and_the_installed_ones(monkeypatch, tiny_instance):
    monkeypatch.setitem(BACKENDS, "missing", _Missing)
    with pytest.raises(BackendUnavailableError) as err:
        get_backend("missing")
    msg = str(err.value)
    assert "pal_opt_no_such_solver" in msg
    assert "installed: " + ", ".join(available_backends()) in msg
    with pytest.raises(BackendUnavailableError, match="missing"):
        solve_ilp(tiny_instance, backend="missing")


def test_unknown_backend_is_an_option_error(tiny_instance):
    with pytest.raises(OptionError, match="highs, cpsat, cbc"):
        solve_ilp(tiny_instance, backend="gurobi")


def test_all_three_backends_load_in_one_process():
    """ortools 9.15 and highspy 1.15 cannot share a process; the pinned highspy can, in
    either import order."""
    for first in ("import highspy\nfrom ortools.sat.python import cp_model",
                  "from ortools.sat.python import cp_model\nimport highspy"):
        code = first + "\nimport pulp\n" + textwrap.dedent(
            """
            from pal_opt.generate import generate_instance
            from pal_opt.ilp import solve_ilp
            inst = generate_instance(4, 4, 8, seed=1)
            objs = [solve_ilp(inst, backend=b).objective for b in ("highs", "cpsat", "cbc")]
            assert max(objs) - min(objs) < 1e-5, objs
            print("ok")
            """
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# --------------------------------------------------------------------------- options
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"time_limit": 0}, "time_limit"),
        ({"time_limit": -1.0}, "time_limit"),
        ({"time_limit": math.nan}, "time_limit"),
        ({"time_limit": "10"}, "time_limit"),
        ({"gap": -0.01}, "gap"),
        ({"gap": math.inf}, "gap"),
        ({"threads": 0}, "threads"),
        ({"threads": 1.5}, "threads"),
        ({"threads": True}, "threads"),
        ({"warm_start": "yes"}, "warm_start"),
        ({"deterministic": 1}, "deterministic"),
        ({"admission": "lifo"}, "admission"),
        ({"admission": "prefix", "jobs": [0]}, "either"),
        ({"jobs": [0, 99]}, "99"),
        ({"jobs": [0, 0]}, "twice"),
        ({"jobs": "01"}, "sequence"),
        ({"binning": "kmeans"}, "binning"),
    ],
)
def test_bad_options_raise_option_error(tiny_instance, kwargs, match):
    with pytest.raises(OptionError, match=match):
        solve_ilp(tiny_instance, **kwargs)


def test_options_of_other_methods_are_rejected(tiny_instance):
    with pytest.raises(OptionError, match="time_limit"):
        solve(tiny_instance, method="pal", time_limit=1.0)
    with pytest.raises(OptionError, match="flow_func"):
        solve(tiny_instance, method="ilp", flow_func=None)


def test_job_ids_may_be_given_as_strings(tiny_instance):
    r = solve_ilp(tiny_instance, jobs=["0", "2"])
    assert set(r.placements) == {0, 2} and r.admission == "given"


# --------------------------------------------------------------------------- statuses
@pytest.mark.parametrize("backend", ALL)
def test_explicit_set_larger_than_free_gpus_is_infeasible(tiny_instance, backend):
    _installed(backend)
    r = solve_ilp(tiny_instance, backend=backend, jobs=[0, 1, 2, 3])
    assert r.status == Status.INFEASIBLE
    assert r.placements == {} and r.gpus_used == 0
    assert "8 GPUs" in r.message and "7 are free" in r.message and "1 failed" in r.message


@pytest.mark.parametrize("mode", ["prefix", "backfill"])
def test_prefix_and_backfill_are_feasible_with_failed_gpus(tiny_instance, mode):
    r = solve_ilp(tiny_instance, admission=mode)
    assert r.status == Status.OPTIMAL
    assert check(tiny_instance, r) == []
    assert set(r.placements) == {tiny_instance.jobs[i].id for i in admit(tiny_instance, mode)}


def test_backfill_admits_a_later_job_that_fits():
    cl = Cluster.from_arrays(np.arange(4), [0, 0, 1, 1], {"classA": [1.0, 1.0, 1.1, 1.1]})
    jobs = (Job(0, 2, "classA"), Job(1, 3, "classA", 1), Job(2, 2, "classA", 2))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"))
    assert set(solve_ilp(inst).placements) == {0}
    r = solve_ilp(inst, admission="backfill")
    assert set(r.placements) == {0, 2}
    assert r.placements[0] == (0, 1) or r.placements[2] == (0, 1)


def test_empty_round_is_trivially_optimal():
    cl = Cluster.from_arrays(np.arange(2), [0, 0], {"classA": [1.0, 1.0]}, [2, 2])
    inst = RoundInstance(cl, (Job(0, 1, "classA"),), RoundParams(binning="none"))
    r = solve_ilp(inst)
    assert r.status == Status.OPTIMAL and r.placements == {} and r.objective == 0.0


@pytest.mark.parametrize("backend", ALL)
def test_time_limit_without_solution_falls_back_to_the_start_placement(backend):
    _installed(backend)
    inst = generate_instance(64, 4, 120, seed=0)
    r = solve_ilp(inst, backend=backend, time_limit=1e-6, warm_start=False)
    assert r.status == Status.FALLBACK
    assert "greedy" in r.message
    factors = binned_factors(inst.cluster)
    starts = start_placements(build_formulation(inst, factors=factors))
    source = r.info["start_source"]
    assert source in starts and source in r.message
    assert r.placements == starts[source]
    assert r.objective == min(evaluate(inst, p, factors).cost for p in starts.values())
    assert check(inst, r) == []


def test_start_placements_include_pal():
    inst = generate_instance(16, 4, 40, seed=2, busy_fraction=0.2)
    factors = binned_factors(inst.cluster)
    form = build_formulation(inst, factors=factors)
    starts = start_placements(form)
    adm = admit(inst, "prefix")
    pal = place_sequence(inst, factors, sorted(adm, key=lambda i: class_rank(inst.jobs[i].perfclass)))
    assert starts["pal"] == pal
    for p in starts.values():
        assert set(p) == {inst.jobs[i].id for i in adm}
        assert check(inst, {"placements": {str(k): list(v) for k, v in p.items()}, "admission": "prefix"}) == []


@pytest.mark.parametrize("backend", ALL)
def test_gap_target_is_honoured(backend):
    _installed(backend)
    inst = generate_instance(16, 4, 40, seed=5)
    r = solve_ilp(inst, backend=backend, gap=0.05)
    assert r.status in (Status.OPTIMAL, Status.FEASIBLE)
    assert r.gap is not None and r.gap <= 0.05 + 1e-9
    assert r.info["gap_target"] == 0.05


@pytest.mark.parametrize("backend", ALL)
def test_result_fields(backend):
    _installed(backend)
    inst = generate_instance(8, 4, 20, seed=2, busy_fraction=0.2)
    r = solve_ilp(inst, backend=backend)
    factors = binned_factors(inst.cluster)
    summary = evaluate(inst, r.placements, factors)
    assert r.method == "ilp" and r.backend == backend and r.backend_version
    assert r.objective == pytest.approx(summary.cost, abs=1e-12)
    assert r.geomean_slowdown == pytest.approx(summary.geomean)
    assert r.gpus_used == sum(inst.job_by_id[j].demand for j in r.placements)
    assert r.bound is not None and r.bound <= r.objective + 1e-12
    assert r.gap is not None and 0 <= r.gap <= 1e-6
    assert r.build_seconds > 0 and r.solve_seconds > 0
    for key in ("num_vars", "num_rows", "nnz", "binning", "solver_status", "incumbent"):
        assert key in r.info
    assert r.info["binning"] == "pal-artifact"
    assert check(inst, r) == []


@pytest.mark.parametrize("backend", ALL)
def test_same_instance_twice_gives_the_same_placement(backend):
    _installed(backend)
    inst = generate_instance(16, 4, 40, seed=11, busy_fraction=0.1, failed_fraction=0.05)
    a = solve_ilp(inst, backend=backend)
    b = solve_ilp(generate_instance(16, 4, 40, seed=11, busy_fraction=0.1, failed_fraction=0.05), backend=backend)
    assert a.placements == b.placements


def test_threads_option():
    inst = generate_instance(8, 4, 20, seed=4)
    objs = {solve_ilp(inst, backend=b, threads=t).objective for b in ("highs", "cpsat") for t in (1, 2)}
    assert max(objs) - min(objs) < 1e-6


# --------------------------------------------------------------------------- restart cost
def _running_round(rc: float) -> RoundInstance:
    # job 0 runs on GPUs 0 and 4 (two servers, one slow GPU); the fast pair 2, 3 is free
    cl = Cluster.from_arrays(np.arange(8), [0, 0, 0, 0, 1, 1, 1, 1],
                             {"classA": [1.0, 1.0, 1.0, 1.0, 1.3, 1.3, 1.3, 1.3]})
    jobs = (Job(0, 2, "classA", 0, (1.0, 1.7, 1.7), placement=(0, 4)), Job(1, 2, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none", restart_cost=rc))


@pytest.mark.parametrize("backend", ALL)
def test_restart_cost_decides_whether_a_running_job_moves(backend):
    _installed(backend)
    free = solve_ilp(_running_round(0.0), backend=backend)
    assert free.jobs_to_terminate == (0,)
    assert free.geomean_slowdown == pytest.approx(1.0)
    sticky = solve_ilp(_running_round(5.0), backend=backend)
    assert sticky.placements[0] == (0, 4)
    assert sticky.jobs_to_terminate == ()
    assert sticky.status == Status.OPTIMAL
    # keeping costs 2 ln(1.3 * 1.7); moving would cost 2 * 5 more than the free optimum
    assert sticky.objective == pytest.approx(2 * math.log(1.3 * 1.7))


# --------------------------------------------------------------------------- CP-SAT scaling
def test_cpsat_objective_scaling_is_conservative():
    inst = generate_instance(8, 4, 20, seed=6)
    form = build_formulation(inst)
    q, excess = scaled_objective(form)
    assert np.all(np.abs(q * OBJECTIVE_PRECISION - form.c) <= OBJECTIVE_PRECISION / 2 + 1e-15)
    assert 0 <= excess <= len(form.admitted) * OBJECTIVE_PRECISION / 2
    r = solve_ilp(inst, backend="cpsat")
    ref = solve_ilp(inst, backend="highs")
    assert r.bound <= ref.objective + 1e-12
    assert abs(r.objective - ref.objective) <= len(form.admitted) * OBJECTIVE_PRECISION


def test_highs_stops_at_the_lp_bound_when_the_start_is_close_enough():
    inst = generate_instance(32, 8, 120, seed=1)
    r = solve_ilp(inst, backend="highs", gap=0.05)
    assert r.info["solver_status"] == "start placement within the gap of the LP relaxation"
    assert r.bound == pytest.approx(min(r.info["relaxation_bound"], r.objective))
    assert r.gap is not None and r.gap <= 0.05
    assert r.info["incumbent"].startswith("start")
    exact = solve_ilp(inst, backend="highs")
    assert exact.status == Status.OPTIMAL
    assert r.bound <= exact.objective + 1e-9 <= r.objective + 2e-9
