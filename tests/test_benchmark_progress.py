"""The progress bars of the benchmarks that ran for minutes in silence (``benchmarks/_results.py``'s
``progress_bar``): drawn on a terminal only, one step per run, up to the total."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _results
        import ilp_paper_cluster
    finally:
        sys.path.remove(str(BENCHMARKS))
    return SimpleNamespace(results=_results, paper=ilp_paper_cluster)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_is_drawn_on_a_terminal_only(bench: Any, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with bench.results.progress_bar(3, "bench", "run") as bar:
        for _ in range(3):
            bar.update(1)
    assert capsys.readouterr().err == ""  # a log file or a pipe gets no bar characters
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with bench.results.progress_bar(3, "bench", "run") as bar:
        for _ in range(3):
            bar.update(1)
    assert "bench: 100%" in term.getvalue() and "3/3" in term.getvalue()


def test_ilp_paper_cluster_counts_every_round_it_solves(bench: Any) -> None:
    """One step per round solved per backend (the warm-up solve is not one), so the bar of
    ``main`` (backends × rounds + the scale cases) ends at its total, not short of it or past it."""
    from pal_opt.ilp import available_backends

    ticks: list[int] = []
    _, results = bench.paper.bench_paper(2, lambda: ticks.append(1))
    assert len(ticks) == 2 * len(available_backends()) == sum(len(rs) for rs in results.values())
