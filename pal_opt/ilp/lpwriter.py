"""Our own CPLEX-LP text writer for a :class:`~pal_opt.ilp.program.Program` (the round program, or any).

Deterministic (same formulation → same bytes): variables and rows in formulation order,
coefficients of a row in column order, numbers printed with :data:`DIGITS` significant digits
(integers exactly), lines wrapped before :data:`WIDTH` characters.  Used for the golden exports
in ``formulations/golden/``; HiGHS reads the files back (see the tests).

Sections: ``Minimize`` (with the objective offset as a constant term), ``Subject To`` (ranged
rows become two rows, ``<name>_lo`` and ``<name>_hi``), ``Bounds`` (every variable, so the file
does not depend on LP-format defaults), ``Generals`` and ``End``.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Iterable

import numpy as np

from ..errors import InputTypeError
from ..io.atomic import atomic_write_text
from ..options import file_path, require_text
from .program import Program

__all__ = ["DIGITS", "WIDTH", "format_number", "lp_text", "write_lp"]

DIGITS = 12
WIDTH = 78


def format_number(x: float) -> str:
    """Integers exactly, other numbers with :data:`DIGITS` significant digits.

    >>> format_number(3.0), format_number(-0.6931471805599453), format_number(1e-20)
    ('3', '-0.69314718056', '1e-20')
    """
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == math.floor(x) and abs(x) < 1e15:
        return str(int(x))
    return format(x, f".{DIGITS}g")


def _terms(coefs: Iterable[tuple[float, str]]) -> list[str]:
    out = []
    for k, (a, name) in enumerate(coefs):
        sign = "-" if a < 0 else "+"
        mag = abs(a)
        body = name if mag == 1 else f"{format_number(mag)} {name}"
        out.append(f"{sign} {body}" if k or sign == "-" else body)
    return out


def _wrap(head: str, tokens: list[str], tail: str = "") -> list[str]:
    lines = []
    cur = head
    for tok in tokens + ([tail] if tail else []):
        if len(cur) + 1 + len(tok) > WIDTH and cur.strip():
            lines.append(cur)
            cur = "   " + tok
        else:
            cur = f"{cur} {tok}" if cur else tok
    lines.append(cur)
    return lines


def lp_text(form: Program, comment: str | None = None, title: str = "pal-opt round integer program") -> str:
    """The program as CPLEX-LP text, headed by ``title`` and ``comment`` (each a str; ``comment``
    may be None)."""
    require_text(title, "title")
    if comment is not None:
        require_text(comment, "comment")
    names = form.var_names
    out: list[str] = [rf"\ {title} (pal_opt.ilp.lpwriter)"]
    if comment:
        for line in comment.splitlines():
            # not at a hyphen: a name such as pal-artifact or a job id such as job-12 stays whole
            out += [rf"\ {part}" for part in textwrap.wrap(line, WIDTH - 2, break_on_hyphens=False) or [""]]
    out.append(rf"\ {form.num_vars} variables ({int(form.integrality.sum())} integer), {form.num_rows} rows, "
               f"{int(form.A.nnz)} nonzeros")
    out.append("Minimize")
    nz = np.flatnonzero(form.c)
    toks = _terms((float(form.c[i]), names[i]) for i in nz.tolist())
    if form.obj_offset:
        off = format_number(abs(form.obj_offset))
        toks.append(f"{'-' if form.obj_offset < 0 else '+'} {off}" if toks else format_number(form.obj_offset))
    if not toks:
        toks = ["0"]
    out += _wrap(" obj:", toks)
    out.append("Subject To")
    A = form.A
    for i, rname in enumerate(form.row_names):
        cols = A.indices[A.indptr[i] : A.indptr[i + 1]]
        vals = A.data[A.indptr[i] : A.indptr[i + 1]]
        toks = _terms((float(a), names[j]) for j, a in zip(cols.tolist(), vals.tolist(), strict=True)) or ["0 " + names[0]]
        lo, hi = float(form.row_lo[i]), float(form.row_hi[i])
        if lo == hi:
            out += _wrap(f" {rname}:", toks, f"= {format_number(hi)}")
            continue
        if not math.isinf(hi):
            out += _wrap(f" {rname if math.isinf(lo) else rname + '_hi'}:", toks, f"<= {format_number(hi)}")
        if not math.isinf(lo):
            out += _wrap(f" {rname if math.isinf(hi) else rname + '_lo'}:", toks, f">= {format_number(lo)}")
    out.append("Bounds")
    for name, lo, hi in zip(names, form.col_lo.tolist(), form.col_hi.tolist(), strict=True):
        if math.isinf(lo) and math.isinf(hi):
            out.append(f" {name} free")
        elif math.isinf(hi):
            out.append(f" {name} >= {format_number(lo)}")
        elif math.isinf(lo):
            out.append(f" -inf <= {name} <= {format_number(hi)}")
        else:
            out.append(f" {format_number(lo)} <= {name} <= {format_number(hi)}")
    ints = [names[i] for i in np.flatnonzero(form.integrality).tolist()]
    if ints:
        out.append("Generals")
        out += _wrap("", ints)
    out.append("End")
    return "\n".join(out) + "\n"


def write_lp(form: Program, path: str | os.PathLike[str], comment: str | None = None,
             title: str = "pal-opt round integer program") -> None:
    """Write :func:`lp_text` to ``path`` (UTF-8, ``\\n`` line ends), atomically: the whole file or,
    on an error, none (:func:`pal_opt.io.atomic.atomic_write_text`).

    Raises
    ------
    InputTypeError
        ``form`` is not a :class:`~pal_opt.ilp.program.Program` (a
        :class:`~pal_opt.ilp.formulation.Formulation` is one), or ``path`` not a file path.
    """
    name = file_path(path)  # an int or True was opened as a file descriptor (True: standard output)
    if not isinstance(form, Program):
        raise InputTypeError(f"must be a Program (pal_opt.ilp.build_formulation), got {type(form).__name__}",
                             path="form")
    atomic_write_text(name, lp_text(form, comment, title))  # a failed or interrupted write leaves no half file
