"""Every benchmark writes the committed ``benchmarks/results/`` only with ``--update``.

The benchmarks themselves take minutes to an hour and are not run here: each script's ``--help``
must offer ``--update`` and ``--out-dir`` (``benchmarks/_results.py``), and one cheap path
(``startup.py --quick --repeats 1``) runs for real, leaving the committed results untouched.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"
SCRATCH = RESULTS / "scratch"
SCRIPTS = (
    "greedy_speed",
    "ilp_paper_cluster",
    "interrupts",
    "large_instance",
    "pal_a1",
    "pipedream_partition",
    "scale",
    "sia_fidelity",
    "startup",
    "suite",
    "types_scale",
)


def _bench(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def _committed() -> dict[str, tuple[str, int]]:
    """Hash and modification time of every committed result file."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(RESULTS.iterdir()) if p.is_file()}


def test_every_benchmark_is_listed() -> None:
    assert {p.stem for p in BENCHMARKS.glob("*.py") if not p.stem.startswith("_")} == set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_offers_update_and_out_dir(name: str) -> None:
    proc = _bench(name, "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--update" in proc.stdout and "--out-dir" in proc.stdout
    assert "--out " not in proc.stdout and "--out=" not in proc.stdout  # the old flag is gone


def test_update_and_out_dir_exclude_each_other(tmp_path: Path) -> None:
    proc = _bench("startup", "--update", "--out-dir", str(tmp_path), "--quick")
    assert proc.returncode != 0
    assert "not both" in proc.stderr


def test_a_quick_run_refuses_update() -> None:
    before = _committed()
    proc = _bench("startup", "--quick", "--repeats", "1", "--update")
    assert proc.returncode != 0
    assert "--quick" in proc.stderr and "drop --update" in proc.stderr
    assert _committed() == before


def test_a_run_without_update_leaves_the_committed_results_alone(tmp_path: Path) -> None:
    before = _committed()
    scratch = SCRATCH / "startup.md"
    old = scratch.stat().st_mtime_ns if scratch.exists() else None
    proc = _bench("startup", "--quick", "--repeats", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _committed() == before
    assert scratch.is_file() and scratch.stat().st_mtime_ns != old
    assert "pass --update to replace the committed results" in proc.stderr
    assert scratch.read_text(encoding="utf-8").startswith("# Start-up")

    out = tmp_path / "out"
    proc = _bench("startup", "--quick", "--repeats", "1", "--out-dir", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "startup.md").is_file()
    assert "`pal-opt --help`" in (out / "startup.md").read_text(encoding="utf-8")
    assert _committed() == before
