"""The joint ``ilp`` round with GPU types (:mod:`pal_opt.hetero.jointprogram`): configuration,
variability level and GPUs in one program; exact against brute force and Sia's program.

The golden LP export ``formulations/golden/sia_joint_2x4.lp`` is refreshed with::

    /work/venv/bin/python tests/test_hetero_joint.py --update
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

from pal_opt.hetero.configs import ConfigSet, GpuType, enumerate_configs, fairness_costs
from pal_opt.hetero.gpus import Layout
from pal_opt.hetero.jointprogram import (
    JointRound,
    assign_gpus,
    build_joint_program,
    make_cells,
    order_gpus,
    solve_joint,
)
from pal_opt.hetero.levelprogram import LevelRound, build_level_program
from pal_opt.hetero.round import RoundInput, solve_program, solve_round_dp
from pal_opt.ilp.backends import available_backends
from pal_opt.ilp.lpwriter import lp_text

LAMBDA_N = 1.1
GOLDEN = Path(__file__).resolve().parents[1] / "formulations" / "golden" / "sia_joint_2x4.lp"


def _round(cs: ConfigSet, goodput: np.ndarray, job_class: list[int], factors: np.ndarray, *,
           pinned: dict[int, tuple[int, tuple[int, ...]]] | None = None) -> tuple[JointRound, LevelRound]:
    """A joint round on ``cs``'s cluster: ``factors`` (classes, GPUs) binned factors, ``pinned``
    job -> (configuration, GPUs it keeps)."""
    layout = Layout(cs.types)
    pinned = pinned or {}
    nt, na = len(cs.types), len(job_class)
    levels = [[np.unique(factors[a][layout.type_of == c]) for a in range(factors.shape[0])] for c in range(nt)]
    counts = [[np.unique(factors[a][layout.type_of == c], return_counts=True)[1] for a in range(factors.shape[0])]
              for c in range(nt)]
    pins = np.full((na, 2), -1, dtype=np.int64)
    free = np.ones(layout.num_gpus, dtype=bool)
    for j, (k, gpus) in pinned.items():
        c = int(cs.type_index[k])
        pins[j] = (k, int(np.searchsorted(levels[c][job_class[j]], factors[job_class[j]][list(gpus)].max())))
        free[list(gpus)] = False
    r = LevelRound(cs, goodput, np.array(job_class, dtype=np.int64), levels, counts, pins, np.zeros((0, nt)),
                   np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), lambda_n=LAMBDA_N)
    cells = make_cells(layout.type_of, layout.server_of(), factors, free)
    return JointRound(r, cells, np.zeros((na, len(cells)), dtype=np.int64)), r


def _gpu_options(cs: ConfigSet) -> list[tuple[int, tuple[int, ...]]]:
    """Every (configuration, GPU set) a job may get: n GPUs of one node, or m whole nodes."""
    layout = Layout(cs.types)
    server = layout.server_of()
    out = []
    for k, cf in enumerate(cs.configs):
        nodes = sorted({int(s) for s in server[layout.type_of == cf.type_index]})
        for chosen in itertools.combinations(nodes, cf.num_nodes):
            gpus = np.flatnonzero(np.isin(server, chosen)).tolist()
            per = cf.num_gpus // cf.num_nodes
            on = [[g for g in gpus if server[g] == s] for s in chosen]
            for parts in itertools.product(*(itertools.combinations(o, per) for o in on)):
                out.append((k, tuple(g for p in parts for g in p)))
    return out


def _brute_force(cs: ConfigSet, goodput: np.ndarray, job_class: list[int], factors: np.ndarray) -> float:
    """Sia's objective minimised over every GPU-level allocation (the cost of a GPU set: its
    configuration's goodput over the slowest binned factor of the job's class)."""
    opts = _gpu_options(cs)
    per_job = []
    for j, a in enumerate(job_class):
        costs = [LAMBDA_N]
        for k, gpus in opts:
            f = factors[a][list(gpus)].max()
            costs.append(float(fairness_costs(np.array([goodput[j, k] / f], dtype=np.float32), -0.5)[0]))
        per_job.append(costs)
    best = np.inf
    for pick in itertools.product(*(range(len(opts) + 1) for _ in job_class)):
        used = [g for i in pick if i for g in opts[i - 1][1]]
        if len(used) == len(set(used)):
            best = min(best, sum(per_job[j][i] for j, i in enumerate(pick)))
    return round(best, 2)


def _rows(rng: np.random.Generator, cs: ConfigSet, jobs: int) -> np.ndarray:
    """Normalised goodput rows growing with the GPU count (sub-linearly), per type a speed."""
    speed = rng.uniform(0.5, 2.0, size=(jobs, len(cs.types)))
    alpha = rng.uniform(0.3, 0.95, size=(jobs, 1))
    return speed[:, cs.type_index] * cs.num_gpus[None, :] ** alpha


def _solve(jr: JointRound, backend: str = "highs") -> tuple[float, tuple, dict[int, list[int]]]:
    prog = build_joint_program(jr)
    values, status, _ = solve_joint(prog, backend, None)
    assert values is not None and status == "optimal" and prog.is_feasible(values)
    decoded = prog.decode(values)
    return prog.round_objective(values), decoded, assign_gpus(jr.cells, decoded[3], {})


@pytest.mark.parametrize("seed", range(6))
def test_joint_optimum_equals_brute_force_over_gpu_sets(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cs = enumerate_configs([GpuType("a", 2, 4)])
    factors = rng.choice([1.0, 1.2, 1.5], size=(2, 8))
    job_class = [0, 1, int(rng.integers(2))]
    g = _rows(rng, cs, 3)
    jr, _ = _round(cs, g, job_class, factors)
    obj, _, gpus = _solve(jr)
    assert obj == pytest.approx(_brute_force(cs, g, job_class, factors))
    agg = build_joint_program(jr).aggregate  # a relaxation: never above the optimum
    values, _, _ = solve_program(agg, "highs", None)
    assert agg.objective(values) / 100 <= obj + 1e-9
    # the decoded GPUs are what the objective priced: each job's configuration on ≤ its nodes
    flat = [x for v in gpus.values() for x in v]
    assert len(flat) == len(set(flat))


@pytest.mark.parametrize("seed", range(6))
def test_without_variability_on_an_empty_cluster_the_joint_optimum_is_sias(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    cs = enumerate_configs([GpuType("a", 3, 4, 16), GpuType("b", 2, 8, 2)])
    g = _rows(rng, cs, 6)
    jr, _ = _round(cs, g, [0] * 6, np.ones((1, 28)))
    obj, (conf, _, _, _), gpus = _solve(jr)
    sia = solve_round_dp(RoundInput(cs, fairness_costs(g.astype(np.float32), -0.5), lambda_n=LAMBDA_N))
    assert obj == pytest.approx(sia.objective)  # powers of two always pack on free nodes
    server = Layout(cs.types).server_of()
    for j, k in enumerate(conf.tolist()):
        if k >= 0:
            assert len(gpus[j]) == cs.num_gpus[k] and len({int(server[x]) for x in gpus[j]}) == cs.num_nodes[k]


def test_sias_aggregate_choice_would_fragment_and_the_joint_one_does_not() -> None:
    # one type of 2 nodes x 4; two restarting jobs keep 2 GPUs on each node; a new job is worth
    # 4 GPUs, which the aggregate program gives it (4 GPUs of the type are free) though they
    # lie on two nodes; the joint program gives it 2 GPUs on one node instead
    cs = enumerate_configs([GpuType("a", 2, 4)])  # (1,1), (1,2), (1,4), (2,8)
    g = np.array([[1.0, 1.9, 3.6, 6.0]] * 3)
    jr, level = _round(cs, g, [0, 0, 0], np.ones((1, 8)), pinned={0: (1, (0, 1)), 1: (1, (4, 5))})
    prog = build_level_program(level)
    values, _, _ = solve_program(prog, "highs", None)
    assert prog.decode(values)[0].tolist() == [1, 1, 2]
    obj, (conf, _, _, _), gpus = _solve(jr)
    assert conf.tolist() == [1, 1, 1] and sorted(gpus) == [2] and len(gpus[2]) == 2
    assert gpus[2] in ([2, 3], [6, 7])
    assert obj == pytest.approx(0.73 * 3) and obj > prog.objective(values) / 100


def test_the_fast_gpus_go_to_the_sensitive_job_even_when_classes_compete() -> None:
    # node 0 is fast for both classes; class 0 loses 1.5x on node 1, class 1 only 1.1x.  The
    # level program (Hall's rows per class) promises node 0 to both jobs; the joint program gives
    # it to the sensitive job and prices the other on node 1
    cs = enumerate_configs([GpuType("a", 2, 4)])
    factors = np.array([[1.0] * 4 + [1.5] * 4, [1.0] * 4 + [1.1] * 4])
    g = np.array([[1.0, 1.9, 3.6, 6.0]] * 2)
    jr, level = _round(cs, g, [0, 1], factors)
    lp = build_level_program(level)
    lv, _, _ = solve_program(lp, "highs", None)
    assert lp.decode(lv)[1].tolist() == [0, 0]  # both on the fast level: not realisable
    obj, (conf, lev, _, _), gpus = _solve(jr)
    assert conf.tolist() == [2, 2] and lev.tolist() == [0, 1]
    assert gpus[0] == [0, 1, 2, 3] and gpus[1] == [4, 5, 6, 7]
    assert obj == pytest.approx(_brute_force(cs, g, [0, 1], factors)) and obj > lp.objective(lv) / 100


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_every_backend_solves_a_joint_round_to_the_same_optimum(backend: str) -> None:
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")
    rng = np.random.default_rng(7)
    cs = enumerate_configs([GpuType("a", 3, 4, 16), GpuType("b", 1, 8)])
    factors = rng.choice([1.0, 1.1, 1.4], size=(2, 20))
    g = _rows(rng, cs, 5)
    jr, _ = _round(cs, g, [0, 1, 0, 1, 0], factors, pinned={4: (1, (0, 1))})
    obj, (conf, _, _, _), _ = _solve(jr, backend)
    reference, _, _ = _solve(jr, "highs")
    assert obj == pytest.approx(reference) and conf[4] == 1


def test_the_tie_break_keeps_a_job_on_the_gpus_it_holds() -> None:
    cs = enumerate_configs([GpuType("a", 2, 4)])
    jr, _ = _round(cs, np.array([[1.0, 1.9, 3.6, 3.6]]), [0], np.ones((1, 8)))  # 4 GPUs, on either node
    for held in ((1, 2), (5, 7)):
        node = held[0] // 4
        h = np.zeros((1, len(jr.cells)), dtype=np.int64)
        h[0, node] = 2
        jr2 = JointRound(jr.level, jr.cells, h)
        prog = build_joint_program(jr2)
        values, _, _ = solve_joint(prog, "highs", None)
        gpus = assign_gpus(jr2.cells, prog.decode(values)[3], {0: held})
        assert set(held) <= set(gpus[0]) and all(x // 4 == node for x in gpus[0])


def test_order_gpus_keeps_the_previous_shape_when_the_counts_are_a_permutation() -> None:
    server = np.repeat(np.arange(3), 8)
    gpus = [0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15]
    assert order_gpus(gpus, server, (4, 8)) == (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15)
    assert order_gpus(gpus, server, (8, 4)) == (8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3)
    assert order_gpus(gpus, server, ()) == (8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3)


def test_a_rigid_job_gets_its_count_on_the_fewest_nodes_beside_an_adaptive_one() -> None:
    # 2 nodes x 4: a rigid job of 6 GPUs (cost 0.2) and an adaptive job worth 1 or 2 GPUs; the
    # rigid job takes one node whole and 2 GPUs of the other, the adaptive one the other 2
    cs = enumerate_configs([GpuType("a", 2, 4)])
    jr, _ = _round(cs, np.array([[1.0, 1.9, 1.9, 1.9]]), [0], np.ones((1, 8)))
    lv = jr.level
    r = LevelRound(cs, lv.goodput, lv.job_class, lv.levels, lv.counts, lv.pinned, np.array([[0.2]]),
                   np.array([6]), np.array([-1]), lambda_n=LAMBDA_N)
    jr = JointRound(r, jr.cells, np.zeros((2, len(jr.cells)), dtype=np.int64))
    obj, (conf, _, rigid, _), gpus = _solve(jr)
    assert rigid.tolist() == [0] and conf.tolist() == [1] and obj == pytest.approx(0.2 + 0.73)
    server = Layout(cs.types).server_of()
    assert len(gpus[1]) == 6 and len({int(server[x]) for x in gpus[1]}) == 2
    assert len(gpus[0]) == 2 and len({int(server[x]) for x in gpus[0]}) == 1 and not set(gpus[0]) & set(gpus[1])


def _golden_round() -> JointRound:
    """One type of 2 nodes x 4; node 0 fast for both classes, node 1 1.5x slower for class 0 and
    1.1x for class 1; a job of each class (goodput 1, 1.9, 3.6, 6 on 1, 2, 4, 8 GPUs), job 1
    holding GPUs 4 and 5."""
    cs = enumerate_configs([GpuType("a", 2, 4)])
    factors = np.array([[1.0] * 4 + [1.5] * 4, [1.0] * 4 + [1.1] * 4])
    jr, _ = _round(cs, np.array([[1.0, 1.9, 3.6, 6.0]] * 2), [0, 1], factors)
    held = np.zeros_like(jr.held)
    held[1, list(jr.cells.node_of).index(1)] = 2
    return JointRound(jr.level, jr.cells, held)


def golden_text() -> str:
    doc = " ".join((_golden_round.__doc__ or "").split())
    return lp_text(build_joint_program(_golden_round()), comment=f"golden joint round: {doc}",
                   title="pal-opt joint ilp round with GPU types")


def test_golden_joint_lp_export_is_unchanged() -> None:
    assert GOLDEN.is_file(), f"missing {GOLDEN}; run: python tests/test_hetero_joint.py --update"
    assert golden_text() == GOLDEN.read_text(encoding="utf-8"), (
        "the joint program's LP export changed; if intended run python tests/test_hetero_joint.py --update")


def test_golden_joint_lp_reads_back_into_highs_with_the_same_optimum() -> None:
    if "highs" not in available_backends():
        pytest.skip("highspy not installed")
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    assert h.readModel(str(GOLDEN)) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    prog = build_joint_program(_golden_round())
    values, _, _ = solve_program(prog, "highs", None)
    assert h.getInfo().objective_function_value == pytest.approx(prog.objective(values), abs=1e-9)
    assert prog.round_objective(values) == pytest.approx(1.08)  # 0.53 + round((3.6 / 1.1)^-0.5, 2)


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        GOLDEN.write_text(golden_text(), encoding="utf-8", newline="\n")
        print(f"wrote {GOLDEN}")
