"""The Sia round program (pal_opt.hetero.round) and placer (pal_opt.hetero.placer).

The program is checked against brute force and a dynamic program on tiny rounds, on every
installed backend; the placer against hand-worked cases of the artifact's rules and properties.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pal_opt.errors import OptionError
from pal_opt.hetero import bounds
from pal_opt.hetero.bounds import (
    core_program,
    lagrangian,
    lagrangian_bound,
    layout,
    relax,
    repair,
    round_relaxation,
    solve_large_round,
)
from pal_opt.hetero.configs import PAPER_CLUSTER, GpuType, enumerate_configs
from pal_opt.hetero.placer import fit_shape, place_type, placement_shape
from pal_opt.hetero.round import (
    OBJECTIVE_SCALE,
    RoundInput,
    build_round_program,
    round_objective,
    solve_round,
    solve_round_dp,
    synthetic_round,
)
from pal_opt.hetero.roundprogram import RoundProgram
from pal_opt.ilp.backends import available_backends

BACKENDS = available_backends()
SMALL = (GpuType("t4", 2, 4), GpuType("a100", 1, 8))


def _costs(rng: np.random.Generator, jobs: int, k: int, floor_share: float = 0.3) -> np.ndarray:
    """Two-decimal costs in float32 as the policy makes them: valid entries in (0, 1.2], floor 100."""
    a = np.round(rng.uniform(0.15, 1.2, (jobs, k)), 2)
    a[rng.random((jobs, k)) < floor_share] = 100.0
    return a.astype(np.float32)


def _feasible_pins(rng: np.random.Generator, inp_costs: np.ndarray, cs, share: float = 0.3) -> np.ndarray:
    """Pins that fit together (a random subset of jobs, greedily)."""
    left = np.array([t.total_gpus for t in cs.types])
    pins = np.full(inp_costs.shape[0], -1)
    for j in range(inp_costs.shape[0]):
        if rng.random() < share:
            k = int(rng.integers(len(cs)))
            t = cs.type_index[k]
            if cs.num_gpus[k] <= left[t]:
                left[t] -= cs.num_gpus[k]
                pins[j] = k
    return pins


def _brute_force(inp: RoundInput) -> float:
    """Smallest objective over every assignment (tiny rounds only)."""
    cs = inp.configs
    caps = np.array([t.total_gpus for t in cs.types])
    pa, pr = inp.pins()
    choices_a = [[p] if p >= 0 else [-1, *range(len(cs))] for p in pa]
    choices_r = [[p] if p >= 0 else [-1, *range(len(cs.types))] for p in pr]
    best = np.inf
    for a in itertools.product(*choices_a):
        used = np.zeros(len(caps), dtype=int)
        for k in a:
            if k >= 0:
                used[cs.type_index[k]] += cs.num_gpus[k]
        for r in itertools.product(*choices_r):
            u = used.copy()
            for i, c in enumerate(r):
                if c >= 0:
                    u[c] += inp.rigid_gpus[i]
            if np.all(u <= caps):
                best = min(best, round_objective(inp, a, r))
    return best


def test_program_shape_and_integer_coefficients() -> None:
    cs = enumerate_configs(PAPER_CLUSTER)
    costs = np.full((2, len(cs)), 100.0, dtype=np.float32)
    costs[0, [0, 2, 8]] = [1.0, np.float32(0.71), 0.5]
    costs[1, [0, 1]] = [1.1, 0.99]
    prog = build_round_program(RoundInput(cs, costs))
    assert np.all(prog.c == np.rint(prog.c))  # CP-SAT is exact on it
    assert prog.obj_offset == 2 * 110
    # job 0: aws 1 GPU (-10), aws 4 GPUs (-39), dgx 1 GPU (-60); job 1: only aws 2 GPUs (-11)
    assert sorted(zip(prog.col_job.tolist(), prog.c.tolist(), strict=True)) == [(0, -60.0), (0, -39.0), (0, -10.0), (1, -11.0)]
    assert prog.A.shape == (2 + 3, 4)
    full = build_round_program(RoundInput(cs, costs), prune=False)
    assert full.num_vars == 2 * len(cs)


def test_dominated_columns_are_left_out() -> None:
    cs = enumerate_configs(PAPER_CLUSTER)
    costs = np.full((1, len(cs)), 100.0, dtype=np.float32)
    costs[0, :4] = [0.8, 0.8, 0.5, 0.6]  # aws 2 GPUs ties 1 GPU, aws 8 GPUs loses to 4: both dominated
    prog = build_round_program(RoundInput(cs, costs))
    assert sorted(prog.col_choice.tolist()) == [0, 2]


def test_pinned_job_keeps_its_configuration_even_when_costly() -> None:
    cs = enumerate_configs(PAPER_CLUSTER)
    costs = np.full((2, len(cs)), 100.0, dtype=np.float32)
    costs[:, 0] = 0.5
    inp = RoundInput(cs, costs, pinned_adaptive=np.array([3, -1]))  # aws 8 GPUs, cost 100
    prog = build_round_program(inp)
    assert prog.num_vars == 2 and prog.col_lo.tolist().count(1.0) == 1
    d = solve_round(inp)
    assert d.adaptive.tolist() == [3, 0]
    assert d.objective == pytest.approx(100 + 0.5)
    assert solve_round_dp(inp).objective == pytest.approx(d.objective)


def test_nothing_allocated_when_no_entry_beats_lambda_n() -> None:
    cs = enumerate_configs(PAPER_CLUSTER)
    costs = np.full((3, len(cs)), 1.1, dtype=np.float32)
    d = solve_round(RoundInput(cs, costs))
    assert d.adaptive.tolist() == [-1, -1, -1]
    assert d.objective == pytest.approx(3.3)


@pytest.mark.parametrize("seed", range(6))
def test_brute_force_dynamic_program_and_every_backend_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cs = enumerate_configs(SMALL)
    jobs = int(rng.integers(1, 4))
    costs = _costs(rng, jobs, len(cs))
    rigid = int(rng.integers(0, 2))
    rigid_costs = np.round(rng.uniform(0.2, 1.2, (rigid, 2)), 2).astype(np.float32)
    inp = RoundInput(
        cs, costs, rigid_costs=rigid_costs, rigid_gpus=rng.integers(1, 6, rigid),
        pinned_adaptive=_feasible_pins(rng, costs, cs),
    )
    expect = _brute_force(inp)
    assert solve_round_dp(inp).objective == pytest.approx(expect, abs=1e-9)
    assert solve_round_dp(inp, prune=False).objective == pytest.approx(expect, abs=1e-9)
    for backend in BACKENDS:
        d = solve_round(inp, backend=backend)
        assert d.objective == pytest.approx(expect, abs=1e-9), backend
        assert round_objective(inp, d.adaptive, d.rigid) == pytest.approx(expect, abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_paper_cluster_rounds_match_the_dynamic_program(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    cs = enumerate_configs(PAPER_CLUSTER)
    costs = _costs(rng, 25, len(cs))
    inp = RoundInput(cs, costs, pinned_adaptive=_feasible_pins(rng, costs, cs, 0.2))
    expect = solve_round_dp(inp).objective
    for backend in BACKENDS:
        d = solve_round(inp, backend=backend)
        assert d.objective == pytest.approx(expect, abs=1e-9), backend
        used = np.zeros(3, dtype=int)
        for k in d.adaptive[d.adaptive >= 0]:
            used[cs.type_index[k]] += cs.num_gpus[k]
        assert np.all(used <= [t.total_gpus for t in cs.types])


def test_objective_scale_is_hundredths() -> None:
    assert OBJECTIVE_SCALE == 100


def test_bad_round_input_is_an_option_error() -> None:
    cs = enumerate_configs(PAPER_CLUSTER)
    with pytest.raises(OptionError, match="columns"):
        RoundInput(cs, np.zeros((1, 3)))
    with pytest.raises(OptionError, match="pinned_adaptive"):
        RoundInput(cs, np.zeros((1, len(cs))), pinned_adaptive=np.array([99]))
    with pytest.raises(OptionError, match="lambda_n"):
        RoundInput(cs, np.zeros((1, len(cs))), lambda_n=float("nan"))
    big = enumerate_configs((GpuType("a", 64, 8), GpuType("b", 64, 8), GpuType("c", 64, 8)))
    with pytest.raises(OptionError, match="states"):
        solve_round_dp(RoundInput(big, np.ones((1, len(big)))))


@pytest.fixture(scope="module")
def round_2048() -> tuple[RoundInput, float]:
    """A Sia-style round on 2,048 GPUs of three types, and its optimum from one HiGHS MIP."""
    cluster = (GpuType("aws", 192, 4, 16), GpuType("dgx-ext", 64, 8, 2), GpuType("rtx", 96, 8, 3))
    inp = synthetic_round(cluster, 300, seed=300)  # a case the bounds alone do not settle
    ref = solve_round(inp, backend="highs", decompose=False)
    assert ref.status == "optimal"
    return inp, ref.objective


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_round_at_2048_gpus_solves_to_optimality(backend: str, round_2048: tuple[RoundInput, float]) -> None:
    inp, expect = round_2048
    t0 = time.perf_counter()
    d = solve_round(inp, backend=backend)
    took = time.perf_counter() - t0
    assert d.status == "optimal" and d.backend == backend  # the core went to the backend
    assert d.objective == pytest.approx(expect, abs=1e-9)
    assert took < 30  # the ≤ 1 s figure is measured by benchmarks/sia_fidelity.py


# -- placer -------------------------------------------------------------------------------------
def test_placer_follows_the_artifacts_pointer() -> None:
    # 3 nodes x 4: 8 GPUs take nodes 0, 1 whole (pointer -> 2); 2 GPUs from node 2 (pointer -> 0);
    # 1 GPU: nodes 0 and 1 are full, node 2 has 2 free.
    assert place_type(3, 4, [2, 8, 1]) == [[2, 2], [0, 0, 0, 0, 1, 1, 1, 1], [2]]
    # ties keep the given order; the last job is split over the fragments
    assert place_type(2, 4, [3, 3, 2]) == [[0, 0, 0], [1, 1, 1], [0, 1]]
    # a whole-node job skips a partly used node
    assert place_type(3, 4, [4, 4, 1, 1]) == [[0, 0, 0, 0], [1, 1, 1, 1], [2], [2]]
    assert place_type(2, 8, [0, 16]) == [[], [0] * 8 + [1] * 8]


def test_shapes_and_the_node_limit() -> None:
    assert placement_shape([1, 1, 0, 0]) == (2, 2)
    assert placement_shape([0, 1, 1, 1]) == (1, 3)
    assert fit_shape((1, 1, 1), 2) == (2, 1)
    assert fit_shape((8, 8), 2) == (8, 8)


def test_placer_rejects_too_many_gpus() -> None:
    with pytest.raises(OptionError, match="demanded"):
        place_type(2, 4, [4, 4, 1])
    with pytest.raises(OptionError, match=r"demands\[0\] must be an integer >= 0, got -1"):
        place_type(2, 4, [-1])


@st.composite
def _type_and_demands(draw: st.DrawFn) -> tuple[int, int, list[int]]:
    nodes = draw(st.integers(1, 6))
    per = draw(st.sampled_from([1, 2, 4, 8]))
    left = nodes * per
    demands = []
    for _ in range(draw(st.integers(0, 8))):
        if left == 0:
            break
        d = draw(st.integers(0, left))
        demands.append(d)
        left -= d
    return nodes, per, demands


@settings(max_examples=200, deadline=None)
@given(_type_and_demands())
def test_placer_properties(case: tuple[int, int, list[int]]) -> None:
    nodes, per, demands = case
    out = place_type(nodes, per, demands)
    assert [len(ids) for ids in out] == demands  # every job gets exactly its GPUs
    used = np.bincount([i for ids in out for i in ids], minlength=nodes)
    assert np.all(used <= per)  # no node over capacity
    assert out == place_type(nodes, per, demands)  # deterministic
    # whole-node jobs placed before any smaller job land on whole nodes
    for ids in out:
        if ids and len(ids) % per == 0 and len(ids) == max(demands):
            assert all(c == per for c in np.bincount(ids)[np.unique(ids)])


# -- large rounds: bounds, repairs, core -------------------------------------------------------
# (seed 15: the bounds' repaired solution is one unit, 0.01, above the optimum, which only a
# core search down to the incumbent less one unit finds)
@pytest.mark.parametrize("seed", [*range(12), 15])
def test_decomposed_solve_matches_the_dynamic_program(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    cluster = (GpuType("a", 4, 4, 16), GpuType("b", 2, 8, 2), GpuType("c", 3, 8, 3))
    base = synthetic_round(cluster, int(rng.integers(5, 50)), seed=seed)
    cs = base.configs
    inp = RoundInput(cs, base.adaptive_costs, pinned_adaptive=_feasible_pins(rng, base.adaptive_costs, cs, 0.2))
    expect = solve_round_dp(inp).objective
    got = solve_round(inp, decompose=True)
    assert got.status == "optimal" and got.objective == pytest.approx(expect, abs=1e-9)
    assert round_objective(inp, got.adaptive) == pytest.approx(expect, abs=1e-9)
    prog = build_round_program(inp)
    rel = relax(prog)
    assert rel is not None and rel.bound <= 100 * expect + 1e-6
    lay = layout(prog)
    for t in range(3):  # every Lagrangian knapsack bound is a lower bound, at least the LP's
        lb = lagrangian_bound(prog, lay, rel.prices, t)
        assert rel.bound - 1e-6 <= lb <= 100 * expect + 1e-6
    fixed = repair(prog, lay, np.zeros(prog.num_vars) + (prog.col_lo > 0.5))
    assert np.all(prog.A @ fixed <= prog.row_hi + 1e-9)


def test_core_program_keeps_every_better_solution() -> None:
    cluster = (GpuType("a", 4, 4, 16), GpuType("b", 2, 8, 2), GpuType("c", 3, 8, 3))
    inp = synthetic_round(cluster, 30, seed=7)
    prog = build_round_program(inp)
    rel = relax(prog)
    assert rel is not None
    opt = 100 * solve_round_dp(inp).objective
    core, keep = core_program(prog, rel, opt)  # the optimum itself must stay reachable
    d = solve_round(inp, decompose=False)
    full_cols = np.flatnonzero([(j, k) in {(j2, k2) for j2, k2 in enumerate(d.adaptive) if k2 >= 0}
                                for j, k in zip(prog.col_job.tolist(), prog.col_choice.tolist(), strict=True)])
    assert keep[full_cols].all()
    x = np.zeros(core.num_vars)
    x[np.searchsorted(np.flatnonzero(keep), full_cols)] = 1
    assert np.all(core.A @ x <= core.row_hi + 1e-9) and np.all(core.A @ x >= core.row_lo - 1e-9)
    assert np.all(x >= core.col_lo)


def test_a_backend_that_fails_is_followed_by_the_next(caplog: pytest.LogCaptureFixture) -> None:
    """A backend that stops with neither a solution nor a proof of infeasibility (HiGHS 1.14's
    "Solve error" on some rounds with variability) hands the round to the next installed backend."""
    from pal_opt.ilp.backends import register_backend, unregister_backend
    from pal_opt.ilp.backends.base import BackendSolution, SolverStatus
    from pal_opt.ilp.backends.highs import HighsBackend

    class Broken(HighsBackend):
        name = "broken-highs"

        def solve(self, program, options, start=None):  # type: ignore[no-untyped-def]
            return BackendSolution(status=SolverStatus.NO_SOLUTION, values=None, objective=None, bound=None,
                                   seconds=0.0, message="Solve error")

    rng = np.random.default_rng(7)
    cs = enumerate_configs(SMALL)
    costs = _costs(rng, 3, len(cs))
    inp = RoundInput(cs, costs)
    register_backend(Broken)
    try:
        with caplog.at_level("WARNING", logger="pal_opt.hetero.round"):
            d = solve_round(inp, backend="broken-highs", decompose=False)
        assert d.backend != "broken-highs"
        assert d.objective == pytest.approx(solve_round_dp(inp).objective, abs=1e-9)
        assert "broken-highs found no solution (no-solution: Solve error)" in caplog.text
    finally:
        unregister_backend("broken-highs")


def _two_by_two() -> RoundProgram:
    """Two jobs on 2 GPUs of type a and 2 of b.  Columns (coefficient, type, GPUs): job 0:
    0 (-60, a, 1), 1 (-70, a, 2), 2 (-80, b, 1), 3 (-90, b, 2); job 1: 4 (-50, a, 1),
    5 (-60, a, 2), 6 (-80, b, 1)."""
    cs = enumerate_configs((GpuType("a", 1, 2), GpuType("b", 1, 2)))
    prog = build_round_program(RoundInput(cs, np.array([[0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.3, 1.1]], dtype=np.float32)))
    assert prog.c.tolist() == [-60, -70, -80, -90, -50, -60, -80] and prog.col_gpus.tolist() == [1, 2, 1, 2, 1, 2, 1]
    return prog


def _at(prog: RoundProgram, *cols: int) -> list[float]:
    out = np.zeros(prog.num_vars)
    out[list(cols)] = 1.0
    return out.tolist()


def test_rounding_keeps_whole_columns_and_tries_every_split_combination() -> None:
    """A job at 0.6 is split, not kept: job 1 whole on column 4 leaves one a GPU, and job 0's
    cheapest fitting column is 3 (both b GPUs, filling the type exactly); with job 1 on column 6
    job 0's best is column 2 (the last b GPU), not column 1."""
    prog = _two_by_two()
    x = np.zeros(prog.num_vars)
    x[[4, 1, 3]] = 1.0, 0.6, 0.4
    assert round_relaxation(prog, x).tolist() == _at(prog, 3, 4)
    x = np.zeros(prog.num_vars)
    x[[6, 1, 2]] = 1.0, 0.5, 0.5
    assert round_relaxation(prog, x).tolist() == _at(prog, 2, 6)


def test_rounding_job_by_job_takes_each_jobs_cheapest_fitting_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the combination limit, jobs in order of their largest share: job 1 (0.7) takes its
    cheapest column 6, then job 0 its cheapest that fits, 2 (column 3 needs two b GPUs)."""
    prog = _two_by_two()
    monkeypatch.setattr(bounds, "MAX_ROUNDING_COMBINATIONS", 0)
    x = np.zeros(prog.num_vars)
    x[[0, 1, 2, 3, 4, 5]] = 0.5, 0.5, 0.2, 0.2, 0.7, 0.3
    assert round_relaxation(prog, x).tolist() == _at(prog, 2, 6)


def test_a_large_rounds_bound_is_the_lp_bound_rounded_up() -> None:
    """The objective is in whole hundredths, so the bound is ⌈z_LP⌉ (60 here, the optimum:
    columns 2 and 6, -160 + 220), never below z_LP."""
    prog = _two_by_two()
    rel = relax(prog)
    assert rel is not None and rel.bound == pytest.approx(60.0)
    large = solve_large_round(prog, rel)
    assert large.proven and large.bound == 60.0 and large.values.tolist() == _at(prog, 2, 6)


def test_a_lagrangian_choice_leaves_out_a_job_whose_priced_columns_gain_nothing() -> None:
    """One a GPU, two b GPUs priced at 80 each.  Job 0: columns 0 (-60, a), 1 (-80, b, 1 GPU),
    2 (-90, b, 2); job 1: 3 (-50, a), 4 (-80, b, 1).  Job 0 takes the a GPU (-60); job 1's best
    priced column costs -80 + 80 = 0, no better than nothing, so it is left out.  Bound:
    -60 + 220 - 80·2 = 0."""
    cs = enumerate_configs((GpuType("a", 1, 1), GpuType("b", 1, 2)))
    prog = build_round_program(RoundInput(cs, np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 1.1]], dtype=np.float32)))
    assert prog.c.tolist() == [-60, -80, -90, -50, -80] and prog.col_type.tolist() == [0, 1, 1, 0, 1]
    bound, choice = lagrangian(prog, layout(prog), np.array([0.0, 80.0]), 0)
    assert bound == 0.0 and choice.tolist() == [0, -1]
