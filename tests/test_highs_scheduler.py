"""HiGHS's task scheduler is one static object per process: it is reset only when no other
``Highs.run()`` is under way (:class:`pal_opt.ilp.backends.highs._Runs`).  MIPs run in a child process
(:mod:`pal_opt.ilp.backends.highs_child`), LP relaxations and ``PAL_OPT_HIGHS_IN_PROCESS=1`` runs here.

Resetting it under a running solve frees what that solve uses (a segmentation fault in the other
thread).  Two runs overlap when a scheduler solves rounds in worker threads, or when a solver that
overran its deadline was abandoned and still runs while the next round is solved.  Here the
solver's ``run()`` is a stand-in that blocks on an event, and the reset is recorded: whether a
real HiGHS would crash is a matter of timing, which no test can hold.
"""

from __future__ import annotations

import threading

import pytest

highspy = pytest.importorskip("highspy")

from pal_opt.ilp.backends import highs as highs_backend  # noqa: E402


class _BlockingHighs:
    """A ``Highs`` whose ``run()`` returns once ``release`` is set, recording who was running."""

    def __init__(self, release: threading.Event, started: threading.Event) -> None:
        self.release, self.started = release, started

    def run(self) -> str:
        self.started.set()
        assert self.release.wait(30)
        return "ok"


def test_the_scheduler_is_reset_only_by_the_last_run_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    resets: list[int] = []
    monkeypatch.setattr(highspy.Highs, "resetGlobalScheduler",
                        staticmethod(lambda blocking: resets.append(highs_backend._RUNS.active)))
    long_release, long_started = threading.Event(), threading.Event()
    short_release, short_started = threading.Event(), threading.Event()
    long_solver = _BlockingHighs(long_release, long_started)
    short_solver = _BlockingHighs(short_release, short_started)
    out: dict[str, str] = {}
    long_run = threading.Thread(target=lambda: out.setdefault("long", highs_backend._run_counted(long_solver)))
    long_run.start()
    assert long_started.wait(30)
    short_run = threading.Thread(target=lambda: out.setdefault("short", highs_backend._run_counted(short_solver)))
    short_run.start()
    assert short_started.wait(30)
    short_release.set()  # the short solve ends while the long one still runs: no reset under it
    short_run.join(30)
    assert out == {"short": "ok"} and resets == []
    long_release.set()  # the last run ends: now the scheduler is reset, with no run under way
    long_run.join(30)
    assert out == {"short": "ok", "long": "ok"} and resets == [0]
    assert highs_backend._RUNS.active == 0


def test_a_run_that_raises_still_counts_itself_out(monkeypatch: pytest.MonkeyPatch) -> None:
    resets: list[int] = []
    monkeypatch.setattr(highspy.Highs, "resetGlobalScheduler", staticmethod(lambda blocking: resets.append(1)))

    class _Failing:
        def run(self) -> None:
            raise RuntimeError("solver failed")

    with pytest.raises(RuntimeError, match="solver failed"):
        highs_backend._run_counted(_Failing())
    assert resets == [1] and highs_backend._RUNS.active == 0


def test_a_forked_child_starts_with_no_run_under_way() -> None:
    """A child forked while another thread ran HiGHS inherited the count (never reset in the
    child), or a held lock; it starts afresh."""
    import os

    highs_backend._RUNS.active = 1
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0 if highs_backend._RUNS.active == 0 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        highs_backend._RUNS.active = 0


def test_overlapping_in_process_runs_with_other_thread_counts_give_their_answers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """HiGHS refuses a run whose ``threads`` differs from the count its scheduler was started
    with in the same thread ("Not Set", and pal-opt answered with the start: a review's worker
    threads, which once ran HiGHS themselves, saw it).  Every run is now in a fresh helper thread,
    so solves in worker threads with 1, 2 and the default thread counts give their own answers."""
    from concurrent.futures import ThreadPoolExecutor

    import pal_opt

    monkeypatch.setenv("PAL_OPT_HIGHS_IN_PROCESS", "1")
    # rounds whose MIPs use HiGHS's task scheduler (smaller ones never met the refusal)
    rounds = [pal_opt.generate_instance(nodes=16, gpus_per_node=8, jobs=60, racks=4, seed=s, busy_fraction=0.2,
                                        running_fraction=0.2, restart_cost=30) for s in range(4)]

    def solve(k: int, threads: int | None) -> tuple[str, float]:
        res = pal_opt.solve(rounds[k], "ilp", backend="highs", threads=threads, time_limit=60)
        return res.status.value, round(res.objective, 6)

    alone = [solve(k, None) for k in range(4)]
    tasks = [(k, (1, 2, None)[(k + r) % 3]) for r in range(3) for k in range(4)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda t: solve(*t), tasks))
    assert got == [alone[k] for k, _ in tasks]  # (3 of 12 came back "Not Set" when workers ran HiGHS)
    assert highs_backend._RUNS.active == 0
