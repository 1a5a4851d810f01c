"""Guarded reading and atomic writing: the names of the former ``safe`` module, in one place.

The code lives in one module per purpose; import from there in new code:

* :mod:`~pal_opt.io.textfile` — :func:`read_text` and the limits (``DEFAULT_MAX_*``,
  ``MAX_INT_DIGITS``);
* :mod:`~pal_opt.io.jsonfile` — :func:`load_json`, :func:`parse_json`, :class:`BadNumber`,
  :func:`check_depth`;
* :mod:`~pal_opt.io.csvfile` — :func:`read_csv`, :class:`CsvTable`;
* :mod:`~pal_opt.io.atomic` — :func:`atomic_write_text`.

``docs/limits.md`` lists every limit with its measured cost.
"""

from __future__ import annotations

import os  # noqa: F401 - tests patch ``safe.os.replace`` (the one os.replace atomic.py calls)

from .atomic import atomic_write_text
from .csvfile import CsvTable, read_csv
from .jsonfile import BadNumber, check_depth, load_json, parse_json
from .textfile import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_CELLS,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_VALUES,
    MAX_INT_DIGITS,
    read_text,
)

__all__ = [
    "BadNumber",
    "CsvTable",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_CELLS",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_VALUES",
    "MAX_INT_DIGITS",
    "atomic_write_text",
    "check_depth",
    "load_json",
    "parse_json",
    "read_csv",
    "read_text",
]
