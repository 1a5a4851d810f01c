"""``pal-opt partition``: PipeDream's pipeline partitioner on a layer profile.

``pal-opt partition PROFILE --machines M1[,M2...] --bandwidth B1[,B2...] [--straight] [--out OUT.json] [--plot PNG]
[--method dp|ip [--backend NAME] [--time-limit S]]``

Levels are innermost first (``--machines 4,8``: 8 servers of 4 workers).  Bandwidths are in bytes
per second.  The summary is printed; ``--out`` writes the full result as JSON, and ``--plot``
draws each level's stages with their compute and communication times (needs matplotlib); the
two are written all or none (:func:`pal_opt.io.atomic.atomic_write_files`: a plot that fails to
draw or a Ctrl-C leaves both files as they were).  Bad input: one line on stderr, exit status 2,
nothing written.  A request no partition meets (``--straight`` on more workers than the model
has stages in a chain): one line ``infeasible partition: ...`` with the reason, exit status 1,
nothing written.

:func:`add_parser` registers the sub-command on the ``pal-opt`` parser and :func:`run` runs it.
The heavy imports (numpy, matplotlib) happen in :func:`run`, so registering costs nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..cliargs import check_outputs, check_plot_target, input_file, output_file
from ..errors import BackendError, InfeasiblePartitionError, OptionError

if TYPE_CHECKING:
    from ..io.atomic import Content
    from .partition import PartitionResult

__all__ = ["add_parser", "run"]


def _number_list(kind: Callable[[str], Any], what: str, workers: bool = False) -> Callable[[str], list[Any]]:
    """A comma-separated list of positive numbers; with ``workers``, counts of workers per level
    (at most :data:`~pal_opt.pipeline.partition.MAX_WORKERS_PER_LEVEL`, named by the flag)."""

    def parse(text: str) -> list[Any]:
        from ..options import is_finite_number, shown_number

        values = []
        for part in text.split(","):
            try:
                v = kind(part.strip())
            except ValueError:
                raise argparse.ArgumentTypeError(f"not {what}: {part.strip()!r}") from None
            if workers:  # before the finiteness test: math.isfinite raised OverflowError on 400 digits
                from .partition import MAX_WORKERS_PER_LEVEL

                if v > MAX_WORKERS_PER_LEVEL:
                    raise argparse.ArgumentTypeError(f"at most {MAX_WORKERS_PER_LEVEL:,} workers per level, "
                                                     f"got '{shown_number(v)}'")
            if not (is_finite_number(v) and v > 0):
                raise argparse.ArgumentTypeError(f"must be positive and finite, got {part.strip()!r}")
            values.append(v)
        return values

    return parse


def _positive_number(text: str) -> float:
    value: float = _number_list(float, "a number")(text)[0] if "," not in text else math.nan
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"expected one number, got {text!r}")
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``partition`` sub-command to ``subparsers`` (from ``add_subparsers``).

    Sets ``func=run`` as the sub-parser's default, so the caller dispatches with
    ``args.func(args)``.
    """
    p = subparsers.add_parser(
        "partition", help="PipeDream's pipeline partitioner on a layer profile",
        description="Partition a profiled model into pipeline stages on a machine hierarchy "
                    "(PipeDream's optimiser): print the optimum time per sample and the stages.",
    )
    p.add_argument("profile", type=input_file, metavar="PROFILE", help="PipeDream layer profile (graph.txt)")
    p.add_argument("--machines", required=True, type=_number_list(int, "an integer", workers=True),
                   metavar="M1[,M2...]",
                   help="workers per level, innermost first (e.g. 4,8: 8 servers of 4 GPUs)")
    p.add_argument("--bandwidth", required=True, type=_number_list(float, "a number"), metavar="B1[,B2...]",
                   help="bandwidth per level in bytes per second, innermost first")
    p.add_argument("--straight", action="store_true", help="straight pipeline: no stage is replicated")
    p.add_argument("-o", "--out", "--output", dest="out", type=output_file, metavar="OUT.json", help="write the result as JSON")
    p.add_argument("--plot", type=output_file, metavar="PNG",
                   help="draw each level's stages with their compute and communication times (the format from the "
                        "suffix; written with --out, all or none; needs matplotlib: pip install 'pal-opt[plot]')")
    p.add_argument("--engine", choices=("auto", "numpy", "python"), default="auto",
                   help="how the dynamic program is computed; all give the same result (default auto: "
                        "pure Python for small problems, which skips importing numpy)")
    p.add_argument("--method", choices=("dp", "ip"), default="dp",
                   help="dp: the dynamic program (default); ip: the same optimum from integer programs "
                        "(formulations/pipeline_partition.md), one per segment at inner levels, much slower")
    p.add_argument("--backend", metavar="NAME", default=None,
                   help="with --method ip: the solver backend (highs, cpsat, cbc; default: the first installed)")
    p.add_argument("--time-limit", type=_positive_number, metavar="S", default=None,
                   help="with --method ip: seconds per integer program; one not proven optimal in time is an error "
                        "(default: none)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress line on stderr (shown on a terminal once the partition has run 2 s: "
                        "with --method ip, the segment programs solved)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``pal-opt partition``; returns the exit status (0, or 1 for an infeasible request)."""
    from .partition import partition
    from .profile import load_profile

    if len(args.machines) != len(args.bandwidth):
        m, b = len(args.machines), len(args.bandwidth)
        raise OptionError(f"--machines gives {m} level{'s' * (m != 1)} but --bandwidth gives {b}")
    check_outputs({"--out": args.out, "--plot": args.plot}, [("PROFILE", args.profile)])
    if args.plot:
        check_plot_target(args.plot)
    if args.method != "ip" and (args.backend is not None or args.time_limit is not None):
        raise OptionError("--backend and --time-limit apply to --method ip only")
    if args.method == "ip" and args.engine != "auto":
        raise OptionError("--engine applies to --method dp only (the integer programs have no engine)")
    if args.backend is not None:
        from ..ilp.backends import get_backend

        get_backend(args.backend)  # an unknown or missing backend fails before any work
    from ..cliprogress import live_line

    try:
        with live_line("partitioning", args.method, enabled=not args.quiet):  # the integer programs take seconds; erased before the summary
            result = partition(load_profile(args.profile), args.machines, args.bandwidth, straight=args.straight,
                               engine=args.engine, method=args.method, backend=args.backend,
                               time_limit=args.time_limit)
    except InfeasiblePartitionError as exc:  # valid input with no answer: not bad input (exit 1, not 2)
        print(f"pal-opt: error: infeasible partition: {args.profile}: {exc}", file=sys.stderr)
        return 1
    except BackendError as exc:  # a solver that failed or proved nothing in --time-limit (exit 1)
        print(f"pal-opt: error: {args.profile}: {exc}", file=sys.stderr)
        return 1
    outputs: dict[str, Content] = {}
    if args.out:
        doc = {"profile": os.fspath(args.profile), **result.to_dict()}
        outputs[args.out] = (json.dumps(doc, indent=1) + "\n").encode("utf-8")
    if args.plot:
        outputs[args.plot] = lambda path: _plot(result, path)
    if outputs:
        from ..io.atomic import atomic_write_files

        atomic_write_files(outputs)  # both or neither: the plot drawn and both written before either is renamed
    for key, value in _summary(args, result):
        print(f"{key:<8}  {value}")
    return 0


def _summary(args: argparse.Namespace, result: PartitionResult) -> list[tuple[str, str]]:
    levels = " x ".join(map(str, result.machines))
    rates = ", ".join(f"{b / 1e9:g} GB/s" for b in result.bandwidths)
    stages = "  ".join(f"[{s.start}-{s.end})x{s.replicas}" for s in result.stages)
    lines = [
        ("profile", f"{args.profile}: {result.num_states} cut states"),
        ("workers", f"{levels} (innermost first), {rates}" + (", straight" if result.straight else "")),
        ("time", f"{result.time_per_sample:.9g} s per sample (one worker {result.single_stage_time:.6g} s, "
                 f"data-parallel {result.data_parallel_time:.6g} s)"),
        ("stages", f"{result.total_stages}: {stages}"),
        ("method", "dynamic program" if result.method == "dp" else
                   f"integer programs ({result.backend})"),
    ]
    if len(result.levels) > 1:
        lines.append(("note", f"{len(result.machines)} levels: no 'pipeline' for a job is written (a job's "
                              "pipeline is one level of stages; partition with one --machines level for one)"))
    lines += [("wrote", path) for path in (args.out, args.plot) if path]
    return lines


# --------------------------------------------------------------------------- output
def _plot(result: PartitionResult, path: str) -> None:
    """Stacked bars per level: each stage's compute and communication time per sample."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(len(result.levels), 1, squeeze=False,
                             figsize=(max(6.0, 0.5 * len(result.stages) + 3), 2.8 * len(result.levels)))
    for index, (ax, level) in enumerate(zip(axes[:, 0], result.levels, strict=True)):
        xs = range(len(level))
        compute = [s.level_time / s.replicas for s in level]
        comm = [s.communication_time for s in level]
        ax.bar(xs, compute, label="compute")
        ax.bar(xs, comm, bottom=compute, label="data-parallel communication")
        ax.axhline(result.time_per_sample, color="k", linestyle="--", linewidth=1, label="time per sample (whole pipeline)")
        ax.set_xticks(list(xs), [f"{s.start}-{s.end}\nx{s.replicas}" for s in level], fontsize=7)
        ax.set_ylabel("seconds per sample")
        ax.set_title(f"level {index + 1}: {result.machines[index]} workers, "
                     f"{result.bandwidths[index] / 1e9:g} GB/s", fontsize=9)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, format=os.path.splitext(path)[1].lstrip(".").lower())
    plt.close(fig)
