"""Large rounds (issue 15): the flow-free relaxation is a valid bound, the packing greedy without
the program makes the same placement, and rounds above the threshold take that path."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pytest

from pal_opt import check, solve
from pal_opt.binning import binned_factors
from pal_opt.cost import evaluate
from pal_opt.deadline import Deadline
from pal_opt.errors import BackendUnavailableError, OptionError, TimeLimitReached
from pal_opt.generate import generate_instance
from pal_opt.ilp.backends import (
    BACKENDS,
    Backend,
    SolveOptions,
    get_backend,
    register_backend,
    unregister_backend,
)
from pal_opt.ilp.backends.cpsat import CpSatBackend
from pal_opt.ilp.backends.highs import HighsBackend
from pal_opt.ilp.formulation import build_formulation
from pal_opt.ilp.heuristic import packing_greedy
from pal_opt.ilp.packing import fast_packing
from pal_opt.ilp.program import Program
from pal_opt.ilp.relaxation import applies as relaxation_applies
from pal_opt.ilp.relaxation import build_relaxation
from pal_opt.ilp.scale import (
    COUPLED_MAX_GPUS,
    LARGE_ROUND_GPUS,
    RELAXATION_SECONDS_PER_GPU,
    BackgroundPacking,
    flow_free_bound,
    is_large_round,
    relaxation_solver,
)
from pal_opt.ilp.solve import prepare_round
from pal_opt.ilp.warm import WarmStart

pytest.importorskip("highspy")

# (nodes, GPUs per node, jobs, racks, busy fraction, seed)
SMALL = [
    (8, 4, 20, 0, 0.0, 0),
    (16, 4, 40, 0, 0.0, 1),
    (12, 8, 40, 0, 0.2, 2),
    (16, 4, 40, 4, 0.0, 3),
    (16, 8, 45, 4, 0.1, 4),
    (24, 4, 30, 0, 0.3, 5),
]


def _round(nodes, per, jobs, racks, busy, seed):  # type: ignore[no-untyped-def]
    return generate_instance(nodes, per, jobs, racks=racks, busy_fraction=busy, seed=seed)


def _lp(program: Program) -> float:
    bound = get_backend("highs")().relaxation_bound(program, SolveOptions())
    assert bound is not None
    return bound


@pytest.mark.parametrize("couple", [True, False])
@pytest.mark.parametrize("case", SMALL)
def test_flow_free_bound_is_at_most_the_proven_optimum(case, couple):  # type: ignore[no-untyped-def]
    inst = _round(*case)
    setup = prepare_round(inst, None, "highs", None, None)
    best = solve(inst, "ilp", backend="highs")
    assert best.status.value == "optimal"
    relax = build_relaxation(inst, setup.admitted, setup.factors, couple=couple)
    assert relax is not None
    bound = _lp(relax.program)
    assert bound <= best.objective + 1e-6 * max(1.0, abs(best.objective))
    # the optimal placement, fixed in the slot columns, is feasible and costs what it costs
    v = relax.slot_values(inst, best.placements, setup.factors)
    cols = relax.slots[:, 0]
    lo, hi = relax.program.col_lo.copy(), relax.program.col_hi.copy()
    lo[cols], hi[cols] = v[cols], v[cols]
    p = relax.program
    fixed = Program.from_arrays(
        c=p.c,
        A=p.A,
        row_lo=p.row_lo,
        row_hi=p.row_hi,
        col_lo=lo,
        col_hi=hi,
        integrality=p.integrality,
        obj_offset=p.obj_offset,
    )
    assert _lp(fixed) == pytest.approx(best.objective, abs=1e-6)


def test_coupling_tightens_the_bound() -> None:
    inst = _round(64, 8, 150, 0, 0.0, 7)
    setup = prepare_round(inst, None, "highs", None, None)
    loose = _lp(build_relaxation(inst, setup.admitted, setup.factors, couple=False).program)  # type: ignore[union-attr]
    tight = _lp(build_relaxation(inst, setup.admitted, setup.factors, couple=True).program)  # type: ignore[union-attr]
    assert loose <= tight + 1e-9
    form = build_formulation(inst, setup.admitted, factors=setup.factors)
    exact_lp = _lp(form)
    # a relaxation of the program: at most the program's own LP bound, and close to it
    assert tight <= exact_lp + 1e-6
    assert np.expm1((exact_lp - tight) / setup.demand) < 0.005


@pytest.mark.parametrize("case", [c for c in SMALL if c[3] == 0] + [(256, 8, 600, 0, 0.1, 8)])
def test_fast_packing_places_as_the_packing_greedy(case):  # type: ignore[no-untyped-def]
    inst = _round(*case)
    setup = prepare_round(inst, None, "highs", None, None)
    form = build_formulation(inst, setup.admitted, factors=setup.factors)
    assert fast_packing(inst, setup.admitted, setup.factors) == packing_greedy(form)


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_large_rounds_take_the_flow_free_path(backend: str) -> None:
    """Each backend bounds the flow-free relaxation with its own LP solver (HiGHS, GLOP, CLP)."""
    if not BACKENDS[backend].is_available():
        pytest.skip(f"{backend} not installed")
    inst = generate_instance(1024, 8, 2376, seed=0)
    assert inst.free_gpus > LARGE_ROUND_GPUS
    setup = prepare_round(inst, None, "highs", None, None)
    assert is_large_round(inst, setup.admitted)
    res = solve(inst, "ilp", backend=backend, gap=0.01)
    assert res.info["relaxation"] == f"flow-free ({backend})"
    assert check(inst, res) == []
    assert res.bound is not None and res.bound <= res.objective
    assert res.gap is not None and res.gap <= 0.01
    assert res.objective == pytest.approx(evaluate(inst, res.placements, setup.factors).cost)


def test_cpsat_hands_large_flow_free_lps_to_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    """GLOP is slow on the largest flow-free LPs: above CP-SAT's ``relaxation_max_entries`` HiGHS
    solves them, and the bound is HiGHS's."""
    if not BACKENDS["cpsat"].is_available():
        pytest.skip("cpsat not installed")
    monkeypatch.setattr(BACKENDS["cpsat"], "relaxation_max_entries", 1000)
    inst = generate_instance(1024, 8, 2376, seed=0)
    res = solve(inst, "ilp", backend="cpsat", gap=0.01)
    assert res.info["relaxation"] == "flow-free (highs)"
    assert res.gap is not None and res.gap <= 0.01 and check(inst, res) == []


def test_small_rounds_keep_the_program_path() -> None:
    inst = generate_instance(256, 8, 600, seed=0)
    setup = prepare_round(inst, None, "highs", None, None)
    assert not is_large_round(inst, setup.admitted)
    assert is_large_round(inst, setup.admitted, threshold=1024)
    res = solve(inst, "ilp", backend="highs", gap=0.01)
    assert "relaxation" not in res.info


def test_relaxation_does_not_apply_with_charged_moves() -> None:
    inst = generate_instance(16, 4, 30, seed=3, running_fraction=0.5, restart_cost=30.0)
    setup = prepare_round(inst, None, "highs", None, None)
    if not any(inst.jobs[i].placement is not None for i in setup.admitted):  # pragma: no cover
        pytest.skip("no running admitted job")
    assert build_relaxation(inst, setup.admitted, setup.factors) is None
    assert not is_large_round(inst, setup.admitted, threshold=0)


# --- second mutation audit of scale.py (eighteenth session) -------------------------------------


def test_a_round_is_large_only_above_the_threshold_and_flat() -> None:
    """More than ``threshold`` free GPUs, not as many; a racked cluster (where the fast packing is
    not defined) is never large, though the relaxation covers it."""
    inst = _round(8, 4, 20, 0, 0.0, 0)
    adm = prepare_round(inst, None, None, None, None).admitted
    assert is_large_round(inst, adm, threshold=inst.free_gpus - 1)
    assert not is_large_round(inst, adm, threshold=inst.free_gpus)
    racked = _round(16, 4, 40, 4, 0.0, 3)
    assert racked.cluster.racked
    adm = prepare_round(racked, None, None, None, None).admitted
    assert relaxation_applies(racked, adm)
    assert not is_large_round(racked, adm, threshold=0)


def test_the_relaxation_solver_is_the_backends_own_up_to_its_size_else_highs() -> None:
    cpsat = get_backend("cpsat")
    top = cpsat.relaxation_max_entries
    assert top is not None
    assert relaxation_solver(cpsat, top).name == "cpsat"
    assert relaxation_solver(cpsat, top + 1).name == "highs"
    assert relaxation_solver(cpsat, 0, prefer_highs=True).name == "highs"
    assert relaxation_solver(get_backend("cbc"), 10**9).name == "cbc"  # no size limit of its own


def test_the_flow_free_bound_refuses_to_start_past_its_deadline() -> None:
    """The deadline is asked for the relaxation's estimated build time (the error's ``need``), so
    that a build that does not fit is skipped: seen without timing anything, on a passed deadline."""
    inst = _round(8, 4, 20, 0, 0.0, 0)
    setup = prepare_round(inst, None, None, None, None)
    late = SolveOptions(deadline=time.monotonic() - 1.0)
    with pytest.raises(TimeLimitReached, match="building the flow-free relaxation") as stop:
        flow_free_bound(inst, setup.admitted, setup.factors, get_backend("highs"), late)
    assert stop.value.need == pytest.approx(RELAXATION_SECONDS_PER_GPU * inst.free_gpus)
    assert stop.value.need > 0


def test_background_packing_hands_its_error_to_the_waiting_thread_and_heeds_cancel() -> None:
    inst = _round(8, 4, 20, 0, 0.0, 0)
    adm = prepare_round(inst, None, None, None, None).admitted
    broken = BackgroundPacking(inst, adm, {}, Deadline.after(60.0))  # no factors for any class
    with pytest.raises(KeyError):
        broken.wait()
    job = BackgroundPacking(inst, adm, binned_factors(inst.cluster), Deadline.after(60.0))
    job.wait()
    assert not job._give_up()
    job.cancel()
    assert job._give_up()


# --- the fallbacks without LP relaxations or without HiGHS, and the coupling's top --------------
# Real backends through the registry (register_backend / unregister_backend, restored after): a
# CP-SAT that declares no LP relaxation, and HiGHS "not installed" (a HighsBackend whose required
# module does not exist, so the registry's own import probe finds it unavailable), not registered,
# or registered without LP relaxations.  No solver's answer is faked: every LP here is solved.


class _CpSatWithoutLp(CpSatBackend):
    """CP-SAT solving with CP-SAT, declaring no LP relaxation of its own."""

    name: ClassVar[str] = "cpsat-without-lp-test"
    supports_relaxation: ClassVar[bool] = False


class _HighsNotInstalled(HighsBackend):
    """HiGHS needing a module that is not installed: :func:`get_backend` finds it unavailable."""

    requires: ClassVar[tuple[str, ...]] = ("pal_opt_test_no_such_module",)


class _HighsWithoutLp(HighsBackend):
    """HiGHS registered in HiGHS's place, declaring no LP relaxation."""

    supports_relaxation: ClassVar[bool] = False


@pytest.fixture
def without_lp() -> Iterator[type[Backend]]:
    register_backend(_CpSatWithoutLp)
    try:
        yield get_backend(_CpSatWithoutLp.name)
    finally:
        unregister_backend(_CpSatWithoutLp.name)


@pytest.fixture(params=["not installed", "not registered", "without LP relaxations"])
def no_highs(request: pytest.FixtureRequest) -> Iterator[None]:
    """No HiGHS that solves LP relaxations, each way there can be none."""
    if request.param == "not registered":
        unregister_backend("highs")
    else:
        register_backend(
            _HighsNotInstalled if request.param == "not installed" else _HighsWithoutLp, replace=True
        )
    try:
        if request.param == "without LP relaxations":
            assert not get_backend("highs").supports_relaxation
        else:
            with pytest.raises(BackendUnavailableError if request.param == "not installed" else OptionError):
                get_backend("highs")
        yield
    finally:
        register_backend(HighsBackend, replace=True)


def _small_round():  # type: ignore[no-untyped-def]
    inst = _round(8, 4, 20, 0, 0.0, 0)
    return inst, prepare_round(inst, None, None, None, None)


def test_a_backend_without_lp_relaxations_has_highs_solve_them(without_lp: type[Backend]) -> None:
    solver = relaxation_solver(without_lp, 0)
    assert solver is not None and solver.name == "highs"
    inst, setup = _small_round()
    bound, info = flow_free_bound(inst, setup.admitted, setup.factors, without_lp, SolveOptions())
    relax = build_relaxation(inst, setup.admitted, setup.factors)
    assert relax is not None
    assert bound == pytest.approx(_lp(relax.program)) and info["relaxation"] == "flow-free (highs)"


def test_without_highs_a_backend_solves_its_own_relaxations_however_large(no_highs: None) -> None:
    cpsat = get_backend("cpsat")
    top = cpsat.relaxation_max_entries
    assert top is not None
    for solver in (relaxation_solver(cpsat, top + 1), relaxation_solver(cpsat, 0, prefer_highs=True)):
        assert solver is not None and solver.name == "cpsat"
    inst, setup = _small_round()
    bound, info = flow_free_bound(inst, setup.admitted, setup.factors, cpsat, SolveOptions())
    assert bound is not None and info["relaxation"] == "flow-free (cpsat)"


def test_without_highs_a_backend_without_lp_relaxations_gives_no_bound(
    without_lp: type[Backend], no_highs: None
) -> None:
    assert relaxation_solver(without_lp, 0) is None
    inst, setup = _small_round()
    assert flow_free_bound(inst, setup.admitted, setup.factors, without_lp, SolveOptions()) == (
        None,
        {"relaxation": "flow-free: no backend that solves LP relaxations"},
    )


@pytest.mark.parametrize(
    ("nodes", "coupled"), [(COUPLED_MAX_GPUS // 8, True), (COUPLED_MAX_GPUS // 8 + 1, False)]
)
def test_the_relaxation_couples_profiles_up_to_coupled_max_gpus(nodes: int, coupled: bool) -> None:
    """Exactly :data:`COUPLED_MAX_GPUS` free GPUs still couple, 8 more do not: the LP has the
    coupled relaxation's rows (two profiles here: at 16,384 GPUs 43,374 rows coupled, 37,117 not), and the
    relaxation kept in the warm start is keyed by that coupling (four jobs: a 0.2 s LP)."""
    inst = generate_instance(nodes, 8, 4, seed=0)
    assert inst.free_gpus == nodes * 8
    setup = prepare_round(inst, None, None, None, None)
    warm = WarmStart()
    bound, info = flow_free_bound(
        inst, setup.admitted, setup.factors, get_backend("highs"), SolveOptions(), warm
    )
    assert bound is not None
    rows = {}
    for couple in (True, False):
        relax = build_relaxation(inst, setup.admitted, setup.factors, couple=couple)
        assert relax is not None
        rows[couple] = relax.program.num_rows
    assert rows[True] != rows[False] and info["relaxation_rows"] == rows[coupled]
    assert warm.relaxation(inst, setup.admitted, coupled) is not None
    assert warm.relaxation(inst, setup.admitted, not coupled) is None
