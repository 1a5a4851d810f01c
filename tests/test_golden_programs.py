"""Golden LP exports of the programs beyond the round program (``formulations/golden/*.lp``).

One tiny, fixed instance per program: the preemption program (without and with GPU types, and
the stage program with drop variables of a round with a pipeline job), the stage program of a
round with a pipeline job (and of a round with a running pipeline and a restart cost: keep
variables), the round program on a cluster of two GPU types, the Sia round program, the level
program of ``ilp`` with types, and Gavel-like's two linear programs.  Each export is regenerated
and compared byte for byte; HiGHS reads each file back and must find the optimum worked out by
hand in the case's comment (for the typed round, the preemption rounds with GPU types and
with a pipeline, the running pipeline, the Sia round and the level program also by brute force over their decisions here); the method that solves the program must reach it too.
After an intended change to a formulation or the writer, refresh them with::

    /work/venv/bin/python tests/test_golden_programs.py --update

and review the diff.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from golden import GOLDEN, assert_unchanged
from golden import main as golden_main

from pal_opt.binning import binned_factors
from pal_opt.cost import evaluate
from pal_opt.hetero.configs import ConfigSet, GpuType, enumerate_configs, fairness_costs
from pal_opt.hetero.gavel import gavel_allocation, gavel_program
from pal_opt.hetero.levelprogram import LevelRound, build_level_program
from pal_opt.hetero.round import solve_program, solve_round, solve_round_dp
from pal_opt.hetero.roundprogram import LAMBDA_N, RoundInput, build_round_program, round_objective
from pal_opt.ilp import available_backends, build_formulation, solve_ilp
from pal_opt.ilp.lpwriter import lp_text
from pal_opt.ilp.preempt import preempt_program, preempt_stage_program, solve_preempt
from pal_opt.ilp.program import Program
from pal_opt.ilp.stageround import build_stage_round
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams


@dataclass(frozen=True)
class Case:
    """A golden export: the program, its title line, and its optimum (program units)."""

    build: Callable[[], Program]
    title: str
    optimum: float
    doc: str


# ---------------------------------------------------------------- the instances
def _contended() -> RoundInstance:
    """Three servers of three GPUs, all held by priority-0 jobs A (4 GPUs: 0-3, started first),
    C (3: 4-6, spanning servers 1 and 2) and D (2: 7-8, started last); H (priority 1) needs 4;
    a restart costs 30 s of a 360 s round."""
    c = Cluster.uniform(3, 3, {"classA": [1.0] * 9})
    jobs = (Job("A", 4, "classA", placement=(0, 1, 2, 3), started=0.0),
            Job("C", 3, "classA", placement=(4, 5, 6), started=100.0),
            Job("D", 2, "classA", placement=(7, 8), started=200.0),
            Job("H", 4, "classA", priority=1))
    return RoundInstance(c, jobs, RoundParams(restart_cost=30.0))


def _slack() -> RoundInstance:
    """Two servers of four GPUs, a slow GPU (1.5) on each (GPUs 1 and 7); job p (4 GPUs) is a
    pipeline of stage times 2 and 1 on 3 + 1 GPUs (its second stage has slack), job g a 4-GPU gang."""
    f = [1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5]
    cl = Cluster.from_arrays(range(8), [0, 0, 0, 0, 1, 1, 1, 1], {"classA": f})
    jobs = (Job("p", 4, "classA", 0, pipeline=Pipeline((2.0, 1.0), (3, 1))), Job("g", 4, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


def _running_pipeline() -> RoundInstance:
    """Two servers of three GPUs; GPU 0 is 1.25x slow.  Running: p, a pipeline of stage times 2
    and 1 on 2 + 1 GPUs, on GPUs 0, 1 | 2 (the slow GPU on its heavy stage: pace 1.25).
    Waiting: g, a 3-GPU gang.  A restart costs 120 s of a 360 s round."""
    cl = Cluster.from_arrays(range(6), [0, 0, 0, 1, 1, 1], {"classA": [1.25, 1.0, 1.0, 1.0, 1.0, 1.0]})
    jobs = (Job("p", 3, "classA", 0, placement=(0, 1, 2), pipeline=Pipeline((2.0, 1.0), (2, 1))),
            Job("g", 3, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none", restart_cost=120.0))


def _pipeline_contended() -> RoundInstance:
    """Two servers of four GPUs; for classA GPUs 0-1 are fast (1.0) and 2-7 slow (1.5), classB
    runs at 1.0 everywhere.  Running: A (classA, priority 0, GPUs 0-1, started first), B (classB,
    priority 0, GPUs 4-5, started last), K (classB, priority 1, GPUs 6-7); GPUs 2-3 are free.
    Waiting: p (classA, priority 2), a pipeline of stage times 3 and 1 on 2 + 2 GPUs."""
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0, 1.0] + [1.5] * 6, "classB": [1.0] * 8})
    jobs = (Job("A", 2, "classA", placement=(0, 1), started=0.0),
            Job("B", 2, "classB", placement=(4, 5), started=10.0),
            Job("K", 2, "classB", placement=(6, 7), started=0.0, priority=1),
            Job("p", 4, "classA", priority=2, pipeline=Pipeline((3.0, 1.0), (2, 2))))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


TYPED_THROUGHPUT = {"classA": {"aws": 1.0, "rtx": 2.0}, "classB": {"aws": 1.0, "rtx": 1.25}}


def _typed() -> RoundInstance:
    """aws:1x4,rtx:1x4 (server 0 aws, server 1 rtx), classA 2x and classB 1.25x faster on rtx,
    rtx GPU 7 1.5x slower for classA; a (classA, 3 GPUs), g (classA, 1, guaranteed rtx),
    b (classB, 2) and m (classB, 2, may mix types)."""
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0] * 7 + [1.5], "classB": [1.0] * 8},
                             gpu_types=["aws"] * 4 + ["rtx"] * 4, throughput=TYPED_THROUGHPUT)
    jobs = (Job("a", 3, "classA", 0), Job("g", 1, "classA", 1, kind="guaranteed", gpu_type="rtx"),
            Job("b", 2, "classB", 2), Job("m", 2, "classB", 3, mix_types=True))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


def _typed_contended() -> RoundInstance:
    """aws:1x4,rtx:1x4 (server 0 aws GPUs 0-3, server 1 rtx 4-7), aws GPUs 2-3 slow (1.2) for
    classA; priority-0 jobs m (classB, aws 0-1), l (classA, rtx 4-5) and l2 (classB, rtx 6-7,
    started last); h (classB, priority 1) is guaranteed 2 rtx GPUs; a restart costs 30 s of a
    360 s round."""
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0, 1.0, 1.2, 1.2] + [1.0] * 4,
                                                           "classB": [1.0] * 8},
                             gpu_types=["aws"] * 4 + ["rtx"] * 4)
    jobs = (Job("m", 2, "classB", placement=(0, 1), started=0.0),
            Job("l", 2, "classA", placement=(4, 5), started=10.0),
            Job("l2", 2, "classB", placement=(6, 7), started=20.0),
            Job("h", 2, "classB", priority=1, kind="guaranteed", gpu_type="rtx"))
    return RoundInstance(cl, jobs, RoundParams(binning="none", restart_cost=30.0))


TWO_TYPES = (GpuType("fast", 1, 4), GpuType("slow", 1, 2))
#: normalised goodput of three jobs on the configurations fast:1, 2, 4 and slow:1, 2
GOODPUT = np.array([[1.0, 1.9, 3.6, 2.0, 3.8], [1.0, 1.8, 3.2, 1.2, 2.2], [1.0, 1.1, 1.3, 0.7, 0.8]])


def _sia_round() -> RoundInput:
    """Types fast (1 node x 4) and slow (1 x 2): configurations fast:1/2/4, slow:1/2; three
    adaptive jobs with normalised goodput rows (1, 1.9, 3.6, 2.0, 3.8), (1, 1.8, 3.2, 1.2, 2.2)
    and (1, 1.1, 1.3, 0.7, 0.8) (costs G^-0.5 to two decimals); a rigid 1-GPU job (costs 0.6
    on fast, 0.5 on slow) still restarting on slow (pinned)."""
    cs = enumerate_configs(TWO_TYPES)
    return RoundInput(cs, fairness_costs(GOODPUT), rigid_costs=np.array([[0.6, 0.5]]), rigid_gpus=np.array([1]),
                      pinned_rigid=np.array([1]))


LEVEL_FACTORS = np.array([[1.0, 1.0, 1.3, 1.3, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.2]])
LEVEL_TYPE = np.array([0, 0, 0, 0, 1, 1])
LEVEL_GOODPUT = np.array([[1.0, 1.9, 3.6, 1.5, 2.8], [1.0, 1.8, 3.2, 1.4, 2.5], [1.0, 1.7, 3.0, 1.6, 2.9]])


def _level_round() -> LevelRound:
    """Types fast (1 x 4) and slow (1 x 2); binned factors: class 0 1.0 on fast GPUs 0-1, 1.3 on
    2-3 and 1.0 on slow; class 1 1.0 on fast and slow GPU 4, 1.2 on slow GPU 5; jobs 0 and 1 of
    class 0, job 2 of class 1, goodput rows (1, 1.9, 3.6, 1.5, 2.8), (1, 1.8, 3.2, 1.4, 2.5)
    and (1, 1.7, 3.0, 1.6, 2.9) on fast:1/2/4, slow:1/2."""
    cs = enumerate_configs(TWO_TYPES)
    levels = [[np.unique(LEVEL_FACTORS[a][LEVEL_TYPE == c]) for a in range(2)] for c in range(2)]
    counts = [[np.unique(LEVEL_FACTORS[a][LEVEL_TYPE == c], return_counts=True)[1] for a in range(2)] for c in range(2)]
    return LevelRound(cs, LEVEL_GOODPUT, np.array([0, 0, 1]), levels, counts, np.full((3, 2), -1, dtype=np.int64),
                      np.zeros((0, 2)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), lambda_n=LAMBDA_N)


GAVEL_T = np.array([[3.0, 1.0], [1.0, 3.0], [2.0, 0.0]])
GAVEL_S = np.array([1, 1, 1])
GAVEL_N = np.array([1, 1])
#: the max-min level, by hand: job 2 gets a of type 0, job 0 the rest of type 0 and c of type
#: 1, job 1 the rest of type 1; 2a = 1.5(1 - a) + 0.5c = 1.5(1 - c) gives c = 0.36, a = 0.48
GAVEL_LEVEL = 0.96


# ---------------------------------------------------------------- the cases
def _case_doc(fn: Callable[[], object]) -> str:
    return " ".join((fn.__doc__ or "").split())


CASES: dict[str, Case] = {
    # drop A (4 GPUs x 10 units) rather than C and D (5 GPUs); H spans two servers (4 ln 1.7);
    # C moves inside one server for a restart (3 x -ln(1 - 30/360)) rather than keep its span
    "preempt_contended": Case(lambda: preempt_program(_contended()), "pal-opt preemption round program",
                              40.0 + 4 * math.log(1.7) - 3 * math.log(1 - 30 / 360), _case_doc(_contended)),
    # h claims the rtx GPUs of priority 0: l and l2 are optional; rather than preempt one (20),
    # l2 moves to aws 2-3 (2 x -ln(1 - 30/360)) and h takes rtx 6-7; moving l there costs 2 ln 1.2 more
    "preempt_typed": Case(lambda: preempt_program(_typed_contended()),
                          "pal-opt preemption round program with GPU types", -2 * math.log(1 - 30 / 360),
                          _case_doc(_typed_contended)),
    # p claims priority 0's GPUs: A and B are optional, K kept.  Drop A (2 GPUs x 10 units), not B:
    # p runs inside server 0, its heavy stage on the fast GPUs 0-1 and its light one (3 x 1.0 >
    # 1 x 1.5: slack) on 2-3, at pace 1 (0); B and K (classB) on server 1 (0).  Dropping B instead
    # leaves A (classA) a slow pair or p a slow heavy stage (at least 2 ln 1.5 more)
    "preempt_pipeline": Case(lambda: preempt_stage_program(_pipeline_contended()).program,
                             "pal-opt preemption stage program of a round with a pipeline job", 20.0,
                             _case_doc(_pipeline_contended)),
    # each job inside one server: p puts its server's slow GPU on its slack stage (pace 2, its
    # least), g pays 1.5 for the other (spanning servers would cost 1.7): 4 ln 1.5
    "stage_slack": Case(lambda: build_stage_round(_slack(), [0, 1], binned_factors(_slack().cluster, "none")).program,
                        "pal-opt stage program of a round with pipeline jobs", 4 * math.log(1.5), _case_doc(_slack)),
    # p kept on 0, 1 | 2 (its keep variable: 3 ln 1.25), g on server 1 (0).  Re-mapping p on its
    # GPUs (the slow one on the light stage: 1 x 1.25 < 2, pace 1) or moving it to server 1 costs
    # the restart, 3 x -ln(1 - 120/360) = 3 ln 1.5, more than it saves
    "stage_keep": Case(lambda: build_stage_round(_running_pipeline(), [0, 1],
                                                 binned_factors(_running_pipeline().cluster, "none")).program,
                       "pal-opt stage program of a round with a running pipeline and a restart cost",
                       3 * math.log(1.25), _case_doc(_running_pipeline)),
    # a on rtx GPUs 4-6 (3 ln 1/2), g on rtx GPU 7 (ln 1.5/2), b and m on aws (0)
    "typed_aws_rtx": Case(lambda: build_formulation(_typed()), "pal-opt round integer program with GPU types",
                          3 * math.log(0.5) + math.log(0.75), _case_doc(_typed)),
    # hundredths: job 0 on slow:1 (2^-0.5 = 0.71), job 1 on fast:4 (3.2^-0.5 = 0.56), job 2 left
    # out (it costs lambda_n = 1.1), the rigid job pinned (0.5): 71 + 56 + 110 + 50
    "sia_round": Case(lambda: build_round_program(_sia_round()), "pal-opt Sia round program",
                      71 + 56 + 110 + 50.0, _case_doc(_sia_round)),
    # hundredths, offset +110 x 3 jobs: job 0 on slow:2 (2.8^-0.5 = 0.60), job 1 on fast:2 at
    # level 1.0 (1.8^-0.5 = 0.75), job 2 on fast:2 (1.7^-0.5 = 0.77): 60 + 75 + 77.  Without the
    # level rows 207: job 2 on slow:2 at level 1.0, where class 1 has one GPU
    "sia_levels": Case(lambda: build_level_program(_level_round()), "pal-opt level program of ilp with GPU types",
                       60 + 75 + 77.0, _case_doc(_level_round)),
    "gavel_level": Case(lambda: gavel_program(GAVEL_T, GAVEL_S, GAVEL_N), "Gavel-like max-min level LP",
                        -GAVEL_LEVEL, "three one-GPU jobs, two one-GPU types; throughputs (3, 1), (1, 3), (2, 0)"),
    # at the level 0.96 the max-min point is the only one: every job at 0.96
    "gavel_spread": Case(lambda: gavel_program(GAVEL_T, GAVEL_S, GAVEL_N, GAVEL_LEVEL), "Gavel-like spread LP",
                         -3 * GAVEL_LEVEL, "the same jobs, program 2 at the level z* = 0.96"),
}


def golden_text(name: str) -> str:
    case = CASES[name]
    return lp_text(case.build(), comment=f"golden {name!r}: {case.doc}", title=case.title)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_lp_export_is_unchanged(name: str) -> None:
    assert_unchanged(name, golden_text(name), "test_golden_programs.py")


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_lp_reads_back_into_highs_with_the_hand_optimum(name: str) -> None:
    if "highs" not in available_backends():
        pytest.skip("highspy not installed")
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    assert h.readModel(str(GOLDEN / f"{name}.lp")) == highspy.HighsStatus.kOk
    prog = CASES[name].build()
    lp = h.getLp()
    assert (lp.num_col_, lp.num_row_) == (prog.num_vars, sum(2 if lo > -np.inf and hi < np.inf and lo != hi else 1
                                                             for lo, hi in zip(prog.row_lo, prog.row_hi, strict=True)))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert h.getInfo().objective_function_value == pytest.approx(CASES[name].optimum, abs=1e-6)


# ---------------------------------------------------------------- the methods reach the optimum
def test_ilp_preempt_reaches_the_golden_optimum() -> None:
    inst = _contended()
    res = solve_preempt(inst, backend="highs")
    assert res.objective == pytest.approx(CASES["preempt_contended"].optimum, abs=1e-9)
    assert "A" not in res.placements and {"C", "D", "H"} <= set(res.placements)
    assert len({g // 3 for g in res.placements["C"]}) == 1  # C moved into one server


def test_ilp_preempt_reaches_the_typed_golden_optimum() -> None:
    inst = _typed_contended()
    res = solve_preempt(inst, backend="highs")
    assert res.objective == pytest.approx(CASES["preempt_typed"].optimum, abs=1e-9)
    assert res.placements == {"m": (0, 1), "l": (4, 5), "l2": (2, 3), "h": (6, 7)}


def test_typed_preemption_optimum_by_brute_force() -> None:
    """Every placement of the plan: m and h placed, l and l2 placed or preempted, each job on
    GPUs of one type it may use (h on rtx), priced by ``pal_opt.cost.evaluate``."""
    inst = _typed_contended()
    factors = binned_factors(inst.cluster, "none")
    aws, rtx = (0, 1, 2, 3), (4, 5, 6, 7)
    pairs = [*itertools.combinations(aws, 2), *itertools.combinations(rtx, 2)]
    options = {"m": pairs, "l": [None, *pairs], "l2": [None, *pairs], "h": list(itertools.combinations(rtx, 2))}
    best = math.inf
    for pick in itertools.product(*options.values()):
        used = [g for gs in pick if gs is not None for g in gs]
        if len(used) == len(set(used)):
            p = {jid: gs for jid, gs in zip(options, pick, strict=True) if gs is not None}
            best = min(best, evaluate(inst, p, factors).cost)
    assert best == pytest.approx(CASES["preempt_typed"].optimum, abs=1e-9)


def test_ilp_preempt_reaches_the_pipeline_golden_optimum() -> None:
    inst = _pipeline_contended()
    res = solve_preempt(inst, backend="highs")
    assert res.objective == pytest.approx(CASES["preempt_pipeline"].optimum, abs=1e-9)
    assert res.jobs_to_terminate == ("A",) and res.stages["p"] == ((0, 1), (2, 3))


def test_pipeline_preemption_optimum_by_brute_force() -> None:
    """Every placement of the plan: K and p placed, A and B placed or preempted, on disjoint
    GPUs, p in every stage map of its GPUs, priced by ``pal_opt.cost.evaluate``."""
    inst = _pipeline_contended()
    factors = binned_factors(inst.cluster, "none")

    def options(jid: str, free: tuple[int, ...]) -> list[tuple[int, ...] | None]:
        if jid == "p":  # every 4 GPUs, every 2 of them on the first stage
            return [(*a, *(g for g in q if g not in a)) for q in itertools.combinations(free, 4)
                    for a in itertools.combinations(q, 2)]
        return [*([None] if jid in "AB" else []), *itertools.combinations(free, 2)]

    def best(todo: tuple[str, ...], free: tuple[int, ...], chosen: dict[str, tuple[int, ...]]) -> float:
        if not todo:
            return evaluate(inst, chosen, factors).cost
        return min(best(todo[1:], free if gs is None else tuple(g for g in free if g not in gs),
                        chosen if gs is None else {**chosen, todo[0]: gs}) for gs in options(todo[0], free))

    assert best(("p", "K", "A", "B"), tuple(range(8)), {}) == pytest.approx(CASES["preempt_pipeline"].optimum, abs=1e-9)


def test_the_stage_program_reaches_the_golden_optimum() -> None:
    res = solve_ilp(_slack())
    assert res.info["program"] == "stage"
    assert res.objective == pytest.approx(CASES["stage_slack"].optimum, abs=1e-9)
    assert set(res.stages["p"][1]) <= {1, 7}  # the slow GPU runs the slack stage


def test_the_running_pipeline_golden_optimum_by_brute_force_and_on_every_backend() -> None:
    """Every placement of p (every stage map of every 3 GPUs) and g (3 of the rest), priced by
    ``pal_opt.cost.evaluate``: the least is p kept.  ``solve_ilp`` reaches it on every backend,
    with p on exactly its GPU list."""
    inst = _running_pipeline()
    factors = binned_factors(inst.cluster, "none")
    best = math.inf
    for p in itertools.permutations(range(6), 3):
        for g in itertools.combinations([x for x in range(6) if x not in p], 3):
            best = min(best, evaluate(inst, {"p": p, "g": g}, factors).cost)
    assert best == pytest.approx(CASES["stage_keep"].optimum, abs=1e-9)
    remap = evaluate(inst, {"p": (1, 2, 0), "g": (3, 4, 5)}, factors)
    assert remap.cost == pytest.approx(3 * math.log(1.5)) and remap.moved == ("p",)
    for backend in available_backends():
        res = solve_ilp(inst, backend=backend)
        assert res.info["program"] == "stage" and res.objective == pytest.approx(best, abs=1e-9), backend
        assert res.placements["p"] == (0, 1, 2) and res.jobs_to_terminate == (), backend


def _typed_ok(p: dict[str, tuple[int, ...]]) -> bool:
    """(T1)/(T2) by hand: g on rtx, a and b on one type each (m may mix)."""
    rtx = {4, 5, 6, 7}
    one_type = lambda gs: set(gs) <= rtx or not set(gs) & rtx  # noqa: E731
    return set(p["g"]) <= rtx and one_type(p["a"]) and one_type(p["b"])


def test_typed_round_optimum_by_brute_force() -> None:
    inst = _typed()
    factors = binned_factors(inst.cluster, "none")
    best = math.inf
    gpus = range(8)
    for a in itertools.combinations(gpus, 3):
        for g in (x for x in gpus if x not in a):
            rest = [x for x in gpus if x not in a and x != g]
            for b in itertools.combinations(rest, 2):
                p = {"a": a, "g": (g,), "b": b, "m": tuple(x for x in rest if x not in b)}
                if _typed_ok(p):
                    best = min(best, evaluate(inst, p, factors).cost)
    assert best == pytest.approx(CASES["typed_aws_rtx"].optimum, abs=1e-9)
    res = solve_ilp(inst, backend="highs")
    assert res.objective == pytest.approx(best, abs=1e-9)


def test_sia_round_optimum_by_brute_force() -> None:
    inp = _sia_round()
    cs = inp.configs
    caps = np.array([t.total_gpus for t in cs.types])
    best = math.inf
    for choice in itertools.product(range(-1, len(cs)), repeat=3):
        used = np.zeros(2, dtype=int)
        used[1] += 1  # the pinned rigid job on slow
        for k in choice:
            if k >= 0:
                used[cs.type_index[k]] += cs.num_gpus[k]
        if np.all(used <= caps):
            best = min(best, round_objective(inp, choice, [1]))
    assert best * 100 == pytest.approx(CASES["sia_round"].optimum, abs=1e-9)
    assert solve_round_dp(inp).objective == pytest.approx(best, abs=1e-9)
    assert solve_round(inp, backend="highs").objective == pytest.approx(best, abs=1e-9)


def test_level_program_optimum_by_brute_force() -> None:
    """Every choice (none, or configuration and level) per job against the type totals and
    the per-class level rows of ``formulations/sia_ilp_types.md`` §2, costs in hundredths."""
    r = _level_round()
    cs: ConfigSet = r.configs
    options: list[list[tuple[int, int, float]]] = []
    for j in range(3):
        a = int(r.job_class[j])
        opts: list[tuple[int, int, float]] = [(-1, -1, 0.0)]
        for k in range(len(cs)):
            c = int(cs.type_index[k])
            for v, f in enumerate(r.levels[c][a].tolist()):
                cost = float(fairness_costs(np.array([LEVEL_GOODPUT[j, k] / f], dtype=np.float32))[0])
                opts.append((k, v, round(100 * cost) - 110.0))
        options.append(opts)
    best = math.inf
    for pick in itertools.product(*options):
        used = np.zeros(2, dtype=int)
        at = np.zeros((2, 2, 2), dtype=int)  # (type, class, level) GPUs
        for j, (k, v, _) in enumerate(pick):
            if k >= 0:
                c = int(cs.type_index[k])
                used[c] += cs.num_gpus[k]
                at[c, r.job_class[j], v] += cs.num_gpus[k]
        hall = all(at[c, a, 0] <= r.counts[c][a][0] for c in range(2) for a in range(2) if len(r.counts[c][a]) > 1)
        if np.all(used <= [4, 2]) and hall:
            best = min(best, 330.0 + sum(x[2] for x in pick))
    assert best == pytest.approx(CASES["sia_levels"].optimum, abs=1e-9)
    prog = build_level_program(r)
    values, _, _ = solve_program(prog, "highs", None)
    assert values is not None and prog.objective(values) == pytest.approx(best, abs=1e-9)


def test_gavel_allocation_reaches_the_golden_level() -> None:
    alloc = gavel_allocation(GAVEL_T, GAVEL_S, GAVEL_N)
    assert alloc.level == pytest.approx(GAVEL_LEVEL, abs=1e-9)
    assert alloc.x == pytest.approx(np.array([[0.52, 0.36], [0.0, 0.64], [0.48, 0.0]]), abs=1e-7)
    assert alloc.normalised == pytest.approx([GAVEL_LEVEL] * 3, abs=1e-7)


if __name__ == "__main__":
    golden_main(CASES, golden_text, __doc__)
