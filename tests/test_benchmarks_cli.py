"""Every benchmark writes the committed ``benchmarks/results/`` only with ``--update``, naming its command.

The benchmarks themselves take minutes to an hour and are not run here: each script's ``--help``
must offer ``--update`` and ``--out-dir`` (``benchmarks/_results.py``), each script's ``main`` must
pass its own arguments to ``produced_by`` or ``command_line`` (so its results header names the command),
every committed results page must name its command or say it was not recorded, and one cheap path
(``startup.py --quick --repeats 1``) runs for real, leaving the committed results untouched.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"
SCRATCH = RESULTS / "scratch"
# every script in benchmarks/ (not the _helpers), so a new benchmark is checked without being listed
SCRIPTS = tuple(sorted(p.stem for p in BENCHMARKS.glob("*.py") if not p.stem.startswith("_")))


def _bench(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def _committed() -> dict[str, tuple[str, int]]:
    """Hash and modification time of every committed result file."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(RESULTS.iterdir()) if p.is_file()}


def test_the_scripts_are_found() -> None:
    assert {"pal_a1", "suite", "startup"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_offers_update_and_out_dir(name: str) -> None:
    proc = _bench(name, "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--update" in proc.stdout and "--out-dir" in proc.stdout
    assert "--out " not in proc.stdout and "--out=" not in proc.stdout  # the old flag is gone
    # how long the whole run takes, from the docstring's "Runs for about" paragraph (README's table agrees)
    assert "Runs for about" in proc.stdout, f"benchmarks/{name}.py --help does not say how long it runs"


README_HEADER = "| script | what | runs for |"


def _runs_for(readme: str) -> dict[str, str]:
    """README's benchmarks table: script name -> its *runs for* cell (stripped)."""
    lines = readme.splitlines()
    assert README_HEADER in lines, f"README.md has no benchmarks table headed {README_HEADER!r}"
    start = lines.index(README_HEADER) + 2  # after the |---| line
    cells: dict[str, str] = {}
    for line in lines[start:]:
        if not line.startswith("| `benchmarks/"):
            break
        row = [c.strip() for c in line.strip().strip("|").split(" | ")]
        cells[row[0].removeprefix("`benchmarks/").removesuffix(".py`")] = row[2] if len(row) > 2 else ""
    return cells


def _missing_runs_for(readme: str) -> list[str]:
    """Scripts (not the _helpers) without a row in README's benchmarks table, or with an empty *runs for* cell."""
    cells = _runs_for(readme)
    return [name for name in SCRIPTS if not cells.get(name)]


def test_readme_says_how_long_every_benchmark_runs() -> None:
    # a new benchmark cannot be added without its row and run time (README.md; docs/guide.md links to it)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert _missing_runs_for(readme) == []
    assert sorted(_runs_for(readme)) == sorted(SCRIPTS), "the table names a script that is not in benchmarks/"


def test_the_runs_for_check_sees_a_removed_row_and_an_empty_cell() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `benchmarks/suite.py` |"))
    assert _missing_runs_for(readme.replace(row + "\n", "")) == ["suite"]
    emptied = row.rsplit(" | ", 1)[0] + " |  |"
    assert _missing_runs_for(readme.replace(row, emptied)) == ["suite"]


_RUN_TIME = re.compile(r"(?:≈|about) (\d[\d.]*) (s|min)\b")
_FIGURE = re.compile(r"(\d[\d,.]*) ?(s|min)\b")


def _docstring_run_time(name: str) -> str:
    line = _results_module().run_time(ast.get_docstring(ast.parse((BENCHMARKS / f"{name}.py").read_text("utf-8"))))
    return line or ""


def _run_time_disagreements(cells: dict[str, str], docstrings: dict[str, str]) -> list[str]:
    """Scripts whose README *runs for* cell and docstring give another run time, or whose cell
    quotes a figure (``428 s``, ``1,365 s``) that the docstring's paragraph does not."""
    bad = []
    for name, cell in sorted(cells.items()):
        doc = docstrings.get(name, "")
        head = _RUN_TIME.match(cell)
        doc_head = re.match(r"Runs for about (\d[\d.]*) (s|min)\b", doc)
        missing = set(_FIGURE.findall(cell)) - set(_FIGURE.findall(doc))
        if head is None or doc_head is None or head.groups() != doc_head.groups() or missing:
            bad.append(name)
    return bad


def test_readme_and_docstrings_give_the_same_run_times() -> None:
    # README's table and each docstring quote the same figures of the committed page; one
    # re-run that updates only one of them (sia_fidelity's 265 s -> 428 s) shows here
    cells = _runs_for((ROOT / "README.md").read_text(encoding="utf-8"))
    docstrings = {name: _docstring_run_time(name) for name in SCRIPTS}
    assert _run_time_disagreements(cells, docstrings) == []
    stale = dict(cells, suite=cells["suite"].replace("714 s", "700 s"))
    assert _run_time_disagreements(stale, docstrings) == ["suite"]
    longer = dict(cells, failures=cells["failures"].replace("≈ 40 s", "≈ 50 s"))
    assert _run_time_disagreements(longer, docstrings) == ["failures"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_docstring_says_how_long_its_run_takes(name: str) -> None:
    line = _results_module().run_time(ast.get_docstring(ast.parse((BENCHMARKS / f"{name}.py").read_text("utf-8"))))
    assert line is not None, f"benchmarks/{name}.py: its docstring has no 'Runs for about' paragraph"
    assert "on the machine of the committed page" in line


def _results_module():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _results
    finally:
        sys.path.remove(str(BENCHMARKS))
    return _results


def test_command_line_quotes_the_arguments() -> None:
    r = _results_module()
    script = str(BENCHMARKS / "suite.py")
    line = r.command_line(script, ["--families", "size-flat,load", "--out-dir", "/tmp/a b"])
    assert line == "python benchmarks/suite.py --families size-flat,load --out-dir '/tmp/a b'"
    assert shlex.split(line)[2:] == ["--families", "size-flat,load", "--out-dir", "/tmp/a b"]
    assert r.command_line(script, []) == "python benchmarks/suite.py"
    assert r.produced_by(script, ["--update"], date=False, commit=False) == \
        "Produced by `python benchmarks/suite.py --update`"


def test_produced_by_names_the_date_and_the_commit() -> None:
    """A results page says when and on which code it was produced, not only the command: most
    committed pages named only the command and the machine."""
    r = _results_module()
    line = r.produced_by(str(BENCHMARKS / "suite.py"), ["--update"])
    m = re.fullmatch(r"Produced by `python benchmarks/suite\.py --update` on (\d{4}-\d{2}-\d{2}) at commit (\S+)", line)
    assert m, line
    assert m.group(2) == r.source_commit()
    assert r.produced_by(str(BENCHMARKS / "suite.py"), [], commit=False).startswith("Produced by `python benchmarks/suite.py` on ")
    assert " on " not in r.produced_by(str(BENCHMARKS / "suite.py"), [], date=False)


def _helper_calls(name: str) -> list[ast.Call]:
    """Calls of ``produced_by``/``command_line`` inside the script's ``main`` with (``__file__``, ``argv``)."""
    tree = ast.parse((BENCHMARKS / f"{name}.py").read_text(encoding="utf-8"))
    main = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"), None)
    assert main is not None, f"{name}.py has no main()"
    return [
        node for node in ast.walk(main)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in ("produced_by", "command_line")
        and [a.id if isinstance(a, ast.Name) else None for a in node.args[:2]] == ["__file__", "argv"]
    ]


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_writer_records_its_command(name: str) -> None:
    assert _helper_calls(name), (f"benchmarks/{name}.py: main() must put produced_by(__file__, argv) (or "
                                 "command_line(__file__, argv)) in its results header")
    source = (BENCHMARKS / f"{name}.py").read_text(encoding="utf-8")
    assert "Command: `python" not in source  # the hand-built lines the helper replaced


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_committed_page_names_its_command(name: str) -> None:
    text = (RESULTS / f"{name}.md").read_text(encoding="utf-8")
    assert f"`python benchmarks/{name}.py" in text, f"results/{name}.md names no command"
    if "Command not recorded" not in text:
        # a command that writes the committed results takes --update (the ones from before it existed say so)
        assert "--update" in text, f"results/{name}.md gives a command without --update"


def test_interrupts_restores_sigint_when_started_with_it_ignored() -> None:
    """A process started with SIGINT ignored (``cmd &`` from a non-interactive shell) got no Ctrl-C
    from ``_thread.interrupt_main``: every case of interrupts.py's part B ran to its end and the
    page said "finished first" throughout.  The benchmark puts Python's handler back."""
    import signal

    code = ("import signal, sys; sys.path.insert(0, sys.argv[1]); import interrupts; "
            "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN, interrupts.handle_sigint(), "
            "signal.getsignal(signal.SIGINT) is signal.default_int_handler, interrupts.handle_sigint())")
    proc = subprocess.run([sys.executable, "-c", code, str(BENCHMARKS)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "True", "True", "False"]


def test_update_and_out_dir_exclude_each_other(tmp_path: Path) -> None:
    proc = _bench("startup", "--update", "--out-dir", str(tmp_path), "--quick")
    assert proc.returncode != 0
    assert "not both" in proc.stderr


def test_a_quick_run_refuses_update() -> None:
    before = _committed()
    proc = _bench("startup", "--quick", "--repeats", "1", "--update")
    assert proc.returncode != 0
    assert "--quick" in proc.stderr and "drop --update" in proc.stderr
    assert _committed() == before


def test_a_run_without_update_leaves_the_committed_results_alone(tmp_path: Path) -> None:
    before = _committed()
    scratch = SCRATCH / "startup.md"
    old = scratch.stat().st_mtime_ns if scratch.exists() else None
    proc = _bench("startup", "--quick", "--repeats", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _committed() == before
    assert scratch.is_file() and scratch.stat().st_mtime_ns != old
    assert "pass --update to replace the committed results" in proc.stderr
    assert scratch.read_text(encoding="utf-8").startswith("# Start-up")

    out = tmp_path / "out"
    proc = _bench("startup", "--quick", "--repeats", "1", "--out-dir", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "startup.md").is_file()
    text = (out / "startup.md").read_text(encoding="utf-8")
    assert "`pal-opt --help`" in text
    assert f"Produced by `{shlex.join(['python', 'benchmarks/startup.py', '--quick', '--repeats', '1', '--out-dir', str(out)])}`" in text
    assert _committed() == before


#: A bad value of a list-valued (or counted) option: usage and one error line naming the flag and the
#: value, exit 2, before any work (nothing written, no traceback).
BAD_OPTIONS = [
    ("scaling", "--sizes", "foo"),
    ("scaling", "--backends", "foo"),
    ("measured_cluster", "--workloads", "9"),
    ("pipeline_sim", "--traces", "9"),
    ("pipeline_sim", "--draws", "x"),
    ("repair", "--backends", "foo"),
    ("repair", "--seeds", "-1"),
    ("time_limit", "--limits", "-1"),
    ("time_limit", "--sizes", "12"),
    ("types_scale", "--backends", "foo"),
    ("stage_scale", "--sizes", "12"),
    ("scale", "--ks", "0"),
    ("scale_large", "--sizes", "100"),
    ("warm_resolve", "--sizes", "x"),
    ("pal_1024", "--policies", "foo"),
    ("pal_a1", "--workers", "0"),
    ("failures", "--seeds", "-1"),
    ("sia_failures", "--scale", "0"),
    ("sia_fidelity", "--tie-backends", "foo"),
    ("pipedream_ip", "--cases", "foo"),
    ("pipedream_partition", "--cases", "zzz"),
    ("racked_rounds", "--count", "0"),  # "--reps and --count >= 1, ... expected" named no value
    ("racked_restart", "--last", "4"),  # (below --first, 10)
    ("reproducible_loop", "--net", "nan"),  # a traceback from the solver's options, after the output directory
]


#: Scripts that look for ``../shared`` before they can check the option (the reference cases, the data).
NEEDS_SHARED = {"pipedream_ip", "pipedream_partition", "pipeline_placement", "pipeline_sim", "stage_scale"}
SHARED = ROOT.parent / "shared"


@pytest.mark.parametrize(("name", "flag", "value"), BAD_OPTIONS)
def test_a_bad_option_is_one_line_before_any_work(name: str, flag: str, value: str, tmp_path: Path) -> None:
    if name in NEEDS_SHARED and flag == "--cases" and not SHARED.is_dir():
        pytest.skip("../shared is absent")
    out = tmp_path / "out"
    proc = _bench(name, flag, value, "--out-dir", str(out), timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    *usage, error = proc.stderr.strip().splitlines()
    assert usage and usage[0].startswith("usage:") and all(line.startswith(" ") for line in usage[1:]), proc.stderr
    assert error.startswith(f"{name}.py: error: {flag} ") and value in error, error
    assert proc.stdout == ""
    assert not out.exists()  # refused before the output directory, let alone the runs


#: Runs whose options differ from those that produced the committed page: they cannot --update.
PARTIAL_RUNS = [
    ("pal_a1", "--quick"),
    ("pal_lambda", "--quick"),
    ("failures", "--seeds", "0"),
    ("sia_failures", "--scale", "100"),
    ("pipeline_sim", "--traces", "1"),
    ("types_scale", "--backends", "highs"),
    ("repair", "--seeds", "0"),
    ("stage_scale", "--sizes", "256"),
    ("scale", "--ks", "2"),
    ("ilp_paper_cluster", "--no-scale"),
    ("ilp_paper_cluster", "--rounds", "2"),
    ("pipeline_placement", "--rounds", "2"),
    ("racked_rounds", "--count", "2"),  # "a partial (options other than the defaults) run" named none
    ("racked_restart", "--reps", "2"),
    ("reproducible_loop", "--net", "2"),
]


@pytest.mark.parametrize("args", PARTIAL_RUNS, ids=lambda a: " ".join(a))
def test_a_partial_run_refuses_update(args: tuple[str, ...]) -> None:
    name, *rest = args
    if name in NEEDS_SHARED and not SHARED.is_dir():
        pytest.skip("../shared is absent")
    before = _committed()
    proc = _bench(name, *rest, "--update", timeout=60)
    if proc.returncode == 0 and "skipped" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode != 0
    assert f"a {rest[0]} run does not replace the committed results; drop --update" in proc.stderr, proc.stderr
    assert _committed() == before


def test_the_option_checks_name_the_option_and_its_value(capsys: pytest.CaptureFixture[str]) -> None:
    """``at_least``, ``positive_seconds`` and ``partial_run`` (``_results``), which the benchmarks
    call with the options they check: usage and one line naming the flag and the value, exit 2; the
    partial-run label from the parser's defaults."""
    import argparse

    r = _results_module()
    ap = argparse.ArgumentParser(prog="bench")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tasks", type=int, default=None)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--quick", action="store_true")
    for argv, check, line in (
            (["--reps", "0"], lambda a: r.at_least(ap, a, 1, "max_tasks", "reps"), "--reps 0: at least 1"),
            (["--time-limit", "nan"], lambda a: r.positive_seconds(ap, a, "time_limit"),
             "--time-limit nan: seconds > 0 expected"),
            (["--time-limit", "-1"], lambda a: r.nonnegative_seconds(ap, a, "time_limit"),
             "--time-limit -1: seconds >= 0 expected")):
        with pytest.raises(SystemExit) as info:
            check(ap.parse_args(argv))
        assert info.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == f"bench: error: {line}"
    r.at_least(ap, ap.parse_args([]), 1, "reps", "max_tasks")  # None: not given, not checked
    r.positive_seconds(ap, ap.parse_args([]), "time_limit")
    assert r.partial_run(ap, ap.parse_args([]), "reps", "time_limit", "quick", also={"--x": False}) is None
    assert r.partial_run(ap, ap.parse_args(["--reps", "3", "--time-limit", "10"]), "reps", "time_limit") is None
    assert r.partial_run(ap, ap.parse_args(["--quick", "--time-limit", "2"]), "reps", "time_limit", "quick",
                         also={"--x": True}) == "--time-limit --quick --x"


# --------------------------------------------------------------------------- kept runs' fingerprint
def test_the_fingerprint_covers_the_benchmark_script_and_its_data(tmp_path: Path) -> None:
    """``code_fingerprint(scripts, data)`` changes with the script's source and with any data file
    (a directory counts every file under it), not with where they are; without them it is the
    fingerprint of pal_opt and the packages alone, as before."""
    r = _results_module()
    script, data = tmp_path / "bench.py", tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    script.write_text("SEED = 0\n")
    (data / "sub" / "trace.csv").write_text("a,b\n1,2\n")
    first = r.code_fingerprint(scripts=[script], data=[data])
    assert first == r.code_fingerprint(scripts=[str(script)], data=[str(data)]) != r.code_fingerprint()
    assert len(first) == 12 and r.code_fingerprint() == r.code_fingerprint()

    script.write_text("SEED = 10\n")  # (another size: the digests are cached on path, size and mtime)
    changed_script = r.code_fingerprint(scripts=[script], data=[data])
    (data / "sub" / "trace.csv").write_text("a,b\n1,20\n")
    changed_data = r.code_fingerprint(scripts=[script], data=[data])
    (data / "sub" / "new.csv").write_text("x\n")
    added = r.code_fingerprint(scripts=[script], data=[data])
    assert len({first, changed_script, changed_data, added}) == 4

    elsewhere = tmp_path / "copy"
    (elsewhere / "data" / "sub").mkdir(parents=True)
    (elsewhere / "bench.py").write_bytes(script.read_bytes())
    for f in ("trace.csv", "new.csv"):
        (elsewhere / "data" / "sub" / f).write_bytes((data / "sub" / f).read_bytes())
    assert r.code_fingerprint(scripts=[elsewhere / "bench.py"], data=[elsewhere / "data"]) == added
    assert r.code_fingerprint(scripts=[script], data=[tmp_path / "absent"]) != added
    (data / "sub" / "new.csv").rename(data / "sub" / "renamed.csv")  # (a file's name inside the data counts)
    assert r.code_fingerprint(scripts=[script], data=[data]) not in (added, changed_data)


def test_benchmarks_that_keep_runs_fingerprint_their_script_and_data() -> None:
    """Every benchmark that re-uses kept runs (``kept_runs`` or ``fresh_runs``) keys them on a
    fingerprint of its own source and its data: none calls ``code_fingerprint()`` without them."""
    keepers = [p for p in sorted(BENCHMARKS.glob("*.py"))
               if any(call in p.read_text(encoding="utf-8") for call in ("kept_runs(", "fresh_runs("))]
    assert {p.stem for p in keepers} >= {"sia_compare", "sia_ceiling", "sia_variants"}
    for path in keepers:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "code_fingerprint":
                assert node.args or node.keywords, f"{path.name}: code_fingerprint() without its script and data"


# --------------------------------------------------------------------------- without ../shared
#: The scripts that take ``--shared`` and need it.
TAKE_SHARED = ("pipedream_ip", "pipedream_partition", "pipeline_placement", "pipeline_sim", "stage_scale")


@pytest.mark.parametrize("name", TAKE_SHARED)
def test_missing_shared_data_is_one_line_and_exit_2(name: str, tmp_path: Path) -> None:
    """Found by review: ``pipedream_partition`` ended with exit 1 and a line that did not name it
    when its shared data was absent; every script taking ``--shared`` says so in one line, exit 2,
    before the output directory is made."""
    out = tmp_path / "out"
    proc = _bench(name, "--shared", str(tmp_path / "absent"), "--out-dir", str(out), timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{name}: ") and str(tmp_path / "absent") in lines[0], lines
    assert not out.exists()


def test_pages_say_when_the_factors_are_synthetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Found by review: ``scale_large`` and ``warm_resolve`` wrote "Longhorn measurements" on their
    page when ``../shared`` was absent and the rounds had the synthetic Longhorn-like factors."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import scale_large
        import suite
        import warm_resolve
    finally:
        sys.path.remove(str(BENCHMARKS))
    monkeypatch.setattr(suite, "LONGHORN", tmp_path / "absent")
    assert suite.measurements() is None
    for page in ("\n".join(scale_large.report([], "Produced by `x`")), "\n".join(warm_resolve.report([], "Produced by `x`"))):
        assert "synthetic Longhorn-like factors (../shared absent)" in page and "Longhorn measurements" not in page
    if SHARED.is_dir():
        monkeypatch.setattr(suite, "LONGHORN", SHARED / "data" / "pal-artifact" / "variability" / "longhorn")
        assert "λ = 1.7, Longhorn measurements;" in "\n".join(warm_resolve.report([], "Produced by `x`"))


def test_the_provenance_says_what_each_kept_fingerprint_covers() -> None:
    """Found by review: ``runs_provenance`` called every fingerprint one "of the code, packages,
    benchmark and data", so a page re-written (``--no-run``) from the committed ``*_runs.json``,
    whose fingerprints are of the code and packages only, claimed more than they cover and
    differed from the committed page."""
    r = _results_module()
    old = {"fingerprint": "aaaaaaaaaaaa", "commit": "92a7b23", "run_date": "2026-12-06"}
    new = r.stamped({}, "bbbbbbbbbbbb", "1234567")
    assert new["fingerprint_covers"] == r.FINGERPRINT_COVERS
    assert r.runs_provenance([old, old]) == (
        "The 2 runs were made on 2026-12-06 at commit 92a7b23 (code and package fingerprint aaaaaaaaaaaa, "
        "`benchmarks/_results.py::code_fingerprint`).")
    assert "(fingerprint of the code, packages, benchmark and data bbbbbbbbbbbb," in r.runs_provenance([new])
    both = r.runs_provenance([old, new])
    assert "code and package fingerprint aaaaaaaaaaaa; fingerprint of the code, packages, benchmark and data " \
           "bbbbbbbbbbbb" in both


@pytest.mark.parametrize("name", ["sia_compare", "sia_variants", "sia_ceiling"])
def test_a_page_rewritten_from_its_committed_runs_keeps_its_figures(name: str, tmp_path: Path) -> None:
    """``--no-run`` from the committed ``*_runs.json`` gives the committed page but for the lines
    naming the command, the date and the load.  (``sia_compare``'s page said its runs were kept
    "with a fingerprint of pal_opt's code and the packages", the wording of the script before its
    fingerprint covered the script and the shared data too; the page now has today's wording,
    the kept runs' fingerprint named as a code and package one by ``runs_provenance``.)"""
    if not SHARED.is_dir():
        pytest.skip("../shared is absent")
    for kept in RESULTS.glob("sia_*_runs.json"):
        (tmp_path / kept.name).write_bytes(kept.read_bytes())
    proc = _bench(name, "--no-run", "--out-dir", str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    committed = (RESULTS / f"{name}.md").read_text().splitlines()
    rewritten = (tmp_path / f"{name}.md").read_text().splitlines()
    assert len(committed) == len(rewritten)
    differ = [(a, b) for a, b in zip(committed, rewritten, strict=True) if a != b]
    for a, b in differ:
        assert a.startswith(("Produced by", "Generated by")), (a, b)


def _square_or_fail(x: int) -> dict[str, int]:
    """A worker of :func:`test_run_and_keep_keeps_the_finished_runs_and_names_the_failed_ones`."""
    if x == 0:
        raise ZeroDivisionError("x is 0")
    return {"x": x * x}


def test_run_and_keep_keeps_the_finished_runs_and_names_the_failed_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``sia_compare.run_and_keep`` (the worker pool of ``sia_compare`` and ``sia_variants``): each
    finished run stamped in ``runs`` and the file written, a failed one named and returned, the
    others still run."""
    import json

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import sia_compare
    finally:
        sys.path.remove(str(BENCHMARKS))
    runs: dict[str, dict] = {"kept": {"x": 1}}
    store = tmp_path / "runs.json"
    failed = sia_compare.run_and_keep(_square_or_fail, {"a": (3,), "b": (0,), "c": (2,)}, runs, (store, "fp", "abc"),
                                      2, "bench", lambda n, key, r: f"{key} {r['x']}")
    assert failed == {"b": "ZeroDivisionError: x is 0"}
    assert sorted(runs) == ["a", "c", "kept"] and runs["a"]["x"] == 9 and runs["c"]["x"] == 4
    assert (runs["a"]["fingerprint"], runs["a"]["commit"]) == ("fp", "abc")
    assert json.loads(store.read_text()) == runs
    assert sorted(capsys.readouterr().err.splitlines()) == ["bench: a 9", "bench: b: failed: ZeroDivisionError: x is 0",
                                                            "bench: c 4"]


def test_sia_fidelity_shows_its_commands_with_the_shared_data_relative() -> None:
    """Found by review: the page's ``pal-opt simulate-sia`` commands named the shared data by the
    absolute path of the machine that ran them (``/tmp/shared/...``)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import sia_fidelity
    finally:
        sys.path.remove(str(BENCHMARKS))
    out = Path("/some/tmp/out.json")
    trace = sia_fidelity.DATA / "workloads" / "newtrace-7.csv"
    cmd = [sys.executable, "-m", "pal_opt.cli", "simulate-sia", str(trace), "--profiles",
           str(sia_fidelity.DATA / "profiles"), "--out", str(out)]
    assert sia_fidelity.shown_command(cmd, out) == (
        "pal-opt simulate-sia ../shared/data/sia-artifact/workloads/newtrace-7.csv "
        "--profiles ../shared/data/sia-artifact/profiles --out RESULT.json")


def test_the_restart_figure_says_its_restart_cost() -> None:
    """pipeline_sim.png and pipeline_sim_restart.png had one title and one alt text: the figure of
    the run with ``--restart-cost 30`` did not say it had one.  Both now name it."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import pipeline_sim
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert pipeline_sim.restart_note(0.0) == ""
    assert pipeline_sim.restart_note(30.0) == ", restart cost 30 s per GPU"
    alt = pipeline_sim.FIGURE.format(stem="pipeline_sim_restart", restart=pipeline_sim.restart_note(30.0))
    assert alt.strip().endswith("against pal's, restart cost 30 s per GPU](pipeline_sim_restart.png)")
    plain = pipeline_sim.FIGURE.format(stem="pipeline_sim", restart=pipeline_sim.restart_note(0.0))
    assert plain.strip() in (RESULTS / "pipeline_sim.md").read_text(encoding="utf-8")  # the page without one


def test_pal_a1_links_only_the_figures_it_drew(tmp_path: Path) -> None:
    """A ``--quick`` (or ``--no-lambda``) pal_a1 page linked ``pal_a1_lambda.png``, which such a run
    does not draw; the page links the figures drawn, and a full run's links are unchanged."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import pal_a1
    finally:
        sys.path.remove(str(BENCHMARKS))
    main_rows = [{"experiment": "main", "trace": "workload-6", "draw": "artifact", "lambda": 1.7, "policy": p,
                  "avg_jct_h": h} for p, h in (("packed-sticky", 2.0), ("pal", 1.5))]
    assert pal_a1.plot_lambda(main_rows, ["packed-sticky", "pal"], tmp_path / "l.png") is False  # no sweep
    assert not (tmp_path / "l.png").exists()
    quick = pal_a1.figure_links({"pal_a1.png", "pal_a1_equal.png", "pal_a1_w6_cdf.png"})
    assert "pal_a1_lambda.png" not in quick and quick.count("![") == 3
    everything = pal_a1.figure_links({name for name, _ in pal_a1.FIGURES})
    assert (RESULTS / "pal_a1.md").read_text(encoding="utf-8").endswith(everything)


def test_the_fidelity_page_and_plot_are_written_again_from_the_committed_figures(tmp_path: Path) -> None:
    """``sia_fidelity.py --no-run`` writes the page and its plot from the committed
    ``sia_fidelity.json`` alone (no shared data, no simulation): the page is the committed one to
    the letter, so the page, its plot and its figures cannot drift apart."""
    proc = _bench("sia_fidelity", "--no-run", "--out-dir", str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "sia_fidelity.md").read_text() == (RESULTS / "sia_fidelity.md").read_text()
    assert (tmp_path / "sia_fidelity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_short_pipeline_placement_run_marks_the_kinds_it_did_not_draw() -> None:
    """Found in review: ``pipeline_placement.py --rounds 1`` printed ``nan`` (and ``+nan%``) for a
    pipeline kind drawn on one cluster only, the empty geometric mean of the other cluster's row.
    Such a row shows "—" with a footnote naming it, and the means are over the jobs drawn."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import pipeline_placement as pp
    finally:
        sys.path.remove(str(BENCHMARKS))

    def row(cluster: str, kind: str, method: str, speed: float) -> dict[str, object]:
        return {"cluster": cluster, "round": 0, "method": method, "job": f"{cluster}-{kind}", "kind": kind,
                "gpus": 8, "speed": speed, "pace_speed": speed, "servers": 2}

    rows = [row("longhorn", kind, m, s) for kind, s in (("vgg16-8", 0.5), ("gnmt-8", 0.8)) for m in pp.METHODS]
    rows += [row("alloc32", "gnmt-8", m, 0.6 if m == "pal" else 0.66) for m in pp.METHODS]
    lines = pp.table(rows, "speed")
    text = "\n".join(lines)
    assert "nan" not in text
    assert "| alloc32 | vgg16-8 | 0 | — | — | — | — | — |" in lines
    assert "| longhorn | vgg16-8 | 1 | 0.5000 | 0.5000 | 0.5000 | 0.5000 | +0.00% |" in lines
    assert "| longhorn | pipeline | 2 | 0.6325 | 0.6325 | 0.6325 | 0.6325 | +0.00% |" in lines  # sqrt(0.5 * 0.8)
    assert "| alloc32 | pipeline | 1 | 0.6000 | 0.6600 | 0.6600 | 0.6600 | +10.00% |" in lines  # gnmt-8 alone
    assert lines[-1] == ("—: no such job was drawn in the rounds run (gang on longhorn, gang on alloc32, vgg16-8 on "
                         "alloc32); every mean is over the jobs drawn (`n`), and the pipeline rows over the kinds drawn.")
    reading = "\n".join(pp.reading(rows, [], {"longhorn": "x", "alloc32": "y"}))
    assert "nan" not in reading and "0 of 0" not in reading
    assert "at most 4 GPUs spread over servers (paying the locality penalty 1.7): — (none was drawn" in reading
    full = [r for r in rows if r["kind"] != "vgg16-8"]  # every kind on every cluster: no marker, no footnote
    full += [{**r, "kind": "gang", "job": "g"} for r in full]
    assert not any("—" in line for line in pp.table(full, "speed"))
