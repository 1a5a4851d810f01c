"""What the ``pal-opt`` sub-commands share: argument types, and the flags of a placement method
mapped onto :class:`~pal_opt.options.SolveOptions` (the only place that mapping is made).

The method, backend, admission and binning choices are read from the registries and enums when
the parser is built, so a method or backend registered at run time shows in ``--help``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .errors import OptionError

__all__ = [
    "OnceParser",
    "StoreOnce",
    "BooleanOnce",
    "GIVEN_TWICE",
    "finite",
    "positive_float",
    "nonneg_float",
    "nonneg_int",
    "pos_int",
    "job_ids",
    "resolve_job_ids",
    "check_gpu_ids",
    "gpu_ids",
    "penalty",
    "input_file",
    "nonempty",
    "output_file",
    "same_file",
    "refuse_overwriting_inputs",
    "warnings_after_success",
    "check_plot_target",
    "key_value",
    "backend_param",
    "methods_epilog",
    "cost_param",
    "with_costs",
    "add_restart_arguments",
    "with_restart",
    "add_method_arguments",
    "add_exact_arguments",
    "add_output_arguments",
    "SIMULATE_PLOT_HELP",
    "solve_options",
    "solve_options_each",
    "exact_options",
]


#: What an option that takes one value says when it is given a second time in one command line.
GIVEN_TWICE = "given twice; give it once"

#: The attribute in which a parse notes the options given so far (a space in it: no option's
#: ``dest`` is this), as argparse notes unrecognised arguments; :class:`OnceParser` removes it.
_GIVEN = "options given"


def _given_once(action: argparse.Action, namespace: argparse.Namespace, option_string: str | None) -> None:
    """An ``argparse.ArgumentError`` (the parser's one-line usage error) when ``action``'s option
    was given before in this parse; a positional argument (no ``option_string``) is taken once."""
    if option_string is None:
        return
    given: set[str] = getattr(namespace, _GIVEN, set())
    setattr(namespace, _GIVEN, given)
    if action.dest in given:
        raise argparse.ArgumentError(action, GIVEN_TWICE)
    given.add(action.dest)


class StoreOnce(argparse._StoreAction):
    """argparse's ``store`` (an option's action unless ``action=`` names another), refusing the
    option a second time: ``--backend highs --backend cbc`` kept ``cbc`` without a word."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        _given_once(self, namespace, option_string)
        super().__call__(parser, namespace, values, option_string)


class BooleanOnce(argparse.BooleanOptionalAction):
    """``argparse.BooleanOptionalAction`` (``--failures``/``--no-failures``), refusing a second
    of its flags: ``--failures --no-failures`` kept the last without a word."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        _given_once(self, namespace, option_string)
        super().__call__(parser, namespace, values, option_string)


class OnceParser(argparse.ArgumentParser):
    """An argument parser whose options of one value refuse to be given twice (argparse keeps the
    last): ``store`` options (every option that takes a value, unless its ``action=`` says
    otherwise) and ``argparse.BooleanOptionalAction`` ones are made :class:`StoreOnce` and
    :class:`BooleanOnce` when added.  ``append`` and ``extend`` options repeat as before, and a
    ``store_true`` flag given twice is the same flag.  Sub-command parsers are of the same class
    (``add_subparsers`` makes its parent's class unless told another); a parent parser's options
    (``parents=``) keep the parent's actions, so make the parent a ``OnceParser`` too.  Each parse
    counts afresh, a failed one included: a namespace parsed into again starts with no option
    given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)
        self.register("action", argparse.BooleanOptionalAction, BooleanOnce)  # looked up by the class given

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        try:
            parsed, extra = super().parse_known_args(args, namespace)
        finally:  # a parse that raised (exit_on_error=False, an error() that raises) left it on the caller's
            if namespace is not None and hasattr(namespace, _GIVEN):
                delattr(namespace, _GIVEN)
        if hasattr(parsed, _GIVEN):
            delattr(parsed, _GIVEN)
        return parsed, extra


def _number(text: str, low: float | None = None, *, strict: bool = False, integer: bool = False) -> float:
    """``text`` as a finite number (an integer if ``integer``), at least (above, if ``strict``) ``low``."""
    try:
        v: float = int(text) if integer else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'an integer' if integer else 'a number'}: {text!r}") from None
    from .options import is_finite_number, shown_number

    if not is_finite_number(v):  # an integer past a float's range too (math.isfinite raised OverflowError)
        shown = repr(text) if not integer else f"'{shown_number(v)}'"
        raise argparse.ArgumentTypeError(f"{'too large' if integer else 'must be finite'}, got {shown}")
    if low is not None and (v < low or (strict and v == low)):
        raise argparse.ArgumentTypeError(f"must be {'>' if strict else '>='} {low:g}, got {text!r}")
    return v


def finite(text: str) -> float:
    """A finite number."""
    return _number(text)


def penalty(text: str) -> float:
    """A locality penalty: a slowdown multiplier from 1 to the largest factor a round holds
    (:data:`pal_opt.model.FACTOR_RANGE`)."""
    from .model import FACTOR_RANGE

    v = _number(text, 1)
    if v > FACTOR_RANGE[1]:
        raise argparse.ArgumentTypeError(f"must be at most {FACTOR_RANGE[1]:g} (a slowdown multiplier), got {text!r}")
    return v


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return _number(text, 0, strict=True)


def simulated_seconds(text: str) -> float:
    """A round length of a simulation: > 0 and at most :data:`~pal_opt.options.MAX_SIMULATED_SECONDS`."""
    from .options import MAX_SIMULATED_SECONDS

    v = _number(text, 0, strict=True)
    if v > MAX_SIMULATED_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SIMULATED_SECONDS:g} seconds, got {text!r}")
    return v


def simulated_hours(text: str) -> float:
    """Hours of simulated time: > 0 and at most :data:`~pal_opt.options.MAX_SIMULATED_SECONDS`."""
    from .options import MAX_SIMULATED_SECONDS

    v = _number(text, 0, strict=True)
    if v * 3600.0 > MAX_SIMULATED_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SIMULATED_SECONDS / 3600.0:.4g} hours, got {text!r}")
    return v


def nonneg_float(text: str) -> float:
    """A finite number >= 0."""
    return _number(text, 0)


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    return int(_number(text, 0, integer=True))


def pos_int(text: str) -> int:
    """An integer >= 1."""
    return int(_number(text, 1, integer=True))


def input_file(text: str) -> str:
    """A file (or directory) to read: not an empty name (``''`` would be read as the current
    directory, and the error could not name the file), nor ``-`` where no file is so named.

    >>> input_file("round.json")
    'round.json'
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("empty file name")
    if text == "-" and not os.path.lexists(text):  # the Unix spelling of standard input: said "-: no such file"
        raise argparse.ArgumentTypeError("'-' (standard input) is not read as such; give a file name (/dev/stdin "
                                         "reads standard input)")
    return text


def nonempty(text: str) -> str:
    """A value that is not empty or blank (a name, a host list, a resource).

    >>> nonempty("nvidia.com/gpu")
    'nvidia.com/gpu'
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty, got {text!r}")
    return text


def output_file(text: str) -> str:
    """A file to write: not empty and not an existing directory (checked before any work is done;
    whether the directory it goes in exists is each command's check).

    >>> output_file("out.json")
    'out.json'
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("empty file name")
    if text == "-":  # the Unix spelling of standard output, which was written to a file named "-"
        raise argparse.ArgumentTypeError("'-' (standard output) is not supported; give a file name (./- for a file "
                                         "named so)")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name")
    return text


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name one file: the same inode when both exist (hard and symbolic
    links included), else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def refuse_overwriting_inputs(
    outputs: Mapping[str, str | os.PathLike[str] | None],
    inputs: Iterable[tuple[str, str | os.PathLike[str] | None]],
) -> None:
    """Raise :class:`OptionError` (one line, before any work) if an output would overwrite one of
    the command's input files or another of its outputs.

    ``outputs``: ``{flag: path or None}`` (None: not asked for); ``inputs``: ``(what, path)``
    pairs, e.g. ``("INSTANCE.json", args.instance)`` (None: not given).  Paths are compared as
    files (:func:`os.path.samefile`), so ``./a.json``, an absolute path or a link to the input
    all count as the input.

    >>> refuse_overwriting_inputs({"--out": "round.json"}, [("INSTANCE.json", "./round.json")])
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: --out round.json: this is the input INSTANCE.json (./round.json), which it would overwrite; write to another file
    """
    given = [(what, path) for what, path in inputs if path is not None]
    written: list[tuple[str, str | os.PathLike[str]]] = []
    for flag, out in outputs.items():
        if out is None:
            continue
        for what, path in given:
            if same_file(out, path):
                raise OptionError(f"{flag} {os.fspath(out)}: this is the input {what} ({os.fspath(path)}), which it "
                                  "would overwrite; write to another file")
        for other, path in written:
            if same_file(out, path):
                raise OptionError(f"{flag} {os.fspath(out)}: the same file as {other}; give each output its own file")
        written.append((flag, out))


def check_outputs(
    outputs: Mapping[str, str | os.PathLike[str] | None],
    inputs: Iterable[tuple[str, str | os.PathLike[str] | None]] = (),
) -> None:
    """Raise :class:`OptionError` (one line, before any work) if an output would overwrite an
    input or another output (:func:`refuse_overwriting_inputs`), or cannot be written where it
    is asked for (its directory missing or read-only: :func:`~pal_opt.io.atomic.check_writable`),
    rather than after a solve of minutes."""
    from .io.atomic import check_writable

    refuse_overwriting_inputs(outputs, inputs)
    for flag, out in outputs.items():
        if out is None:
            continue
        try:
            check_writable(out)
        except OSError as exc:
            raise OptionError(f"{flag} {os.fspath(out)}: {exc.strerror or exc}") from None


def check_plot_target(path: str, flag: str = "--plot") -> None:
    """Raise :class:`OptionError` before any work if matplotlib (the optional ``[plot]`` extra)
    is missing or cannot write ``path``'s format (from its suffix; :func:`pal_opt.options.figure_format`)."""
    from .options import figure_format

    figure_format(path, flag)


class JobIds(list[int | str]):
    """``--jobs``: the ids parsed (integers where they parse as such), and ``typed``, the text
    of each as written, for :func:`resolve_job_ids`."""

    typed: list[str]


#: An integer as a command line writes one: ASCII digits, an optional sign (``int()`` also takes
#: '٤', Arabic-Indic four, and ``1_0``, which name no GPU or job 4 or 10 on any cluster file).
_INTEGER = re.compile(r"[+-]?[0-9]+")


def job_ids(text: str) -> JobIds:
    """Comma-separated job ids (integers where they parse as such; :func:`resolve_job_ids`
    matches them against a round's ids as written)."""
    ids = JobIds()
    ids.typed = []
    for part in text.split(","):
        t = part.strip()
        if not t:
            raise argparse.ArgumentTypeError(f"empty job id in {text!r}")
        ids.typed.append(t)
        ids.append(int(t) if _INTEGER.fullmatch(t) else t)
    return ids


def resolve_job_ids(ids: list[int | str], known: Iterable[Any], *, source: str | None = None) -> list[int | str]:
    """``--jobs`` ids matched against a round's job ids as they are stored: ``007`` is the job
    ``"007"`` when the round has one (an importer keeps such ids as text), and the job 7 only
    otherwise.  Without ``source`` an id the round does not have is left as parsed (the solve
    names it); with it (the instance file), an id that is not a job of the round, or a job named
    twice, is an :class:`OptionError` naming ``--jobs`` and the file (the solve said ``job 'x' is
    not in the queue`` and ``listed twice in jobs=``, naming neither).

    >>> resolve_job_ids(job_ids("3,x"), [3, 4], source="round.json")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: --jobs x: not a job of round.json (its 2 jobs: 3, 4)
    """
    known = list(known)
    typed = getattr(ids, "typed", None)
    names = {k for k in known if isinstance(k, str)}
    resolved = list(ids) if typed is None else [t if t in names else i for t, i in zip(typed, ids, strict=True)]
    if source is not None:
        _check_job_ids(typed or [str(i) for i in ids], resolved, known, source)
    return resolved


def _check_job_ids(written: list[str], resolved: list[int | str], known: list[Any], source: str) -> None:
    """Each ``--jobs`` id a job of the round (as the solve matches it: the id, or its text), once."""
    exact = set(known)
    by_text = {str(k): k for k in known}
    seen: dict[Any, str] = {}
    for text, jid in zip(written, resolved, strict=True):
        job = jid if jid in exact else by_text.get(str(jid), _MISSING)
        if job is _MISSING:
            shown = ", ".join(str(k) for k in known[:8]) + (", ..." if len(known) > 8 else "")
            raise OptionError(f"--jobs {text}: not a job of {source} "
                              + (f"(its {len(known)} jobs: {shown})" if known else "(its queue is empty)"))
        if job in seen:
            raise OptionError(f"--jobs: job {text} is given twice" + (f" (also as {seen[job]})" if seen[job] != text
                                                                    else ""))
        seen[job] = text


_MISSING = object()


def gpu_ids(text: str) -> list[int]:
    """Comma-separated GPU ids (integers).

    >>> gpu_ids("3, 17,4")
    [3, 17, 4]
    """
    ids: list[int] = []
    for part in text.split(","):
        t = part.strip()
        if not _INTEGER.fullmatch(t):
            raise argparse.ArgumentTypeError(f"GPU ids must be integers, got {t!r} in {text!r}")
        g = int(t)
        if g in ids:
            raise argparse.ArgumentTypeError(f"GPU {g} is given twice in {text!r}")
        ids.append(g)
    return ids


def check_gpu_ids(ids: Iterable[int], known: Mapping[int, Any] | Iterable[int], *, flag: str, source: str) -> None:
    """Each of ``ids`` (a :func:`gpu_ids` option's) a GPU of the round read from ``source``, or an
    :class:`OptionError` naming the option and the file (``repair`` said ``failed GPU 99 is not a
    GPU of the round``, naming neither).

    >>> check_gpu_ids([3, 99], {0: 0, 1: 1, 2: 2, 3: 3}, flag="--failed", source="round.json")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: --failed 99: not a GPU of round.json (its 4 GPUs have ids between 0 and 3)
    """
    have = known if isinstance(known, Mapping) else set(known)
    for g in ids:
        if g not in have:
            span = f"ids between {min(have)} and {max(have)}" if have else "no ids"
            raise OptionError(f"{flag} {g}: not a GPU of {source} (its {len(have)} GPUs have {span})")


def key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE``; VALUE is read as JSON where it parses (numbers, true/false), else a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def backend_param(text: str) -> tuple[str, Any]:
    """``--backend-param KEY=VALUE``: :func:`key_value`, whose VALUE must be one a solver takes
    (:func:`pal_opt.options.backend_value_problem`: not ``NaN``, ``Infinity``, a list or null)."""
    from .options import backend_value_problem

    key, value = key_value(text)
    problem = backend_value_problem(value)
    if problem:
        problem = problem.replace("True/False", "true/false")  # as typed here: JSON's words
        raise argparse.ArgumentTypeError(f"{text!r}: a solver parameter {problem}, got {value!r:.60}")
    return key, value


def backend_params(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The ``--backend-param`` pairs as a dict, a name given twice refused (the last one was kept,
    silently).

    >>> backend_params([("presolve", "off"), ("presolve", "on")])
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: --backend-param presolve: given twice ('off' and 'on'); give it once
    """
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise OptionError(f"--backend-param {key}: given twice ({out[key]!r:.60} and {value!r:.60}); give it once")
        out[key] = value
    return out


def cost_param(text: str) -> tuple[str, str, float]:
    """``TERM.PARAM=VALUE`` (a cost term's parameter, :mod:`pal_opt.cost`) -> (term, param, value)."""
    key, value = key_value(text)
    term, dot, param = key.partition(".")
    if not dot or not term or not param:
        raise argparse.ArgumentTypeError(f"expected TERM.PARAM=VALUE, got {text!r}")
    from .options import is_finite_number

    if not isinstance(value, (int, float)) or not is_finite_number(value):  # 400 digits too
        raise argparse.ArgumentTypeError(f"{key}: expected a finite number, got {value!r:.60}")
    return term, param, float(value)


def with_costs(instance: Any, costs: list[tuple[str, str, float]] | None) -> Any:
    """``instance`` with the ``--cost`` settings laid over its ``params.costs``."""
    if not costs:
        return instance
    from dataclasses import replace

    from .cost.registry import COST_TERMS

    merged = {k: dict(v) for k, v in instance.params.costs.items()}
    given: dict[tuple[str, str], float] = {}
    for term, param, value in costs:
        if (term, param) in given:  # the last one was kept, silently
            raise OptionError(f"--cost {term}.{param}: given twice ({given[term, param]:g} and {value:g}); give it once")
        given[term, param] = value
        if term not in COST_TERMS:  # named by the flag, before any warning and any work
            raise OptionError(f"--cost {term}.{param}={value:g}: unknown cost term {term!r}; known: "
                              f"{', '.join(COST_TERMS)}")
        try:
            COST_TERMS[term].validate_params({param: value})
        except OptionError as exc:
            raise OptionError(f"--cost {term}.{param}={value:g}: {exc}") from None
        merged.setdefault(term, {})[param] = value
    return replace(instance, params=replace(instance.params, costs=merged))


def add_restart_arguments(
    p: argparse.ArgumentParser, *, resumed: bool = False, from_instance: bool = False, round_default: str | None = None,
    simulated: bool = False,
) -> None:
    """``--restart-cost S`` and ``--round S``, in the one unit every command and the API use
    (:mod:`pal_opt.cost.restart`): seconds of work a moved job loses on each of its GPUs, priced
    by the round program as ``−ln(1 − S/R)`` per GPU for rounds of ``R`` seconds.

    ``resumed``: the command also charges a job resumed after a preemption (the simulator).
    ``from_instance``: the flags override the instance file's ``params`` (default: keep them).
    ``round_default``: what the help says ``--round`` defaults to, where the command decides it.
    ``simulated``: rounds of a simulation, at most :data:`~pal_opt.options.MAX_SIMULATED_SECONDS`.
    """
    from .options import DEFAULT_ROUND_LENGTH

    when = "is moved or resumed after a preemption" if resumed else "is moved"
    instance = "the instance's"
    p.add_argument("--restart-cost", type=nonneg_float, default=None if from_instance else 0.0, metavar="S",
                   help=f"seconds of work a running job loses on each of its GPUs when it {when} (GPU-seconds "
                        f"per GPU; default {instance if from_instance else 0}); the round program charges "
                        "-ln(1 - S/R) per GPU")
    keep = instance if from_instance else round_default  # round_default is --round's alone
    p.add_argument("--round", type=simulated_seconds if simulated else positive_float,
                   default=None if from_instance else DEFAULT_ROUND_LENGTH,
                   metavar="R", help=f"round length in seconds (default {keep or f'{DEFAULT_ROUND_LENGTH:g}'})")


def with_restart(instance: Any, restart_cost: float | None, round_length: float | None) -> Any:
    """``instance`` with ``--restart-cost`` and ``--round`` (where given) in its ``params``."""
    given = {k: v for k, v in (("restart_cost", restart_cost), ("round_length", round_length)) if v is not None}
    if not given:
        return instance
    from dataclasses import replace

    restart = given.get("restart_cost", instance.params.restart_cost)
    length = given.get("round_length", instance.params.round_length)
    if restart >= length:  # named by the flags (the round's own check would name params.restart_cost)
        cost = "--restart-cost" if "restart_cost" in given else "the round's params.restart_cost"
        where = "--round" if "round_length" in given else "the round's params.round_length"
        raise OptionError(f"{cost} {restart:g} must be below the round length ({length:g} s, {where}): "
                          "a move would lose the whole round")
    return replace(instance, params=replace(instance.params, **given))


def methods_epilog() -> str:
    """The registered methods, one line each, for ``--help``."""
    from .methods import METHODS

    width = max(len(n) for n in METHODS)
    lines = [f"  {name:<{width}}  {m.summary}" for name, m in METHODS.items()]
    return "methods:\n" + "\n".join(lines)


def _backend_choices() -> list[str]:
    """The backend names: the registry's, in preference order, if it is loaded (a backend
    registered at run time has loaded it); else the built-in ones, without importing a solver
    or numpy (``--help`` stays fast)."""
    from .options import BackendName

    registry = sys.modules.get("pal_opt.ilp.backends")
    if registry is None:
        return [b.value for b in BackendName]
    return list(registry.backend_names())


def method_list(names: tuple[str, ...], noun: str = "method") -> Any:
    """An argparse type: comma-separated method names, in the order given; a name given twice is
    refused (a typo more often than an intent, and the results would be keyed by name).  ``noun``
    is what the flag calls one (``policy`` for ``--policy``), in its messages and placeholder."""
    metavar = noun.upper()

    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",")]
        if not text.strip() or any(not t for t in items):
            raise argparse.ArgumentTypeError(f"expected {metavar}[,{metavar}...], got {text!r}")
        for t in items:
            if t not in names:
                raise argparse.ArgumentTypeError(f"unknown {noun} {t!r} (choose from {', '.join(names)})")
        twice = next((t for k, t in enumerate(items) if t in items[:k]), None)
        if twice is not None:
            raise argparse.ArgumentTypeError(f"{noun} {twice!r} given twice in {text!r}")
        return items

    return parse


def add_method_arguments(
    p: argparse.ArgumentParser, *, flag: str = "--method", seed_help: str | None = None, binning: bool = True,
    time_limit_default: float | None = None, multiple: bool = False, extra: tuple[str, ...] = (),
    time_limit_help: str | None = None, default: str | None = "pal", default_help: str = "pal",
) -> None:
    """The method flag and the options of the exact methods (``--backend``, ``--time-limit``...).

    ``default``: the method when the flag is not given (None: the caller chooses later, and
    ``default_help`` says how).

    ``time_limit_help``: the help of ``--time-limit``, where the default depends on more than
    ``time_limit_default``.

    ``multiple``: the flag takes comma-separated methods (a list; see :func:`solve_options_each`).
    ``extra``: names accepted besides the registered methods (``simulate``'s ``sia``).
    """
    from .methods import method_names
    from .options import Binning

    names = (*method_names(), *(e for e in extra if e not in method_names()))
    if multiple:
        noun = flag.lstrip("-")  # --policy: a policy, as simulate-sia and SimConfig(policy=) say
        p.add_argument(flag, type=method_list(names, noun), default=default, metavar=f"{noun.upper()}[,{noun.upper()}...]",
                       help=f"placement {noun}, or several separated by commas (each runs in turn and the outputs "
                            "compare them), of: " + ", ".join(names) + f" (default {default_help})")
    else:
        p.add_argument(flag, choices=names, default=default, metavar="METHOD",
                       help="placement method, one of: " + ", ".join(names) + f" (default {default_help})")
    if seed_help is not None:
        p.add_argument("--seed", type=nonneg_int, default=None, help=seed_help)
    if binning:
        p.add_argument("--binning", choices=[b.value for b in Binning], default=None,
                       help="override the round's binning mode")
    add_exact_arguments(p, time_limit_default=time_limit_default, time_limit_help=time_limit_help)


def add_exact_arguments(
    p: argparse.ArgumentParser, *, admission: bool = True, parts: bool = True, time_limit_default: float | None = None,
    time_limit_help: str | None = None,
) -> None:
    """The options of the exact methods, in their own group: ``--backend``, ``--time-limit``,
    ``--gap``, ``--threads``, ``--backend-param`` and, unless turned off, ``--parts``; and, unless
    turned off, ``--admission`` among the general options (every method but the preemptive ones
    takes it).  ``time_limit_help`` replaces the help of ``--time-limit``."""
    from .options import Admission

    backends = _backend_choices()
    if admission:
        p.add_argument("--admission", choices=[a.value for a in Admission], default=None,
                       help="queue rule: prefix stops at the first job that does not fit (the exact methods' "
                            "default; pal and pmfirst stop in PAL's order, packed and random in queue order), "
                            "backfill skips it; not for the preemptive methods")
    ex = p.add_argument_group("integer program options (exact methods only)" if admission else "solver options")
    ex.add_argument("--backend", choices=backends, default=None,
                    help=f"solver, one of: {', '.join(backends)} (default: the first installed)")
    limit = ("wall-clock seconds for the whole command, counted from its start: the best answer by "
             "then, at worst the greedy one (default: none, until proven optimal or --gap)"
             if time_limit_default is None else
             f"wall-clock seconds per round (default {time_limit_default:g})")
    ex.add_argument("--time-limit", type=positive_float, default=None, metavar="S", help=time_limit_help or limit)
    ex.add_argument("--gap", type=nonneg_float, default=None, metavar="G",
                    help="relative gap target on the geometric-mean slowdown, a fraction: 0.01 is 1%% "
                         "(default 0: proven optimal)")
    ex.add_argument("--threads", type=pos_int, default=None, metavar="T", help="solver threads (default: each solver's own default)")
    ex.add_argument("--backend-param", type=backend_param, action="append", default=None, metavar="KEY=VALUE",
                    help="pass an option straight to the solver (repeatable, each option once), e.g. presolve=off")
    if parts:
        ex.add_argument("--parts", type=pos_int, default=None, metavar="K",
                        help="ilp-partitioned: number of parts (default: one per ~1,024 GPUs)")
        ex.add_argument("--scheduler", dest="executor", default=None, metavar="ADDRESS",
                        help="ilp-partitioned: solve the parts on this Dask scheduler (tcp://host:8786) "
                             "instead of a local process pool; needs pal-opt[dask]")


#: ``--plot`` of ``simulate`` and ``simulate-sia``: the figure both draw (pal_opt.simulate.metrics.plot_result).
SIMULATE_PLOT_HELP = ("one figure: the JCT CDF and the utilisation per round, one line per policy, and with several "
                      "policies each job's JCT against the first's (the format from the suffix; written with --out, "
                      "all or none; needs matplotlib: pip install 'pal-opt[plot]')")


def add_output_arguments(p: argparse.ArgumentParser, *, what: str = "the result") -> None:
    """``-o/--out`` (write the result as JSON, atomically) and ``--quiet`` (no progress line)."""
    p.add_argument("-o", "--out", "--output", dest="out", type=output_file, metavar="PLACEMENT.json",
                   help=f"write {what} as JSON (atomically); without it only the summary is printed")
    p.add_argument("--quiet", action="store_true",
                   help="no progress line on stderr (shown on a terminal once a solve has run 2 s)")
    p.add_argument("--show-jobs", action="store_true",
                   help="after the summary, a line per queued job: its GPUs by server, slowdown, and whether it "
                        "starts, keeps its GPUs, moves, is preempted, waits or cannot be placed")
    p.add_argument("--plot", default=None, type=output_file, metavar="PNG",
                   help=f"draw {what}: the jobs on each server's GPUs, each GPU's factor for its job, and the "
                        "jobs by slowdown (the format from the suffix; written with --out, all or none; needs "
                        "matplotlib: pip install 'pal-opt[plot]')")


def solve_options(
    args: argparse.Namespace, method_flag: str = "method", names: tuple[str, ...] | None = None, **extra: Any
) -> Any:
    """The :class:`~pal_opt.options.SolveOptions` that the parsed flags ask for, checked against
    the chosen method (an option of another method is an :class:`OptionError` naming the flag).
    ``names`` limits the flags read (default: all of them)."""
    from .methods import get_method
    from .options import SolveOptions

    method = get_method(getattr(args, method_flag))
    given = {**extra, **_given_options(args, names)}
    bad = sorted(set(given) - set(method.options) - set(extra))
    if bad:
        raise OptionError(f"option(s) {_flags(bad)} do not apply to method {method.name!r}")
    return SolveOptions.from_kwargs(**given)


def _given_options(args: argparse.Namespace, names: tuple[str, ...] | None) -> dict[str, Any]:
    """The :class:`~pal_opt.options.SolveOptions` fields the parsed flags set."""
    given: dict[str, Any] = {}
    if names is None:  # an empty tuple reads no flag (a method that takes none of those asked for)
        names = ("seed", "binning", "backend", "admission", "time_limit", "gap", "threads", "parts", "executor")
    for name in names:
        v = getattr(args, name, None)
        if v is not None:
            given[name] = v
    if getattr(args, "backend_param", None):
        given["backend_params"] = backend_params(args.backend_param)
    if getattr(args, "jobs", None) is not None:
        given["jobs"] = args.jobs
    if getattr(args, "ignore_types", False):
        given["respect_types"] = False
    if getattr(args, "canonical", False):
        given["canonical"] = True
    return given


def _flags(names: list[str]) -> str:
    return ", ".join("--" + b.replace("_", "-").replace("backend-params", "backend-param")
                     .replace("respect-types", "ignore-types").replace("executor", "scheduler") for b in names)


def solve_options_each(
    args: argparse.Namespace, methods: list[str], method_flag: str = "method", names: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """:func:`solve_options` for each of several methods: a flag applies to the methods that take it
    (``--backend`` to the exact ones); a flag that none of them takes is an :class:`OptionError`."""
    from .methods import get_method

    if len(methods) == 1:
        one = argparse.Namespace(**{**vars(args), method_flag: methods[0]})
        return {methods[0]: solve_options(one, method_flag, names)}
    names = names or ("seed", "binning", "backend", "admission", "time_limit", "gap", "threads", "parts", "executor")
    given = {n for n in names if getattr(args, n, None) is not None}
    if getattr(args, "backend_param", None):
        given.add("backend_params")
    taken = set().union(*(get_method(m).options for m in methods))
    bad = sorted(given - taken)
    if bad:
        raise OptionError(f"option(s) {_flags(bad)} do not apply to methods {', '.join(map(repr, methods))}")
    out = {}
    for m in methods:
        opts = get_method(m).options
        ns = argparse.Namespace(**{**vars(args), method_flag: m})
        if "backend_params" not in opts:
            ns.backend_param = None
        out[m] = solve_options(ns, method_flag, tuple(n for n in names if n in opts))
    return out


def exact_options(args: argparse.Namespace) -> Any:
    """The :class:`~pal_opt.options.SolveOptions` of a command without a method flag (``pal-opt
    repair``): the flags of :func:`add_exact_arguments` and ``--binning``."""
    from .options import SolveOptions

    return SolveOptions.from_kwargs(**_given_options(args, ("binning", "backend", "time_limit", "gap", "threads")))


@contextlib.contextmanager
def warnings_after_success() -> Iterator[None]:
    """Hold the package's warnings (``pal_opt`` loggers) while the block runs; log them when it
    ends normally and drop them when it raises, so that a command that fails late (an instance
    refused as it is written) prints its one error line and nothing else."""
    logger = logging.getLogger("pal_opt")
    held: list[logging.LogRecord] = []

    class _Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            held.append(record)

    saved = logger.handlers[:]
    hold = _Hold(logging.WARNING)
    logger.handlers = [hold]
    try:
        yield
    finally:
        logger.handlers = saved
    for record in held:
        logger.handle(record)
