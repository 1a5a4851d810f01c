"""LP relaxation bounds of every backend (issue 15): HiGHS's simplex, GLOP for CP-SAT, CLP (inside
the CBC binary) for CBC.  Each is a valid bound (at most the exact optimum), agrees with the
others, honours deadlines, and stops on Ctrl-C without leaving anything behind.  Real solvers."""

from __future__ import annotations

import _thread
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from procs import cbc_dirs, own_children

from pal_opt import solve
from pal_opt.errors import TimeLimitReached
from pal_opt.generate import generate_instance
from pal_opt.ilp.backends import BACKENDS, SolveOptions
from pal_opt.ilp.backends.base import BackendInterrupted
from pal_opt.ilp.formulation import build_formulation
from pal_opt.ilp.mpswriter import lp_mps_text
from pal_opt.ilp.program import Program
from pal_opt.ilp.relaxation import applies, build_relaxation
from pal_opt.ilp.solve import prepare_round
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams
from pal_opt.result import Status

LP_BACKENDS = [name for name, cls in BACKENDS.items() if cls.supports_relaxation and cls.is_available()]
#: Relative agreement between two LP solvers' optima (their tolerances are about 1e-7).
AGREE = 1e-6
# (nodes, GPUs per node, jobs, racks, busy fraction, seed)
ROUNDS = [(8, 4, 20, 0, 0.0, 0), (12, 8, 40, 0, 0.2, 2), (16, 4, 40, 4, 0.0, 3), (16, 8, 45, 4, 0.1, 4)]

pytestmark = pytest.mark.skipif("highs" not in LP_BACKENDS, reason="HiGHS (the reference LP) is not installed")


def _bound(backend: str, program: Program, **options: float) -> float | None:
    return BACKENDS[backend]().relaxation_bound(program, SolveOptions(**options))  # type: ignore[arg-type]


def test_every_backend_solves_relaxations() -> None:
    assert set(LP_BACKENDS) >= {"highs"}
    for name in ("cpsat", "cbc"):
        assert BACKENDS[name].supports_relaxation


@pytest.mark.parametrize("case", ROUNDS, ids=lambda c: f"{c[0]}x{c[1]}-s{c[-1]}")
def test_bound_is_at_most_the_exact_optimum_and_agrees(case: tuple[int, int, int, int, float, int]) -> None:
    nodes, per, jobs, racks, busy, seed = case
    inst = generate_instance(nodes, per, jobs, racks=racks, busy_fraction=busy, seed=seed, locality_penalty=1.7)
    best = solve(inst, "ilp", backend="highs")
    assert best.status == Status.OPTIMAL
    setup = prepare_round(inst, None, "highs", None, None)
    program = build_formulation(inst, setup.admitted)
    reference = _bound("highs", program)
    assert reference is not None
    for name in LP_BACKENDS:
        bound = _bound(name, program)
        assert bound is not None, name
        assert bound <= best.objective + 1e-9, (name, bound, best.objective)
        assert bound == pytest.approx(reference, rel=AGREE, abs=AGREE), name
        assert _bound(name, program) == bound, name  # deterministic: the LP shortcut's decision too


@pytest.mark.parametrize("couple", [True, False])
def test_flow_free_relaxation_bounds_agree(couple: bool) -> None:
    inst = generate_instance(16, 8, 45, racks=0, seed=7, locality_penalty=1.7)
    setup = prepare_round(inst, None, "highs", None, None)
    relax = build_relaxation(inst, setup.admitted, setup.factors, couple=couple)
    assert relax is not None
    best = solve(inst, "ilp", backend="highs")
    reference = _bound("highs", relax.program)
    assert reference is not None
    for name in LP_BACKENDS:
        bound = _bound(name, relax.program)
        assert bound is not None and bound <= best.objective + 1e-9, name
        assert bound == pytest.approx(reference, rel=AGREE, abs=AGREE), name


@st.composite
def _programs(draw: st.DrawFn) -> Program:
    """A small feasible LP with every kind of row (=, ≤, ≥, ranged, free) and column bound (fixed,
    boxed, one-sided, free, negative); unbounded columns cost nothing, so the optimum is finite."""
    n = draw(st.integers(1, 6))
    m = draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    A = rng.integers(-3, 4, size=(m, n)) * (rng.random((m, n)) < 0.6)
    if draw(st.booleans()):
        A = A + rng.normal(size=(m, n)).round(3) * (A != 0)
    x0 = rng.uniform(-2, 2, size=n)
    kinds = rng.integers(0, 5, size=n)  # boxed, fixed, lower only, upper only, free
    col_lo = np.where(np.isin(kinds, (0, 1, 2)), np.floor(x0) - rng.integers(0, 2, size=n), -np.inf)
    col_hi = np.where(np.isin(kinds, (0, 3)), np.ceil(x0) + rng.integers(0, 2, size=n), np.inf)
    col_lo = np.where(kinds == 1, x0, col_lo)
    col_hi = np.where(kinds == 1, x0, col_hi)
    c = rng.normal(size=n) * np.isfinite(np.where(rng.normal(size=n) > 0, col_lo, col_hi))
    c = np.where(np.isfinite(col_lo) & np.isfinite(col_hi), rng.normal(size=n), c)
    c = np.where((c > 0) & np.isinf(col_lo) | (c < 0) & np.isinf(col_hi), 0.0, c)
    act = A @ x0
    rows = rng.integers(0, 5, size=m)  # =, ≤, ≥, ranged, free
    slack = rng.uniform(0, 1, size=m)
    row_lo = np.select([rows == 0, rows == 2, rows == 3], [act, act - slack, act - slack], -np.inf)
    row_hi = np.select([rows == 0, rows == 1, rows == 3], [act, act + slack, act + slack], np.inf)
    return Program.from_arrays(c=c, A=A, row_lo=row_lo, row_hi=row_hi, col_lo=col_lo, col_hi=col_hi,
                               integrality=np.zeros(n, bool), obj_offset=draw(st.floats(-10, 10)))


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_programs())
def test_lp_solvers_agree_on_random_programs(program: Program) -> None:
    """Every kind of row and bound reaches GLOP and CLP (through the MPS writer) as HiGHS sees it."""
    reference = _bound("highs", program)
    assert reference is not None  # feasible by construction, bounded objective
    for name in LP_BACKENDS:
        bound = _bound(name, program)
        assert bound is not None, (name, lp_mps_text(program))
        assert bound <= reference + AGREE * max(1.0, abs(reference))
        assert bound == pytest.approx(reference, rel=AGREE, abs=AGREE), (name, lp_mps_text(program))


def test_an_infeasible_relaxation_gives_no_bound() -> None:
    program = Program.from_arrays(c=[1.0, 1.0], A=[[1.0, 1.0]], row_lo=[3.0], row_hi=[3.0], col_lo=[0.0, 0.0],
                                  col_hi=[1.0, 1.0], integrality=[False, False])
    for name in LP_BACKENDS:
        assert _bound(name, program) is None, name


def test_mps_writer_keeps_every_digit() -> None:
    x = -0.6931471805599453
    program = Program.from_arrays(c=[x], A=[[1.0]], row_lo=[0.1], row_hi=[np.inf], col_lo=[0.0], col_hi=[2.5],
                                  integrality=[True])
    text = lp_mps_text(program)
    assert f" C0 OBJ {x!r}" in text and " G R0" in text and " RHS R0 0.1" in text and " UP BND C0 2.5" in text
    assert "MARKER" not in text  # no integrality: the relaxation


# --------------------------------------------------------------------------- deadlines and Ctrl-C
@pytest.fixture(scope="module")
def big_lp() -> Program:
    """The flow-free relaxation of a 16,384-GPU round: an LP of 96,000 columns and 47,000 rows that
    takes CLP about 7 s and GLOP about 30 s (HiGHS 13 s)."""
    inst = generate_instance(2048, 8, 4751, seed=0, locality_penalty=1.7)
    setup = prepare_round(inst, None, "highs", None, None)
    relax = build_relaxation(inst, setup.admitted, setup.factors, couple=True)
    assert relax is not None
    return relax.program


@pytest.mark.parametrize("backend", LP_BACKENDS)
def test_a_past_deadline_raises(backend: str, big_lp: Program) -> None:
    with pytest.raises(TimeLimitReached):
        _bound(backend, big_lp, deadline=time.monotonic() - 1.0)


@pytest.mark.parametrize("backend", [b for b in LP_BACKENDS if b != "highs"])
def test_a_short_deadline_gives_no_bound_in_time(backend: str, big_lp: Program, private_tmpdir) -> None:  # type: ignore[no-untyped-def]
    before = set(own_children())  # workers another test's pool may still be winding down
    deadline = time.monotonic() + 3.0
    assert _bound(backend, big_lp, deadline=deadline) is None
    assert time.monotonic() <= deadline + 0.3
    assert set(own_children()) <= before and not cbc_dirs()


@pytest.mark.usefixtures("ctrl_c")
@pytest.mark.parametrize("backend", [b for b in LP_BACKENDS if b != "highs"])
def test_ctrl_c_stops_the_lp(backend: str, big_lp: Program, private_tmpdir) -> None:  # type: ignore[no-untyped-def]
    sent: dict[str, float] = {}

    def fire() -> None:
        sent["at"] = time.monotonic()
        _thread.interrupt_main()

    before = set(own_children())  # workers another test's pool may still be winding down
    threading.Timer(1.5, fire).start()  # CBC: after the MPS file, inside CLP
    with pytest.raises(BackendInterrupted) as caught:
        _bound(backend, big_lp)
    assert caught.value.solution is None
    assert time.monotonic() - sent["at"] < 1.5
    assert set(own_children()) <= before and not cbc_dirs()


@pytest.mark.parametrize("backend", [b for b in LP_BACKENDS if b != "highs"])
def test_the_lp_shortcut_serves_every_backend(backend: str) -> None:
    """With a gap target, CP-SAT and CBC stop at the LP bound when the start placement is close
    enough (as HiGHS does), and the bound is valid."""
    inst = generate_instance(32, 8, 120, seed=1)
    r = solve(inst, "ilp", backend=backend, gap=0.05)
    assert r.info["solver_status"] == "start placement within the gap of the LP relaxation"
    assert r.gap is not None and r.gap <= 0.05
    exact = solve(inst, "ilp", backend="highs")
    assert exact.status == Status.OPTIMAL
    assert r.bound is not None and r.bound <= exact.objective + 1e-9 <= r.objective + 2e-9


_NONE = RoundParams(binning="none")
_TIGHT = {
    # one server, three factor levels, a job on all three GPUs: the level-0 and level-1 GPUs
    # are carried up to level 2 (a carry is bounded by the GPUs of its level and below, 2)
    "carry": RoundInstance(Cluster.from_arrays(range(3), [0, 0, 0], {"k": [1.0, 1.5, 2.0]}), (Job("j", 3, "k"),), _NONE),
    # a 2-GPU gang over two 1-GPU servers: only a cluster slot holds it
    "pair": RoundInstance(Cluster.from_arrays(range(2), [0, 1], {"k": [1.0, 1.0]}), (Job("j", 2, "k"),), _NONE),
    # two 2-GPU jobs, servers of 3 and 1 free GPUs: one server slot (3 // 2), not 1.5, so the
    # other job spans
    "floor": RoundInstance(Cluster.from_arrays(range(4), [0, 0, 0, 1], {"k": [1.0] * 4}),
                           (Job("a", 2, "k"), Job("b", 2, "k")), _NONE),
    # racks of 2+2 and 1+1 GPUs: the 2-GPU job on a server of rack r0 leaves r0 too small for
    # the 4-GPU job, so the optimum puts each job on its own rack (a server slot uses its rack)
    "rack": RoundInstance(Cluster.from_arrays(range(6), [0, 0, 1, 1, 2, 3], {"k": [1.0] * 6},
                                              rack_of_server={0: "r0", 1: "r0", 2: "r1", 3: "r1"}),
                          (Job("big", 4, "k", locality=(1.0, 1.5, 3.0)), Job("small", 2, "k", locality=(1.0, 1.5, 3.0))),
                          _NONE),
}


@pytest.mark.parametrize("name", sorted(_TIGHT))
def test_the_flow_free_bound_is_the_optimum_of_tiny_rounds(name: str) -> None:
    """Hand-made rounds where the relaxation is exact: its LP optimum is the proven optimum."""
    inst = _TIGHT[name]
    setup = prepare_round(inst, None, "highs", None, None)
    relax = build_relaxation(inst, setup.admitted, setup.factors)
    assert relax is not None
    exact = solve(inst, "ilp", backend="highs")
    assert exact.status == Status.OPTIMAL
    assert _bound("highs", relax.program) == pytest.approx(exact.objective, rel=1e-6, abs=1e-6)


def test_a_kept_type_may_need_every_free_gpu() -> None:
    """``also`` keeps a type whose demand is all the free GPUs (it fits), not one above."""
    inst = _TIGHT["floor"]
    setup = prepare_round(inst, None, "highs", None, None)
    loc = (1.0, 1.7, 1.7)
    relax = build_relaxation(inst, setup.admitted, setup.factors, also=[("k", 4, loc), ("k", 5, loc)])
    assert relax is not None and relax.types == (("k", 2, loc), ("k", 4, loc))


def test_counts_for_another_admitted_set_keep_the_left_out_charge() -> None:
    """A running job left out is charged; the relaxation given counts again charges it as a
    fresh build does."""
    inst = generate_instance(8, 4, 12, seed=1, running_fraction=0.5, restart_cost=1.0)
    setup = prepare_round(inst, None, "highs", None, None)
    queued = [i for i in setup.admitted if inst.jobs[i].placement is None]
    relax = build_relaxation(inst, queued, setup.factors)
    assert relax is not None and relax.program.obj_offset > 0
    again = relax.with_counts(inst, queued)
    fresh = build_relaxation(inst, queued, setup.factors, also=relax.types)
    assert again is not None and fresh is not None
    assert again.program.obj_offset == fresh.program.obj_offset > 0


def test_a_round_with_a_pipeline_has_no_flow_free_bound() -> None:
    cl = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"k": [1.0] * 4})
    pipe = RoundInstance(cl, (Job("p", 4, "k", pipeline=Pipeline((2.0, 1.0), (2, 2))),), _NONE)
    plain = RoundInstance(cl, (Job("p", 4, "k"),), _NONE)
    assert applies(plain, [0]) and not applies(pipe, [0])
    assert build_relaxation(pipe, [0], {"k": np.ones(4)}) is None
