"""``pal-opt simulate``: where the variability comes from, and several policies in one run.

The trace is the committed ``examples/data/trace.csv`` (24 jobs, Sia-Philly models).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pal_opt.cli import main

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "data" / "trace.csv"
WARNING = "pal-opt: warning: simulate: variability not chosen"


def _simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str, name: str = "r.json",
              code: int = 0) -> tuple[dict[str, Any], str]:
    out = tmp_path / name
    capsys.readouterr()
    cluster = [] if "--cluster" in args else ["--cluster", "4x4"]  # an option given twice is refused
    assert main(["simulate", str(TRACE), *cluster, "-o", str(out), "--quiet", *args]) == code
    err = capsys.readouterr().err
    return (json.loads(out.read_text()) if code == 0 else {}), err


def _warnings(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("pal-opt: warning:")]


# ----------------------------------------------------------------------------- variability source
def test_measurement_files_chosen_by_option(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            shared_dir: Path) -> None:
    longhorn = shared_dir / "data" / "pal-artifact" / "variability" / "longhorn"
    doc, err = _simulate(tmp_path, capsys, "--variability", str(longhorn))
    assert _warnings(err) == []
    src = doc["config"]["variability_source"]
    assert src == {"kind": "measurements", "chosen_by": "options", "defaulted": {}, "synthetic_seed": None}
    assert doc["config"]["variability"]["classA"].endswith("resnet-longhorn-agg.csv")
    # CLASS=FILE for every class the trace uses is as explicit
    files = [f"{c}={longhorn / f}" for c, f in (("classA", "resnet-longhorn-agg.csv"), ("classB", "bert-longhorn-agg.csv"),
                                                ("classC", "bert-longhorn-agg.csv"), ("classD", "pagerank-longhorn-agg.csv"))]
    same, err = _simulate(tmp_path, capsys, "--variability", *files, name="same.json")
    assert _warnings(err) == [] and same["avg_jct"] == doc["avg_jct"]


def test_synthetic_variability_chosen_by_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc, err = _simulate(tmp_path, capsys, "--synthetic-variability", "7")
    assert _warnings(err) == []
    assert doc["config"]["variability_source"] == {"kind": "synthetic", "chosen_by": "options", "defaulted": {},
                                                   "synthetic_seed": 7}
    assert set(doc["config"]["variability"].values()) == {"synthetic"}  # the shared files are not used
    again, _ = _simulate(tmp_path, capsys, "--synthetic-variability", "7", name="again.json")
    other, _ = _simulate(tmp_path, capsys, "--synthetic-variability", "8", name="other.json")
    assert again["job_results"] == doc["job_results"] and other["job_results"] != doc["job_results"]
    # the artifact's draw takes the same synthetic factors for classes without a file
    art, err = _simulate(tmp_path, capsys, "--synthetic-variability", "7", "--variability-draw", "artifact",
                         name="art.json")
    assert _warnings(err) == [] and art["job_results"] == doc["job_results"]


def test_neither_option_warns_once_and_records_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAL_OPT_SHARED", str(tmp_path / "no-shared"))  # a user's machine
    doc, err = _simulate(tmp_path, capsys)
    warn = _warnings(err)
    assert len(warn) == 1 and warn[0].startswith(WARNING)
    assert "classA, classB, classC, classD from the synthetic Longhorn-like model" in warn[0]
    assert err.strip() == warn[0]
    src = doc["config"]["variability_source"]
    assert src["kind"] == "synthetic" and src["chosen_by"] == "default" and src["synthetic_seed"] is None
    assert src["defaulted"] == dict.fromkeys(("classA", "classB", "classC", "classD"), "synthetic")
    # the default is the synthetic model seeded by --seed, as --synthetic-variability would give it
    explicit, err = _simulate(tmp_path, capsys, "--synthetic-variability", "0", name="explicit.json")
    assert _warnings(err) == [] and explicit["job_results"] == doc["job_results"]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--synthetic-variability", "0"], "the factors are the synthetic model's of --synthetic-variability 0 (give "
                                           "another SEED there for another draw)"),
        (["--synthetic-variability", "0", "--failures", "--failure-seed", "2"],
         "the factors are the synthetic model's of --synthetic-variability 0"),
        (["--synthetic-variability", "0", "--variability-draw", "artifact"],
         "--variability-draw artifact replays the PAL artifact's draw"),
        (["--cluster", str(ROOT / "instances" / "paper-16x4.json")], "the factors are --cluster "),
    ],
)
def test_a_seed_that_seeds_nothing_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                              why: str) -> None:
    """Runs under --seed 0, 1, 2 beside --synthetic-variability 0 were the same run three times
    (``pal-opt compare``: 24 of 24 jobs the same), each file recording its own seed."""
    _, err = _simulate(tmp_path, capsys, "--seed", "1", *args, code=2)
    assert err.startswith(f"pal-opt: error: --seed 1 changes nothing: {why}") and err.count("\n") == 1
    assert err.rstrip().endswith(", no policy is random and no failure is drawn by it")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("args", [["--policy", "pal,random"], ["--failures", "--failure-scale", "1000"]])
def test_a_seed_of_the_random_policy_or_the_failures_is_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               args: list[str]) -> None:
    one, _ = _simulate(tmp_path, capsys, "--synthetic-variability", "0", "--seed", "1", *args, name="one.json")
    two, _ = _simulate(tmp_path, capsys, "--synthetic-variability", "0", "--seed", "2", *args, name="two.json")
    last = (lambda d: d["results"]["random"]) if "random" in args[-1] else (lambda d: d)
    assert last(one)["job_results"] != last(two)["job_results"]  # the seed changed the run


def test_neither_option_on_a_machine_with_the_shared_files(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           shared_dir: Path) -> None:
    doc, err = _simulate(tmp_path, capsys)
    warn = _warnings(err)
    assert len(warn) == 1 and "from the PAL artifact's Longhorn measurements in" in warn[0]
    assert doc["config"]["variability_source"]["kind"] == "measurements"
    assert doc["config"]["variability_source"]["chosen_by"] == "default"


def test_a_class_left_to_the_default_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAL_OPT_SHARED", str(tmp_path / "no-shared"))
    m = tmp_path / "m.csv"
    m.write_text("uuid,perf\na,10\nb,11\nc,12\n", encoding="utf-8")
    doc, err = _simulate(tmp_path, capsys, "--variability", f"classA={m}")
    warn = _warnings(err)
    assert len(warn) == 1 and "using classB, classC, classD from the synthetic" in warn[0]
    src = doc["config"]["variability_source"]
    assert src["kind"] == "measurements+synthetic" and set(src["defaulted"]) == {"classB", "classC", "classD"}
    # the file and a seed: every class chosen
    doc, err = _simulate(tmp_path, capsys, "--variability", f"classA={m}", "--synthetic-variability", "1",
                         name="both.json")
    assert _warnings(err) == [] and doc["config"]["variability_source"]["chosen_by"] == "options"


def test_variability_directory_without_the_files_is_bad_input(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    _, err = _simulate(tmp_path, capsys, "--variability", str(tmp_path), code=2)
    assert "resnet-longhorn-agg.csv" in err and "no such file" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.json").exists()


# ----------------------------------------------------------------------------- several policies
def test_several_policies_in_one_run_and_one_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    from matplotlib.figure import Figure

    drawn: list[list[tuple[str, list[str]]]] = []
    save = Figure.savefig

    def spy(self: Figure, *a: Any, **kw: Any) -> Any:
        drawn.append([(ax.get_title(), [ln.get_label().split(" (avg")[0] for ln in ax.get_lines()
                                         if not ln.get_label().startswith("_")]) for ax in self.axes])
        return save(self, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", spy)
    png, jobs = tmp_path / "cmp.png", tmp_path / "jobs.csv"
    doc, err = _simulate(tmp_path, capsys, "--policy", "pal,packed-sticky", "--synthetic-variability", "1",
                         "--plot", str(png), "--jobs-csv", str(jobs))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # one figure, three panels (JCT CDF, utilisation over time, per-job JCT against the first
    # policy), one line per policy in each but the last, which compares the others with the first
    assert drawn == [[("JCT CDF", ["pal", "packed-sticky"]), ("Utilisation per round", ["pal", "packed-sticky"]),
                      ("Per-job JCT against pal", ["packed-sticky"])]]
    assert doc["policies"] == ["pal", "packed-sticky"] and list(doc["results"]) == doc["policies"]
    for policy, res in doc["results"].items():
        assert res["config"]["policy"] == policy and res["n_completed"] == 24
        assert res["config"]["variability_source"]["synthetic_seed"] == 1
    rows = jobs.read_text().splitlines()
    assert rows[0].startswith("policy,job_id,") and len(rows) == 1 + 2 * 24
    assert {r.split(",")[0] for r in rows[1:]} == {"pal", "packed-sticky"}
    # each policy's result is what a run of that policy alone gives
    alone, _ = _simulate(tmp_path, capsys, "--policy", "packed-sticky", "--synthetic-variability", "1",
                         name="alone.json")
    assert alone["job_results"] == doc["results"]["packed-sticky"]["job_results"]
    assert "policies" not in alone  # one policy: the result itself, as before


def test_several_policies_share_the_exact_methods_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc, _ = _simulate(tmp_path, capsys, "--policy", "pal,ilp", "--backend", "highs", "--time-limit", "5",
                       "--synthetic-variability", "1", "--cluster", "2x4")
    assert doc["results"]["ilp"]["config"]["backend"] == "highs"
    assert doc["results"]["pal"]["config"]["backend"] is None
    _, err = _simulate(tmp_path, capsys, "--policy", "pal,pmfirst", "--backend", "highs", name="bad.json", code=2)
    assert err.strip() == "pal-opt: error: option(s) --backend do not apply to methods 'pal', 'pmfirst'"
    _, err = _simulate(tmp_path, capsys, "--policy", "pal,best", name="bad.json", code=2)
    assert "unknown policy 'best'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad.json").exists()
    # a policy given twice was silently run once; it is a typo more often than not
    _, err = _simulate(tmp_path, capsys, "--policy", "pal,ilp,pal", name="bad.json", code=2)
    assert "policy 'pal' given twice in 'pal,ilp,pal'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad.json").exists()


def test_exact_flags_skip_a_greedy_policy_that_takes_none_of_them(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """preempt-greedy takes none of the integer program's flags (not even --admission): with
    ilp-preempt beside it, --time-limit goes to ilp-preempt only (it was refused for
    preempt-greedy, as if every flag applied to a policy that takes none)."""
    doc, _ = _simulate(tmp_path, capsys, "--policy", "preempt-greedy,ilp-preempt", "--time-limit", "5",
                       "--synthetic-variability", "1", "--cluster", "2x4", "--max-hours", "0.5")
    assert doc["results"]["ilp-preempt"]["config"]["time_limit"] == 5.0
    assert doc["results"]["preempt-greedy"]["config"]["time_limit"] is None


def test_plot_without_matplotlib_is_one_line_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    _, err = _simulate(tmp_path, capsys, "--policy", "pal,pmfirst", "--synthetic-variability", "1",
                       "--plot", str(tmp_path / "p.png"), code=2)
    assert err.startswith("pal-opt: error: --plot needs matplotlib") and err.count("\n") == 1
    assert "pip install 'pal-opt[plot]'" in err
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "p.png").exists()


def test_a_figure_that_fails_to_draw_leaves_no_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The figure is drawn before anything is written (the result file and the per-job table
    were written first, then the figure failed: half the outputs), and written atomically."""
    pytest.importorskip("matplotlib")
    from pal_opt.simulate import metrics

    def fail(ax: Any, results: Any) -> None:
        raise OSError("cannot draw")

    monkeypatch.setattr(metrics, "_draw_util", fail)
    _, err = _simulate(tmp_path, capsys, "--policy", "pal", "--synthetic-variability", "1", "--cluster", "2x4",
                       "--max-hours", "0.5", "--jobs-csv", str(tmp_path / "j.csv"), "--plot", str(tmp_path / "p.png"),
                       code=2)
    assert err.strip() == "pal-opt: error: cannot draw"
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    monkeypatch.undo()
    _simulate(tmp_path, capsys, "--policy", "pal", "--synthetic-variability", "1", "--cluster", "2x4",
              "--max-hours", "0.5", "--plot", str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.png", "r.json"]  # no temporary file left


def test_plot_format_is_checked_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a .txt plot used to fail with a traceback after the whole simulation, the result written
    _, err = _simulate(tmp_path, capsys, "--policy", "pal", "--synthetic-variability", "1",
                       "--plot", str(tmp_path / "p.txt"), code=2)
    assert "the file name must end in one of" in err and err.count("\n") == 1
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "p.txt").exists()


# ----------------------------------------------------------------------------- flags shared by commands
def test_simulate_rejects_an_unknown_backend_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, err = _simulate(tmp_path, capsys, "--policy", "ilp", "--backend", "nope", code=2)
    assert len(err.strip().splitlines()) == 1 and "argument --backend: invalid choice: 'nope'" in err
    assert "Traceback" not in err and not (tmp_path / "r.json").exists()


def test_simulate_help_lists_the_default_backend_first(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from pal_opt.ilp.backends import available_backends

    assert main(["simulate", "--help"]) == 0
    text = capsys.readouterr().out
    listed = re.search(r"--backend \{([a-z,]+)\}", text)
    assert listed is not None and "default: the first installed" in " ".join(text.split())
    assert listed.group(1).split(",")[0] == available_backends()[0]


def _subparsers(parser: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    import argparse

    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _subparsers(sub, (*path, name))
    return out


def test_o_and_out_mean_the_same_on_every_command() -> None:
    from pal_opt.cli import build_parser

    seen = []
    for path, parser in _subparsers(build_parser()):
        for action in parser._actions:
            if {"-o", "--out", "--output"} & set(action.option_strings):
                assert set(action.option_strings) == {"-o", "--out", "--output"}, (path, action.option_strings)
                seen.append(" ".join(path))
    assert {"solve", "generate", "simulate", "simulate-sia", "partition", "import blox", "export slurm"} <= set(seen)


# ----------------------------------------------------------------------------- review findings (2026-12-06)
MINI = ROOT / "examples" / "data" / "newtrace-mini.csv"


def test_a_variability_class_the_trace_does_not_use_is_bad_input(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``--variability resnet50=FILE`` (a model name, not a class) was silently unused, while the
    result file listed it as the variability of class resnet50."""
    f = ROOT / "examples" / "data" / "gpu_df.csv"  # any file: the class is refused before it is read
    _, err = _simulate(tmp_path, capsys, "--synthetic-variability", "1", "--variability", f"resnet50={f}", code=2)
    assert err.strip().splitlines() == [
        "pal-opt: error: --variability resnet50: no job of " + str(TRACE)
        + " has class 'resnet50' (its classes: classA, classB, classC, classD)"]
    assert not (tmp_path / "r.json").exists()


def test_failure_flags_on_a_sia_trace_run_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   shared_dir: Path) -> None:
    """The simulator of GPU types takes ``--failures`` (it refused them when it had none);
    a failure flag without ``--failures`` is still bad input."""
    out = tmp_path / "q.json"
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    assert main(["simulate", str(MINI), "--profiles", str(profiles), "--failure-scale", "10", "-o", str(out)]) == 2
    assert "--failure-scale needs --failures" in capsys.readouterr().err
    assert main(["simulate", str(MINI), "--profiles", str(profiles), "--failures", "--failure-scale", "20000",
                 "--repair-time", "600", "-o", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["failures"]["failures"] > 0 and doc["failure_config"]["scale"] == 20000
    assert doc["n_completed"] == doc["n_jobs"]
    # the file has the PAL result's failure_log and per-job columns
    assert len(doc["failure_log"]) == doc["failures"]["failures"]
    assert {"time", "kind", "component", "server", "gpus", "until", "jobs"} <= set(doc["failure_log"][0])
    assert sum(r["failures"] for r in doc["job_results"]) == doc["failures"]["jobs_hit"]
    assert sum(len(e["jobs"]) for e in doc["failure_log"]) == doc["failures"]["jobs_hit"]


def test_a_sia_trace_without_policy_runs_sia(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            shared_dir: Path) -> None:
    """``simulate`` ran type-blind ``pal`` on a sia trace when no --policy was given;
    ``simulate-sia``, "the same command", runs ``sia``."""
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    out = tmp_path / "q.json"
    assert main(["simulate", str(MINI), "--profiles", str(profiles), "-o", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["policy"] == "sia"


def test_a_sia_run_cut_short_says_so_in_its_result(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   shared_dir: Path) -> None:
    """Only a warning on stderr said a Sia run stopped with jobs unfinished (review)."""
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    out = tmp_path / "q.json"
    assert main(["simulate", str(MINI), "--profiles", str(profiles), "--max-hours", "0.01", "-o", str(out),
                 "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["stopped_at"] == 60.0 and doc["n_completed"] < doc["n_jobs"]


def test_a_stopped_run_says_so_in_its_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--max-hours`` cut the run, and the summary read like a finished one (its JCTs are of the
    finished jobs only)."""
    out = tmp_path / "r.json"
    assert main(["simulate", str(TRACE), "--cluster", "4x4", "--synthetic-variability", "0", "--policy", "pal",
                 "--max-hours", "3", "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    doc = json.loads(out.read_text())
    left = doc["n_jobs"] - doc["n_completed"]
    assert left > 0
    assert lines[1] == (f"pal: stopped at 3.00 h with {left} jobs unfinished; the JCT figures are of the "
                        f"{doc['n_completed']} that finished")
    assert main(["simulate", str(TRACE), "--cluster", "4x4", "--synthetic-variability", "0", "--policy", "pal",
                 "-o", str(out)]) == 0
    assert "stopped at" not in capsys.readouterr().out


def test_fallbacks_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The summary counted fallbacks and the round log marked them, with no reason anywhere."""
    out = tmp_path / "r.json"
    assert main(["simulate", str(TRACE), "--cluster", "8x8", "--synthetic-variability", "0", "--policy", "ilp",
                 "--time-limit", "0.01", "--max-hours", "1", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    log = json.loads(out.read_text())["round_log"]
    fell = [k for k, s in enumerate(log["status"]) if s == "fallback"]
    assert fell and all(log["note"][k] for k in fell) and not any(log["note"][k] for k in range(len(log["note"]))
                                                                   if k not in fell)
    assert f"ilp: {len(fell)} round{'s' * (len(fell) != 1)} fell back to the greedy placement; the first, round {fell[0]}" in text
    assert log["note"][fell[0]] in text


def test_a_class_given_twice_or_a_file_that_is_not_regular_is_refused(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``--variability classA=A.csv classA=B.csv`` kept B.csv silently; /dev/null was 'no such file'."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for p in (a, b):
        p.write_text("node,gpu,perf\nn1,0,1.0\nn1,1,1.1\n")
    _, err = _simulate(tmp_path, capsys, "--variability", f"classA={a}", f"classA={b}", code=2)
    assert err.strip() == f"pal-opt: error: --variability: class 'classA' given twice (classA={a} and classA={b})"
    _, err = _simulate(tmp_path, capsys, "--variability", "classA=/dev/null", code=2)
    assert err.strip() == ("pal-opt: error: /dev/null: --variability classA: not a regular file (a FIFO, a device or "
                           "a symbolic link that leads nowhere)")


def test_measurement_paths_that_are_not_files_say_what_they_are(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """simulate-sia called /dev/null "no such file", generate --measurements called a directory
    "measurement file not found", and a Longhorn directory named 'run=1' was read as CLASS=FILE."""
    from pal_opt.cli import main
    from pal_opt.io.measurements import not_a_file

    assert not_a_file("/dev/null").startswith("not a regular file") and not_a_file(tmp_path).startswith("a directory")
    assert not_a_file(tmp_path / "none.csv") == "no such file"
    meas = tmp_path / "m"
    meas.mkdir()
    (meas / "resnet-longhorn-agg.csv").mkdir()
    assert main(["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1", "--measurements", str(meas),
                 "-o", str(tmp_path / "g.json")]) == 2
    assert f"resnet-longhorn-agg.csv: --measurements {meas}: a directory, not a measurement CSV file" in capsys.readouterr().err
    run = tmp_path / "run=1"
    run.mkdir()
    for name in ("resnet", "bert", "pagerank"):
        (run / f"{name}-longhorn-agg.csv").write_text("perf\n1.0\n1.1\n0.9\n")
    doc, _ = _simulate(tmp_path, capsys, "--variability", str(run))
    assert doc["config"]["variability_source"]["kind"] == "measurements"


@pytest.mark.parametrize(("flags", "message"), [
    (["--cluster", "2x2x4", "--rack-penalty", "3"],
     "--rack-penalty 3 is above --locality-penalty 1.7, the slowdown across racks"),
    (["--cluster", "4x4", "--rack-penalty", "1.2"], "--rack-penalty applies to a racked cluster"),
    (["--cluster", "4x4", "--model-class", "resnet50=classZ"], "class 'classZ' has no GPU factors"),
])
def test_bad_options_are_one_line_before_any_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     flags: list[str], message: str) -> None:
    """The variability warning used to come first, then an error about ``jobs[0].locality``."""
    out = tmp_path / "r.json"
    assert main(["simulate", str(TRACE), *flags, "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pal-opt: error:") and message in err, err
    assert not out.exists()


def test_a_stopped_sia_run_says_so_in_hours_and_its_comparison_says_the_jobs_differ(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], shared_dir: Path) -> None:
    """A Sia run cut by --max-hours printed a warning in seconds, and compared averages over
    different sets of finished jobs without a word (review)."""
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    out = tmp_path / "q.json"
    assert main(["simulate", str(MINI), "--profiles", str(profiles), "--policy", "sia,pal", "--max-hours", "0.5",
                 "-o", str(out)]) == 0
    captured = capsys.readouterr()
    docs = json.loads(out.read_text())["results"]
    for policy, doc in docs.items():
        left = doc["n_jobs"] - doc["n_completed"]
        if left:
            jobs = "job" if left == 1 else "jobs"
            assert (f"{policy}: stopped at 0.50 h with {left} {jobs} unfinished; the JCT figures are of the "
                    f"{doc['n_completed']} that finished") in captured.out
    assert "stopped at" not in captured.err  # no warning: the stop was asked for
    done = {p: d["n_completed"] for p, d in docs.items()}
    compared = [line for line in captured.out.splitlines() if line.startswith("avg JCT against sia")]
    if len(set(done.values())) > 1 and compared:
        assert compared[0].endswith(f"(over different jobs: {done['sia']} finished under sia, "
                                    f"{done['pal']} finished under pal)")


def test_readme_max_hours_lines_are_what_the_command_prints(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The README quotes the two lines a stopped run prints, for a command on the shipped trace;
    they are that command's (the quote once said 18/24 and 6, which no run of this trace printed)."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    command = ("pal-opt simulate examples/data/trace.csv --cluster 4x4 --synthetic-variability 0 "
               "--max-hours 3 --out r.json")
    assert f"`{command}` prints a line starting `pal: 14/24 jobs finished`" in readme
    quoted = "pal: stopped at 3.00 h with 10 jobs unfinished; the JCT figures are of the 14 that finished"
    assert f"`{quoted}`" in readme
    capsys.readouterr()
    assert main(["simulate", str(TRACE), "--cluster", "4x4", "--synthetic-variability", "0", "--max-hours", "3",
                 "--out", str(tmp_path / "r.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("pal: 14/24 jobs finished") and lines[1] == quoted


@pytest.mark.parametrize(("flags", "row", "message"), [
    ([], "bert-1,120,bert,eight,384", "row 3, column num_replicas: must be a positive integer, got 'eight'"),
    ([], "bert-1,120", "line 3: has 2 fields but the header has 5"),
    (["--cluster", "aws:6y4"], None, "--cluster: expected TYPE:SERVERSxGPUS"),
    (["--policy", "sia", "--ilp-mode", "joint"], None, "--ilp-mode applies to --policy ilp only"),
])
def test_bad_input_on_a_sia_trace_is_one_line_before_the_profiles_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, shared_dir: Path,
        flags: list[str], row: str | None, message: str) -> None:
    """Without --profiles, the line naming the default profiles came first, then the error (two
    lines for bad input); it now waits for the inputs to be checked, as a PAL trace's variability
    warning does."""
    monkeypatch.setenv("PAL_OPT_SHARED", str(shared_dir))
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,4,2048\n"
                     + (row or "bert-1,120,bert,8,384") + "\n")
    out = tmp_path / "r.json"
    assert main(["simulate", str(trace), *flags, "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pal-opt: error:") and message in err, err
    assert not out.exists()
    assert main(["simulate", str(MINI), "-o", str(out), "--quiet", "--max-hours", "0.02"]) == 0  # a good run warns
    assert capsys.readouterr().err.startswith("pal-opt: warning: --profiles not given; using the Sia artifact's")


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="no /dev/fd")
def test_a_trace_from_a_pipe_is_refused_in_one_line_unless_its_format_is_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate <(zcat trace.csv.gz)`` read the header to tell the format, which used the pipe
    up: ``trace file is empty``.  The format is not read from a pipe; given, the pipe is read once."""
    def piped() -> str:
        r, w = os.pipe()
        os.write(w, TRACE.read_bytes())  # 1 kB: within the pipe's buffer
        os.close(w)
        return f"/dev/fd/{r}"

    out = tmp_path / "r.json"
    path = piped()
    assert main(["simulate", path, "--cluster", "4x4", "--synthetic-variability", "0", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"pal-opt: error: {path}: is a pipe or a device, not a file: the trace format is read from its "
                   "header before the trace is, which would use it up; give --trace-format pal or sia, or save the "
                   "trace to a file\n")
    assert not out.exists()
    os.close(int(path.rsplit("/", 1)[1]))
    path = piped()
    assert main(["simulate", path, "--trace-format", "pal", "--cluster", "4x4", "--synthetic-variability", "0",
                 "-o", str(out), "--quiet"]) == 0
    os.close(int(path.rsplit("/", 1)[1]))
    assert json.loads(out.read_text())["n_completed"] == 24


@pytest.mark.parametrize("flag", ["-o", "--jobs-csv"])
def test_an_output_over_a_default_measurement_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch, shared_dir: Path,
                                                              flag: str) -> None:
    """Without --variability the factors come from the shared Longhorn files, which no output
    was checked against: ``-o .../resnet-longhorn-agg.csv`` wrote the result over the measurements."""
    longhorn = tmp_path / "shared" / "data" / "pal-artifact" / "variability" / "longhorn"
    longhorn.mkdir(parents=True)
    for f in (shared_dir / "data" / "pal-artifact" / "variability" / "longhorn").glob("*-longhorn-agg.csv"):
        (longhorn / f.name).write_bytes(f.read_bytes())
    monkeypatch.setenv("PAL_OPT_SHARED", str(tmp_path / "shared"))
    target = longhorn / "resnet-longhorn-agg.csv"
    before = target.read_bytes()
    outputs = {"-o": str(tmp_path / "r.json"), flag: str(target)}
    argv = ["simulate", str(TRACE), "--cluster", "4x4", "--quiet"] + [x for kv in outputs.items() for x in kv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (f"pal-opt: error: {'--out' if flag == '-o' else flag} {target}: this is the input variability file "
                   f"of classA ({target}), which it would overwrite; write to another file\n")
    assert target.read_bytes() == before and not (tmp_path / "r.json").exists()


def test_synthetic_variability_that_no_class_takes_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With a --variability file for every class of the trace, --synthetic-variability SEED changed
    nothing, and the result recorded ``synthetic_seed: SEED`` all the same."""
    longhorn = tmp_path / "longhorn"
    longhorn.mkdir()
    for app in ("resnet", "bert", "pagerank"):
        (longhorn / f"{app}-longhorn-agg.csv").write_text("uuid,perf\na,10\nb,11\nc,12\n", encoding="utf-8")
    _, err = _simulate(tmp_path, capsys, "--variability", str(longhorn), "--synthetic-variability", "5", code=2)
    assert err == (f"pal-opt: error: --synthetic-variability 5 changes nothing: every class of {TRACE} (classA, "
                   "classB, classC, classD) draws its factors from a --variability file\n")
    doc, err = _simulate(tmp_path, capsys, "--variability", str(longhorn))
    assert err == "" and doc["config"]["variability_source"]["synthetic_seed"] is None


@pytest.mark.parametrize("sep, name", [(";", "';'"), ("\t", "tabs")])
@pytest.mark.parametrize("fmt", ["auto", "pal", "sia"])
def test_a_trace_not_separated_by_commas_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 shared_dir: Path, sep: str, name: str, fmt: str) -> None:
    """A trace saved with ';' or tabs was one column named by the whole header line: 'cannot tell
    the trace format' or 'missing column(s) ...' without a word on why."""
    source = MINI if fmt == "sia" else TRACE
    trace = tmp_path / "t.csv"
    trace.write_text(source.read_text().replace(",", sep))
    extra = ["--profiles", str(shared_dir / "data" / "sia-artifact" / "profiles")] if fmt == "sia" else []
    out = tmp_path / "r.json"
    assert main(["simulate", str(trace), "--trace-format", fmt, *extra, "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not out.exists()
    assert err.endswith(f"(the header has no comma but {name}: pal-opt reads comma-separated files)\n"), err
