"""Whole ``pal-opt`` processes for the benchmarks: generated rounds as instance files, a process
timed from outside (wall from spawn to exit, CPU seconds and peak memory from GNU ``time``), and
the written placement checked by :func:`pal_opt.check.check`.

The processes run at the benchmark's own priority (no ``nice`` is added: start the benchmark
under ``nice`` to run everything under it); the niceness and the load average are recorded.  Wall
times on a shared machine include waiting for a core; *CPU s* (user + system) does not.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # this checkout's pal_opt in the benchmark too (generation, checking)
    sys.path.insert(1, str(ROOT))
#: Queued jobs per GPU of the generated rounds (as the PAL artifact's workloads at this scale).
JOBS_PER_GPU = 0.29
MiB = 2**20


def instance_file(gpus: int, seed: int, where: Path) -> Path:
    """A generated round of ``gpus`` GPUs (8 per server, λ = 1.7, Longhorn measurements when
    ``../shared`` has them), written once to ``where``."""
    from suite import measurements

    from pal_opt.generate import generate_instance
    from pal_opt.io import save_instance

    nodes, jobs = gpus // 8, round(gpus * JOBS_PER_GPU)
    path = where / f"scale-{nodes}x8-s{seed}.json"
    if not path.exists():
        inst = generate_instance(nodes, 8, jobs, seed=seed, locality_penalty=1.7, measurements=measurements(),
                                 name=f"scale-{nodes}x8-j{jobs}-s{seed}")
        save_instance(inst, path)
    return path


def source_env(tree: Path = ROOT) -> dict[str, str]:
    """This process's environment for a measured child that runs the package of the source tree
    ``tree`` (``PYTHONPATH``, not an installed or editable one elsewhere), with Python's bytecode
    cache on (``PYTHONDONTWRITEBYTECODE`` unset), as an installed package has it."""
    out = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPATH"] = str(tree)
    return out


def env() -> dict[str, str]:
    """The measured processes' environment: this checkout's package first (:func:`source_env`),
    warnings off."""
    return {**source_env(), "PYTHONWARNINGS": "ignore"}


def child_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process's finished children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_runs(run_child: Callable[[], Any], repeats: int) -> tuple[list[float], list[float]]:
    """Wall seconds and the children's CPU seconds of each of ``repeats`` calls of ``run_child``
    (which runs a child process and waits for it)."""
    wall, cpu = [], []
    for _ in range(repeats):
        c0, t0 = child_cpu_seconds(), time.perf_counter()
        run_child()
        wall.append(time.perf_counter() - t0)
        cpu.append(child_cpu_seconds() - c0)
    return wall, cpu


def cli() -> list[str]:
    """The command that starts ``pal-opt``."""
    return [sys.executable, "-m", "pal_opt.cli"]


def run(cmd: list[str], timeout: float, cwd: Path) -> dict[str, Any]:
    """One process: wall seconds (spawn to exit), exit code, peak RSS (bytes), CPU seconds (user
    + system), stdout, stderr.  It runs in ``cwd`` (not this checkout: ``python -m`` puts the
    working directory first on ``sys.path``, ahead of ``PYTHONPATH``).

    Peak and CPU come from GNU ``time`` (``%M``, ``%U``, ``%S``) when installed: the kernel's
    high-water mark survives ``exec``, so a process forked from this (large) one would report this
    one's memory.
    """
    gnu_time = Path("/usr/bin/time")
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = Path(tmp) / "rss"
        full = [str(gnu_time), "-f", "%M %U %S", "-o", str(rss_file), *cmd] if gnu_time.exists() else cmd
        t0 = time.monotonic()
        try:
            proc = subprocess.run(full, capture_output=True, env=env(), timeout=timeout, cwd=cwd)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, out, err = -9, exc.stdout or b"", exc.stderr or b""
        wall = time.monotonic() - t0
        try:
            kib, user, system = rss_file.read_text().split()[-3:]
            peak, cpu = int(kib) * 1024, float(user) + float(system)
        except (OSError, ValueError):
            peak, cpu = 0, None
    return {"wall": wall, "code": code, "peak_rss": peak, "cpu": cpu, "stdout": out.decode(errors="replace"),
            "stderr": err.decode(errors="replace"), "timed_out": code == -9}


@lru_cache(maxsize=2)
def _loaded(path: Path) -> Any:
    from pal_opt.io import load_instance

    return load_instance(path)


def solve_row(path: Path, args: list[str], timeout: float, work: Path) -> dict[str, Any]:
    """``pal-opt solve PATH ARGS -o OUT --quiet`` as a whole process: its measurements and what
    it wrote (status, objective, bound, gap, info), with ``valid`` from the checker."""
    from pal_opt.check import check

    out = work / "out.json"
    out.unlink(missing_ok=True)
    r = run([*cli(), "solve", str(path), *args, "-o", str(out), "--quiet"], timeout, work)
    doc = json.loads(out.read_text()) if r["code"] == 0 and out.exists() else None
    row: dict[str, Any] = {"wall": r["wall"], "cpu": r["cpu"], "peak_mib": r["peak_rss"] / MiB, "code": r["code"],
                           "load": os.getloadavg()[0]}
    if doc is None:
        return {**row, "status": "error", "valid": False, "stderr": r["stderr"].strip()[-300:]}
    info = doc.get("info", {})
    return {**row, "status": doc["status"], "objective": doc["objective"], "bound": doc.get("bound"),
            "gap": doc.get("gap"), "stage": info.get("time_limit_reached"), "path": info.get("relaxation", "program"),
            "answer": info.get("incumbent") or f"start ({info.get('start_source')})",
            "valid": not check(_loaded(path), doc)}


def niceness() -> int:
    """This process's niceness (the measured processes inherit it)."""
    return os.nice(0)
