"""Process helpers for the interrupt tests (Linux /proc)."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    """Direct children of ``pid``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out
