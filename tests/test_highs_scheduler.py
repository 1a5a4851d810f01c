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

    def __init__(self, release: threading.Event, started: threading.Event, threads: int = 0) -> None:
        self.release, self.started, self.threads = release, started, threads

    def getOptionValue(self, name: str) -> tuple[int, int]:  # noqa: N802 - highspy's name
        assert name == "threads"
        return 0, self.threads

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
        def getOptionValue(self, name: str) -> tuple[int, int]:  # noqa: N802 - highspy's name
            return 0, 0

        def run(self) -> None:
            raise RuntimeError("solver failed")

    with pytest.raises(RuntimeError, match="solver failed"):
        highs_backend._run_counted(_Failing())
    assert resets == [1] and highs_backend._RUNS.active == 0


def test_a_run_with_another_thread_count_waits_for_the_runs_under_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler has one thread count: HiGHS refuses a run whose ``threads`` differs from the
    running one's (in a review, 4 of 12 overlapping in-process solves with ``threads=2`` came
    back "Not Set", and pal-opt answered with the start).  Such a run now starts once the others
    have ended and the scheduler is reset; a run with the same count overlaps as before."""
    resets: list[int] = []
    monkeypatch.setattr(highspy.Highs, "resetGlobalScheduler",
                        staticmethod(lambda blocking: resets.append(highs_backend._RUNS.active)))
    first_release, first_started = threading.Event(), threading.Event()
    same_release, same_started = threading.Event(), threading.Event()
    other_release, other_started = threading.Event(), threading.Event()
    first = _BlockingHighs(first_release, first_started, threads=1)
    same = _BlockingHighs(same_release, same_started, threads=1)
    other = _BlockingHighs(other_release, other_started, threads=2)
    runs = [threading.Thread(target=highs_backend._run_counted, args=(s,)) for s in (first, same, other)]
    runs[0].start()
    assert first_started.wait(30)
    runs[1].start()
    assert same_started.wait(30)  # the same thread count: it overlaps
    runs[2].start()
    assert not other_started.wait(0.3)  # another count: it waits
    same_release.set()
    runs[1].join(30)
    assert not other_started.wait(0.3) and resets == []  # one run of 1 thread is still under way
    first_release.set()
    runs[0].join(30)
    assert other_started.wait(30) and resets == [0]  # reset first, then it ran
    other_release.set()
    runs[2].join(30)
    assert resets == [0, 0] and highs_backend._RUNS.active == 0 and highs_backend._RUNS.threads is None


def test_a_forked_child_starts_with_no_run_under_way() -> None:
    """A child forked while another thread ran HiGHS inherited the count (never reset in the
    child), or a held lock; it starts afresh."""
    import os

    highs_backend._RUNS.active = 1
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0 if highs_backend._RUNS.active == 0 and highs_backend._RUNS.threads is None else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        highs_backend._RUNS.active = 0
