"""Where a benchmark writes its results: the committed ``benchmarks/results/`` only with ``--update``.

Every benchmark takes the same two flags:

* ``--update`` replaces the committed files under ``benchmarks/results/``;
* ``--out-dir DIR`` writes to DIR instead.

With neither, results go to ``benchmarks/results/scratch/`` (ignored by git), so a quick or
partial run never overwrites what a full run committed.

Every results file names the command that wrote it, the date and the commit (:func:`produced_by`),
next to the machine's description, so that a reader can run it again.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import math
import os
import shlex
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
SCRATCH = RESULTS / "scratch"


def add_output_arguments(ap: argparse.ArgumentParser) -> None:
    """Add ``--update`` and ``--out-dir`` to a benchmark's parser."""
    ap.add_argument("--update", action="store_true",
                    help=f"replace the committed results in {RESULTS.parent.name}/{RESULTS.name}/")
    ap.add_argument("--out-dir", type=Path, default=None,
                    help=f"write results to this directory (default: {RESULTS.name}/{SCRATCH.name}/ "
                         "unless --update)")


def refuse_run_flags(ap: argparse.ArgumentParser, args: argparse.Namespace, flag: str = "--plot-only",
                     used: tuple[str, ...] = ()) -> None:
    """A one-line usage error when ``flag`` (which runs nothing: a figure from the committed data)
    comes with an option of the run set to other than its default (``--sizes 2048``), which it
    would ignore without a word; ``--update`` and ``--out-dir`` say where it writes, and ``used``
    names the other destinations the figure does take (``pipedream_ip``'s ``timeout``) or that
    cannot mislead (``shared``: the data a run would read)."""
    defaults = vars(ap.parse_args([]))
    own = {flag.lstrip("-").replace("-", "_"), "update", "out_dir", *used}
    ignored = [k for k, v in vars(args).items() if k not in own and v != defaults.get(k)]
    if ignored:
        ap.error(f"{flag} draws the committed run, so {', '.join(option_flag(ap, k) for k in ignored)} would not apply")


def add_plot_only_argument(ap: argparse.ArgumentParser, figure: str, data: str, also: str = "") -> None:
    """Add ``--plot-only`` to a benchmark's parser: ``figure`` drawn again from the committed ``data``
    file (``also``: what else the figure takes, after a comma) and nothing run (:func:`plot_only`)."""
    ap.add_argument("--plot-only", action="store_true",
                    help=f"run nothing: draw {figure} again from the committed {data}{also} (the page, which "
                         "names the machine and the command of its run, is left as it is)")


def plot_only(ap: argparse.ArgumentParser, args: argparse.Namespace, name: str, figure: str,
              draw: Callable[[Path], None], used: tuple[str, ...] = ()) -> Path:
    """A ``--plot-only`` run: the usage error of :func:`refuse_run_flags` (``used`` as there) for an
    option of the run it would ignore, then ``draw(path)`` of ``figure`` in the run's output
    directory (:func:`output_dir`); the figure's path, for the caller to announce."""
    refuse_run_flags(ap, args, used=used)
    path = output_dir(args, name) / figure
    draw(path)
    return path


def progress_bar(total: int, desc: str, unit: str) -> Any:
    """A bar of a benchmark's ``total`` runs (``unit``) on stderr, drawn only when stderr is a
    terminal (:func:`pal_opt.cliprogress.status_bar`, the bar of ``pal-opt simulate``): a run
    redirected to a file or a pipe gets no bar characters in its log.  Call ``update(1)`` per run
    done and ``close()`` at the end (or use it as a context manager)."""
    from pal_opt.cliprogress import status_bar

    return status_bar(total=total, desc=desc, unit=unit, miniters=0)


def run_time(doc: str | None) -> str | None:
    """The paragraph of a benchmark's docstring that starts "Runs for about", on one line: its ``--help`` epilog.

    Every benchmark says how long its whole run took on the machine of its committed page (README's
    benchmarks table has the same figure), so that a reader knows before starting it.
    """
    for paragraph in (doc or "").split("\n\n"):
        if paragraph.strip().startswith("Runs for about"):
            return " ".join(paragraph.split())
    return None


def output_dir(args: argparse.Namespace, name: str, *, partial: str | None = None) -> Path:
    """The directory this run writes to (created), announced on stderr when it is the scratch one.

    ``partial`` names what makes this run a partial one (e.g. ``"--quick"``): such a run cannot
    replace the committed results.
    """
    if args.out_dir is not None and args.update:
        raise SystemExit(f"{name}: give --update or --out-dir, not both")
    if partial and args.update:
        raise SystemExit(f"{name}: a {partial} run does not replace the committed results; drop --update")
    if args.out_dir is not None:
        out = Path(args.out_dir)
    elif args.update:
        out = RESULTS
    else:
        out = SCRATCH
        print(f"{name}: writing to {out} (pass --update to replace the committed results)", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    return out


def option_flag(ap: argparse.ArgumentParser, name: str) -> str:
    """The flag of the option whose destination is ``name`` (``"time_limit"``: ``--time-limit``);
    ``name`` itself when ``ap`` has no such option."""
    for action in ap._actions:
        if action.dest == name and action.option_strings:
            return next((s for s in action.option_strings if s.startswith("--")), action.option_strings[0])
    return name


def _shown(value: Any) -> str:
    """A value as an error line shows it: a float by ``:g`` (``0``, ``nan``), anything else by ``str``."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def at_least(ap: argparse.ArgumentParser, args: argparse.Namespace, least: int, *names: str) -> None:
    """A one-line usage error (``ap.error``: usage, then ``--reps 0: at least 1``; exit 2) for the
    first of the options ``names`` (destinations: ``"reps"``) whose value is below ``least``; an
    option left at ``None`` (not given, no default) is not checked."""
    for name in names:
        value = getattr(args, name)
        if value is not None and not value >= least:
            ap.error(f"{option_flag(ap, name)} {_shown(value)}: at least {least}")


def _finite_seconds(ap: argparse.ArgumentParser, args: argparse.Namespace, names: Sequence[str],
                    ok: Callable[[float], bool], expected: str) -> None:
    for name in names:
        value = getattr(args, name)
        if not (math.isfinite(value) and ok(value)):
            ap.error(f"{option_flag(ap, name)} {_shown(value)}: {expected}")


def positive_seconds(ap: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """A one-line usage error (``--time-limit 0: seconds > 0 expected``; exit 2) for the first of
    the options ``names`` (destinations) that is not a finite number of seconds above 0 (``nan``
    and ``inf`` are refused too)."""
    _finite_seconds(ap, args, names, lambda v: v > 0, "seconds > 0 expected")


def nonnegative_seconds(ap: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """As :func:`positive_seconds`, for options that may be 0 (``--restart-cost -1: seconds >= 0
    expected``)."""
    _finite_seconds(ap, args, names, lambda v: v >= 0, "seconds >= 0 expected")


def partial_run(ap: argparse.ArgumentParser, args: argparse.Namespace, *names: str,
                also: Mapping[str, bool] | None = None) -> str | None:
    """What makes this run a partial one, for :func:`output_dir`'s ``partial``: the flags of the
    options ``names`` (destinations) whose value is not the parser's default (``ap.get_default``;
    a ``store_true`` flag such as ``--quick`` counts when given), then those of ``also`` (flag:
    whether it differs, for an option compared after parsing, ``--policies pal``) that do, joined
    by spaces (``"--quick --seeds"``); ``None`` for a run with the options of the committed page."""
    flags = [option_flag(ap, name) for name in names if getattr(args, name) != ap.get_default(name)]
    flags += [flag for flag, differs in (also or {}).items() if differs]
    return " ".join(flags) or None


def split_list(ap: argparse.ArgumentParser, flag: str, text: str, kind: Callable[[str], Any] = int,
               expected: str = "comma-separated integers") -> list[Any]:
    """``text`` (``"512,2048"``) split on commas, each item converted by ``kind``; an empty item or
    one ``kind`` refuses is a one-line usage error (``ap.error``: usage, then ``flag``, the value
    and ``expected``; exit 2), before any work."""
    items = [x.strip() for x in text.split(",")]
    try:
        if "" in items:
            raise ValueError
        return [kind(x) for x in items]
    except ValueError:
        ap.error(f"{flag} {text!r}: {expected} expected")


def check_values(ap: argparse.ArgumentParser, flag: str, values: Sequence[Any], ok: Callable[[Any], bool],
                 allowed: str) -> None:
    """A one-line usage error naming ``flag``, the first of ``values`` that is not ``ok`` and what is
    ``allowed``; a value given twice is one too."""
    seen: list[Any] = []
    for v in values:
        shown = _shown(v)
        if not ok(v):
            ap.error(f"{flag} {shown}: {allowed}")
        if v in seen:
            ap.error(f"{flag} {shown}: given twice")
        seen.append(v)


def sizes_among(ap: argparse.ArgumentParser, text: str, targets: Collection[int]) -> list[int]:
    """``--sizes`` (``"8192,65536"``) as GPU counts, each one of ``targets`` (a benchmark's sizes
    with targets); otherwise a one-line usage error naming them, before any work."""
    known = ", ".join(map(str, targets))
    sizes = split_list(ap, "--sizes", text, expected=f"comma-separated GPU counts among {known}")
    check_values(ap, "--sizes", sizes, lambda g: g in targets, f"no targets for that size; sizes are {known}")
    return sizes


def check_backends(ap: argparse.ArgumentParser, flag: str, names: Sequence[str]) -> None:
    """A one-line usage error for a name in ``names`` that is not an installed backend."""
    from pal_opt.ilp import available_backends

    installed = available_backends()
    check_values(ap, flag, names, lambda b: b in installed,
                 f"not an installed backend; choose among {', '.join(installed)}")


def wrote(name: str, *paths: Path) -> None:
    """The run's last line, on stderr: ``<name>: wrote <paths>`` (those of ``paths`` that exist)."""
    done = [str(p) for p in paths if Path(p).exists()]
    listed = ", ".join(done[:-1]) + f" and {done[-1]}" if len(done) > 1 else "".join(done) or "nothing"
    print(f"{name}: wrote {listed}", file=sys.stderr)


def write_page(name: str, path: Path, text: str) -> None:
    """The last step of a benchmark whose page is its one output: ``text`` written to ``path``
    (UTF-8), printed on stdout, and :func:`wrote`'s line naming it on stderr."""
    Path(path).write_text(text, encoding="utf-8")
    print(text)
    wrote(name, path)


def command_line(script: str, argv: Sequence[str] | None = None) -> str:
    """The command that ran this benchmark, ``python benchmarks/<script>.py <args>``, quoted for a shell.

    ``script`` is the benchmark's ``__file__``; ``argv`` what its ``main`` parsed (``None``: the
    process's own arguments, ``sys.argv[1:]``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["python", f"{RESULTS.parent.name}/{Path(script).name}", *args])


def produced_by(script: str, argv: Sequence[str] | None = None, *, date: bool = True, commit: bool = True) -> str:
    """``Produced by `python benchmarks/<script>.py <args>` on <date> at commit <hash>``: the line
    every results header carries, so that a reader knows what ran, when and on which code.

    ``date`` and ``commit`` add today's date and :func:`source_commit`; a script whose header
    states either itself (its own date, or the commit of each kept run) turns it off here.
    """
    line = f"Produced by `{command_line(script, argv)}`"
    if date:
        import time

        line += f" on {time.strftime('%Y-%m-%d')}"
    if commit:
        line += f" at commit {source_commit()}"
    return line


#: The packages whose versions can move a result: the numerics (and so the ties among optimal
#: answers) and the solvers.
PACKAGES = ("numpy", "scipy", "pandas", "networkx", "highspy", "ortools", "pulp")


def package_versions(names: Sequence[str] = PACKAGES) -> str:
    """``numpy 2.4.6, scipy 1.17.1, ...``: the installed versions, for a results header.

    Whole-trace simulations follow one of several optimal answers each round; another numpy or
    solver release may break a tie differently and move the figures, so a page names its versions.
    """
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in names:
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return ", ".join(out)


def write_rows_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """``rows`` as a CSV file at ``path``: one column per key any row has, in the order first seen
    (a row without a key leaves its cell empty)."""
    import csv

    keys = list(dict.fromkeys(k for r in rows for k in r))
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def write_rows_6g(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """``rows``, in their order, as a CSV file with ``columns`` and floats to six significant
    digits (``%.6g``), written atomically (:func:`pal_opt.simulate.write_text_atomic`)."""
    import csv
    import io

    from pal_opt.simulate import write_text_atomic

    buf = io.StringIO()
    wr = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    wr.writeheader()
    for r in rows:
        wr.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    write_text_atomic(path, buf.getvalue())


def load_average(sep: str = " / ", unknown: str = "?") -> str:
    """The 1-, 5- and 15-minute load averages to two decimals, joined by ``sep`` (``0.52 / 0.61 /
    0.70``), or ``unknown`` on a platform without them: the load a results header names."""
    try:
        return sep.join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return unknown


def cpu_model(default: str) -> str:
    """The CPU's model name (the first ``model name`` line of ``/proc/cpuinfo``), or ``default``
    where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), default)
    except OSError:
        return default


def memory_gib() -> str:
    """The machine's memory (``MemTotal``, the first line of ``/proc/meminfo``) in whole GiB
    (``62 GiB``), or ``?`` where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            return f"{int(fh.readline().split()[1]) / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        return "?"




@functools.cache
def _code_digest() -> str:
    """sha256 of :func:`package_versions` and pal_opt's source files (path and bytes, sorted by
    path): the whole fingerprint before it covered the benchmark and its data.  Computed once a
    process (the sources do not change under a running benchmark)."""
    h = hashlib.sha256(package_versions().encode())
    package = RESULTS.parents[1] / "pal_opt"
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@functools.cache
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file's bytes, cached on its path, size and modification time (so a file
    changed in the same process is read again)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digest(path: str | Path) -> str:
    """sha256 of a file, or of a directory: every file under it, by path relative to it and
    content, in sorted order (hidden files and ``__pycache__`` left out).  A path that does not
    exist digests as ``"missing"``, so its appearing later changes the fingerprint too."""
    p = Path(path)
    if p.is_file():
        st = p.stat()
        return _file_digest(str(p.resolve()), st.st_size, st.st_mtime_ns)
    if not p.is_dir():
        return "missing"
    h = hashlib.sha256()
    for f in sorted(q for q in p.rglob("*") if q.is_file()):
        rel = f.relative_to(p).as_posix()
        if any(part.startswith(".") or part == "__pycache__" for part in rel.split("/")):
            continue
        h.update(rel.encode() + b"\0" + file_digest(f).encode())
    return h.hexdigest()


def code_fingerprint(scripts: Sequence[str | Path] = (), data: Sequence[str | Path] = ()) -> str:
    """A short hash of pal_opt's source files, the versions of :data:`PACKAGES`, the benchmark's
    own source and the shared data it reads.  A benchmark that keeps finished runs between
    invocations re-uses one only under the same fingerprint (:func:`fresh_runs`), so that a
    change of pal_opt, of a solver release, of the benchmark's settings or of its input is never
    hidden behind an earlier figure.

    Parameters
    ----------
    scripts
        The calling benchmark's ``__file__`` and the files of any benchmark module it takes
        settings or run functions from (``sia_compare.py`` for the scripts built on it): their
        bytes are hashed, so any edit (a cluster, a seed, an option's default) counts.
    data
        The files or directories the runs read (``../shared/data/...``); a directory counts every
        file under it (:func:`file_digest`).

    Only contents count, in the order given (not where the files are), so the same code and
    data checked out elsewhere give the same fingerprint.

    With neither, only pal_opt and the packages are covered, as every fingerprint was until
    2026-12-07 (the runs kept before then, the committed ``*_runs.json``, carry one of those: they
    are not re-used by a benchmark that passes its script and data, and are run again).  Digests
    are cached per process (:func:`functools.cache`), so calling this again costs next to nothing.
    """
    code = _code_digest()
    if not scripts and not data:
        return code[:12]
    h = hashlib.sha256(code.encode())
    for kind, paths in ((b"script", scripts), (b"data", data)):
        for path in paths:
            h.update(kind + b"\0" + file_digest(path).encode() + b"\n")
    return h.hexdigest()[:12]



def source_commit() -> str:
    """The commit the runs are made at (``git rev-parse --short HEAD``), with ``+changes`` when
    pal_opt or the benchmarks differ from it; ``unknown`` outside a git checkout."""
    import subprocess

    root = RESULTS.parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "pal_opt", "benchmarks/*.py"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


#: What the fingerprint of a run stamped since 2026-12-07 covers (``fingerprint_covers``); a kept
#: run without that field has the fingerprint of pal_opt's code and the packages only.
FINGERPRINT_COVERS = "code, packages, benchmark and data"


def stamped(run: dict[str, Any], fingerprint: str, commit: str) -> dict[str, Any]:
    """``run`` with where it comes from: the fingerprint (:func:`code_fingerprint` of the benchmark
    and its data), what it covers, the commit and the date."""
    import time

    return {**run, "fingerprint": fingerprint, "fingerprint_covers": FINGERPRINT_COVERS, "commit": commit,
            "run_date": time.strftime("%Y-%m-%d")}


def fresh_runs(runs: dict[str, dict[str, Any]], fingerprint: str, name: str) -> dict[str, dict[str, Any]]:
    """The kept runs made under ``fingerprint``; the others are dropped (and counted on stderr),
    to be run again."""
    keep = {k: r for k, r in runs.items() if r.get("fingerprint") == fingerprint}
    if len(keep) < len(runs):
        print(f"{name}: {len(runs) - len(keep)} kept runs were made with other code, packages, benchmark "
              "settings or data; they will be run again", file=sys.stderr)
    return keep


def kept_runs(store: Path, fingerprint: str | None, name: str) -> dict[str, dict[str, Any]]:
    """The runs a benchmark kept in ``store`` (a JSON object by run; none without the file), those
    of another ``fingerprint`` dropped (:func:`fresh_runs`); all of them with ``fingerprint`` None
    (``--no-run``: the page is written again from what is kept)."""
    import json

    runs = json.loads(Path(store).read_text()) if Path(store).is_file() else {}
    return runs if fingerprint is None else fresh_runs(runs, fingerprint, name)


def runs_provenance(runs: Sequence[dict[str, Any]] | Any) -> str:
    """One sentence: when and at which commit the runs on a page were made."""
    rows = list(runs)
    dates = sorted({r.get("run_date", "an unrecorded date") for r in rows})
    commits = sorted({r.get("commit", "an unrecorded commit") for r in rows})
    # a run kept from before 2026-12-07 has no ``fingerprint_covers``: its fingerprint is of the
    # code and packages only, and the page says so (it said "of the code, packages, benchmark and
    # data" of every run, so re-writing a committed page from its kept runs changed what it claimed)
    old = sorted({r.get("fingerprint", "none") for r in rows if "fingerprint_covers" not in r})
    new = sorted({r.get("fingerprint", "none") for r in rows if "fingerprint_covers" in r})
    said = ([f"code and package fingerprint {', '.join(old)}"] if old else []) \
        + ([f"fingerprint of the {FINGERPRINT_COVERS} {', '.join(new)}"] if new else [])
    return (f"The {len(rows)} runs were made on {', '.join(dates)} at commit {', '.join(commits)} "
            f"({'; '.join(said) or 'no fingerprint'}, `benchmarks/_results.py::code_fingerprint`).")
