"""The partitioner's integer program (:mod:`pal_opt.pipeline.ip`): two methods, one optimum.

* The small reference cases (alexnet and vgg16, flat on 8 workers, straight and replicated;
  skipped without ``../shared``): the integer program's time per sample equals the dynamic
  program's (and the authors') to 1e-6 relative, on HiGHS, and on CP-SAT and CBC for alexnet.
* Random chains and small DAGs (hypothesis), flat and on two levels: the same optimum as the
  dynamic program, on HiGHS; fewer examples on CP-SAT and CBC.
* The program itself: its shape on a hand-checked chain, the golden LP export
  (``formulations/golden/pipeline_chain3.lp``), HiGHS reading that file back to the same rank.
* ``pal-opt partition --method ip`` and its bad options.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_profiles import chain, check_consistent, machine_trees, small_dags, wide_two_levels

from pal_opt import progress
from pal_opt.cli import main
from pal_opt.errors import InfeasiblePartitionError, OptionError
from pal_opt.ilp.backends import available_backends
from pal_opt.ilp.lpwriter import lp_text
from pal_opt.pipeline.ip import build_stage_program, real_segments, solve_stage_program
from pal_opt.pipeline.partition import partition
from pal_opt.pipeline.profile import load_profile, parse_profile
from pal_opt.pipeline.states import build_states
from pal_opt.pipeline.tables import ArrayTable

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
GOLDEN = ROOT / "formulations" / "golden" / "pipeline_chain3.lp"
EXAMPLE = ROOT / "examples" / "data" / "tinynet_graph.txt"
SMALL_CASES = ["alexnet-8", "alexnet-8-straight", "vgg16-8", "vgg16-8-straight"]
_SET = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _installed(backend: str) -> None:
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")


def _case(name: str) -> dict[str, Any]:
    path = SHARED / "reference" / "pipedream" / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"shared data not available at {SHARED}")
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _agree(states: Any, machines: list[int], rates: list[float], straight: bool, backend: str) -> float:
    """Both methods on one case: the same optimum (1e-6 relative), and a consistent partition."""
    dp = partition(states, machines, rates, straight=straight)
    ip = partition(states, machines, rates, straight=straight, method="ip", backend=backend)
    assert ip.method == "ip" and dp.method == "dp"
    assert math.isclose(ip.time_per_sample, dp.time_per_sample, rel_tol=1e-6, abs_tol=0.0)
    check_consistent(ip, states)
    return ip.time_per_sample


# --------------------------------------------------------------------------- the shared cases
@pytest.mark.parametrize("backend, name", [("highs", n) for n in SMALL_CASES]
                         + [(b, n) for b in ("cpsat", "cbc") for n in ("alexnet-8", "alexnet-8-straight")])
def test_small_reference_cases_agree_with_the_dynamic_program(backend: str, name: str) -> None:
    case = _case(name)
    _installed(backend)
    states = build_states(load_profile(SHARED / "data" / "pipedream-profiles" / case["profile"]))
    value = _agree(states, case["machines_per_level"], case["bandwidths"], case["straight_pipeline"], backend)
    assert math.isclose(value, case["expected"]["time_per_sample"], rel_tol=1e-6)


# --------------------------------------------------------------------------- generated profiles
def _check(text: str, tree: tuple[list[tuple[int, float]], bool], backend: str) -> None:
    levels, straight = tree
    states = build_states(parse_profile(text))
    machines, rates = [m for m, _ in levels], [b for _, b in levels]
    try:
        expected = partition(states, machines, rates, straight=straight).time_per_sample
    except InfeasiblePartitionError:  # a straight pipeline longer than the model: both methods say so
        with pytest.raises(InfeasiblePartitionError, match="straight pipeline"):
            partition(states, machines, rates, straight=True, method="ip", backend=backend)
        return
    assert _agree(states, machines, rates, straight, backend) == pytest.approx(expected, rel=1e-6, abs=0.0)


@settings(max_examples=120, **_SET)  # type: ignore[arg-type]
@given(small_dags(), machine_trees())
def test_generated_profiles_agree_on_highs(text: str, tree: tuple[list[tuple[int, float]], bool]) -> None:
    _installed("highs")
    _check(text, tree, "highs")


@settings(max_examples=25, **_SET)  # type: ignore[arg-type]
@given(small_dags(max_layers=4), wide_two_levels())
def test_generated_two_level_profiles_agree_on_highs(text: str, tree: tuple[list[tuple[int, float]], bool]) -> None:
    _installed("highs")
    _check(text, tree, "highs")


FLAT = st.tuples(st.lists(st.tuples(st.integers(1, 5), st.sampled_from([1e9, 2.5e10])), min_size=1, max_size=1),
                 st.booleans())


@pytest.mark.parametrize("backend", ["cpsat", "cbc"])
def test_generated_profiles_agree_on_the_other_backends(backend: str) -> None:
    _installed(backend)

    @settings(max_examples=12, **_SET)  # type: ignore[arg-type]
    @given(small_dags(max_layers=5), FLAT)
    def run(text: str, tree: tuple[list[tuple[int, float]], bool]) -> None:
        _check(text, tree, backend)

    run()


# --------------------------------------------------------------------------- the program
def _chain3_program() -> Any:
    """3, 1 and 2 ms layers (node2 with 1 GB of weights) on 2 workers at 10 GB/s."""
    states = build_states(parse_profile(chain([3.0, 1.0, 2.0], params=[0.0, 1e9, 0.0])))
    T, P = ArrayTable.segment_tables(states)
    return states, build_stage_program(states, T, P, 0, states.n - 1, 2, 1e10)


def test_program_of_a_three_layer_chain_by_hand() -> None:
    states, problem = _chain3_program()
    prog = problem.program
    # stages: 3 from the input + 3 after a state (a chain), each on 1 or 2 workers; then rank
    assert prog.num_vars == 13 and prog.var_names[-1] == "rank" and prog.integrality.all()
    assert prog.var_names[:4] == ("x_0_1_w1", "x_0_1_w2", "x_0_2_w1", "x_0_2_w2")
    assert prog.row_names == ("flow_c0", "flow_c1", "flow_c2", "flow_c3", "workers",
                              "bottleneck_c0", "bottleneck_c1", "bottleneck_c2")
    assert np.all(prog.A.data == np.rint(prog.A.data))  # integer coefficients: CP-SAT takes it as is
    # [node1] on 1 worker | [node2, node3] on 1: max(3, 3) ms; replicating node2 costs 4 x 1 GB / 20 GB/s
    value, stages = solve_stage_program(problem, "highs" if "highs" in available_backends() else None)  # type: ignore[misc]
    assert value == pytest.approx(0.003) and stages == [(0, 0, 1), (1, 2, 1)]
    assert problem.levels[0] == pytest.approx(0.001) and problem.levels[-1] == pytest.approx(0.103)  # all on 2: (6 ms + 0.2 s) / 2


def test_decode_rejects_a_broken_answer() -> None:
    from pal_opt.errors import BackendError

    _, problem = _chain3_program()
    values = np.zeros(problem.program.num_vars)
    values[problem.program.var_names.index("x_0_1_w1")] = 1.0  # a first stage and nothing after it
    with pytest.raises(BackendError, match="not one pipeline on 2 workers"):
        problem.decode(values)


def test_real_segments_of_a_diamond() -> None:
    from pipeline_profiles import layer_line, profile_text

    text = profile_text([layer_line(x, 1.0) for x in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    states = build_states(parse_profile(text))  # {a}, {c}, {b}, {b, c}, {d}
    # from the input to every state, and from the cut after each state to each of its descendants
    assert real_segments(states) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 1), (1, 2), (1, 3), (1, 4),
                                     (2, 3), (2, 4), (3, 3), (3, 4), (4, 4)]


def golden_text() -> str:
    _, problem = _chain3_program()
    doc = " ".join((_chain3_program.__doc__ or "").split())
    return lp_text(problem.program, comment=f"golden pipeline partition program 'chain3': {doc}",
                   title="pal-opt pipeline partition program")


def test_golden_lp_export_is_unchanged() -> None:
    assert GOLDEN.is_file(), f"missing {GOLDEN}; run: python tests/test_pipeline_ip.py --update"
    assert golden_text() == GOLDEN.read_text(encoding="utf-8"), (
        f"{GOLDEN.name} differs from the regenerated export; if the change is intended run "
        "python tests/test_pipeline_ip.py --update and review the diff")


def test_golden_lp_reads_back_into_highs() -> None:
    _installed("highs")
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(GOLDEN)) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    _, problem = _chain3_program()
    rank = round(h.getInfo().objective_function_value)
    # formulations/pipeline_partition.md §5: rank 4 of 1, 1.5, 2, 3, 4, 6 ms…
    assert rank == 4 and problem.levels[rank - 1] == pytest.approx(0.003)


# --------------------------------------------------------------------------- errors and the CLI
def test_straight_pipeline_longer_than_the_model() -> None:
    with pytest.raises(InfeasiblePartitionError, match="straight pipeline on 4 workers"):
        partition(parse_profile(chain([1.0, 2.0, 3.0])), [4], [1e9], straight=True, method="ip")


def test_unknown_method() -> None:
    with pytest.raises(OptionError, match="method: expected one of dp, ip"):
        partition(parse_profile(chain([1.0])), [1], [1e9], method="lp")


def test_cli_method_ip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _installed("highs")
    out = tmp_path / "ip.json"
    args = ["partition", str(EXAMPLE), "--machines", "4", "--bandwidth", "1e9"]
    assert main([*args, "--method", "ip", "--backend", "highs", "--out", str(out)]) == 0
    assert "integer programs (highs)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["method"] == "ip"
    assert doc["time_per_sample"] == partition(load_profile(EXAMPLE), [4], [1e9]).time_per_sample


def test_progress_shows_no_program_objective_as_the_partitions() -> None:
    """The solver's incumbent and bound of each threshold program (its count of stages still
    bounded: 0 or 2 here) reached ``pal-opt partition --method ip``'s live line as
    ``incumbent 0.0000, bound 0.0000``; the line keeps the count of segment programs solved."""
    _installed("highs")
    seen: list[dict[str, Any]] = []
    with progress.reporting(seen.append):
        partition(parse_profile(chain([3.0, 1.0, 2.0, 2.0])), [2, 2], [1e10, 1e9], method="ip", backend="highs")
    assert any(str(f.get("stage", "")).startswith("segment programs solved") for f in seen)
    assert [f for f in seen if {"incumbent", "bound", "gap"} & set(f)] == []


def test_layer_times_near_the_largest_float_solve_without_a_warning() -> None:
    """Two layers of 1e308 ms (finite, and so is the total): a fuzzer's profile.  Pruning the
    stages divided 1e305 s of work by a bound of milliseconds and numpy warned of the overflow on a
    correct answer; the infinite worker count only drops stages that cannot fit."""
    _installed("highs")
    text = EXAMPLE.read_text().replace("forward_compute_time=4.212", "forward_compute_time=1e308", 1)
    profile = parse_profile(text.replace("forward_compute_time=3.904", "forward_compute_time=1e308", 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ip = partition(profile, [4, 2], [1e10, 1e9], method="ip", backend="highs")
    dp = partition(profile, [4, 2], [1e10, 1e9])
    assert ip.time_per_sample == pytest.approx(dp.time_per_sample, rel=1e-12) and dp.time_per_sample == pytest.approx(2.5e304)


@pytest.mark.parametrize("extra, expected", [
    (["--backend", "highs"], "--backend and --time-limit apply to --method ip only"),
    (["--method", "ip", "--backend", "nosuch"], "unknown backend 'nosuch'"),
    (["--method", "ip", "--time-limit", "0"], "must be positive and finite"),
    (["--method", "simplex"], "invalid choice: 'simplex'"),
])
def test_cli_bad_method_options(extra: list[str], expected: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    code = main(["partition", str(EXAMPLE), "--machines", "2", "--bandwidth", "1e9", "--out", str(out), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and expected in err[0], err
    assert not out.exists()


def _update() -> None:
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(golden_text(), encoding="utf-8", newline="\n")
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        _update()
    else:
        print(__doc__)


# --------------------------------------------------------------------------- threshold programs
@pytest.mark.parametrize("name", ["vgg16-8", "alexnet-8", "vgg16-8-straight"])
def test_a_threshold_program_is_feasible_exactly_from_the_optimum_up(name: str) -> None:
    """P(τ) keeps every stage a pipeline of time <= τ can use: feasible at the dynamic program's
    optimum (and above), infeasible at the candidate time just below it; solve_segment finds it."""
    _installed("highs")
    from pal_opt.pipeline.ip import _candidate_stages, _program, _within_bound, solve_segment

    case = _case(name)
    states = build_states(load_profile(SHARED / "data" / "pipedream-profiles" / case["profile"]))
    (m,), (b,), straight = case["machines_per_level"], case["bandwidths"], case["straight_pipeline"]
    T, P = ArrayTable.segment_tables(states)
    j = states.n - 1
    best = partition(states, [m], [b], straight=straight).time_per_sample
    start, end, workers, times = _candidate_stages(states, T, P, 0, j, m, b, 1.0, straight)
    levels = np.unique(times)
    k = int(np.flatnonzero(levels == best)[0])

    def feasible(tau: float) -> bool:
        keep = _within_bound(start, end, workers, times, T, 0, j, m, tau)
        problem = _program(start[keep], end[keep], workers[keep], times[keep], 0, j, m, decide=True)
        answer = solve_stage_program(problem, "highs")
        assert answer is None or answer[0] <= tau
        return answer is not None

    assert feasible(float(levels[k])) and feasible(float(levels[min(k + 5, levels.size - 1)]))
    assert not feasible(float(levels[k - 1]))
    solved = solve_segment(states, T, P, 0, j, m, b, straight=straight, backend="highs")
    assert solved is not None and solved[0] == best


# --------------------------------------------------------------------------- lazy inner levels
LAZY_TREES = st.tuples(st.lists(st.tuples(st.integers(2, 4), st.sampled_from([1e9, 1.25e9, 1e10])), min_size=2,
                                max_size=3), st.booleans())


def _lazy_levels(states: Any, levels: list[tuple[int, float]], straight: bool) -> list[Any]:
    from pal_opt.pipeline.ip import solve_levels_ip

    try:
        return solve_levels_ip(states, levels, straight=straight, backend="highs")
    except InfeasiblePartitionError:
        return []


@settings(max_examples=30, **_SET)  # type: ignore[arg-type]
@given(small_dags(max_layers=6), LAZY_TREES)
def test_lazy_inner_levels_are_exact(text: str, tree: tuple[list[tuple[int, float]], bool]) -> None:
    """Two and three levels: the outer program sees lower bounds of the inner optima until it
    chooses a segment; the optimum equals the dynamic program's, every segment solved on demand
    has an exact time at least its bound, and each level's table agrees with the dynamic
    program's on the segments it solved."""
    _installed("highs")
    from pal_opt.pipeline.ip import SegmentTimes
    from pal_opt.pipeline.tables import solve_levels

    levels, straight = tree
    states = build_states(parse_profile(text))
    solved = _lazy_levels(states, levels, straight)
    if not solved:
        with pytest.raises(InfeasiblePartitionError, match="straight pipeline"):
            partition(states, [m for m, _ in levels], [b for _, b in levels], straight=True)
        return
    _check(text, tree, "highs")
    tables = solve_levels(states, levels, straight=straight, engine="numpy")
    raw, _ = ArrayTable.segment_tables(states)
    for index, (level, table) in enumerate(zip(solved, tables, strict=True)):
        assert level.stages, "every level solves at least the segment the level above chose"
        if index:  # an outer level: its known times are the inner optima, the rest lower bounds
            assert isinstance(level.times, SegmentTimes)
            exact = tables[index - 1].next_times()
            known = level.times.known & np.isfinite(raw)
            assert np.array_equal(level.T[known], exact[known])
            assert np.all(level.T[~known] <= exact[~known])
        for r, j in level.stages:
            assert level.optimum[r, j] == table.best(r, j, level.machines - 1)


@pytest.mark.parametrize("name", ["alexnet-4x4", "vgg16-4x4"])
def test_lazy_reference_case_solves_few_inner_segments(name: str) -> None:
    """The two-level reference cases that once solved one search per real segment: the same
    optimum as the authors', with a fraction of the inner segments solved."""
    _installed("highs")
    from pal_opt.pipeline.ip import solve_levels_ip

    case = _case(name)
    states = build_states(load_profile(SHARED / "data" / "pipedream-profiles" / case["profile"]))
    levels = list(zip(case["machines_per_level"], case["bandwidths"], strict=True))
    solved = solve_levels_ip(states, levels, backend="highs")
    assert math.isclose(float(solved[-1].optimum[0, states.n - 1]), case["expected"]["time_per_sample"], rel_tol=1e-6)
    assert 0 < len(solved[0].stages) < len(real_segments(states)) / 2


def test_progress_keeps_the_count_of_programs_on_the_solvers_stages() -> None:
    """The solver's own stages (``translating the program for highs``, ``solving``) replaced the
    count, so a long run's line read ``translating the program for highs`` for minutes (an
    operator's review)."""
    _installed("highs")
    seen: list[dict[str, Any]] = []
    with progress.reporting(seen.append):
        partition(parse_profile(chain([3.0, 1.0, 2.0, 2.0, 1.0, 3.0])), [2, 2], [1e10, 1e9], method="ip", backend="highs")
    stages = [str(f["stage"]) for f in seen if "stage" in f]
    first = next(k for k, s in enumerate(stages) if s.startswith("segment programs solved"))
    later = [s for s in stages[first:] if "translating the program" in s]
    assert later and all(s.startswith("segment programs solved: ") for s in later), later
