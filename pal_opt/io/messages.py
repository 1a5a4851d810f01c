"""One-line messages for schema problems: ``jobs[3].demand: must be a positive integer, got 2.5``.

A :class:`~pal_opt.io.validation.Problem` names the failing JSON Schema keyword and the subschema
holding it; the message says what the subschema expects, in words derived from it
(:func:`expected`), and quotes the bad value shortened (:func:`~pal_opt.io.jsonfile.describe`).
A format can word a few problems its own way (``special``, keyed by the field path with indices
blanked, ``jobs[].locality``, and the keyword).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import InstanceError, with_article
from .jsonfile import BadNumber, Path, describe, field_path
from .textfile import DEFAULT_MAX_DEPTH
from .validation import Problem

__all__ = ["INT64_MAX", "Special", "expected", "explain", "problem_error"]

INT64_MAX = 2**63 - 1

#: ``{(path pattern, keyword): message}``; the message may use ``{got}`` (the value described),
#: ``{count}`` (its length) and ``{other}`` (uniqueItems: the earlier index).  A ``(key,
#: message)`` pair reports the problem at ``path.key`` instead of ``path``.
Special = Mapping[tuple[str, str], "str | tuple[str, str]"]


def problem_error(problem: Problem, source: str, special: Special | None = None) -> InstanceError:
    """The :class:`~pal_opt.errors.InstanceError` for ``problem`` in file ``source``."""
    path, message = explain(problem, special or {})
    return InstanceError(message, source=source, path=field_path(path) or "top level")


def explain(p: Problem, special: Special) -> tuple[Path, str]:
    """``(path, message)`` for a problem; the path may go one key deeper than ``p.path``.

    >>> p = Problem(("jobs", 3, "demand"), "type", 2.5, {"type": "integer", "minimum": 1})
    >>> explain(p, {})
    (('jobs', 3, 'demand'), 'must be a positive integer, got 2.5')
    """
    pattern = re.sub(r"\[\d+\]", "[]", field_path(p.path))
    got = describe(p.instance)
    fields = {"got": got, "other": p.other, "count": len(p.instance) if isinstance(p.instance, (list, dict, str)) else 0}
    custom = special.get((pattern, p.keyword))
    if isinstance(custom, tuple):
        return (*p.path, custom[0]), custom[1].format(**fields)
    if custom is not None:
        return p.path, custom.format(**fields)
    key, message = _generic(p, got)
    return ((*p.path, key) if key is not None else p.path), message


def _generic(p: Problem, got: str) -> tuple[str | None, str]:
    """``(deeper key or None, message)`` by keyword."""
    s, v, word = p.schema, p.instance, p.keyword
    if word == "json":
        fallback = "a finite number" if isinstance(v, (BadNumber, int, float)) else "a JSON value"
        return None, f"must be {expected(s) or fallback}, got {got}"
    if word == "key":
        return None, f"keys must be strings, got {got}"
    if word == "depth":
        return None, f"nesting deeper than {DEFAULT_MAX_DEPTH} levels"
    if word == "required":
        return next(k for k in s["required"] if k not in v), "is required"
    if word == "additionalProperties":
        allowed = s.get("properties", {})
        extra = next(k for k in v if k not in allowed)
        return extra, f"unknown field (expected one of: {', '.join(sorted(allowed))})"
    if word in ("anyOf", "oneOf") and all("required" in b for b in s[word]):
        return None, f"needs one of the fields {', '.join(k for b in s[word] for k in b['required'])}"
    if word in ("minItems", "minProperties") and s[word] == 1:
        return None, "must not be empty"
    if word in ("minItems", "maxItems", "minProperties", "maxProperties"):
        bound = "at least" if word.startswith("min") else "at most"
        return None, f"must have {bound} {s[word]} entries, got {len(v)}"
    if word == "uniqueItems":
        return None, f"duplicate entry {got} (same as entry [{p.other}])"
    if word == "propertyNames":
        return None, f"key {got} is not allowed: keys must be {expected(s)}"
    return None, _bound_message(p, got) or f"must be {expected(s) or 'valid'}, got {got}"


def _bound_message(p: Problem, got: str) -> str | None:
    """``minimum``/``maximum`` wording: integers keep their noun; the 64-bit limit is named."""
    s, word = p.schema, p.keyword
    integer = "integer" in _types(s) and "number" not in _types(s)
    if word == "maximum" and s[word] == INT64_MAX:
        return f"must be {expected(s)} that fits in 64 bits, got {got}"
    if word in ("minimum", "maximum") and not integer:
        return f"must be {'at least' if word == 'minimum' else 'at most'} {s[word]:g}, got {got}"
    return None


def expected(schema: Mapping[str, Any]) -> str:
    """What a subschema asks for, in words (empty if it says nothing this can put in words).

    >>> expected({"type": ["integer", "string"], "minLength": 1})
    'an integer or a non-empty string'
    >>> expected({"title": "GPU id", "type": "integer", "minimum": 0})
    'a GPU id (non-negative integer)'
    >>> expected({"enum": ["free", "busy"]})
    "one of 'free', 'busy'"
    """
    if "const" in schema:
        return describe(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(describe(x) for x in schema["enum"])
    types = _types(schema)
    noun = " or ".join(_type_noun(t, schema) for t in types)
    title = schema.get("title")  # names a value ("GPU id"), unless the value is a whole object or array
    if isinstance(title, str) and title and not {"object", "array"} & set(types):
        return with_article(title) + (f" ({noun.split(' ', 1)[1]})" if noun else "")
    return noun


def _types(schema: Mapping[str, Any]) -> list[str]:
    t = schema.get("type", [])
    return [t] if isinstance(t, str) else list(t)


def _type_noun(t: str, s: Mapping[str, Any]) -> str:
    if t == "integer":
        # a range worth saying (not the int64 guard every id and count carries)
        if isinstance(s.get("minimum"), int) and isinstance(s.get("maximum"), int) and s["maximum"] < 2**31:
            return f"an integer in {s['minimum']}..{s['maximum']}"
        if s.get("minimum") == 1 or s.get("exclusiveMinimum") == 0:
            return "a positive integer"
        return "a non-negative integer" if s.get("minimum") == 0 else "an integer"
    if t == "number":
        return "a finite positive number" if s.get("exclusiveMinimum") == 0 else "a finite number"
    if t == "string":
        return "a non-empty string" if s.get("minLength", 0) >= 1 else "a string"
    return {"boolean": "true or false", "null": "null", "array": "an array", "object": "an object"}.get(t, t)
