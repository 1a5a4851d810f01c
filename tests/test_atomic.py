"""Atomic writes (pal_opt.io.atomic): what a failed write says."""

from __future__ import annotations

import os

import pytest

from pal_opt.io.atomic import atomic_write_bytes, atomic_write_files


def test_a_write_where_no_file_can_be_made_says_where_and_why(tmp_path):
    """ENOENT read "No such file or directory" both for a missing directory and for /proc."""
    import errno

    with pytest.raises(OSError) as err:
        atomic_write_bytes(tmp_path / "missing" / "x.json", b"{}")
    assert err.value.errno == errno.ENOENT and err.value.strerror == f"cannot write: directory {tmp_path / 'missing'} does not exist"
    if os.path.isdir("/proc") and os.path.exists("/proc/version"):
        with pytest.raises(OSError) as err:
            atomic_write_bytes("/proc/version", b"{}")
        assert "no new file can be made in /proc" in str(err.value.strerror)


def _file_size_limit(limit: int) -> None:
    """In the child, between ``fork`` and ``exec``: files may not grow past ``limit`` bytes
    (``RLIMIT_FSIZE``; Python ignores ``SIGXFSZ``, so the write fails with ``EFBIG``)."""
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a file size limit set in the child")
def test_a_write_cut_short_names_the_file_and_keeps_the_old_one(tmp_path):
    """A write that fails part way (a full disk, a quota; here the file size limit, a real
    failed ``write``) said only "No space left on device": no file named, and with several
    outputs no way to tell which.  Now one line names the output; the earlier file is kept and
    no temporary file is left."""
    import subprocess
    import sys
    from pathlib import Path

    inst = Path(__file__).resolve().parents[1] / "instances" / "large-256x8.json"
    out = tmp_path / "placement.json"
    out.write_text("earlier\n")
    r = subprocess.run([sys.executable, "-m", "pal_opt", "solve", str(inst), "--method", "pal", "--out", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       preexec_fn=lambda: _file_size_limit(4096))
    assert r.returncode == 2
    assert r.stderr == f"pal-opt: error: {out}: cannot write: File too large\n"
    assert out.read_text() == "earlier\n" and sorted(os.listdir(tmp_path)) == ["placement.json"]


def test_a_writer_that_fails_names_the_file_asked_for(tmp_path):
    """A writer given the temporary file's name (``fig.savefig``) that fails names the target,
    not the hidden temporary file."""
    import errno

    def full(path: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    target = tmp_path / "fig.png"
    with pytest.raises(OSError) as err:
        atomic_write_files({target: full})
    assert (err.value.errno, err.value.filename) == (errno.ENOSPC, str(target))
    assert err.value.strerror == "cannot write: No space left on device" and os.listdir(tmp_path) == []
