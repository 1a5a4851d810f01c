"""PipeDream's partitioner (:mod:`pal_opt.pipeline`).

* The 28 reference cases computed by the authors' optimiser (``../shared/reference/pipedream``;
  skipped when ``../shared`` is absent): same optimum to 1e-6, a consistent partition, and the
  numpy and pure-Python engines bit-identical.
* Hand-checked tiny profiles, and the cut states of a diamond worked out by hand.
* A brute force over every partition (every chain of cut states and every split of the workers,
  at every level) on random chains and small DAGs (hypothesis), against the dynamic program.
* Bad input: one line on stderr, exit status 2, no output file; a straight pipeline longer than
  the model is infeasible (exit status 1), not bad input.
* ``examples/data/tinynet_graph.txt``, our own small profile in the same format.
"""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_profiles import (
    RATES,
    brute_force,
    chain,
    check_consistent,
    compositions,
    layer_line,
    machine_trees,
    profile_text,
    small_dags,
    wide_two_levels,
)

from pal_opt.cli import main
from pal_opt.errors import InfeasiblePartitionError, InstanceError, OptionError
from pal_opt.pipeline import tables
from pal_opt.pipeline.cost import stage_time
from pal_opt.pipeline.partition import partition
from pal_opt.pipeline.profile import MAX_LAYERS, load_profile, parse_profile
from pal_opt.pipeline.states import StateGraph, build_states
from pal_opt.pipeline.tables import estimated_work

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "data" / "tinynet_graph.txt"
SHARED = ROOT.parent / "shared"
CASES = sorted((SHARED / "reference" / "pipedream").glob("*.json"))

_SET = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- the authors' cases
@functools.cache
def reference_states(profile: str) -> StateGraph:
    return build_states(load_profile(SHARED / "data" / "pipedream-profiles" / profile))


def _case(path: Path) -> dict[str, Any]:
    if not path.is_file():
        pytest.skip(f"shared data not available at {SHARED}")
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_reference_case_matches_the_authors_optimum(path: Path) -> None:
    case = _case(path)
    states = reference_states(case["profile"])
    result = partition(states, case["machines_per_level"], case["bandwidths"], straight=case["straight_pipeline"])
    assert math.isclose(result.time_per_sample, case["expected"]["time_per_sample"], rel_tol=1e-6)
    assert math.isclose(result.single_stage_time, case["expected"]["single_stage_time"], rel_tol=1e-9)
    check_consistent(result, states)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_reference_case_engines_agree_exactly(path: Path) -> None:
    case = _case(path)
    states = reference_states(case["profile"])
    if estimated_work(states.n, case["machines_per_level"], case["straight_pipeline"]) > 5_000_000:
        pytest.skip("the pure-Python engine takes seconds here; covered by the smaller cases")
    args = (states, case["machines_per_level"], case["bandwidths"])
    a = partition(*args, straight=case["straight_pipeline"], engine="numpy")
    b = partition(*args, straight=case["straight_pipeline"], engine="python")
    assert a == b


def test_reference_cases_are_all_there() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not available at {SHARED}")
    assert len(CASES) == 28


def test_reference_state_counts() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not available at {SHARED}")
    counts = {m: reference_states(f"{m}/graph.txt").n for m in ("alexnet", "vgg16", "gnmt", "resnet50")}
    assert counts == {"alexnet": 22, "vgg16": 40, "gnmt": 99, "resnet50": 240}  # the authors' "end" cuts


# --------------------------------------------------------------------------- by hand
def test_three_layer_chain_by_hand() -> None:
    # 3, 1 and 2 ms; no parameters.  Two workers: replicate everything, (3 + 1 + 2) / 2 = 3 ms,
    # ties with [3] | [1, 2] = max(3, 3); the whole segment wins the tie.
    result = partition(parse_profile(chain([3.0, 1.0, 2.0])), [2], [1e9])
    assert result.time_per_sample == pytest.approx(0.003)
    assert [(s.layer_ids, s.replicas) for s in result.stages] == [(("node1", "node2", "node3"), 2)]
    # Three workers, straight: one layer per stage, 3 ms.  Not straight: (6 / 3) = 2 ms.
    assert partition(parse_profile(chain([3.0, 1.0, 2.0])), [3], [1e9], straight=True).time_per_sample == pytest.approx(0.003)
    assert partition(parse_profile(chain([3.0, 1.0, 2.0])), [3], [1e9]).time_per_sample == pytest.approx(0.002)


def test_parameters_make_replication_expensive() -> None:
    # layer 2 holds 1 GB of weights at 1 GB/s: replicating it on 2 workers costs 4*1*1e9/(1e9*2) = 2 s of
    # synchronisation, so the best on 3 workers keeps it alone: [10 ms layer 1 on 2 workers] | [layer 2 on 1].
    text = chain([10.0, 4.0], params=[0.0, 1e9])
    result = partition(parse_profile(text), [3], [1e9])
    assert result.time_per_sample == pytest.approx(0.005)
    assert [(s.layer_ids, s.replicas) for s in result.stages] == [(("node1",), 2), (("node2",), 1)]
    assert result.levels[0][1].time == pytest.approx(0.004)
    # the same two layers replicated together: (14 ms + 2 s) / 2 per sample
    assert stage_time(0.014, 1e9, 2, 1e9) == pytest.approx((0.014 + 2.0) / 2)


def test_two_levels_by_hand() -> None:
    # 2 servers x 2 workers, no parameters: the 8 ms chain runs at 8 / 4 = 2 ms per sample.
    result = partition(parse_profile(chain([4.0, 2.0, 2.0])), [2, 2], [1e10, 1e9])
    assert result.time_per_sample == pytest.approx(0.002)
    assert sum(s.replicas for s in result.stages) == 4
    assert [len(level) for level in result.levels][-1] >= 1


def test_diamond_states_by_hand() -> None:
    # a -> b, a -> c, b -> d, c -> d: the cuts are {a}, {b}, {c}, {b, c}, {d}; the depth-first
    # numbering visits {c} before {b} (reverse post-order from {a}, children in discovery order).
    text = profile_text([layer_line(x, 1.0) for x in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    states = build_states(parse_profile(text))
    names = [tuple(states.profile.layers[v].id for v in a) for a in states.antichains]
    assert names == [("a",), ("c",), ("b",), ("b", "c"), ("d",)]
    assert states.cum_time == pytest.approx((0.001, 0.002, 0.002, 0.003, 0.004))
    assert not states.is_ancestor(1, 2) and not states.is_ancestor(2, 1)
    assert states.is_ancestor(1, 3) and states.is_ancestor(2, 3) and states.is_ancestor(0, 4)
    assert [states.profile.layers[v].id for v in states.segment_layers(2, 5)] == ["b", "d"]  # after {c}


def test_preprocessing_drops_inputs_and_unused_getitems() -> None:
    text = profile_text(
        [layer_line("in", 50.0, desc="Input"), layer_line("x", 1.0), layer_line("g0", 0.0, desc="__getitem__(0)"),
         layer_line("g1", 0.0, desc="__getitem__(1)"), layer_line("y", 2.0)],
        [("in", "x"), ("x", "g0"), ("x", "g1"), ("g0", "y")],
    )
    prepared = parse_profile(text).prepared()
    assert [layer.id for layer in prepared.layers] == ["x", "g0", "y"]  # g1 is an unused sink; g0 feeds y
    assert partition(parse_profile(text), [1], [1e9]).time_per_sample == pytest.approx(0.003)


# --------------------------------------------------------------------------- brute force
def test_compositions() -> None:
    assert compositions(4, 2) == [(1, 3), (2, 2), (3, 1)]
    assert compositions(2, 3) == []


@settings(max_examples=300, **_SET)  # type: ignore[arg-type]
@given(small_dags(), machine_trees())
def test_dynamic_program_matches_brute_force(text: str, tree: tuple[list[tuple[int, float]], bool]) -> None:
    check_against_brute_force(text, tree)


@settings(max_examples=150, **_SET)  # type: ignore[arg-type]
@given(small_dags(max_layers=4), wide_two_levels())
def test_dynamic_program_matches_brute_force_on_two_levels(text: str, tree: tuple[list[tuple[int, float]], bool]) -> None:
    check_against_brute_force(text, tree)


def check_against_brute_force(text: str, tree: tuple[list[tuple[int, float]], bool]) -> None:
    levels, straight = tree
    states = build_states(parse_profile(text))
    expected = brute_force(states, levels, straight)
    machines, rates = [m for m, _ in levels], [b for _, b in levels]
    if not math.isfinite(expected):  # a straight pipeline longer than the model
        assert states.max_stages() < math.prod(machines)
        with pytest.raises(InfeasiblePartitionError, match="straight pipeline"):
            partition(states, machines, rates, straight=True)
        return
    assert not straight or states.max_stages() >= math.prod(machines)
    for engine in ("numpy", "python"):
        result = partition(states, machines, rates, straight=straight, engine=engine)
        assert result.time_per_sample == pytest.approx(expected, rel=1e-12, abs=0.0)
        check_consistent(result, states)


# --------------------------------------------------------------------------- many workers per level
def _solved_both_ways(states: StateGraph, levels: list[tuple[int, float]],
                      block: int | None = None) -> tuple[list[Any], list[Any]]:
    """The numpy tables by the bounded search (every level; ``block`` triples a block, see
    ``tables._search``) and by the full (min, max) products."""
    with (mock.patch.object(tables, "PRODUCT_WORKER_LIMIT", 0),
          mock.patch.object(tables, "SEARCH_BLOCK_TRIPLES", block or tables.SEARCH_BLOCK_TRIPLES)):
        searched = tables.solve_levels(states, levels, engine="numpy")
    with mock.patch.object(tables, "PRODUCT_WORKER_LIMIT", 10**9):
        products = tables.solve_levels(states, levels, engine="numpy")
    return searched, products


def _same_tables(searched: list[Any], products: list[Any]) -> None:
    for a, b in zip(searched, products, strict=True):
        assert np.array_equal(a._best, b._best)  # the same floats, not merely close ones
        assert all(x is None and y is None or np.array_equal(x, y) for x, y in zip(a.last, b.last, strict=True))


@settings(max_examples=200, **_SET)  # type: ignore[arg-type]
@given(small_dags(max_layers=8), st.lists(st.tuples(st.integers(1, 40), RATES), min_size=1, max_size=2),
       st.sampled_from([1, 4, 1 << 16]))
def test_bounded_search_gives_the_full_products_tables(text: str, levels: list[tuple[int, float]], block: int) -> None:
    """The search over the last stage's workers near where head and tail cross (tables.py, "many
    workers") skips only candidates no smaller than the minimum: every table entry is the same
    float, zero times and parameter-heavy layers (a stage slower on two replicas than on one)
    included, whether the level is searched in one block of states or in many, and so is the
    partition read back."""
    states = build_states(parse_profile(text))
    _same_tables(*_solved_both_ways(states, levels, block))
    machines, rates = [m for m, _ in levels], [b for _, b in levels]
    with mock.patch.object(tables, "PRODUCT_WORKER_LIMIT", 0):
        searched = partition(states, machines, rates, engine="numpy")
    assert searched == partition(states, machines, rates, engine="python")


@pytest.mark.parametrize("machines", [[40, 3], [3, 40], [96]], ids=["40x3", "3x40", "96"])
@pytest.mark.parametrize("model", ["alexnet", "vgg16", "gnmt"])
def test_bounded_search_gives_the_full_products_tables_on_reference_profiles(model: str, machines: list[int]) -> None:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not available at {SHARED}")
    states = reference_states(f"{model}/graph.txt")
    _same_tables(*_solved_both_ways(states, list(zip(machines, [25e9, 3.125e9], strict=False))))


@st.composite
def level_tables(draw: Any) -> tuple[np.ndarray, np.ndarray, int, float, float, bool, int]:
    """One level's inputs drawn directly, not from a profile: times from a few values (ties, zeros),
    parameter sizes up to 1e13 bytes (a stage slower on more replicas, so heads and tails that rise
    at any worker count), real segments from a random state DAG (``T[r][j]``, ``r >= 1``, finite
    when state ``r - 1`` is an ancestor of ``j``), an inner level's divisor, all rows or row 0 only,
    and the triples per block of states of the search."""
    n = draw(st.integers(1, 7))
    times = st.sampled_from([0.0, 1e-3, 0.5, 1.0, 1.0, 2.0, 3.0, 7.25])
    sizes = st.sampled_from([0.0, 1e6, 1e9, 1e11, 1e13])
    ancestor = np.zeros((n, n), dtype=bool)
    for j in range(n):
        for i in range(j):
            if draw(st.booleans()):
                ancestor[:, j] |= ancestor[:, i]
                ancestor[i, j] = True
    T = np.full((n + 1, n), np.inf)
    P = np.zeros((n + 1, n))
    for r in range(n + 1):
        for j in range(n):
            if r == 0 or ancestor[r - 1, j]:
                T[r, j], P[r, j] = draw(times), draw(sizes)
    return (T, P, draw(st.integers(2, 40)), draw(RATES), draw(st.sampled_from([1.0, 2.0, 3.0, 16.0])),
            draw(st.booleans()), draw(st.sampled_from([1, 3, 1 << 16])))


@settings(max_examples=300, **_SET)  # type: ignore[arg-type]
@given(level_tables())
def test_bounded_search_gives_the_full_products_tables_on_random_tables(
        drawn: tuple[np.ndarray, np.ndarray, int, float, float, bool, int]) -> None:
    """The search's two kinds of triples (tables.py, "many workers": regular ones read at the
    crossing only; the others, whose head or last stage has risen, by the bounds and walks) give
    the products' tables bit for bit on arbitrary tables, where heads and tails rise often and at
    any worker count, in one block of states or many."""
    T, P, machines, rate, divisor, all_rows, block = drawn
    with (mock.patch.object(tables, "PRODUCT_WORKER_LIMIT", 0),
          mock.patch.object(tables, "SEARCH_BLOCK_TRIPLES", block)):
        searched = tables.ArrayTable.solve(T, P, machines, rate, divisor=divisor, all_rows=all_rows)
    with mock.patch.object(tables, "PRODUCT_WORKER_LIMIT", 10**9):
        products = tables.ArrayTable.solve(T, P, machines, rate, divisor=divisor, all_rows=all_rows)
    _same_tables([searched], [products])


def test_triples_leave_the_regular_search_and_the_tables_stay_the_products() -> None:
    """On the example profile at 64 x 64 some triples' heads or last stages rise, so they leave the
    regular triples for the bounded search (both kinds run), and every table entry is the
    products'."""
    states = build_states(load_profile(EXAMPLE))
    left: list[int] = []
    add = tables._Bounded.add

    def spy(self: Any, tri: Any, c: np.ndarray, level: Any) -> None:
        left.append(tri.size)
        add(self, tri, c, level)

    with mock.patch.object(tables._Bounded, "add", spy):
        searched, products = _solved_both_ways(states, [(64, 25e9), (64, 3.125e9)])
    assert sum(left) > 0
    _same_tables(searched, products)


def test_a_search_that_would_not_fit_in_memory_keeps_the_products(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search's arrays grow with the (row, split, state) triples; past SEARCH_MAX_BYTES a level
    keeps the products (bounded memory), with the same answer, and table_bytes counts whichever
    runs."""
    states = build_states(load_profile(EXAMPLE))
    n = states.n
    inner, outer = tables.search_bytes(n + 1, n, 64), tables.search_bytes(1, n, 64)
    assert tables.uses_search(n + 1, n, 64, False) and not tables.uses_search(n + 1, n, 64, True)
    assert not tables.uses_search(n + 1, n, tables.PRODUCT_WORKER_LIMIT, False)
    assert tables.table_bytes(n, [64, 64], "numpy") >= inner + tables.table_bytes(n, [64, 64], "numpy", straight=True)
    searched = partition(states, [64, 64], [25e9, 3.125e9])
    monkeypatch.setattr(tables, "SEARCH_MAX_BYTES", outer)  # the outer level still searches, the inner not
    assert not tables.uses_search(n + 1, n, 64, False) and tables.uses_search(1, n, 64, False)
    assert partition(states, [64, 64], [25e9, 3.125e9]) == searched


def test_a_thousand_workers_per_level_take_no_time() -> None:
    """``--machines 1024,1024``: a (min, max) product per worker split took 12 s of CPU on the
    example profile (half a million products per level); the bounded search needs a fraction of a
    second.  The answer is the one the products gave (their time per sample, to the bit, and their
    stages)."""
    profile = load_profile(EXAMPLE)
    start = time.process_time()
    result = partition(profile, [1024, 1024], [25e9, 3.125e9])
    assert time.process_time() - start < 4.0
    assert result.time_per_sample == 5.536016028790253e-08
    assert [(s.start, s.end, s.replicas) for s in result.stages] == [(0, 13, 1004544), (13, 16, 44032)]
    check_consistent(result, build_states(profile))


# --------------------------------------------------------------------------- the example profile
def test_example_profile_reads_and_partitions() -> None:
    profile = load_profile(EXAMPLE)
    assert len(profile.layers) == 15
    states = build_states(profile)
    assert [layer.id for layer in states.profile.layers if layer.id in ("node1", "node14")] == []  # Input, unused getitem
    assert states.n == 16
    assert states.cum_time[-1] == pytest.approx(0.044228)
    for machines, rates in (([4], [1e10]), ([2, 2], [2.5e10, 1.25e9]), ([4], [1e9])):
        result = partition(states, machines, rates)
        check_consistent(result, states)
        if len(machines) == 1:
            assert result.time_per_sample == pytest.approx(brute_force(states, list(zip(machines, rates, strict=True)), False))


def test_cli_writes_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, png = tmp_path / "out.json", tmp_path / "stages.png"
    args = ["partition", str(EXAMPLE), "--machines", "2,2", "--bandwidth", "2.5e10,1.25e9", "--out", str(out)]
    pytest.importorskip("matplotlib")
    assert main([*args, "--plot", str(png)]) == 0
    doc = json.loads(out.read_text())
    assert doc["time_per_sample"] == partition(load_profile(EXAMPLE), [2, 2], [2.5e10, 1.25e9]).time_per_sample
    assert [s["replicas"] for s in doc["stages"]] and all(len(s["layers"]) == 2 for s in doc["stages"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "stages.png"]  # no temporary left


def test_cli_as_a_process_is_deterministic(tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / f"{i}.json"
        proc = subprocess.run([sys.executable, "-m", "pal_opt.cli", "partition", str(EXAMPLE), "--machines", "4",
                               "--bandwidth", "1e9", "--out", str(out)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.append(out.read_text())
    assert outs[0] == outs[1]


def test_partition_is_listed_in_the_full_parser(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "partition" in capsys.readouterr().out


# --------------------------------------------------------------------------- bad input
GOOD = chain([1.0, 2.0, 3.0])
BAD_PROFILES = {
    "empty": ("", "profile is empty"),  # the file; parse_profile("") says "no layer lines"
    "garbage": ("hello world\n", "line 1: malformed layer line"),
    "bad number": (GOOD.replace("forward_compute_time=2.0", "forward_compute_time=abc"), "line 2: forward_compute_time: not a number"),
    "negative": (GOOD.replace("parameter_size=0.0", "parameter_size=-1", 1), "line 1: parameter_size: must be a finite number >= 0"),
    "nan": (GOOD.replace("backward_compute_time=0.0", "backward_compute_time=nan", 1), "line 1: backward_compute_time: must be"),
    "unknown field": (GOOD.replace("activation_size", "activation_bytes", 1), "line 1: unexpected field"),
    "missing field": (GOOD.replace(", parameter_size=0.0", "", 1), "line 1: missing field parameter_size"),
    "duplicate field": (GOOD.replace("parameter_size=0.0", "parameter_size=0.0, parameter_size=1.0", 1), "line 1: field parameter_size given twice"),
    "unclosed list": (GOOD.replace("activation_size=4.0", "activation_size=[4.0; 5.0", 1), "line 1: activation_size: unclosed list"),
    "duplicate layer": (GOOD.replace("node3 --", "node1 --", 1), "line 3: layer 'node1' declared twice"),
    "undeclared edge end": (GOOD + "\tnode3 -- node9\n", "line 6: edge names layer 'node9'"),
    "self loop": (GOOD + "\tnode2 -- node2\n", "line 6: edge from layer 'node2' to itself"),
    # named by the edge that closes it (it named the first edge of the file on the cycle)
    "cycle": (GOOD + "\tnode3 -- node1\n", "line 6: the layer graph has a cycle, node1 -> node2 -> node3 -> node1, "
                                          "closed by edge node3 -> node1"),
    "bad edge": (GOOD + "\tnode1 -> node2\n", "line 6: malformed edge line"),
    "only inputs": (layer_line("node1", 1.0, desc="Input") + "\n", "no layers are left"),
    "disconnected": (GOOD + layer_line("node4", 1.0) + "\n", "line 6: layer node4 is not connected to the first source node1"),
    "time overflow": (GOOD.replace("forward_compute_time=1.0, backward_compute_time=0.0",
                                   "forward_compute_time=1e308, backward_compute_time=1e308"),
                      "line 1: forward_compute_time + backward_compute_time overflows"),
    "list overflow": (GOOD.replace("activation_size=4.0", "activation_size=[1e308; 1e308]", 1),
                      "line 1: activation_size: the list's sum overflows"),
    "total overflow": (GOOD.replace("parameter_size=0.0", "parameter_size=1e308"), "parameter_size: the layers' total overflows"),
    # a chain of as many layers as the reader takes: found every layer's augmenting ancestors (quadratic, more
    # than 70 s) before the search could count its states
    "too many cut states": (chain([1.0] * MAX_LAYERS), "the layer graph has more than 2,000 cut states (antichains)"),
}


@pytest.mark.parametrize("name", list(BAD_PROFILES))
def test_bad_profile_exits_2_with_one_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = BAD_PROFILES[name]
    path = tmp_path / "graph.txt"
    path.write_text(text)
    out = tmp_path / "out.json"
    assert main(["partition", str(path), "--machines", "2", "--bandwidth", "1e9", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == ""
    assert lines[0].startswith(f"pal-opt: error: {path}: ") and expected in lines[0], lines[0]
    assert not out.exists() and list(tmp_path.iterdir()) == [path]


def test_bad_utf8_after_a_byte_order_mark_names_the_true_byte(tmp_path: Path) -> None:
    # the profile reader decoded with utf-8-sig, which counts from after the mark: byte 2 for byte 5
    path = tmp_path / "graph.txt"
    path.write_bytes(b"\xef\xbb\xbfab\xff")
    with pytest.raises(InstanceError, match=r"profile is not valid UTF-8 \(byte 5: "):
        load_profile(path)


def test_bad_profile_raises_instance_error_naming_the_line() -> None:
    with pytest.raises(InstanceError) as info:
        parse_profile(GOOD.replace("forward_compute_time=3.0", "forward_compute_time=inf"), source="g.txt")
    assert info.value.source == "g.txt" and info.value.path == "line 3"


@pytest.mark.parametrize("data, expected", [(b"\x00\x01", "binary"), (b"node1 -- \xff\xfe", "not valid UTF-8"),
                                            ("node1 -- a".encode("utf-16"), "profile is UTF-16 text")])
def test_unreadable_profiles(data: bytes, expected: str, tmp_path: Path) -> None:
    path = tmp_path / "graph.txt"
    path.write_bytes(data)
    with pytest.raises(InstanceError, match=expected):
        load_profile(path)


BAD_OPTIONS = {
    "zero machines": (["--machines", "0", "--bandwidth", "1e9"], "must be positive"),
    "not an integer": (["--machines", "2.5", "--bandwidth", "1e9"], "not an integer"),
    "negative bandwidth": (["--machines", "2", "--bandwidth", "-1"], "must be positive"),
    "infinite bandwidth": (["--machines", "2", "--bandwidth", "inf"], "must be positive and finite"),
    "nan bandwidth": (["--machines", "2", "--bandwidth", "nan"], "must be positive and finite"),
    "level count": (["--machines", "2,2", "--bandwidth", "1e9"], "--machines gives 2 levels but --bandwidth gives 1"),
    "one level": (["--machines", "2", "--bandwidth", "1e9,1e8"], "--machines gives 1 level but --bandwidth gives 2"),
    "too many workers": (["--machines", "5000", "--bandwidth", "1e9"], "argument --machines: at most 1,024 workers per level"),
    "plot format": (["--machines", "2", "--bandwidth", "1e9", "--plot", "x.nope"], "--plot x.nope: the file name must end in"),
    "missing profile": (["--machines", "2", "--bandwidth", "1e9"], "graph.txt: no such profile"),
}


@pytest.mark.parametrize("where, expected", [("dir", "is a directory"), ("missing/out.json", "does not exist")])
def test_bad_output_path_exits_2_before_any_work(where: str, expected: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dir").mkdir()
    path = tmp_path / "graph.txt"
    path.write_text(GOOD)
    assert main(["partition", str(path), "--machines", "2", "--bandwidth", "1e9", "--out", str(tmp_path / where)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and str(tmp_path / where) in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "graph.txt"]


@pytest.mark.parametrize("name", list(BAD_OPTIONS))
def test_bad_options_exit_2_with_one_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    options, expected = BAD_OPTIONS[name]
    if name == "plot format":
        pytest.importorskip("matplotlib")
    path = tmp_path / "graph.txt"
    if name != "missing profile":
        path.write_text(GOOD)
    out = tmp_path / "out.json"
    assert main(["partition", str(path), *options, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == "" and "Traceback" not in captured.err
    assert lines[0].startswith("pal-opt") and expected in lines[0], lines[0]
    assert not out.exists()


def test_pgf_plot_without_its_tex_system_exits_2_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A .pgf figure is drawn by a TeX process: without one, the run used to end in a traceback
    (exit 1) after the work."""
    matplotlib = pytest.importorskip("matplotlib")
    monkeypatch.setitem(matplotlib.rcParams, "pgf.texsystem", "lualatex")
    monkeypatch.setenv("PATH", str(tmp_path))  # no TeX here
    path, out = tmp_path / "graph.txt", tmp_path / "out.json"
    path.write_text(GOOD)
    args = ["partition", str(path), "--machines", "2", "--bandwidth", "1e9", "--out", str(out)]
    assert main([*args, "--plot", str(tmp_path / "stages.pgf")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err and captured.out == ""
    assert "--plot" in lines[0] and "stages.pgf" in lines[0] and "lualatex" in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == [path]


def test_partition_api_rejects_bad_levels() -> None:
    states = build_states(parse_profile(GOOD))
    for machines, rates, match in (([], [], "at least one level"), ([2], [1e9, 1e9], "levels"),
                                   ([True], [1e9], r"machines\[0\]"), ([2], ["fast"], r"bandwidths\[0\]"),
                                   ([2], [0.0], r"bandwidths\[0\]")):
        with pytest.raises(OptionError, match=match):
            partition(states, machines, rates)
    with pytest.raises(OptionError, match="engine"):
        partition(states, [2], [1e9], engine="fortran")


def test_partition_api_rejects_bad_ip_options_and_profiles() -> None:
    states = build_states(parse_profile(GOOD))
    for kwargs, match in ((dict(backend="highs"), "apply to method='ip' only"),
                          (dict(time_limit=5.0), "apply to method='ip' only"),
                          (dict(method="ip", time_limit=-1.0), "time_limit: must be a positive number"),
                          (dict(method="ip", time_limit=math.nan), "time_limit: must be a positive number"),
                          (dict(method="ip", time_limit="x"), "time_limit: must be a positive number"),
                          # past a float's range: OverflowError from float() before
                          (dict(method="ip", time_limit=10**400), "time_limit: must be a positive number")):
        with pytest.raises(OptionError, match=match):
            partition(states, [2], [1e9], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="bandwidth"):
        partition(states, [2], [10**400])  # an OverflowError before
    with pytest.raises(OptionError, match="profile: expected a Profile .* got str"):
        partition("graph.txt", [2], [1e9])  # type: ignore[arg-type]


def test_example_script_pipelining_beats_data_parallel_at_low_bandwidth(capsys: pytest.CaptureFixture[str]) -> None:
    import runpy

    fast, slow, two_levels = runpy.run_path(str(ROOT / "examples" / "pipeline_partition.py"))["main"]()
    assert fast.time_per_sample == fast.data_parallel_time and fast.total_stages == 1  # 25 GB/s: replicate all
    assert slow.time_per_sample < slow.data_parallel_time and slow.total_stages > 1   # 1 GB/s: pipeline
    assert two_levels.time_per_sample <= two_levels.data_parallel_time
    assert "cut states" in capsys.readouterr().out


def test_layers_unreachable_from_the_first_source_are_bad_input() -> None:
    # PipeDream starts from the first source only: a second component would be left out of every
    # stage and of the time per sample, so it is refused, naming its first layer.
    text = profile_text([layer_line(x, 1.0) for x in "abcd"], [("a", "b"), ("c", "d")])
    with pytest.raises(InstanceError, match=r"two.txt: line 3: layer c is not connected to the first source a \(2 layers"):
        build_states(parse_profile(text, source="two.txt"))


def test_times_that_overflow_are_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "graph.txt", tmp_path / "out.json"
    # 1 GB of activations and of parameters per layer over 1e-300 B/s: every answer on 4 workers
    # sends or synchronises one of them, and its time is not a float
    names = ["a", "b", "c"]
    path.write_text(profile_text([layer_line(n, 1.0, 0.0, 1e9, act="1e9") for n in names],
                                 [("a", "b"), ("b", "c")]))
    assert main(["partition", str(path), "--machines", "4", "--bandwidth", "1e-300", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == "" and not out.exists()
    assert lines[0].startswith(f"pal-opt: error: {path}: time_per_sample overflows (not a finite number)"), lines[0]


def test_a_data_parallel_baseline_that_overflows_is_null_not_an_error(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Only the baseline overflowed here (1 GB of parameters to synchronise over 1e-300 B/s); the
    answer, a pipeline with no replica, is finite, and was refused as bad input (review)."""
    path, out = tmp_path / "graph.txt", tmp_path / "out.json"
    path.write_text(chain([1.0, 2.0, 3.0], [1e9, 0.0, 0.0]))
    assert main(["partition", str(path), "--machines", "4", "--bandwidth", "1e-300", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["data_parallel_time"] is None and math.isfinite(doc["time_per_sample"])


@pytest.mark.parametrize("method", ["dp", "ip"])
def test_straight_pipeline_longer_than_the_model_is_infeasible_not_bad_input(
        method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if method == "ip":
        pytest.importorskip("highspy")
    # a diamond a -> b, c -> d: 5 cut states but at most 4 stages in a chain ({a}, {b,c}... see max_stages)
    text = profile_text([layer_line(x, 1.0) for x in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    states = build_states(parse_profile(text))
    assert (states.n, states.max_stages()) == (5, 4)
    assert partition(states, [4], [1e9], straight=True, method=method).total_stages == 4
    with pytest.raises(InfeasiblePartitionError, match="needs 5 stages, but the model can be cut into at most 4"):
        partition(states, [5], [1e9], straight=True, method=method)
    path, out = tmp_path / "graph.txt", tmp_path / "out.json"
    path.write_text(GOOD)
    argv = ["partition", str(path), "--machines", "2,2", "--bandwidth", "1e10,1e9", "--straight", "--out", str(out)]
    assert main([*argv, "--method", method]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == "" and "Traceback" not in captured.err
    assert lines[0] == (f"pal-opt: error: infeasible partition: {path}: a straight pipeline on 4 workers needs 4 "
                        "stages, but the model can be cut into at most 3 (its longest chain of cut states; 3 states "
                        "in all): use at most 3 workers or replicate stages (no --straight)")
    assert not out.exists()


def test_tables_too_large_is_an_option_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import pal_opt.pipeline.tables as tables

    states = build_states(parse_profile(chain([1.0] * 10)))
    assert tables.table_bytes(10, [4, 8], "numpy") < tables.table_bytes(10, [4, 8], "python")
    assert tables.table_bytes(1000, [1024], "numpy") > tables.MAX_TABLE_BYTES  # about 8 GB: refused
    monkeypatch.setattr(tables, "MAX_TABLE_BYTES", 1000)
    with pytest.raises(OptionError, match="tables would take about"):
        partition(states, [4, 8], [1e10, 1e9])


def test_profiles_and_results_are_immutable_and_compare_by_value() -> None:
    from pal_opt.pipeline.profile import Layer, Profile

    a, b = Layer("a", "Linear", 1.0, 1.0, 4.0, 0.0), Layer("b", "Linear", 2.0, 0.0, 4.0, 8.0)
    profile = Profile([a, b], [(0, 1)])
    assert profile == Profile((a, b), ((0, 1),)) and hash(profile) == hash(Profile((a, b), ((0, 1),)))
    assert profile.successors == ((1,), ()) and profile.topological_order == (0, 1)
    with pytest.raises(AttributeError, match="immutable"):
        profile.layers = ()  # type: ignore[misc]
    with pytest.raises(InstanceError, match=r"<memory>: edges\[1\]: the layer graph has a cycle, a -> b -> a, closed by edge b -> a"):
        Profile([a, b], [(0, 1), (1, 0)])
    result = partition(profile, [2], [1e10])
    with pytest.raises(AttributeError):
        result.time_per_sample = 0.0  # type: ignore[misc]
    assert result == partition(profile, [2], [1e10])


def test_a_flat_partition_is_a_jobs_pipeline() -> None:
    from pal_opt.model import Job, Pipeline

    flat = partition(load_profile(EXAMPLE), [4], [1e9])
    pipe = flat.job_pipeline()
    assert pipe == Pipeline(**flat.to_dict()["pipeline"])
    assert pipe.replicas == tuple(s.replicas for s in flat.stages) and pipe.gpus == 4
    assert max(pipe.stage_times) == flat.time_per_sample
    assert Job("j", 4, "classA", pipeline=pipe).pipeline == pipe  # ready for an instance
    two = partition(load_profile(EXAMPLE), [2, 2], [2.5e10, 1.25e9])
    assert two.job_pipeline() is None and "pipeline" not in two.to_dict()


def test_a_profile_that_takes_no_time_gives_no_jobs_pipeline(tmp_path) -> None:
    """Every compute time and size 0: the partition is still reported, but its `pipeline` (an
    instance file's jobs[].pipeline, which needs a stage that takes time) is left out; it was
    written with all-zero stage times, which load_instance refuses."""
    text = "".join(f"node{k} -- L -- forward_compute_time=0, backward_compute_time=0, activation_size=0, "
                   f"parameter_size=0\n" for k in (1, 2, 3)) + "\tnode1 -- node2\n\tnode2 -- node3\n"
    from pal_opt.pipeline import parse_profile

    result = partition(parse_profile(text), [2], [1e9])
    assert result.time_per_sample == 0.0 and result.job_pipeline() is None
    assert "pipeline" not in result.to_dict()
