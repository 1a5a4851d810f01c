"""What every solver backend must do: a reusable conformance suite (not a test module).

In the way of PuLP's ``tests/solver_common.py``: :class:`BackendConformance` holds the checks as
test methods and names the backend in a class attribute; ``test_backend_conformance.py`` makes
one subclass per registered backend (and one for a backend defined in the test itself), so a
backend added with :func:`pal_opt.ilp.backends.register_backend` is checked by adding nothing.

The checks run at two levels: the backend alone on a :class:`~pal_opt.ilp.program.Program`
(``Backend.solve``), and :func:`pal_opt.ilp.solve_ilp` with ``backend=name`` (decoding, pricing,
statuses).  Solver-specific knowledge the suite needs (a parameter that limits the search, a
harmless one, a value the solver rejects) is in :data:`PARAMS`, found through the backend
class's bases so that a subclass of a built-in backend inherits it.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from ilp_rounds import brute_force, count_assignments, pin_solver_time_limit, rounds
from procs import cbc_dirs, interrupt_when_solving, own_children, solver_threads

from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cost import evaluate
from pal_opt.cost.restart import restart_cost_seconds
from pal_opt.errors import OptionError, SolveInterrupted
from pal_opt.generate import generate_instance
from pal_opt.ilp import Program, build_formulation, encode, solve_ilp
from pal_opt.ilp.backends import (
    BACKENDS,
    Backend,
    SolveOptions,
    SolverStatus,
    available_backends,
    get_backend,
)
from pal_opt.ilp.backends.cpsat import OBJECTIVE_PRECISION
from pal_opt.ilp.heuristic import start_placements
from pal_opt.ilp.solve import resolve_admission
from pal_opt.io import load_instance
from pal_opt.model import Cluster, Job, RoundInstance, RoundParams, pal_locality
from pal_opt.options import DEFAULT_ROUND_LENGTH
from pal_opt.result import Status
from pal_opt.solve import solve

ROOT = Path(__file__).resolve().parents[1]
RACKED = ROOT / "instances" / "racked-64x8.json"
#: Relative tolerance on the geometric-mean slowdown between backends (CP-SAT rounds costs to
#: 1e-7 per job, see :data:`~pal_opt.ilp.backends.cpsat.OBJECTIVE_PRECISION`).
AGREE = 1e-6
#: Seconds a solve may overrun its time limit (translation, reading back, a loaded machine).
TIME_SLACK = 5.0

#: Per backend (looked up through the class's bases): ``limiting`` parameters that stop the
#: search before optimality is proven, ``harmless`` ones that leave the optimum alone, and a
#: ``bad_value`` for a known parameter.
PARAMS: dict[str, dict[str, Mapping[str, Any]]] = {
    "highs": {"limiting": {"time_limit": 0.0}, "harmless": {"presolve": "off", "mip_heuristic_effort": 0.1},
              "bad_value": {"presolve": "sometimes"}, "bad_range": {"time_limit": -5.0}},
    "cpsat": {"limiting": {"max_time_in_seconds": 0.0},
              "harmless": {"search_branching": "FIXED_SEARCH", "linearization_level": 2},
              "bad_value": {"num_workers": "many"},
              # a value of the right type that CP-SAT refuses only when it solves (was a BackendError)
              "bad_range": {"max_time_in_seconds": -5.0}},
    "cbc": {"limiting": {"maxSolutions": 1}, "harmless": {"cuts": "off", "strong": 3},
            "bad_value": {"maxNodes": "many"}},
}


# --------------------------------------------------------------------------- rounds
def tiny_round() -> RoundInstance:
    """Three uneven servers, one busy and one failed GPU, four jobs needing 8 of the 7 free GPUs
    (the ``tiny_instance`` fixture of ``conftest.py``)."""
    from conftest import _tiny

    return _tiny()


def restart(units: float) -> float:
    """The restart cost (seconds per GPU) that a default-length round prices at ``units`` per GPU."""
    return restart_cost_seconds(units, DEFAULT_ROUND_LENGTH)


def running_round(rc: float) -> RoundInstance:
    """Job 0 runs on GPUs 0 and 4 (two servers, one slow GPU); the fast pair 2, 3 is free.
    Moving it costs ``rc`` per GPU (round-cost units)."""
    cl = Cluster.from_arrays(np.arange(8), [0, 0, 0, 0, 1, 1, 1, 1],
                             {"classA": [1.0, 1.0, 1.0, 1.0, 1.3, 1.3, 1.3, 1.3]})
    jobs = (Job(0, 2, "classA", 0, (1.0, 1.7, 1.7), placement=(0, 4)), Job(1, 2, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none", restart_cost=restart(rc)))


def racked_running_round() -> RoundInstance:
    cl = Cluster.from_arrays(np.arange(12), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2],
                             {"classA": [1.0, 1.1, 1.0, 1.2, 1.0, 1.0, 1.3, 1.1, 0.9, 1.0, 1.0, 1.4],
                              "classB": [1.0, 1.0, 1.05, 1.0, 1.1, 1.0, 1.0, 1.0, 1.0, 1.2, 1.0, 1.0]},
                             rack_of_server={0: 0, 1: 0, 2: 1})
    jobs = (Job(0, 3, "classA", 0, pal_locality(1.5), placement=(1, 2, 5)), Job(1, 4, "classB", 1, pal_locality(1.5)),
            Job(2, 2, "classA", 2, pal_locality(1.5)), Job(3, 1, "classB", 3, pal_locality(1.5), placement=(8,)))
    return RoundInstance(cl, jobs, RoundParams(binning="none", restart_cost=restart(0.05)))


#: Small rounds on which every backend must reach the same optimum.
SMALL_ROUNDS: dict[str, Callable[[], RoundInstance]] = {
    "tiny": tiny_round,
    "running-sticky": lambda: running_round(5.0),
    "racked-running": racked_running_round,
    "gen-8x4": lambda: generate_instance(8, 4, 20, seed=2, busy_fraction=0.2),
    "gen-racked": lambda: generate_instance(8, 4, 24, racks=2, seed=3, busy_fraction=0.1, running_fraction=0.3,
                                            restart_cost=restart(0.3)),
    "paper-16x4": lambda: load_instance(ROOT / "instances" / "paper-16x4.json"),
}


@functools.cache
def small_round(name: str) -> RoundInstance:
    return SMALL_ROUNDS[name]()


@functools.cache
def round_program(name: str) -> Program:
    inst = small_round(name)
    admitted, _ = resolve_admission(inst, None, None)
    return build_formulation(inst, admitted, factors=binned_factors(inst.cluster, inst.params.binning))


@functools.cache
def optimum(name: str, backend: str) -> tuple[float, float]:
    """``(solve_ilp objective, program objective)`` of round ``name`` with ``backend`` (cached,
    so that each backend's answer is computed once for all the classes that compare with it)."""
    res = solve_ilp(small_round(name), backend=backend)
    assert res.status == Status.OPTIMAL, (name, backend, res.message)
    sol = get_backend(backend)().solve(round_program(name), SolveOptions())
    assert sol.status == SolverStatus.OPTIMAL and sol.objective is not None, (name, backend, sol.message)
    return res.objective, sol.objective


@functools.cache
def racked_program() -> tuple[RoundInstance, Program, np.ndarray]:
    """racked-64x8 (512 GPUs, 7,000 columns; HiGHS needs seconds to prove its optimum, CP-SAT and
    CBC longer) and the cheapest start placement as a vector."""
    inst = load_instance(RACKED)
    admitted, _ = resolve_admission(inst, None, None)
    factors = binned_factors(inst.cluster, inst.params.binning)
    form = build_formulation(inst, admitted, factors=factors)
    start = min(start_placements(form).values(), key=lambda p: evaluate(inst, p, factors).cost)
    return inst, form, encode(form, start)


def infeasible_programs() -> dict[str, Program]:
    """Two programs without a solution: one whose LP relaxation is infeasible too, one whose LP
    relaxation is feasible but that has no integer point (2x + 2y = 3)."""
    lp = Program.from_arrays(c=[1.0, 1.0], A=np.array([[1.0, 1.0]]), row_lo=[3.0], row_hi=[np.inf],
                             col_lo=[0.0, 0.0], col_hi=[1.0, 1.0], integrality=[True, False])
    ip = Program.from_arrays(c=[1.0, -1.0], A=np.array([[2.0, 2.0]]), row_lo=[3.0], row_hi=[3.0],
                             col_lo=[0.0, 0.0], col_hi=[3.0, 3.0], integrality=[True, True])
    return {"lp-infeasible": lp, "integer-infeasible": ip}


def relative(a: float, b: float, demand: int) -> float:
    """Relative difference of the geometric-mean slowdowns of two costs."""
    return abs(math.expm1((a - b) / max(demand, 1)))


def assert_valid_solution(program: Program, sol: Any) -> None:
    """A backend answer consistent with itself and the program."""
    assert isinstance(sol.status, SolverStatus)
    assert sol.seconds >= 0 and sol.translate_seconds >= 0
    if sol.values is None:
        assert sol.objective is None
        assert sol.status in (SolverStatus.NO_SOLUTION, SolverStatus.INFEASIBLE)
        return
    assert sol.status in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE)
    assert program.is_feasible(sol.values), sol.message
    assert sol.objective == pytest.approx(program.objective(sol.values), abs=1e-9)
    if sol.bound is not None:
        assert sol.bound <= sol.objective + 1e-6


# --------------------------------------------------------------------------- the suite
class BackendConformance:
    """The checks; a subclass sets ``backend`` to a registered backend's name."""

    backend: ClassVar[str]

    @pytest.fixture(autouse=True)
    def _installed(self) -> None:
        cls = BACKENDS.get(self.backend)
        if cls is None:
            pytest.skip(f"backend {self.backend!r} is not registered")
        if not cls.is_available():
            pytest.skip(f"{self.backend} not installed: {cls.import_error()}")

    @property
    def cls(self) -> type[Backend]:
        return BACKENDS[self.backend]

    def params(self, kind: str) -> Mapping[str, Any]:
        for base in self.cls.__mro__:
            name = getattr(base, "name", None)
            if name in PARAMS:
                if kind not in PARAMS[name]:
                    pytest.skip(f"no {kind} parameters known for {self.backend}")
                return PARAMS[name][kind]
        pytest.skip(f"no example parameters known for {self.backend}")

    # ------------------------------------------------------------------ registry and features
    def test_is_registered_and_declares_its_features(self) -> None:
        cls = self.cls
        assert cls.name == self.backend and get_backend(self.backend) is cls
        assert self.backend in available_backends()
        assert cls.import_error() is None
        assert isinstance(cls.version(), str) and cls.version()
        assert cls.supports_warm_start
        relaxation = cls().relaxation_bound(round_program("gen-8x4"), SolveOptions())
        if cls.supports_relaxation:  # a valid bound: at most the optimum
            assert relaxation is not None and relaxation <= optimum("gen-8x4", self.backend)[1] + 1e-9
        else:
            assert relaxation is None

    # ------------------------------------------------------------------ optimal agreement
    @pytest.mark.parametrize("name", list(SMALL_ROUNDS))
    def test_optimum_agrees_with_every_backend(self, name: str) -> None:
        inst = small_round(name)
        res = solve_ilp(inst, backend=self.backend)
        assert res.status == Status.OPTIMAL and res.backend == self.backend, res.message
        assert check(inst, res) == []
        assert res.bound is not None and res.bound <= res.objective + 1e-9
        demand = sum(inst.jobs[i].demand for i in resolve_admission(inst, None, None)[0])
        mine = optimum(name, self.backend)
        for other in available_backends():
            theirs = optimum(name, other)
            assert relative(mine[0], theirs[0], demand) <= AGREE, (other, mine, theirs)
            assert relative(mine[1], theirs[1], demand) <= AGREE, (other, mine, theirs)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    @given(rounds(max_gpus=8, max_jobs=5, max_demand=4))
    def test_optimum_equals_brute_force(self, inst: RoundInstance) -> None:
        admitted, _ = resolve_admission(inst, "prefix", None)
        if count_assignments(inst, admitted) > 50_000:
            return
        best, _ = brute_force(inst, admitted, binned_factors(inst.cluster, "none"))
        res = solve_ilp(inst, backend=self.backend)
        assert res.status == Status.OPTIMAL, res.message
        demand = sum(inst.jobs[i].demand for i in admitted)
        assert relative(res.objective, best, demand) <= AGREE

    def test_restart_cost_decides_whether_a_running_job_moves(self) -> None:
        free = solve_ilp(running_round(0.0), backend=self.backend)
        assert free.jobs_to_terminate == (0,)
        assert free.geomean_slowdown == pytest.approx(1.0)
        sticky = solve_ilp(running_round(5.0), backend=self.backend)
        assert sticky.placements[0] == (0, 4)
        assert sticky.jobs_to_terminate == ()
        assert sticky.status == Status.OPTIMAL
        # keeping costs 2 ln(1.3 * 1.7); moving would cost 2 * 5 more than the free optimum
        assert sticky.objective == pytest.approx(2 * math.log(1.3 * 1.7))

    def test_result_fields(self) -> None:
        inst = generate_instance(8, 4, 20, seed=2, busy_fraction=0.2)
        r = solve_ilp(inst, backend=self.backend)
        factors = binned_factors(inst.cluster)
        summary = evaluate(inst, r.placements, factors)
        assert r.method == "ilp" and r.backend == self.backend and r.backend_version == self.cls.version()
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

    def test_same_instance_twice_gives_the_same_placement(self) -> None:
        def make() -> RoundInstance:
            return generate_instance(16, 4, 40, seed=11, busy_fraction=0.1, failed_fraction=0.05)

        assert solve_ilp(make(), backend=self.backend).placements == solve_ilp(make(), backend=self.backend).placements

    def test_threads_option(self) -> None:
        inst = generate_instance(8, 4, 20, seed=4)
        objs = [solve_ilp(inst, backend=self.backend, threads=t).objective for t in (1, 2)]
        assert max(objs) - min(objs) < 1e-6

    # ------------------------------------------------------------------ time limit and gap
    def test_time_limit_is_honoured(self) -> None:
        _, form, _ = racked_program()
        limit = 1.0
        t0 = time.perf_counter()
        sol = self.cls().solve(form, SolveOptions(time_limit=limit))
        wall = time.perf_counter() - t0
        assert sol.seconds <= limit + TIME_SLACK, sol.seconds
        assert wall <= limit + sol.translate_seconds + TIME_SLACK, wall
        assert sol.status != SolverStatus.INFEASIBLE, sol.message  # the round program always has a solution
        assert_valid_solution(form, sol)

    def test_time_limit_without_solution_falls_back_to_the_start_placement(self, monkeypatch: Any) -> None:
        inst = generate_instance(64, 4, 120, seed=0)
        pin_solver_time_limit(monkeypatch, 1e-6)  # the solver, not the whole call: see the helper
        r = solve_ilp(inst, backend=self.backend, warm_start=False)
        assert r.status == Status.FALLBACK
        assert "greedy" in r.message
        factors = binned_factors(inst.cluster)
        starts = start_placements(build_formulation(inst, factors=factors))
        source = r.info["start_source"]
        assert source in starts and source in r.message
        assert r.placements == starts[source]
        assert r.objective == min(evaluate(inst, p, factors).cost for p in starts.values())
        assert check(inst, r) == []

    def test_gap_target_is_honoured(self) -> None:
        form = round_program("paper-16x4")
        abs_gap = form.total_demand * math.log1p(0.05)
        sol = self.cls().solve(form, SolveOptions(abs_gap=abs_gap))
        assert sol.status == SolverStatus.OPTIMAL, sol.message  # optimal within the requested gap
        assert_valid_solution(form, sol)
        assert sol.bound is not None and sol.objective - sol.bound <= abs_gap + 1e-6
        inst = generate_instance(16, 4, 40, seed=5)
        r = solve_ilp(inst, backend=self.backend, gap=0.05)
        assert r.status in (Status.OPTIMAL, Status.FEASIBLE)
        assert r.gap is not None and r.gap <= 0.05 + 1e-9
        assert r.info["gap_target"] == 0.05

    # ------------------------------------------------------------------ edge programs
    def test_empty_program_and_empty_round(self) -> None:
        empty = Program.from_arrays(c=[], A=np.zeros((1, 0)), row_lo=[-1.0], row_hi=[2.0], col_lo=[], col_hi=[],
                                    integrality=[], obj_offset=1.5)
        sol = self.cls().solve(empty, SolveOptions())
        assert sol.status == SolverStatus.OPTIMAL and sol.objective == 1.5 and sol.bound == 1.5
        assert sol.values is not None and sol.values.size == 0
        cl = Cluster.from_arrays(np.arange(2), [0, 0], {"classA": [1.0, 1.0]}, [2, 2])
        inst = RoundInstance(cl, (Job(0, 1, "classA"),), RoundParams(binning="none"))
        r = solve_ilp(inst, backend=self.backend)
        assert r.status == Status.OPTIMAL and r.placements == {} and r.objective == 0.0

    @pytest.mark.parametrize("which", ["lp-infeasible", "integer-infeasible"])
    def test_infeasible_program_is_reported(self, which: str) -> None:
        sol = self.cls().solve(infeasible_programs()[which], SolveOptions())
        assert sol.status == SolverStatus.INFEASIBLE, sol.message
        assert sol.values is None and sol.objective is None

    def test_explicit_set_larger_than_free_gpus_is_infeasible(self) -> None:
        r = solve_ilp(tiny_round(), backend=self.backend, jobs=[0, 1, 2, 3])
        assert r.status == Status.INFEASIBLE
        assert r.placements == {} and r.gpus_used == 0
        assert "8 GPUs" in r.message and "7 are free" in r.message and "1 failed" in r.message

    # ------------------------------------------------------------------ warm start
    def test_warm_start_is_accepted(self) -> None:
        inst = generate_instance(16, 4, 40, seed=2, busy_fraction=0.2)
        factors = binned_factors(inst.cluster)
        form = build_formulation(inst, factors=factors)
        start = encode(form, start_placements(form)["pal"])
        tol = 1e-9 + len(form.admitted) * OBJECTIVE_PRECISION
        sol = self.cls().solve(form, SolveOptions(), start)
        assert sol.status == SolverStatus.OPTIMAL and sol.objective is not None
        assert sol.objective <= form.objective(start) + tol
        # stopped early, a solver that has anything has something at least as good as the start
        _, racked, rstart = racked_program()
        sol = self.cls().solve(racked, SolveOptions(time_limit=2.0), rstart)
        assert_valid_solution(racked, sol)
        if sol.objective is not None:
            assert sol.objective <= racked.objective(rstart) + tol + 1e-6

    def test_start_vector_of_the_wrong_size_is_refused(self) -> None:
        form = round_program("gen-8x4")
        with pytest.raises(OptionError, match="start vector"):
            self.cls().solve(form, SolveOptions(), np.zeros(form.num_vars + 1))

    # ------------------------------------------------------------------ interruption
    @pytest.mark.usefixtures("ctrl_c", "private_tmpdir")
    def test_ctrl_c_in_the_solver_hands_back_the_best_placement(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The solver stops within seconds; ``SolveInterrupted.result`` is a valid placement of the
        admitted jobs, never worse than the start placement, flagged as interrupted; no solver
        thread, process or temporary file is left behind."""
        racked, _, _ = racked_program()
        dirs_before, children_before = cbc_dirs(), set(own_children())  # (earlier tests may leave pool workers)
        # (0.5 s: racked-64x8 is solved to optimality in under 2 s on an idle machine)
        sent = interrupt_when_solving(monkeypatch, self.backend, after=0.5)
        with pytest.raises(SolveInterrupted) as caught:
            solve(racked, "ilp", backend=self.backend, time_limit=60)
        waited = time.monotonic() - sent["at"]
        assert waited < 10, f"{self.backend} took {waited:.1f} s to stop"
        res = caught.value.result
        assert res is not None and res.placements
        assert res.info["interrupted"] is True
        assert res.status in (Status.FEASIBLE, Status.FALLBACK), res.status
        assert "interrupted" in res.message
        assert check(racked, res) == []
        starts = [v for k, v in res.info.items() if k.startswith("start_") and k.endswith("_objective")]
        assert res.objective <= min(starts) + 1e-9
        if res.bound is not None:
            assert res.bound <= res.objective + 1e-9
        # nothing left running or lying around
        deadline = time.monotonic() + 2
        while solver_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not solver_threads()
        assert set(own_children()) <= children_before
        assert cbc_dirs() <= dirs_before

    # ------------------------------------------------------------------ backend_params
    def test_backend_params_reach_the_solver(self) -> None:
        form = round_program("paper-16x4")
        plain = self.cls().solve(form, SolveOptions())
        assert plain.status == SolverStatus.OPTIMAL
        limited = self.cls().solve(form, SolveOptions(backend_params=self.params("limiting")))
        assert limited.status != SolverStatus.OPTIMAL, limited.message  # the search was cut short
        assert_valid_solution(form, limited)
        harmless = self.cls().solve(form, SolveOptions(backend_params=self.params("harmless")))
        assert harmless.status == SolverStatus.OPTIMAL and harmless.objective is not None
        assert relative(harmless.objective, plain.objective, form.total_demand) <= AGREE

    @pytest.mark.parametrize("kind", ["unknown", "bad_value", "bad_range"])
    @pytest.mark.usefixtures("private_tmpdir")
    def test_rejected_backend_param_is_an_option_error(self, kind: str) -> None:
        params = {"pal_opt_no_such_parameter": 1} if kind == "unknown" else dict(self.params(kind))
        key = next(iter(params))
        dirs_before = cbc_dirs()
        with pytest.raises(OptionError, match=key) as err:
            self.cls().solve(round_program("gen-8x4"), SolveOptions(backend_params=params))
        assert self.backend in str(err.value)
        assert cbc_dirs() <= dirs_before  # what a refused solve had written is removed
