"""The summary's closing lines (pal_opt/simulate/metrics.py) on hand-written figures: rules no
test held (a mutation audit of the module)."""

from __future__ import annotations

from pal_opt.simulate import metrics
from pal_opt.simulate.metrics import comparison_lines, unfinished_line


def test_unfinished_line_counts_neither_the_finished_nor_the_unplaceable_jobs() -> None:
    assert unfinished_line("pal", {"n_jobs": 5, "n_completed": 2, "stopped_at": 5400.0}, 1) == (
        "pal: stopped at 1.50 h with 2 jobs unfinished; the JCT figures are of the 2 that finished")
    # 3 finished and 2 unplaceable: every job is accounted for, nothing is unfinished
    assert unfinished_line("pal", {"n_jobs": 5, "n_completed": 3, "stopped_at": 5400.0}, 2) is None
    assert unfinished_line("pal", {"n_jobs": 5, "n_completed": 5}, 0) is None


def test_comparison_lines_give_each_policys_average_against_the_first() -> None:
    # b's average is 150 s against a's 100 s: +50% (not a's against b's, -33.3%); c has none;
    # every policy finished 2 jobs, so no note; one file written is not listed
    assert comparison_lines({"a": 100.0, "b": 150.0, "c": None}, ["x.json"], {"a": 2, "b": 2, "c": 2}) == [
        "avg JCT against a: b +50.0%"]
    assert comparison_lines({"a": 100.0, "b": 80.0}, ["x.json", "y.csv"], {"a": 3, "b": 2}) == [
        "avg JCT against a: b -20.0% (over different jobs: 3 finished under a, 2 finished under b)",
        "wrote x.json, y.csv"]


def _run(seed: int) -> dict:
    return {"config": {"trace": "/data/trace.csv", "cluster": "4x4", "round_length": 360.0, "seed": seed}}


def test_the_figure_title_names_what_every_run_shares() -> None:
    title = metrics._figure_title  # noqa: SLF001
    assert title({"a": _run(0)}) == "trace.csv, cluster 4x4, 360 s rounds, seed 0"  # one run: all of it
    # the seed of a and b, not c's: not in the title (though more than one run shares it)
    assert title({"a": _run(0), "b": _run(0), "c": _run(1)}) == "trace.csv, cluster 4x4, 360 s rounds"
