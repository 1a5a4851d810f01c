"""The ``pal-opt simulate`` subcommand: argument parsing and printing only.

``pal_opt/cli.py`` registers it with :func:`add_parser`; the handler raises
:class:`~pal_opt.errors.PalOptError` on bad input (the top level prints one line and exits 2)
and writes its outputs only after the simulation succeeded.

The GPUs' variability comes from ``--variability`` (measurement files per class, or a directory
of PAL's Longhorn files) or ``--synthetic-variability SEED`` (the synthetic model).  A class the
trace uses that neither names takes the default source (the shared Longhorn files on a
development machine, else the synthetic model): one ``pal-opt: warning:`` line names it, and the
result file records the source (``config.variability_source``).  With ``--cluster FILE.json`` the
trace runs on an instance file's cluster, its servers, racks and measured factors
(:mod:`pal_opt.simulate.clusterfile`), and those options do not apply.

Failures are off unless ``--failures`` is given (:mod:`pal_opt.simulate.failures`: rates from
Llama 3's interruptions by default, ``--gpu-mtbf``/``--server-mtbf`` hours, ``--failure-scale K``
dividing both, ``--repair-time S``, ``--checkpoint-interval S``, ``--failure-seed N``); a
failure flag without ``--failures`` is an error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from ..cliargs import (
    SIMULATE_PLOT_HELP,
    OnceParser,
    add_method_arguments,
    add_restart_arguments,
    check_outputs,
    check_plot_target,
    input_file,
    nonempty,
    nonneg_int,
    output_file,
    penalty,
    refuse_overwriting_inputs,
    simulated_hours,
    solve_options_each,
)
from ..errors import OptionError
from ..options import DEFAULT_ILP_TIME_LIMIT, DEFAULT_ROUND_LENGTH
from .failureargs import add_failure_arguments, failure_config

__all__ = ["add_parser", "add_compare_parser", "run", "run_compare", "DEFAULT_ILP_TIME_LIMIT"]

log = logging.getLogger(__name__)

def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``simulate`` on ``subparsers`` (from ``ArgumentParser.add_subparsers``).

    The handler is stored as both ``func`` and ``handler`` defaults: ``args.func(args)``
    returns the exit status.
    """
    from ..hetero.cli import ILP_MODE_HELP, ILP_MODES, PROFILES_HELP
    from ..hetero.methods import hetero_policy_names
    from ..options import Binning
    from .queue import QUEUE_POLICIES

    p = subparsers.add_parser(
        "simulate",
        help="replay a job trace round by round under a placement policy",
        description=(
            "Replay a Sia-Philly trace (job_id,num_gpus,submit_time,duration,model; duration = "
            "iterations) on a simulated cluster whose GPUs draw per-class slowdown factors from "
            "measurement files, placing every round with the chosen policy."
        ),
    )
    p.add_argument("trace", type=input_file, help="trace CSV file")
    p.add_argument("--trace-format", choices=("auto", "pal", "sia"), default="auto",
                   help="auto (from the CSV header), pal (job_id,num_gpus,submit_time,duration,model) or sia "
                        "(newTrace: name,time,application,num_replicas,batch_size; a cluster of GPU types); default auto")
    p.add_argument("--cluster", default=None,
                   help="pal: SERVERSxGPUS or RACKSxSERVERSxGPUS (default 16x4), or an instance file (*.json) "
                        "whose cluster (servers, racks, measured factors) the trace runs on; sia: "
                        "TYPE:SERVERSxGPUS,... (default aws:6x4,rtx:3x8,dgx-ext:2x8)")
    add_method_arguments(p, flag="--policy", binning=False, time_limit_default=DEFAULT_ILP_TIME_LIMIT, multiple=True,
                         extra=hetero_policy_names(), default=None, default_help="pal; sia on a sia trace",
                         time_limit_help=f"wall-clock seconds per round (default {DEFAULT_ILP_TIME_LIMIT:g}; "
                                         "sia traces: per round program, default until proven optimal)")
    sia = p.add_argument_group("sia traces (clusters of GPU types)")
    sia.add_argument("--profiles", type=input_file, default=None, metavar="DIR", help=PROFILES_HELP)
    sia.add_argument("--category", choices=("adaptive", "scale-gpus", "rigid"), default=None,
                     help="give every job this category (default: the file's)")
    sia.add_argument("--ilp-mode", choices=ILP_MODES, default=None, help=ILP_MODE_HELP)
    p.add_argument("--max-hours", type=simulated_hours, default=None, metavar="H",
                   help="stop after this much simulated time even with jobs unfinished (no round starts after it; "
                        "default: pal traces run until every job is done, sia traces stop at 720)")
    p.add_argument("--queue", default="fifo", choices=tuple(QUEUE_POLICIES), help="queue policy (default fifo)")
    p.add_argument("--locality-penalty", type=penalty, default=1.7, metavar="L",
                   help="PAL's λ: slowdown of a gang spanning servers (on a racked cluster: spanning racks) "
                        "(default 1.7)")
    p.add_argument("--rack-penalty", type=penalty, default=None, metavar="L",
                   help="racked clusters: slowdown of a gang spanning servers within one rack, at most "
                        "--locality-penalty (default: the same as --locality-penalty)")
    add_restart_arguments(p, resumed=True, round_default="360; sia traces: 60", simulated=True)
    p.set_defaults(round=None)  # pal: 360 s, sia: 60 s
    p.add_argument("--binning", default="pal-artifact", choices=[b.value for b in Binning],
                   help="variability binning the policy sees (default pal-artifact)")
    _add_variability_arguments(p)
    p.add_argument("--default-class", type=nonempty, default=None, metavar="CLASS",
                   help="class of models the trace names but pal-opt does not know (default: none; such a model is an error)")
    p.add_argument("--model-class", action="append", default=[], metavar="MODEL=CLASS[,...]",
                   help="the class of models the trace names (on top of pal-opt's own model list, or "
                        "overriding it), e.g. --model-class vgg16=classC,gnmt=classB (repeatable)")
    p.add_argument("--seed", type=nonneg_int, default=None,
                   help="seed of variability, random policy, failures (default 0; sia traces: with --variability or --failures)")
    p.add_argument("-o", "--out", "--output", dest="out", type=output_file, required=True, metavar="RESULT.json",
                   help="result file (written atomically; with --jobs-csv and --plot, all or none); several policies: {\"policies\": [...], "
                        "\"results\": {policy: result}}")
    p.add_argument("--jobs-csv", default=None, type=output_file, metavar="JOBS.csv",
                   help="per-job table (several policies: one after the other, a policy column first)")
    p.add_argument("--plot", default=None, type=output_file, metavar="PNG",
                   help=SIMULATE_PLOT_HELP)
    add_failure_arguments(p)
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (jobs finished, rounds, ETA; shown on a terminal only) or summary line")
    p.set_defaults(func=run, handler=run)
    return p


def _add_variability_arguments(p: argparse.ArgumentParser) -> None:
    """``--variability``, ``--synthetic-variability`` and ``--variability-draw``."""
    from .choices import DRAWS

    p.add_argument("--variability", nargs="+", action="extend", default=[], metavar="[TYPE:]CLASS=FILE|DIR",
                   help="per-run measurement CSV (perf column) a class draws its factors from, or a directory "
                        "of PAL's {resnet,bert,pagerank}-longhorn-agg.csv for classA-D; sia traces: "
                        "TYPE:CLASS=FILE, the GPUs of TYPE draw CLASS's factors (CLASS=FILE: every type's; DIR: every type, "
                        "classA from resnet-, classB from bert-longhorn-agg.csv) (default: pal traces, the shared Longhorn files "
                        "or else the synthetic model, see --synthetic-variability; sia traces, every GPU nominal)")
    p.add_argument("--synthetic-variability", type=nonneg_int, default=None, metavar="SEED",
                   help="classes without --variability draw from the synthetic Longhorn-like model with this seed "
                        "(without either option: the shared Longhorn files if present, else the synthetic model, "
                        "with a warning)")
    p.add_argument("--variability-draw", default="numpy", choices=DRAWS,
                   help="numpy: seeded by --seed; artifact: replay the PAL artifact's own draw (default numpy)")


def _parse_model_classes(items: list[str]) -> dict[str, str]:
    """``{model: class}`` from ``--model-class MODEL=CLASS[,...]`` items (each model once)."""
    out: dict[str, str] = {}
    for item in (pair for given in items for pair in given.split(",")):
        model, sep, cls = (x.strip() for x in item.partition("="))
        if not sep or not model or not cls:
            raise OptionError(f"--model-class expects MODEL=CLASS, got {item!r}")
        if model in out:
            raise OptionError(f"--model-class: model {model!r} given twice")
        out[model] = cls
    return out


def _parse_variability(items: list[str]) -> dict[str, str]:
    """``{class: file}`` from ``--variability CLASS=FILE`` and ``--variability DIR`` items."""
    from ..io.measurements import longhorn_paths, not_a_file_error

    out: dict[str, str] = {}
    named: dict[str, str] = {}  # class -> the item that named it (a directory's files may be overridden)
    for item in items:
        cls, sep, path = item.partition("=")
        if Path(item).is_dir():  # first: a directory named 'run=1' is a directory, not CLASS=FILE
            for c, f in longhorn_paths(item).items():
                if not f.is_file():
                    raise not_a_file_error(f, f"--variability {item}")
                out[c] = os.fspath(f)
            continue
        if not sep or not cls or not path:
            raise OptionError(f"--variability expects CLASS=FILE or a directory, got {item!r}")
        if not Path(path).is_file():
            raise not_a_file_error(path, f"--variability {cls}")
        if cls in named:  # the last one was kept, silently
            raise OptionError(f"--variability: class {cls!r} given twice ({named[cls]} and {item})")
        named[cls] = item
        out[cls] = path
    return out


def _check_variability_classes(items: list[str], used: set[str], trace: str) -> None:
    """A ``--variability CLASS=FILE`` whose class no job of the trace has would be silently
    unused (a model name or a Sia-style ``TYPE:CLASS`` given by mistake): an OptionError.  A
    directory names every class, and is not checked."""
    for item in items:
        cls, sep, _ = item.partition("=")
        if sep and cls not in used and not Path(item).is_dir():
            raise OptionError(f"--variability {cls}: no job of {trace} has class {cls!r} "
                              f"(its classes: {', '.join(sorted(used)) or 'none'})")


def _check_synthetic_used(seed: int | None, files: dict[str, str], used: set[str], trace: str) -> None:
    """``--synthetic-variability SEED`` when every class of the trace has a ``--variability`` file
    would change nothing, and the result would record a seed no factor came from
    (``variability_source.synthetic_seed``): an :class:`OptionError`."""
    if seed is not None and used and used <= set(files):
        raise OptionError(f"--synthetic-variability {seed} changes nothing: every class of {trace} "
                          f"({', '.join(sorted(used))}) draws its factors from a --variability file")


def _check_seed_used(args: argparse.Namespace, origins: dict[str, str] | None, used: set[str]) -> None:
    """``--seed`` seeds the numpy draw from measurement files and the synthetic model's fallback,
    the ``random`` policy and the failures (without ``--failure-seed``).  Given where it seeds none
    of them (``origins``: ``{class: file or "synthetic"}`` of a drawn cluster, None for a cluster
    file), runs under other seeds are the same run, recorded under seeds no outcome came from: an
    :class:`OptionError`, as ``solve --seed`` for a method that draws nothing at random."""
    if args.seed is None or "random" in args.policy or (getattr(args, "failures", False) and args.failure_seed is None):
        return
    if origins is None:
        factors = f"the factors are --cluster {args.cluster}'s"
    elif args.variability_draw == "artifact":
        factors = "--variability-draw artifact replays the PAL artifact's draw"
    elif all(origins.get(c) == "synthetic" for c in used) and args.synthetic_variability is not None:
        factors = f"the factors are the synthetic model's of --synthetic-variability {args.synthetic_variability} " \
                  "(give another SEED there for another draw)"
    else:
        return
    raise OptionError(f"--seed {args.seed} changes nothing: {factors}, no policy is random and no failure is drawn "
                      "by it")


def _warn_default_source(defaulted: dict[str, str]) -> None:
    """One warning line: which classes the trace uses took the default variability source."""
    if not defaulted:
        return
    files = [c for c, o in defaulted.items() if o != "synthetic"]
    synthetic = [c for c, o in defaulted.items() if o == "synthetic"]
    parts = []
    if files:
        where = os.path.dirname(defaulted[files[0]])
        parts.append(f"{', '.join(files)} from the PAL artifact's Longhorn measurements in {where}")
    if synthetic:
        parts.append(f"{', '.join(synthetic)} from the synthetic Longhorn-like model")
    log.warning("simulate: variability not chosen (--variability CLASS=FILE|DIR or --synthetic-variability SEED); "
                "using %s", "; ".join(parts))


def _progress_bar(policy: str, quiet: bool, jobs: int) -> tuple[Any, list[int]]:
    """The progress bar (jobs finished of ``jobs``, rounds done, simulated time, ETA), drawn only
    on a terminal and without ``--quiet``, and the list ``[rounds done, jobs finished]``."""
    from ..cliprogress import simulation_bar

    return simulation_bar(policy, jobs, quiet=quiet), [0, 0]


def _configs(args: argparse.Namespace) -> dict[str, Any]:
    """One checked :class:`~pal_opt.simulate.engine.SimConfig` per ``--policy``; the integer
    program's flags go to the exact policies (a flag no policy takes is an error)."""
    from ..methods import get_method
    from .engine import SimConfig

    names = ("backend", "admission", "time_limit", "gap", "threads", "parts")
    failures = failure_config(args)
    configs = {}
    for policy, opts in solve_options_each(args, args.policy, "policy", names).items():
        exact = get_method(policy).exact
        config = SimConfig(  # checked when built
            policy=policy,
            queue=args.queue,
            round_length=args.round or DEFAULT_ROUND_LENGTH,
            locality_penalty=args.locality_penalty,
            rack_penalty=args.rack_penalty,
            binning=args.binning,
            restart_cost=args.restart_cost,
            seed=args.seed or 0,
            admission=opts.admission,
            backend=opts.backend,
            time_limit=(opts.time_limit or DEFAULT_ILP_TIME_LIMIT) if exact else None,
            ilp_options={k: getattr(opts, k) for k in opts.given() - {"admission", "backend", "time_limit"}},
            failures=failures,
            max_time=None if args.max_hours is None else args.max_hours * 3600.0,
        )
        configs[policy] = config
    return configs


def _simulate_one(args: argparse.Namespace, trace: Any, cluster: Any, config: Any) -> Any:
    """Run one policy with its progress bar; None after a Ctrl-C (one line says how far it got,
    naming the policy when there are several)."""
    from ..cliprogress import raise_if_interrupted, show_simulation_progress
    from .engine import simulate

    bar, counts = _progress_bar(config.policy, args.quiet, len(trace))

    def progress(done: int, total: int, now: float) -> None:
        raise_if_interrupted()  # a Ctrl-C a solver swallowed still stops the run here, at a round's end
        counts[:] = [counts[0] + 1, done]
        show_simulation_progress(bar, counts[0], done, now, config.max_time)

    try:
        return simulate(trace, cluster, config, progress=progress, source=os.fspath(args.trace))
    except KeyboardInterrupt:  # a Ctrl-C (an exact policy's solver stopped cleanly first)
        from .metrics import interrupted_line

        bar.close()
        print(interrupted_line(counts[0], counts[1], len(trace), config.policy if len(args.policy) > 1 else None),
              file=sys.stderr)
        return None
    finally:
        bar.close()


def _write_outputs(args: argparse.Namespace, results: dict[str, Any], extra: dict[str, Any]) -> None:
    """The result file (one policy: its result; several: ``{"policies", "results"}``), the per-job
    table (several: a ``policy`` column first) and the figure (one line per policy), all or none
    (:func:`~pal_opt.io.atomic.atomic_write_files`): everything is made and written to temporary
    files first, then renamed into place together, so that a figure that fails to draw, a file
    that cannot be written or a Ctrl-C leaves every earlier output as it was."""
    from ..io.atomic import atomic_write_files
    from .metrics import jobs_csv_text, json_text, result_figure, result_to_dict

    docs = {p: result_to_dict(r, extra_config=extra) for p, r in results.items()}
    several = len(docs) > 1
    outputs: dict[str, Any] = {
        args.out: json_text({"policies": list(docs), "results": docs} if several else next(iter(docs.values()))).encode()
    }
    if args.jobs_csv:
        outputs[args.jobs_csv] = jobs_csv_text(results if several else next(iter(results.values()))).encode()
    if args.plot:
        outputs[args.plot] = result_figure(docs, args.plot)
    atomic_write_files(outputs)


def _hours(seconds: float | None) -> str:
    """``seconds`` in hours (``-`` for a figure no job gave, e.g. no job finished)."""
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def _print_summary(policy: str, result: Any, out: str) -> None:
    from .metrics import unfinished_line

    s = result.summary
    print(
        f"{policy}: {s['n_completed']}/{s['n_jobs']} jobs finished, avg JCT {_hours(s['avg_jct'])} h, "
        f"p99 JCT {_hours(s['p99_jct'])} h, makespan {_hours(s['makespan'])} h, utilisation {s['utilisation']:.3f}, "
        f"avg queueing {_hours(s['avg_queueing_delay'])} h, rounds {s['rounds']}, "
        f"fallbacks {s['fallbacks']}, placement time {s['solve_seconds_total']:.2f} s -> {out}"
    )
    fell = [(k, r) for k, r in enumerate(result.rounds) if r.status == "fallback"]
    if fell:  # the count alone did not say why (round_log.note has every reason)
        k, r = fell[0]
        print(f"{policy}: {len(fell)} round{'s' * (len(fell) != 1)} fell back to the greedy placement; the first, "
              f"round {k} at {r.time / 3600:.2f} h: {r.note or 'no reason given'}")
    if (line := unfinished_line(policy, s, len(result.unplaceable))) is not None:
        print(line)
    if s.get("solver_crashes"):
        print(f"{policy}: a solver process crashed {s['solver_crashes']} times; each round was solved again or fell back "
              "(docs/limits.md, Known problems)")
    f = s.get("failures")
    if f is not None:
        from .failures import failures_line

        print(f"{policy}: {failures_line(f)}")
    classes = s.get("by_priority", {})
    if len(classes) > 1 or f is not None:
        parts = [f"{p}: {c['avg_jct'] / 3600:.2f} h ({c['n_completed']}/{c['n_jobs']})" if c["avg_jct"] is not None
                 else f"{p}: - (0/{c['n_jobs']})" for p, c in classes.items()]
        print(f"{policy}: avg JCT by priority {', '.join(parts)}")
    for jid, why in result.unplaceable.items():
        print(f"unplaceable: job {jid}: {why}")


def _check_penalties(args: argparse.Namespace, cluster: Any) -> None:
    """``--rack-penalty`` needs racks and may not exceed ``--locality-penalty`` (the slowdown
    across racks): one line naming both flags, before any warning or round."""
    if args.rack_penalty is None:
        return
    if not cluster.rack_ids:
        raise OptionError(f"--rack-penalty applies to a racked cluster (RACKSxSERVERSxGPUS, or a file with racks); "
                          f"--cluster {args.cluster or '16x4'} has none")
    if args.rack_penalty > args.locality_penalty:
        raise OptionError(f"--rack-penalty {args.rack_penalty:g} is above --locality-penalty {args.locality_penalty:g}, "
                          "the slowdown across racks: a gang within one rack may not be slower than one across "
                          f"racks (for {args.rack_penalty:g} across racks, give --locality-penalty {args.rack_penalty:g})")


def run(args: argparse.Namespace) -> int:
    """Handle ``pal-opt simulate``: every ``--policy`` in turn on the same cluster; returns the exit
    status (0, or 130 after a Ctrl-C: nothing is written and one line says how far the run got).
    The outputs are written all or none (:func:`_write_outputs`); a Ctrl-C while they are being
    renamed into place takes effect once they all are (exit 130, every output new)."""
    from ..hetero.cli import resolve_trace_format, run_folded, simulation_inputs
    from ..io.traces import read_trace
    from .clusterfile import check_file_options, cluster_from_file, is_cluster_file
    from .engine import build_cluster, check_trace, parse_cluster
    from .variability import variability_source

    from_file = is_cluster_file(args.cluster)
    outputs = {"--out": args.out, "--jobs-csv": args.jobs_csv, "--plot": args.plot}
    check_outputs(outputs, simulation_inputs(args) + ([("--cluster", args.cluster)] if from_file else []))
    if resolve_trace_format(args) == "sia":
        if from_file:
            raise OptionError(f"--cluster {args.cluster}: an instance file is a cluster for a pal trace; a sia trace "
                              "takes TYPE:SERVERSxGPUS,...")
        return run_folded(args)
    if getattr(args, "ilp_mode", None) is not None:
        raise OptionError("--ilp-mode applies to sia traces (clusters of GPU types) only")
    if args.plot:
        check_plot_target(args.plot)  # before the simulation, not after it
    if from_file:
        check_file_options(args)
    spec = None if from_file else parse_cluster("16x4" if args.cluster is None else args.cluster)
    variability = _parse_variability(args.variability)
    configs = _configs(args)
    trace = read_trace(args.trace, default_class=args.default_class, model_class=_parse_model_classes(args.model_class))
    used = {tj.perfclass for tj in trace}
    _check_variability_classes(args.variability, used, args.trace)
    _check_synthetic_used(args.synthetic_variability, variability, used, args.trace)
    if spec is None:
        cluster = cluster_from_file(args.cluster, used)
        origins = {c: os.fspath(args.cluster) for c in cluster.factors}
        source: dict[str, Any] = {"kind": "cluster file", "chosen_by": "options", "defaulted": {},
                                  "synthetic_seed": None}
        _check_seed_used(args, None, used)
    else:
        cluster, origins = build_cluster(spec, variability, seed=args.seed or 0, draw=args.variability_draw,
                                         synthetic_seed=args.synthetic_variability)
        source = variability_source(origins, variability, args.synthetic_variability, used)
        _check_seed_used(args, origins, used)
        # the default measurement files too (the shared Longhorn CSVs): --out over one replaced it
        refuse_overwriting_inputs(outputs, [(f"variability file of {c}", f) for c, f in origins.items()
                                            if f != "synthetic"])
    _check_penalties(args, cluster)
    check_trace(trace, cluster, os.fspath(args.trace))  # bad input before any warning
    if spec is not None:
        _warn_default_source(source["defaulted"])

    results = {}
    for policy, config in configs.items():
        result = _simulate_one(args, trace, cluster, config)
        if result is None:
            return 130
        results[policy] = result
    extra = {
        "trace": os.fspath(args.trace),
        "cluster": os.fspath(args.cluster) if spec is None else str(spec),
        "variability": origins,
        "variability_draw": None if spec is None else args.variability_draw,
        "variability_source": source,
    }
    _write_outputs(args, results, extra)
    if not args.quiet:
        for policy, result in results.items():
            _print_summary(policy, result, args.out)
        from .metrics import comparison_lines

        written = [f for f in (args.out, args.jobs_csv, args.plot) if f]
        for line in comparison_lines({p: r.summary["avg_jct"] for p, r in results.items()}, written,
                                     {p: r.summary["n_completed"] for p, r in results.items()}):
            print(line)
    return 0


def add_compare_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``compare`` (result files of ``simulate`` side by side, :mod:`.compare`)."""
    p = subparsers.add_parser(
        "compare",
        help="compare the results of several simulate runs",
        description=(
            "Compare the result files of several 'pal-opt simulate' runs (other seeds, settings, policies or "
            "versions; PAL or Sia traces): per run the jobs finished, JCT figures, makespan, utilisation, "
            "queueing and restarts, the average JCT against the first run's, the settings in which the runs "
            "differ, and per job the JCT against the first run's over the jobs both finished."
        ),
        epilog="A file of several policies (simulate --policy a,b) gives a run per policy, labelled FILE:POLICY; "
               "a file of one policy is labelled by its name without .json (files of one name by their paths). "
               "A job is the same job in two runs when its id (or name) and its submit time are.",
    )
    p.add_argument("results", nargs="+", type=input_file, metavar="RESULT.json",
                   help="result files of simulate --out (at least two runs in all)")
    p.add_argument("--csv", default=None, type=output_file, metavar="SUMMARY.csv",
                   help="the table as CSV, one row per run (times in seconds)")
    p.add_argument("--jobs-csv", default=None, type=output_file, metavar="JOBS.csv",
                   help="one row per job (its id and submit time): its JCT in each run (seconds) and, for every "
                        "run after the first, the ratio to the first run's")
    p.add_argument("--plot", default=None, type=output_file, metavar="PNG",
                   help="one figure: the JCT CDF, the utilisation over time (when every file has a per-round log; "
                        "Sia results of earlier versions have not) and each job's JCT against the first run's, one line per run (needs "
                        "matplotlib: pip install 'pal-opt[plot]')")
    p.set_defaults(func=run_compare, handler=run_compare)
    return p


def run_compare(args: argparse.Namespace) -> int:
    """``pal-opt compare``: print the comparison; write ``--csv``, ``--jobs-csv`` and ``--plot`` (all or none)."""
    from ..io.atomic import atomic_write_files
    from .compare import comparison_report, job_jcts_csv_text, load_runs, summary_csv_text
    from .metrics import jct_figure, result_figure

    outputs = {"--csv": args.csv, "--jobs-csv": args.jobs_csv, "--plot": args.plot}
    check_outputs(outputs, [("RESULT.json", r) for r in args.results])
    if args.plot:
        check_plot_target(args.plot)
    runs = load_runs(args.results)
    lines = comparison_report(runs)
    files: dict[str, bytes] = {}
    if args.csv:
        files[args.csv] = summary_csv_text(runs).encode()
    if args.jobs_csv:
        files[args.jobs_csv] = job_jcts_csv_text(runs).encode()
    if args.plot:
        draw = result_figure if all("round_log" in r for r in runs.values()) else jct_figure
        files[args.plot] = draw(runs, args.plot)
    if files:
        atomic_write_files(files)
    for line in lines:
        print(line)
    if files:
        print(f"wrote {', '.join(files)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run ``simulate`` on its own (for tests and ``python -m pal_opt.simulate.cli``).

    Bad input prints ``pal-opt: error: <message>`` on stderr and returns 2.
    """
    from ..errors import PalOptError

    parser = OnceParser(prog="pal-opt")  # an option of one value given twice refused, as by pal-opt
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["simulate", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args))
    except PalOptError as exc:
        print(f"pal-opt: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"pal-opt: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
