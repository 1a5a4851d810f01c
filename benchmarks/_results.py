"""Where a benchmark writes its results: the committed ``benchmarks/results/`` only with ``--update``.

Every benchmark takes the same two flags:

* ``--update`` replaces the committed files under ``benchmarks/results/``;
* ``--out-dir DIR`` writes to DIR instead.

With neither, results go to ``benchmarks/results/scratch/`` (ignored by git), so a quick or
partial run never overwrites what a full run committed.

Every results file names the command that wrote it (:func:`produced_by`), next to the machine's
description, so that a reader can run it again.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SCRATCH = RESULTS / "scratch"


def add_output_arguments(ap: argparse.ArgumentParser) -> None:
    """Add ``--update`` and ``--out-dir`` to a benchmark's parser."""
    ap.add_argument("--update", action="store_true",
                    help=f"replace the committed results in {RESULTS.parent.name}/{RESULTS.name}/")
    ap.add_argument("--out-dir", type=Path, default=None,
                    help=f"write results to this directory (default: {RESULTS.name}/{SCRATCH.name}/ "
                         "unless --update)")


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


def command_line(script: str, argv: Sequence[str] | None = None) -> str:
    """The command that ran this benchmark, ``python benchmarks/<script>.py <args>``, quoted for a shell.

    ``script`` is the benchmark's ``__file__``; ``argv`` what its ``main`` parsed (``None``: the
    process's own arguments, ``sys.argv[1:]``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["python", f"{RESULTS.parent.name}/{Path(script).name}", *args])


def produced_by(script: str, argv: Sequence[str] | None = None) -> str:
    """``Produced by `python benchmarks/<script>.py <args>```: the line every results header carries."""
    return f"Produced by `{command_line(script, argv)}`"


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

