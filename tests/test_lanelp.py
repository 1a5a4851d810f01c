"""LP-guided GPU-type lanes (pal_opt.ilp.lanelp): counts that fit, placements on them, solve_ilp."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pal_opt.check import check
from pal_opt.generate import generate_instance, generate_typed_instance
from pal_opt.gputypes import free_per_type
from pal_opt.ilp import solve_ilp
from pal_opt.ilp.backends import SolveOptions, get_backend
from pal_opt.ilp.formulation import KIND_Z, build_formulation
from pal_opt.ilp.lanelp import (
    LP_SECONDS_PER_ENTRY,
    ROUND_AND_PACK_SECONDS,
    applies,
    estimated_seconds,
    lane_mass,
    lane_types,
    lp_lane_start,
    round_lane_counts,
)
from pal_opt.ilp.solve import prepare_round
from pal_opt.model import Cluster, GpuState, Job, RoundInstance
from pal_opt.result import Status

THROUGHPUT = {"classA": {"aws": 1.0, "rtx": 1.6, "dgx-ext": 2.4}, "classB": {"aws": 1.0, "rtx": 1.2, "dgx-ext": 1.3},
              "classC": {"aws": 1.0, "rtx": 1.1, "dgx-ext": 1.1}, "classD": {"aws": 1.0, "rtx": 1.0, "dgx-ext": 1.05}}
SPECS = ["aws:3x4,rtx:3x4", "aws:2x8,rtx:2x8,dgx-ext:2x8", "aws:4x2,rtx:2x4,dgx-ext:2x4"]


def _form(spec, seed, jobs=14, busy=0.0):
    inst = generate_typed_instance(spec, jobs, seed=seed, busy_fraction=busy, guaranteed_fraction=0.25,
                                   throughput={c: {t: v for t, v in row.items() if t in spec} for c, row in THROUGHPUT.items()})
    s = prepare_round(inst, None, "highs", "prefix", None)
    return inst, build_formulation(inst, s.admitted, factors=s.factors)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(SPECS), busy=st.sampled_from([0.0, 0.25]))
def test_rounded_counts_cover_every_job_and_fit_every_set_of_types(seed, spec, busy):
    inst, form = _form(spec, seed, busy=busy)
    if not applies(form):
        return
    mass = lane_mass(form)
    assert mass is not None
    for t, jt in enumerate(form.types):  # the LP places every job of a type, on its lanes
        assert mass[t, : len(jt.profiles)].sum() == pytest.approx(jt.count, abs=1e-6)
    counts = round_lane_counts(form, mass)
    assert counts is not None  # the LP's own split fits, so some rounding does
    cl = inst.cluster
    free = free_per_type(cl, cl.state == GpuState.FREE)
    kinds = lane_types(form)
    for t, jt in enumerate(form.types):
        assert counts[t, : len(jt.profiles)].sum() == jt.count and (counts >= 0).all()
    for u in range(cl.num_types):  # single types: what is placed there fits
        need = sum(jt.demand * counts[t, k] for t, jt in enumerate(form.types) for k, p in enumerate(jt.profiles)
                   if kinds[p] == (u,))
        assert need <= free[u]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(SPECS))
def test_the_lp_lane_start_is_a_valid_placement_on_the_rounded_lanes(seed, spec):
    inst, form = _form(spec, seed)
    if not applies(form):
        assert lp_lane_start(form) is None
        return
    placement = lp_lane_start(form)
    if placement is None:  # a mixed-type job may find its GPUs taken; then there is no start
        return
    assert set(placement) == {inst.jobs[i].id for i in form.admitted}
    assert check(inst, {"placements": {str(j): list(g) for j, g in placement.items()}, "admission": "given"}) == []
    counts = round_lane_counts(form, lane_mass(form))
    kinds = lane_types(form)
    cl = inst.cluster
    for t, jt in enumerate(form.types):  # each type's jobs lie on its lanes in the rounded numbers
        got = [tuple(np.unique(cl.type_of[cl.positions(placement[inst.jobs[i].id])]).tolist()) for i in jt.jobs]
        for k, p in enumerate(jt.profiles):
            on = sum(1 for g in got if set(g) <= set(kinds[p]))
            if len(kinds[p]) == 1:
                assert on == counts[t, k]


def test_the_backend_lp_values_give_the_same_masses_up_to_ties():
    """HiGHS's LP solution (kept by ``relaxation_bound``) is an optimal LP solution: its masses sum
    per type to the type's jobs like SciPy's, and its objective is the bound."""
    inst, form = _form("aws:2x8,rtx:2x8,dgx-ext:2x8", 3)
    h = get_backend("highs")()
    bound = h.relaxation_bound(form, SolveOptions())
    assert h.relaxation_values is not None and bound is not None
    assert form.objective(h.relaxation_values) == pytest.approx(bound, rel=1e-6, abs=1e-6)
    mass = lane_mass(form, h.relaxation_values)
    assert mass is not None
    assert mass.sum() == pytest.approx(len(form.admitted))


def test_not_without_types():
    inst = generate_instance(4, 4, 6, seed=0)
    s = prepare_round(inst, None, "highs", "prefix", None)
    form = build_formulation(inst, s.admitted, factors=s.factors)
    assert not applies(form) and lp_lane_start(form) is None


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_solve_ilp_prices_the_lp_lane_start_when_the_greedy_start_is_not_within_the_gap(backend):
    """A tight gap on a typed round: the greedy starts are not within it, so every backend prices
    the LP-lane start (from HiGHS's LP solution, whatever the backend) and the answer is
    valid and no worse than any start."""
    inst, _ = _form("aws:2x8,rtx:2x8,dgx-ext:2x8", 4, jobs=20)
    res = solve_ilp(inst, backend=backend, gap=1e-6, time_limit=20)
    assert check(inst, res) == []
    assert res.status in (Status.OPTIMAL, Status.FEASIBLE)
    starts = [v for k, v in res.info.items() if k.startswith("start_") and k.endswith("_objective")]
    assert "start_packing-lp_objective" in res.info
    assert res.objective <= min(starts) + 1e-6


def test_typed_rounds_take_the_lp_bound_from_highs_under_every_backend():
    """With GPU types the round program's LP relaxation is HiGHS's whatever the backend
    (``PROGRAM_LP_OWN_MAX_ENTRIES``): CP-SAT and CBC report HiGHS's bound, named in
    ``info["program_relaxation"]``, and it is at most the exact optimum."""
    inst, _ = _form("aws:2x8,rtx:2x8,dgx-ext:2x8", 4, jobs=20)
    exact = solve_ilp(inst, backend="highs")
    assert exact.status == Status.OPTIMAL
    got = {b: solve_ilp(inst, backend=b, gap=0.5, time_limit=20).info for b in ("highs", "cpsat", "cbc")}
    for b, info in got.items():
        assert info["program_relaxation"] == "highs", b
        assert info["relaxation_bound"] == got["highs"]["relaxation_bound"], b
        assert info["relaxation_bound"] <= exact.objective + 1e-9
    # GLOP's own bound differs in the last digits: the one reported is not GLOP's
    s = prepare_round(inst, None, "cpsat", "prefix", None)
    form = build_formulation(inst, s.admitted, factors=s.factors)
    glop = get_backend("cpsat")().relaxation_bound(form, SolveOptions())
    assert glop is not None and glop != got["cpsat"]["relaxation_bound"]
    assert glop == pytest.approx(got["cpsat"]["relaxation_bound"], rel=1e-6)


def test_untyped_small_rounds_keep_the_backends_own_lp_solver():
    inst = generate_instance(4, 4, 6, seed=0)
    for b, lp in (("highs", "HiGHS"), ("cpsat", "GLOP"), ("cbc", "CLP")):
        res = solve_ilp(inst, backend=b, gap=0.5)
        assert res.info["program_relaxation"] == b
        # the note names the LP solver that ran, not the backend that did not (diff review)
        assert res.message == f"{b} not run: the start placement is within the gap of the LP bound (solved by {lp})"


def test_every_backend_gets_the_same_lp_lane_start():
    """HiGHS's LP solution gives the LP-lane start for every backend, so its price is the same."""
    inst, _ = _form("aws:2x8,rtx:2x8,dgx-ext:2x8", 4, jobs=20)
    prices = {b: solve_ilp(inst, backend=b, gap=1e-6, time_limit=20).info.get("start_packing-lp_objective")
              for b in ("highs", "cpsat", "cbc")}
    assert prices["highs"] is not None
    assert prices["cpsat"] == prices["highs"] and prices["cbc"] == prices["highs"]


# ---------------------------------------------------------------- pinned by the eighteenth session's mutants
def _nearest_fitting(form, mass, free, kinds):
    """Every integer split per job type that fits the free GPUs of each type (every lane here is
    one type), and the least GPU-weighted distance to ``mass`` among them: by enumeration."""
    import itertools

    splits = [[c for c in itertools.product(range(jt.count + 1), repeat=len(jt.profiles)) if sum(c) == jt.count]
              for jt in form.types]
    best, where = None, []
    for combo in itertools.product(*splits):
        use = np.zeros(free.size)
        for jt, c in zip(form.types, combo, strict=True):
            for p, n in zip(jt.profiles, c, strict=True):
                use[kinds[p][0]] += n * jt.demand
        if (use > free).any():
            continue
        far = sum(jt.demand * abs(n - mass[t, k]) for t, (jt, c) in enumerate(zip(form.types, combo, strict=True))
                  for k, n in enumerate(c))
        if best is None or far < best - 1e-9:
            best, where = far, [combo]
        elif far < best + 1e-9:
            where.append(combo)
    return where


def test_rounded_counts_are_the_nearest_that_fit():
    """The rounding moves the fewest GPUs from the LP's split (each job's deviation weighted by
    its GPUs), against an enumeration of every split that fits, on 100 seeded fractional splits;
    the counts are the solver's rounded, not truncated (0.9999 is 1).  Unweighted deviations or
    ``int()`` of the solver's values give other counts."""
    inst, form = _form("aws:3x4,rtx:3x4", 1, jobs=20)
    cl = inst.cluster
    free = free_per_type(cl, cl.state == GpuState.FREE)
    kinds = lane_types(form)
    assert all(len(kinds[p]) == 1 for jt in form.types for p in jt.profiles)
    rng = np.random.default_rng(0)
    for _ in range(100):
        mass = np.zeros((len(form.types), max(len(jt.profiles) for jt in form.types)))
        for t, jt in enumerate(form.types):
            a = rng.uniform(0, jt.count) if len(jt.profiles) > 1 else jt.count
            mass[t, : len(jt.profiles)] = [a, jt.count - a][: len(jt.profiles)]
        got = round_lane_counts(form, mass)
        assert got is not None
        combo = tuple(tuple(int(got[t, k]) for k in range(len(jt.profiles))) for t, jt in enumerate(form.types))
        assert combo in _nearest_fitting(form, mass, free, kinds), mass.round(3).tolist()


def test_a_lane_is_the_gpu_types_its_profile_has_a_level_on():
    """Without jobs that mix types each lane is one GPU type, a job type's lanes each another
    (a profile's level ``num_levels`` means "not on this type": counted in, every lane was every type)."""
    inst, form = _form("aws:3x4,rtx:3x4", 1, jobs=20)
    kinds = lane_types(form)
    for jt in form.types:
        lanes = [kinds[p] for p in jt.profiles]
        assert all(len(k) == 1 for k in lanes) and len(set(lanes)) == len(lanes), lanes
    assert {kinds[p] for p in kinds} == {(0,), (1,)}


def test_a_round_on_one_gpu_type_has_no_lane_to_choose():
    inst, form = _form("aws:4x4", 0, jobs=20)
    assert all(len(jt.profiles) == 1 for jt in form.types)
    assert not applies(form) and lp_lane_start(form) is None


def test_a_round_that_charges_moves_is_not_for_the_lp_lanes():
    """Running jobs whose move is charged have keep and drop columns: the LP-lane start, which
    places every admitted job by slot columns, does not apply."""
    spec = "aws:2x8,rtx:2x8,dgx-ext:2x8"
    inst = generate_typed_instance(spec, 14, seed=2, running_fraction=0.4, restart_cost=30.0,
                                   throughput={c: {t: v for t, v in row.items() if t in spec} for c, row in THROUGHPUT.items()})
    s = prepare_round(inst, None, "highs", "prefix", None)
    form = build_formulation(inst, s.admitted, factors=s.factors)
    assert any(len(jt.profiles) > 1 for jt in form.types)
    assert (form.var_kind > KIND_Z).any()
    assert not applies(form) and lp_lane_start(form) is None


def test_the_time_asked_counts_scipys_lp_only_when_no_values_are_given():
    _, form = _form("aws:3x4,rtx:3x4", 1)
    assert estimated_seconds(form, True) == ROUND_AND_PACK_SECONDS
    assert estimated_seconds(form, False) == ROUND_AND_PACK_SECONDS + LP_SECONDS_PER_ENTRY * form.A.nnz


def test_lp_values_of_another_length_give_no_mass():
    _, form = _form("aws:3x4,rtx:3x4", 1)
    assert lane_mass(form, np.zeros(form.num_vars)) is not None
    assert lane_mass(form, np.zeros(form.num_vars + 1)) is None
    assert lane_mass(form, np.zeros(form.num_vars - 1)) is None


def test_a_types_jobs_take_its_lanes_in_queue_order():
    """The first ``counts[t, 0]`` jobs of a type (queue order) go to its first lane, the next to
    the second...: seed 1's three one-GPU jobs of one class are split 2 + 1."""
    inst, form = _form("aws:3x4,rtx:3x4", 1, jobs=20)
    placement = lp_lane_start(form)
    assert placement is not None
    counts = round_lane_counts(form, lane_mass(form))
    kinds = lane_types(form)
    cl = inst.cluster
    split = False
    for t, jt in enumerate(form.types):
        want = [kinds[p] for k, p in enumerate(jt.profiles) for _ in range(int(counts[t, k]))]
        got = [tuple(np.unique(cl.type_of[cl.positions(placement[inst.jobs[i].id])]).tolist()) for i in jt.jobs]
        assert got == want, (t, got, want)
        split |= len(set(want)) > 1
    assert split


def _three_types():
    return Cluster.from_arrays(range(12), [0] * 4 + [1] * 4 + [2] * 4, {"classA": [1.0] * 12},
                               gpu_types="aaaabbbbcccc")


def test_a_lane_of_two_types_gets_the_hall_row_of_that_pair():
    """A job that mixes types ``a`` and ``b`` has one lane of both; its 6 GPUs leave 2 of those 8
    for the four one-GPU jobs, so a rounding of their LP split 2 / 2 / 0 moves two of them to
    ``c`` (with rows only for single types and all three, 2 / 2 / 0 stood and overfilled a + b)."""
    jobs = [Job(1, 6, "classA", allowed_types=("a", "b"), mix_types=True)] + [Job(i, 1, "classA") for i in range(2, 6)]
    inst = RoundInstance(_three_types(), tuple(jobs))
    form = build_formulation(inst, list(range(5)))
    kinds = lane_types(form)
    assert sorted(tuple(kinds[p] for p in jt.profiles) for jt in form.types) == [((0,), (1,), (2,)), ((0, 1),)]
    mix = next(t for t, jt in enumerate(form.types) if jt.demand == 6)
    mass = np.zeros((2, 3))
    mass[mix, 0] = 1.0
    mass[1 - mix] = [2.0, 2.0, 0.0]
    counts = round_lane_counts(form, mass)
    assert counts is not None
    assert counts[mix].tolist() == [1, 0, 0]
    assert counts[1 - mix, 0] + counts[1 - mix, 1] == 2 and counts[1 - mix, 2] == 2, counts


def test_a_lane_of_every_type_gets_the_hall_row_of_all_of_them():
    """A job that mixes all three types lies only inside the set of all of them: 6 GPUs of it and
    seven one-GPU jobs (one an optional running job, which lets the round be built) need 13 of
    the 12 free GPUs, so no counts fit (without the row of all types, 3 / 2 / 2 did)."""
    jobs = ([Job(1, 6, "classA", mix_types=True)] + [Job(i, 1, "classA") for i in range(2, 8)]
            + [Job(9, 1, "classA", placement=(0,))])
    inst = RoundInstance(_three_types(), tuple(jobs))
    form = build_formulation(inst, list(range(8)), optional=[7])
    kinds = lane_types(form)
    assert sorted(tuple(kinds[p] for p in jt.profiles) for jt in form.types) == [((0,), (1,), (2,)), ((0, 1, 2),)]
    mix = next(t for t, jt in enumerate(form.types) if jt.demand == 6)
    mass = np.zeros((2, 3))
    mass[mix, 0] = 1.0
    mass[1 - mix] = [3.0, 2.0, 2.0]
    assert round_lane_counts(form, mass) is None
