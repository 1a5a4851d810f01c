"""Guarded CSV reading: :func:`read_csv` and :class:`CsvTable`'s cell parsers.

On top of :func:`~pal_opt.io.textfile.read_text`'s guards (size, encoding, binary), a CSV file
is rejected for more cells than a limit (4 million, counted on the text before parsing), ragged
rows, bad quoting, or a header with no rows.  The cell parsers of :class:`CsvTable` turn a bad
cell into a :class:`~pal_opt.errors.TableError`, an :class:`~pal_opt.errors.InstanceError` naming the file, line
and column, which also holds the row and column for a caller that must tell where (the Blox
adapter names the job of a row of its jobs frame).  The same
table can wrap a pandas DataFrame (:meth:`CsvTable.from_frame`), so files and frames follow one
set of rules.  :func:`unused_column_note` words the warning an importer logs for a column
it does not use but whose name is close to one it would (``priorty`` for ``priority``).  An
importer's warnings about a table are :class:`TableNote` objects: the line logged, and its kind,
row and columns for a caller that must tell warnings apart (:mod:`pal_opt.adapters.blox` logs
each once in its life, though it imports a table every round).
"""

from __future__ import annotations

import csv
import difflib
import enum
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InstanceError, TableError, one_line, with_article
from ..model import plain_text
from .textfile import DEFAULT_MAX_BYTES, DEFAULT_MAX_CELLS, MAX_INT_DIGITS, read_text, refuse_markup

__all__ = ["CsvTable", "read_csv", "TableError", "NoteKind", "TableNote", "misspelt_column_note",
           "unused_column_note", "cell_place", "separator_hint", "MISSPELLING_CUTOFF"]


class CsvTable:
    """A CSV file read by :func:`read_csv`: header, rows, and error helpers naming file, line, column.

    Attributes
    ----------
    source
        The file name used in messages.
    header
        Column names as written (stripped).
    rows
        ``(line number, fields)`` per non-blank data row; line numbers count the header as line 1.
    """

    def __init__(
        self, source: str, header: list[str], rows: list[tuple[int, list[str]]], row_label: str = "line"
    ):
        self.source = source
        self.header = header
        self.rows = rows
        self.row_label = row_label
        seen: dict[str, str] = {}
        #: columns named twice (in any case): refused when a reader asks for one (:meth:`find`,
        #: :meth:`unique`); the last copy won, a wrong answer with exit 0 (bad-input review).  A
        #: column no reader uses may repeat (``note,note``).
        self._twice: dict[str, tuple[str, str]] = {}
        for h in header:
            first = seen.get(h.lower())
            if h and first is not None:
                self._twice.setdefault(h.lower(), (first, h))
            seen[h.lower()] = h
        self._index = {h: i for i, h in enumerate(header)}
        self._lower = {h.lower(): i for i, h in reversed(list(enumerate(header)))}

    def find(self, *names: str) -> int | None:
        """Index of the first of ``names`` present (exact match, then case-insensitive), or None;
        a column named twice is an :class:`InstanceError` on the header."""
        for n in names:
            if n in self._index:
                return self.unique(self._index[n])
        for n in names:
            if n.lower() in self._lower:
                return self.unique(self._lower[n.lower()])
        return None

    def unique(self, col: int) -> int:
        """``col``, unless another column has its name (in any case): then an :class:`InstanceError`."""
        twice = self._twice.get(self.header[col].lower())
        if twice is not None:
            first, second = twice
            what = (f"column {first!r} appears twice" if first == second else
                    f"column {first.lower()!r} appears twice ({first!r} and {second!r}; column names are "
                    "case-insensitive)")
            raise InstanceError(what, source=self.source, path="row 1" if self.row_label == "row" else "header")
        return col

    def column(self, *names: str) -> int:
        """Like :meth:`find`, but a missing column is an :class:`InstanceError` on ``header``."""
        i = self.find(*names)
        if i is None:
            alts = " or ".join(repr(n) for n in names)
            raise InstanceError(f"missing column {alts}; columns are: {', '.join(self.header)}"
                                + separator_hint(self.header), source=self.source, path="header")
        return i

    @classmethod
    def from_frame(cls, df: Any, source: str) -> CsvTable:
        """A table over an in-memory pandas DataFrame, parsed by the same cell rules as a file.

        Cells become their ``str`` (floats print round-trip exact); None and NaN become empty.
        Errors name ``row N`` (0-based, the frame's position) instead of a line.
        """
        import pandas as pd

        if not isinstance(df, pd.DataFrame):
            raise InstanceError(f"expected a pandas DataFrame, got {type(df).__name__}", source=source)
        header = [_cell_text(c).strip() for c in df.columns]
        cells = df.astype(object).where(df.notna(), "").to_numpy().tolist()
        rows = [(i, [c if isinstance(c, str) else _cell_text(c) for c in r]) for i, r in enumerate(cells)]
        return cls(source, header, rows, row_label="row")

    def unused_column_note(self, known: Iterable[str], optional: Sequence[Sequence[str]]) -> str | None:
        """:func:`unused_column_note` for this table's header."""
        return unused_column_note(self.source, self.header, known, optional)

    def misspelt_column_note(self, known: Iterable[str], optional: Sequence[Sequence[str]]) -> TableNote | None:
        """:func:`misspelt_column_note` for this table's header."""
        return misspelt_column_note(self.source, self.header, known, optional)

    def where(self, line: int, col: int | None = None) -> str:
        """A cell's place as messages name it: ``line 4, column num_gpus`` (``row 3`` in a frame)."""
        return cell_place(self.row_label, line, None if col is None else self.header[col])

    def error(self, line: int, col: int | None, message: str) -> TableError:
        """A :class:`TableError` about a row (and a cell of it, ``col``), named as :meth:`where` names it."""
        column = None if col is None else self.header[col]
        return TableError(message, source=self.source, path=self.where(line, col), row=line, column=column)

    def note(self, kind: NoteKind, line: int, message: str, col: int | None = None) -> TableNote:
        """A :class:`TableNote` about a row (and a cell of it, ``col``), named as :meth:`error` names it."""
        columns = () if col is None else (self.header[col],)
        return TableNote(kind, message, self.source, self.where(line, col), line, columns)

    # cell parsers: each raises a TableError naming file, line and column
    def integer(self, line: int, col: int, text: str, *, minimum: int | None = None, what: str = "an integer") -> int:
        """An integer cell; ``"4.0"`` (as pandas writes integers beside blanks) reads as 4."""
        v = _cell_int(text)
        if v is None:
            raise self.error(line, col, f"must be {what}, got {_q(text)}")
        if abs(v) > 2**63 - 1:
            raise self.error(line, col, f"must be {what} that fits in 64 bits, got {_q(text)}")
        if minimum is not None and v < minimum:
            raise self.error(line, col, f"must be {what}, got {_q(text)}")
        return v

    def number(
        self, line: int, col: int, text: str, *, positive: bool = False, minimum: float | None = None
    ) -> float:
        """A finite float cell (``nan``, ``inf`` and overflowing literals are errors), optionally
        positive or at least ``minimum``."""
        try:
            v = float(text) if len(text) <= 64 and _FLOAT.fullmatch(text.strip()) else float(_NOT_A_NUMBER)
        except ValueError:
            raise self.error(line, col, f"must be a number, got {_q(text)}") from None
        if not math.isfinite(v):
            raise self.error(line, col, f"must be a finite number, got {_q(text)}")
        if positive and v <= 0:
            raise self.error(line, col, f"must be a positive number, got {_q(text)}")
        if minimum is not None and v < minimum:
            raise self.error(line, col, f"must be at least {minimum:g}, got {_q(text)}")
        return v

    def boolean(self, line: int, col: int, text: str, *, blank: bool | None = False) -> bool:
        """True/False, 1/0, yes/no (any case); a blank cell reads as ``blank`` (error if None)."""
        t = text.strip().lower()
        if not t and blank is not None:
            return blank
        if t in _TRUE:
            return True
        if t in _FALSE:
            return False
        raise self.error(line, col, f"must be true or false, got {_q(text)}")

    def ident(self, line: int, col: int, text: str) -> int | str:
        """An id: an integer if the cell is one as written (``"3"``, ``"3.0"``, as pandas writes a
        float column), else the non-empty text (:func:`integer_id`)."""
        if not text:
            raise self.error(line, col, "must not be empty")
        v = integer_id(text)
        if v is None and not plain_text(text):  # the model refuses it too, without the file and line
            raise self.error(line, col, f"must be text without a control character (tab, line break), lone surrogate "
                                        f"or non-character, got {_q(text)}")
        return text if v is None else v


#: How close (:class:`difflib.SequenceMatcher` ratio, names lower-cased) an unused column's name
#: must be to an optional column's for :func:`unused_column_note` to take it for a misspelling:
#: ``priorty``/``priority`` is 0.93, ``categry``/``category`` 0.93, while the columns the real
#: files carry and no reader uses stay far below (``submit_time``/``start_time`` 0.67,
#: ``GPU_UUID``/``GPU_TYPE`` 0.5).
MISSPELLING_CUTOFF = 0.8


class NoteKind(enum.StrEnum):
    """What a :class:`TableNote` is about."""

    #: columns that look like misspelt optional ones (:func:`misspelt_column_note`)
    MISSPELT_COLUMN = "misspelt-column"
    #: a column that only annotates the round, set aside for a cell it cannot use (Blox's ``Local_GPU_ID``)
    COLUMN_SET_ASIDE = "column-set-aside"
    #: a job needing more GPUs than the cluster has (kept in the queue, unplaceable)
    OVERSIZED_JOB = "oversized-job"


@dataclass(frozen=True)
class TableNote:
    """A warning about an input table that does not stop its import, with what it is about.

    ``str(note)`` is the line logged, in the shape of an :class:`~pal_opt.errors.InstanceError`
    (``source: path: message``); the other fields say the same for a program, so that a caller
    that imports a table every round (the Blox adapter) can tell one warning from another
    without reading the text.

    Attributes
    ----------
    kind
        What the warning is about (:class:`NoteKind`).
    message
        What is wrong, without where.
    source
        The file (or frame) as messages name it.
    path
        Where in it, as an error names a cell (``line 4``, ``row 2, column Local_GPU_ID``), or None.
    row
        The line (a file) or 0-based row (a frame) the warning is about, or None (the header).
    columns
        The columns it is about, as the header writes them (empty: a whole row).

    Examples
    --------
    >>> note = misspelt_column_note("q.csv", ["job_id", "priorty"], ["job_id"], [("priority",)])
    >>> str(note)
    "q.csv: column 'priorty' is not used; did you mean 'priority'?"
    >>> note.kind, note.columns
    (<NoteKind.MISSPELT_COLUMN: 'misspelt-column'>, ('priorty',))
    """

    kind: NoteKind
    message: str
    source: str
    path: str | None = None
    row: int | None = None
    columns: tuple[str, ...] = ()

    def __str__(self) -> str:
        return one_line(self.message, source=self.source, path=self.path)


def misspelt_column_note(
    source: str, header: Iterable[str], known: Iterable[str], optional: Sequence[Sequence[str]]
) -> TableNote | None:
    """The warning for a file's columns that look like misspellings of optional ones, or None.

    A column the reader does not use is ignored (real files carry columns nobody reads: the
    unnamed index, ``GPU_UUID`` and ``IP_addr`` of a Blox ``gpu_df``, ``submit_time`` and
    ``duration`` of a Sia-Philly trace read as a queue); but one whose name is within
    :data:`MISSPELLING_CUTOFF` of an optional column the file lacks is most likely that column
    misspelt, and its cells would be dropped without a word.  One line names them all; the
    note's ``columns`` are those columns, as the header writes them.

    Parameters
    ----------
    source
        The file, as messages name it.
    header
        The file's column names.
    known
        Every name the reader takes (required and optional, aliases included): never reported.
    optional
        The optional columns, each with its aliases (``("priority", "job_priority")``); a column
        of which the file has any alias is not a candidate.  Names compare case-insensitively.
    """
    columns = [h for h in header if h]
    present = {h.lower() for h in columns}
    taken = {n.lower() for n in known} | {n.lower() for group in optional for n in group}
    spelled: dict[str, str] = {}  # lower-cased candidate -> as the reader names it
    for group in optional:
        if not any(n.lower() in present for n in group):
            for n in group:
                spelled.setdefault(n.lower(), n)
    found: list[tuple[str, str]] = []
    for h in columns:
        if h.lower() in taken:
            continue
        close = difflib.get_close_matches(h.lower(), list(spelled), n=1, cutoff=MISSPELLING_CUTOFF)
        if close:
            found.append((h, spelled[close[0]]))
    if not found:
        return None
    written = ", ".join(repr(h) for h, _ in found)
    meant = ", ".join(repr(n) for _, n in found)
    what = (f"column {written} is not used; did you mean {meant}?" if len(found) == 1 else
            f"columns {written} are not used; did you mean {meant}?")
    return TableNote(NoteKind.MISSPELT_COLUMN, what, source, columns=tuple(h for h, _ in found))


def unused_column_note(
    source: str, header: Iterable[str], known: Iterable[str], optional: Sequence[Sequence[str]]
) -> str | None:
    """The line of :func:`misspelt_column_note` (the warning for a file's columns that look like
    misspellings of optional ones), or None.

    Examples
    --------
    >>> unused_column_note("q.csv", ["job_id", "priorty", "note"], ["job_id"], [("priority", "job_priority")])
    "q.csv: column 'priorty' is not used; did you mean 'priority'?"
    >>> unused_column_note("q.csv", ["job_id", "priority", "priorty"], ["job_id"], [("priority",)]) is None
    True
    """
    note = misspelt_column_note(source, header, known, optional)
    return None if note is None else str(note)


#: An integer as an id is written: no sign but minus, no leading zero, no digit separator, no
#: exponent, and ``.0`` allowed (a float column).  ``int()`` takes ``"4567_1"`` (a Slurm array
#: job) as 45671 and ``"0042"`` as 42, which would rename the job and merge distinct ids.
_INTEGER_ID = re.compile(r"-?(?:0|[1-9][0-9]{0,18})(?:\.0+)?")


def integer_id(text: str) -> int | None:
    """``text`` as an integer id if it is written as one (:data:`_INTEGER_ID`) and fits in 64
    bits, else None: the text is the id.

    >>> integer_id("42"), integer_id("3.0"), integer_id("0042"), integer_id("4567_1"), integer_id("1e3")
    (42, 3, None, None, None)
    """
    if _INTEGER_ID.fullmatch(text) is None:
        return None
    v = int(text.split(".", 1)[0])
    return v if abs(v) <= 2**63 - 1 else None


def _cell_text(x: Any) -> str:
    """``str(x)`` for a DataFrame cell or column name, never raising: an integer too long to
    print, or an object whose ``__str__`` fails, becomes a placeholder the cell parsers reject."""
    if isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 4 * MAX_INT_DIGITS:
        return f"<integer with about {x.bit_length() * 0.30103:.0f} digits>"
    try:
        return str(x)
    except Exception:  # noqa: BLE001 - a foreign object's __str__ may raise anything
        return f"<unprintable {type(x).__name__}>"


_TRUE = frozenset({"true", "1", "yes", "y", "t", "1.0"})
_FALSE = frozenset({"false", "0", "no", "n", "f", "0.0"})


def _q(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...") if text else "an empty cell"


#: A number as a CSV cell writes it: ASCII digits, an optional sign, point and exponent, or
#: nan/inf (refused later, by name).  Python's ``int``/``float`` also take ``1_000`` and other
#: scripts' digits (``２``), which no CSV writer means as numbers.
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
#: What ``float()`` is given for a cell that is not a number (it raises ValueError).
_NOT_A_NUMBER = "not a number"


def _cell_int(text: str) -> int | None:
    t = text.strip()
    if not t or len(t) > MAX_INT_DIGITS + 3 or not _FLOAT.fullmatch(t):
        return None
    try:
        return int(t)
    except ValueError:
        pass
    try:
        f = float(t)
    except ValueError:
        return None
    if math.isfinite(f) and f.is_integer() and abs(f) <= 2**53:
        return int(f)
    return None


# a line and its ending, as iterating ``io.StringIO(text, newline="")`` gives them
_LINE = re.compile(r"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+\Z")


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text`` with their endings (``\\n``, ``\\r\\n`` or ``\\r``), one at a time.

    Unlike ``io.StringIO(text)``, which copies the text at four bytes per character, this
    holds one line at a time.

    >>> list(_lines("a,b\\r\\n1,2\\r3,4\\n\\n5,6"))
    ['a,b\\r\\n', '1,2\\r', '3,4\\n', '\\n', '5,6']
    """
    for m in _LINE.finditer(text):
        yield m.group()


def separator_hint(header: Sequence[str]) -> str:
    """What to add to a missing-column message when the header is one field holding ``;``, a tab
    or ``|``: a table separated by that (spreadsheets in many locales save "CSV" with ``;``), which
    read as one column whose name is the whole header line.  Empty otherwise.

    >>> separator_hint(["job_id;num_gpus;model"])
    " (the header has no comma but ';': pal-opt reads comma-separated files)"
    >>> separator_hint(["job_id", "num_gpus"])
    ''
    """
    if len(header) == 1:
        for sep, name in ((";", "';'"), ("\t", "tabs"), ("|", "'|'")):
            if sep in header[0]:
                return f" (the header has no comma but {name}: pal-opt reads comma-separated files)"
    return ""


def cut_short(text: str, fields: int, width: int) -> str:
    """What to add to a row's field-count error when the row is the text's last line, short of
    fields and with no line break after it: a file cut short (a copy or a write interrupted).

    >>> cut_short("a,b,c\\n1,2", 2, 3), cut_short("a,b,c\\n1,2\\n", 2, 3)
    (' (the last line, with no line break: is the file cut short?)', '')
    """
    if fields < width and text and text[-1] not in "\r\n":
        return " (the last line, with no line break: is the file cut short?)"
    return ""


def cell_place(row_label: str, line: int, column: str | None = None) -> str:
    """A row's place (and a cell's, with ``column``) as the importers' messages name it:
    ``line 4, column num_gpus``; ``row 3`` in a frame (``row_label``).

    >>> cell_place("line", 4, "num_gpus"), cell_place("row", 3)
    ('line 4, column num_gpus', 'row 3')
    """
    return f"{row_label} {line}" + (f", column {column}" if column is not None else "")


def read_csv(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_cells: int = DEFAULT_MAX_CELLS,
    what: str = "CSV file",
    row_label: str = "line",
    arg: str = "path",
) -> CsvTable:
    """Read a comma-separated file with a header line, with the guards of :func:`read_text`.

    Rows with a different number of fields than the header are errors (naming the line);
    blank lines are skipped; a file with a header and no rows, or more than ``max_cells`` cells
    (commas and line breaks counted on the text, before parsing), is an error.  ``row_label``
    names a file line in the table's cell errors (``line 7, column num_gpus``); ``arg`` the
    public argument ``path`` came in as (named if it is not a file path).
    """
    text = read_text(path, max_bytes=max_bytes, what=what, arg=arg)
    src = os.fspath(path)
    refuse_markup(text, src, with_article(what) + ("" if "CSV" in what else " (CSV)"))
    n_cells = text.count(",") + text.count("\n") + text.count("\r")
    if n_cells > max_cells:
        raise InstanceError(
            f"{what} has about {n_cells:,} cells (commas and line-break characters counted), "
            f"more than the limit of {max_cells:,}",
            source=src,
        )
    reader = csv.reader(_lines(text), strict=True)
    try:
        header = [h.strip() for h in next(reader)]
        rows: list[tuple[int, list[str]]] = []
        for fields in reader:
            if not fields or all(not f.strip() for f in fields):
                continue
            line = reader.line_num
            if len(fields) != len(header):
                last = next(reader, None) is None
                raise InstanceError(f"has {len(fields)} fields but the header has {len(header)}"
                                    + (cut_short(text, len(fields), len(header)) if last else ""),
                                    source=src, path=f"line {line}")
            rows.append((line, [f.strip() for f in fields]))
    except csv.Error as exc:
        raise InstanceError(f"malformed CSV: {exc}", source=src, path=f"line {reader.line_num}") from None
    if not rows:
        raise InstanceError(f"{what} has a header but no rows", source=src)
    return CsvTable(src, header, rows, row_label)
