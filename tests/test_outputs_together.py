"""A command's outputs are written all or none (``pal_opt.io.atomic.atomic_write_files``).

``pal-opt simulate --out --jobs-csv --plot`` and ``pal-opt partition --out --plot`` render every
output to a temporary file first and rename them into place together, SIGINT held off during the
renames: a failure or a Ctrl-C before then leaves every earlier file as it was and no temporary
file behind; a Ctrl-C during the renames takes effect once they are all done.

The failures are made deterministic: a full disk is ``os.fsync`` raising ``ENOSPC`` for one
output's file (named through ``/proc/self/fd``, so that the test does not depend on how the
temporary files are named); the real SIGINTs are sent to a child ``pal-opt`` that has stopped,
waiting on its stdin, inside the write phase (rendering the figure) or between two renames.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from procs import popen

from pal_opt.cli import main
from pal_opt.io.atomic import atomic_write_files

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "data" / "trace.csv"
PROFILE = ROOT / "examples" / "data" / "tinynet_graph.txt"
SIMULATE = ["simulate", str(TRACE), "--cluster", "4x4", "--synthetic-variability", "1", "--max-hours", "0.5",
            "--quiet"]


def _contents(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (hidden ones too: a temporary file left behind shows)."""
    return {os.fspath(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _fail_fsync_of(monkeypatch: pytest.MonkeyPatch, stem: str) -> None:
    """``os.fsync`` raises ENOSPC (a full disk) for a file whose name starts with ``.STEM.``: the
    temporary file of output ``STEM.*`` (its name is ``.STEM.`` followed by a unique part)."""
    real = os.fsync

    def fsync(fd: Any) -> None:
        fd = fd if isinstance(fd, int) else fd.fileno()
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(f".{stem}."):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


# ----------------------------------------------------------------------------- the helper
def test_a_group_is_written_with_the_targets_permissions_and_nothing_left(tmp_path: Path) -> None:
    old = tmp_path / "a.json"
    old.write_text("old\n")
    old.chmod(0o640)
    seen: list[str] = []

    def draw(path: str) -> None:
        seen.append(path)
        Path(path).write_bytes(b"figure")

    atomic_write_files({old: b"new\n", tmp_path / "b.png": draw})
    assert _contents(tmp_path) == {"a.json": b"new\n", "b.png": b"figure"}
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    assert len(seen) == 1 and seen[0].endswith(".png") and Path(seen[0]).parent == tmp_path  # the target's format


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_failure_before_the_renames_changes_nothing(tmp_path: Path, error: BaseException) -> None:
    (tmp_path / "a.json").write_text("earlier\n")
    (tmp_path / "c.csv").write_text("earlier,run\n")
    before = _contents(tmp_path)

    def fail(path: str) -> None:
        Path(path).write_bytes(b"half a fig")
        raise error

    with pytest.raises(type(error)):
        atomic_write_files({tmp_path / "a.json": b"new\n", tmp_path / "b.png": fail, tmp_path / "c.csv": b"new\n"})
    assert _contents(tmp_path) == before


def test_a_failed_rename_puts_back_the_files_already_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rename refused after another succeeded (a sticky directory, another user's file): the
    first target gets its old content back, a target that did not exist is removed."""
    (tmp_path / "a.json").write_text("earlier\n")
    (tmp_path / "c.csv").write_text("earlier,run\n")
    before = _contents(tmp_path)
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if os.path.basename(dst) == "c.csv" and ".tmp" in os.path.basename(src):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(PermissionError, match="c.csv"):
        atomic_write_files({tmp_path / "a.json": b"new\n", tmp_path / "b.txt": b"new\n", tmp_path / "c.csv": b"new\n"})
    assert _contents(tmp_path) == before


def test_a_sigint_during_the_renames_is_raised_after_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          ctrl_c: None) -> None:
    (tmp_path / "b.csv").write_text("earlier\n")
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if os.path.basename(dst) == "a.json":
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, before the first rename
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_files({tmp_path / "a.json": b"new\n", tmp_path / "b.csv": b"new\n"})
    assert _contents(tmp_path) == {"a.json": b"new\n", "b.csv": b"new\n"}  # both replaced, then the interrupt


# ----------------------------------------------------------------------------- pal-opt simulate
def _earlier_run(tmp_path: Path) -> dict[str, bytes]:
    """The three outputs of an earlier run (stand-ins: any new output differs from them)."""
    pytest.importorskip("matplotlib")
    (tmp_path / "r.json").write_text('{"earlier": "run"}\n')
    (tmp_path / "j.csv").write_text("earlier,run\n")
    (tmp_path / "p.png").write_bytes(b"earlier run")
    return _contents(tmp_path)


def test_simulate_on_a_full_disk_leaves_the_earlier_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The figure, the last output, cannot be written: the result file and the table of the
    earlier run stay (they were replaced first, leaving a new result beside an old figure)."""
    before = _earlier_run(tmp_path)
    capsys.readouterr()
    _fail_fsync_of(monkeypatch, "p")
    assert main([*SIMULATE, "--policy", "pal", "--out", str(tmp_path / "r.json"),
                 "--jobs-csv", str(tmp_path / "j.csv"), "--plot", str(tmp_path / "p.png")]) == 2
    # the output that could not be written is named (it said only "No space left on device")
    assert capsys.readouterr().err == f"pal-opt: error: {tmp_path / 'p.png'}: cannot write: No space left on device\n"
    assert _contents(tmp_path) == before


def test_simulate_with_a_plot_directory_gone_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """An unwritable plot path found only when writing (its directory removed while the
    simulation ran): no output at all, the earlier result and table untouched."""
    before = _earlier_run(tmp_path)
    figures = tmp_path / "figures"
    figures.mkdir()
    from pal_opt.simulate import cli as simulate_cli

    real = simulate_cli._simulate_one

    def simulate_then_remove(*args: Any) -> Any:
        result = real(*args)
        figures.rmdir()
        return result

    monkeypatch.setattr(simulate_cli, "_simulate_one", simulate_then_remove)
    capsys.readouterr()
    assert main([*SIMULATE, "--policy", "pal", "--out", str(tmp_path / "r.json"),
                 "--jobs-csv", str(tmp_path / "j.csv"), "--plot", str(figures / "p.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pal-opt: error: {figures / 'p.png'}: cannot write") and err.count("\n") == 1
    assert _contents(tmp_path) == before


# ----------------------------------------------------------------------------- pal-opt partition
def test_partition_on_a_full_disk_leaves_the_earlier_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    args = ["partition", str(PROFILE), "--machines", "2,2", "--out", str(tmp_path / "out.json"),
            "--plot", str(tmp_path / "stages.png")]
    assert main([*args, "--bandwidth", "2.5e10,1.25e9"]) == 0
    before = _contents(tmp_path)
    capsys.readouterr()
    _fail_fsync_of(monkeypatch, "out")
    assert main([*args, "--bandwidth", "1e9,1e8"]) == 2  # another answer, whose result cannot be written
    assert capsys.readouterr().err == f"pal-opt: error: {tmp_path / 'out.json'}: cannot write: No space left on device\n"
    assert _contents(tmp_path) == before


# ----------------------------------------------------------------------------- a real Ctrl-C
#: ``pal-opt`` in a child that stops inside its write phase and says so: ``STOP`` is (function
#: name, target basename): when ``os.<function>`` is called on that output (``fsync``: the
#: output's file being written; ``replace``: renamed onto it), the child prints ``STOPPED`` and
#: waits for a line on stdin.
_CHILD = """
import os, sys
func, name = sys.argv[1], sys.argv[2]
real = getattr(os, func)

def stop_at(*args):
    path = os.readlink(f"/proc/self/fd/{args[0]}") if func == "fsync" else os.fspath(args[1])
    base = os.path.basename(path)
    if (base.startswith("." + name.split(".")[0] + ".") if func == "fsync" else base == name):
        print("STOPPED", flush=True)
        sys.stdin.readline()
    return real(*args)

setattr(os, func, stop_at)
import pal_opt.cli as c
c.run(sys.argv[3:])
"""


def _child(tmp_path: Path, func: str, name: str) -> Any:
    argv = [*SIMULATE, "--policy", "pal", "--out", str(tmp_path / "r.json"), "--jobs-csv", str(tmp_path / "j.csv"),
            "--plot", str(tmp_path / "p.png")]
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])  # this checkout's pal_opt
    env = {**os.environ, "PYTHONPATH": path, "PYTHONWARNINGS": "ignore", "PYTHONUNBUFFERED": "1"}
    p = popen([sys.executable, "-c", _CHILD, func, name, *argv], cwd=tmp_path, env=env, stdin=-1)
    assert p.stdout is not None and p.stdout.readline() == "STOPPED\n", p.communicate(timeout=120)
    return p


def _finish(p: Any, line: str = "") -> tuple[str, str]:
    try:
        return p.communicate(line, timeout=120)  # type: ignore[no-any-return]
    except BaseException:
        p.kill()
        p.communicate()
        raise


def test_sigint_while_the_outputs_are_written_leaves_the_earlier_ones(tmp_path: Path) -> None:
    """SIGINT while the figure (the last output) is being written: exit 130, nothing changed
    (the result file and the table had already replaced the earlier run's)."""
    before = _earlier_run(tmp_path)
    p = _child(tmp_path, "fsync", "p.png")
    p.send_signal(signal.SIGINT)
    out, err = _finish(p)
    assert p.returncode == 130 and err == "pal-opt: interrupted\n", (p.returncode, err)
    assert _contents(tmp_path) == before


def test_sigint_between_two_renames_waits_for_the_last(tmp_path: Path) -> None:
    """SIGINT after the result file was renamed into place, before the table: the renames go on
    (every output new), then the interrupt (exit 130)."""
    before = _earlier_run(tmp_path)
    p = _child(tmp_path, "replace", "j.csv")
    p.send_signal(signal.SIGINT)
    out, err = _finish(p, "go\n")
    assert p.returncode == 130 and err == "pal-opt: interrupted\n", (p.returncode, err)
    after = _contents(tmp_path)
    assert sorted(after) == ["j.csv", "p.png", "r.json"]  # no temporary file or backup link left
    assert all(after[name] != before[name] for name in after), "every output is the new run's"
