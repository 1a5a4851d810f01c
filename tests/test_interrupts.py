"""Ctrl-C inside an exact solve, through the library API, on the real solvers.

``KeyboardInterrupt`` is delivered to the main thread with ``_thread.interrupt_main()`` (what a
SIGINT does) one second after a backend's ``solve`` is entered; the backends run unchanged.  The
subprocess tests in ``test_faults.py`` cover the same through the CLI with real signals.  The
check that every registered backend hands back its incumbent on Ctrl-C is part of the backend
conformance suite (``conformance.py``); the helpers are in ``procs.py``.  Every test here runs
under the ``ctrl_c`` fixture (``conftest.py``): Python's SIGINT handler in place even when the run
inherited SIGINT ignored, and no gc callback (Hypothesis leaves one) to swallow the
``KeyboardInterrupt``.
"""

from __future__ import annotations

import _thread
import gc
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from procs import cbc_dirs, interrupt_when_solving, own_children, popen, sigint_ignored

import pal_opt
from pal_opt.check import check
from pal_opt.errors import SolveInterrupted
from pal_opt.ilp.backends import BACKENDS
from pal_opt.ilp.backends.base import BackendAbandoned, BackendInterrupted, run_interruptibly
from pal_opt.io import load_instance
from pal_opt.result import Status
from pal_opt.solve import solve

ROOT = Path(__file__).resolve().parents[1]
RACKED = ROOT / "instances" / "racked-64x8.json"

pytestmark = pytest.mark.usefixtures("ctrl_c")


@pytest.fixture(scope="module")
def racked():
    return load_instance(RACKED)


def test_ctrl_c_reaches_the_test_whatever_ran_before():
    """The ``ctrl_c`` fixture: Python's handler is in place, a gc callback like Hypothesis's (which
    CPython lets swallow a ``KeyboardInterrupt``) is gone, and ``procs.popen`` starts a child with
    SIGINT at its default (or ignored, on request) even from a process that ignores it."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert gc.callbacks == []
    # Garbage left by earlier tests may hold weak references with callbacks (a WeakKeyDictionary's
    # key, say); were it collected inside the loop below, the interrupt could land in such a
    # callback, which CPython runs with exceptions swallowed.  Collect it first.
    gc.collect()
    threading.Timer(0.2, _thread.interrupt_main).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        while time.monotonic() - t0 < 10:
            [[] for _ in range(1000)]  # one collection after another
    assert time.monotonic() - t0 < 5
    saved = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for ignored in (False, True):
            p = popen(["sleep", "30"], sigint_ignored=ignored)
            try:
                assert sigint_ignored(p.pid) is ignored
            finally:
                p.kill()
                p.communicate()
    finally:
        signal.signal(signal.SIGINT, saved)


def test_solve_interrupted_is_a_keyboard_interrupt(monkeypatch, racked):
    """Code that handles Ctrl-C as ``KeyboardInterrupt`` keeps working unchanged."""
    interrupt_when_solving(monkeypatch, "cpsat", after=0.5)
    with pytest.raises(KeyboardInterrupt):
        solve(racked, "ilp", backend="cpsat", time_limit=60)


def test_the_solver_is_usable_after_an_interrupt(monkeypatch, racked):
    """An interrupted HiGHS solve leaves the process able to solve again (its task scheduler is
    released after every run), with the same answer as an undisturbed solve."""
    small = pal_opt.generate_instance(nodes=8, gpus_per_node=4, jobs=20, seed=3)
    before = solve(small, "ilp", backend="highs")
    with monkeypatch.context() as m:
        interrupt_when_solving(m, "highs", after=0.5)  # (racked-64x8 is solved in under 2 s when idle)
        with pytest.raises(SolveInterrupted):
            solve(racked, "ilp", backend="highs", time_limit=60)
    assert own_children() == []  # HiGHS's child process answered with its incumbent and ended
    after = solve(small, "ilp", backend="highs")
    assert after.status == Status.OPTIMAL
    assert after.placements == before.placements


def test_ctrl_c_while_the_backend_translates_returns_the_start_placement(monkeypatch, private_tmpdir):
    """CBC spends its first second on large-256x8 building the PuLP model and writing the MPS
    file; a Ctrl-C there hands back the start placement, and no CBC process or file is left."""
    large = load_instance(ROOT / "instances" / "large-256x8.json")
    interrupt_when_solving(monkeypatch, "cbc", after=0.2)
    with pytest.raises(SolveInterrupted) as caught:
        solve(large, "ilp", backend="cbc", time_limit=60)
    res = caught.value.result
    assert res.status == Status.FALLBACK and res.info["interrupted"] is True
    assert "translate_seconds" not in res.info  # the solver never ran
    assert check(large, res) == []
    assert own_children() == [] and not cbc_dirs()


def test_one_ctrl_c_delivered_twice_is_one_press(monkeypatch):
    """``timeout -s INT`` signals the command and then its process group, so one Ctrl-C arrives
    twice: the second, within SAME_PRESS_SECONDS of the first (here 5 s, so that a loaded machine
    does not matter), is the same press, and the solver's answer is kept, not given up on.  The
    second one arrives while the stop is being requested, which must not escape either."""
    from pal_opt.ilp.backends import base

    monkeypatch.setattr(base, "SAME_PRESS_SECONDS", 5.0)
    stopped = threading.Event()
    requests: list[float] = []

    def stop() -> None:
        if not requests:  # the first request: the same press, delivered again, lands during it
            requests.append(time.monotonic())
            threading.Timer(0.3, stopped.set).start()  # the solver stops 0.3 s after it is asked to
            _thread.interrupt_main()
            time.sleep(0.05)

    threading.Timer(0.2, _thread.interrupt_main).start()
    value, interrupted = run_interruptibly(lambda: "answer" if stopped.wait(10) else "late", stop)
    assert (value, interrupted) == ("answer", True) and requests
    monkeypatch.setattr(base, "SAME_PRESS_SECONDS", 0.0)  # every repeat a second press: given up on
    stopped.clear()
    requests.clear()
    threading.Timer(0.2, _thread.interrupt_main).start()
    with pytest.raises(BackendAbandoned):
        run_interruptibly(lambda: stopped.wait(10), stop)
    stopped.wait(5)


def test_one_ctrl_c_delivered_twice_is_one_press_for_cbc_too(monkeypatch, tmp_path):
    """CBC's runner asked CBC to stop inside its KeyboardInterrupt handler, so the same press
    delivered again while it did escaped as a plain KeyboardInterrupt and CBC's incumbent was lost;
    the request is now made inside the guarded block.  A ``sleep`` stands in for CBC."""
    from pal_opt.ilp.backends import base, cbc

    monkeypatch.setattr(base, "SAME_PRESS_SECONDS", 5.0)
    send = subprocess.Popen.send_signal
    again: list[int] = []

    def send_signal(self, sig):  # type: ignore[no-untyped-def]
        if not again:  # the same press, delivered a second time while the stop request is sent
            again.append(sig)
            _thread.interrupt_main()
            time.sleep(0.01)
        return send(self, sig)

    monkeypatch.setattr(subprocess.Popen, "send_signal", send_signal)
    threading.Timer(0.3, _thread.interrupt_main).start()
    try:
        run = cbc._run_cbc(["sleep", "5"], str(tmp_path / "cbc.log"), None)
    except KeyboardInterrupt:  # (not left to end the test session)
        pytest.fail("the same press, delivered twice, escaped as a KeyboardInterrupt")
    assert again and run.interrupted and run.stopped_by == "sigint"


def test_a_second_ctrl_c_keeps_nothing(monkeypatch):
    """A solver that does not act on the stop request at once (HiGHS presolving a large round may
    not look at it for a while; here its stop requests are held back for 1.5 s, so that the test
    does not depend on the machine's speed): a second Ctrl-C gives up waiting, a plain
    KeyboardInterrupt, no result."""
    large = load_instance(ROOT / "instances" / "large-256x8.json")
    cls = BACKENDS["highs"]
    stop = cls._stop
    first: list[float] = []

    def slow_stop(self, model):  # type: ignore[no-untyped-def]
        if not first:  # the first request reaches HiGHS 1.5 s late; the repeats not at all
            first.append(time.monotonic())
            late = threading.Timer(1.5, stop, (self, model))
            late.daemon = True
            late.start()

    monkeypatch.setattr(cls, "_stop", slow_stop)
    run, mip = cls._run, cls.solve
    state = {"in_mip": False, "fired": False, "returned": False}

    def fire() -> None:  # two presses 0.8 s apart (beyond SAME_PRESS_SECONDS, 0.2 s: a second press)
        for delay in (0.3, 0.8):
            time.sleep(delay)
            if state["returned"]:  # a Ctrl-C after the solve would land in whatever runs next (pytest)
                return
            _thread.interrupt_main()

    def run_then_interrupt(self, model):  # type: ignore[no-untyped-def]
        # the presses come once HiGHS runs the MIP: not while its model is translated, which takes
        # longer than a fixed delay on a loaded machine (and hands back the start placement)
        if state["in_mip"] and not state["fired"]:
            state["fired"] = True
            threading.Thread(target=fire, daemon=True).start()
        return run(self, model)

    def solve_mip(self, *a, **k):  # type: ignore[no-untyped-def]
        state["in_mip"] = True
        try:
            return mip(self, *a, **k)
        finally:
            state["returned"] = True

    monkeypatch.setattr(cls, "_run", run_then_interrupt)
    monkeypatch.setattr(cls, "solve", solve_mip)
    with pytest.raises(KeyboardInterrupt) as caught:
        solve(large, "ilp", backend="highs", time_limit=8)
    assert not isinstance(caught.value, SolveInterrupted)
    # the abandoned solver stops by itself (asked to, or at its limit); wait so that it does not
    # share HiGHS with the tests after this one
    deadline = time.monotonic() + 20
    while any(t.name == "pal-opt-solver" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(t.name == "pal-opt-solver" for t in threading.enumerate())
    assert own_children() == []  # the given-up HiGHS child process was killed


def test_ctrl_c_in_the_lp_relaxation_returns_the_start_placement(monkeypatch, racked):
    """With a gap target HiGHS first solves the LP relaxation; an interrupt there hands back the
    start placement (the backend raises BackendInterrupted without a solution)."""
    cls = BACKENDS["highs"]

    def interrupted(self, form, options):  # type: ignore[no-untyped-def]
        raise BackendInterrupted(None)

    monkeypatch.setattr(cls, "relaxation_bound", interrupted)
    with pytest.raises(SolveInterrupted) as caught:
        solve(racked, "ilp", backend="highs", gap=0.001)
    res = caught.value.result
    assert res.status == Status.FALLBACK and res.info["interrupted"] is True
    src = res.info["start_source"]
    assert res.objective == pytest.approx(res.info[f"start_{src}_objective"], rel=1e-12)
    assert check(racked, res) == []


# --------------------------------------------------------------------------- the runner
def test_runner_returns_the_value_and_reraises_errors():
    assert run_interruptibly(lambda: 41 + 1, lambda: None) == (42, False)

    def boom() -> None:
        raise ValueError("solver crashed")

    with pytest.raises(ValueError, match="solver crashed"):
        run_interruptibly(boom, lambda: None)


def test_runner_first_interrupt_asks_the_solver_to_stop():
    stop = threading.Event()

    def work() -> str:
        return "stopped" if stop.wait(20) else "ran to its limit"

    threading.Timer(0.2, _thread.interrupt_main).start()
    t0 = time.monotonic()
    value, interrupted = run_interruptibly(work, stop.set)
    assert (value, interrupted) == ("stopped", True)
    assert time.monotonic() - t0 < 5


def test_runner_second_interrupt_stops_waiting():
    """A solver that ignores the stop request: the second Ctrl-C gives up on it at once."""
    asked = []

    def fire() -> None:
        _thread.interrupt_main()
        time.sleep(0.3)
        _thread.interrupt_main()

    threading.Timer(0.2, fire).start()
    t0 = time.monotonic()
    release = threading.Event()
    with pytest.raises(BackendAbandoned):
        run_interruptibly(lambda: release.wait(20), lambda: asked.append(True))
    release.set()  # let the abandoned "solver" end, so that no helper thread outlives this test
    assert 1 <= len(asked) <= 5  # asked at the first Ctrl-C and at each poll until the second
    assert time.monotonic() - t0 < 5


# --------------------------------------------------------------------------- lazy imports
def test_importing_the_package_or_its_cli_loads_no_heavy_library():
    """``import pal_opt`` and ``import pal_opt.cli`` stay cheap, so the CLI's Ctrl-C handling is
    in place before numpy, scipy, networkx, pandas or a solver is imported."""
    code = ("import sys, pal_opt, pal_opt.cli; "
            "print(sorted(m for m in ('numpy', 'scipy', 'networkx', 'pandas', 'sklearn', 'ortools', "
            "'highspy', 'pulp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_every_public_name_resolves():
    for name in pal_opt.__all__:
        assert getattr(pal_opt, name) is not None, name
    # not the module's own imports (Any, sys, ...); the subpackages for tab completion
    assert set(dir(pal_opt)) == set(pal_opt.__all__) | {"adapters", "cost", "hetero", "ilp", "io", "pipeline",
                                                        "policies", "simulate", "topology"}
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        pal_opt.no_such_name  # noqa: B018
    from pal_opt import SolveInterrupted as exported

    assert exported is SolveInterrupted


def test_the_public_list_matches_the_lazy_table():
    from pal_opt import _EXPORTS  # type: ignore[attr-defined]

    assert sorted(pal_opt.__all__) == sorted([*_EXPORTS, "__version__"])


def test_public_functions_survive_their_submodule_being_imported_first():
    """``pal_opt/solve.py`` defines ``solve`` and ``pal_opt/check.py`` defines ``check``: importing
    the submodules first (as the CLI does) must not hide the functions behind the modules."""
    code = ("import types, pkgutil, importlib, pal_opt.solve, pal_opt.check, pal_opt.cli, pal_opt; "
            "[importlib.import_module('pal_opt.' + m.name) for m in pkgutil.iter_modules(pal_opt.__path__)]; "
            "bad = [n for n in pal_opt.__all__ if isinstance(getattr(pal_opt, n), types.ModuleType)]; "
            "print(bad, pal_opt.solve.__module__, pal_opt.check.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["[]", "pal_opt.solve", "pal_opt.check"], out.stdout + out.stderr


def test_solves_from_worker_threads_run_in_a_helper_thread(monkeypatch):
    """A scheduler solving rounds in worker threads: the solver runs in a helper thread, as from
    the main thread, so that the worker's wait keeps the deadline and reports progress (it once
    ran in the worker itself, where nothing stopped it past its limit), and concurrent solves on
    different backends give the undisturbed answers."""
    import pal_opt.ilp.backends.base as base_mod

    small = pal_opt.generate_instance(nodes=8, gpus_per_node=4, jobs=20, seed=5)
    expected = {b: solve(small, "ilp", backend=b).placements for b in BACKENDS}
    ran_in: list[str] = []

    def spy(work, stop):  # type: ignore[no-untyped-def]
        def recorded():  # type: ignore[no-untyped-def]
            ran_in.append(threading.current_thread().name)
            return work()
        return run_interruptibly(recorded, stop)

    # the in-process backends (HiGHS, CP-SAT) run their solver through ThreadedBackend._execute
    monkeypatch.setattr(base_mod, "run_interruptibly", spy)
    seen: dict[str, object] = {}

    def worker(backend: str) -> None:
        seen[backend] = solve(small, "ilp", backend=backend).placements

    threads = [threading.Thread(target=worker, args=(b,), name=f"sched-{b}") for b in BACKENDS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert seen == expected
    assert ran_in == ["pal-opt-solver", "pal-opt-solver"]
    # and from the main thread too
    ran_in.clear()
    solve(small, "ilp", backend="cpsat")
    assert ran_in == ["pal-opt-solver"]


def test_runner_repeats_the_stop_request_until_the_solver_takes_it():
    """A solver that misses the first request (CP-SAT ignores ``stop_search`` made before its
    search has started) is asked again every poll until it stops."""
    calls: list[float] = []
    taken = threading.Event()

    def stop() -> None:
        calls.append(time.monotonic())
        if len(calls) >= 3:
            taken.set()

    threading.Timer(0.2, _thread.interrupt_main).start()
    value, interrupted = run_interruptibly(lambda: taken.wait(20), stop)
    assert (value, interrupted) == (True, True)
    assert len(calls) == 3


def test_a_worker_threads_wait_stops_the_solver_and_gives_up_at_the_deadline():
    """Off the main thread the deadlines hold: ``stop()`` from ``stop_at`` on, abandoned at
    ``give_up_at`` (a worker thread's CP-SAT with its own limit at 30 s once took 12.6 s for
    a 1.5 s limit, since nothing stopped it)."""
    from pal_opt.ilp.backends.base import BackendOverran

    out: dict[str, object] = {}

    def worker() -> None:
        stopped = threading.Event()
        now = time.monotonic()
        out["stopped"] = run_interruptibly(lambda: stopped.wait(20), stopped.set, stop_at=now + 0.1)
        never = threading.Event()
        try:
            run_interruptibly(lambda: never.wait(20), lambda: None, stop_at=now, give_up_at=time.monotonic() + 0.2)
        except BackendOverran as exc:
            out["overran"] = str(exc)
        finally:
            never.set()

    t = threading.Thread(target=worker)
    t.start()
    t.join(30)
    assert out["stopped"] == (True, False)
    assert "had not stopped by the deadline" in str(out["overran"])


def test_a_worker_threads_solve_reports_progress_while_the_solver_runs():
    """Progress is polled by the waiting thread: a worker thread's listener heard only the
    stages before the solver started (3 reports against 29 from the main thread)."""
    from pal_opt.progress import reporting

    inst = pal_opt.generate_instance(nodes=32, gpus_per_node=8, jobs=120, racks=4, seed=1, busy_fraction=0.2,
                                     running_fraction=0.2, restart_cost=30)
    seen: list[dict[str, object]] = []

    def worker() -> None:
        with reporting(seen.append):
            solve(inst, "ilp", backend="cpsat", time_limit=2.0)

    t = threading.Thread(target=worker)
    t.start()
    t.join(60)
    polled = [r for r in seen if r.get("stage") == "solving" and "seconds" in r]
    assert polled, seen  # every POLL_SECONDS while CP-SAT runs (not proven within 2 s); none before


def test_solve_interrupted_survives_pickling(racked):
    """A SolveInterrupted raised in a worker process reaches the parent with its result."""
    import pickle

    res = solve(racked, "pal")
    for exc in (SolveInterrupted(res), SolveInterrupted(None), BackendInterrupted(None)):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc)
    assert pickle.loads(pickle.dumps(SolveInterrupted(res))).result.placements == res.placements


def test_an_interrupted_part_is_not_handed_back_as_the_round(monkeypatch, racked):
    """solve_partitioned: a part's interrupted placement covers that part only, so the partitioned
    solve raises a plain KeyboardInterrupt, and (serially) no later part is solved."""
    from pal_opt.ilp import solve_partitioned

    calls = []

    def interrupted(self, form, options, start=None):  # type: ignore[no-untyped-def]
        calls.append(form.num_vars)
        raise BackendInterrupted(None)

    monkeypatch.setattr(BACKENDS["highs"], "solve", interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        solve_partitioned(racked, 2, backend="highs", executor="serial", bound="none")
    assert not isinstance(caught.value, SolveInterrupted)
    assert len(calls) == 1


def test_cbc_works_with_a_thousand_open_files(tmp_path):
    """The CBC wait must not use select(), which fails on descriptors >= 1024 (a long-running
    service or a Dask worker easily holds that many)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1300
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"the hard limit on open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    files = []
    try:
        for k in range(1100):
            files.append(open(tmp_path / f"f{k}", "w"))  # noqa: SIM115
        small = pal_opt.generate_instance(nodes=4, gpus_per_node=4, jobs=8, seed=2)
        r = solve(small, "ilp", backend="cbc", time_limit=30)
        assert r.status == Status.OPTIMAL
        assert r.objective == pytest.approx(solve(small, "ilp", backend="highs").objective, rel=1e-9)
    finally:
        for f in files:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_cbc_stopped_at_its_deadline_is_never_called_infeasible():
    """CBC 2.10.3 stopped by its own time limit (or by pal-opt's SIGINT) in the middle of
    preprocessing can print "Pre-processing says infeasible" and write "Infeasible" (seen at 1.8
    and 1.9 s limits on large-256x8).  Out of time, CBC is not believed about infeasibility: the
    round program is always feasible, and the result is the start placement."""
    large = load_instance(ROOT / "instances" / "large-256x8.json")
    for limit in (1.7, 1.8, 1.9, 2.0, 2.1, 2.2):
        r = solve(large, "ilp", backend="cbc", time_limit=limit, warm_start=False)
        assert r.status in (Status.FALLBACK, Status.FEASIBLE), (limit, r.status, r.message)
        assert check(large, r) == []
