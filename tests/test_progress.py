"""Progress of long work: reported by the library (:mod:`pal_opt.progress`), shown by the CLI on a
terminal only (:mod:`pal_opt.cliprogress`).

The CLI tests run ``pal-opt`` with stderr on a pseudo-terminal (:mod:`pty`), or on a pipe, and
read what it drew there.
"""

from __future__ import annotations

import fcntl
import io
import json
import math
import os
import pty
import random
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from procs import sigint_default

from pal_opt import progress
from pal_opt.cliprogress import LiveLine, live_line, status_bar, terminal_shape
from pal_opt.cost import relative_gap
from pal_opt.ilp import solve_ilp
from pal_opt.ilp.backends import available_backends
from pal_opt.ilp.backends.base import SolverWatch
from pal_opt.io import load_instance

ROOT = Path(__file__).resolve().parents[1]
RACKED = ROOT / "instances" / "racked-64x8.json"
MID = ROOT / "instances" / "mid-32x8.json"
PAPER = ROOT / "instances" / "paper-16x4.json"
BACKENDS = available_backends()


# =========================================================================== the library side
def test_report_without_a_reporter_does_nothing() -> None:
    assert not progress.active()
    progress.report(stage="nobody listens", incumbent=1.0)  # no error, no effect
    with progress.adapted(lambda f: {**f, "never": True}):
        progress.report(stage="still nobody")
    assert not progress.active()


def test_reporting_is_scoped_and_adapters_nest() -> None:
    seen: list[dict[str, Any]] = []
    with progress.reporting(seen.append):
        assert progress.active()
        progress.report(stage="a")
        with progress.adapted(lambda f: {**f, "outer": 1}), progress.adapted(lambda f: {**f, "inner": 2}):
            progress.report(stage="b")
        progress.report(stage="c")
        with progress.reporting(None):
            progress.report(stage="muted")
    progress.report(stage="after")
    assert seen == [{"stage": "a"}, {"stage": "b", "inner": 2, "outer": 1}, {"stage": "c"}]


def test_solver_watch_keeps_the_best_incumbent_and_bound() -> None:
    seen: list[dict[str, Any]] = []
    watch = SolverWatch("highs")
    watch.found(10.0, 5.0)
    watch.found(12.0, 4.0)  # worse on both counts: kept out
    watch.found(math.inf, -math.inf)  # not figures
    watch.found(None, 6.0)
    with progress.reporting(seen.append):
        watch.report(stopping=True)
    (f,) = seen
    assert (f["incumbent"], f["bound"], f["stage"], f["backend"], f["stopping"]) == (10.0, 6.0, "solving", "highs", True)
    assert f["seconds"] >= 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_report_incumbent_bound_and_gap_while_solving(backend: str) -> None:
    """A few seconds on mid-32x8: every backend reports the solver's progress in program units,
    with the start placement as the incumbent until it finds better, and pal-opt's gap."""
    inst = load_instance(MID)
    seen: list[dict[str, Any]] = []
    with progress.reporting(seen.append):
        res = solve_ilp(inst, backend=backend, time_limit=3.0)
    stages = [f["stage"] for f in seen]
    assert stages[:2] == ["building the program", "pricing the start placements"], stages[:3]
    assert all(f["backend"] == backend for f in seen)
    solving = [f for f in seen if f["stage"] == "solving"]
    assert solving and all(f["seconds"] >= 0 and f["stopping"] is False for f in solving)
    assert all(f["incumbent"] >= res.objective - 1e-6 for f in solving)
    bounded = [f for f in solving if "bound" in f]
    assert bounded, f"{backend} reported no bound"
    demand = sum(j.demand for j in inst.jobs if j.id in res.placements) or 1
    for f in bounded:
        assert f["bound"] <= f["incumbent"] and f["bound"] <= res.objective + 1e-4
        assert f["gap"] == pytest.approx(relative_gap(f["incumbent"], f["bound"], demand), abs=1e-9)
    assert solving[-1]["incumbent"] <= solving[0]["incumbent"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_watching_a_solver_changes_nothing(backend: str) -> None:
    """The callbacks and the line-buffered CBC only observe: the same placement either way."""
    inst = load_instance(PAPER)
    plain = solve_ilp(inst, backend=backend)
    with progress.reporting(lambda f: None):
        watched = solve_ilp(inst, backend=backend)
    assert watched.placements == plain.placements and watched.status == plain.status


# =========================================================================== the line
def test_live_line_text() -> None:
    line = LiveLine("solving", "ilp", io.StringIO())
    assert line.text(0.04) == "solving (ilp): 0.0 s"
    line({"stage": "building the program", "backend": "cbc"})
    assert line.text(2.5) == "solving (ilp, cbc): 2.5 s, building the program"
    line({"stage": "solving", "incumbent": 566.69754, "bound": 563.1, "gap": 0.00312, "stopping": True})
    assert line.text(12.43) == ("solving (ilp, cbc): 12.4 s, incumbent 566.6975, bound 563.1000, gap 0.312%, "
                                "stopping (Ctrl-C)...")


class _FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_live_line_waits_then_draws_then_erases() -> None:
    term = _FakeTerminal()
    line = LiveLine("solving", "pal", term, delay=0.2, interval=0.05)
    with progress.reporting(line):
        line.start()
        time.sleep(0.1)
        assert term.getvalue() == ""  # not before the delay
        progress.report(incumbent=3.25)
        time.sleep(0.4)
        line.close()
    text = term.getvalue()
    assert "solving (pal): 0." in text and "incumbent 3.2500" in text
    assert text.rsplit("incumbent 3.2500", 1)[1].split("\r", 1)[1].strip() == ""  # erased at the end


def test_live_line_only_on_a_terminal() -> None:
    with live_line("solving", "pal", stream=io.StringIO()) as line:
        assert line is None and not progress.active()
    with live_line("solving", "pal", stream=_FakeTerminal(), enabled=False) as line:
        assert line is None
    with live_line("solving", "pal", stream=_FakeTerminal()) as line:
        assert isinstance(line, LiveLine) and progress.active()
    assert not progress.active()


def test_bars_are_off_in_a_pipe_and_sized_on_an_unsized_terminal() -> None:
    assert status_bar(total=3, file=io.StringIO()).disable
    assert terminal_shape(io.StringIO()) == (79, 24)  # no terminal size: tqdm's defaults, not 0 × 0


# =========================================================================== the CLI
def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONWARNINGS": "ignore"}


def _run(args: list[str], *, terminal: bool, interrupt_on: str | None = None,
         timeout: float = 120, sized: bool = True) -> tuple[int, str, str]:
    """Run ``pal-opt ARGS`` with stdout on a pipe and stderr on a 200-column pseudo-terminal (or a
    pipe; ``sized=False``: a pseudo-terminal whose size was never set, 0 × 0); SIGINT it once its
    stderr shows ``interrupt_on``.  Returns (exit status, stdout, stderr)."""
    cmd = [sys.executable, "-m", "pal_opt.cli", *args]
    if not terminal:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout, r.stderr
    master, slave = pty.openpty()
    if sized:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    # SIGINT at its default in the child even when this run inherited it ignored (procs.popen)
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=_env(),
                         preexec_fn=sigint_default)
    os.close(slave)
    err = b""
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                p.kill()
                raise AssertionError(f"pal-opt still running after {timeout:.0f} s; stderr {err[-500:]!r}")
            if select.select([master], [], [], 0.1)[0]:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the terminal's last writer is gone
                    data = b""
                if not data:
                    break
                err += data
                if interrupt_on is not None and interrupt_on.encode() in err:
                    p.send_signal(signal.SIGINT)
                    interrupt_on = None
            elif p.poll() is not None:
                break
    finally:
        os.close(master)
    assert p.stdout is not None
    out = p.stdout.read().decode()
    p.stdout.close()
    p.wait()
    return p.returncode, out, err.decode(errors="replace").replace("\r\n", "\n")


def _erased_after(text: str, last: str) -> bool:
    """Whether the last frame containing ``last`` was erased (blanked with '\\r') before anything
    else was written."""
    after = text.rsplit(last, 1)[1]
    return "\r" in after and after.split("\r", 1)[1].strip("\r ") == ""


_SOLVE = ["solve", str(RACKED), "--method", "ilp", "--backend", "cbc"]
_FRAME = re.compile(r"solving \(ilp, cbc\): \d+\.\d s, incumbent \d+\.\d{4}, bound \d+\.\d{4}, gap \d+\.\d{3}%")


@pytest.mark.skipif("cbc" not in BACKENDS, reason="CBC not installed")
def test_solve_shows_progress_on_a_terminal() -> None:
    """racked-64x8 keeps CBC busy until its limit (about 4 s of the command's 7: the limit bounds
    the whole command): the line appears after 2 s with the elapsed time, incumbent, bound and
    gap, and is erased before the process ends."""
    rc, out, err = _run([*_SOLVE, "--time-limit", "7"], terminal=True)
    assert rc == 0, err
    assert _FRAME.search(err), err[-1000:]
    assert re.search(r"solving \(ilp(, cbc)?\): [2-9]\.\d s", err)  # the delay: nothing before 2 s
    assert not re.search(r"solving \(ilp(, cbc)?\): [01]\.\d s", err)
    assert _erased_after(err, "gap")
    assert "status" in out and "bound" in out


def _without_cbc_crash(err: str) -> str:
    """``err`` without the warning of a CBC that died of a signal (an upstream crash pal-opt
    answers with its fallback, exit 0: SIGSEGV in a CI run of 2026-12-07 under load), which is
    not progress."""
    return "".join(line for line in err.splitlines(keepends=True)
                   if not line.startswith("pal-opt: warning: CBC died of "))


@pytest.mark.skipif("cbc" not in BACKENDS, reason="CBC not installed")
def test_solve_shows_no_progress_in_a_pipe_or_when_quiet() -> None:
    rc, out, err = _run([*_SOLVE, "--time-limit", "3"], terminal=False)
    assert (rc, _without_cbc_crash(err)) == (0, ""), err
    assert "status" in out
    rc, out, err = _run([*_SOLVE, "--time-limit", "3", "--quiet"], terminal=True)
    assert (rc, _without_cbc_crash(err)) == (0, ""), err
    assert "status" in out  # --quiet silences progress, not the answer


@pytest.mark.skipif("highs" not in BACKENDS, reason="HiGHS not installed")
def test_ctrl_c_erases_the_line_and_keeps_the_best_placement(tmp_path: Path) -> None:
    # large-256x8 to a zero gap: HiGHS runs for seconds after its first line with a gap (racked-64x8
    # came to be solved within 0.3 s of that line, so the Ctrl-C landed after the solve)
    out_file = tmp_path / "pl.json"
    rc, out, err = _run(["solve", str(ROOT / "instances" / "large-256x8.json"), "--method", "ilp", "--backend",
                         "highs", "--gap", "0", "--time-limit", "60", "--out", str(out_file)], terminal=True,
                        interrupt_on="gap ")
    assert rc == 130, err
    assert "Traceback" not in err
    message = "pal-opt: interrupted: kept the best placement found so far"
    assert err.endswith(f"{message} (written to {out_file})\n"), err[-500:]
    assert err.rsplit(message, 1)[0].rsplit("\r", 1)[-1].strip() == ""  # on a line of its own
    assert json.loads(out_file.read_text())["info"]["interrupted"] is True
    assert "status" in out


@pytest.mark.skipif("highs" not in BACKENDS, reason="HiGHS not installed")
def test_a_partitioned_solve_shows_the_parts_solved_on_a_terminal() -> None:
    """``--method ilp-partitioned`` showed only the elapsed time (its parts run in a pool, which
    reports nothing): now the parts solved, of the parts made, as they end; large-256x8 in 4 parts
    to a zero gap keeps them busy for seconds (9.4 s on an idle machine, up to the 20 s limit on a
    busy one).  A 0.2 % gap took 2.2 s on an idle machine, too close to the line's 2 s delay: a
    fresh-clone CI run saw no line."""
    rc, out, err = _run(["solve", str(ROOT / "instances" / "large-256x8.json"), "--method", "ilp-partitioned",
                         "--parts", "4", "--gap", "0", "--time-limit", "20"], terminal=True)
    assert rc == 0, err
    assert re.search(r"solving \(ilp-partitioned\): \d+\.\d s, [0-4] of 4 parts solved, whole-round bound", err), \
        err[-1000:]
    assert _erased_after(err, "parts solved")
    assert "status" in out


def test_partition_shows_its_programs_on_a_terminal_and_nothing_when_quiet(shared_dir: Path) -> None:
    """``pal-opt partition --method ip`` had a live line but no ``--quiet`` (``solve`` and
    ``repair`` had): alexnet on 16 x 2 workers solves a few hundred segment programs (6 s)."""
    pytest.importorskip("highspy")
    args = ["partition", str(shared_dir / "data" / "pipedream-profiles" / "alexnet" / "graph.txt"),
            "--machines", "16,2", "--bandwidth", "1e10,1e9", "--method", "ip"]
    rc, out, err = _run(args, terminal=True)
    assert rc == 0, err
    assert re.search(r"partitioning \(ip, highs\): \d+\.\d s, segment programs solved: \d+", err), err[-1000:]
    assert "s per sample" in out
    rc, quiet_out, err = _run([*args, "--quiet"], terminal=True)
    assert (rc, err) == (0, "")
    assert quiet_out == out  # --quiet silences progress, not the answer


def _trace(path: Path, jobs: int, seed: int = 1) -> Path:
    rng = random.Random(seed)
    rows = [f"{j},{rng.choice([1, 1, 2, 4, 8])},{j * 120},{rng.randint(2000, 20000)},resnet50" for j in range(jobs)]
    path.write_text("job_id,num_gpus,submit_time,duration,model\n" + "\n".join(rows) + "\n")
    return path


def test_simulate_shows_rounds_jobs_and_eta_on_a_terminal(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.csv", 60)
    rc, out, err = _run(["simulate", str(trace), "--cluster", "4x4", "--out", str(tmp_path / "r.json")], terminal=True)
    assert rc == 0, err
    assert re.search(r"simulate pal: \d+/60 jobs finished \|.*\| \d\d:\d\d, ETA \S+, \d+ rounds, \d+\.\d h simulated",
                     err), err[-1000:]
    assert "60/60 jobs finished" in err
    assert "avg JCT" in out


def test_simulate_shows_the_cap_of_a_run_that_stops_at_max_hours(tmp_path: Path) -> None:
    """The bar counts jobs and its ETA assumes every job finishes; a run with ``--max-hours`` may
    stop short of that, so its simulated time is shown against the cap, and the bar ends where
    the run did (jobs finished of all the trace's, as the summary says)."""
    trace = _trace(tmp_path / "t.csv", 60)
    rc, out, err = _run(["simulate", str(trace), "--cluster", "4x4", "--max-hours", "3", "--out",
                         str(tmp_path / "r.json")], terminal=True)
    assert rc == 0, err
    assert re.search(r"\d+ rounds, \d+\.\d h simulated of at most 3 h", err), err[-1000:]
    finished = json.loads((tmp_path / "r.json").read_text())["n_completed"]
    assert 0 < finished < 60 and f"{finished}/60 jobs finished" in err.rsplit("simulate pal: ", 1)[1]


def test_simulate_shows_no_progress_in_a_pipe_or_when_quiet(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.csv", 60)
    # the variability source is chosen, so nothing at all goes to stderr (without the choice, one
    # warning line names the default source: tests/test_simulate_cli.py)
    chosen = ["--synthetic-variability", "1"]
    rc, out, err = _run(["simulate", str(trace), "--cluster", "4x4", "--out", str(tmp_path / "a.json"), *chosen],
                        terminal=False)
    assert (rc, err) == (0, "") and "avg JCT" in out
    rc, out, err = _run(["simulate", str(trace), "--cluster", "4x4", "--out", str(tmp_path / "b.json"), "--quiet",
                         *chosen], terminal=True)
    assert (rc, err, out) == (0, "", "")
    assert json.loads((tmp_path / "a.json").read_text()) .keys() == json.loads((tmp_path / "b.json").read_text()).keys()


def test_ctrl_c_stops_a_simulation_and_writes_nothing(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.csv", 400)
    out_file = tmp_path / "r.json"
    rc, out, err = _run(["simulate", str(trace), "--cluster", "4x4", "--policy", "ilp", "--out", str(out_file),
                         "--jobs-csv", str(tmp_path / "jobs.csv")], terminal=True, interrupt_on=" rounds, ")
    assert rc == 130, err
    assert "Traceback" not in err
    assert re.search(r"\npal-opt: interrupted after \d+ rounds \(\d+ of 400 jobs finished\); nothing written\n$", err), \
        err[-500:]
    assert not out_file.exists() and not (tmp_path / "jobs.csv").exists() and out == ""


def test_a_ctrl_c_a_library_swallowed_still_stops_the_simulation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # the flag the SIGINT handler sets is checked at every round's end: here it is set as if a
    # handler had run and its KeyboardInterrupt had been caught inside a solver
    from pal_opt import cliprogress
    from pal_opt.cli import main

    monkeypatch.setattr(cliprogress.INTERRUPT_REQUESTED, "clear", lambda: None)
    cliprogress.INTERRUPT_REQUESTED.set()
    try:
        out = tmp_path / "r.json"
        rc = main(["simulate", str(_trace(tmp_path / "t.csv", 20)), "--cluster", "4x4", "--synthetic-variability", "1",
                   "--quiet", "-o", str(out)])
    finally:
        type(cliprogress.INTERRUPT_REQUESTED).clear(cliprogress.INTERRUPT_REQUESTED)  # the real clear
    err = capsys.readouterr().err
    assert rc == 130 and "pal-opt: interrupted after 0 rounds (0 of 20 jobs finished); nothing written" in err
    assert not out.exists()


def _sia_profiles(shared_dir: Path) -> Path:
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    if not profiles.is_dir():
        pytest.skip(f"Sia artifact profiles not available at {profiles}")
    return profiles


def test_ctrl_c_stops_a_sia_simulation_with_the_same_line(tmp_path: Path, shared_dir: Path) -> None:
    """A Sia trace printed only ``pal-opt: interrupted``, while a PAL trace says how far it got."""
    trace = shared_dir / "data" / "sia-artifact" / "workloads" / "newtrace-3.csv"
    out_file = tmp_path / "r.json"
    rc, out, err = _run(["simulate", str(trace), "--profiles", str(_sia_profiles(shared_dir)), "--out",
                         str(out_file), "--jobs-csv", str(tmp_path / "jobs.csv")], terminal=True,
                        interrupt_on=" rounds, ")
    assert rc == 130, err
    assert "Traceback" not in err
    assert re.search(r"\npal-opt: interrupted after \d+ rounds \(\d+ of 960 jobs finished\); nothing written\n$", err), \
        err[-500:]
    assert not out_file.exists() and not (tmp_path / "jobs.csv").exists() and out == ""


def test_a_sia_simulation_shows_the_pal_bar_even_on_an_unsized_terminal(tmp_path: Path, shared_dir: Path) -> None:
    """A Sia trace drew tqdm's own bar (no rounds, ``t=0.5h``), and on a terminal whose size was
    never set nothing at all, where a PAL trace's bar is drawn 80 columns wide."""
    rc, out, err = _run(["simulate", str(ROOT / "examples" / "data" / "newtrace-mini.csv"), "--profiles",
                         str(_sia_profiles(shared_dir)), "--out", str(tmp_path / "r.json")], terminal=True, sized=False)
    assert rc == 0, err
    assert re.search(r"simulate sia: \d/6 jobs finished \|.*\| \d\d:\d\d, ETA \S+, \d+ rounds, \d+\.\d h simulated",
                     err), err[-1000:]
    assert "6/6 jobs finished" in err and "avg JCT" in out


@pytest.mark.parametrize("policies", ["sia", "sia,packed"])
def test_a_ctrl_c_a_library_swallowed_still_stops_a_sia_simulation(
        tmp_path: Path, shared_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        policies: str) -> None:
    from pal_opt import cliprogress
    from pal_opt.cli import main

    profiles = _sia_profiles(shared_dir)
    monkeypatch.setattr(cliprogress.INTERRUPT_REQUESTED, "clear", lambda: None)
    cliprogress.INTERRUPT_REQUESTED.set()
    try:
        out = tmp_path / "r.json"
        rc = main(["simulate", str(ROOT / "examples" / "data" / "newtrace-mini.csv"), "--profiles", str(profiles),
                   "--policy", policies, "--quiet", "-o", str(out)])
    finally:
        type(cliprogress.INTERRUPT_REQUESTED).clear(cliprogress.INTERRUPT_REQUESTED)  # the real clear
    err = capsys.readouterr().err
    which = " of sia" if "," in policies else ""
    assert rc == 130 and err.endswith(f"pal-opt: interrupted after 0 rounds{which} (0 of 6 jobs finished); "
                                      "nothing written\n"), err
    assert not out.exists()
