"""The ``pal-opt`` command line: argument parsing and printing only; the work is the API's.

Commands
--------
``pal-opt generate --nodes N --gpus-per-node G --jobs J [...] -o INSTANCE.json``
    A synthetic round (:func:`pal_opt.generate.generate_instance`).
``pal-opt import blox --gpus GPU_DF.csv --jobs JOBS.csv [...] -o INSTANCE.json``
    A round from Blox's GPU table and a job queue CSV (:func:`pal_opt.io.blox.load_blox`).
``pal-opt import slurm|k8s|graphml FILE [...] -o INSTANCE.json``
    A round on a Slurm ``topology.conf``, ``kubectl get nodes -o json`` or GraphML cluster.
``pal-opt export slurm|k8s|graphml INSTANCE.json PLACEMENT.json -o OUT``
    A placement as Slurm node lists or per-pod node assignments (:mod:`pal_opt.topology.cli`).
``pal-opt solve INSTANCE.json --method M [...] [--out PLACEMENT.json] [--quiet]``
    Place one round (:func:`pal_opt.solve.solve`) and print a summary.  On a terminal, a solve
    that runs more than 2 s shows a live line on stderr (elapsed time, and for exact methods the
    incumbent, bound and gap; :mod:`pal_opt.cliprogress`), erased before the summary; never in a
    pipe, nor with ``--quiet``.
``pal-opt check INSTANCE.json PLACEMENT.json``
    Verify a placement (:func:`pal_opt.check.check`).
``pal-opt partition PROFILE --machines M1,M2 --bandwidth B1,B2 [--straight] [--out OUT.json]``
    PipeDream's pipeline partitioner (:mod:`pal_opt.pipeline.cli`).
``pal-opt simulate-sia TRACE --cluster ... --profiles DIR --out OUT.json``
    A newTrace workload on a heterogeneous cluster under the Sia policy (:mod:`pal_opt.hetero.cli`).
``pal-opt simulate ...``
    Present when :mod:`pal_opt.simulate.cli` provides ``add_parser(subparsers)``; that
    function registers its sub-parser and sets ``func`` (``args -> exit code``) as default.

Exit codes
----------
0 success; 1 ``check`` found violations, a solver failed, or the round is infeasible (``solve
--jobs``: one line on stderr, no output file); 2 bad input or options (one line
``pal-opt: error: <file>: <field>: <what>`` on stderr, no traceback, no output file written);
130 interrupted (SIGINT).  A Ctrl-C while an exact solver runs stops the solver cleanly and
keeps the best placement found so far (the solver's incumbent, or the start placement; marked
``"interrupted": true`` in its ``info``): it is printed and written to ``--out``, and pal-opt
exits 130.  A Ctrl-C anywhere else, or a second one, writes nothing.  Output files are written
atomically, only once complete, so an interrupted or killed run leaves an existing output file
either as it was or replaced by a complete placement.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .cliargs import (
    add_method_arguments,
    cost_param,
    finite,
    job_ids,
    methods_epilog,
    nonneg_int,
    pos_int,
    solve_options,
    with_costs,
)
from .errors import BackendUnavailableError, InstanceError, OptionError, PalOptError

__all__ = ["main", "build_parser", "status_line"]

PROG = "pal-opt"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) and no ``sys.exit`` inside :func:`main`."""

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
    s.add_argument("instance", metavar="INSTANCE.json")
    add_method_arguments(s, seed_help="seed for the random policy (default 0)")
    s.add_argument(
        "--jobs", type=job_ids, default=None, metavar="ID,ID,...",
        help="exact methods: place exactly these jobs (comma-separated ids) instead of an admission rule",
    )
    s.add_argument("--cost", type=cost_param, action="append", default=None, metavar="TERM.PARAM=VALUE",
                   help="set a cost term's parameter for this solve (repeatable), e.g. migration.per_gpu=0.5")
    s.add_argument("-o", "--out", "--output", dest="out", metavar="PLACEMENT.json",
                   help="write the result as JSON (atomically); without it only the summary is printed")
    s.add_argument("--quiet", action="store_true",
                   help="no progress line on stderr (shown on a terminal once a solve has run 2 s)")
    s.set_defaults(func=_cmd_solve)

    # check
    c = sub.add_parser("check", help="verify a placement", description="Verify a placement against a round.")
    c.add_argument("instance", metavar="INSTANCE.json")
    c.add_argument("placement", metavar="PLACEMENT.json")
    c.set_defaults(func=_cmd_check)

    _add_topology(isub, sub)
    _add_simulate(sub)
    _add_simulate_sia(sub)
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
    g.add_argument("--nodes", type=pos_int, required=True, help="number of servers")
    g.add_argument("--gpus-per-node", type=pos_int, required=True, help="GPUs per server")
    g.add_argument("--jobs", type=nonneg_int, required=True, help="queue length")
    g.add_argument("--racks", type=nonneg_int, default=0, help="racks (0: flat cluster; default 0)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--locality-penalty", type=finite, default=1.7, metavar="L", help="PAL's λ (default 1.7)")
    g.add_argument("--busy-fraction", type=finite, default=0.0, metavar="F", help="share of GPUs busy (default 0)")
    g.add_argument("--failed-fraction", type=finite, default=0.0, metavar="F", help="share of GPUs failed (default 0)")
    g.add_argument(
        "--running-fraction", type=finite, default=0.0, metavar="F",
        help="probability that a queued job is already running (default 0)",
    )
    g.add_argument("--restart-cost", type=finite, default=0.0, help="cost per GPU of moving a running job (default 0)")
    g.add_argument("--binning", choices=binning_modes, default="pal-artifact", help="binning mode stored in the round")
    g.add_argument(
        "--measurements", metavar="DIR",
        help="draw factors from PAL's {resnet,bert,pagerank}-longhorn-agg.csv in DIR instead of the synthetic model",
    )
    g.add_argument("--name", help="round name")
    g.add_argument("-o", "--out", "--output", dest="output", required=True, metavar="INSTANCE.json",
                   help="file to write")
    g.set_defaults(func=_cmd_generate)



def _add_import(sub: Any, binning_modes: list[str]) -> Any:
    imp = sub.add_parser("import", help="convert another format to an instance file",
                         description="Convert another format to an instance file.")
    isub = imp.add_subparsers(dest="format", metavar="FORMAT", parser_class=_Parser)
    isub.required = True
    b = isub.add_parser("blox", help="Blox gpu_df CSV + job queue CSV",
                        description="Build a round from Blox's GPU table and a job queue CSV.")
    b.add_argument("--gpus", required=True, metavar="GPU_DF.csv", help="Blox gpu_df CSV")
    b.add_argument("--jobs", required=True, metavar="JOBS.csv", help="job queue CSV (job_id, num_gpus, perfclass or model)")
    b.add_argument("--locality-penalty", type=finite, default=1.7, metavar="L", help="PAL's λ (default 1.7)")
    b.add_argument("--binning", choices=binning_modes, default="pal-artifact", help="binning mode stored in the round")
    b.add_argument("--restart-cost", type=finite, default=0.0, help="cost per GPU of moving a running job (default 0)")
    b.add_argument("--name", help="round name (default: the GPU table's file name)")
    b.add_argument("-o", "--out", "--output", dest="output", required=True, metavar="INSTANCE.json",
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
    racks = f", {len(cl.rack_ids)} racks" if cl.racked else ""
    demand = [j.demand for j in inst.jobs]
    running = sum(1 for j in inst.jobs if j.placement is not None)
    jobs = f"{len(demand)} jobs"
    if demand:
        jobs += f" (demand {min(demand)}-{max(demand)}, total {sum(demand)}; {running} running)"
    return (
        f"{cl.num_gpus} GPUs on {cl.num_servers} servers{racks} "
        f"({free} free, {busy} busy, {failed} failed), {jobs}"
    )


def _cmd_generate(args: argparse.Namespace) -> int:
    from . import __version__
    from .generate import generate_instance
    from .io import longhorn_paths, save_instance

    meas = None
    if args.measurements:
        meas = longhorn_paths(args.measurements)
        for path in meas.values():
            if not path.is_file():
                raise InstanceError("measurement file not found", source=str(path))
    inst = generate_instance(
        args.nodes,
        args.gpus_per_node,
        args.jobs,
        racks=args.racks,
        seed=args.seed,
        locality_penalty=args.locality_penalty,
        busy_fraction=args.busy_fraction,
        failed_fraction=args.failed_fraction,
        running_fraction=args.running_fraction,
        binning=args.binning,
        restart_cost=args.restart_cost,
        measurements=meas,
        name=args.name,
    )
    settings = {
        k: getattr(args, k)
        for k in ("nodes", "gpus_per_node", "jobs", "racks", "seed", "locality_penalty", "busy_fraction",
                  "failed_fraction", "running_fraction")
    }
    if args.measurements:
        settings["variability"] = "measurements"
    meta = {"generator": f"pal-opt {__version__} generate", "settings": settings}
    save_instance(inst, args.output, meta=meta)
    print(f"wrote {args.output}: {inst.name}: {_describe(inst)}")
    return 0


def _cmd_import_blox(args: argparse.Namespace) -> int:
    from .io import load_blox, save_instance

    inst = load_blox(
        args.gpus,
        args.jobs,
        locality_penalty=args.locality_penalty,
        binning=args.binning,
        restart_cost=args.restart_cost,
        name=args.name,
    )
    save_instance(inst, args.output, meta={"imported_from": {"gpus": args.gpus, "jobs": args.jobs}})
    print(f"wrote {args.output}: {inst.name}: {_describe(inst)}")
    return 0


def _cmd_solve(args: argparse.Namespace) -> int:
    from .cliprogress import live_line
    from .errors import SolveInterrupted
    from .io import load_instance
    from .result import PlacementResult, Status
    from .solve import solve

    options = solve_options(args)
    if options.time_limit is not None:  # the limit bounds the whole command, counted from its start
        from dataclasses import replace

        from .deadline import process_started

        options = replace(options, deadline=process_started() + options.time_limit)
        _EXIT_AT_ONCE.append(True)
    inst = with_costs(load_instance(args.instance), args.cost)
    try:
        with live_line("solving", args.method, enabled=not args.quiet):  # erased before anything is printed
            result = solve(inst, method=args.method, options=options)
    except SolveInterrupted as exc:
        # the solver was stopped cleanly and handed back the best placement it had: keep it
        if not isinstance(exc.result, PlacementResult) or not exc.result.placements:
            raise
        try:
            _report(args, inst, exc.result)
        except OSError as err:  # e.g. --out in a directory that does not exist
            where = f"{err.filename}: " if getattr(err, "filename", None) else ""
            _error(f"{PROG}: interrupted; the best placement found so far could not be written: "
                   f"{where}{err.strerror or err}")
            return 130
        where = f" (written to {args.out})" if args.out else ""
        _error(f"{PROG}: interrupted: kept the best placement found so far{where}")
        return 130
    if result.status == Status.INFEASIBLE:
        ids = [str(j) for j in args.jobs or ()]
        shown = ", ".join(ids if len(ids) <= 8 else [*ids[:6], "..."])
        named = f"jobs {shown} ({len(ids)} jobs): " if ids else ""
        _error(f"{PROG}: error: infeasible round: {named}{result.message or 'no placement exists'}")
        return 1
    _report(args, inst, result)
    return 0


def _report(args: argparse.Namespace, inst: Any, result: Any) -> None:
    """Write ``result`` to ``--out`` (atomically) and print the summary."""
    from .io import atomic_write_text

    mode = result.info["binning"]  # solve() records the binning it used
    text = result.to_json() + "\n" if args.out else None
    free = inst.free_gpus
    lines = [
        ("round", f"{inst.name or args.instance}: {_describe(inst)}"),
        ("method", f"{result.method} (admission {result.admission}, binning {mode})"
         + (f", backend {result.backend} {result.backend_version or ''}".rstrip() if result.backend else "")),
        ("status", status_line(result)),
        *((("note", result.message),) if result.message and result.status.value != "infeasible" else ()),
        ("placed", f"{result.jobs_placed} of {len(inst.jobs)} jobs on {result.gpus_used} of {free} free GPUs"),
        ("slowdown", f"{result.geomean_slowdown:.4f} geometric mean, GPU-weighted"),
        ("spanning", f"{result.spanning} jobs span servers"),
        ("objective", f"{result.objective:.6f}  (sum of demand x ln slowdown)"),
    ]
    if result.bound is not None:
        gap = f", gap {100 * result.gap:.3f}%" if result.gap is not None else ""
        lines.append(("bound", f"{result.bound:.6f}{gap}"))
    if result.jobs_to_terminate:
        lines.append(("moved", f"{len(result.jobs_to_terminate)} running jobs lose or change GPUs"))
    for jid, why in result.unplaceable.items():
        lines.append(("unplaceable", f"job {jid}: {why}"))
    lines.append(("time", f"{result.solve_seconds:.3f} s solve, {result.build_seconds:.3f} s build"))
    if args.out:
        assert text is not None
        atomic_write_text(args.out, text)
        lines.append(("wrote", args.out))
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        print(f"{k:<{width}}  {v}")


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
        return f"time limit: greedy answer{below}"
    if result.bound is None:
        return "feasible (greedy: no bound)" if result.backend is None else "feasible, no bound"
    return f"feasible, gap {gap}" if gap is not None else "feasible"


def _cmd_check(args: argparse.Namespace) -> int:
    from .check import check
    from .io import load_instance, load_placement_file

    inst = load_instance(args.instance)
    doc = load_placement_file(args.placement)
    problems = check(inst, doc)
    n = len(doc.get("placements", {}))
    if problems:
        print(f"{args.placement}: INVALID ({len(problems)} violations)")
        for msg in problems:
            print(f"  {msg}")
        return 1
    print(f"{args.placement}: valid ({n} jobs placed, admission {doc.get('admission', 'given')})")
    return 0


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
        raise KeyboardInterrupt

    def __enter__(self) -> _Signals:
        import threading

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


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pal-opt`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    _robust_stdout()
    _log_warnings()
    with _Signals() as signals:
        try:
            return _main(argv, signals)
        except KeyboardInterrupt:  # raised after _main's own handlers (e.g. while reporting)
            _error(f"{PROG}: interrupted")
            return 130


def _main(argv: Sequence[str] | None, signals: _Signals) -> int:
    try:
        argv = list(argv) if argv is not None else sys.argv[1:]
        parser = _partition_parser() if argv[:1] == ["partition"] else build_parser()
        try:
            args = parser.parse_args(argv)
        except _UsageError as exc:
            _error(str(exc))
            return 2
        except SystemExit as exc:  # --help / --version
            return int(exc.code or 0) if not isinstance(exc.code, str) else 2
        return int(args.func(args))
    except KeyboardInterrupt:
        _error(f"{PROG}: interrupted")
        return 130
    except BrokenPipeError:
        # the reader of stdout went away (``pal-opt ... | head``): stop quietly, and keep
        # Python from complaining about the unflushed stdout at exit
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):  # pragma: no cover - stdout is not a file
            pass
        return 1
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


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``pal-opt`` entry point: :func:`main`, then exit with its code.

    The process ends with ``os._exit`` (after flushing) when a solver still runs in its helper
    thread (a second Ctrl-C, or a deadline, gave up on it): a C++ solver still running while the
    interpreter shuts down can abort the process (``terminate called ...``, SIGABRT); and under
    ``solve --time-limit``, whose limit bounds the whole command: the interpreter's teardown
    takes 0.2-0.6 s once a solver library is loaded.  Output files are complete and closed by then.
    """
    code = main(argv)
    base = sys.modules.get("pal_opt.ilp.backends.base")  # not imported: no solver ever ran
    if _EXIT_AT_ONCE or (base is not None and base.abandoned_solvers()):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # pragma: no cover - a closed stream
                pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
