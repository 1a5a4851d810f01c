"""Executors (pal_opt.parallel): serial, local process pool and Dask give identical results."""

from __future__ import annotations

import sys

import pytest

from pal_opt.check import check
from pal_opt.errors import BackendUnavailableError, InputTypeError, OptionError
from pal_opt.generate import generate_instance
from pal_opt.ilp.partition import solve_partitioned
from pal_opt.parallel import SerialExecutor, as_completed_indexed, make_executor, measure_peak


def _key(res):
    return (res.placements, round(res.objective, 12), round(res.bound, 9), res.status, res.info["partition"]["k"])


@pytest.fixture(scope="module")
def round_():
    return generate_instance(24, 4, 60, racks=3, seed=11)


@pytest.fixture(scope="module")
def serial_result(round_):
    return solve_partitioned(round_, 3, executor="serial")


def test_serial_executor_and_errors():
    with make_executor("serial") as ex:
        assert ex.kind == "serial"
        fut = ex.submit(divmod, 7, 2)
        assert fut.result() == (3, 1)
        bad = ex.submit(divmod, 1, 0)
        with pytest.raises(ZeroDivisionError):
            bad.result()
    assert list(as_completed_indexed([SerialExecutor().submit(abs, -3)])) == [(0, 3)]
    with pytest.raises(OptionError):
        make_executor(42)
    with pytest.raises(OptionError):
        make_executor(None, workers=0)


def test_a_task_error_through_results_is_the_task_error_in_a_fresh_process():
    """``ExecutorHandle.results`` re-raises a serial task's own error.  Its ``except`` clause named
    ``cf.process.BrokenProcessPool``, a submodule that exists only once something imported it: in
    a process that had started no pool, every task error became ``AttributeError: module
    'concurrent.futures' has no attribute 'process'`` (``solve_partitioned(executor="serial")``
    given a bad gap said only that).  A fresh interpreter, so that no earlier test imported it."""
    import subprocess

    code = ("from pal_opt.parallel import make_executor\n"
            "with make_executor('serial') as h:\n"
            "    try:\n"
            "        h.results([h.submit(divmod, 1, 0)])\n"
            "    except ZeroDivisionError:\n"
            "        print('task error')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout == "task error\n", out.stderr


def test_measure_peak_sees_an_allocation():
    import mmap

    def grow():
        # 40 MiB of fresh anonymous pages, each touched: new resident memory whatever the process
        # freed before (a numpy array can reuse a heap that earlier tests left resident)
        m = mmap.mmap(-1, 40 * 2**20)
        for off in range(0, len(m), mmap.PAGESIZE):
            m[off] = 1
        touched = sum(m[off] for off in range(0, len(m), mmap.PAGESIZE))
        m.close()
        return touched

    out, mem = measure_peak(grow)
    assert out == 40 * 2**20 // mmap.PAGESIZE
    assert mem.peak_rss > 0 and mem.seconds >= 0
    if mem.method == "vmhwm-reset":
        assert mem.delta is not None and mem.delta >= 30 * 2**20


def test_process_pool_matches_serial(round_, serial_result):
    assert check(round_, serial_result) == []
    with make_executor(None, workers=2) as ex:
        assert ex.kind == "process"
        pooled = solve_partitioned(round_, 3, executor=ex)
    assert _key(pooled) == _key(serial_result)
    assert pooled.info["partition"]["executor"] == "process"
    # worker tasks report their own peak memory
    assert all(p["peak_rss"] > 0 for p in pooled.info["partition"]["parts"])


def test_default_executor_is_a_process_pool(round_, serial_result):
    res = solve_partitioned(round_, 3)
    assert res.info["partition"]["executor"] == "process"
    assert _key(res) == _key(serial_result)


def test_dask_local_cluster_matches_serial(round_, serial_result):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        res = solve_partitioned(round_, 3, executor=cluster)  # a cluster object
        assert res.info["partition"]["executor"] == "dask"
        with distributed.Client(cluster) as client:
            res2 = solve_partitioned(round_, 3, executor=client)  # a client, left open
            assert client.status == "running"
        res3 = solve_partitioned(round_, 3, executor=cluster.scheduler_address)  # an address
    assert _key(res) == _key(serial_result) == _key(res2) == _key(res3)


def test_missing_dask_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # makes `import distributed` fail
    with pytest.raises(BackendUnavailableError, match=r"pal-opt\[dask\]"):
        make_executor("tcp://127.0.0.1:1")


def test_solve_and_the_cli_send_partitioned_parts_to_a_dask_scheduler(round_, serial_result, tmp_path):
    """``solve(..., "ilp-partitioned", executor=ADDRESS)`` and ``pal-opt solve --scheduler ADDRESS``
    run the parts on that Dask scheduler, with the serial answer."""
    import json
    import subprocess

    from pal_opt import solve
    from pal_opt.io import save_instance

    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        res = solve(round_, "ilp-partitioned", parts=3, executor=address)
        assert res.info["partition"]["executor"] == "dask"
        path, out = tmp_path / "round.json", tmp_path / "out.json"
        save_instance(round_, path)
        proc = subprocess.run([sys.executable, "-m", "pal_opt.cli", "solve", str(path), "--method", "ilp-partitioned",
                               "--parts", "3", "--scheduler", address, "-o", str(out)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["info"]["partition"]["executor"] == "dask"
    assert check(round_, doc) == []
    assert res.placements == serial_result.placements
    assert {k: tuple(v) for k, v in doc["placements"].items()} == {str(k): v for k, v in serial_result.placements.items()}


def test_an_unreachable_scheduler_is_one_clear_error(monkeypatch, round_):
    pytest.importorskip("distributed")
    import pal_opt.parallel as parallel
    from pal_opt import solve

    monkeypatch.setattr(parallel, "CONNECT_SECONDS", 0.5)
    with pytest.raises(OptionError, match=r"cannot reach the Dask scheduler at 'tcp://127.0.0.1:1' within 0.5 s"):
        solve(round_, "ilp-partitioned", parts=3, executor="tcp://127.0.0.1:1")
    monkeypatch.setattr(parallel, "CONNECT_SECONDS", 10.0)  # a time limit bounds the wait for the scheduler too
    with pytest.raises(OptionError, match=r"at 'tcp://127.0.0.1:1' within 0\.[0-9]+ s") as err:
        solve(round_, "ilp-partitioned", parts=3, executor="tcp://127.0.0.1:1", time_limit=0.6)
    assert float(err.value.args[0].split(" within ")[1].split(" s")[0]) <= 0.6
    with pytest.raises(OptionError, match="executor must be"):
        solve(round_, "ilp-partitioned", executor=3)
    with pytest.raises(OptionError, match="do not apply|does not apply|not an option"):
        solve(round_, "ilp", executor="serial")


def _hold_a_cbc_directory(seconds: float) -> tuple[int, str]:
    """In a pool worker: a CBC solve directory made (as while writing the model), then a wait."""
    import os
    import time

    from pal_opt.ilp.backends.cbc import _workdir

    path = _workdir("mip")
    with open(os.path.join(path, "round.mps"), "w") as fh:
        fh.write("NAME half-written\n")
    time.sleep(seconds)
    return os.getpid(), path


def _worker_pid_and_dir(tmp: str) -> tuple[int, str]:
    import os
    import tempfile

    tempfile.tempdir = tmp
    return os.getpid(), tmp


def test_a_pool_worker_removes_its_cbc_files_when_terminated(private_tmpdir):
    """A worker's SIGTERM outside CBC's run (writing the model, reading the solution) ended it at
    once and left its solve directory behind: now its clean-up removes it, then it dies."""
    import os
    import signal
    import time

    with make_executor(workers=1) as ex:
        pid, _ = ex.submit(_worker_pid_and_dir, str(private_tmpdir)).result()
        ex.submit(_hold_a_cbc_directory, 60.0)
        end = time.monotonic() + 30
        while not any(p.name.startswith("pal_opt_cbc_") for p in private_tmpdir.iterdir()):
            assert time.monotonic() < end
            time.sleep(0.05)
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 10
        while any(private_tmpdir.iterdir()) and time.monotonic() < end:
            time.sleep(0.05)
        assert list(private_tmpdir.iterdir()) == []
        ex.executor.shutdown(wait=True, cancel_futures=True)


def _sigterm_inside(what: str, tmp: str) -> None:
    """In a pool worker: a SIGTERM that lands inside ``tempfile.mkdtemp`` (the directory made,
    not yet recorded) or inside ``Popen`` (the child forked, not yet recorded)."""
    import os
    import signal
    import subprocess
    import tempfile
    import time

    from pal_opt.ilp.backends import cbc

    tempfile.tempdir = tmp
    if what == "mkdtemp":
        real_mkdtemp = tempfile.mkdtemp

        def mkdtemp(*args, **kwargs):  # type: ignore[no-untyped-def]
            path = real_mkdtemp(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before this returns
            return path

        tempfile.mkdtemp = mkdtemp  # type: ignore[assignment]
        cbc._workdir("mip")
    else:
        real_popen = subprocess.Popen

        def popen(*args, **kwargs):  # type: ignore[no-untyped-def]
            proc = real_popen(*args, **kwargs)
            with open(os.path.join(tmp, "child.pid"), "w") as fh:
                fh.write(str(proc.pid))
            os.kill(os.getpid(), signal.SIGTERM)
            return proc

        subprocess.Popen = popen  # type: ignore[misc]
        with open(os.devnull, "w") as log:
            cbc._start_cbc(["sleep", "30"], log)
    time.sleep(30)


@pytest.mark.parametrize("what", ["mkdtemp", "popen"])
def test_a_sigterm_between_making_and_recording_waits_for_the_record(what, tmp_path):
    """Found by review: a worker's SIGTERM inside ``mkdtemp`` left the new CBC directory behind
    (1 try in 10 of a stress loop); one inside ``Popen`` would have left CBC running."""
    import concurrent.futures as cf
    import os
    import time

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with make_executor(workers=1) as ex:
        fut = ex.submit(_sigterm_inside, what, str(tmp))
        with pytest.raises(cf.process.BrokenProcessPool):
            fut.result(timeout=60)
    if what == "popen":
        pid = int((tmp / "child.pid").read_text())
        end = time.monotonic() + 5
        while os.path.exists(f"/proc/{pid}") and "Z" not in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1][:3]:
            assert time.monotonic() < end, "the child outlived the worker"
            time.sleep(0.05)
        (tmp / "child.pid").unlink()
    assert list(tmp.iterdir()) == []


_ERROR_WHILE_ANOTHER_RUNS = """
import sys, time
from pal_opt.parallel import make_executor

def slow(path):
    import os
    open(path, "w").write(str(os.getpid()))
    time.sleep(60)

def fail():
    time.sleep(0.5)
    raise ValueError("part failed")

if __name__ == "__main__":
    with make_executor(workers=2) as ex:
        futs = [ex.submit(slow, sys.argv[1]), ex.submit(fail)]
        ex.results(futs)
"""


def test_sigterm_after_one_task_failed_still_stops_the_others(tmp_path):
    """Found by review: once a task had failed, the wait for the earlier ones went on outside the
    SIGTERM guard, so a SIGTERM then left the other workers running."""
    import os
    import signal
    import subprocess
    import time

    pid_file = tmp_path / "slow.pid"
    script = tmp_path / "owner.py"
    script.write_text(_ERROR_WHILE_ANOTHER_RUNS)
    p = subprocess.Popen([sys.executable, str(script), str(pid_file)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < end and p.poll() is None
            time.sleep(0.05)
        time.sleep(1.5)  # the other task has failed by now
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == -signal.SIGTERM
        worker = int(pid_file.read_text())
        end = time.monotonic() + 10
        while os.path.exists(f"/proc/{worker}") and "Z" not in open(f"/proc/{worker}/stat").read().rsplit(")", 1)[1][:3]:
            assert time.monotonic() < end, "the other task's worker outlived the pool's owner"
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            p.kill()
        if pid_file.exists() and pid_file.read_text():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


_CTRL_C_WHILE_QUEUED = """
import sys, time
from pal_opt.parallel import as_completed_indexed, make_executor

def slow(directory, i):
    open(f"{directory}/{i}", "w").close()
    time.sleep(3)
    return i

if __name__ == "__main__":
    with make_executor(workers=1) as ex:
        futs = [ex.submit(slow, sys.argv[1], i) for i in range(8)]
        for _ in as_completed_indexed(futs):
            pass
"""


def test_ctrl_c_does_not_run_the_queued_tasks(tmp_path):
    """Found by review: leaving ``make_executor``'s block on a Ctrl-C shut the pool down with
    ``wait=True`` and no cancel, so every queued task ran first (``benchmarks/suite.py`` went on
    with its whole sweep after a Ctrl-C, and hung on a second one).  Now the queued tasks are
    cancelled and the running one's worker stopped."""
    import signal
    import subprocess
    import time

    done = tmp_path / "started"
    done.mkdir()
    script = tmp_path / "owner.py"
    script.write_text(_CTRL_C_WHILE_QUEUED)
    p = subprocess.Popen([sys.executable, str(script), str(done)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while not any(done.iterdir()):
            assert time.monotonic() < end and p.poll() is None
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = p.communicate(timeout=20)  # all 8 tasks, one at a time: 24 s
        assert time.monotonic() - t0 < 10
        assert p.returncode != 0 and "KeyboardInterrupt" in err
        assert len(list(done.iterdir())) < 8
    finally:
        if p.poll() is None:
            p.kill()


_NO_MAIN_GUARD = """
import pal_opt
from pal_opt.generate import generate_instance

try:
    pal_opt.solve(generate_instance(8, 4, 16, seed=1), "ilp-partitioned", parts=2, backend="highs")
except pal_opt.PalOptError as exc:
    print("PalOptError:", type(exc).__name__, exc)
"""


def test_a_script_without_the_main_guard_gets_a_pal_opt_error_naming_the_guard(tmp_path):
    """Found by a scheduler author's review: a loop written at module level (no
    ``if __name__ == "__main__":``) that used ``ilp-partitioned`` got a raw
    ``concurrent.futures.process.BrokenProcessPool`` from inside pal-opt, which did not say why
    (each forkserver worker imports the main module, which starts a pool in turn)."""
    import subprocess

    script = tmp_path / "loop.py"
    script.write_text(_NO_MAIN_GUARD)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("PalOptError:"))
    assert line.startswith("PalOptError: BackendError a worker process of the local pool died")
    assert 'if __name__ == "__main__":' in line and "executor='serial'" in line


def test_results_tells_the_tasks_done_as_they_end():
    """``ExecutorHandle.results(on_done=...)``: whether each task is done, from the start of the
    wait to every one done, never going back (a pool's tasks end at different times)."""
    import time

    seen: list[list[bool]] = []
    with make_executor(None, workers=2) as ex:
        futs = [ex.submit(time.sleep, s) for s in (0.0, 0.3, 0.6)]
        assert ex.results(futs, on_done=seen.append) == [None, None, None]
    assert seen[-1] == [True, True, True]
    assert all(len(d) == 3 for d in seen)
    assert all(a != b for a, b in zip(seen, seen[1:], strict=False))  # told of changes only
    assert all(not (x and not y) for a, b in zip(seen, seen[1:], strict=False) for x, y in zip(a, b, strict=True))
    serial: list[list[bool]] = []
    with make_executor("serial") as ex:
        assert ex.results([ex.submit(abs, -1), ex.submit(abs, -2)], on_done=serial.append) == [1, 2]
    assert serial == [[True, True]]  # a serial task is done when submitted
    with make_executor("serial") as ex, pytest.raises(InputTypeError, match="on_done: must be a function or None"):
        ex.results([ex.submit(abs, -1)], on_done=5)


@pytest.mark.parametrize("executor", ["serial", "pool"])
def test_a_partitioned_solve_reports_the_parts_solved(round_, serial_result, executor):
    """The parts solved go to :mod:`pal_opt.progress` as they end, counted in parts, up to all of
    them; with ``executor="serial"`` a part's own reports are named after it and carry none of its
    solver's values (that part's incumbent is no incumbent of the round)."""
    from pal_opt import progress

    seen: list[dict] = []
    with progress.reporting(seen.append):
        res = solve_partitioned(round_, 3, executor="serial" if executor == "serial" else None)
    assert _key(res) == _key(serial_result)
    counts = [f for f in seen if "parts_done" in f]
    assert counts and all(f["parts"] == 3 for f in counts)
    done = [f["parts_done"] for f in counts]
    assert done == sorted(done) and done[-1] == 3
    assert counts[-1]["stage"] == "3 of 3 parts solved, whole-round bound computed"
    assert not any(key in f for f in seen for key in ("incumbent", "bound", "gap"))
    if executor == "serial":
        stages = [f["stage"] for f in seen if "stage" in f and "parts_done" not in f]
        names = {s.split(":")[0] for s in stages}  # the bound's LP may report nothing (an earlier one kept)
        assert names - {"whole-round bound"} == {"part 1 of 3", "part 2 of 3", "part 3 of 3"}
