"""``pal-opt simulate-sia``: a newTrace workload on a heterogeneous cluster under the Sia policy.

Argument parsing and printing only; :func:`pal_opt.hetero.simulate.simulate_sia` does the work.
``pal_opt/cli.py`` registers it with :func:`add_parser`; the handler raises
:class:`~pal_opt.errors.PalOptError` on bad input (the top level prints one line and exits 2) and
writes its output only after the simulation succeeded (atomically).

Example::

    pal-opt simulate-sia newtrace-7.csv --cluster aws:6x4,rtx:3x8,dgx-ext:2x8 \\
        --profiles sia-artifact/profiles --policy sia --round 60 --out newtrace-7.json
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import logging
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..cliargs import (
    SIMULATE_PLOT_HELP,
    check_outputs,
    check_plot_target,
    input_file,
    method_list,
    nonempty,
    nonneg_int,
    output_file,
    positive_float,
    simulated_hours,
    simulated_seconds,
)
from ..errors import InstanceError, MissingFileError, OptionError
from .methods import hetero_policy_names

log = logging.getLogger(__name__)

#: ``--profiles``'s help, shared by ``simulate`` and ``simulate-sia``.
PROFILES_HELP = ("Sia profiles: <app>/placements-<type>.csv, scalability-<type>.csv, validation-<B>.csv "
                 "(default: the Sia artifact's, ../shared/data/sia-artifact/profiles, when present)")

__all__ = ["add_parser", "run", "run_folded", "simulation_inputs", "ILP_MODES", "ilp_mode_config", "hetero_only_policies", "resolve_trace_format", "detect_trace_format", "TRACE_FORMATS"]

#: ``--trace-format`` choices: ``sia`` is newTrace (name,time,application,num_replicas,batch_size),
#: ``pal`` the Sia-Philly traces PAL replays (job_id,num_gpus,submit_time,duration,model).
TRACE_FORMATS = ("auto", "pal", "sia")
_SIA_COLUMNS = {"name", "time", "application", "num_replicas", "batch_size"}
_PAL_COLUMNS = {"job_id", "num_gpus", "submit_time", "duration", "model"}
DEFAULT_CLUSTER = "aws:6x4,rtx:3x8,dgx-ext:2x8"

#: ``--ilp-mode`` choices of ``--policy ilp`` (``formulations/sia_ilp_types.md``): ``anchored``
#: (the default) runs Sia's program and placer, then re-places jobs from Sia's GPUs (§3.1);
#: ``replaced`` re-places them from their current GPUs with a priced move (§3.2); ``levels`` gives
#: stage 1 a variability level per job (§2); ``joint`` is one program of configuration, level and
#: GPUs (§6; slower with variability).
ILP_MODES = ("anchored", "replaced", "levels", "joint")
ILP_MODE_HELP = ("with --policy ilp: anchored (default: Sia's choice and placement, then GPUs re-chosen only "
                 "where strictly better), replaced (re-placed from the jobs' current GPUs), levels (stage 1 "
                 "with variability levels) or joint (one program of type, count, level and GPUs; slow "
                 "with variability)")


def ilp_mode_config(mode: str | None, policy: str) -> dict[str, bool]:
    """:class:`~pal_opt.hetero.simulate.SimConfig` fields of an ``--ilp-mode`` choice.

    Raises
    ------
    OptionError
        A mode given with a policy other than ``ilp``, or an unknown mode.
    """
    if mode is None:
        return {}
    if policy != "ilp":
        raise OptionError(f"--ilp-mode applies to --policy ilp only, not --policy {policy}")
    if mode not in ILP_MODES:
        raise OptionError(f"--ilp-mode: unknown mode {mode!r}; choose one of {', '.join(ILP_MODES)}")
    return {"ilp_anchor": mode == "anchored", "ilp_levels": mode == "levels", "ilp_joint": mode == "joint"}


def add_parser(subparsers: Any, name: str = "simulate-sia") -> argparse.ArgumentParser:
    """Register the command on ``subparsers``; ``args.func(args)`` returns the exit status."""
    from ..options import BackendName
    from .methods import HETERO_POLICIES

    p = subparsers.add_parser(
        name,
        help="replay a newTrace workload on a heterogeneous cluster under the Sia policy",
        description=(
            "Replay a Sia newTrace workload (name,time,application,num_replicas,batch_size[,category]) on a "
            "cluster of several GPU types with the Sia policy (SOSP'23) as the authors' simulator runs it: "
            "60 s rounds, goodput-driven type/count/batch choice, restart delays, jobs done at their "
            "training targets."
        ),
    )
    p.add_argument("trace", type=input_file, help="workload CSV")
    p.add_argument("--trace-format", choices=TRACE_FORMATS, default="auto",
                   help="auto (from the header) or sia (newTrace); pal (Sia-Philly) traces are replayed by "
                        "'pal-opt simulate', on a cluster of one GPU type (default auto)")
    p.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="TYPE:SERVERSxGPUS,...",
                   help=f"GPU types in order (default {DEFAULT_CLUSTER})")
    p.add_argument("--profiles", type=input_file, default=None, metavar="DIR", help=PROFILES_HELP)
    p.add_argument("--policy", type=method_list(hetero_policy_names(), "policy"), default=["sia"], metavar="POLICY[,POLICY...]",
                   help="policy, or several separated by commas (each runs in turn on the same workload, cluster "
                        "and draw, and the outputs compare them), of: "
                        + "; ".join(f"{n}: {e.summary}" for n, e in HETERO_POLICIES.items()) + " (default sia)")
    p.add_argument("--variability", nargs="+", action="extend", default=[], metavar="[TYPE:]CLASS=FILE|DIR",
                   help="GPUs of TYPE draw CLASS's per-GPU factors from this PAL-format measurement CSV; "
                        "CLASS=FILE: the GPUs of every type; DIR (PAL's Longhorn files): every type draws "
                        "classA from resnet- and classB from bert-longhorn-agg.csv (default: every GPU nominal)")
    p.add_argument("--ilp-mode", choices=ILP_MODES, default=None,
                   help=ILP_MODE_HELP)
    p.add_argument("--seed", type=nonneg_int, default=None,
                   help="seed of the variability draw and, unless --failure-seed, of the failures (default 0; "
                        "only with --variability or --failures)")
    p.add_argument("--round", type=simulated_seconds, default=60.0, metavar="R", help="round length in seconds (default 60)")
    p.add_argument("--category", choices=("adaptive", "scale-gpus", "rigid"), default=None,
                   help="give every job this category (the artifact's categorize step); default: the file's")
    p.add_argument("--backend", type=nonempty, default=None, metavar="NAME",
                   help=f"solver of the round program: {', '.join(b.value for b in BackendName)} or any "
                        "registered backend (default: the first installed, as for pal-opt simulate)")
    p.add_argument("--time-limit", type=positive_float, default=None, metavar="S",
                   help="seconds per round program (default: until proven optimal; ilp's placement "
                        "program after Sia's at most 10 s)")
    p.add_argument("--max-hours", type=simulated_hours, default=720.0, metavar="H",
                   help="stop after this much simulated time even with unfinished jobs (default 720)")
    p.add_argument("-o", "--out", "--output", dest="out", type=output_file, required=True, metavar="RESULT.json",
                   help="result file (written atomically)")
    p.add_argument("--jobs-csv", type=output_file, default=None, metavar="JOBS.csv",
                   help="per-job table (name, application, kind, submit/start/completion time, JCT, restarts, epochs)")
    p.add_argument("--plot", type=output_file, default=None, metavar="PNG",
                   help=SIMULATE_PLOT_HELP)
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary line")
    from ..simulate.failureargs import add_failure_arguments

    add_failure_arguments(p, seed_default="--seed, else 0")
    p.set_defaults(func=run, handler=run)
    return p


def detect_trace_format(path: str) -> str:
    """``sia`` or ``pal`` from the trace's header line.

    Raises
    ------
    InstanceError
        The file cannot be read, is not a regular file (a pipe such as ``<(zcat t.csv.gz)``:
        reading its header would use up what the trace's reader then reads, which found it
        empty), or its header is neither format's.
    """
    from ..io.csvfile import separator_hint
    from ..io.textfile import NUL, binary_text, refuse_markup

    if os.path.isdir(path):
        raise InstanceError("is a directory, expected a trace (CSV)", source=path)
    try:
        with open(path, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise InstanceError("is a pipe or a device, not a file: the trace format is read from its header "
                                    "before the trace is, which would use it up; give --trace-format pal or sia, or "
                                    "save the trace to a file", source=path)
            head = fh.read(64 * 1024)
    except OSError as exc:
        raise MissingFileError.reading(exc, "cannot read trace", source=path) from None
    if not head.strip():
        raise InstanceError("trace file is empty", source=path)
    if NUL in head:  # UTF-16 from PowerShell, UTF-32, or no text at all
        raise InstanceError(f"trace file {binary_text(head)}", source=path)
    refuse_markup(head.decode("utf-8-sig", errors="replace"), path, "a trace (CSV)")
    try:
        # utf-8, the mark dropped after: utf-8-sig counts a bad byte's offset from after the mark
        header = head.replace(b"\r", b"\n").split(b"\n", 1)[0].decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise InstanceError(f"trace file is not valid UTF-8 (byte {exc.start}: {exc.reason})", source=path) from None
    fields = next(csv.reader([header]), [])
    cols = {c.strip().lower() for c in fields}  # names are case-insensitive
    hint = separator_hint(fields)
    if _SIA_COLUMNS <= cols:
        return "sia"
    if _PAL_COLUMNS <= cols:
        return "pal"
    raise InstanceError(
        "cannot tell the trace format from the header" + (hint or (
            f" (sia needs {', '.join(sorted(_SIA_COLUMNS))}; pal needs {', '.join(sorted(_PAL_COLUMNS))}); "
            f"got {header.strip()[:200]!r}")),
        source=path,
        path="header",
    )


def simulation_inputs(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """The files a simulation reads: the trace, each ``--variability`` file (``[TYPE:]CLASS=FILE``,
    or PAL's Longhorn files in a ``DIR``) and the CSVs of ``--profiles DIR``."""
    from ..io.measurements import longhorn_paths

    files: list[tuple[str, Any]] = [("TRACE", args.trace)]
    for item in getattr(args, "variability", None) or ():
        head, sep, path = item.partition("=")
        if sep:
            files.append((f"--variability {head}", path))
        elif os.path.isdir(item):
            files += [(f"--variability {item}", p) for p in longhorn_paths(item).values()]
    profiles = getattr(args, "profiles", None)
    if profiles and os.path.isdir(profiles):
        files += [(f"--profiles {profiles}", p) for p in sorted(Path(profiles).glob("*/*.csv"))]
    return files


def _load(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(workload, applications, cluster) from the arguments, all checked."""
    from .goodput import JobKind
    from .profiles import application_names, load_applications
    from .simulate import build_cluster, parse_cluster
    from .workload import check_modelled, read_workload, workload_from_frame

    spec = parse_cluster(args.cluster)
    fmt = detect_trace_format(args.trace) if args.trace_format == "auto" else args.trace_format
    if fmt != "sia":
        how = "--trace-format pal" if args.trace_format == "pal" else f"{args.trace} has a PAL (Sia-Philly) header"
        raise OptionError(f"simulate-sia replays Sia newTrace workloads (name,time,application,num_replicas,"
                          f"batch_size); {how}: replay a PAL trace with 'pal-opt simulate'")
    known = application_names(args.profiles)
    workload = read_workload(args.trace, applications=known)
    check_modelled(workload)  # before its profiles are loaded: they may lack types or fail to interpolate
    if args.category is not None:
        frame = workload.frame()
        frame["category"] = JobKind.parse(args.category).value
        workload = workload_from_frame(frame, source=workload.source, applications=known)
    apps = load_applications(args.profiles, workload.applications())
    return workload, apps, build_cluster(spec, apps, os.fspath(args.profiles))


def _document(args: argparse.Namespace, policy: str, result: Any, cluster: Any, params: Any,
              variability: Any, failures: Any) -> dict[str, Any]:
    from dataclasses import asdict

    from ..simulate.fields import PER_JOB_FIELD, SIA_FILE_ALIASES, with_aliases

    doc: dict[str, Any] = {
        "trace": os.fspath(args.trace),
        "trace_format": "sia",
        "policy": policy,
        "ilp_mode": (getattr(args, "ilp_mode", None) or ILP_MODES[0]) if policy == "ilp" else None,
        "cluster": {t.name: {"nodes": t.nodes, "gpus_per_node": t.gpus_per_node, "node_limit": t.node_limit}
                    for t in cluster},
        "round_length": args.round,
        "policy_parameters": {**asdict(params), "note": "lambda_a is read but unused, as in the artifact"},
        "category": args.category,
        "variability": dict(variability.files),
        # it seeds the variability draw (and the failures, without --failure-seed)
        "seed": (args.seed or 0) if args.variability or getattr(args, "failures", False) else None,
    }
    if failures is not None:
        doc["failure_config"] = asdict(failures)
    doc.update(result.summary())
    doc["unplaceable"] = [{"job": name, "reason": why} for name, why in result.unplaceable.items()]
    doc["units"] = "seconds (jct, makespan, wall)"
    if result.failure_log is not None:
        doc["failure_log"] = result.failure_log
    use = result.gpus_in_use  # round k's allocation, made at (k + 1) x the round length, held one round
    doc["round_log"] = {"time": [(k + 1) * result.round_length for k in range(use.shape[0])],
                        "gpus_in_use": use.sum(axis=1).tolist(),
                        "gpus_in_use_by_type": {t.name: use[:, i].tolist() for i, t in enumerate(result.cluster)}}
    doc[PER_JOB_FIELD] = [
        {"name": r.name, "application": r.application, "kind": r.kind, "submit_time": r.submit_time,
         "start_time": r.start_time, "completion_time": r.completion_time, "jct": r.jct,
         "restarts": r.restarts, "epochs": r.epochs, "failures": r.failures, "lost_gpu_seconds": r.lost_gpu_seconds}
        for r in result.jobs
    ]
    return with_aliases(doc, SIA_FILE_ALIASES)  # "jobs", "round_seconds": the same values, deprecated


def _check_policy_flags(args: argparse.Namespace, policies: list[str]) -> None:
    """Flags that would change nothing are refused, as ``pal-opt solve`` refuses an option of
    another method: ``--backend`` and ``--time-limit`` when no policy solves a program,
    ``--ilp-mode`` without ``ilp``, and ``--seed`` without ``--variability`` (it seeds only the
    per-GPU variability draw, and the failures when ``--failure-seed`` is not given)."""
    from .methods import HETERO_POLICIES

    bad = [f for f, v in (("--backend", args.backend), ("--time-limit", args.time_limit)) if v is not None]
    if bad and not any(HETERO_POLICIES.get_item(p).program for p in policies):
        programs = ", ".join(n for n in HETERO_POLICIES.names() if HETERO_POLICIES.get_item(n).program)
        shown = ", ".join(map(repr, policies))
        raise OptionError(f"{' and '.join(bad)} {'does' if len(bad) == 1 else 'do'} not apply to policy "
                          f"{shown}: {'it solves' if len(policies) == 1 else 'they solve'} no integer program "
                          f"({programs} do)")
    mode = getattr(args, "ilp_mode", None)
    if mode is not None and "ilp" not in policies:
        raise OptionError(f"--ilp-mode applies to --policy ilp only, not --policy {','.join(policies)}")
    failures = getattr(args, "failures", False)
    if args.seed is not None and not args.variability and not (failures and args.failure_seed is None):
        if failures:  # the failures drawn from --failure-seed: the run of every --seed the same
            raise OptionError(f"--seed {args.seed} changes nothing: without --variability every GPU is nominal, "
                              f"and the failures are drawn from --failure-seed {args.failure_seed}")
        raise OptionError("--seed seeds the per-GPU variability draw: without --variability every GPU is nominal "
                          "and nothing is drawn (with --failures it seeds the failures too)")


def _failures(args: argparse.Namespace) -> Any:
    """The :class:`~pal_opt.simulate.failures.FailureConfig` of ``--failures`` (its seed
    ``--failure-seed``, else ``--seed``, else 0), or None."""
    from dataclasses import replace

    from ..simulate.failureargs import failure_config

    config = failure_config(args)
    if config is not None and config.seed is None:
        config = replace(config, seed=args.seed or 0)
    return config


def _policies(args: argparse.Namespace) -> list[str]:
    """The policies asked for, in order (each once: :func:`~pal_opt.cliargs.method_list` refuses
    a name given twice)."""
    given = list(args.policy)
    names = hetero_policy_names()
    bad = [p for p in given if p not in names]
    if bad:
        raise OptionError(f"--policy on a sia trace takes {', '.join(names)}, got {','.join(bad)}")
    return list(given)


def run(args: argparse.Namespace) -> int:
    """Handle the command (one policy or several, on the same workload, cluster and draw);
    returns the exit status (0, or 130 after a Ctrl-C: nothing is written and one line says how
    far the run got, as on a PAL trace)."""
    from ..io.atomic import atomic_write_files
    from .policy import SiaParams
    from .simulate import SimConfig, simulate_sia

    defaulted = default_profiles(args)
    policies = _policies(args)
    outputs = {"--out": args.out, "--jobs-csv": getattr(args, "jobs_csv", None), "--plot": getattr(args, "plot", None)}
    check_outputs(outputs, simulation_inputs(args))
    if outputs["--plot"]:
        check_plot_target(outputs["--plot"])  # before the simulation, not after it
    from ..ilp.backends import get_backend

    _check_policy_flags(args, policies)
    # an unknown or missing solver is reported before any work; the result names the one used
    backend = get_backend(args.backend).name
    workload, apps, cluster = _load(args)
    from .gpus import Layout, draw_variability, parse_variability, unused_variability

    files = parse_variability(args.variability, cluster)
    # a file named for a class no job uses is an error; a directory gives both classes, used or not
    named = parse_variability([item for item in args.variability if "=" in item], cluster)
    unused = unused_variability(named, workload.applications())
    if unused:
        raise OptionError(f"--variability {unused[0]}: no job of {args.trace} draws from it (its applications: "
                          f"{', '.join(sorted(workload.applications()))}; an application's own entry wins over its "
                          "class's)")
    variability = draw_variability(Layout(tuple(cluster)), files, seed=args.seed or 0)
    if defaulted:  # after every input is checked: bad input is one line, without it
        log.warning("%s", defaulted)
    params = SiaParams(backend=backend, time_limit=args.time_limit)
    failures = _failures(args)
    docs: dict[str, dict[str, Any]] = {}
    results: dict[str, Any] = {}
    for policy in policies:
        modes: dict[str, Any] = ilp_mode_config(getattr(args, "ilp_mode", None) if policy == "ilp" else None, policy)
        config = SimConfig(round_length=args.round, policy=policy, max_time=args.max_hours * 3600.0,
                           variability=variability, failures=failures, sia_params=params, **modes)
        counts = [0, 0]  # rounds done, jobs finished: for the line a Ctrl-C ends with
        try:
            with _progress_bar(args, len(workload), policy, counts, config.max_time) as progress:
                results[policy] = simulate_sia(workload, apps, cluster, config, progress=progress)
        except KeyboardInterrupt:  # a Ctrl-C (a solver stopped cleanly first): one line, nothing written
            from ..simulate.metrics import interrupted_line

            print(interrupted_line(counts[0], counts[1], len(workload), policy if len(policies) > 1 else None),
                  file=sys.stderr)
            return 130
        docs[policy] = _document(args, policy, results[policy], cluster, params, variability, failures)
    atomic_write_files(_outputs(outputs, docs))
    if not args.quiet:
        _print_summaries(args, docs, results, [f for f in outputs.values() if f])
    return 0


@contextlib.contextmanager
def _progress_bar(args: argparse.Namespace, jobs: int, policy: str, counts: list[int],
                  max_time: float) -> Iterator[Any]:
    """``progress(rounds, done, total, now)`` for :func:`simulate_sia`: the bar a PAL trace has
    (:func:`~pal_opt.cliprogress.simulation_bar`: jobs finished, rounds, simulated time of at most
    ``max_time``, ETA) on a terminal (not with ``--quiet``), else nothing; ``counts`` keeps
    ``[rounds, done]``, and a Ctrl-C a solver swallowed stops the run at the round's end."""
    from ..cliprogress import raise_if_interrupted, show_simulation_progress, simulation_bar

    bar = simulation_bar(policy, jobs, quiet=args.quiet)

    def progress(rounds: int, done: int, total: int, now: float) -> None:
        raise_if_interrupted()
        counts[:] = [rounds, done]
        show_simulation_progress(bar, rounds, done, now, max_time)

    try:
        yield progress
    finally:
        bar.close()


#: The per-job table's columns (``--jobs-csv``), after ``policy`` when several ran.
SIA_JOB_COLUMNS = ("name", "application", "kind", "submit_time", "start_time", "completion_time", "jct", "restarts",
                   "epochs")


def _outputs(paths: dict[str, str | None], docs: dict[str, dict[str, Any]]) -> dict[str, bytes]:
    """Every file asked for, as bytes, all made before any is written (written all or none)."""
    from ..simulate.fields import PER_JOB_FIELD

    several = len(docs) > 1
    body = {"policies": list(docs), "results": docs} if several else next(iter(docs.values()))
    out: dict[str, bytes] = {str(paths["--out"]): (json.dumps(body, indent=1) + "\n").encode()}
    if paths["--jobs-csv"]:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow((("policy",) if several else ()) + SIA_JOB_COLUMNS)
        for policy, doc in docs.items():
            for row in doc[PER_JOB_FIELD]:
                cells = ["" if row[c] is None else row[c] for c in SIA_JOB_COLUMNS]
                w.writerow([policy, *cells] if several else cells)
        out[str(paths["--jobs-csv"])] = buf.getvalue().encode()
    if paths["--plot"]:
        from ..simulate.metrics import result_figure

        out[str(paths["--plot"])] = result_figure(docs, paths["--plot"])
    return out


def _print_summaries(args: argparse.Namespace, docs: dict[str, dict[str, Any]], results: dict[str, Any],
                     written: list[str]) -> None:
    """A line per policy, and with several the average JCT of each against the first and the
    files written."""
    from ..simulate.metrics import comparison_lines, unfinished_line

    for policy, doc in docs.items():
        # None when no job completed (then n_completed says 0): "-", as the PAL simulator prints it
        avg, p99, mk, wait = (f"{doc[k] / 3600.0:.2f} h" if doc[k] is not None else "-"
                              for k in ("avg_jct", "p99_jct", "makespan", "avg_queueing_delay"))
        print(  # the PAL simulator's line, in its words and order, then what only this one has
            f"{policy}: {doc['n_completed']}/{doc['n_jobs']} jobs finished, avg JCT {avg}, p99 JCT {p99}, "
            f"makespan {mk}, utilisation {doc['utilisation']:.3f}, avg queueing {wait}, rounds {doc['rounds']}, "
            f"restarts/job {doc['avg_restarts_per_job']:.2f}"
            + (f", slowdown {v['mean']:.3f} (placement floor {v['placement_floor']:.3f})"
               if (v := doc.get("variability_slowdown")) else "")
            + f", placement time {doc['solve_seconds_total']:.2f} s, {doc['wall_seconds']:.0f} s wall -> {args.out}"
        )
        if (line := unfinished_line(policy, doc, len(results[policy].unplaceable))) is not None:
            print(line)
        if (f := doc.get("failures")) is not None:
            from ..simulate.failures import failures_line

            print(f"{policy}: {failures_line(f)}")
        for name, why in results[policy].unplaceable.items():
            print(f"unplaceable: job {name}: {why}")
    for line in comparison_lines({p: d["avg_jct"] for p, d in docs.items()}, written,
                                 {p: d["n_completed"] for p, d in docs.items()}):
        print(line)


#: ``pal-opt simulate`` flags that only a PAL trace takes, with their defaults.
_PAL_ONLY = {
    "queue": "fifo", "locality_penalty": 1.7, "rack_penalty": None, "restart_cost": 0.0, "binning": "pal-artifact",
    "synthetic_variability": None, "variability_draw": "numpy", "default_class": None, "model_class": [], "admission": None, "gap": None, "threads": None, "parts": None, "backend_param": None,
}
_SIA_ONLY = {"profiles": None, "category": None}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def resolve_trace_format(args: argparse.Namespace) -> str:
    """``pal`` or ``sia`` for ``pal-opt simulate`` (``--trace-format``, or from the header); a
    flag of the other format is an :class:`~pal_opt.errors.OptionError`.  ``--policy`` not given
    becomes the format's default (``pal``, or ``sia`` for a sia trace)."""
    fmt = detect_trace_format(args.trace) if args.trace_format == "auto" else args.trace_format
    if args.policy is None:  # not given: each format's own default, as simulate-sia's for a sia trace
        args.policy = ["sia"] if fmt == "sia" else ["pal"]
    wrong = _PAL_ONLY if fmt == "sia" else _SIA_ONLY
    bad = [n for n, default in wrong.items() if getattr(args, n, default) not in (default, [])]
    if fmt == "pal":
        bad += [f"policy {p}" for p in args.policy if p in hetero_only_policies()]
    if bad:
        verb = "does" if len(bad) == 1 else "do"
        raise OptionError(f"{', '.join(_flag(n) for n in bad)} {verb} not apply to a {fmt} trace ({args.trace})")
    return fmt


def hetero_only_policies() -> tuple[str, ...]:
    """Policies only the simulator of GPU types has (``pal-opt simulate --policy`` accepts them
    besides the registered methods, for Sia traces only)."""
    from ..methods import method_names

    return tuple(n for n in hetero_policy_names() if n not in method_names())


def default_profiles(args: argparse.Namespace) -> str | None:
    """Set ``args.profiles``, when not given, to the Sia artifact's profiles in the shared data
    (:func:`~pal_opt.simulate.variability.shared_sia_profiles_dir`), and return the warning line
    that says so, for the caller to log once the inputs are checked (bad input is one line, as a
    PAL trace's variability warning waits for it); None when ``--profiles`` was given;
    :class:`OptionError` when there are none."""
    if args.profiles is not None:
        return None
    from ..simulate.variability import shared_roots, shared_sia_profiles_dir

    found = shared_sia_profiles_dir()
    if found is None:
        looked = " or ".join(str(r / "data" / "sia-artifact" / "profiles") for r in shared_roots())
        raise OptionError(f"--profiles DIR is required for a sia trace: no Sia artifact profiles in {looked} "
                          "(PAL_OPT_SHARED names the shared folder)")
    args.profiles = str(found)
    return f"--profiles not given; using the Sia artifact's profiles in {found}"


def run_folded(args: argparse.Namespace) -> int:
    """``pal-opt simulate`` on a Sia trace: the arguments mapped onto :func:`run`'s (several
    policies run one after the other, as on a PAL trace)."""
    ns = argparse.Namespace(**vars(args))
    ns.cluster = DEFAULT_CLUSTER if args.cluster is None else args.cluster
    ns.round = args.round or 60.0
    ns.max_hours = args.max_hours or 720.0
    return run(ns)
