"""Guarded JSON reading: :func:`load_json` and :func:`parse_json`.

On top of :func:`~pal_opt.io.textfile.read_text`'s guards (size, encoding, binary), a JSON
document is rejected for a syntax error (with line and column), more values than a limit
(2 million), nesting deeper than a limit, or a key repeated inside one object.

Bad numbers do not stop the parse.  ``NaN``/``Infinity`` literals, numbers that overflow a float
and integers with absurdly many digits become :class:`BadNumber` placeholders, so that the
validator that meets one reports it at its field path (``jobs[3].demand: must be a positive
integer, got NaN``) rather than at a line and column.  :func:`first_non_json` finds them (and
anything else JSON cannot hold, in documents built in Python) for the validators.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Iterable
from typing import Any

from ..errors import InstanceError
from ..options import check_count
from .textfile import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, DEFAULT_MAX_VALUES, MAX_INT_DIGITS, read_text

__all__ = [
    "BadNumber",
    "parse_json",
    "load_json",
    "check_depth",
    "check_value_count",
    "describe",
    "field_path",
    "first_non_json",
    "other_output",
]

#: A path inside a document: object keys and array indices, outermost first.
Path = tuple[str | int, ...]

_HUGE_INT = 10**MAX_INT_DIGITS

#: Where a number that overflows a float or has more than MAX_INT_DIGITS digits could be: a run
#: of more digits than that, or an exponent of three digits or more.  Without either, every
#: number is below 10**(MAX_INT_DIGITS + 99) in magnitude, so the text is parsed without a Python
#: callback per number (the 65,536-GPU instance has 430,000 numbers).  Found by substring search
#: after mapping every digit to 0 (a regular expression takes ten times as long).  In JSON an
#: exponent always follows a digit, so the exponent patterns start with one: text in strings such
#: as a round named ``scale-8192x8`` (``e-8192``) does not send the whole file to the slow path.
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789E-", b"0000000000e+")
_RISKY = (b"0" * (MAX_INT_DIGITS + 1), b"0e000", b"0e+000")


def _may_hold_bad_numbers(text: str) -> bool:
    """Whether ``text`` may hold a number :func:`_parse_float` or :func:`_parse_int` would refuse.

    >>> _may_hold_bad_numbers('[1.5e300, 2]'), _may_hold_bad_numbers('[1.5e30, 2, "e12"]')
    (True, False)
    >>> _may_hold_bad_numbers('[1E-0400]'), _may_hold_bad_numbers('{"name": "scale-8192x8", "f": [1.0]}')
    (True, False)
    """
    mapped = text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZERO)
    return any(r in mapped for r in _RISKY)


_CONTAINERS = frozenset((dict, list))


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
            values: Iterable[Any] = node.values()
        elif isinstance(node, list):
            values = node
        else:
            continue
        if not _CONTAINERS.isdisjoint(map(type, values)):  # (scans a long column at C speed)
            stack.extend((v, depth + 1) for v in values if isinstance(v, (dict, list)))


def check_value_count(text: str, *, source: str = "<memory>", max_values: int = DEFAULT_MAX_VALUES) -> None:
    """Raise :class:`InstanceError` if the JSON ``text`` holds ``max_values`` values or more,
    counted on the text as commas (the check :func:`parse_json` makes before parsing)."""
    n_commas = text.count(",")
    if n_commas >= max_values:
        raise InstanceError(
            f"has {n_commas:,} commas, more than the limit of {max_values:,} JSON values", source=source
        )


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
    check_count(max_depth, "max_depth")
    check_count(max_values, "max_values")
    check_value_count(text, source=source, max_values=max_values)
    duplicates: list[tuple[dict[str, Any], str]] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(pairs)
        if len(d) != len(pairs) and not duplicates:
            seen: set[str] = set()
            key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            duplicates.append((d, key))
        return d

    numbers: dict[str, Any] = {}
    if _may_hold_bad_numbers(text):
        numbers = {"parse_float": _parse_float, "parse_int": _parse_int}
    try:
        obj = json.loads(text, parse_constant=_parse_constant, object_pairs_hook=pairs_hook, **numbers)
    except json.JSONDecodeError as exc:
        # a document that stops where the error is: a file cut short (a copy or a write interrupted)
        cut = (" (the text ends there: is the file cut short?)" if not text[exc.pos:].strip() and text.strip() else
               " (the text ends inside it: is the file cut short?)" if exc.msg.startswith("Unterminated string") else "")
        raise InstanceError(f"invalid JSON: {exc.msg}{cut}", source=source,
                            path=f"line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InstanceError(f"nesting deeper than {max_depth} levels", source=source) from None
    except ValueError as exc:  # e.g. int conversion limits
        raise InstanceError(f"invalid JSON: {exc}", source=source) from None
    check_depth(obj, max_depth, source=source)
    if duplicates:
        d, key = duplicates[0]
        raise InstanceError(
            f"duplicate key {key!r} (JSON readers disagree on which value wins)",
            source=source,
            path=field_path((*_path_of(obj, d), key)),
        )
    return obj


def _path_of(root: Any, target: Any) -> Path:
    """The path of the container ``target`` inside ``root``."""
    stack: list[tuple[Any, Path]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, dict):
            stack.extend((v, (*path, k)) for k, v in node.items() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(node) if isinstance(v, (dict, list)))
    return ()  # pragma: no cover - target is inside root


def load_json(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_values: int = DEFAULT_MAX_VALUES,
    what: str = "JSON file",
    arg: str = "path",
) -> Any:
    """Read and parse a JSON file with guards: :func:`read_text` (``arg``: the public argument
    ``path`` came in as), then :func:`parse_json`."""
    text = read_text(path, max_bytes=max_bytes, what=what, arg=arg)
    return parse_json(text, source=os.fspath(path), max_depth=max_depth, max_values=max_values)


# --------------------------------------------------------------------------- messages
def describe(v: Any) -> str:
    """A short JSON-flavoured description of a value for error messages.

    >>> describe(None), describe(True), describe("x" * 50), describe([1]), describe(10**50)
    ('null', 'true', "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'", 'an array', 'an integer with about 50 digits')
    """
    if isinstance(v, BadNumber):
        return v.describe()
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return repr(v) if len(v) <= 40 else repr(v[:37] + "...")
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, int):  # str() of an int over 4,300 digits raises
        return str(v) if abs(v) < 10**40 else f"an integer with about {abs(v).bit_length() * 0.30103:.0f} digits"
    try:
        t = repr(v)
    except Exception:  # noqa: BLE001 - a foreign object's __repr__ may raise anything
        return f"a {type(v).__name__}"
    return t if len(t) <= 40 else t[:37] + "..."


def field_path(parts: Iterable[str | int]) -> str:
    """``("jobs", 3, "demand")`` -> ``"jobs[3].demand"``.

    >>> field_path(["cluster", "factors", "classA", 7])
    'cluster.factors.classA[7]'
    """
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f"{out and '.'}{p}")
    return out


# --------------------------------------------------------------------------- JSON values
#: Types that need no closer look (numbers do: NaN, infinities, huge integers).
_PLAIN = frozenset({str, bool, type(None), dict, list})
_SCALARS = frozenset({str, bool, type(None), int, float})


def first_non_json(doc: Any, max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[Path, Any, str] | None:
    """The first value inside ``doc`` that JSON (as pal-opt reads it) cannot hold, or None.

    Returns ``(path, value, kind)``.  ``kind`` is ``"value"`` for a :class:`BadNumber`, a
    non-finite float, an integer of more than :data:`~pal_opt.io.textfile.MAX_INT_DIGITS`
    digits or any other Python object (a tuple, a numpy scalar...); ``"key"`` for an object key
    that is not a string (the path is the object's); ``"depth"`` for a container nested deeper
    than ``max_depth``.  Validators run this first: what it passes, a JSON Schema validator can
    compare, order, print and recurse into.  Iterative; a list of plain values costs a few
    C-level passes.

    >>> first_non_json({"a": [1, 2.5, {"b": float("nan")}]})
    (('a', 2, 'b'), nan, 'value')
    """
    stack: list[tuple[Any, Path]] = [(doc, ())]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, (dict, list)):
            return None if _json_scalar(node) else ((), node, "value")
        if len(path) >= max_depth:
            return path, node, "depth"
        if isinstance(node, dict):
            found, nested = _first_in_dict(node)
        else:
            found, nested = _first_in_list(node), not set(map(type, node)) <= _SCALARS
        if found is not None:
            k, v, kind = found
            return ((*path, k) if kind == "value" else path), v, kind
        if nested:
            children = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(reversed([(v, (*path, k)) for k, v in children if isinstance(v, (dict, list))]))
    return None


def _first_in_dict(d: dict[Any, Any]) -> tuple[tuple[Any, Any, str] | None, bool]:
    """The first bad key or scalar value of an object, and whether it holds containers.

    Objects are small (a job), so one pass in Python beats the C-level passes of a list.
    """
    nested = False
    for k, v in d.items():
        if not isinstance(k, str):
            return (k, k, "key"), nested
        t = type(v)
        if t is str or t is bool or v is None:
            continue
        if t is dict or t is list:
            nested = True
        elif t is int:
            if not -_HUGE_INT < v < _HUGE_INT:
                return (k, v, "value"), nested
        elif isinstance(v, (dict, list)):
            nested = True
        elif not _json_scalar(v):
            return (k, v, "value"), nested
    return None, nested


def _first_in_list(values: list[Any]) -> tuple[int, Any, str] | None:
    """The first bad scalar of an array (arrays can be long: C-level passes first)."""
    if _plain_values(set(map(type, values)), values):
        return None
    return next(((i, v, "value") for i, v in enumerate(values)
                 if not isinstance(v, (dict, list)) and not _json_scalar(v)), None)


def _plain_values(types: set[type], values: Collection[Any]) -> bool:
    """Whether every value of a container is certainly JSON-clean (a fast, partial test)."""
    if types <= _PLAIN:
        return True
    if not types - _PLAIN <= {int, float}:
        return False
    nums = values if types <= {int, float} else [v for v in values if type(v) is int or type(v) is float]
    try:
        return all(map(math.isfinite, nums)) and -_HUGE_INT < min(nums) and max(nums) < _HUGE_INT
    except OverflowError:  # an int too large for a float
        return False


def _json_scalar(v: Any) -> bool:
    t = type(v)
    if t is float:
        return math.isfinite(v)
    if t is int:
        return -_HUGE_INT < v < _HUGE_INT
    return t is bool or v is None or isinstance(v, str)


def other_output(doc: Any) -> str | None:
    """What a parsed JSON document without a ``format`` is, when it is another output of pal-opt
    (a simulation result, a partition, a Kubernetes export), given where an instance or a
    placement file is read; None otherwise.

    >>> other_output({"policies": ["pal"], "results": {}}), other_output({"jobs": []})
    ('a simulation result (pal-opt simulate --out)', None)
    """
    if not isinstance(doc, dict) or "format" in doc:
        return None
    if {"policies", "results"} <= doc.keys() or {"n_jobs", "job_results"} <= doc.keys():
        return "a simulation result (pal-opt simulate --out)"
    if {"time_per_sample", "stages"} <= doc.keys():
        return "a pipeline partition (pal-opt partition --out)"
    if doc.get("kind") == "PodPlacements":
        return "a placement exported for Kubernetes (pal-opt export k8s)"
    return None
