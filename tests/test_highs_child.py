"""HiGHS solves each MIP in a child process, so that a crash inside HiGHS costs one solve, not
pal-opt (:mod:`pal_opt.ilp.backends.highs_child`).

``tests/data/highs_crash_round.npz`` is the round on which highspy 1.13.1 and 1.14.0 end their
process with a segmentation fault when given pal-opt's start (``docs/limits.md``).  The other
tests make the child crash on purpose (``HighsBackend.crash_for_test``: it sends itself SIGSEGV
before solving) to check the recovery whatever HiGHS version is installed.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("highspy")

from pal_opt.ilp.backends.base import SolveOptions, SolverStatus  # noqa: E402
from pal_opt.ilp.backends.highs import HighsBackend  # noqa: E402
from pal_opt.ilp.backends.highs_run import load_model as real_load  # noqa: E402
from pal_opt.ilp.program import Program  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CRASH_ROUND = REPO / "tests" / "data" / "highs_crash_round.npz"


def _knapsack() -> tuple[Program, np.ndarray]:
    """max 1·x0 + 2·x1 + 3·x2 + 4·x3 with at most two items: optimum −7 (x2, x3); start x0, x1."""
    program = Program.from_arrays(c=[-1.0, -2.0, -3.0, -4.0], A=np.ones((1, 4)), row_lo=[-np.inf], row_hi=[2.0],
                                  col_lo=np.zeros(4), col_hi=np.ones(4), integrality=[True] * 4)
    return program, np.array([1.0, 1.0, 0.0, 0.0])


def _crash_round() -> tuple[Program, dict[str, np.ndarray]]:
    """The saved round as a :class:`Program`, and the file's arrays (``start`` among them)."""
    d = dict(np.load(CRASH_ROUND))
    A = sp.csc_matrix((d["data"], d["indices"], d["indptr"]), shape=(int(d["m"]), int(d["n"])))
    program = Program.from_arrays(c=d["c"], A=A, row_lo=d["rlo"], row_hi=d["rhi"], col_lo=d["lo"], col_hi=d["hi"],
                                  integrality=d["integ"], obj_offset=float(d["off"]))
    return program, d


@pytest.fixture
def crashing(monkeypatch: pytest.MonkeyPatch):
    def crash(times: int) -> None:
        monkeypatch.setattr(HighsBackend, "crash_for_test", times)
    monkeypatch.delenv("PAL_OPT_HIGHS_IN_PROCESS", raising=False)
    return crash


def test_a_crash_is_solved_again_without_the_start(crashing, caplog: pytest.LogCaptureFixture) -> None:
    crashing(1)
    program, start = _knapsack()
    with caplog.at_level(logging.WARNING, logger="pal_opt.ilp.backends.highs_child"):
        sol = HighsBackend().solve(program, SolveOptions(time_limit=30.0), start=start)
    assert sol.status == SolverStatus.OPTIMAL and sol.objective == pytest.approx(-7.0)
    assert sol.info["highs_crashes"] == 1
    assert "SIGSEGV" in sol.message and "without the start solution" in sol.message
    assert any("HiGHS crashed (SIGSEGV" in r.getMessage() for r in caplog.records)


def test_without_a_start_the_second_try_takes_the_next_seed(crashing) -> None:
    crashing(1)
    program, _ = _knapsack()
    sol = HighsBackend().solve(program, SolveOptions(seed=4))
    assert sol.status == SolverStatus.OPTIMAL and sol.objective == pytest.approx(-7.0)
    assert "with random_seed 5" in sol.message and sol.info["highs_crashes"] == 1


def test_two_crashes_are_no_solution_not_the_end_of_pal_opt(crashing) -> None:
    crashing(2)
    program, start = _knapsack()
    sol = HighsBackend().solve(program, SolveOptions(time_limit=30.0), start=start)
    assert sol.status == SolverStatus.NO_SOLUTION and sol.values is None
    assert sol.info["highs_crashes"] == 2 and "crashed twice" in sol.message


def test_a_crash_with_no_time_left_is_not_solved_again(crashing) -> None:
    crashing(1)
    program, start = _knapsack()
    sol = HighsBackend().solve(program, SolveOptions(time_limit=0.01), start=start)
    assert sol.status == SolverStatus.NO_SOLUTION and sol.info["highs_crashes"] == 1
    assert "no time is left" in sol.message


def test_in_process_on_request(crashing, monkeypatch: pytest.MonkeyPatch) -> None:
    crashing(2)  # a child would crash; in-process there is no child
    monkeypatch.setenv("PAL_OPT_HIGHS_IN_PROCESS", "1")
    program, start = _knapsack()
    sol = HighsBackend().solve(program, SolveOptions(), start=start)
    assert sol.status == SolverStatus.OPTIMAL and "highs_crashes" not in sol.info


def test_solve_ilp_falls_back_to_the_greedy_start_when_highs_keeps_crashing(crashing) -> None:
    from pal_opt.ilp import solve_ilp
    from pal_opt.io import load_instance
    from pal_opt.result import Status

    crashing(2)
    instance = load_instance(REPO / "instances" / "paper-16x4.json")
    res = solve_ilp(instance, backend="highs", time_limit=30.0)
    assert res.info.get("highs_crashes") == 2
    assert res.status == Status.FALLBACK and "crashed twice" in res.message
    assert res.placements  # the greedy start placement, priced


def test_the_round_that_crashed_highspy_is_solved(tmp_path: Path) -> None:
    """In a separate process: were HiGHS run in-process, its crash would end the test session."""
    script = tmp_path / "solve_crash_round.py"
    script.write_text(textwrap.dedent(f"""
        import json, numpy as np, scipy.sparse as sp
        from pal_opt.ilp.program import Program
        from pal_opt.ilp.backends.highs import HighsBackend
        from pal_opt.ilp.backends.base import SolveOptions
        d = np.load({str(CRASH_ROUND)!r})
        A = sp.csc_matrix((d["data"], d["indices"], d["indptr"]), shape=(int(d["m"]), int(d["n"])))
        p = Program.from_arrays(c=d["c"], A=A, row_lo=d["rlo"], row_hi=d["rhi"], col_lo=d["lo"], col_hi=d["hi"],
                                integrality=d["integ"], obj_offset=float(d["off"]))
        sol = HighsBackend().solve(p, SolveOptions(time_limit=100.0), start=d["start"])
        print(json.dumps({{"status": str(sol.status), "objective": sol.objective,
                          "start": p.objective(d["start"]), "crashes": sol.info.get("highs_crashes", 0)}}))
    """))
    env = {k: v for k, v in os.environ.items() if k != "PAL_OPT_HIGHS_IN_PROCESS"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["status"] in {"optimal", "feasible"}
    assert got["objective"] <= got["start"] + 1e-9
    assert got["crashes"] in {0, 1}  # 1 where this HiGHS crashes on it (highspy 1.13.1, 1.14.0)


def test_a_script_without_a_main_guard_is_not_run_again(tmp_path: Path) -> None:
    """multiprocessing's forkserver and spawn import the caller's ``__main__`` in each child;
    pal-opt's own fork server does not."""
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        from pal_opt.ilp.program import Program
        from pal_opt.ilp.backends.highs import HighsBackend
        from pal_opt.ilp.backends.base import SolveOptions
        print("script body ran", flush=True)
        p = Program.from_arrays(c=[-1.0, -2.0], A=np.ones((1, 2)), row_lo=[-np.inf], row_hi=[1.0],
                                col_lo=[0, 0], col_hi=[1, 1], integrality=[True, True])
        print(HighsBackend().solve(p, SolveOptions()).objective, flush=True)
    """))
    env = {k: v for k, v in os.environ.items() if k != "PAL_OPT_HIGHS_IN_PROCESS"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("script body ran") == 1
    assert out.stdout.strip().splitlines()[-1] == "-2.0"


def test_the_crash_round_fixture_is_what_the_docs_describe() -> None:
    program, d = _crash_round()
    assert (int(d["n"]), int(d["m"])) == (8712, 3488)
    activity = program.A @ d["start"]
    assert np.all(activity >= d["rlo"] - 1e-9) and np.all(activity <= d["rhi"] + 1e-9)
    assert np.all(d["start"] >= d["lo"]) and np.all(d["start"] <= d["hi"])
    assert np.allclose(d["start"][d["integ"]], np.round(d["start"][d["integ"]]))


def test_a_simulation_counts_the_crashes_it_survived(crashing) -> None:
    from pal_opt.io.traces import TraceJob
    from pal_opt.model import Cluster
    from pal_opt.simulate import SimConfig, simulate

    crashing(2)  # every MIP: two crashes, then the round falls back to its greedy start
    rng = np.random.default_rng(0)
    cluster = Cluster.uniform(4, 4, {"classA": rng.uniform(0.9, 1.5, 16).round(3).tolist()})
    trace = [TraceJob(id=j, demand=d, submit_time=0.0, iterations=2000, model="m", perfclass="classA", iter_time=1.0)
             for j, d in enumerate([3, 2, 5, 1, 2, 3])]
    res = simulate(trace, cluster, SimConfig(policy="ilp", backend="highs", time_limit=10.0), validate=True)
    s = res.summary
    assert s["n_completed"] == 6 and s["fallbacks"] > 0
    assert s["solver_crashes"] == 2 * s["fallbacks"]


@pytest.fixture
def fresh_fallback(monkeypatch: pytest.MonkeyPatch):
    """Undo the process-wide switch to in-process solves that a failed server start makes."""
    from pal_opt.ilp.backends import highs_child

    monkeypatch.setattr(highs_child, "_in_process_only", False)
    return highs_child


def test_a_server_that_cannot_start_means_in_process_solves(crashing, fresh_fallback, monkeypatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    from pal_opt.ilp.backends import highs_server

    crashing(2)  # a child would crash: an optimal answer proves the solve ran in-process
    highs_server._SERVER.stop()

    def cannot(self) -> None:  # type: ignore[no-untyped-def]
        raise OSError("no server here")

    monkeypatch.setattr(highs_server._Server, "start", cannot)
    program, start = _knapsack()
    with caplog.at_level(logging.WARNING, logger="pal_opt.ilp.backends.highs_child"):
        first = HighsBackend().solve(program, SolveOptions(), start=start)
        second = HighsBackend().solve(program, SolveOptions(), start=start)
    assert first.status == second.status == SolverStatus.OPTIMAL and "highs_crashes" not in first.info
    assert not fresh_fallback.isolation_enabled()
    assert sum("cannot start a process for HiGHS" in r.getMessage() for r in caplog.records) == 1


def test_no_process_for_the_second_try_means_in_process_without_the_start(crashing, fresh_fallback,
                                                                          monkeypatch) -> None:
    from pal_opt.ilp.backends import highs_server

    crashing(1)
    real = highs_server.new_child
    calls: list[int] = []

    def once():  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) > 1:
            raise OSError("no more processes")
        return real()

    monkeypatch.setattr(highs_server, "new_child", once)
    seen: list[object] = []
    monkeypatch.setattr("pal_opt.ilp.backends.highs.load_model",
                        lambda h, arrays, start, integer: (seen.append(start), real_load(h, arrays, start, integer)))
    program, start = _knapsack()
    sol = HighsBackend().solve(program, SolveOptions(), start=start)
    assert sol.status == SolverStatus.OPTIMAL and sol.info["highs_crashes"] == 1
    assert seen == [None]  # the start that crashed HiGHS is not handed to it in pal-opt's process
    assert "in pal-opt's process" in sol.message


def test_a_child_that_does_not_read_cannot_hold_up_the_deadline() -> None:
    """A child stopped with SIGSTOP neither reads nor answers: the stop request is sent once (not
    a socket-filling stream of them), the solve is given up at its deadline, the child killed."""
    import threading
    import time

    from procs import children, own_children

    from pal_opt.ilp.backends import highs_server

    program = _crash_round()[0]
    highs_server.ensure_started()
    server = highs_server._SERVER.proc
    assert server is not None
    stopped: list[int] = []

    def stop_the_child() -> None:
        for _ in range(100):
            kids = children(server.pid)
            if kids:
                for pid in kids:
                    os.kill(pid, 19)  # SIGSTOP
                stopped.extend(kids)
                return
            time.sleep(0.02)

    timer = threading.Timer(0.3, stop_the_child)
    timer.start()
    t0 = time.monotonic()
    sol = HighsBackend().solve(program, SolveOptions(time_limit=1.0, deadline=time.monotonic() + 3.0))
    took = time.monotonic() - t0
    timer.join()
    assert stopped, "the child was not seen"
    assert sol.status == SolverStatus.NO_SOLUTION and took < 6.0
    assert own_children() == []


def test_a_server_whose_pal_opt_has_gone_ends_quietly() -> None:
    """A pal-opt killed (SIGTERM) while its server imported HiGHS: the server's "ready" met a
    closed socket and printed a ``BrokenPipeError`` traceback on the terminal
    (``tests/test_faults.py::test_sigterm_leaves_the_old_output_intact`` caught it once in
    2026-11-28's run).  Now it ends quietly, with status 0."""
    import socket

    ours, theirs = socket.socketpair()
    ours.close()  # pal-opt is gone before the server says ready
    code = f"from pal_opt.ilp.backends.highs_server import serve; serve({theirs.fileno()})"
    done = subprocess.run([sys.executable, "-c", code], pass_fds=[theirs.fileno()], capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).resolve().parents[1], check=False)
    theirs.close()
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_stopping_the_server_ends_its_children_first() -> None:
    """:func:`highs_server.stop_server` (at exit, and before the CLI's ``os._exit``) returns only
    when the server and every child of it have ended.  The server used to end at once and leave
    its children to notice end-of-file on their own sockets: a child that was solving outlived
    pal-opt for a moment, and ``tests/test_faults.py::test_sigint_inside_the_solver[highs]``
    caught one on a loaded machine (1 run in 10 with two busy loops beside it)."""
    from pathlib import Path as _Path

    from pal_opt.ilp.backends import highs_server

    def alive(pid: int) -> bool:
        try:
            return _Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    conn = highs_server.new_child()  # a child waiting for its solve: it holds our socket open
    try:
        kind, pid = conn.recv()
        assert kind == "pid" and alive(pid)
        server = highs_server._SERVER.proc
        assert server is not None
        highs_server.stop_server()
        assert server.poll() is not None, "the server outlived stop_server"
        assert not alive(pid), "the child outlived stop_server"
    finally:
        conn.close()


def test_a_solve_in_a_thread_when_pal_opt_ends_is_stopped_not_a_crash(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler's daemon thread still solving when its process ends: the stop at exit kills
    the child, and the solve ends with no solution, saying so, instead of warning of a HiGHS
    crash and solving again in a new process (a second server, started while Python shuts down)."""
    import threading
    import time

    from procs import children

    from pal_opt.ilp.backends import highs_server

    monkeypatch.setattr(highs_server._SERVER, "ending", False)  # put back for the tests after this one
    program = _crash_round()[0]
    highs_server.ensure_started()
    server = highs_server._SERVER.proc
    assert server is not None
    result: list = []
    thread = threading.Thread(target=lambda: result.append(HighsBackend().solve(program, SolveOptions(time_limit=60))))
    thread.start()
    give_up = time.monotonic() + 30
    while not children(server.pid) and time.monotonic() < give_up:
        time.sleep(0.02)
    assert children(server.pid), "the child was not seen"
    with caplog.at_level(logging.WARNING):
        highs_server.stop_server(ending=True)
        thread.join(60)
    assert not thread.is_alive()
    (sol,) = result
    assert sol.status == SolverStatus.NO_SOLUTION and "pal-opt is ending" in sol.message, sol.message
    assert "crashed" not in caplog.text
    assert highs_server._SERVER.proc is None  # no second server


def _solve_in_a_thread(program: Program) -> tuple[Any, list]:
    import threading

    result: list = []
    thread = threading.Thread(target=lambda: result.append(HighsBackend().solve(program, SolveOptions(time_limit=60))))
    thread.start()
    return thread, result


def _wait_for_a_child(server_pid: int) -> int:
    import time

    from procs import children

    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        kids = children(server_pid)
        if kids:
            return kids[0]
        time.sleep(0.02)
    raise AssertionError("no child of the HiGHS server was seen")


def test_a_second_try_stopped_when_pal_opt_ends_is_not_a_second_crash(
        crashing, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first child crashes (on purpose), the second is solving when the process ends: the
    answer says so, with one crash counted, not "HiGHS crashed twice" (found by review)."""
    from pal_opt.ilp.backends import highs_server

    monkeypatch.setattr(highs_server._SERVER, "ending", False)
    crashing(1)
    highs_server.ensure_started()
    server = highs_server._SERVER.proc
    assert server is not None
    import time

    with caplog.at_level(logging.WARNING):
        thread, result = _solve_in_a_thread(_crash_round()[0])
        give_up = time.monotonic() + 30
        while "solving the program again" not in caplog.text and time.monotonic() < give_up:
            time.sleep(0.02)
        assert "solving the program again" in caplog.text
        _wait_for_a_child(server.pid)  # the second try's
        highs_server.stop_server(ending=True)
        thread.join(60)
    (sol,) = result
    assert sol.status == SolverStatus.NO_SOLUTION and "pal-opt is ending" in sol.message, sol.message
    assert sol.info["highs_crashes"] == 1 and "crashed twice" not in caplog.text


def test_no_new_server_once_pal_opt_is_ending(monkeypatch: pytest.MonkeyPatch) -> None:
    """A solve begun after the stop at exit (a scheduler's daemon thread starting its next round)
    does not start a server that would outlive the process: no solution, saying why."""
    from pal_opt.ilp.backends import highs_server

    monkeypatch.setattr(highs_server._SERVER, "ending", False)
    highs_server.stop_server(ending=True)
    sol = HighsBackend().solve(_crash_round()[0], SolveOptions(time_limit=10))
    assert sol.status == SolverStatus.NO_SOLUTION and "pal-opt is ending" in sol.message, sol.message
    assert highs_server._SERVER.proc is None
