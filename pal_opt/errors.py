"""The package's one exception tree.

Every error pal-opt raises on purpose derives from :class:`PalOptError`.  Errors about
input carry the file, the field path and what is wrong, so the CLI can print them as one
line and exit with status 2.
"""

from __future__ import annotations

import copy
import errno
import os

__all__ = [
    "PalOptError",
    "InstanceError",
    "TableError",
    "InputTypeError",
    "MissingFileError",
    "OptionError",
    "NoRoundYet",
    "UnknownJobError",
    "BackendUnavailableError",
    "BackendError",
    "InfeasibleRoundError",
    "InfeasiblePartitionError",
    "TimeLimitReached",
    "SolveInterrupted",
    "one_line",
    "counted",
    "with_article",
]


class PalOptError(Exception):
    """Base class of every error raised by pal-opt."""


class InstanceError(PalOptError, ValueError):
    """Bad input: a malformed instance, importer file, trace or in-memory object.

    Parameters
    ----------
    message
        What is wrong, quoting the bad value where that helps.
    source
        The file (or ``"<memory>"``) the value came from.
    path
        The field path inside it, e.g. ``jobs[3].demand`` or ``row 7, column num_gpus``.

    Examples
    --------
    >>> str(InstanceError("must be a positive integer, got -2", source="a.json", path="jobs[3].demand"))
    'a.json: jobs[3].demand: must be a positive integer, got -2'
    """

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None):
        self.message = message
        self.source = source
        self.path = path
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return one_line(self.message, source=self.source, path=self.path)

    def with_source(self, source: str) -> InstanceError:
        """Return a copy of this error that names ``source`` as the file (a subclass's own
        attributes kept)."""
        err = copy.copy(self)
        err.source = source
        err.args = (str(err),)
        return err


#: Longest source, path or message shown by ``str(InstanceError)``; longer ones (a hostile file
#: can quote a megabyte-long cell) are cut in the middle.  The attributes keep the full text.
MAX_PART_CHARS = 300


def _shorten(text: str, limit: int = MAX_PART_CHARS) -> str:
    """``text`` cut in the middle to at most about ``limit`` characters.

    >>> _shorten("a" * 10 + "b" * 10, 12)
    'aaaaaa[...8 characters cut...]bbbbbb'
    """
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}[...{len(text) - 2 * keep:,} characters cut...]{text[-keep:]}"


def one_line(message: str, *, source: str | None = None, path: str | None = None) -> str:
    """``source: path: message`` (parts that are None or empty left out, each shortened), the line
    an :class:`InstanceError` prints and an importer's warning about a table logs.

    >>> one_line("is not used", source="q.csv", path="line 3")
    'q.csv: line 3: is not used'
    """
    parts = [_shorten(p) for p in (source, path) if p]
    return ": ".join([*parts, _shorten(message)])


def counted(n: int, noun: str) -> str:
    """``n noun`` with the noun plural unless ``n`` is 1, for messages that give a count.

    >>> counted(1, "GPU"), counted(2, "GPU"), counted(0, "job")
    ('1 GPU', '2 GPUs', '0 jobs')
    """
    return f"{n} {noun}{'' if n == 1 else 's'}"


def with_article(noun: str) -> str:
    """``noun`` after "a" or, before a vowel letter, "an", for messages that name what was expected.

    >>> with_article("GPU table"), with_article("instance file"), with_article("Application")
    ('a GPU table', 'an instance file', 'an Application')
    """
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


class TableError(InstanceError):
    """An :class:`InstanceError` about a row of an input table (a cell of it, with
    ``column``), holding the row and column as well as naming them in ``path``, so that a caller
    can tell where without reading the text (as :class:`pal_opt.io.csvfile.TableNote` does for warnings).

    Attributes
    ----------
    row
        The line (a file) or 0-based row (a frame) the error is about, or None.
    column
        The column the message names (a file's, as its header writes it; a jobs table's known
        column, by its standard name), or None (the whole row).

    Examples
    --------
    >>> err = TableError("must be a positive integer, got '0'", source="jobs", path="row 2, column num_gpus",
    ...                  row=2, column="num_gpus")
    >>> str(err), err.row, err.column
    ("jobs: row 2, column num_gpus: must be a positive integer, got '0'", 2, 'num_gpus')
    """

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None,
                 row: int | None = None, column: str | None = None) -> None:
        super().__init__(message, source=source, path=path)
        self.row = row
        self.column = column


class InputTypeError(InstanceError, TypeError):
    """An argument of the wrong type given to the public API (``None`` or a number for a file
    path, a dict for a round, a string for a cost...), naming the argument in ``path``.

    An :class:`InstanceError` like any bad input, and a :class:`TypeError` as well, so that code
    which caught the ``TypeError`` such a call raised from inside pal-opt keeps working.

    Examples
    --------
    >>> err = InputTypeError("must be a file path (a str or os.PathLike), got NoneType", path="path")
    >>> str(err), isinstance(err, TypeError), isinstance(err, PalOptError)
    ('path: must be a file path (a str or os.PathLike), got NoneType', True, True)
    """


class MissingFileError(InstanceError, FileNotFoundError):
    """A file to read that does not exist (or a symbolic link that leads nowhere), naming it in
    ``source`` (and in ``filename``, as a ``FileNotFoundError`` does).

    An :class:`InstanceError` like any bad input (the CLI prints it in one line and exits with
    status 2), and a :class:`FileNotFoundError` as well (``errno`` ``ENOENT``), so that code which
    caught the ``FileNotFoundError`` a reader raised before keeps working.

    Examples
    --------
    >>> err = MissingFileError.of("runs/a.json")
    >>> str(err), err.filename, isinstance(err, FileNotFoundError), isinstance(err, PalOptError)
    ('runs/a.json: no such file', 'runs/a.json', True, True)
    """

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None):
        super().__init__(message, source=source, path=path)
        self.errno, self.strerror, self.filename = errno.ENOENT, os.strerror(errno.ENOENT), source

    @staticmethod
    def reading(exc: OSError, message: str, *, source: str | None = None, path: str | None = None) -> InstanceError:
        """The error for an ``OSError`` that reading ``source`` raised: a :class:`MissingFileError`
        if it was a ``FileNotFoundError`` (or is one already), else an :class:`InstanceError`;
        ``message`` is what could not be done, followed by the system's reason."""
        cls = MissingFileError if isinstance(exc, FileNotFoundError) else InstanceError
        return cls(f"{message}: {exc.strerror or exc}", source=source, path=path)

    @classmethod
    def of(cls, file: str | os.PathLike[str], what: str = "file") -> MissingFileError:
        """The error for ``file``, which does not exist: ``no such <what>``, or a link that leads nowhere."""
        name = os.fspath(file)
        why = f"a symbolic link that leads nowhere (expected {with_article(what)})" \
            if os.path.islink(name) else f"no such {what}"
        return cls(why, source=str(name))

    def __reduce__(self) -> tuple[object, ...]:
        return (_missing_file, (self.message, self.source, self.path))


def _missing_file(message: str, source: str | None, path: str | None) -> MissingFileError:
    return MissingFileError(message, source=source, path=path)


class OptionError(PalOptError, ValueError):
    """An unknown method, backend option or parameter value."""


class NoRoundYet(OptionError, AttributeError):
    """A policy's last round asked for before it placed one (``RoundPolicy.last_round``).

    Also an :class:`AttributeError`, so that ``hasattr(policy, "last_round")``,
    ``getattr(policy, "last_round", None)`` and :func:`inspect.getmembers` treat the property as
    absent until the first round instead of raising."""


class UnknownJobError(OptionError, KeyError):
    """A job looked up by a name that is not there (``plan[name]`` of a
    :class:`~pal_opt.hetero.scheduler.RoundPlan`, a :class:`~pal_opt.hetero.scheduler.TypedScheduler`
    call about a job never submitted or removed).

    Also a :class:`KeyError`, as a lookup by a missing key is, so that ``except KeyError`` keeps
    working; its text is the message as written, without the quotes a ``KeyError`` adds.

    Examples
    --------
    >>> err = UnknownJobError("job 'b' is not in this round's plan")
    >>> str(err), isinstance(err, KeyError), isinstance(err, OptionError)
    ("job 'b' is not in this round's plan", True, True)
    """

    def __str__(self) -> str:
        return Exception.__str__(self)


class BackendUnavailableError(PalOptError, ImportError):
    """A solver backend that is not installed or cannot be imported."""


class BackendError(PalOptError, RuntimeError):
    """A solver backend that crashed or returned something unusable."""


class InfeasibleRoundError(PalOptError):
    """A round whose admitted jobs cannot all be placed (e.g. failed GPUs)."""

    def __init__(self, message: str, jobs: tuple[object, ...] = ()):
        self.jobs = jobs
        super().__init__(message)


class InfeasiblePartitionError(PalOptError):
    """A pipeline partition that cannot exist for a valid profile and machine tree (e.g. a
    straight pipeline with more workers than the model has cut points in a chain).

    Not bad input: the profile and the options are each valid, but no partition satisfies them.
    ``pal-opt partition`` reports it as ``infeasible partition: ...`` with exit status 1.
    """


class TimeLimitReached(PalOptError):
    """A stage of a solve that cannot finish before the solve's deadline (:mod:`pal_opt.deadline`).

    Raised inside a solve and handled there: the solve returns the best answer it already has
    (the greedy placement of the admitted jobs, with the best bound known).  It reaches callers
    only from lower-level functions given a deadline (e.g.
    :func:`pal_opt.ilp.formulation.build_formulation`).

    Attributes
    ----------
    stage
        What could not be done, e.g. ``"building the program"``.
    need, left
        Seconds the stage needed (an estimate; 0 when the deadline had simply passed) and seconds
        that were left.
    """

    def __init__(self, stage: str, *, need: float = 0.0, left: float = 0.0):
        self.stage, self.need, self.left = stage, need, left
        why = f"about {need:.2g} s needed, {max(left, 0.0):.2g} s left" if need > 0 else "the deadline passed"
        super().__init__(f"time limit reached before {stage} ({why})")

    def __reduce__(self) -> tuple[object, ...]:
        return (_time_limit_reached, (self.stage, self.need, self.left))


def _time_limit_reached(stage: str, need: float, left: float) -> TimeLimitReached:
    return TimeLimitReached(stage, need=need, left=left)


class SolveInterrupted(KeyboardInterrupt):
    """A Ctrl-C (``KeyboardInterrupt``) that stopped an exact solve, with what it had found.

    The solver was asked to stop and had stopped before this was raised (its helper thread
    ended, its process exited).  It derives from ``KeyboardInterrupt`` (not :class:`PalOptError`), so code that
    handles Ctrl-C keeps working unchanged; code that wants the partial answer catches it.

    Attributes
    ----------
    result
        The best placement found before the interrupt, as a complete
        :class:`~pal_opt.result.PlacementResult` with ``info["interrupted"]`` True: usually
        ``FEASIBLE`` (the solver's incumbent, or the start placement when that is cheaper) or
        ``FALLBACK`` (the start placement; the solver had none), ``OPTIMAL`` if the solve ended
        as the interrupt arrived; or None when nothing was found yet.
    """

    def __init__(self, result: object | None = None):
        self.result = result
        super().__init__("solve interrupted" + ("" if result is None else "; the best placement so far is attached"))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.result,))
