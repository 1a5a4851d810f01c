"""Atomic writes (pal_opt.io.atomic): what a failed write says."""

from __future__ import annotations

import os

import pytest

from pal_opt.io.atomic import atomic_write_bytes


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
