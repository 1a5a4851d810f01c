"""Slurm hostlist expressions: ``node[01-04,07]``, ``tux[1-3],login1``, ``r[1-2]-gpu[1-4]``.

Expansion follows Slurm's hostlist parser: a comma outside brackets separates expressions; a
bracket holds comma-separated numbers and ``lo-hi`` ranges, each zero-padded to the width the
low bound is written with (``[08-10]`` is ``08 09 10``, ``[8-10]`` is ``8 9 10``); several
brackets in one name expand to every combination (``r[1-2]-g[1-2]`` is ``r1-g1 r1-g2 r2-g1
r2-g2``).  Compression is the inverse, as ``scontrol show hostlist`` writes it: names sorted
by their text before the trailing number and then by that number, runs of consecutive numbers
written as ranges, and a name alone in its group written without brackets.

>>> expand_hostlist("node[01-03,07],login")
['node01', 'node02', 'node03', 'node07', 'login']
>>> compress_hostlist(["node07", "node01", "node02", "node03", "login"])
'login,node[01-03,07]'
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable

from ..errors import InputTypeError, InstanceError
from ..options import require_text

__all__ = ["MAX_HOSTS", "expand_hostlist", "compress_hostlist"]

#: Most host names one expression may expand to (``node[0-999999999]`` is refused, not built).
MAX_HOSTS: int = 1_000_000

_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"(\d{1,18})(?:-(\d{1,18}))?")
_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$", re.DOTALL)
_FORBIDDEN = re.compile(r"[\[\],\s]")


def _split_top(expr: str) -> list[str]:
    """Split at commas outside brackets; brackets must balance and not nest."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(expr):
        if ch == "[":
            if depth:
                raise InstanceError(f"nested '[' in hostlist {expr!r}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise InstanceError(f"unmatched ']' in hostlist {expr!r}")
            depth = 0
        elif ch == "," and not depth:
            parts.append(expr[start:i])
            start = i + 1
    if depth:
        raise InstanceError(f"unclosed '[' in hostlist {expr!r}")
    parts.append(expr[start:])
    return parts


def _bracket_numbers(body: str, expr: str) -> list[str]:
    """The zero-padded numbers of one bracket's body (``01-03,7``)."""
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.fullmatch(item)
        if m is None:
            raise InstanceError(f"bad range {item!r} in hostlist {expr!r} (expected N or N-M, at most 18 digits)")
        lo_s, hi_s = m.group(1), m.group(2)
        lo = int(lo_s)
        hi = lo if hi_s is None else int(hi_s)
        if hi < lo:
            raise InstanceError(f"range {item!r} in hostlist {expr!r} runs backwards")
        if hi - lo >= MAX_HOSTS:
            raise InstanceError(f"range {item!r} in hostlist {expr!r} has more than {MAX_HOSTS:,} hosts")
        width = len(lo_s)
        out.extend(str(v).zfill(width) for v in range(lo, hi + 1))
    return out


def _expand_one(token: str, expr: str, budget: int) -> list[str]:
    if not token:
        raise InstanceError(f"empty host name in hostlist {expr!r}")
    if any(ch.isspace() for ch in token):
        raise InstanceError(f"white space in hostlist {expr!r}")
    literals = _BRACKET.split(token)  # literal, body, literal, body, ..., literal
    choices: list[list[str]] = []
    for k, piece in enumerate(literals):
        choices.append(_bracket_numbers(piece, expr) if k % 2 else [piece])
    count = math.prod(len(c) for c in choices)
    if count > budget:
        raise InstanceError(f"hostlist {expr!r} expands to more than {MAX_HOSTS:,} hosts")
    return ["".join(parts) for parts in itertools.product(*choices)]


def expand_hostlist(expr: str) -> list[str]:
    """The host names of a Slurm hostlist expression, in the order written, each once.

    Raises
    ------
    InstanceError
        Unbalanced or nested brackets, an empty name, a bad or backwards range, or more than
        :data:`MAX_HOSTS` names (the message names the expression; callers add file and line).

    Examples
    --------
    >>> expand_hostlist("tux[1-3]")
    ['tux1', 'tux2', 'tux3']
    >>> expand_hostlist("r[1-2]-g[8-9]")
    ['r1-g8', 'r1-g9', 'r2-g8', 'r2-g9']
    """
    names: dict[str, None] = {}
    for token in _split_top(require_text(expr, "expr")):
        for name in _expand_one(token, expr, MAX_HOSTS - len(names)):
            names.setdefault(name)
    return list(names)


def _sort_key(name: str) -> tuple[str, int, int, str]:
    m = _TRAILING_DIGITS.match(name)
    if m is None or len(m.group(2)) > 18:  # a name ending in a huge number is kept whole
        return (name, 0, 0, name)
    return (m.group(1), 1, int(m.group(2)), m.group(2))


def _runs(digits: list[str]) -> list[str]:
    """Range items (``01-03``, ``07``) for digit strings sorted by value: a run keeps the width
    of its first number and extends while the next number, padded to that width, is written so."""
    items: list[str] = []
    k = 0
    while k < len(digits):
        first = digits[k]
        width, value = len(first), int(first)
        j = k
        while j + 1 < len(digits) and digits[j + 1] == str(value + (j + 1 - k)).zfill(width):
            j += 1
        items.append(first if j == k else f"{first}-{digits[j]}")
        k = j + 1
    return items


def compress_hostlist(names: Iterable[object]) -> str:
    """A Slurm hostlist expression for ``names`` (sorted, each once; see the module docstring).

    ``expand_hostlist(compress_hostlist(names))`` gives back the same set of names.  Names are
    taken as text (``str(name)``).

    Raises
    ------
    InstanceError
        A name that is empty or holds white space, ``[``, ``]`` or ``,`` (no hostlist can say it).

    Examples
    --------
    >>> compress_hostlist(["n9", "n10", "n11", "n013"])
    'n[9-11,013]'
    >>> compress_hostlist(["a"])
    'a'
    """
    if isinstance(names, str | bytes) or not isinstance(names, Iterable):  # a str: its letters as hosts
        raise InputTypeError(f"must be a list of host names, got {type(names).__name__} {names!r:.60}", path="names")
    unique = sorted({str(n) for n in names}, key=_sort_key)
    for n in unique:
        if not n or _FORBIDDEN.search(n):
            raise InstanceError(f"host name {n!r} cannot be written as a Slurm hostlist")
    out: list[str] = []
    for (prefix, numbered), group in itertools.groupby(unique, key=lambda n: _sort_key(n)[:2]):
        members = list(group)
        if not numbered:
            out.extend(members)
        elif len(members) == 1:
            out.append(members[0])
        else:
            digits = [m[len(prefix):] for m in members]
            out.append(f"{prefix}[{','.join(_runs(digits))}]")
    return ",".join(out)
