"""Validated CSV tables for the heterogeneous-GPU model (profiles, workloads, the Philly trace).

A file is read with the guards of :func:`pal_opt.io.safe.read_text` (size limit, empty, binary,
not UTF-8), its rows checked to have as many fields as the header (a file cut short in the middle
of a row names that line), and parsed by pandas with every cell kept as text; each column is then
converted on request, so that a bad cell is reported with its file, row and column::

    profiles/bert/placements-aws.csv: row 7, column step_time: must be a positive number, got 'x'

A file's rows are numbered by their lines (the header is line 1; blank lines count); a frame's
as if it were a file without blank lines: the header is row 1, the first data row is row 2.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InstanceError, MissingFileError, with_article
from ..io.csvfile import cut_short, separator_hint
from ..io.safe import DEFAULT_MAX_BYTES, read_text
from ..io.textfile import refuse_markup
from ..options import file_path

__all__ = ["Table", "read_table", "column_names"]

#: Largest integer accepted in an integer column (exactly representable as a float64).
MAX_EXACT_INT = 2**53


@dataclass(frozen=True, eq=False)
class Table:
    """A CSV table whose cells are still text, with converters that name the bad cell.

    Attributes
    ----------
    source
        The file name used in messages.
    frame
        The cells as a pandas DataFrame of ``str`` (stripped), columns named by the header.
    lines
        The file line of each data row (None: a frame's, numbered from 2).

    Examples
    --------
    >>> t = Table.from_frame(pd.DataFrame({"a": ["1", "2"], "b": ["x", "0.5"]}), "demo.csv")
    >>> t.ints("a").tolist()
    [1, 2]
    >>> t.floats("b")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: demo.csv: row 2, column b: must be a finite number, got 'x'
    """

    source: str
    frame: pd.DataFrame
    lines: tuple[int, ...] | None = None

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, source: str = "<memory>") -> Table:
        """A table over an in-memory DataFrame (cells become their ``str``; NaN becomes empty)."""
        if not isinstance(frame, pd.DataFrame):
            raise InstanceError(f"expected a pandas DataFrame, got {type(frame).__name__}", source=source)
        cells = frame.astype(object).where(frame.notna(), "")
        names = column_names(pd.Index([str(c) for c in cells.columns]), source)
        text = pd.DataFrame(
            {name: [str(v).strip() for v in cells[c]] for name, c in zip(names, cells.columns, strict=True)},
            dtype=object,
        )
        return cls(source, text)

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def columns(self) -> tuple[str, ...]:
        """Column names in file order."""
        return tuple(str(c) for c in self.frame.columns)

    def require(self, *names: str) -> None:
        """Raise :class:`InstanceError` on ``header`` if any of ``names`` is not a column."""
        missing = [n for n in names if n not in self.frame.columns]
        if missing:
            raise InstanceError(
                f"missing column(s) {', '.join(missing)}; columns are: {', '.join(self.columns) or '(none)'}"
                + separator_hint(self.columns),
                source=self.source,
                path="header",
            )

    def row(self, index: int) -> int:
        """The number messages give data row ``index`` (0-based): its file line, or ``index + 2``."""
        return index + 2 if self.lines is None else self.lines[index]

    def error(self, index: int, column: str, message: str) -> InstanceError:
        """An :class:`InstanceError` for the cell of data row ``index`` (0-based) in ``column``."""
        return InstanceError(message, source=self.source, path=f"row {self.row(index)}, column {column}")

    def strings(self, column: str, *, allow_empty: bool = False) -> np.ndarray:
        """The column as an object array of ``str``; empty cells are errors unless allowed."""
        self.require(column)
        values = np.asarray(self.frame[column].to_numpy(dtype=object), dtype=object)
        if not allow_empty:
            empty = np.flatnonzero(values == "")
            if empty.size:
                raise self.error(int(empty[0]), column, "must not be empty")
        return values

    def floats(self, column: str, *, positive: bool = False, minimum: float | None = None,
               maximum: float | None = None) -> np.ndarray:
        """The column as finite float64 values (``positive``: > 0; ``minimum``: ≥ that;
        ``maximum``: ≤ that)."""
        text = self.strings(column, allow_empty=True)
        values = pd.to_numeric(pd.Series(text, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values)
        what = "a finite number"
        if positive:
            bad |= values <= 0
            what = "a positive number"
        elif minimum is not None:
            bad |= values < minimum
            what = f"a finite number ≥ {minimum:g}"
        if maximum is not None:
            bad |= values > maximum
            what += f" and ≤ {maximum:g}"
        self._raise_first(bad, column, text, what)
        return values

    def ints(self, column: str, *, minimum: int | None = 1) -> np.ndarray:
        """The column as int64 values (``"4.0"`` reads as 4), each ≥ ``minimum`` unless None."""
        text = self.strings(column, allow_empty=True)
        values = pd.to_numeric(pd.Series(text, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(values) | (values != np.round(values)) | (np.abs(values) > MAX_EXACT_INT)
        what = "an integer"
        if minimum is not None:
            bad |= values < minimum
            what = "a positive integer" if minimum == 1 else f"an integer ≥ {minimum}"
        self._raise_first(bad, column, text, what)
        return values.astype(np.int64)

    def _raise_first(self, bad: np.ndarray, column: str, text: np.ndarray, what: str) -> None:
        hits = np.flatnonzero(bad)
        if hits.size:
            i = int(hits[0])
            cell = str(text[i])
            shown = repr(cell if len(cell) <= 40 else cell[:37] + "...") if cell else "an empty cell"
            raise self.error(i, column, f"must be {what}, got {shown}")


def column_names(written: pd.Index, source: str) -> list[str]:
    """The column names of a header as :class:`Table` keeps them: stripped and lower-case (column
    names are case-insensitive: ``Name,Time,Application`` is ``name,time,application``).

    >>> column_names(pd.Index([" Name", "TIME", "batch_size"]), "w.csv")
    ['name', 'time', 'batch_size']

    Raises
    ------
    InstanceError
        An empty name, or two columns with one name (whatever their case).
    """
    stripped = written.str.strip()
    names = stripped.str.lower()
    if (names == "").any():
        raise InstanceError("a column has an empty name", source=source, path="header")
    twice = names.duplicated(keep=False)
    if twice.any():
        same = [str(x) for x in stripped[twice & (names == names[twice][0])]]
        how = f"appears twice ({' and '.join(map(repr, same))}; column names are case-insensitive)" \
            if len(set(same)) > 1 else "appears twice"
        raise InstanceError(f"column {same[0]!r} {how}", source=source, path="header")
    return [str(x) for x in names]


def read_table(
    path: str | os.PathLike[str],
    *,
    required: Sequence[str] = (),
    what: str = "CSV file",
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Table:
    """Read a comma-separated file with a header line into a :class:`Table`.

    Parameters
    ----------
    path
        The file.
    required
        Columns that must be present (other columns are kept, order is free).
    what
        Noun used in messages (``"profile file"``, ``"workload file"``...).
    max_bytes
        Size limit (see :func:`pal_opt.io.safe.read_text`).

    Raises
    ------
    InstanceError
        Unreadable, too large, empty, binary or not UTF-8; malformed CSV (bad quoting, or a row
        with more or fewer fields than the header, naming its line); a repeated or empty column
        name; no data rows; a missing column.
    """
    source = file_path(path)
    try:
        text = read_text(path, max_bytes=max_bytes, what=what)
    except OSError as exc:
        raise MissingFileError.reading(exc, f"cannot read {what}", source=source) from None
    refuse_markup(text, source, f"{with_article(what)} (CSV)")
    lines = _row_lines(text, source)
    try:
        raw = pd.read_csv(
            io.StringIO(text), header=None, dtype=str, keep_default_na=False, na_filter=False, engine="c"
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        message = " ".join(str(exc).split())
        raise InstanceError(f"malformed CSV: {message}", source=source) from None
    header = column_names(pd.Index(raw.iloc[0].astype(str)), source)
    body = pd.DataFrame(
        {
            name: raw.iloc[1:, i].fillna("").astype(str).str.strip().to_numpy(dtype=object)
            for i, name in enumerate(header)
        },
        dtype=object,
    )
    if body.empty:
        raise InstanceError(f"{what} has a header but no rows", source=source)
    table = Table(source, body, lines if len(lines) == len(body) else None)
    table.require(*required)
    return table


def _row_lines(text: str, source: str) -> tuple[int, ...]:
    """The line of each data row of the CSV ``text`` (blank lines skipped); a row with more or
    fewer fields than the header, or bad quoting, is an :class:`InstanceError` naming its line
    (pandas pads a short row with empty cells: a file cut in the middle of a row read as a row
    with an empty cell, or with an optional column left out).  The standard library's reader
    takes a tenth of the time pandas's parse does."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    width = 0
    lines: list[int] = []
    try:
        for fields in reader:
            if len(fields) <= 1 and not "".join(fields).strip():  # a blank line, as pandas skips it
                continue
            if not width:
                width = len(fields)
            elif len(fields) != width:
                line = reader.line_num
                cut = cut_short(text, len(fields), width) if next(reader, None) is None else ""
                raise InstanceError(f"has {len(fields)} fields but the header has {width}{cut}", source=source,
                                    path=f"line {line}")
            else:
                lines.append(reader.line_num)
    except csv.Error as exc:
        raise InstanceError(f"malformed CSV: {exc}", source=source, path=f"line {reader.line_num}") from None
    return tuple(lines)
