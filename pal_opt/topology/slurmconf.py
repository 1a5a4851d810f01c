"""Slurm configuration files as Slurm's parser reads them: logical lines, ``KEY=VALUE`` pairs, ``Include``.

``topology.conf``, ``slurm.conf`` and ``gres.conf`` share one syntax, read here once:

* ``#`` starts a comment (``\\#`` is a ``#``); a line ending in ``\\`` continues on the next,
  joined to it with nothing in between (as Slurm joins them);
* a line holds ``KEY=VALUE`` pairs, white space allowed around ``=``, a value in double quotes may
  hold white space; parameter names are case-insensitive (the callers compare them lower-cased);
* a line ``Include FILE`` (the word in any case, then white space) reads ``FILE`` in its place.  A
  relative name is taken from the directory of the file that includes it; a name with glob
  characters (``*``, ``?``, ``[``) includes every file it matches, in sorted order, and must match
  one.  Included files may include others, at most :data:`MAX_INCLUDE_DEPTH` files in a chain; a file that
  includes itself, directly or through others, is an error.  Slurm's include modifiers (``%c``,
  the cluster name) are not expanded: a name holding ``%`` is refused.

Every line keeps the file it came from (:class:`ConfigLine`), so an error names the file, the line
and the field, in an included file too.  The files read together, the top one and all it
includes, are held to the input limits of one file: :data:`~pal_opt.io.textfile.DEFAULT_MAX_BYTES`
in total, and at most :data:`MAX_INCLUDED_FILES` included files.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import InstanceError, MissingFileError, with_article
from ..options import require_text
from .hostlist import expand_hostlist

__all__ = [
    "MAX_INCLUDE_DEPTH",
    "MAX_INCLUDED_FILES",
    "ConfigLine",
    "line_ref",
    "logical_lines",
    "config_lines",
    "read_config",
    "included_files",
    "key_values",
    "expand_field",
    "parse_count",
]

#: Most files in one chain of ``Include`` lines, the top file counted (it may include nine levels deep).
MAX_INCLUDE_DEPTH: int = 10
#: Most files the ``Include`` lines of one configuration may read.
MAX_INCLUDED_FILES: int = 1000

_KEY_VALUE = re.compile(r'\s*([^\s="]+)\s*=(\s*)(?:"([^"]*)"|([^\s"]+))(?=\s|$)\s*')
_INCLUDE = re.compile(r"include(?:\s+(.*))?", re.IGNORECASE | re.DOTALL)
_GLOB = re.compile(r"[*?\[]")
_COUNT = re.compile(r"(\d{1,12})([kKmMgGtTpP]?)")
_MULTIPLIER = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}


class ConfigLine(NamedTuple):
    """One logical line: the file it is in, its first line number there, its text (comment cut)."""

    source: str
    number: int
    text: str

    def at(self, key: str | None = None) -> str:
        """The error path of this line (``line 3``) or of one of its fields (``line 3, Gres``)."""
        return f"line {self.number}" if key is None else f"line {self.number}, {key}"

    def seen_from(self, source: str) -> str:
        """This line as an error about a line of ``source`` names it: ``line 3``, or ``line 3 of
        FILE`` when it is in another file."""
        return line_ref(self.number, self.source, source)


def line_ref(number: int, source: str, here: str) -> str:
    """``line 3``, or ``line 3 of FILE`` when ``source`` is another file than ``here``."""
    return f"line {number}" if source == here else f"line {number} of {source}"


def logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line number, text)`` of each non-blank logical line, as Slurm's ``_get_next_line``
    reads them: a ``#`` not escaped (``\\#``) starts a comment; a line ending in a backslash (white
    space after it allowed) is joined with the next with nothing in between, so a value may be cut
    anywhere (``Gres=gpu:a100:4,\\`` then ``gpu:v100:4``); then each ``\\X`` is read as ``X``.

    >>> logical_lines("a=1 # one\\n\\nb=2 \\\\\\n  c=3\\nNodeName=n[1-\\\\\\n2]\\n")
    [(1, 'a=1'), (3, 'b=2   c=3'), (5, 'NodeName=n[1-2]')]
    """
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw)
        if not pending:
            start = number
        body = line.rstrip()
        run = len(body) - len(body.rstrip("\\"))
        if run % 2 == 1:
            pending.append(body[:-1])
            continue
        pending.append(line)
        joined = _strip_escapes("".join(pending)).strip()
        pending = []
        if joined:
            out.append((start, joined))
    if pending and (joined := _strip_escapes("".join(pending)).strip()):
        out.append((start, joined))
    return out


def _strip_comment(line: str) -> str:
    """``line`` cut at its first ``#`` not escaped (not after an odd number of backslashes)."""
    backslashes = 0
    for i, char in enumerate(line):
        if char == "#" and backslashes % 2 == 0:
            return line[:i]
        backslashes = backslashes + 1 if char == "\\" else 0
    return line


def _strip_escapes(text: str) -> str:
    """Each ``\\X`` read as ``X`` (``\\\\`` as one backslash), as Slurm's parser does."""
    return re.sub(r"\\(.?)", r"\1", text, flags=re.DOTALL)


@dataclass
class _Reading:
    """The state of one configuration's reading: its limit, what it has read, the open chain."""

    what: str
    max_bytes: int
    used: int = 0
    files: int = 0
    chain: list[str] = field(default_factory=list)
    included: list[str] = field(default_factory=list)


def _included_paths(name: str, line: ConfigLine) -> list[str]:
    """The files an ``Include`` line names (relative to its file's directory; a glob: every match)."""
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1].strip()
    if not name:
        raise InstanceError("Include names no file", source=line.source, path=line.at("Include"))
    if "%" in name:
        raise InstanceError(f"Include {name!r}: Slurm's include modifiers (%c, ...) are not expanded by pal-opt; "
                            "write the file name", source=line.source, path=line.at("Include"))
    path = os.path.join(os.path.dirname(line.source), name)
    if not _GLOB.search(name):
        return [path]
    found = sorted(p for p in glob.glob(path) if os.path.isfile(p))
    if not found:
        raise InstanceError(f"Include {name!r} matches no file", source=line.source, path=line.at("Include"))
    return found


def _include(path: str, line: ConfigLine, reading: _Reading) -> list[ConfigLine]:
    """The lines of one included file, its own includes expanded."""
    from ..io import read_text

    real = os.path.realpath(path)
    if os.path.isdir(path):
        raise InstanceError(f"Include {path!r} is a directory, not a file", source=line.source,
                            path=line.at("Include"))
    if real in reading.chain:
        loop = [*reading.chain[reading.chain.index(real):], real]
        raise InstanceError(f"Include cycle: {' -> '.join(map(os.path.basename, loop))} (a file includes itself)",
                            source=line.source, path=line.at("Include"))
    if len(reading.chain) >= MAX_INCLUDE_DEPTH:
        raise InstanceError(f"Include nested more than {MAX_INCLUDE_DEPTH} files deep", source=line.source,
                            path=line.at("Include"))
    reading.files += 1
    reading.included.append(path)
    if reading.files > MAX_INCLUDED_FILES:
        raise InstanceError(f"more than {MAX_INCLUDED_FILES:,} included files", source=line.source,
                            path=line.at("Include"))
    try:
        size = os.path.getsize(path)
        if size > reading.max_bytes - reading.used:
            raise InstanceError(f"{reading.what} and the files it includes are larger than the limit of "
                                f"{reading.max_bytes:,} bytes together", source=line.source, path=line.at("Include"))
        left = reading.max_bytes - reading.used  # (0 is no limit read_text takes: an empty file is nothing)
        text = "" if left == 0 and size == 0 and os.path.isfile(path) else read_text(path, max_bytes=left, what="file")
    except InstanceError as exc:
        if exc.message != "file is empty":  # an empty included file is allowed (Slurm reads nothing from it)
            raise
        text = ""
    except OSError as exc:
        raise MissingFileError.reading(exc, f"cannot read included file {path!r}", source=line.source,
                                       path=line.at("Include")) from None
    reading.used += size
    return _expand(text, path, real, reading)


def _expand(text: str, source: str, real: str, reading: _Reading) -> list[ConfigLine]:
    reading.chain.append(real)
    out: list[ConfigLine] = []
    for number, joined in logical_lines(text):
        line = ConfigLine(source, number, joined)
        m = _INCLUDE.fullmatch(joined)
        if m is None:
            out.append(line)
            continue
        for path in _included_paths(m.group(1) or "", line):
            out.extend(_include(path, line, reading))
    reading.chain.pop()
    return out


def config_lines(text: str, source: str = "<memory>", *, what: str = "configuration file",
                 max_bytes: int | None = None) -> list[ConfigLine]:
    """The logical lines of a configuration text, ``Include`` lines replaced by the lines of the
    files they name (module docstring); relative names are taken from ``source``'s directory.

    ``max_bytes`` (default :data:`~pal_opt.io.textfile.DEFAULT_MAX_BYTES`) bounds the text and
    every file it includes together.
    """
    size = len(require_text(text).encode("utf-8", "surrogatepass"))
    return _lines(text, require_text(source, "source"), what, max_bytes, size)[0]


def _lines(text: str, source: str, what: str, max_bytes: int | None, size: int) -> tuple[list[ConfigLine], _Reading]:
    """The lines of ``text`` (``size`` bytes, counted against the limit) and the reading's state."""
    from ..io.textfile import DEFAULT_MAX_BYTES

    reading = _Reading(what, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes, used=size)
    real = os.path.realpath(source) if os.path.isfile(source) else source
    return _expand(text, source, real, reading), reading


def read_config(path: str | os.PathLike[str], *, what: str = "configuration file",
                max_bytes: int | None = None) -> list[ConfigLine]:
    """:func:`config_lines` of a file, read with :func:`~pal_opt.io.read_text`'s guards."""
    return _read_file(path, what, max_bytes)[0]


def included_files(path: str | os.PathLike[str], *, what: str = "configuration file",
                   max_bytes: int | None = None) -> list[str]:
    """The files that the ``Include`` lines of the configuration file ``path`` read, directly or
    through other included files, in the order they are read (a file included twice, twice).

    A command checks its outputs against these before any work, so that an output cannot
    overwrite a file the configuration includes.  The reading is :func:`read_config`'s, with its
    errors.
    """
    return _read_file(path, what, max_bytes)[1].included


def _read_file(path: str | os.PathLike[str], what: str, max_bytes: int | None) -> tuple[list[ConfigLine], _Reading]:
    from ..io import read_text
    from ..io.textfile import DEFAULT_MAX_BYTES, refuse_markup

    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    text = read_text(path, max_bytes=limit, what=what)
    refuse_markup(text, os.fspath(path), with_article(what))
    return _lines(text, os.fspath(path), what, limit, os.path.getsize(path))


def key_values(line: ConfigLine) -> list[tuple[str, str]]:
    """``(key, value)`` pairs of a line as Slurm's configuration parser reads them: ``KEY=VALUE``,
    white space allowed around ``=``, a value in double quotes may hold white space.

    >>> key_values(ConfigLine("f", 1, 'NodeName = n[1-2] Feature="a, b"'))
    [('NodeName', 'n[1-2]'), ('Feature', 'a, b')]
    """
    out: list[tuple[str, str]] = []
    pos = 0
    text = line.text
    while pos < len(text):
        m = _KEY_VALUE.match(text, pos)
        if m is None:
            token = text[pos:].split()[0]
            key, eq, rest = text[pos:].strip().partition("=")
            value = rest.split(None, 1)[0] if rest.strip() else ""
            if not eq or not key or any(c.isspace() or c == '"' for c in key.strip()):
                what = f"expected KEY=VALUE, got {token!r}"
            elif '"' in value:
                what = f"bad quoting in the value of {key.strip()}: {rest.strip()!r}"
            else:
                what = f"{key.strip()} has no value"
            raise InstanceError(what, source=line.source, path=line.at())
        if m.group(2) and m.group(4) is not None and "=" in m.group(4):
            # "Type= Count=4": Slurm's own parser takes "Count=4" as the type; no field of these
            # files has such a value, so it is an empty value followed by the next field
            raise InstanceError(f"{m.group(1)} has no value (the next field, {m.group(4)!r}, would be read as it)",
                                source=line.source, path=line.at())
        out.append((m.group(1), m.group(3) if m.group(3) is not None else m.group(4)))
        pos = m.end()
    return out


def expand_field(value: str, line: ConfigLine, key: str) -> list[str]:
    """The names of a hostlist value (:func:`~pal_opt.topology.hostlist.expand_hostlist`: node
    lists, ``File=/dev/nvidia[0-7]``); a bad one is an error naming the line and the field."""
    try:
        return expand_hostlist(value)
    except InstanceError as exc:
        raise InstanceError(exc.message, source=line.source, path=line.at(key)) from None


def parse_count(text: str) -> int | None:
    """A Slurm count (``8``, ``20M``: K, M, G, T, P multiply by powers of 1024), or None if ``text``
    is not one.

    >>> parse_count("8"), parse_count("2k"), parse_count("a100")
    (8, 2048, None)
    """
    m = _COUNT.fullmatch(text.strip())
    return int(m.group(1)) * _MULTIPLIER[m.group(2).lower()] if m else None
