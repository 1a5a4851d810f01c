"""The ``pal-opt`` command line: argument parsing and printing only; the work is the API's.

Commands
--------
``pal-opt generate --nodes N --gpus-per-node G --jobs J [...] -o INSTANCE.json``
    A synthetic round (:func:`pal_opt.generate.generate_instance`).
``pal-opt import blox --gpus GPU_DF.csv [--jobs JOBS.csv] [...] -o INSTANCE.json``
    A round from Blox's GPU table and a job queue CSV; without ``--jobs``, the cluster alone
    (:func:`pal_opt.io.blox.load_blox`).
``pal-opt import slurm|k8s|graphml FILE [...] -o INSTANCE.json``
    A round on a Slurm ``topology.conf``, ``kubectl get nodes -o json`` or GraphML cluster.
``pal-opt export slurm|k8s|graphml INSTANCE.json PLACEMENT.json -o OUT``
    A placement as Slurm node lists or per-pod node assignments (:mod:`pal_opt.topology.cli`).
``pal-opt solve INSTANCE.json --method M [...] [--out PLACEMENT.json] [--quiet]``
    Place one round (:func:`pal_opt.solve.solve`) and print a summary.  On a terminal, a solve
    that runs more than 2 s shows a live line on stderr (elapsed time, and for exact methods the
    incumbent, bound and gap; ``ilp-partitioned``: the parts solved; :mod:`pal_opt.cliprogress`),
    erased before the summary; never in a pipe, nor with ``--quiet``.
``pal-opt repair INSTANCE.json PLACEMENT.json --failed GPU_ID[,GPU_ID...] [--allow-migration COST] [--out OUT.json]``
    Re-place the jobs of the placement in force that lost a GPU, keeping the others where they
    are (:func:`pal_opt.repair.repair`), and print the same summary as ``solve``.
``pal-opt check INSTANCE.json PLACEMENT.json``
    Verify a placement (:func:`pal_opt.check.check`); a repair's output is checked on the repair
    round it declares.
``pal-opt partition PROFILE --machines M1,M2 --bandwidth B1,B2 [--straight] [--out OUT.json] [--quiet]``
    PipeDream's pipeline partitioner (:mod:`pal_opt.pipeline.cli`).
``pal-opt simulate-sia TRACE --cluster ... --profiles DIR --out RESULT.json``
    A newTrace workload on a heterogeneous cluster under the Sia policy (:mod:`pal_opt.hetero.cli`).
``pal-opt simulate ...``
    Present when :mod:`pal_opt.simulate.cli` provides ``add_parser(subparsers)``; that
    function registers its sub-parser and sets ``func`` (``args -> exit code``) as default.

Exit codes
----------
0 success; 1 ``check`` found violations, a solver failed, or the round is infeasible (``solve
--jobs``: one line on stderr, no output file); 2 bad input or options (one line
``pal-opt: error: <file>: <field>: <what>`` on stderr, no traceback, no output file written;
an output that is one of the command's input files, or another of its outputs, is bad input too,
refused before any work: ``repair ... -o PLACEMENT.json`` included);
130 interrupted (SIGINT).  A Ctrl-C while an exact solver runs stops the solver cleanly and
keeps the best placement found so far (the solver's incumbent, or the start placement; marked
``"interrupted": true`` in its ``info``): it is printed and written to ``--out``, and pal-opt
exits 130.  A Ctrl-C anywhere else, or a second one, writes nothing.  Output files are written
atomically, only once complete, so an interrupted or killed run leaves an existing output file
either as it was or replaced by a complete placement.  A reader of stdout (or stderr) that goes
away early (``pal-opt solve ... | head -2``) changes neither: the rest of the output is dropped
quietly, the files are still written, and the exit status is the command's own.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from .cliargs import (
    OnceParser,
    add_exact_arguments,
    add_method_arguments,
    add_output_arguments,
    add_restart_arguments,
    check_gpu_ids,
    check_outputs,
    check_plot_target,
    cost_param,
    exact_options,
    finite,
    gpu_ids,
    input_file,
    job_ids,
    methods_epilog,
    nonempty,
    nonneg_int,
    output_file,
    penalty,
    pos_int,
    positive_float,
    resolve_job_ids,
    solve_options,
    with_costs,
    with_restart,
)
from .cliprogress import INTERRUPT_REQUESTED
from .errors import (
    BackendUnavailableError,
    InfeasibleRoundError,
    InstanceError,
    OptionError,
    PalOptError,
    counted,
)
from .streams import PipeSafe, ReaderMayLeave, lost_output

__all__ = ["main", "build_parser", "status_line"]

PROG = "pal-opt"


class _Help(argparse.HelpFormatter):
    """argparse's help, wrapped between words only: never at a hyphen inside one (``pip install
    'pal-`` / ``opt[plot]'``, ``preempt-`` / ``greedy``), nor inside a word longer than the line (a
    path or a label key, left whole to be copied)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap  # as argparse: only when help is shown

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)


class _RawDescriptionHelp(argparse.RawDescriptionHelpFormatter, _Help):
    """:class:`_Help` with the description and epilog kept as written (``solve``'s method table)."""


class _Parser(OnceParser):
    """argparse with one-line errors (exit 2) and no ``sys.exit`` inside :func:`main`.  Flags are
    not abbreviated (``--meth`` for ``--method``): a script relying on an abbreviation would break,
    or change meaning, when a later flag shares its prefix; an option of one value given twice is
    refused (:class:`~pal_opt.cliargs.OnceParser`), not the last one kept.  Help is wrapped by
    :class:`_Help` (a raw description kept as written)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        raw = kwargs.get("formatter_class") is argparse.RawDescriptionHelpFormatter
        kwargs["formatter_class"] = _RawDescriptionHelp if raw else kwargs.get("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: error: {message} (see '{self.prog} --help')")


class _UsageError(Exception):
    pass


class _VersionAction(argparse.Action):
    """``--version``, looking the version up only when asked (importlib.metadata is slow to load)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str = "show program's version number and exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from . import __version__

        print(f"{parser.prog} {__version__}")
        parser.exit()


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The ``pal-opt`` argument parser."""
    from .options import Binning

    binning_modes = [b.value for b in Binning]

    p = _Parser(
        prog=PROG,
        description="Variability- and locality-aware placement of ML training jobs on GPU clusters.",
    )
    p.add_argument("--version", action=_VersionAction)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    _add_generate(sub, binning_modes)
    isub = _add_import(sub, binning_modes)

    # solve
    s = sub.add_parser("solve", help="place one round", description="Place one round and print a summary.",
                       epilog=methods_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("instance", type=input_file, metavar="INSTANCE.json",
                   help="the round: an instance file (the generate and import commands write one)")
    add_method_arguments(s, seed_help="seed for the random policy (default 0)")
    s.add_argument(
        "--jobs", type=job_ids, default=None, metavar="ID,ID,...",
        help="ilp, ilp-partitioned: place exactly these jobs (comma-separated ids) instead of an admission rule",
    )
    s.add_argument(
        "--jobs-from", type=input_file, default=None, metavar="PLACEMENT.json",
        help="ilp, ilp-partitioned: place exactly the jobs this placement of the round placed (e.g. solve --method pal "
             "--out's) and compare it with the answer: a greedy's gap to the optimum of its own job set",
    )
    s.add_argument("--canonical", action="store_true",
                   help="ilp, ilp-preempt: the same placement whichever backend proves the round optimal (ties "
                        "broken canonically), at the same cost")
    s.add_argument("--ignore-types", action="store_true",
                   help="greedy methods: place as if every GPU were of one type (the comparator that ignores types)")
    s.add_argument("--cost", type=cost_param, action="append", default=None, metavar="TERM.PARAM=VALUE",
                   help="set a cost term's parameter for this solve (repeatable, each parameter once), "
                        "e.g. migration.per_gpu=0.5")
    add_restart_arguments(s, from_instance=True)
    add_output_arguments(s)
    s.add_argument("--write-lp", default=None, type=output_file, metavar="PROGRAM.lp",
                   help="ilp: also write the round program it builds for the admitted jobs (CPLEX LP, pal-opt's "
                        "deterministic writer, as formulations/golden/; with --out, all or none; alone on an infeasible "
                        "round); not for rounds with pipeline jobs (the stage program)")
    s.set_defaults(func=_cmd_solve)

    _add_repair(sub, binning_modes)

    # check
    c = sub.add_parser("check", help="verify a placement", description="Verify a placement against a round.",
                       epilog="Exit status: 0 valid; 1 invalid (each violation on a line of its own); 2 bad input "
                              "(a file that cannot be read, or is not an instance or a placement file).  The round "
                              "parameters the placement was solved with (solve or repair given --restart-cost, "
                              "--round or --cost) are applied first.")
    c.add_argument("instance", type=input_file, metavar="INSTANCE.json", help="the round")
    c.add_argument("placement", type=input_file, metavar="PLACEMENT.json",
                   help="the placement to verify (what solve --out or repair --out wrote)")
    c.set_defaults(func=_cmd_check)

    _add_topology(isub, sub)
    _add_simulate(sub)
    _add_simulate_sia(sub)
    _add_compare(sub)
    _add_partition(sub)
    return p


def _add_partition(sub: Any) -> None:
    """Register ``pal-opt partition`` (PipeDream's partitioner, :mod:`pal_opt.pipeline.cli`)."""
    from .pipeline.cli import add_parser as add_partition

    add_partition(sub)


def _partition_parser() -> argparse.ArgumentParser:
    """A parser with only ``partition``: it skips the placement imports, which cost more than a
    whole partitioning run."""
    p = _Parser(prog=PROG)
    _add_partition(p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser))
    return p


def _add_topology(isub: Any, sub: Any) -> None:
    """Register ``import slurm|k8s|graphml`` and ``export`` (:mod:`pal_opt.topology.cli`)."""
    from .topology.cli import add_export_parser, add_import_parsers

    add_import_parsers(isub)
    add_export_parser(sub)


def _add_generate(sub: Any, binning_modes: list[str]) -> None:
    g = sub.add_parser("generate", help="write a synthetic round", description="Write a synthetic round.")
    g.add_argument("--nodes", type=pos_int, help="number of servers (or --cluster)")
    g.add_argument("--gpus-per-node", type=pos_int, help="GPUs per server (with --nodes)")
    g.add_argument("--cluster", metavar="TYPE:SERVERSxGPUS,...",
                   help="a cluster of several GPU types instead of --nodes/--gpus-per-node, e.g. aws:6x4,rtx:3x8")
    g.add_argument("--guaranteed-fraction", type=finite, default=0.0, metavar="F",
                   help="with --cluster: probability that a job is guaranteed on one GPU type (default 0)")
    g.add_argument("--profiles", type=input_file, metavar="DIR",
                   help="with --cluster: each class's relative throughput per GPU type from the Sia profiles in DIR "
                        "(classA..D as imagenet, bert, cifar10, ncf); default 1.0 everywhere")
    g.add_argument("--jobs", type=nonneg_int, required=True, help="queue length")
    g.add_argument("--racks", type=nonneg_int, default=0, help="racks (0: flat cluster; default 0)")
    g.add_argument("--seed", type=nonneg_int, default=0, help="random seed (default 0)")
    g.add_argument("--locality-penalty", type=penalty, default=1.7, metavar="L", help="PAL's λ (default 1.7)")
    g.add_argument("--busy-fraction", type=finite, default=0.0, metavar="F", help="share of GPUs busy (default 0)")
    g.add_argument("--failed-fraction", type=finite, default=0.0, metavar="F", help="share of GPUs failed (default 0)")
    g.add_argument(
        "--running-fraction", type=finite, default=0.0, metavar="F",
        help="probability that a queued job is already running (default 0)",
    )
    add_restart_arguments(g)
    g.add_argument("--binning", choices=binning_modes, default="pal-artifact", help="binning mode stored in the round (default pal-artifact)")
    g.add_argument(
        "--measurements", type=input_file, metavar="DIR",
        help="draw factors from PAL's {resnet,bert,pagerank}-longhorn-agg.csv in DIR instead of the synthetic model",
    )
    g.add_argument("--name", type=nonempty, help="round name (default: synthetic-NODESxGPUS-jJOBS-sSEED)")
    g.add_argument("-o", "--out", "--output", dest="output", type=output_file, required=True, metavar="INSTANCE.json",
                   help="file to write")
    g.set_defaults(func=_cmd_generate)



_REPAIR_EPILOG = """\
A job of PLACEMENT.json is displaced when one of its GPUs failed (or was already failed in the
round); the others are unaffected.  The displaced jobs are re-placed, in queue order while they
fit the GPUs left, at least cost; a displaced job that does not fit is left out and listed as
unplaceable with the reason.  Queued jobs that PLACEMENT.json did not place are not started: a
repair only mends the placement in force (the next round's solve starts new jobs).

By default every unaffected job keeps exactly its GPUs, and the answer is proven optimal among
the placements that keep them (status, bound and gap as solve reports them).  With
--allow-migration COST an unaffected job may move too, at COST per GPU moved (round-cost units,
like the round's restart cost, which still applies); it moves only where the round's cost falls
by more than that, so the total cost is never above the answer that keeps every job.

The output (--out) is a placement file of every job kept or re-placed, with
"info.repair" naming the failed GPUs and the placement in force it repaired; check it
with: pal-opt check INSTANCE.json OUT.json.  It must be another file than
PLACEMENT.json (pal-opt never writes over an input): write it beside and move it.
"""


def _add_repair(sub: Any, binning_modes: list[str]) -> None:
    r = sub.add_parser("repair", help="re-place the jobs that lost a GPU, keeping the rest in place",
                       description="Re-place the jobs of a placement in force that lost a GPU to failure or "
                                   "draining, keeping every other job where it is.",
                       epilog=_REPAIR_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("instance", type=input_file, metavar="INSTANCE.json", help="the round")
    r.add_argument("placement", type=input_file, metavar="PLACEMENT.json", help="the placement in force (what solve --out wrote)")
    r.add_argument("--failed", type=gpu_ids, required=True, metavar="GPU_ID[,GPU_ID...]",
                   help="GPUs that failed or are drained (the round's GPU ids, comma-separated)")
    r.add_argument("--allow-migration", type=positive_float, default=None, metavar="COST",
                   help="let unaffected jobs move, at COST per GPU moved (default: they keep their GPUs)")
    r.add_argument("--binning", choices=binning_modes, default=None, help="override the round's binning mode")
    add_exact_arguments(r, admission=False, parts=False)
    add_output_arguments(r, what="the repaired placement")
    r.set_defaults(func=_cmd_repair)


def _add_import(sub: Any, binning_modes: list[str]) -> Any:
    imp = sub.add_parser("import", help="convert another format to an instance file",
                         description="Convert another format to an instance file.")
    isub = imp.add_subparsers(dest="format", metavar="FORMAT", parser_class=_Parser)
    isub.required = True
    b = isub.add_parser("blox", help="Blox gpu_df CSV (+ job queue CSV)",
                        description="Build a round from Blox's GPU table and a job queue CSV (without --jobs: the "
                                    "cluster alone, an empty queue).")
    b.add_argument("--gpus", type=input_file, required=True, metavar="GPU_DF.csv", help="Blox gpu_df CSV")
    b.add_argument("--jobs", type=input_file, default=None, metavar="JOBS.csv",
                   help="job queue CSV (job_id, num_gpus, perfclass or model); without it, the cluster alone "
                        "(an empty queue: every GPU in use is busy)")
    b.add_argument("--locality-penalty", type=penalty, default=1.7, metavar="L", help="PAL's λ (default 1.7)")
    b.add_argument("--binning", choices=binning_modes, default="pal-artifact", help="binning mode stored in the round (default pal-artifact)")
    add_restart_arguments(b)
    b.add_argument("--name", type=nonempty, help="round name (default: the GPU table's file name)")
    b.add_argument("-o", "--out", "--output", dest="output", type=output_file, required=True, metavar="INSTANCE.json",
                   help="file to write")
    b.set_defaults(func=_cmd_import_blox)
    return isub


def _add_simulate(sub: Any) -> None:
    """Register ``pal-opt simulate`` if :mod:`pal_opt.simulate.cli` provides ``add_parser``."""
    try:
        from .simulate.cli import add_parser  # type: ignore[import-not-found,unused-ignore]
    except ModuleNotFoundError as exc:
        if exc.name in ("pal_opt.simulate", "pal_opt.simulate.cli"):
            return
        _add_unavailable(sub, "simulate", exc)
        return
    except ImportError as exc:
        _add_unavailable(sub, "simulate", exc)
        return
    add_parser(sub)


def _add_simulate_sia(sub: Any) -> None:
    """Register ``pal-opt simulate-sia`` (:mod:`pal_opt.hetero.cli`)."""
    from .hetero.cli import add_parser

    add_parser(sub)


def _add_compare(sub: Any) -> None:
    """Register ``pal-opt compare`` (:mod:`pal_opt.simulate.cli`): simulation results side by side."""
    try:
        from .simulate.cli import add_compare_parser
    except ImportError as exc:
        _add_unavailable(sub, "compare", exc)
        return
    add_compare_parser(sub)


def _add_unavailable(sub: Any, name: str, exc: BaseException) -> None:
    q = sub.add_parser(name, help=f"(unavailable: {exc})", add_help=False)
    q.add_argument("rest", nargs=argparse.REMAINDER)

    def run(args: argparse.Namespace) -> int:
        raise OptionError(f"'{name}' is unavailable: {exc}")

    q.set_defaults(func=run)


# --------------------------------------------------------------------------- commands
def _describe(inst: Any) -> str:
    cl = inst.cluster
    st = cl.state
    free, busy, failed = (int((st == k).sum()) for k in (0, 1, 2))
    racks = f", {len(cl.rack_ids)} rack{'s' * (len(cl.rack_ids) != 1)}" if cl.racked else ""
    kinds = ""
    if cl.typed:
        kinds = " (" + ", ".join(f"{t}: {n}" for t, n in zip(cl.type_names, cl.type_counts.tolist(), strict=True)) + ")"
    demand = [j.demand for j in inst.jobs]
    running = sum(1 for j in inst.jobs if j.placement is not None)
    jobs = f"{len(demand)} job{'s' * (len(demand) != 1)}"
    if demand:
        span = f"{min(demand)}" if min(demand) == max(demand) else f"{min(demand)}-{max(demand)}"  # not "2-2"
        jobs += f" (demand {span}, total {sum(demand)}; {running} running)"
    return (
        f"{cl.num_gpus} GPU{'s' * (cl.num_gpus != 1)}{kinds} on {cl.num_servers} server{'s' * (cl.num_servers != 1)}{racks} "
        f"({free} free, {busy} busy, {failed} failed), {jobs}"
    )


#: The longest queue ``pal-opt generate`` writes: a generated job is about 4 JSON values, and the
#: readers take 2,000,000 (``docs/limits.md``), which 500,000 jobs reach.
MAX_GENERATED_JOBS = 400_000


#: generate_instance's arguments and the flags of ``pal-opt generate`` that give them.
_GENERATE_FLAGS = {"restart_cost": "--restart-cost", "round_length": "--round", "busy_fraction": "--busy-fraction",
                   "failed_fraction": "--failed-fraction", "running_fraction": "--running-fraction",
                   "locality_penalty": "--locality-penalty", "guaranteed_fraction": "--guaranteed-fraction",
                   "racks": "--racks"}


def _cmd_generate(args: argparse.Namespace) -> int:
    """``pal-opt generate``; a bad value is named by its flag (the generator names its argument)."""
    try:
        return _generate(args)
    except OptionError as exc:
        import re

        text = str(exc)
        named = re.sub(r"\b(" + "|".join(_GENERATE_FLAGS) + r")\b", lambda m: _GENERATE_FLAGS[m[1]], text)
        if named != text:
            raise OptionError(named) from None
        raise


def _generate(args: argparse.Namespace) -> int:
    from . import __version__
    from .generate import generate_instance, generate_typed_instance
    from .io import save_instance

    check_outputs({"--out": args.output}, _directory_inputs(args))
    if args.jobs > MAX_GENERATED_JOBS:  # 10,000,000 ran for minutes, to a file no reader would take
        raise OptionError(f"--jobs: at most {MAX_GENERATED_JOBS:,} (its instance file would exceed the readers' "
                          f"2,000,000-value limit, docs/limits.md), got {args.jobs:,}")
    meas = None
    if args.measurements:
        from .io.measurements import longhorn_files

        meas = longhorn_files(args.measurements)
    common = dict(racks=args.racks, seed=args.seed, locality_penalty=args.locality_penalty,
                  busy_fraction=args.busy_fraction, failed_fraction=args.failed_fraction,
                  running_fraction=args.running_fraction, binning=args.binning, restart_cost=args.restart_cost,
                  round_length=args.round, measurements=meas, name=args.name)
    layout: tuple[str, ...] = ("nodes", "gpus_per_node")
    if args.cluster is not None:
        if args.nodes is not None or args.gpus_per_node is not None:
            raise OptionError("give --cluster or --nodes/--gpus-per-node, not both")
        inst = generate_typed_instance(args.cluster, args.jobs, guaranteed_fraction=args.guaranteed_fraction,
                                       throughput=_profile_throughput(args), **common)  # type: ignore[arg-type]
        layout = ("cluster", "guaranteed_fraction")
    elif args.nodes is None or args.gpus_per_node is None:
        raise OptionError("give --nodes and --gpus-per-node, or --cluster")
    elif args.guaranteed_fraction or args.profiles:
        raise OptionError("--guaranteed-fraction and --profiles need a cluster of several GPU types (--cluster)")
    else:
        inst = generate_instance(args.nodes, args.gpus_per_node, args.jobs, **common)  # type: ignore[arg-type]
    settings = {
        k: getattr(args, k)
        for k in (*layout, "jobs", "racks", "seed", "locality_penalty", "busy_fraction",
                  "failed_fraction", "running_fraction")
    }
    if args.measurements:
        settings["variability"] = "measurements"
    meta = {"generator": f"pal-opt {__version__} generate", "settings": settings}
    what = "--cluster" if args.cluster is not None else "--nodes x --gpus-per-node"
    save_instance(inst, args.output, meta=meta, readable_from=f"{what} and --jobs")
    print(f"wrote {args.output}: {inst.name}: {_describe(inst)}")
    return 0


def _directory_inputs(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """The files ``generate`` reads from ``--measurements DIR`` and ``--profiles DIR``."""
    from pathlib import Path

    from .io import longhorn_paths

    files: list[tuple[str, Any]] = []
    if args.measurements:
        files += [(f"--measurements {args.measurements}", p) for p in longhorn_paths(args.measurements).values()]
    if args.profiles and os.path.isdir(args.profiles):
        files += [(f"--profiles {args.profiles}", p) for p in sorted(Path(args.profiles).glob("*/*.csv"))]
    return files


def _profile_throughput(args: argparse.Namespace) -> dict[str, dict[str, float]] | None:
    """``generate --profiles``: the throughput table of PAL's classes on the ``--cluster`` types."""
    if not args.profiles:
        return None
    from .generate import SIA_APP_OF_CLASS
    from .gputypes import parse_cluster_spec
    from .hetero import load_applications, throughput_table

    apps = load_applications(args.profiles, sorted(set(SIA_APP_OF_CLASS.values())))
    return throughput_table(apps, [t for t, _, _ in parse_cluster_spec(args.cluster)], SIA_APP_OF_CLASS)


def _cmd_import_blox(args: argparse.Namespace) -> int:
    from .io import load_blox, save_instance

    check_outputs({"--out": args.output},
                  [("--gpus", args.gpus)] + ([("--jobs", args.jobs)] if args.jobs else []))
    inst = load_blox(
        args.gpus,
        args.jobs,
        locality_penalty=args.locality_penalty,
        binning=args.binning,
        restart_cost=args.restart_cost,
        round_length=args.round,
        name=args.name,
    )
    save_instance(inst, args.output, meta={"imported_from": {"gpus": args.gpus, "jobs": args.jobs}},
                  readable_from=args.gpus)
    print(f"wrote {args.output}: {inst.name}: {_describe(inst)}")
    return 0


def _cmd_solve(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .cliprogress import live_line
    from .errors import SolveInterrupted
    from .io import load_instance
    from .result import Status
    from .solve import solve

    check_outputs({"--out": args.out, "--plot": args.plot, "--write-lp": args.write_lp},
                  [("INSTANCE.json", args.instance), ("--jobs-from", args.jobs_from)])
    _check_plot(args)
    args.against = _jobs_from(args)
    options = solve_options(args)
    if options.time_limit is not None:  # the limit bounds the whole command, counted from its start
        from .deadline import process_started

        options = replace(options, deadline=process_started() + options.time_limit)
        _EXIT_AT_ONCE.append(True)
    inst = with_restart(with_costs(load_instance(args.instance), args.cost), args.restart_cost, args.round)
    _check_jobs_from(args, inst)
    if options.jobs:
        options = replace(options, jobs=resolve_job_ids(args.jobs, inst.job_by_id, source=args.instance))
    _warn_unoptimised_charges(args)
    args.extra_outputs = _program_lp(args, inst, options)
    try:
        with live_line("solving", args.method, enabled=not args.quiet):  # erased before anything is printed
            result = solve(inst, method=args.method, options=options)
    except SolveInterrupted as exc:
        return _interrupted(args, inst, exc, _report)
    if result.status == Status.INFEASIBLE:
        return _infeasible_round(args, result)
    if args.no_program is not None:  # never met: a round no program is built for is infeasible
        raise args.no_program
    _report(args, inst, _record_overrides(args, result))
    return 0


def _infeasible_round(args: argparse.Namespace, result: Any) -> int:
    """An infeasible round: one error line saying why and exit 1, no ``--out`` (no placement);
    the ``--write-lp`` program, built before the solve, written all the same (atomically, as with
    ``--out`` on success) and a line saying where, as it is the program a user takes to another
    solver to see why; a line saying it was not written when the given jobs fail before any
    program is built (:func:`_program_lp`)."""
    from .io.atomic import atomic_write_files

    ids = [str(j) for j in args.jobs or ()]
    shown = ", ".join(ids if len(ids) <= 8 else [*ids[:6], "..."])
    named = f"jobs {shown} ({len(ids)} jobs): " if ids else ""
    _error(f"{PROG}: error: infeasible round: {named}{result.message or 'no placement exists'}")
    if args.extra_outputs:
        atomic_write_files(args.extra_outputs)
        _error(f"{PROG}: wrote the infeasible round program to {', '.join(map(os.fspath, args.extra_outputs))}")
    elif args.write_lp is not None:
        _error(f"{PROG}: nothing written to {os.fspath(args.write_lp)}: no round program is built for given jobs "
               "that cannot fit the free GPUs (of their types)")
    return 1


def _jobs_from(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--jobs-from``: the placement file read, its placed jobs set as ``args.jobs``; None without it
    (``--jobs`` or ``--jobs-from`` beside ``--admission`` refused in the flags' words)."""
    from .methods import get_method

    if args.jobs is not None and args.jobs_from is not None:
        raise OptionError("give --jobs or --jobs-from, not both")
    method = get_method(args.method)
    takes = method.exact and "jobs" in method.options
    if args.jobs_from is not None and not takes:
        raise OptionError(f"--jobs-from applies to the exact methods that take --jobs, not to {args.method!r}")
    flag = "--jobs-from" if args.jobs_from is not None else "--jobs" if args.jobs is not None else None
    if flag and takes and getattr(args, "admission", None) is not None:  # the flags, not admission= and jobs=
        raise OptionError(f"give --admission or {flag}, not both: {flag} places exactly its jobs, with no "
                          "admission rule")
    if args.jobs_from is None:
        return None
    from .io import load_placement_file

    doc = load_placement_file(args.jobs_from)
    args.jobs = list(doc["placements"])
    return doc


def _check_jobs_from(args: argparse.Namespace, inst: Any) -> None:
    """An :class:`InstanceError` naming the ``--jobs-from`` file unless it places at least one job
    and is a valid placement of this round (:func:`pal_opt.check.violations`): a placement of
    another round, priced here, gave a gap that meant nothing."""
    doc = args.against
    if doc is None:
        return
    from .check import check

    source = os.fspath(args.jobs_from)
    if not doc["placements"]:
        raise InstanceError("places no job: nothing to place or to compare with (--jobs-from takes the placement "
                            "of a greedy, e.g. solve --method pal --out's)", source=source, path="placements")
    given = {"placements": doc["placements"], "admission": "given"}
    if isinstance(doc.get("stages"), dict):
        given["stages"] = doc["stages"]
    problems = check(inst, given)
    if problems:
        made_for = _info(doc).get("instance")
        other = (f"; it was solved for {made_for}" if isinstance(made_for, str)
                 and os.path.basename(made_for) != os.path.basename(os.fspath(args.instance)) else "")
        more = f" (and {counted(len(problems) - 1, 'more violation')}: pal-opt check lists them)" if len(problems) > 1 else ""
        raise InstanceError(f"not a placement of {os.fspath(args.instance)}: {problems[0]}{more}{other}", source=source)


def _against_line(args: argparse.Namespace, inst: Any, result: Any) -> str:
    """The ``--jobs-from`` placement priced on this round (its binned factors) against the answer."""
    from .binning import binned_factors
    from .cost import evaluate
    from .inforce import in_force_placement

    doc = args.against  # checked against the round (_check_jobs_from); a pipeline's stages as the file gives them
    theirs = evaluate(inst, in_force_placement(inst, doc, source=os.fspath(args.jobs_from)),
                      binned_factors(inst.cluster, result.info["binning"])).geomean
    ours = result.geomean_slowdown
    who = f"{os.fspath(args.jobs_from)} ({doc.get('method') or 'placement'})"
    text = f"{who}: slowdown {theirs:.4f}, {theirs / ours - 1:+.2%} against this answer"
    if result.gap is not None:  # against the proven bound: at most that above the optimum
        text += f", {(theirs / ours) * (1 + result.gap) - 1:+.2%} against the proven bound"
    return text


def _program_lp(args: argparse.Namespace, inst: Any, options: Any) -> dict[str, bytes]:
    """``{--write-lp file: the round program as CPLEX LP}`` (:func:`pal_opt.ilp.round_program`),
    built before the solve and written with ``--out``, or alone on an infeasible round; empty
    without the flag, and when the jobs given need more GPUs (of their types) than are free, whose
    round no program is built for (``args.no_program`` holds why; the solve says it)."""
    args.no_program = None
    if args.write_lp is None:
        return {}
    if args.method != "ilp":
        raise OptionError(f"--write-lp writes the program of --method ilp, not of {args.method!r}")
    from .ilp import round_program
    from .ilp.lpwriter import lp_text

    try:
        form, label = round_program(inst, binning=options.binning, admission=options.admission, jobs=options.jobs)
    except InfeasibleRoundError as exc:
        args.no_program = exc
        return {}
    jobs = [inst.jobs[i].id for i in form.admitted]
    shown = ", ".join(map(str, jobs[:20])) + (", ..." if len(jobs) > 20 else "")
    comment = (f"round {inst.name or args.instance} ({os.fspath(args.instance)}); admission {label}, binning "
               f"{options.binning or inst.params.binning}; {len(jobs)} admitted jobs: {shown}")
    return {args.write_lp: lp_text(form, comment=comment).encode("utf-8")}


def _record_overrides(args: argparse.Namespace, result: Any) -> Any:
    """``result`` with the round parameters the flags changed (``--restart-cost``, ``--round``,
    ``--cost``) in ``info["round_overrides"]``: the objective is priced with them, and
    ``pal-opt check`` applies them to the instance file, which does not hold them."""
    import copy

    over: dict[str, Any] = copy.deepcopy(getattr(args, "inherited_overrides", None) or {})  # repair's in force
    over.update({k: v for k, v in (("restart_cost", getattr(args, "restart_cost", None)),
                                   ("round_length", getattr(args, "round", None))) if v is not None})
    for term, param, value in getattr(args, "cost", None) or ():
        over.setdefault("costs", {}).setdefault(term, {})[param] = value
    if over:
        result.info["round_overrides"] = over
    if getattr(args, "instance", None) is not None:  # which round it answers, for check's messages
        result.info.setdefault("instance", os.fspath(args.instance))
    return result


def _warn_unoptimised_charges(args: argparse.Namespace) -> None:
    """A greedy policy places as its authors' code does and does not weigh restart or cost-term
    charges: given on its command line, they only price its answer, which a user can take for
    ignored flags (the placement is the same), so say so."""
    from .methods import get_method

    given = [f for f, v in (("--restart-cost", args.restart_cost), ("--cost", args.cost)) if v]
    if given and not get_method(args.method).exact:
        logging.getLogger("pal_opt.cli").warning(
            "%s %s: %s does not weigh these charges when it places (the exact methods do); they only price "
            "its placement", " and ".join(given), "is given" if len(given) == 1 else "are given", args.method)


def _interrupted(args: argparse.Namespace, inst: Any, exc: Any, report: Any) -> int:
    """A Ctrl-C that stopped the solver, which handed back the best placement it had: keep it
    (``report(args, inst, result)`` prints it and writes ``--out``), exit 130."""
    from .result import PlacementResult

    if not isinstance(exc.result, PlacementResult) or not exc.result.placements:
        raise exc
    try:
        report(args, inst, _record_overrides(args, exc.result))
    except OSError as err:  # e.g. --out in a directory that does not exist
        where = f"{err.filename}: " if getattr(err, "filename", None) else ""
        _error(f"{PROG}: interrupted; the best placement found so far could not be written: "
               f"{where}{err.strerror or err}")
        return 130
    where = f" (written to {args.out})" if args.out else ""
    _error(f"{PROG}: interrupted: kept the best placement found so far{where}")
    return 130


def _backend_text(result: Any) -> str:
    return f", backend {result.backend} {result.backend_version or ''}".rstrip() if result.backend else ""


def _report(args: argparse.Namespace, inst: Any, result: Any) -> None:
    """Write ``result`` to ``--out`` (atomically) and print the summary."""
    mode = result.info["binning"]  # solve() records the binning it used
    lines = [
        ("round", f"{inst.name or args.instance}: {_describe(inst)}"),
        ("method", f"{result.method} (admission {result.admission}, binning {mode}){_backend_text(result)}"),
        ("status", status_line(result)),
        *((("note", result.message),) if result.message and result.status.value != "infeasible" else ()),
        ("placed", f"{result.jobs_placed} of {len(inst.jobs)} jobs on {result.gpus_used} of {inst.free_gpus} "
                   "free GPUs"),
        *_cost_lines(result, inst),
    ]
    if result.jobs_to_terminate:
        lines.append(("moved", f"{len(result.jobs_to_terminate)} running jobs lose or change GPUs"))
    preempted = _preempted_line(inst, result)
    if preempted:
        lines.append(("preempted", preempted))
    blocked = _blocking_line(inst, result)
    if blocked:
        lines.append(("blocked", blocked))
    if getattr(args, "against", None) is not None and result.placements:
        lines.append(("against", _against_line(args, inst, result)))
    _finish_report(args, result, lines, inst)


def _preempted_line(inst: Any, result: Any) -> str:
    """The running jobs left unplaced, and what says so: the queue rule under ``prefix``,
    ``backfill`` and the greedy orders (their preemption charge is then a constant of the round,
    often most of the objective), the program itself under ``preempt``."""
    left = [j for j in inst.jobs if j.running and j.id not in result.placements]
    if not left:
        return ""
    charge = (result.info.get("cost_terms") or {}).get("preemption")
    text = (f"{counted(len(left), 'running job')} ({counted(sum(j.demand for j in left), 'GPU')}) left unplaced"
            + (f", charged {charge:.6g}" if charge else ""))
    if result.admission == "preempt":  # ilp-preempt's program, its greedy start on a fallback, or preempt-greedy
        who = result.method
        if result.backend is not None and result.status.value == "fallback":
            who += "'s greedy start"
        return text + f": {who} chose them"
    if result.admission == "given":
        return text + ": they are not among the jobs given (--jobs)"
    return (text + f": the {result.admission} queue rule leaves them out, so the charge is the same for every "
            "placement of this job set; --method ilp-preempt chooses which running jobs to stop")


def _blocking_line(inst: Any, result: Any) -> str:
    """Under prefix admission (and PAL's order, and the queue order of packed and random) a job
    that can never be placed stops the queue, as the PAL artifact does: say which, and how many
    jobs behind it wait for that reason alone."""
    if result.admission not in ("prefix", "pal-order", "queue-order") or not result.unplaceable:
        return ""
    first = next((k for k, j in enumerate(inst.jobs) if j.id in result.unplaceable), None)
    if first is None:
        return ""
    # admission stopped at it only if every job before it was admitted and a job behind it would
    # fit the GPUs those leave (else the cluster is simply full)
    left = inst.free_gpus - sum(j.demand for j in inst.jobs[:first])
    behind = [j for j in inst.jobs[first + 1:] if j.id not in result.placements and j.id not in result.unplaceable]
    if left <= 0 or not any(j.demand <= left for j in behind):
        return ""
    return (f"job {inst.jobs[first].id} can never be placed, and {result.admission} admission stops at it (as the PAL "
            f"artifact does): {counted(len(behind), 'job')} behind it wait; --admission backfill skips it")


def _cost_lines(result: Any, inst: Any) -> list[tuple[str, str]]:
    """The summary's slowdown, spanning, objective and bound lines.  The slowdown and the
    objective are on the binned factors the method placed by; with binning, the slowdown on the
    measured factors follows (comparing binning modes by the binned figure misleads), and the
    objective is split into its cost terms (those that are not 0)."""
    mode = result.info.get("binning")
    slowdown = f"{result.geomean_slowdown:.4f} geometric mean, GPU-weighted"
    if mode not in (None, "none") and result.placements:
        from .binning import binned_factors
        from .cost import evaluate

        measured = evaluate(inst, result.placements, binned_factors(inst.cluster, "none")).geomean
        slowdown += f", on the {mode}-binned factors ({measured:.4f} on the measured ones)"
    terms = [(k, v) for k, v in (result.info.get("cost_terms") or {}).items() if v != 0]
    split = " + ".join(f"{k} {v:.6g}" for k, v in terms).replace("+ -", "- ")
    lines = [
        ("slowdown", slowdown),
        ("spanning", f"{result.spanning} jobs span servers"),
        ("objective", f"{result.objective:.6f}  " + (f"= {split} " if split else "")
         + "(round cost: sum of demand x ln slowdown, plus restart, migration and preemption charges)"),
    ]
    if result.bound is not None:
        gap = f", gap {100 * result.gap:.3f}% (of the geometric-mean slowdown)" if result.gap is not None else ""
        lines.append(("bound", f"{result.bound:.6f}{gap}"))
    return lines


def jobs_table(inst: Any, result: Any, before: Any = None) -> str:
    """``--show-jobs``: a line per queued job, in queue order: its GPUs by server (``server:ids``),
    its slowdown on them (the binned factors it was placed by, times the locality penalty), and
    what the round does to it: ``starts``, ``keeps`` its GPUs, ``moves``, is ``preempted``,
    ``waits`` or is ``unplaceable``.  ``before`` (``{job id as text: GPU ids}``, a repair's
    placement in force) is what the jobs held; by default the round's running jobs."""
    from .binning import binned_factors
    from .cost import job_slowdown

    cl = inst.cluster
    factors = binned_factors(cl, result.info.get("binning") or inst.params.binning)
    placed = {str(k): v for k, v in result.placements.items()}
    moved = {str(j) for j in result.jobs_to_terminate}
    cannot = {str(j) for j in result.unplaceable}
    rows = [("job", "demand", "state", "slowdown", "GPUs by server")]
    for job in inst.jobs:
        gpus = placed.get(str(job.id))
        held = job.placement if before is None else before.get(str(job.id))
        if gpus is None:
            state = "unplaceable" if str(job.id) in cannot else "preempted" if held else "waits"
            rows.append((str(job.id), str(job.demand), state, "", ""))
            continue
        if not held:
            state = "starts"
        else:
            state = "moves" if str(job.id) in moved or sorted(held) != sorted(gpus) else "keeps"
        by_server: dict[Any, list[int]] = {}
        for g in gpus:
            by_server.setdefault(cl.server_ids[int(cl.server_of[cl.position[g]])], []).append(int(g))
        where = " ".join(f"{s}:{','.join(map(str, ids))}" for s, ids in by_server.items())
        rows.append((str(job.id), str(job.demand), state, f"{job_slowdown(inst, factors, job, tuple(gpus)):.4f}", where))
    widths = [max(len(r[k]) for r in rows) for k in range(4)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)), r[4]]).rstrip()
                     for r in rows)


def _check_plot(args: argparse.Namespace) -> None:
    """``--plot``: matplotlib and the file's format are checked before any work."""
    if args.plot is not None:
        check_plot_target(args.plot)


def _finish_report(args: argparse.Namespace, result: Any, lines: list[tuple[str, str]], inst: Any = None) -> None:
    """Add the unplaceable jobs and the times to ``lines``, write ``result`` to ``--out`` and its
    figure to ``--plot`` (atomically, all or none) and print the lines, aligned."""
    from .io.atomic import atomic_write_files

    outputs: dict[str, bytes] = {}
    if args.out:
        outputs[args.out] = (result.to_json() + "\n").encode("utf-8")
    outputs.update(getattr(args, "extra_outputs", None) or {})
    if getattr(args, "plot", None) and inst is not None:
        from .placement_figure import placement_figure

        outputs[args.plot] = placement_figure(inst, result, args.plot, failed=getattr(args, "failed", None) or ())
    for jid, why in result.unplaceable.items():
        lines.append(("unplaceable", f"job {jid}: {why}"))
    wall = f", {time.monotonic() - _command_started():.2f} s wall" if _STARTED else ""
    lines.append(("time", f"{result.solve_seconds:.3f} s solve, {result.build_seconds:.3f} s build{wall}"))
    if outputs:
        atomic_write_files(outputs)
        lines.append(("wrote", ", ".join(outputs)))
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        print(f"{k:<{width}}  {v}")
    if getattr(args, "show_jobs", False) and inst is not None:
        print()
        print(jobs_table(inst, result, getattr(args, "before", None)))


def _cmd_repair(args: argparse.Namespace) -> int:
    from .cliprogress import live_line
    from .errors import SolveInterrupted
    from .inforce import in_force_placement
    from .io import load_instance, load_placement_file
    from .repair import repair

    # the placement in force is an input too: a repair is written beside it, never over it
    check_outputs({"--out": args.out, "--plot": args.plot},
                  [("INSTANCE.json", args.instance), ("PLACEMENT.json", args.placement)])
    _check_plot(args)
    options = exact_options(args)
    inst = load_instance(args.instance)
    check_gpu_ids(args.failed, inst.cluster.position, flag="--failed", source=args.instance)
    doc = load_placement_file(args.placement)
    # the round the placement in force was solved on (its --restart-cost, --round, --cost)
    inst, _ = _apply_recorded_overrides(inst, doc, args.placement)
    # solved on those parameters and priced with them: recorded again, for check
    args.inherited_overrides = _info(doc).get("round_overrides")
    in_force = in_force_placement(inst, doc, source=args.placement)
    args.before = {str(k): tuple(v) for k, v in doc.get("placements", {}).items()}  # for --show-jobs
    try:
        with live_line("repairing", "repair", enabled=not args.quiet):
            result = repair(inst, in_force, args.failed, allow_migration=args.allow_migration, options=options)
    except SolveInterrupted as exc:
        return _interrupted(args, inst, exc, _report_repair)
    _report_repair(args, inst, _record_overrides(args, result))
    return 0


def _report_repair(args: argparse.Namespace, inst: Any, result: Any) -> None:
    """Write a repair's ``result`` to ``--out`` (atomically) and print its summary."""
    rep = result.info["repair"]
    failed = rep["failed"]
    servers = {inst.cluster.server_of[p] for p in inst.cluster.positions(failed).tolist()}
    shown = ", ".join(str(g) for g in failed[:8]) + (", ..." if len(failed) > 8 else "")
    price = rep["migration_per_gpu"]
    how = "unaffected jobs kept in place" if price is None else f"unaffected jobs may move at {price:g} per GPU"
    displaced, replaced = rep["displaced"], rep["replaced"]
    lines = [
        ("round", f"{inst.name or args.instance}: {_describe(inst)}"),
        ("failed", f"{counted(len(failed), 'GPU')} on {counted(len(servers), 'server')}: {shown}"),
        ("method", f"repair, {how} (binning {result.info['binning']}){_backend_text(result)}"),
        ("status", status_line(result)),
        *((("note", result.message),) if result.message else ()),
        ("kept", f"{counted(rep['kept'], 'unaffected job')} on their GPUs"),
        ("displaced", f"{counted(len(displaced), 'job')} lost a GPU: {len(replaced)} re-placed, "
                      f"{len(displaced) - len(replaced)} left out"),
        *((("migrated", f"{counted(len(rep['migrated']), 'unaffected job')} moved"),) if price is not None else ()),
        ("placed", f"{counted(result.jobs_placed, 'job')} on {counted(result.gpus_used, 'GPU')}"),
        *_cost_lines(result, inst),
    ]
    _finish_report(args, result, lines, inst)


def status_line(result: Any) -> str:
    """What happened, plainly: ``optimal``; ``feasible, gap 0.31%``; ``time limit: greedy answer,
    bound 1.2% below``; ``feasible (greedy)``; ``infeasible: ...``.

    >>> from pal_opt.result import PlacementResult, Status
    >>> r = PlacementResult({}, "ilp", Status.FEASIBLE, 1.0, 1.0, 8, 0.1, "prefix", bound=0.9, gap=0.0031)
    >>> status_line(r)
    'feasible, gap 0.31%'
    """
    from .result import Status

    status = result.status
    gap = f"{100 * result.gap:.2f}%" if result.gap is not None else None
    if status == Status.OPTIMAL:
        return "optimal"
    if status == Status.INFEASIBLE:
        return f"infeasible: {result.message}" if result.message else "infeasible"
    if status == Status.FALLBACK:
        below = f", bound {gap} below" if gap is not None else ", no bound"
        cause = "interrupted" if result.info.get("interrupted") else "time limit"  # Ctrl-C, not the clock
        if not result.placements and result.message:  # no greedy answer held the given jobs
            return f"{cause}: nothing placed (see the note)"
        return f"{cause}: greedy answer{below}"
    if result.bound is None:
        return "feasible (greedy: no bound)" if result.backend is None else "feasible, no bound"
    return f"feasible, gap {gap}" if gap is not None else "feasible"


def _cmd_check(args: argparse.Namespace) -> int:
    from .check import check
    from .io import load_instance, load_placement_file

    inst = load_instance(args.instance)
    doc = load_placement_file(args.placement)
    inst, applied = _apply_recorded_overrides(inst, doc, args.placement)
    problems = check(inst, doc)
    n = len(doc.get("placements", {}))
    if problems:
        print(f"{args.placement}: INVALID ({counted(len(problems), 'violation')}){applied}")
        made_for = _info(doc).get("instance")
        if isinstance(made_for, str) and os.path.basename(made_for) != os.path.basename(os.fspath(args.instance)):
            print(f"  (it was solved for {made_for}, not {args.instance}: another round?)")
        for msg in problems:
            print(f"  {msg}")
        return 1
    print(f"{args.placement}: valid ({n} jobs placed, admission {doc.get('admission', 'given')}){applied}")
    return 0


def _apply_recorded_overrides(inst: Any, doc: Any, source: str) -> tuple[Any, str]:
    """The instance with the round parameters a placement was solved with (``info.round_overrides``,
    written by ``solve``/``repair`` given ``--restart-cost``, ``--round`` or ``--cost``), and the
    words that say so; an ill-formed record is bad input."""
    over = _info(doc).get("round_overrides")
    if over is None:
        return inst, ""
    path = "info.round_overrides"
    if not isinstance(over, dict) or set(over) - {"restart_cost", "round_length", "costs"}:
        raise InstanceError("expected an object of restart_cost, round_length and costs", source=source, path=path)
    costs = over.get("costs") or {}
    if not isinstance(costs, dict) or not all(isinstance(v, dict) for v in costs.values()):
        raise InstanceError("expected {term: {parameter: number}}", source=source, path=f"{path}.costs")
    flat = [(t, k, v) for t, params in costs.items() for k, v in params.items()]
    bad = next((k for k in ("restart_cost", "round_length") if k in over and not _is_number(over[k])), None)
    bad = bad or next((f"costs.{t}.{k}" for t, k, v in flat if not _is_number(v)), None)
    if bad is not None:  # null or text, which the summary below could not print
        raise InstanceError("must be a number", source=source, path=f"{path}.{bad}")
    if over.get("round_length", 1) <= 0:  # said before with_restart's check of the pair, which names flags
        raise InstanceError(f"must be positive, got {over['round_length']:g}", source=source,
                            path=f"{path}.round_length")
    try:
        inst = with_restart(with_costs(inst, flat), over.get("restart_cost"), over.get("round_length"))
        from .cost import validate_cost_params

        validate_cost_params(inst)
    except (OptionError, InstanceError, TypeError, ValueError) as exc:
        raise InstanceError(str(exc), source=source, path=path) from None
    shown = ", ".join(f"{k} {v:g}" for k, v in over.items() if k != "costs")
    shown = ", ".join(filter(None, [shown, *(f"costs.{t}.{k} {v:g}" for t, k, v in flat)]))
    return inst, f" (round parameters as solved: {shown})" if shown else ""


def _info(doc: Any) -> dict[str, Any]:
    """A placement file's ``info`` object ({} when it has none, or not an object)."""
    info = doc.get("info")
    return info if isinstance(info, dict) else {}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# --------------------------------------------------------------------------- entry point
def _one_line(text: str, limit: int = 1000) -> str:
    line = " ".join(str(text).split())
    if len(line) > limit:  # a hostile input can put megabytes into an error message
        line = f"{line[: limit // 2]}[...]{line[-limit // 2:]}"
    return line


def _error(message: str) -> None:
    print(_one_line(message), file=sys.stderr)


class _Signals:
    """While :func:`main` runs, remember whether SIGINT arrived.

    A library may turn the ``KeyboardInterrupt`` of a Ctrl-C into an error of its own (a C
    extension interrupted while it is imported reports ``ImportError``); the flag lets
    :func:`main` still exit 130 rather than report that error.  The handler is only installed
    from the main thread and only over Python's default; it is restored on exit.  SIGTERM keeps
    its default (immediate exit), which a Python handler would delay while a solver runs in C.

    Started with SIGINT ignored (``nohup``, ``trap '' INT``, a background job of a
    non-interactive shell), pal-opt keeps ignoring it, the Unix convention: Python then leaves
    ``SIG_IGN`` in place, no handler is installed over it, Ctrl-C changes nothing and the solve
    runs to its end or time limit.  The solvers follow: CP-SAT's own handler is off, HiGHS only
    sees the interrupts pal-opt passes on, and CBC, which installs a handler of its own, is then
    started in a process group of its own (see :mod:`pal_opt.ilp.backends.cbc`).
    """

    def __init__(self) -> None:
        self.interrupted = False
        self._saved: dict[int, object] = {}

    def _on_int(self, signum: int, frame: object) -> None:
        self.interrupted = True
        INTERRUPT_REQUESTED.set()  # for loops that check at their safe points, should this raise be swallowed
        raise KeyboardInterrupt

    def __enter__(self) -> _Signals:
        import threading

        INTERRUPT_REQUESTED.clear()

        if threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                self._saved[signal.SIGINT] = signal.signal(signal.SIGINT, self._on_int)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def _robust_stdout() -> None:
    """Never fail on printing a non-ASCII name to an ASCII or Latin-1 terminal."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # pragma: no cover - a closed or odd stream
                pass


class _WarningLine(logging.Handler):
    """The package's warnings (``logging``), one line each on stderr: ``pal-opt: warning: ...``."""

    def emit(self, record: logging.LogRecord) -> None:
        _error(f"{PROG}: warning: {record.getMessage()}")


def _log_warnings() -> None:
    logger = logging.getLogger("pal_opt")
    if not any(isinstance(h, _WarningLine) for h in logger.handlers):
        handler = _WarningLine(logging.WARNING)
        logger.addHandler(handler)


#: When :func:`main` was last called (:func:`time.monotonic`), for the summary's wall time.
_STARTED: list[float] = []


def _command_started() -> float:
    """When the command started: the process's start (Python's start-up and the imports count, as
    they do for ``--time-limit``) when :func:`main` was called soon after it, else that call (a
    program calling :func:`main` itself, long after it started)."""
    from .deadline import process_started

    began = process_started()
    return began if _STARTED[0] - began < 5.0 else _STARTED[0]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pal-opt`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    _STARTED[:] = [time.monotonic()]
    _robust_stdout()
    _log_warnings()
    with PipeSafe(), _Signals() as signals:
        try:
            code = _main(argv, signals)
        except KeyboardInterrupt:  # raised after _main's own handlers (e.g. while reporting)
            _error(f"{PROG}: interrupted")
            code = 130
        return _output_lost(code)


def _output_lost(code: int) -> int:
    """The exit status once standard output is flushed: a write to it that failed (a full disk,
    ``> /dev/full``; the command carried on, its files written) is one error line, and exit 2
    unless the command had failed already.  Standard error that cannot be written changes
    nothing: there is nowhere to say so."""
    out = sys.stdout
    if not isinstance(out, ReaderMayLeave):
        return code
    out.flush()
    if out.lost is None:
        return code
    named, out.lost = lost_output(out.lost), None
    _error(f"{PROG}: error: {named.filename}: {named.strerror}")
    return code or 2


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args``, with an unknown flag reported by the subcommand's parser (its
    ``--help`` lists the flags it takes), not by the top-level one."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        owner, at = parser, 0  # down the chosen subcommands (argparse has no public lookup of them)
        while True:
            subs = [a for a in owner._actions if isinstance(a, argparse._SubParsersAction)]
            chosen = getattr(args, subs[0].dest, None) if subs else None
            if chosen not in (subs[0].choices if subs else {}) or chosen not in argv[at:]:
                break
            after = argv.index(chosen, at)
            if any(x in argv[at:after] for x in extra):  # given before the subcommand: its parent's
                break
            owner, at = subs[0].choices[chosen], after + 1
        owner.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _main(argv: Sequence[str] | None, signals: _Signals) -> int:
    try:
        argv = list(argv) if argv is not None else sys.argv[1:]
        parser = _partition_parser() if argv[:1] == ["partition"] else build_parser()
        try:
            args = _parse(parser, argv)
        except _UsageError as exc:
            _error(str(exc))
            return 2
        except SystemExit as exc:  # --help / --version
            return int(exc.code or 0) if not isinstance(exc.code, str) else 2
        return int(args.func(args))
    except KeyboardInterrupt:
        _error(f"{PROG}: interrupted")
        return 130
    except Exception as exc:
        if signals.interrupted:  # an interrupt that a library turned into an error of its own
            _error(f"{PROG}: interrupted")
            return 130
        return _report_error(exc)


def _report_error(exc: Exception) -> int:
    """One line on stderr for an error, and the exit status: 2 for bad input or options and for
    files that cannot be read or written, 1 for other pal-opt errors; anything else is a bug and
    propagates."""
    if isinstance(exc, (InstanceError, OptionError, BackendUnavailableError)):
        _error(f"{PROG}: error: {exc}")
        return 2
    if isinstance(exc, PalOptError):
        _error(f"{PROG}: error: {type(exc).__name__}: {exc}")
        return 1
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        _error(f"{PROG}: error: {where}{exc.strerror or exc}")
        return 2
    raise exc


#: Not empty once ``solve`` runs under a time limit: the process then ends with ``os._exit``.
_EXIT_AT_ONCE: list[bool] = []


def _ignore_sigint() -> None:
    """The command's work is done and its output written: a Ctrl-C from now on changes nothing.
    Without this, one during the interpreter's teardown (after Python restored ``SIG_DFL``) killed
    the finished process by the signal, exit -2, as if it had been interrupted."""
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``pal-opt`` entry point: :func:`main`, then exit with its code.

    The process ends with ``os._exit`` (after flushing) when a solver still runs in its helper
    thread (a second Ctrl-C, or a deadline, gave up on it): a C++ solver still running while the
    interpreter shuts down can abort the process (``terminate called ...``, SIGABRT); and under
    ``solve --time-limit``, whose limit bounds the whole command: the interpreter's teardown
    takes 0.2-0.6 s once a solver library is loaded.  Output files are complete and closed by then,
    and HiGHS's server and children are ended first (``atexit`` does not run).
    """
    try:
        code = main(argv)
    except KeyboardInterrupt:  # a Ctrl-C just after main() put Python's handler back
        _error(f"{PROG}: interrupted")
        code = 130
    _ignore_sigint()
    base = sys.modules.get("pal_opt.ilp.backends.base")  # not imported: no solver ever ran
    if _EXIT_AT_ONCE or (base is not None and base.abandoned_solvers()):
        server = sys.modules.get("pal_opt.ilp.backends.highs_server")  # atexit will not run
        if server is not None:
            try:
                server.stop_server(ending=True)
            except Exception as exc:  # pragma: no cover - never stand between pal-opt and its exit
                _error(f"{PROG}: could not stop the HiGHS server ({exc})")
        parallel = sys.modules.get("pal_opt.parallel")  # nor multiprocessing's: a pool's directory
        if parallel is not None:
            parallel.remove_pool_directory()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # pragma: no cover - a closed stream
                pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
