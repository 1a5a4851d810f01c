"""Guarded reading of input text files, and the limits every reader shares.

Every file pal-opt reads passes through :func:`read_text`, which turns each way a file can be
unusable into an :class:`~pal_opt.errors.InstanceError` naming the file: larger than a size
limit (64 MiB by default), empty, binary (NUL bytes) or not UTF-8.  The JSON and CSV readers
(:mod:`~pal_opt.io.jsonfile`, :mod:`~pal_opt.io.csvfile`) add their own limits on top; all of
them are defined here and listed, with their measured cost, in ``docs/limits.md``.
"""

from __future__ import annotations

import codecs
import os
import re
from pathlib import Path

from ..errors import InstanceError, MissingFileError, with_article
from ..options import check_count, file_path

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_VALUES",
    "DEFAULT_MAX_CELLS",
    "MAX_INT_DIGITS",
    "read_text",
    "source_name",
    "binary_text",
    "markup_kind",
    "refuse_markup",
    "NUL",
]

#: The byte that text in UTF-8 never holds (:func:`binary_text` says what a file with one is).
NUL = b"\x00"

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


def binary_text(data: bytes) -> str:
    """What is wrong with bytes holding a NUL: text in UTF-32 or UTF-16 (what Windows
    PowerShell's ``>`` writes), told by a byte-order mark or, for UTF-16 without one, by NULs at
    every other byte of the start; else binary data.

    >>> binary_text("a,b".encode("utf-16"))
    'is UTF-16 text; pal-opt reads UTF-8 (convert it, e.g. iconv -f UTF-16 -t UTF-8)'
    >>> binary_text("a,b".encode("utf-32"))
    'is UTF-32 text; pal-opt reads UTF-8 (convert it, e.g. iconv -f UTF-32 -t UTF-8)'
    >>> binary_text("job_id,num_gpus".encode("utf-16-be"))
    'is UTF-16BE text; pal-opt reads UTF-8 (convert it, e.g. iconv -f UTF-16BE -t UTF-8)'
    >>> binary_text(b"PK\\x03\\x04\\x00")
    'is binary, not text (NUL byte at offset 4)'
    """
    # the UTF-32 marks first: UTF-32-LE's begins with UTF-16-LE's
    marks = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
             (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))
    encoding = next((name for mark, name in marks if data.startswith(mark)), None)
    head = data[: min(len(data), 256) // 2 * 2]  # whole UTF-16 code units
    if encoding is None and len(head) >= 4:
        even, odd = head[0::2], head[1::2]
        if odd.count(0) == len(odd) and even.count(0) == 0:
            encoding = "UTF-16LE"
        elif even.count(0) == len(even) and odd.count(0) == 0:
            encoding = "UTF-16BE"
    if encoding is not None:
        return f"is {encoding} text; pal-opt reads UTF-8 (convert it, e.g. iconv -f {encoding} -t UTF-8)"
    return f"is binary, not text (NUL byte at offset {data.index(NUL)})"


_PAL_OPT_FORMAT = re.compile(r'"format"\s*:\s*"pal-opt/(instance|placement)"')
_NODE_KIND = re.compile(r'"kind"\s*:\s*"(?:NodeList|Node)"')


def markup_kind(text: str) -> str | None:
    """What a text that a CSV, Slurm or profile reader was given is instead, when it is plainly a
    JSON document or XML (an instance, placement or node-list file, a GraphML cluster, given to
    the wrong option): ``"a pal-opt instance file (JSON)"``, ``"a Kubernetes node list (JSON)"``,
    ``"JSON"``, ``"GraphML (XML)"``, ``"XML"``; None for any other text.  Only the start of the
    text is looked at.

    >>> markup_kind('{"format": "pal-opt/placement", "version": 1}')
    'a pal-opt placement file (JSON)'
    >>> markup_kind('  [1, 2]'), markup_kind('<?xml version="1.0"?><graphml>'), markup_kind("a,b\\n1,2")
    ('JSON', 'GraphML (XML)', None)
    """
    head = text[:4096].lstrip()
    if head[:1] in ("{", "["):
        if m := _PAL_OPT_FORMAT.search(head):
            return f"a pal-opt {m.group(1)} file (JSON)"
        return "a Kubernetes node list (JSON)" if _NODE_KIND.search(head) else "JSON"
    if head.startswith("<"):
        return "GraphML (XML)" if "<graphml" in head else "XML"
    return None


def refuse_markup(text: str, source: str, expected: str) -> None:
    """Raise an :class:`InstanceError` (``round.json: is a pal-opt instance file (JSON), not a GPU
    table (CSV)``) when ``text`` is a JSON document or XML (:func:`markup_kind`) where
    ``expected`` (a noun phrase with its article) was to be read: said so, rather than the first
    line that the reader cannot parse (``line 2: has 2 fields but the header has 1``)."""
    kind = markup_kind(text)
    if kind is not None:
        raise InstanceError(f"is {kind}, not {expected}", source=source)


#: What an error about a text's last line adds when no line break ends it (``csvfile.cut_short``'s words).
CUT_SHORT = " (the last line, with no line break: is the file cut short?)"
_LINE_PATH = re.compile(r"line (\d+)(?:,|$)")


def last_line_cut(text: str, line: int) -> str:
    """:data:`CUT_SHORT` when line ``line`` (counted from 1) is the last of ``text`` and no line
    break ends it, the mark of a file cut short (a copy or a write interrupted); else ``""``.

    >>> last_line_cut("a\\nb", 2) == CUT_SHORT, last_line_cut("a\\nb\\n", 2), last_line_cut("a\\nb", 1)
    (True, '', '')
    """
    return CUT_SHORT if text and text[-1] not in "\r\n" and line == text.count("\n") + 1 else ""


def with_cut_hint(exc: InstanceError, text: str) -> InstanceError:
    """``exc``, an error about a line of ``text`` (its path ``line N`` or ``line N, ...``), with
    :data:`CUT_SHORT` added when that line is the text's last and no line break ends it; else
    ``exc`` itself.  For readers of line-based formats without a table (a PipeDream profile),
    whose errors said the last line was malformed where the file had been cut in it."""
    m = _LINE_PATH.match(exc.path or "")
    hint = last_line_cut(text, int(m.group(1))) if m else ""
    if not hint or exc.message.endswith(CUT_SHORT):
        return exc
    return InstanceError(exc.message + hint, source=exc.source, path=exc.path)


def read_text(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "file",
              arg: str = "path") -> str:
    """Read a UTF-8 text file with guards.

    Parameters
    ----------
    path
        The file.
    max_bytes
        Size limit; larger files are rejected before they are read.
    what
        Noun used in messages (``"instance file"``, ``"CSV file"``...).
    arg
        The public argument ``path`` came in as, named if it is not a file path (:func:`file_path`).

    Returns
    -------
    str
        The text, with a UTF-8 byte-order mark removed.

    Raises
    ------
    InputTypeError
        ``path`` is not a file path (a str or os.PathLike).
    OptionError
        ``max_bytes`` is not an integer >= 1.
    InstanceError
        Too large, empty, binary or not UTF-8.
    MissingFileError
        Missing (an :class:`InstanceError` and a ``FileNotFoundError``).
    OSError
        Unreadable (the CLI reports it in one line too).
    """
    src = file_path(path, arg)
    check_count(max_bytes, "max_bytes")
    p = Path(src)
    if p.is_dir():
        raise InstanceError(f"is a directory, expected {with_article(what)}", source=src)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise InstanceError(f"{what} is {size:,} bytes, larger than the limit of {max_bytes:,} bytes", source=src)
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise MissingFileError.of(src, what) from None
    if len(data) > max_bytes:  # grew while we looked, or a special file
        raise InstanceError(f"{what} is larger than the limit of {max_bytes:,} bytes", source=src)
    if not data.strip():
        raise InstanceError(f"{what} is empty", source=src)
    if NUL in data:
        raise InstanceError(f"{what} {binary_text(data)}", source=src)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InstanceError(f"{what} is not valid UTF-8 (byte {exc.start}: {exc.reason})", source=src) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def source_name(path: str | os.PathLike[str], default: str, *, stem: bool = False) -> str:
    """A name for what was read from ``path``: the file's name (its stem with ``stem``), or
    ``default`` when ``path`` is not a regular file, such as a pipe (``<(cat nodes.json)`` is
    ``/dev/fd/63``, whose name ``63`` named the round an import made).

    >>> source_name("/dev/null", "k8s")
    'k8s'
    """
    if not os.path.isfile(path):
        return default
    return Path(path).stem if stem else Path(path).name
