"""Guarded reading of input files and atomic writing of output files.

Every file pal-opt reads passes through :func:`read_text`, which turns each way a file can be
unusable into an :class:`~pal_opt.errors.InstanceError` naming the file:

* larger than a size limit (64 MiB by default), empty, binary (NUL bytes) or not UTF-8;
* for JSON (:func:`load_json`): a syntax error (with line and column), more values than a
  limit (2 million), nesting deeper than a limit, a key repeated inside one object,
  ``NaN``/``Infinity`` literals, numbers that overflow a float and integers with absurdly many
  digits;
* for CSV (:func:`read_csv`): more cells than a limit (4 million), ragged rows, bad quoting.

The value and cell limits bound memory: a file just under the size limit made of tiny values
(``1,1,1,...``) would otherwise become gigabytes of Python objects.  ``docs/limits.md`` lists
every limit with its measured cost.

Bad numbers do not stop the parse.  They become :class:`BadNumber` placeholders, so that the
validator that meets one reports it at its field path (``jobs[3].demand: must be a positive
integer, got NaN``) rather than at a line and column.

Output goes through :func:`atomic_write_text`: a temporary file in the target's directory,
flushed and then renamed over the target with :func:`os.replace`.  A crash or an interrupt leaves
either the old file or the new one, never half of one.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InstanceError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_VALUES",
    "DEFAULT_MAX_CELLS",
    "MAX_INT_DIGITS",
    "BadNumber",
    "read_text",
    "load_json",
    "parse_json",
    "check_depth",
    "atomic_write_text",
    "CsvTable",
    "read_csv",
]

#: Largest input file read, in bytes (64 MiB: fifty times a 16,384-GPU instance; reading costs up
#: to five times the file size, the bytes plus the text at up to four bytes per character).
DEFAULT_MAX_BYTES: int = 64 * 1024 * 1024
#: Deepest nesting of JSON arrays and objects accepted.
DEFAULT_MAX_DEPTH: int = 64
#: Integers with more digits than this are rejected (an int64 has at most 19).
MAX_INT_DIGITS: int = 40
#: Most values a JSON document may hold, counted on the text as commas (values are
#: comma-separated; nesting is bounded separately).  A 16,384-GPU instance with four classes
#: has about 120,000; the limit admits about 250,000 GPUs.
DEFAULT_MAX_VALUES: int = 2_000_000
#: Most cells a CSV file may have, counted on the text as commas plus line breaks (a cell is
#: about 100 bytes once read, so this bounds a table at a few hundred megabytes; a trace of
#: 800,000 jobs fits).
DEFAULT_MAX_CELLS: int = 4_000_000


class BadNumber:
    """Placeholder for a JSON number that pal-opt refuses: NaN, ±Infinity, overflow, huge int.

    It is neither ``int`` nor ``float``, so every type check fails on it and the validator
    reports the field path with :meth:`describe`.
    """

    __slots__ = ("text", "reason")

    def __init__(self, text: str, reason: str):
        self.text = text
        self.reason = reason

    def describe(self) -> str:
        """``"NaN (not a finite number)"``, shortened for very long literals."""
        t = self.text if len(self.text) <= 24 else f"{self.text[:12]}...{self.text[-6:]}"
        return f"{t} ({self.reason})"

    def __repr__(self) -> str:
        return self.describe()


def _parse_constant(text: str) -> BadNumber:
    return BadNumber(text, "not a finite number")


def _parse_float(text: str) -> float | BadNumber:
    v = float(text)
    if v != v or v in (float("inf"), float("-inf")):
        return BadNumber(text, "too large for a float")
    return v


def _parse_int(text: str) -> int | BadNumber:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return BadNumber(text, f"integer with {digits} digits is too large")
    return int(text)


def _src(path: str | os.PathLike[str]) -> str:
    return os.fspath(path)


def read_text(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "file") -> str:
    """Read a UTF-8 text file with guards.

    Parameters
    ----------
    path
        The file.
    max_bytes
        Size limit; larger files are rejected before they are read.
    what
        Noun used in messages (``"instance file"``, ``"CSV file"``...).

    Returns
    -------
    str
        The text, with a UTF-8 byte-order mark removed.

    Raises
    ------
    InstanceError
        Too large, empty, binary or not UTF-8.
    OSError
        Missing or unreadable (the CLI reports it in one line too).
    """
    src = _src(path)
    p = Path(path)
    if p.is_dir():
        raise InstanceError(f"is a directory, expected a {what}", source=src)
    size = p.stat().st_size
    if size > max_bytes:
        raise InstanceError(
            f"{what} is {size:,} bytes, larger than the limit of {max_bytes:,} bytes", source=src
        )
    with open(p, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while we looked, or a special file
        raise InstanceError(f"{what} is larger than the limit of {max_bytes:,} bytes", source=src)
    if not data.strip():
        raise InstanceError(f"{what} is empty", source=src)
    if b"\x00" in data:
        i = data.index(b"\x00")
        raise InstanceError(f"{what} is binary, not text (NUL byte at offset {i})", source=src)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InstanceError(f"{what} is not valid UTF-8 (byte {exc.start}: {exc.reason})", source=src) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def check_depth(obj: Any, max_depth: int = DEFAULT_MAX_DEPTH, *, source: str | None = None) -> None:
    """Raise :class:`InstanceError` if ``obj`` nests arrays/objects deeper than ``max_depth``.

    Iterative (no recursion limit), and only containers are pushed, so the long numeric
    columns of an instance cost one ``isinstance`` per value.
    """
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise InstanceError(f"nesting deeper than {max_depth} levels", source=source)
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))


def parse_json(
    text: str,
    *,
    source: str = "<memory>",
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_values: int = DEFAULT_MAX_VALUES,
) -> Any:
    """Parse JSON text with pal-opt's guards (see the module docstring).

    >>> parse_json('{"a": [1, 2.5]}')
    {'a': [1, 2.5]}
    >>> parse_json('{"a": NaN}')["a"]
    NaN (not a finite number)
    >>> parse_json('{"a": {"b": 1, "b": 2}}', source="x.json")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: x.json: a.b: duplicate key 'b' (JSON readers disagree on which value wins)
    """
    n_commas = text.count(",")
    if n_commas >= max_values:
        raise InstanceError(
            f"has {n_commas:,} commas, more than the limit of {max_values:,} JSON values", source=source
        )
    duplicates: list[tuple[dict[str, Any], str]] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(pairs)
        if len(d) != len(pairs) and not duplicates:
            seen: set[str] = set()
            key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            duplicates.append((d, key))
        return d

    try:
        obj = json.loads(
            text,
            parse_constant=_parse_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
            object_pairs_hook=pairs_hook,
        )
    except json.JSONDecodeError as exc:
        raise InstanceError(f"invalid JSON: {exc.msg}", source=source, path=f"line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InstanceError(f"nesting deeper than {max_depth} levels", source=source) from None
    except ValueError as exc:  # e.g. int conversion limits
        raise InstanceError(f"invalid JSON: {exc}", source=source) from None
    check_depth(obj, max_depth, source=source)
    if duplicates:
        d, key = duplicates[0]
        where = _path_of(obj, d)
        raise InstanceError(
            f"duplicate key {key!r} (JSON readers disagree on which value wins)",
            source=source,
            path=f"{where}.{key}" if where else key,
        )
    return obj


def _path_of(root: Any, target: Any) -> str:
    """The field path (``jobs[3].locality``) of the container ``target`` inside ``root``."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in node.items() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node) if isinstance(v, (dict, list)))
    return ""  # pragma: no cover - target is inside root


def load_json(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_values: int = DEFAULT_MAX_VALUES,
    what: str = "JSON file",
) -> Any:
    """Read and parse a JSON file with guards: :func:`read_text`, then :func:`parse_json`."""
    text = read_text(path, max_bytes=max_bytes, what=what)
    return parse_json(text, source=_src(path), max_depth=max_depth, max_values=max_values)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically.

    The text goes to a temporary file in the same directory, which is flushed, synced and
    renamed over ``path``.  On any failure (including ``KeyboardInterrupt``) the temporary file
    is removed and ``path`` is untouched.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:  # name the file the user asked for, not the temporary one
        raise type(exc)(exc.errno, f"cannot write: {exc.strerror}", os.fspath(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            mode = os.stat(target).st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
            os.chmod(tmp, mode)
        except OSError:
            pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m



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
        self._index = {h: i for i, h in enumerate(header)}
        self._lower = {h.lower(): i for i, h in reversed(list(enumerate(header)))}

    def find(self, *names: str) -> int | None:
        """Index of the first of ``names`` present (exact match, then case-insensitive), or None."""
        for n in names:
            if n in self._index:
                return self._index[n]
        for n in names:
            if n.lower() in self._lower:
                return self._lower[n.lower()]
        return None

    def column(self, *names: str) -> int:
        """Like :meth:`find`, but a missing column is an :class:`InstanceError` on ``header``."""
        i = self.find(*names)
        if i is None:
            alts = " or ".join(repr(n) for n in names)
            raise InstanceError(
                f"missing column {alts}; columns are: {', '.join(self.header)}", source=self.source, path="header"
            )
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

    def error(self, line: int, col: int | None, message: str) -> InstanceError:
        where = f"{self.row_label} {line}" + (f", column {self.header[col]}" if col is not None else "")
        return InstanceError(message, source=self.source, path=where)

    # cell parsers: each raises an InstanceError naming file, line and column
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

    def number(self, line: int, col: int, text: str, *, positive: bool = False) -> float:
        """A finite float cell (``nan``, ``inf`` and overflowing literals are errors)."""
        try:
            v = float(text) if len(text) <= 64 else float("nan")
        except ValueError:
            raise self.error(line, col, f"must be a number, got {_q(text)}") from None
        if not math.isfinite(v):
            raise self.error(line, col, f"must be a finite number, got {_q(text)}")
        if positive and v <= 0:
            raise self.error(line, col, f"must be a positive number, got {_q(text)}")
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
        """An id: an integer if the cell is one (``"3"``, ``"3.0"``), else the non-empty text."""
        if not text:
            raise self.error(line, col, "must not be empty")
        v = _cell_int(text)
        if v is not None and abs(v) <= 2**63 - 1:
            return v
        return text


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


def _cell_int(text: str) -> int | None:
    t = text.strip()
    if not t or len(t) > MAX_INT_DIGITS + 3:
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


def read_csv(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_cells: int = DEFAULT_MAX_CELLS,
    what: str = "CSV file",
) -> CsvTable:
    """Read a comma-separated file with a header line, with the guards of :func:`read_text`.

    Rows with a different number of fields than the header are errors (naming the line);
    blank lines are skipped; a file with a header and no rows, or more than ``max_cells`` cells
    (commas and line breaks counted on the text, before parsing), is an error.
    """
    import csv

    src = _src(path)
    text = read_text(path, max_bytes=max_bytes, what=what)
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
                raise InstanceError(
                    f"has {len(fields)} fields but the header has {len(header)}", source=src, path=f"line {line}"
                )
            rows.append((line, [f.strip() for f in fields]))
    except csv.Error as exc:
        raise InstanceError(f"malformed CSV: {exc}", source=src, path=f"line {reader.line_num}") from None
    if not rows:
        raise InstanceError(f"{what} has a header but no rows", source=src)
    return CsvTable(src, header, rows)
