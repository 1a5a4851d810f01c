"""Solver faults: time limits without an incumbent, infeasible job sets, missing backends,
interrupts and terminations, atomic outputs.

Everything runs the real solvers.  A missing backend is simulated by asking for a name that is
not registered, or by making a backend's availability probe fail (the import-failure path), never
by faking a solver's answer.  Interrupts are real signals sent to a ``pal-opt`` subprocess; to
hit the solver itself (not the imports before it) a small driver prints a line when a backend's
``solve`` is entered and the test signals after reading it.  Those subprocesses start with SIGINT
at its default (``procs.popen``) even when the test run inherited it ignored, and the one test
that signals its own process uses the ``ctrl_c`` fixture (``conftest.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from ilp_rounds import pin_solver_time_limit
from procs import children, popen

from pal_opt.binning import binned_factors
from pal_opt.check import check
from pal_opt.cli import main
from pal_opt.errors import BackendUnavailableError, InfeasibleRoundError, OptionError
from pal_opt.ilp import available_backends, build_formulation
from pal_opt.ilp.backends import BACKENDS, get_backend
from pal_opt.ilp.heuristic import start_placements
from pal_opt.ilp.solve import resolve_admission
from pal_opt.io import load_instance, save_instance
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams
from pal_opt.result import Status
from pal_opt.solve import solve

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances"
LARGE = INSTANCES / "large-256x8.json"
RACKED = INSTANCES / "racked-64x8.json"
BACKEND_NAMES = tuple(BACKENDS)


@pytest.fixture(scope="module")
def large() -> RoundInstance:
    return load_instance(LARGE)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONUNBUFFERED": "1"}


def _cli_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pal_opt.cli", *args]


# =========================================================================== time limits
_NO_START: dict[str, object] = {}


def _no_start_result(backend: str, large: RoundInstance, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The no-warm-start solve of the large round with 1 ms for the solver (once per backend per
    session; ``time_limit`` itself bounds the whole call, see ``pin_solver_time_limit``)."""
    if backend not in _NO_START:
        pin_solver_time_limit(monkeypatch, 1e-3)
        _NO_START[backend] = solve(large, "ilp", backend=backend, warm_start=False)
    return _NO_START[backend]


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_time_limit_without_incumbent_falls_back_to_the_greedy_placement(backend, large, monkeypatch):
    """A 1 ms limit and no warm start: the solver has nothing, pal-opt returns the start placement."""
    r = _no_start_result(backend, large, monkeypatch)
    assert r.status == Status.FALLBACK, (r.status, r.message)
    assert "found no solution" in r.message and "greedy placement" in r.message
    assert r.to_dict()["status"] == "fallback"
    # exactly the start placement named in info, rebuilt independently of the solve
    admitted, _ = resolve_admission(large, None, None)
    form = build_formulation(large, admitted, factors=binned_factors(large.cluster, large.params.binning))
    starts = start_placements(form)
    src = r.info["start_source"]
    assert src in starts
    assert {k: tuple(v) for k, v in r.placements.items()} == {k: tuple(v) for k, v in starts[src].items()}
    assert r.objective == pytest.approx(r.info[f"start_{src}_objective"], rel=1e-12)
    assert len(r.placements) == len(admitted)
    assert check(large, r) == []


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_time_limit_is_honoured(backend, large, monkeypatch):
    """A 1 ms limit: the solver call returns within 1 s (translation and formulation excluded;
    HiGHS and CP-SAT take about 0.1 s; CBC, which does not check its limit during its root LP,
    is stopped from outside at 0.25 s and killed at 0.75 s).  (The whole call's limit:
    tests/test_time_limit.py.)"""
    r = _no_start_result(backend, large, monkeypatch)
    assert r.solve_seconds < 1.0, f"{r.solve_seconds:.1f} s inside {backend} for a 1 ms limit"


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_time_limit_with_warm_start_is_never_worse_than_the_start(backend, large, monkeypatch):
    pin_solver_time_limit(monkeypatch, 1e-3)
    r = solve(large, "ilp", backend=backend)
    assert r.status in (Status.FEASIBLE, Status.FALLBACK), (r.status, r.message)
    best_start = min(v for k, v in r.info.items() if k.startswith("start_") and k.endswith("_objective"))
    assert r.objective <= best_start + 1e-9
    assert check(large, r) == []


def test_cli_fallback_writes_a_valid_flagged_placement(tmp_path, capsys):
    out = tmp_path / "pl.json"
    rc = main(["solve", str(LARGE), "--method", "ilp", "--backend", "cpsat", "--time-limit", "0.001",
               "--out", str(out)])
    o, e = capsys.readouterr()
    assert rc == 0, e
    doc = json.loads(out.read_text())
    assert doc["status"] in ("fallback", "feasible")
    if doc["status"] == "fallback":
        assert "fallback" in o and doc["message"]
    assert main(["check", str(LARGE), str(out)]) == 0


# =========================================================================== infeasible job sets
def _failed_round() -> RoundInstance:
    """8 GPUs on two servers, 5 failed and 1 busy: 2 free GPUs for jobs wanting 4."""
    F, B, X = GpuState.FREE, GpuState.BUSY, GpuState.FAILED
    cl = Cluster.from_arrays(range(8), [0] * 4 + [1] * 4, {"classA": [1.0, 1.1, 0.9, 1.2, 1.0, 1.05, 0.95, 1.0]},
                             state=[X, X, F, X, B, X, F, X])
    jobs = (Job("a", 2, "classA", 0), Job("b", 1, "classA", 1), Job("c", 1, "classA", 2))
    return RoundInstance(cl, jobs, RoundParams(binning="none"), name="failed")


def _infeasible(backend: str) -> tuple[object, str]:
    inst = _failed_round()
    try:
        r = solve(inst, "ilp", backend=backend, jobs=["a", "b", "c"])
    except InfeasibleRoundError as exc:
        return exc, str(exc)
    return r, r.message


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_infeasible_explicit_job_set_is_reported(backend):
    res, msg = _infeasible(backend)
    if not isinstance(res, InfeasibleRoundError):
        assert res.status == Status.INFEASIBLE
        assert res.placements == {} and res.jobs_placed == 0
        assert res.to_dict()["objective"] is None  # inf is not written as a number
    assert "4" in msg and "2" in msg and "free" in msg, msg  # need 4, 2 free
    assert "failed" in msg


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_infeasible_explicit_job_set_names_the_jobs(backend):
    res, msg = _infeasible(backend)
    jobs = getattr(res, "jobs", ()) or ()
    for jid in ("a", "b", "c"):
        assert jid in [str(j) for j in jobs] or f"'{jid}'" in msg or f" {jid}" in msg, msg


def test_feasible_subset_on_failed_gpus_is_placed():
    inst = _failed_round()
    for backend in BACKEND_NAMES:
        r = solve(inst, "ilp", backend=backend, jobs=["b", "c"])
        assert r.status == Status.OPTIMAL and check(inst, r) == []
        assert sorted(g for v in r.placements.values() for g in v) == [2, 6]


def test_cli_infeasible_job_set_is_one_line_and_writes_nothing(tmp_path, capsys):
    p = tmp_path / "failed.json"
    save_instance(_failed_round(), p)
    out = tmp_path / "pl.json"
    rc = main(["solve", str(p), "--method", "ilp", "--backend", "highs", "--jobs", "a,b,c", "--out", str(out)])
    o, e = capsys.readouterr()
    assert rc == 1
    assert o == ""
    assert e.count("\n") == 1 and e.startswith("pal-opt: error: infeasible round: jobs a, b, c"), e
    assert "2 are free" in e
    assert not out.exists()
    # unknown job ids are an option error (exit 2), not an infeasible round
    rc = main(["solve", str(p), "--method", "ilp", "--jobs", "a,zz", "--out", str(out)])
    o, e = capsys.readouterr()
    assert rc == 2 and f"--jobs zz: not a job of {p}" in e and e.count("\n") == 1
    rc = main(["solve", str(p), "--method", "pal", "--jobs", "a", "--out", str(out)])
    o, e = capsys.readouterr()
    assert rc == 2 and "do not apply to method 'pal'" in e
    assert not out.exists()


# =========================================================================== missing backends
def test_unknown_backend_names_the_installed_ones(tiny_instance):
    with pytest.raises(OptionError) as ei:
        solve(tiny_instance, "ilp", backend="gurobi")
    msg = str(ei.value)
    assert "'gurobi'" in msg
    for name in available_backends():
        assert name in msg


def _make_unavailable(monkeypatch, *names: str) -> None:
    for name in names:
        cls = BACKENDS[name]

        def probe(cls=cls, name=name):  # the import failure an uninstalled solver gives
            raise ModuleNotFoundError(f"No module named '{name}_for_this_test'")

        monkeypatch.setattr(cls, "_probe", classmethod(lambda c, p=probe: p()))
        monkeypatch.setattr(cls, "_available", None)
        monkeypatch.setattr(cls, "_import_error", None)


def test_unavailable_backend_error_names_the_installed_ones(monkeypatch, tiny_instance):
    _make_unavailable(monkeypatch, "cpsat")
    assert "cpsat" not in available_backends()
    with pytest.raises(BackendUnavailableError) as ei:
        solve(tiny_instance, "ilp", backend="cpsat")
    msg = str(ei.value)
    assert "'cpsat' is not available" in msg and "No module named" in msg
    assert "installed: highs, cbc" in msg
    # the default is the first installed one
    assert solve(tiny_instance, "ilp").backend == "highs"
    _make_unavailable(monkeypatch, "highs")
    assert solve(tiny_instance, "ilp").backend == "cbc"


def test_unknown_backend_names_only_installed_ones(monkeypatch, tiny_instance):
    _make_unavailable(monkeypatch, "cpsat")
    with pytest.raises(OptionError) as ei:
        solve(tiny_instance, "ilp", backend="gurobi")
    assert "installed: highs, cbc" in str(ei.value)


def test_no_backend_at_all(monkeypatch, tiny_instance, tmp_path, capsys):
    _make_unavailable(monkeypatch, *BACKEND_NAMES)
    with pytest.raises(BackendUnavailableError) as ei:
        get_backend(None)
    assert "no ILP backend is installed" in str(ei.value)
    p = tmp_path / "tiny.json"
    save_instance(tiny_instance, p)
    out = tmp_path / "pl.json"
    rc = main(["solve", str(p), "--method", "ilp", "--out", str(out)])
    o, e = capsys.readouterr()
    assert rc == 2 and e.count("\n") == 1 and "no ILP backend is installed" in e and o == ""
    assert not out.exists()
    # greedy methods do not need a solver
    assert main(["solve", str(p), "--method", "pal", "--out", str(out)]) == 0


def test_cli_unavailable_backend_one_line(monkeypatch, tiny_instance, tmp_path, capsys):
    _make_unavailable(monkeypatch, "cbc")
    p = tmp_path / "tiny.json"
    save_instance(tiny_instance, p)
    out = tmp_path / "pl.json"
    rc = main(["solve", str(p), "--method", "ilp", "--backend", "cbc", "--out", str(out)])
    o, e = capsys.readouterr()
    assert rc == 2 and o == "" and e.count("\n") == 1
    assert e.startswith("pal-opt: error: backend 'cbc' is not available") and "installed: highs, cpsat" in e
    assert not out.exists()
    rc = main(["solve", str(p), "--method", "ilp", "--backend", "gurobi"])
    o, e = capsys.readouterr()
    assert rc == 2 and e.count("\n") == 1 and "invalid choice: 'gurobi'" in e and "Traceback" not in e


@pytest.mark.usefixtures("ctrl_c")
def test_interrupt_turned_into_an_import_error_still_exits_130(monkeypatch, tiny_instance, tmp_path, capsys):
    """A C extension interrupted while it is imported reports ImportError (seen with ortools);
    the CLI must still report the Ctrl-C, not a missing backend."""
    cls = BACKENDS["cpsat"]

    def probe(c):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None

    monkeypatch.setattr(cls, "_probe", classmethod(probe))
    monkeypatch.setattr(cls, "_available", None)
    monkeypatch.setattr(cls, "_import_error", None)
    p = tmp_path / "tiny.json"
    save_instance(tiny_instance, p)
    out = tmp_path / "pl.json"
    rc = main(["solve", str(p), "--method", "ilp", "--backend", "cpsat", "--out", str(out)])
    o, e = capsys.readouterr()
    assert rc == 130, e
    assert e == "pal-opt: interrupted\n"
    assert not out.exists()


# =========================================================================== interrupts
def _communicate(p: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    """``p.communicate`` that kills a hung pal-opt (and fails) instead of leaving it running."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kids = _descendants(p.pid)
        p.kill()
        o, e = p.communicate()
        _reap(kids)
        raise AssertionError(f"pal-opt still running {timeout:.0f} s after the signal; stderr: {e[-500:]!r}") from None


def _valid_placement_or_absent(out: Path, instance: Path) -> None:
    if not out.exists():
        return
    doc = json.loads(out.read_text())  # complete JSON
    assert isinstance(doc.get("placements"), dict) and doc["status"] in ("optimal", "feasible", "fallback")
    r = subprocess.run(_cli_cmd("check", str(instance), str(out)), capture_output=True, text=True, timeout=120,
                       env=_env())
    assert r.returncode == 0, r.stdout + r.stderr


def _no_temp_files(directory: Path, keep: set[str]) -> None:
    left = sorted(p.name for p in directory.iterdir() if p.name not in keep)
    assert left == [], f"left behind: {left}"


# ``pal-opt`` once its command module is imported (the tests below signal it after READY)
_STARTED = "import sys; import pal_opt.cli as c; print('READY', flush=True); c.run(sys.argv[1:])"


def _interrupted_ok(rc: int, err: str) -> bool:
    """Exit 130 with one line; or killed by SIGINT (-2, which a shell reports as 130) after
    printing that line: CPython does the latter when a library (ortools' module init) ran Python
    code that the KeyboardInterrupt passed through."""
    if rc not in (130, -signal.SIGINT) or err.count("\n") != 1:
        return False
    return err == "pal-opt: interrupted\n" or err.startswith("pal-opt: interrupted: kept the best placement found so far")


@pytest.mark.parametrize(("backend", "time_limit", "max_wait"), [
    ("cpsat", 60, 30),
    ("cbc", 60, 30),
    ("highs", 60, 30),
])
def test_sigint_during_a_long_solve(backend, time_limit, max_wait, tmp_path):
    """SIGINT 1.5 s into ``pal-opt solve large --method ilp --time-limit 60`` (building the
    program, pricing the starts or solving): exit 130 (or a clean result), no traceback, the
    output absent or a complete valid placement."""
    out = tmp_path / "pl.json"
    p = popen(
        [sys.executable, "-c", _STARTED, "solve", str(LARGE), "--method", "ilp", "--backend", backend,
         "--time-limit", str(time_limit), "--out", str(out)],
        cwd=tmp_path, env=_env(),
    )
    assert p.stdout is not None and p.stdout.readline() == "READY\n"
    time.sleep(1.5)
    kids = _descendants(p.pid)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    o, e = _communicate(p)
    waited = time.monotonic() - t0
    _reap(kids)  # a CBC left behind is test_sigint_inside_the_solver[cbc]'s subject, not this one's
    assert "Traceback" not in e and "Traceback" not in o, e[-2000:]
    if p.returncode != 0:
        assert _interrupted_ok(p.returncode, e), (p.returncode, e)
        assert out.exists() == ("kept the best placement" in e), e
        _interrupted_output_ok(out, LARGE)
    else:
        assert out.exists()
        _valid_placement_or_absent(out, LARGE)
    _no_temp_files(tmp_path, {"pl.json"})
    assert waited < max_wait, f"{waited:.1f} s to react to SIGINT"


@pytest.mark.parametrize("delay", [0.1, 0.3, 0.6])
def test_sigint_during_startup_has_no_traceback(tmp_path, delay):
    """Ctrl-C while pal-opt is still importing numpy, scipy, networkx...: one line, exit 130.
    ``import pal_opt.cli`` is cheap (the package's names load lazily), so the CLI's handler is in
    place before any of them is imported.  The delay counts from the moment ``pal_opt.cli`` is
    imported (READY), not from the process start: how long the interpreter takes to get there
    depends on the machine's load and on whether bytecode is cached (``PYTHONDONTWRITEBYTECODE``
    compiles every module), and a SIGINT before it is Python's own, with its traceback."""
    p = popen([sys.executable, "-c", _STARTED, "solve", str(LARGE), "--out", str(tmp_path / "pl.json")],
              env=_env())
    assert p.stdout is not None and p.stdout.readline() == "READY\n"
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    o, e = _communicate(p)
    assert "Traceback" not in e, e[-2000:]
    if p.returncode == 0:  # the whole greedy solve finished before the signal: nothing to test
        return
    assert _interrupted_ok(p.returncode, e), (p.returncode, e)
    assert not (tmp_path / "pl.json").exists()


_DRIVER = textwrap.dedent(
    """
    import sys
    from pal_opt.ilp.backends import BACKENDS
    for cls in BACKENDS.values():
        def solve(self, *a, _orig=cls.solve, **k):
            print("SOLVER-START", flush=True)
            return _orig(self, *a, **k)
        cls.solve = solve
    from pal_opt.cli import run
    run(sys.argv[1:])
    """
)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def _reap(pids: list[int]) -> list[int]:
    """Kill the still-running processes among ``pids`` (started by this test's pal-opt) and
    delete the files named on their command lines under the temp dir (PuLP's model files).
    Returns the ones that were still running."""
    alive = [k for k in pids if _alive(k)]
    for k in alive:
        try:
            args = Path(f"/proc/{k}/cmdline").read_bytes().split(b"\0")
        except OSError:
            args = []
        try:
            os.kill(k, signal.SIGKILL)
        except ProcessLookupError:
            continue
        for a in args:
            f = Path(a.decode(errors="replace"))
            if f.name.endswith(("-pulp.mps", "-pulp.mst", "-pulp.sol", "-pulp.lp")) and f.parent == Path(
                    tempfile.gettempdir()):
                base = f.name.rsplit(".", 1)[0]
                for ext in (".mps", ".mst", ".sol", ".lp"):
                    (f.parent / (base + ext)).unlink(missing_ok=True)
    return alive


def _interrupt_in_solver(backend: str, tmp_path: Path, sig: int = signal.SIGINT, time_limit: str = "60",
                         instance: Path = RACKED, after: float = 1.0,
                         again: float | None = None) -> tuple[subprocess.Popen, str, str, float, list[int]]:
    """Run the CLI on ``instance``, signal it 1 s after the backend's solve starts."""
    out = tmp_path / "pl.json"
    p = popen(
        [sys.executable, "-c", _DRIVER, "solve", str(instance), "--method", "ilp", "--backend", backend,
         "--time-limit", time_limit, "--out", str(out)],
        cwd=tmp_path, env=_env(),
    )
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "SOLVER-START", line + (p.stderr.read() if p.stderr else "")
    time.sleep(after)
    kids = _descendants(p.pid)
    t0 = time.monotonic()
    p.send_signal(sig)
    if again is not None:
        time.sleep(again)
        if p.poll() is None:
            p.send_signal(sig)
    o, e = _communicate(p, 120)
    return p, o, e, time.monotonic() - t0, kids


def _interrupted_output_ok(out: Path, instance: Path) -> None:
    """After a Ctrl-C inside the solver: no output, or a complete valid placement marked as
    interrupted."""
    if out.exists():
        doc = json.loads(out.read_text())
        assert doc["info"].get("interrupted") is True, doc["info"]
        assert doc["status"] in ("feasible", "fallback", "optimal"), doc["status"]
    _valid_placement_or_absent(out, instance)


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_sigint_inside_the_solver(backend, tmp_path, private_tmpdir):
    """Ctrl-C 1 s into the solver: the solver stops within seconds, pal-opt prints and writes the
    best placement it had, exits 130 with one line, and leaves no solver process or file behind."""
    p, o, e, waited, kids = _interrupt_in_solver(backend, tmp_path)
    out = tmp_path / "pl.json"
    orphans = _reap(kids)  # anything still running that this pal-opt started
    assert orphans == [], f"solver processes {orphans} outlived pal-opt"
    assert "Traceback" not in e, e[-2000:]
    assert waited < 10, f"{waited:.1f} s to react to SIGINT"
    if p.returncode == 0:  # the solve ended before the signal was acted on
        assert out.exists()
    else:
        assert _interrupted_ok(p.returncode, e), (p.returncode, e)
    _interrupted_output_ok(out, RACKED)
    if out.exists() and p.returncode != 0:
        assert "status" in o and "wrote" in o  # the summary was printed too
    _no_temp_files(tmp_path, {"pl.json"})
    _no_temp_files(private_tmpdir, set())  # pal-opt's TMPDIR: CBC's working directory is gone


@pytest.mark.parametrize(("backend", "instance"), [("highs", RACKED), ("highs", LARGE), ("cpsat", LARGE),
                                                   ("cbc", RACKED)])
def test_second_sigint_ends_cleanly(backend, instance, tmp_path):
    """Two Ctrl-Cs 20 ms apart, 1 s into the solve: the second gives up on the solver.  pal-opt
    must still end with one line and exit 130, without a traceback and without the C++ runtime
    aborting over a solver thread still running at exit (``terminate called``, SIGABRT); the
    output is absent or a complete placement."""
    p, o, e, waited, kids = _interrupt_in_solver(backend, tmp_path, instance=instance, again=0.02)
    _reap(kids)
    assert "Traceback" not in e and "terminate" not in e, e[-2000:]
    assert p.returncode in (0, 130, -signal.SIGINT), (p.returncode, e)
    if p.returncode != 0:
        assert _interrupted_ok(p.returncode, e), (p.returncode, e)
    _interrupted_output_ok(tmp_path / "pl.json", instance)
    assert waited < 10


def test_sigint_inside_highs_is_prompt(tmp_path):
    """large-256x8 keeps HiGHS busy until its time limit (20 s); Ctrl-C 1 s in (HiGHS is then in
    presolve, which it leaves before it looks at the interrupt, about 3 s) ends the run."""
    p, o, e, waited, _ = _interrupt_in_solver("highs", tmp_path, time_limit="20", instance=LARGE)
    assert "Traceback" not in e, e[-2000:]
    assert p.returncode == 130, (p.returncode, e)
    assert e.startswith("pal-opt: interrupted"), e
    _interrupted_output_ok(tmp_path / "pl.json", LARGE)
    assert (tmp_path / "pl.json").exists()  # the start placement at least
    assert waited < 10, f"{waited:.1f} s to react to SIGINT"


@pytest.mark.parametrize("runs", [
    pytest.param(5, id="5-runs"),
    pytest.param(30, id="30-runs", marks=[pytest.mark.slow, pytest.mark.timeout(900)]),
])
def test_sigint_early_in_cpsat_never_hangs(tmp_path, runs):
    """Ctrl-C 0.02-0.11 s into CP-SAT's solve (its presolve): pal-opt must always end, without a
    traceback.  (OR-Tools' own SIGINT handler, which pal-opt switches off, logged through absl
    from inside the handler and could deadlock on the malloc lock.)"""
    for k in range(runs):
        p = popen(
            [sys.executable, "-c", _DRIVER, "solve", str(RACKED), "--method", "ilp", "--backend", "cpsat",
             "--time-limit", "20", "--out", str(tmp_path / f"pl{k}.json")],
            cwd=tmp_path, env=_env(),
        )
        assert p.stdout is not None and p.stdout.readline() == "SOLVER-START\n"
        time.sleep(0.02 + 0.01 * (k % 10))
        p.send_signal(signal.SIGINT)
        o, e = _communicate(p, 40)
        assert "Traceback" not in e, e[-2000:]
        assert p.returncode in (0, 130), (p.returncode, e)


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_sigint_ignored_at_start_stays_ignored(backend, tmp_path, private_tmpdir):
    """pal-opt started with SIGINT ignored (``nohup``, ``trap '' INT``) keeps ignoring it, the Unix
    convention: a terminal's Ctrl-C (SIGINT to the whole process group, sent here every 0.3 s from
    the start of the solve) changes nothing; the solver, CBC's process included (it installs a
    SIGINT handler of its own once its search starts), runs to its time limit and pal-opt
    writes its answer as usual."""
    out = tmp_path / "pl.json"
    p = popen([sys.executable, "-c", _DRIVER, "solve", str(RACKED), "--method", "ilp", "--backend", backend,
               "--time-limit", "3", "--out", str(out)],
              sigint_ignored=True, start_new_session=True, cwd=tmp_path, env=_env())
    assert p.stdout is not None and p.stdout.readline() == "SOLVER-START\n"
    deadline = time.monotonic() + 120
    try:
        while p.poll() is None and time.monotonic() < deadline:
            os.killpg(p.pid, signal.SIGINT)
            time.sleep(0.3)
    except ProcessLookupError:  # the group is gone: pal-opt has ended
        pass
    o, e = _communicate(p)
    assert p.returncode == 0, (p.returncode, e)
    assert "interrupted" not in e and "Traceback" not in e, e[-2000:]
    doc = json.loads(out.read_text())
    assert doc["info"].get("interrupted") is not True, doc["info"]
    assert "ctrl-c" not in doc["message"].lower(), doc["message"]  # CBC's "Stopped on ctrl-c"
    _valid_placement_or_absent(out, RACKED)
    _no_temp_files(tmp_path, {"pl.json"})
    _no_temp_files(private_tmpdir, set())


def test_sigterm_leaves_the_old_output_intact(tmp_path):
    """SIGTERM keeps its default (immediate exit, even inside a solver): nothing is half written."""
    out = tmp_path / "pl.json"
    out.write_text("previous result\n")
    p = popen(
        _cli_cmd("solve", str(LARGE), "--method", "ilp", "--backend", "highs", "--time-limit", "60",
                 "--out", str(out)),
        cwd=tmp_path, env=_env(),
    )
    time.sleep(1.5)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    o, e = _communicate(p)
    assert p.returncode == -signal.SIGTERM, e
    assert time.monotonic() - t0 < 5
    assert "Traceback" not in e
    assert out.read_text() == "previous result\n"
    _no_temp_files(tmp_path, {"pl.json"})


def test_sigterm_inside_cbc_takes_cbc_along(tmp_path, private_tmpdir):
    """SIGTERM while CBC runs (``timeout``, a pod stopping): pal-opt still dies of SIGTERM, at
    once and writing nothing, but CBC dies with it and its directory is removed (CBC ran on to
    its 60 s limit before)."""
    out = tmp_path / "pl.json"
    p, o, e, waited, kids = _interrupt_in_solver("cbc", tmp_path, sig=signal.SIGTERM)
    orphans = _reap(kids)
    assert orphans == [], f"CBC {orphans} outlived pal-opt"
    assert p.returncode == -signal.SIGTERM, (p.returncode, e[-2000:])
    assert waited < 5
    assert "Traceback" not in e
    assert not out.exists()
    _no_temp_files(private_tmpdir, set())


def _cmdlines(pids: list[int]) -> list[str]:
    out = []
    for k in pids:
        try:
            out.append(Path(f"/proc/{k}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return out


@pytest.mark.parametrize(("backend", "started_when"), [("cbc", "solverdir/cbc"), ("highs", "highs_server")])
def test_sigterm_stops_the_workers_of_a_partitioned_solve(backend, started_when, tmp_path, private_tmpdir):
    """SIGTERM to ``pal-opt solve --method ilp-partitioned``: the pool's workers, each with its
    solver (CBC, or HiGHS's processes), ran on to their 60 s limit after pal-opt had died, and
    CBC's directories stayed behind.  Now every process it started ends with it, and nothing is
    left in its temporary directory (CBC's, nor the pool's own)."""
    out = tmp_path / "pl.json"
    env = {k: v for k, v in _env().items() if k != "PYTHONWARNINGS"}
    err = tmp_path / "stderr.txt"
    with err.open("w") as fh:  # a file, not a pipe: workers that outlive pal-opt would hold a pipe open
        p = popen(_cli_cmd("solve", str(LARGE), "--method", "ilp-partitioned", "--parts", "2", "--backend", backend,
                           "--time-limit", "60", "--out", str(out)), cwd=tmp_path, env=env,
                  stdout=subprocess.DEVNULL, stderr=fh)
    end = time.monotonic() + 60
    while sum(started_when in c for c in _cmdlines(_descendants(p.pid))) < 2 and p.poll() is None:
        assert time.monotonic() < end, "the parts' solvers did not start"
        time.sleep(0.1)
    time.sleep(1.0)
    kids = _descendants(p.pid)
    seen = {k: _cmdlines([k]) for k in kids}
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    finally:
        waited = time.monotonic() - t0
        time.sleep(0.5)  # the pool's forkserver and HiGHS's servers end as their parent's sockets close
        orphans = _reap(kids + [p.pid])
    assert orphans == [], f"{_cmdlines(orphans)} outlived pal-opt"
    e = err.read_text()
    assert p.returncode == -signal.SIGTERM, (p.returncode, e[-2000:])
    assert waited < 10 and e == "", e[-2000:]
    assert not out.exists()
    left = sorted(q.name for q in private_tmpdir.iterdir())
    assert left == [], (left, seen, p.pid, waited)


def test_a_partitioned_solve_under_a_time_limit_leaves_no_pool_directory(tmp_path, private_tmpdir):
    """Found by review: ``solve --time-limit`` ends with ``os._exit``, so multiprocessing's exit
    handler never removed its pool's ``pymp-*`` directory from TMPDIR, one per command."""
    out = tmp_path / "pl.json"
    r = subprocess.run(_cli_cmd("solve", str(RACKED), "--method", "ilp-partitioned", "--parts", "2",
                                "--time-limit", "30", "--out", str(out)), capture_output=True, text=True,
                       env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.exists()
    _no_temp_files(private_tmpdir, set())


# =========================================================================== atomic outputs
def test_failed_run_leaves_an_existing_output_intact(tmp_path, capsys, tiny_instance):
    good = tmp_path / "tiny.json"
    save_instance(tiny_instance, good)
    out = tmp_path / "pl.json"
    assert main(["solve", str(good), "--out", str(out)]) == 0
    before = out.read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_text(good.read_text().replace('"demand": 2', '"demand": -2', 1))
    for argv in (["solve", str(bad), "--out", str(out)],
                 ["solve", str(good), "--method", "ilp", "--backend", "nope", "--out", str(out)],
                 ["solve", str(good), "--method", "ilp", "--gap", "-1", "--out", str(out)],
                 ["import", "blox", "--gpus", str(bad), "--jobs", str(bad), "-o", str(out)],
                 ["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "3", "--busy-fraction", "2",
                  "-o", str(out)]):
        rc = main(argv)
        o, e = capsys.readouterr()
        assert rc == 2, (argv, e)
        assert e.count("\n") == 1 and "Traceback" not in e
        assert out.read_bytes() == before, argv
    _no_temp_files(tmp_path, {"tiny.json", "pl.json", "bad.json"})


def test_interrupted_run_leaves_the_old_output_or_a_complete_new_one(tmp_path):
    out = tmp_path / "pl.json"
    out.write_text('{"old": true}\n')
    p = popen(
        [sys.executable, "-c", _STARTED, "solve", str(LARGE), "--method", "ilp", "--backend", "cpsat",
         "--time-limit", "60", "--out", str(out)],
        cwd=tmp_path, env=_env(),
    )
    assert p.stdout is not None and p.stdout.readline() == "READY\n"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    o, e = _communicate(p)
    assert "Traceback" not in e, e[-2000:]
    assert p.returncode in (0, 130), (p.returncode, e)
    if out.read_text() != '{"old": true}\n':
        _valid_placement_or_absent(out, LARGE)
    _no_temp_files(tmp_path, {"pl.json"})


def test_unwritable_output_is_one_line(tmp_path, capsys, tiny_instance):
    good = tmp_path / "tiny.json"
    save_instance(tiny_instance, good)
    for target in (tmp_path / "no" / "such" / "dir" / "pl.json", tmp_path):
        rc = main(["solve", str(good), "--out", str(target)])
        o, e = capsys.readouterr()
        # a missing directory is found when writing, a directory as the file by the option's type
        assert rc == 2 and e.count("\n") == 1 and e.startswith(("pal-opt: error: ", "pal-opt solve: error: "))
        assert "Traceback" not in e
    _no_temp_files(tmp_path, {"tiny.json"})


def test_non_ascii_names_on_an_ascii_terminal(tmp_path, tiny_instance):
    """A round named in Unicode must not crash the summary on an ASCII stdout."""
    from dataclasses import replace

    p = tmp_path / "u.json"
    save_instance(replace(tiny_instance, name="caf\u00e9-\u03bb-\u4e2d"), p)
    out = tmp_path / "pl.json"
    r = subprocess.run(_cli_cmd("solve", str(p), "--out", str(out)), capture_output=True, text=True,
                       env={**_env(), "PYTHONIOENCODING": "ascii"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "caf\\xe9" in r.stdout
    assert out.exists()


def test_closed_stdout_pipe_is_quiet(tmp_path, tiny_instance):
    """``pal-opt solve ... | true``: the reader is gone before the summary is printed."""
    p = tmp_path / "t.json"
    save_instance(tiny_instance, p)
    proc = subprocess.Popen(_cli_cmd("solve", str(p)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert err == "", err
    assert proc.returncode == 0  # the solve's own status: a reader that left is not "no answer" (exit 1)
