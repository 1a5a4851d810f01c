"""Shared fixtures.

``shared_dir``
    ``../shared`` beside the repository (real measurements, traces and reference rounds); tests
    that use it skip when it is absent.
``tiny_instance``
    A hand-built round: three servers of uneven sizes (4, 2 and 3 GPUs), GPU 2 busy and GPU 7
    failed, four jobs whose total demand (8) exceeds the 7 free GPUs.
``ctrl_c``
    Ctrl-C works in this process as in a fresh interactive ``python``, whatever ran before and
    however the test run was started (for the tests that interrupt themselves).
``session_tmpdir`` (used by every test)
    A directory of this test process's own as its temporary directory and its children's, for
    the whole session (pytest-xdist runs tests in several processes at once).
``private_tmpdir``
    A fresh directory as the temporary directory of this process and of its children, for tests
    that check that nothing was left behind there.

Every test has a time limit (pytest-timeout, ``timeout`` in ``pyproject.toml``); a test marked
``slow`` gets :data:`SLOW_TIMEOUT` seconds unless it sets its own ``@pytest.mark.timeout(...)``.

Hypothesis runs **derandomized** (profile ``pal-opt``): every run of the suite draws the same
examples, so that a run that passed passes again (CI included) and a failure reproduces.  To
explore new examples, run with ``HYPOTHESIS_PROFILE=explore`` (random examples each run).
"""

from __future__ import annotations

import gc
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams, pal_locality

if TYPE_CHECKING:
    from pal_opt.hetero.profiles import Application

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
#: Seconds a ``slow`` test without a ``timeout`` mark of its own may run.
SLOW_TIMEOUT = 3600

settings.register_profile("pal-opt", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "pal-opt"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give ``slow`` tests :data:`SLOW_TIMEOUT` unless they have a ``timeout`` mark."""
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared``; skips the test when it is absent."""
    if not SHARED.is_dir():
        pytest.skip(f"shared data not available at {SHARED}")
    return SHARED


def _tiny() -> RoundInstance:
    F, B, X = GpuState.FREE, GpuState.BUSY, GpuState.FAILED
    cluster = Cluster.from_arrays(
        gpu_ids=[0, 1, 2, 3, 4, 5, 6, 7, 8],
        server=[0, 0, 0, 0, 1, 1, 2, 2, 2],
        factors={
            "classA": [1.00, 1.12, 0.97, 1.05, 0.95, 1.30, 1.02, 1.00, 0.99],
            "classB": [1.01, 1.03, 1.00, 0.99, 1.00, 1.06, 1.02, 1.00, 0.98],
            "classD": [1.00, 1.00, 1.00, 1.001, 0.999, 1.00, 1.002, 1.00, 1.00],
        },
        state=[F, F, B, F, F, F, F, X, F],
    )
    lam = 1.7
    jobs = (
        Job(id=0, demand=2, perfclass="classA", position=0, locality=pal_locality(lam), model="resnet50"),
        Job(id=1, demand=3, perfclass="classB", position=1, locality=pal_locality(lam), model="BERT"),
        Job(id=2, demand=1, perfclass="classD", position=2, locality=pal_locality(lam), model="PointNet"),
        Job(id=3, demand=2, perfclass="classA", position=3, locality=pal_locality(lam), model="resnet50"),
    )
    return RoundInstance(cluster=cluster, jobs=jobs, params=RoundParams(locality_penalty=lam), name="tiny")


@pytest.fixture
def tiny_instance() -> RoundInstance:
    """Three uneven servers, one busy and one failed GPU, four jobs (see module docstring)."""
    return _tiny()


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """For the test's duration, a SIGINT (``os.kill``, ``_thread.interrupt_main``) in this process
    raises ``KeyboardInterrupt`` in the main thread, and nothing swallows it; both are restored.

    * SIGINT gets :func:`signal.default_int_handler`.  Python installs it only when SIGINT was not
      ignored at start; a run started with SIGINT ignored (``nohup``, ``trap '' INT``, a
      background job of a non-interactive shell, as CI may start it) keeps ``SIG_IGN``, where a
      SIGINT does nothing and ``_thread.interrupt_main()`` is a no-op.  (A handler, unlike
      ``SIG_IGN``, is reset to the default by ``exec``, so children started meanwhile get the
      default too; ``procs.popen`` sees to that for children on its own.)
    * The interpreter's ``gc.callbacks`` are emptied.  A ``KeyboardInterrupt`` raised while a gc
      callback runs is reported as "Exception ignored in ... gc_callback" and dropped by CPython;
      Hypothesis installs one for the rest of the session on its first test
      (``hypothesis.internal.conjecture.junkdrawer.gc_cumulative_time``), and it runs at every
      collection, so in a test run after any Hypothesis test a Ctrl-C landing while the main
      thread allocates (building a solver model) was lost.
    """
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        pytest.skip("signals can only be set up from the main thread")
    saved_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    saved_callbacks = list(gc.callbacks)
    gc.callbacks.clear()
    try:
        yield
    finally:
        gc.callbacks[:0] = [cb for cb in saved_callbacks if cb not in gc.callbacks]
        if saved_handler is not None:  # None: set outside Python, cannot be put back
            signal.signal(signal.SIGINT, saved_handler)


@pytest.fixture(scope="session", autouse=True)
def session_tmpdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory of this test process's own (under pytest's ``basetemp``, which pytest-xdist
    makes per worker, and which pytest cleans up as it does its other temporary directories) as
    its temporary directory (``tempfile.tempdir``) and its children's (``TMPDIR``) for the whole
    session.  Tests that check that a solve left nothing behind (CBC's ``pal_opt_cbc_*``
    directories) look in this process's temporary directory: another pytest-xdist worker, or
    another test run on the machine, would otherwise put its own solves' files there.

    multiprocessing's own directory is fixed first, in the system's temporary directory: the
    forkserver's Unix socket lives there, and a socket's path may not exceed 107 bytes (under
    ``basetemp`` it came within 20 of that, and a longer ``TMPDIR`` went over)."""
    import multiprocessing.util

    multiprocessing.util.get_temp_dir()  # removed by multiprocessing at exit
    path = tmp_path_factory.mktemp("tmp")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tempfile, "tempdir", str(path))
        mp.setenv("TMPDIR", str(path))
        yield path


@pytest.fixture
def private_tmpdir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty directory made this process's temporary directory (``tempfile.tempdir``)
    and its children's (``TMPDIR``) for the test's duration.

    Tests that check that a solve left no temporary file (CBC's ``pal_opt_cbc_*`` directories)
    look there rather than in the system's, which other test runs on the machine share: their
    directories come and go at any time.
    """
    path = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    monkeypatch.setenv("TMPDIR", str(path))
    return path


@pytest.fixture(scope="session")
def profiles(shared_dir: Path) -> Path:
    """The Sia artifact's profiles directory; skips the test when it is absent."""
    d = shared_dir / "data" / "sia-artifact" / "profiles"
    if not d.is_dir():
        pytest.skip(f"Sia artifact profiles not available at {d}")
    return d


@pytest.fixture(scope="session")
def cifar10(shared_dir: Path) -> Application:
    """The Sia artifact's cifar10 application (its profiles on the paper's three types)."""
    from pal_opt.hetero.profiles import load_applications

    return dict(load_applications(shared_dir / "data" / "sia-artifact" / "profiles", ["cifar10"]))["cifar10"]
