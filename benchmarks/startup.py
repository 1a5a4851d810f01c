"""Start-up cost of the CLI, and PAL's k-means binning: ``pal_opt.kmeans`` against scikit-learn.

Runs for about 35 s on the machine of the committed page (its start and end clock: 07:23:45 to
07:24:20); ``--quick`` times the whole processes only.

Whole process (a new interpreter each run, wall time, median and minimum of ``--repeats``):

* ``pal-opt --help``;
* ``pal-opt solve instances/paper-16x4.json --method pal`` (64 GPUs, 40 jobs: the 64-GPU solve).

Each command first runs once untimed with Python's bytecode cache on (``PYTHONDONTWRITEBYTECODE``
is removed from the environment), so the runs measure what an installed package costs, not
compiling its sources.  ``--baseline DIR`` times the same commands on another source tree
(``git archive <commit> | tar -x -C DIR``; its ``instances/paper-16x4.json`` is used) as the
"before" column.  One more run under
``python -X importtime`` lists what the solve still imports.

In process (median of ``--repeats``): :func:`pal_opt.binning.bin_values` in ``pal-artifact`` mode
over the four classes of the first 2,048 and all 65,536 GPUs of
``generate_instance(8192, 8, 19200, seed=0)``, with :mod:`pal_opt.kmeans` and with
scikit-learn's ``KMeans`` put in its place (default OpenMP threads, and one thread), and
whether the binned factors agree.  Without scikit-learn the comparison is left out.

Usage::

    python benchmarks/startup.py [--repeats 5] [--baseline DIR] [--quick] [--update | --out-dir DIR]

Writes ``startup.md`` and prints it; the file replaces the committed one in ``benchmarks/results/``
only with ``--update`` (see ``benchmarks/_results.py``).  ``--quick`` times the whole processes
only (no import breakdown, no binning): a smoke run, which refuses ``--update``.
"""

from __future__ import annotations

import argparse
import functools
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this tree's pal_opt, as the timed subprocesses use

from _procs import source_env, timed_runs  # noqa: E402
from _results import (  # noqa: E402
    add_output_arguments,
    at_least,
    load_average,
    output_dir,
    partial_run,
    produced_by,
    run_time,
    write_page,
)

INSTANCE = "instances/paper-16x4.json"
COMMANDS = {
    "`pal-opt --help`": ["--help"],
    "`pal-opt solve instances/paper-16x4.json --method pal`": ["solve", INSTANCE, "--method", "pal"],
}
SIZES = (2048, 65536)


def whole_process(tree: Path, argv: list[str], repeats: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``python -m pal_opt.cli ARGV`` on the source tree ``tree``."""
    cmd = [sys.executable, "-m", "pal_opt.cli", *argv]  # -m puts the working directory first on sys.path
    subprocess.run(cmd, cwd=tree, env=source_env(tree), capture_output=True, check=True)  # bytecode cache
    return timed_runs(lambda: subprocess.run(cmd, cwd=tree, env=source_env(tree), capture_output=True, check=True),
                      repeats)


def import_breakdown(argv: list[str], top: int = 10) -> list[tuple[str, float]]:
    """The solve's top-level imports by cumulative time (one ``-X importtime`` run), seconds."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "pal_opt.cli", *argv], cwd=ROOT,
                         env=source_env(), capture_output=True, text=True, check=True).stderr
    rows = []
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            rows.append((parts[2].strip(), int(parts[1]) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:top]


def _sklearn_kmeans_1d(values: np.ndarray, k: int, *, seed: int = 1) -> Any:
    """:func:`pal_opt.kmeans.kmeans_1d` on scikit-learn (what binning called before)."""
    import warnings

    from sklearn.cluster import KMeans

    from pal_opt.kmeans import KMeansResult

    km = KMeans(n_clusters=k, init="k-means++", algorithm="lloyd", random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km.fit(values.reshape(-1, 1))
    _sklearn_kmeans_1d.last = km  # type: ignore[attr-defined]
    return KMeansResult(km.cluster_centers_[:, 0], km.labels_, km.n_iter_)


def _sklearn_predict(values: np.ndarray, centres: np.ndarray) -> np.ndarray:
    km = _sklearn_kmeans_1d.last  # type: ignore[attr-defined]
    assert np.array_equal(km.cluster_centers_[:, 0], centres)
    return km.predict(values.reshape(-1, 1))


@contextmanager
def on_sklearn(threads: int | None) -> Iterator[None]:
    """Binning runs on scikit-learn (``threads`` OpenMP threads; None: its default)."""
    import sklearn.cluster  # noqa: F401 - its OpenMP library must be loaded for the limit to reach it
    from threadpoolctl import threadpool_limits

    from pal_opt import binning

    limit = threadpool_limits(limits=threads, user_api="openmp") if threads else nullcontext()
    with mock.patch.object(binning, "kmeans_1d", _sklearn_kmeans_1d), \
            mock.patch.object(binning, "predict", _sklearn_predict), limit:
        yield


def bin_all(factors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    from pal_opt.binning import bin_values

    return {c: bin_values(v, "pal-artifact") for c, v in factors.items()}


def timed(fn: Callable[[], Any], repeats: int) -> tuple[tuple[list[float], list[float]], Any]:
    """Wall and CPU seconds (all threads) of ``repeats`` calls after an untimed one (lazy imports,
    caches), and the result."""
    wall, cpu, out = [], [], fn()
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return (wall, cpu), out


def binning_rows(repeats: int) -> tuple[list[dict[str, Any]], str]:
    """Binning times per size and implementation, and how k grows with the cluster."""
    from pal_opt.generate import generate_instance

    full = generate_instance(8192, 8, 19200, seed=0).cluster.factors
    try:
        import sklearn  # noqa: F401

        variants: list[tuple[str, Any]] = [("scikit-learn, default threads", lambda: on_sklearn(None)),
                                           ("scikit-learn, 1 OpenMP thread", lambda: on_sklearn(1))]
    except ImportError:
        variants = []
    rows, ks = [], []
    for n in SIZES:
        factors = {c: v[:n] for c, v in full.items()}
        ks.append(f"{n:,} GPUs: " + ", ".join(
            f"{c} {min(2 + int((v > v.mean() + 3 * v.std(ddof=1)).sum()), np.unique(v).size)}"
            for c, v in factors.items()))
        ours_t, ours = timed(functools.partial(bin_all, factors), repeats)
        rows.append({"gpus": n, "impl": "pal_opt.kmeans", "times": ours_t, "same": "—"})
        for name, ctx in variants:
            with ctx():
                t, ref = timed(functools.partial(bin_all, factors), repeats)
            same = all(np.array_equal(ours[c], ref[c]) for c in ours)
            close = all(np.allclose(ours[c], ref[c], rtol=1e-12, atol=0) for c in ours)
            rows.append({"gpus": n, "impl": name, "times": t,
                         "same": "bit for bit" if same else ("to 1e-12" if close else "NO")})
    return rows, "; ".join(ks)


def fresh_import(module: str, repeats: int) -> list[float]:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return [float(subprocess.run([sys.executable, "-c", code], env=source_env(), capture_output=True, text=True,
                                 check=True).stdout)
            for _ in range(repeats)]


def machine() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        keep = ("Model name", "CPU(s):", "Thread(s) per core", "Core(s) per socket", "CPU max MHz")
        cpu = "\n".join(ln for ln in lscpu.splitlines() if ln.startswith(keep))
    except (OSError, subprocess.SubprocessError):
        cpu = platform.processor()
    try:
        with open("/proc/meminfo") as fh:
            mem = fh.readline().strip()
    except OSError:
        mem = ""
    versions = [f"Python {platform.python_version()}", f"numpy {np.__version__}"]
    try:
        from importlib.metadata import version

        versions.append(f"scikit-learn {version('scikit-learn')}")
    except ImportError:  # pragma: no cover
        pass
    return f"{cpu}\n{mem}\n{platform.platform()}\n{', '.join(versions)}"


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average " + load_average(" ")


def _floor(argv: list[str], repeats: int) -> tuple[list[float], list[float]]:
    return timed_runs(lambda: subprocess.run([sys.executable, *argv], env=source_env(), check=True), repeats)


def _cell(ts: list[float]) -> str:
    return f"{statistics.median(ts):.3f} ({min(ts):.3f})"


def run(repeats: int, baseline: Path | None, label: str, quick: bool = False) -> dict[str, Any]:
    report: dict[str, Any] = {"uptime_start": uptime(), "repeats": repeats, "label": label, "quick": quick}
    floors = {"`python -c pass`": ["-c", "pass"], "`python -c 'import numpy'`": ["-c", "import numpy"]}
    report["floors"] = {name: _floor(argv, repeats) for name, argv in floors.items()}
    report["after"] = {name: whole_process(ROOT, argv, repeats) for name, argv in COMMANDS.items()}
    if baseline is not None:
        report["before"] = {name: whole_process(baseline, argv, repeats) for name, argv in COMMANDS.items()}
    report["imports"], report["binning"], report["ks"], report["sklearn_import"] = [], [], "", None
    if not quick:
        report["imports"] = import_breakdown(COMMANDS["`pal-opt solve instances/paper-16x4.json --method pal`"])
        report["binning"], report["ks"] = binning_rows(repeats)
        try:
            report["sklearn_import"] = fresh_import("sklearn.cluster", repeats)
        except subprocess.CalledProcessError:
            report["sklearn_import"] = None
    report["uptime_end"] = uptime()
    return report


def to_markdown(r: dict[str, Any], machine_text: str, command: str) -> str:
    n = r["repeats"]
    before = "before" in r
    lines = [
        "# Start-up and k-means binning",
        "",
        command + (f" (baseline: {r['label']})" if before else "")
        + f".  Wall seconds, median of {n} runs (minimum in brackets), each a new interpreter after one "
        "untimed run that writes Python's bytecode cache (as an installed package has it).",
        "",
        f"At the start: `{r['uptime_start']}`  ",
        f"At the end: `{r['uptime_end']}`",
        "",
        "## Whole process",
        "",
        "Wall time, and the process's CPU time (user + system), which the machine's load inflates less.",
        "",
        "| command | " + (f"before ({r['label']}): wall | CPU | " if before else "") + "now: wall | CPU |",
        "|---|" + ("---:|---:|" if before else "") + "---:|---:|",
    ]
    for name in COMMANDS:
        was = "".join(f"{_cell(ts)} | " for ts in r["before"][name]) if before else ""
        lines.append(f"| {name} | {was}" + "".join(f"{_cell(ts)} | " for ts in r["after"][name]).rstrip())
    for name, wc in r["floors"].items():
        lines.append(f"| {name} (floor) | " + ("| | " if before else "") + "".join(f"{_cell(ts)} | " for ts in wc).rstrip())
    if r["imports"]:
        lines += ["", "What the solve imports now (top-level modules by cumulative import time, one "
                  "`python -X importtime` run; the rest is interpreter start, loading the file, binning, PAL and "
                  "printing):", "", "| module | s |", "|---|---:|"]
        lines += [f"| `{m}` | {t:.3f} |" for m, t in r["imports"]]
    if r["binning"]:
        lines += ["", "## Binning in process", "",
                  f"`bin_values(v, 'pal-artifact')` for the four classes of the first 2,048 and all 65,536 GPUs of "
                  f"`generate_instance(8192, 8, 19200, seed=0)`; seconds, median of {n} (minimum); CPU time counts "
                  "every thread (an OpenMP thread waiting for work spins).  k = 2 + outliers per "
                  f"class ({r['ks']}).  \"factors\": the binned factors against `pal_opt.kmeans`'s.", "",
                  "| GPUs | k-means | wall s | CPU s | factors |", "|---:|---|---:|---:|---|"]
        lines += [f"| {b['gpus']:,} | {b['impl']} | {_cell(b['times'][0])} | {_cell(b['times'][1])} | {b['same']} |"
                  for b in r["binning"]]
    if r["sklearn_import"]:
        lines += ["", f"Importing `sklearn.cluster` in a new interpreter (what binning cost every CLI call "
                  f"before): {_cell(r['sklearn_import'])} s."]
    lines += ["", "## Machine", "", "```", machine_text, "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--repeats", type=int, default=5, help="timed runs of each command; median and minimum (default 5)")
    ap.add_argument("--baseline", type=Path, help="another source tree to time as 'before'")
    ap.add_argument("--baseline-label", help="what the baseline is (default: its directory name)")
    ap.add_argument("--quick", action="store_true", help="whole-process timings only (a smoke run)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "repeats")
    if args.baseline is not None and not (args.baseline / "pal_opt").is_dir():
        ap.error(f"--baseline {args.baseline}: not a source tree of pal-opt (no pal_opt/ in it)")
    out = output_dir(args, "startup", partial=partial_run(ap, args, "quick")) / "startup.md"
    label = args.baseline_label or (args.baseline.name if args.baseline else "")
    text = to_markdown(run(args.repeats, args.baseline, label, quick=args.quick), machine(), produced_by(__file__, argv))
    write_page("startup", out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
