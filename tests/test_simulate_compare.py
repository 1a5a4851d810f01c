"""``pal-opt compare``: the result files of separate ``simulate`` runs side by side.

The runs replay the committed ``examples/data/trace.csv`` (24 jobs) on 4 x 4 GPUs with the
synthetic variability, so that they need no shared data.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from pal_opt.cli import main
from pal_opt.errors import OptionError
from pal_opt.simulate.compare import comparison_report, differing_settings, load_runs, run_settings
from pal_opt.simulate.metrics import jct_figure, job_ratios

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "data" / "trace.csv"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three result files: PAL and PM-First in one run, PAL with λ 2.5, PAL with the factors of
    another synthetic seed."""
    d = tmp_path_factory.mktemp("compare")
    base = ["simulate", str(TRACE), "--cluster", "4x4", "--quiet"]
    files = {"two": d / "two.json", "lam": d / "lam.json", "draw": d / "draw.json"}
    assert main([*base, "--synthetic-variability", "0", "--policy", "pal,pmfirst", "-o", str(files["two"])]) == 0
    assert main([*base, "--synthetic-variability", "0", "--locality-penalty", "2.5", "-o", str(files["lam"])]) == 0
    assert main([*base, "--synthetic-variability", "1", "-o", str(files["draw"])]) == 0
    return files


def _doc(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_labels_table_settings_and_per_job_figures(runs: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    summary = tmp_path / "s.csv"
    capsys.readouterr()
    assert main(["compare", str(runs["two"]), str(runs["lam"]), str(runs["draw"]), "--csv", str(summary)]) == 0
    out = capsys.readouterr().out.splitlines()
    two, lam, draw = _doc(runs["two"]), _doc(runs["lam"]), _doc(runs["draw"])
    pal, pmfirst = two["results"]["pal"], two["results"]["pmfirst"]
    rows = {ln.split()[0]: ln for ln in out[2:6]}
    assert list(rows) == ["two:pal", "two:pmfirst", "lam", "draw"]
    assert rows["two:pal"].split()[1:3] == ["24/24", f"{pal['avg_jct'] / 3600:.2f}"]
    assert rows["lam"].endswith(f"{lam['avg_jct'] / pal['avg_jct'] - 1:+.1%}")
    assert rows["two:pmfirst"].endswith(f"{pmfirst['avg_jct'] / pal['avg_jct'] - 1:+.1%}")
    # what differs: the policy, λ and the synthetic seed; not the trace, cluster or round length
    differ = out[out.index("settings that differ:") + 1: out.index("per-job JCT against two:pal's (over the jobs both finished):")]
    assert [ln.split(":")[0].strip() for ln in differ] == ["policy", "locality_penalty", "variability_source"]
    assert differ[1] == "  locality_penalty: 1.7 (two:pal, two:pmfirst, draw); 2.5 (lam)"
    # per job against the first run: as job_ratios counts them
    ratio = job_ratios(pal, draw)
    assert out[-1] == f"wrote {summary}"
    line = out[-2]
    assert line.split()[0] == "draw" and f"{int((ratio < 1 - 1e-9).sum())} faster" in line
    assert f"{int((ratio > 1 + 1e-9).sum())} slower" in line and "(of 24)" in line
    with summary.open() as f:
        table = list(csv.DictReader(f))
    assert [r["run"] for r in table] == ["two:pal", "two:pmfirst", "lam", "draw"]
    assert [r["policy"] for r in table] == ["pal", "pmfirst", "pal", "pal"]
    assert float(table[2]["avg_jct"]) == lam["avg_jct"] and float(table[3]["makespan"]) == draw["makespan"]
    assert table[0]["file"] == str(runs["two"])


def test_identical_runs_are_named_so(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "again.json"
    copy.write_text(runs["lam"].read_text())
    loaded = load_runs([runs["lam"], copy])
    lines = comparison_report(loaded)
    assert "settings that differ: none (the same settings in every run)" in lines
    assert lines[-1].split() == ["again", "median", "1.000x,", "0", "faster,", "0", "slower,", "24", "the", "same",
                                 "(of", "24)"]
    assert lines[3].split()[0] == "again" and lines[3].split()[-1] == "+0.0%"


def test_runs_over_different_jobs_are_named_so(runs: dict[str, Path], tmp_path: Path) -> None:
    short = tmp_path / "short.json"
    assert main(["simulate", str(TRACE), "--cluster", "4x4", "--quiet", "--synthetic-variability", "0",
                 "--max-hours", "3", "-o", str(short)]) == 0
    lines = comparison_report(load_runs([runs["lam"], short]))
    n = _doc(short)["n_completed"]
    assert n < 24
    assert lines[4] == f"the averages are over different jobs: lam 24 of 24, short {n} of 24 finished"
    assert "the averages are over different jobs" not in " ".join(comparison_report(load_runs([runs["two"]])))


def test_one_file_of_several_policies_is_labelled_by_policy(runs: dict[str, Path]) -> None:
    loaded = load_runs([runs["two"]])
    assert list(loaded) == ["pal", "pmfirst"]
    assert run_settings(loaded["pmfirst"])["policy"] == "pmfirst"
    assert list(differing_settings(loaded)) == ["policy"]


def test_a_runs_label_given_as_a_file_says_what_to_give(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``compare two.json:pal lam.json`` (the label the table prints for a run of a file of several
    policies) said only ``two.json:pal: no such result file``."""
    from pal_opt.errors import MissingFileError

    label = f"{runs['two']}:pal"
    with pytest.raises(MissingFileError, match=rf"^{label}: no such result file \(FILE:POLICY is how compare labels a "
                                               rf"run of a file of several policies, not a file to give: give "
                                               rf"{runs['two']}, each of whose policies is a run\)$"):
        load_runs([label, runs["lam"]])
    assert main(["compare", label, str(runs["lam"])]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_files_of_one_name_are_labelled_by_path(runs: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for sub in ("a", "b"):
        (tmp_path / sub / "r.json").write_text(runs["lam"].read_text())
    paths = [str(tmp_path / "a" / "r.json"), str(tmp_path / "b" / "r.json")]
    assert list(load_runs(paths)) == paths


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d, runs: [str(runs["lam"])], "compare needs at least two runs: "),
        (lambda d, runs: [str(runs["lam"]), str(ROOT / "instances" / "paper-16x4.json")],
         "paper-16x4.json: is a pal-opt instance file, not a result of pal-opt simulate"),
        (lambda d, runs: [str(runs["lam"]), str(d / "missing.json")], "missing.json"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(runs: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str], make: Any, message: str) -> None:
    out = tmp_path / "s.csv"
    capsys.readouterr()
    assert main(["compare", *make(tmp_path, runs), "--csv", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pal-opt: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_an_output_over_an_input_is_refused(runs: dict[str, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    before = runs["lam"].read_bytes()
    capsys.readouterr()
    assert main(["compare", str(runs["two"]), str(runs["lam"]), "--csv", str(runs["lam"])]) == 2
    assert "which it would overwrite" in capsys.readouterr().err
    assert runs["lam"].read_bytes() == before


def test_the_figure_title_names_only_what_every_run_shares(runs: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from pal_opt.simulate import metrics

    loaded = load_runs([runs["two"], runs["lam"]])
    assert metrics._figure_title(loaded) == "trace.csv, cluster 4x4, 360 s rounds, seed 0"  # noqa: SLF001
    other = dict(loaded["lam"], config=dict(loaded["lam"]["config"], seed=3, round_length=60))
    assert metrics._figure_title({"a": loaded["two:pal"], "b": other}) == "trace.csv, cluster 4x4"  # noqa: SLF001
    png = tmp_path / "c.png"
    assert main(["compare", str(runs["two"]), str(runs["lam"]), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert jct_figure(loaded, "x.png")[:8] == b"\x89PNG\r\n\x1a\n"  # runs without a round log (Sia's)


def test_comparison_report_needs_two_runs(runs: dict[str, Path]) -> None:
    one = load_runs([runs["two"]])
    with pytest.raises(OptionError, match="at least two runs, got 1"):
        comparison_report({"pal": one["pal"]})


def test_the_per_job_table_gives_each_runs_jct_and_ratio(runs: dict[str, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "jobs.csv"
    assert main(["compare", str(runs["lam"]), str(runs["two"]), "--jobs-csv", str(table)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {table}"
    with table.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["job", "submit_time", "jct:lam", "jct:two:pal", "jct:two:pmfirst", "ratio:two:pal", "ratio:two:pmfirst"]
    lam, pmfirst = _doc(runs["lam"]), _doc(runs["two"])["results"]["pmfirst"]
    assert [r["job"] for r in rows] == [str(j["job_id"]) for j in lam["job_results"]]
    for row, a, b in zip(rows, lam["job_results"], pmfirst["job_results"], strict=True):
        assert float(row["jct:lam"]) == a["jct"] and float(row["jct:two:pmfirst"]) == b["jct"]
        assert float(row["ratio:two:pmfirst"]) == pytest.approx(b["jct"] / a["jct"])
    ratios = sorted(float(r["ratio:two:pal"]) for r in rows)
    assert ratios == pytest.approx(job_ratios(lam, _doc(runs["two"])["results"]["pal"]).tolist())


def test_the_per_job_table_leaves_unfinished_and_missing_jobs_empty() -> None:
    from pal_opt.simulate import job_jcts_csv_text

    def run(*jobs: tuple[str, float | None]) -> dict[str, Any]:
        return {"n_jobs": len(jobs), "n_completed": sum(j is not None for _, j in jobs), "avg_jct": 1.0,
                "job_results": [{"name": n, "jct": j} for n, j in jobs]}

    text = job_jcts_csv_text({"a": run(("x", 10.0), ("y", None)), "b": run(("y", 5.0), ("x", 20.0), ("z", 1.0))})
    assert text.splitlines() == ["job,submit_time,jct:a,jct:b,ratio:b", "x,,10.0,20.0,2.0", "y,,,5.0,", "z,,,1.0,"]


def _result(jcts: dict[str, float | None], **settings: Any) -> dict[str, Any]:
    """A result as ``simulate`` writes one, by hand: per job its JCT (None: not finished), and the
    run's settings (a PAL run's ``config``, or with ``sia=True`` a Sia run's top-level settings)."""
    done = [v for v in jcts.values() if v is not None]
    res: dict[str, Any] = {"n_jobs": len(jcts), "n_completed": len(done), "avg_jct": sum(done) / max(len(done), 1),
                           "job_results": [{"job_id": k, "jct": v} for k, v in jcts.items()]}
    if settings.pop("sia", False):
        res.update(settings)
    else:
        res["config"] = settings
    return res


def test_the_per_job_lines_are_one_per_later_run() -> None:
    runs = {"a": _result({"x": 10.0, "y": 20.0}), "b": _result({"x": 5.0, "y": 20.0}),
            "c": _result({"x": 20.0, "y": 40.0})}
    lines = comparison_report(runs)
    per_job = lines[lines.index("per-job JCT against a's (over the jobs both finished):") + 1:]
    assert per_job == ["  b  median 0.750x, 1 faster, 0 slower, 1 the same (of 2)",
                       "  c  median 2.000x, 0 faster, 2 slower, 0 the same (of 2)"]


def test_settings_that_differ_are_those_a_user_set_otherwise() -> None:
    # a mapping of the same entries written in another order is the same setting
    same = {"a": _result({"x": 1.0}, sia=True, policy_parameters={"p": 0.5, "lambda_n": 1.1}),
            "b": _result({"x": 1.0}, sia=True, policy_parameters={"lambda_n": 1.1, "p": 0.5})}
    assert differing_settings(same) == {}
    # a Sia run's seed is one of its settings
    seeds = {"a": _result({"x": 1.0}, sia=True, trace="t.csv", seed=0),
             "b": _result({"x": 1.0}, sia=True, trace="t.csv", seed=1)}
    assert differing_settings(seeds) == {"seed": {"a": 0, "b": 1}}
    # what the cluster setting implies (its GPUs and servers) is not listed beside it
    clusters = {"a": _result({"x": 1.0}, cluster="4x4", num_gpus=16, num_servers=4),
                "b": _result({"x": 1.0}, cluster="8x4", num_gpus=32, num_servers=8)}
    assert differing_settings(clusters) == {"cluster": {"a": "4x4", "b": "8x4"}}
    # a setting one run lacks is None there, even when every run that has it agrees
    lacking = {"a": _result({"x": 1.0}, seed=0, max_time=3600), "b": _result({"x": 1.0}, seed=0),
               "c": _result({"x": 1.0}, seed=0, max_time=3600)}
    assert differing_settings(lacking) == {"max_time": {"a": 3600, "b": None, "c": 3600}}
    lines = comparison_report(lacking)
    assert lines[lines.index("settings that differ:") + 1] == "  max_time: 3600 (a, c); null (b)"


def test_runs_that_finished_as_many_jobs_but_not_the_same_are_named_so() -> None:
    """Two runs stopped early that each finished 2 of 3 jobs, not the same two: their averages are
    over different jobs, as when the counts differ."""
    runs = {"a": _result({"x": 1.0, "y": 2.0, "z": None}), "b": _result({"x": 1.0, "y": None, "z": 4.0})}
    lines = comparison_report(runs)
    assert lines[4] == "the averages are over different jobs: a 2 of 3, b 2 of 3 finished"
    same = {"a": _result({"x": 1.0, "y": 2.0, "z": None}), "b": _result({"x": 3.0, "y": 1.0, "z": None})}
    assert not any(ln.startswith("the averages are over different jobs") for ln in comparison_report(same))


def test_the_per_job_figure_is_the_median_ratio() -> None:
    # ratios 1, 1 and 4: median 1 (the mean would be 2)
    runs = {"a": _result({"x": 10.0, "y": 10.0, "z": 10.0}), "b": _result({"x": 10.0, "y": 10.0, "z": 40.0})}
    assert comparison_report(runs)[-1] == "  b  median 1.000x, 0 faster, 1 slower, 2 the same (of 3)"


def test_files_of_one_name_are_labelled_by_path_when_one_holds_several_policies(tmp_path: Path) -> None:
    # a/r1.json holds two policies, b/r1.json one: the labels r1:pal, r1:ilp and r1 would not
    # tell the two files apart, so every run is labelled by its file's path
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    several, one = tmp_path / "a" / "r1.json", tmp_path / "b" / "r1.json"
    several.write_text(json.dumps({"policies": ["pal", "ilp"], "results": {"pal": _result({"x": 1.0}, policy="pal"),
                                                                           "ilp": _result({"x": 2.0}, policy="ilp")}}))
    one.write_text(json.dumps(_result({"x": 3.0}, policy="pal")))
    assert list(load_runs([several, one])) == [f"{several}:pal", f"{several}:ilp", str(one)]
