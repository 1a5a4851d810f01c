"""Executors (pal_opt.parallel): serial, local process pool and Dask give identical results."""

from __future__ import annotations

import sys

import pytest

from pal_opt.check import check
from pal_opt.errors import BackendUnavailableError, OptionError
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
