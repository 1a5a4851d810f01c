"""Check a JSON document against a JSON Schema with ``jsonschema``, column by column.

``jsonschema`` decides what is valid; this module only decides how often to ask it.  Asked
value by value it costs about 17 µs a value: measured on this machine, the 2,048-GPU
``instances/large-256x8.json`` (16,000 values) took 0.40 s against the 31 ms the whole load took
before (0.1 s for its 600 jobs alone), and a 65,536-GPU round 8.9 s.  So the document and the
schema are walked together and each *column* — the values one subschema applies to: a GPU
column, every job's ``demand``, every item of every job's ``placement`` — is checked at once:

* a column of plain scalars under a type-and-bounds subschema (``{"type": "integer",
  "minimum": 0}``, an ``enum`` of strings...) is checked with ``set``/``min``/``max`` at C speed.
  These fast tests only ever *accept*; a column they do not accept goes to ``jsonschema``;
* otherwise each distinct value is validated by ``jsonschema`` once;
* objects: the keywords that depend on the keys alone (``type``, ``required``,
  ``additionalProperties: false``, ``propertyNames``, ``anyOf`` of ``required``...) once per
  distinct key sequence, then each property's values as a column;
* arrays: the length keywords once per distinct length, the items of all arrays of a column as
  one column, ``uniqueItems`` with a hash set (naming the repeated entry);
* the key and length keywords, and ``const``/``enum`` of integers, have fast tests too, so a
  valid document is accepted without importing ``jsonschema`` at all (0.1–0.2 s of a CLI call);
  it is imported when a test does not accept.

With this, ``load_instance`` (parse included, median of 5, CPU time on a shared 2-core machine)
takes 20–24 ms on large-256x8 against 20–31 ms with the hand-written checker it replaced, and
1.06 s on 65,536 GPUs (19,200 jobs) against 1.13–1.37 s.

Any subschema using other keywords is validated whole, by ``jsonschema``, once per distinct
value.  The verdict is ``jsonschema``'s; of the errors, the first in document order is reported
as a :class:`Problem`.  Values JSON cannot hold (``NaN``, tuples, numpy scalars...) are found
first by :func:`~pal_opt.io.jsonfile.first_non_json`, so ``jsonschema`` never meets them.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .jsonfile import Path, first_non_json

if TYPE_CHECKING:  # jsonschema is imported when a document is first checked (it takes ~0.2 s)
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = ["Problem", "SchemaChecker", "subschema_at"]

Order = tuple[int, ...]
Schema = Mapping[str, Any]

#: Keywords that never change a verdict.
_ANNOTATIONS = frozenset({"title", "description", "default", "$comment", "examples", "$schema", "$id", "$defs"})
#: Subschemas made only of these (plus annotations) have a fast column test.
_SCALAR_KEYS = frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                          "minLength", "maxLength", "enum", "const"}) | _ANNOTATIONS
#: Subschemas made only of these are split into a key/length part and columns.
_SPLIT_KEYS = frozenset({"type", "properties", "additionalProperties", "required", "minProperties",
                         "maxProperties", "propertyNames", "items", "minItems", "maxItems", "uniqueItems",
                         "anyOf", "allOf", "oneOf"}) | _ANNOTATIONS
#: What a branch of ``anyOf``/``allOf``/``oneOf`` may hold to depend on the keys alone.
_KEY_ONLY = frozenset({"required", "minProperties", "maxProperties"}) | _ANNOTATIONS
#: Subschemas made only of these have a fast test on one object or array (:func:`_shape_accepts`).
_SHAPE_KEYS = frozenset({"type", "properties", "additionalProperties", "required", "minProperties",
                         "maxProperties", "propertyNames", "minItems", "maxItems", "anyOf", "allOf",
                         "oneOf"}) | _ANNOTATIONS
#: JSON Schema type names a Python value of each JSON type satisfies.
_JSON_TYPES: dict[type, frozenset[str]] = {
    int: frozenset({"integer", "number"}),
    float: frozenset({"number"}),  # an integral float is an "integer" too: left to jsonschema
    str: frozenset({"string"}),
    bool: frozenset({"boolean"}),
    type(None): frozenset({"null"}),
    dict: frozenset({"object"}),
    list: frozenset({"array"}),
}


@dataclass(frozen=True)
class Problem:
    """The first thing wrong in a document.

    Attributes
    ----------
    path
        Where: object keys and array indices from the document's root.
    keyword
        The JSON Schema keyword that failed (``"type"``, ``"required"``, ``"uniqueItems"``...), or
        ``"json"`` for a value JSON cannot hold, ``"key"`` for an object key that is not a string,
        ``"depth"`` for nesting deeper than :data:`~pal_opt.io.textfile.DEFAULT_MAX_DEPTH`.
    instance
        The value at ``path`` (for ``propertyNames`` and ``"key"``: the key).
    schema
        The subschema holding ``keyword`` (the subschema at ``path`` for ``"json"``; empty if none).
    other
        For ``uniqueItems``: the index of the earlier equal entry.
    order
        Position in the document (indices of keys and items), for picking the first problem.
    """

    path: Path
    keyword: str
    instance: Any
    schema: Schema
    other: int | None = None
    order: Order = field(default=(), compare=False)


@dataclass
class _Column:
    """Values one subschema applies to, and where each sits (path and order), found lazily."""

    values: Sequence[Any]
    where: Callable[[int], tuple[Path, Order]]


class SchemaChecker:
    """Validate documents against one schema, column by column (module docstring).

    Parameters
    ----------
    schema
        A JSON Schema (draft 2020-12); ``$ref`` may point inside it (``#/$defs/...``).

    Examples
    --------
    >>> c = SchemaChecker({"type": "array", "items": {"type": "integer", "minimum": 0}})
    >>> c.first_problem([0, 1, 2]) is None
    True
    >>> p = c.first_problem([0, -1, "x"])
    >>> p.path, p.keyword, p.instance
    ((1,), 'minimum', -1)
    """

    def __init__(self, schema: Schema):
        self.schema = schema
        self.shapes: dict[int, dict[str, Any]] = {}

    @functools.cached_property
    def validator(self) -> Validator:
        """The ``jsonschema`` validator of the whole schema (subschemas are checked by evolving it)."""
        from jsonschema import Draft202012Validator

        return Draft202012Validator(self.schema)

    def first_problem(self, doc: Any, subschema: Schema | None = None, base: Path = ()) -> Problem | None:
        """The first problem of ``doc`` (under ``subschema``, default the whole schema), or None.

        ``base`` is the path of ``doc`` inside a larger document, prefixed to every path.
        """
        schema = self.schema if subschema is None else subschema
        bad = first_non_json(doc)
        if bad is not None:
            rel, value, kind = bad
            sub = subschema_at(self.schema, rel, start=schema) or {}
            return Problem(base + rel, "json" if kind == "value" else kind, value, sub)
        return _Walk(self).check(_Column([doc], lambda i: (base, ())), schema)


class _Walk:
    """One validation: the checker plus the distinct values already seen valid."""

    def __init__(self, checker: SchemaChecker):
        self.checker = checker
        self.root = checker.schema
        self.shapes = checker.shapes
        self.memo: set[tuple[int, Any]] = set()

    def check(self, col: _Column, schema: Any) -> Problem | None:
        schema = _resolve(self.root, schema)
        if schema is True or not col.values or (isinstance(schema, Mapping) and schema.keys() <= _ANNOTATIONS):
            return None
        if isinstance(schema, Mapping) and schema.keys() <= _SCALAR_KEYS and _fast_accepts(col.values, schema):
            return None
        if isinstance(schema, Mapping) and _splittable(schema):
            return self.split(col, schema)
        bad = self.each(col, schema, _freeze)
        return bad[1] if bad else None

    def each(self, col: _Column, schema: Any, key: Callable[[Any], Any]) -> tuple[int, Problem] | None:
        """Validate each distinct value (by ``key``) once; the first failure and its index.

        A value of a type ``schema`` does not admit, or a string under a scalar ``schema``, is
        decided here: jsonschema would quote the whole value in a message pal-opt does not use,
        and a hostile file's 20-megabyte string costs 80 MB more each time it is quoted.
        """
        sid = id(schema)
        validator = None
        for i, v in enumerate(col.values):
            k = (sid, key(v))
            if k in self.memo:
                continue
            word = _decided(v, schema)
            if word is None:
                if validator is None:  # jsonschema is imported here, the first time it is needed
                    validator = self.checker.validator.evolve(schema=schema)
                errors = list(validator.iter_errors(v))
            if word == "" or (word is None and not errors):
                self.memo.add(k)
                continue
            path, order = col.where(i)
            if word:
                return i, Problem(path, word, v, schema, order=order)
            return i, min((_from_error(e, v, path, order) for e in errors), key=_first)
        return None

    def split(self, col: _Column, schema: Schema) -> Problem | None:
        """Key and length keywords per distinct shape, then properties and items as columns.

        Items after the first with a wrong shape are not looked into: nothing there comes first.
        """
        bad = self.each(col, self.shape(schema), _shape_key)
        found = [bad[1] if bad else None]
        if bad is not None:
            col = _Column(col.values[: bad[0]], col.where)
        props: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        if props or isinstance(extra, Mapping):
            found += self.properties(col, props, extra if isinstance(extra, Mapping) else None)
        arrays = [(i, v) for i, v in enumerate(col.values) if isinstance(v, list)]
        if "items" in schema and arrays:
            found.append(self.check(_items_column(col, arrays), schema["items"]))
        if schema.get("uniqueItems") is True:
            found += [_first_duplicate(v, i, col, schema) for i, v in arrays]
        return min((p for p in found if p is not None), key=_first, default=None)

    def properties(self, col: _Column, props: Mapping[str, Any], extra: Any) -> list[Problem | None]:
        """Each property's values (over the column's objects) as a column of its own."""
        objs = [o for o in col.values if isinstance(o, dict)]
        keys = list(props) if extra is None else list(dict.fromkeys(itertools.chain.from_iterable(objs)))
        found = []
        for k in keys:
            values = [o[k] for o in objs if k in o]
            if values:
                found.append(self.check(_Column(values, functools.partial(_property_where, col, k)), props.get(k, extra)))
        return found

    def shape(self, schema: Schema) -> dict[str, Any]:
        """``schema`` without what the columns check: the part that depends on keys and lengths."""
        shape = self.shapes.get(id(schema))
        if shape is None:
            shape = {k: v for k, v in schema.items() if k not in ("items", "uniqueItems")}
            if "properties" in shape:
                shape["properties"] = {k: True for k in shape["properties"]}
            if isinstance(shape.get("additionalProperties"), Mapping):
                shape["additionalProperties"] = True
            self.shapes[id(schema)] = shape
        return shape


# --------------------------------------------------------------------------- helpers
def _fast_accepts(values: Sequence[Any], schema: Schema) -> bool:
    """True only if every value certainly satisfies the scalar ``schema`` (False: not sure)."""
    types = set(map(type, values))
    allowed = schema.get("type")
    if allowed is not None:
        names = {allowed} if isinstance(allowed, str) else set(allowed)
        if not all(t in _JSON_TYPES and _JSON_TYPES[t] & names for t in types):
            return False
    for word in ("enum", "const"):
        if word in schema:
            # JSON equality is Python's within str and within int (bool is neither)
            options = schema["enum"] if word == "enum" else [schema["const"]]
            if (types not in ({str}, {int}) or not all(type(o) in types for o in options)
                    or not set(values) <= set(options)):
                return False
    if types & {int, float}:
        nums = values if types <= {int, float} else [x for x in values if type(x) in (int, float)]
        if not _in_bounds(min(nums), max(nums), schema):
            return False
    if str in types and ("minLength" in schema or "maxLength" in schema):
        strs = values if types == {str} else [x for x in values if type(x) is str]
        lengths = list(map(len, strs))
        if min(lengths) < schema.get("minLength", 0) or max(lengths) > schema.get("maxLength", max(lengths)):
            return False
    return True


def _first(p: Problem) -> tuple[Order, bool]:
    """Sort key: document order; at one place, a wrong type before what else is wrong there."""
    return p.order, p.keyword != "type"


def _decided(v: Any, schema: Any) -> str | None:
    """The failing keyword (``""``: none) where it is certain without jsonschema, else None."""
    if not isinstance(schema, Mapping) or "type" not in schema and type(v) is not str:
        return None
    allowed = schema.get("type")
    if allowed is not None:
        names = {allowed} if isinstance(allowed, str) else set(allowed)
        kinds = _JSON_TYPES.get(type(v))
        if kinds is None:  # a subclass of str, list or dict: jsonschema decides
            return None
        if not (kinds & names or (type(v) is float and "integer" in names and v.is_integer())):
            return "type"
    if type(v) in (dict, list) and _shape_accepts(v, schema):
        return ""
    if type(v) is not str or not schema.keys() <= _SCALAR_KEYS:
        return None
    for word in ("enum", "const"):  # JSON equality is Python's for a string
        if word in schema and v not in (schema["enum"] if word == "enum" else [schema["const"]]):
            return word
    if len(v) < schema.get("minLength", 0):
        return "minLength"
    return "maxLength" if len(v) > schema.get("maxLength", len(v)) else ""


def _shape_accepts(v: dict[str, Any] | list[Any], schema: Schema) -> bool:
    """True only if the object or array ``v`` certainly satisfies a key-and-length ``schema``.

    What :meth:`_Walk.shape` leaves of a split schema (its properties' and items' subschemas
    are checked as columns), so a valid document is checked without importing jsonschema.
    """
    if not schema.keys() <= _SHAPE_KEYS or any(p is not True for p in schema.get("properties", {}).values()):
        return False
    allowed = schema.get("type")
    if allowed is not None and not _JSON_TYPES[type(v)] & ({allowed} if isinstance(allowed, str) else set(allowed)):
        return False
    extra = schema.get("additionalProperties", True)
    names = schema.get("propertyNames", True)
    branches = {w: [_has_keys(v, b) for b in schema.get(w, ())] for w in ("anyOf", "allOf", "oneOf")}
    if (extra not in (True, False) or None in itertools.chain.from_iterable(branches.values())
            or not (names is True or isinstance(names, Mapping) and names.keys() <= _SCALAR_KEYS)):
        return False
    if isinstance(v, list):
        sized = schema.get("minItems", 0) <= len(v) <= schema.get("maxItems", len(v))
    else:
        sized = ((extra is True or v.keys() <= schema.get("properties", {}).keys())
                 and (names is True or not v or _fast_accepts(list(v), names))
                 and bool(_has_keys(v, {k: schema[k] for k in _KEY_ONLY if k in schema})))
    return (
        sized
        and all(branches["allOf"])
        and ("anyOf" not in schema or any(branches["anyOf"]))
        and ("oneOf" not in schema or branches["oneOf"].count(True) == 1)
    )


def _has_keys(v: dict[str, Any] | list[Any], schema: Any) -> bool | None:
    """Whether ``v`` meets a ``required``/``min``/``maxProperties`` schema (None: another schema)."""
    if not isinstance(schema, Mapping) or not schema.keys() <= _KEY_ONLY:
        return None
    if not isinstance(v, dict):  # object keywords do not apply to arrays
        return True
    n = len(v)
    return (all(k in v for k in schema.get("required", ()))
            and schema.get("minProperties", 0) <= n <= schema.get("maxProperties", n))


def _in_bounds(lo: float, hi: float, schema: Schema) -> bool:
    return (
        ("minimum" not in schema or lo >= schema["minimum"])
        and ("exclusiveMinimum" not in schema or lo > schema["exclusiveMinimum"])
        and ("maximum" not in schema or hi <= schema["maximum"])
        and ("exclusiveMaximum" not in schema or hi < schema["exclusiveMaximum"])
    )


def _splittable(schema: Schema) -> bool:
    if not schema.keys() <= _SPLIT_KEYS or not any(k in schema for k in ("properties", "items", "additionalProperties")):
        return False
    return all(
        isinstance(b, Mapping) and b.keys() <= _KEY_ONLY
        for word in ("anyOf", "allOf", "oneOf")
        for b in schema.get(word, ())
    )


def _shape_key(v: Any) -> Any:
    if isinstance(v, dict):
        return (dict, tuple(v))
    if isinstance(v, list):
        return (list, len(v))
    return _freeze(v)


def _freeze(v: Any) -> Any:
    """A hashable stand-in for a JSON value (types kept apart: 1, 1.0 and true differ)."""
    if isinstance(v, list):
        return (list, tuple(map(_freeze, v)))
    if isinstance(v, dict):
        return (dict, tuple((k, _freeze(x)) for k, x in v.items()))
    return (type(v), v)


def _property_where(col: _Column, key: str, j: int) -> tuple[Path, Order]:
    """Where the ``j``-th value of property ``key`` sits: in the ``j``-th object of ``col`` that has it."""
    i, obj = [(i, o) for i, o in enumerate(col.values) if isinstance(o, dict) and key in o][j]
    path, order = col.where(i)
    return (*path, key), (*order, list(obj).index(key))


def _items_column(col: _Column, arrays: list[tuple[int, list[Any]]]) -> _Column:
    """The items of every array of ``col``, as one column."""
    if len(arrays) == 1:
        i, only = arrays[0]

        def where_one(j: int) -> tuple[Path, Order]:
            path, order = col.where(i)
            return (*path, j), (*order, j)

        return _Column(only, where_one)
    starts = list(itertools.accumulate((len(v) for _, v in arrays), initial=0))

    def where(j: int) -> tuple[Path, Order]:
        a = bisect.bisect_right(starts, j) - 1
        path, order = col.where(arrays[a][0])
        k = j - starts[a]
        return (*path, k), (*order, k)

    return _Column(list(itertools.chain.from_iterable(v for _, v in arrays)), where)


def _first_duplicate(values: list[Any], i: int, col: _Column, schema: Schema) -> Problem | None:
    """The first entry equal (by JSON Schema's rules) to an earlier one, as a uniqueItems problem."""
    if set(map(type, values)) <= {int, float, str, type(None)} and len(set(values)) == len(values):
        return None  # Python's equality is JSON Schema's on these (not on true == 1)
    seen: dict[Any, int] = {}
    for j, v in enumerate(values):
        k = _unique_key(v)
        if k in seen:
            path, order = col.where(i)
            return Problem((*path, j), "uniqueItems", v, schema, other=seen[k], order=(*order, j))
        seen[k] = j
    return None


def _unique_key(v: Any) -> Any:
    """Equal for values JSON Schema calls equal: 1 and 1.0 are, 1 and true are not."""
    if type(v) in (int, float):
        return (int, v)  # hash(1) == hash(1.0) and 1 == 1.0
    if isinstance(v, list):
        return (list, tuple(map(_unique_key, v)))
    if isinstance(v, dict):
        return (dict, frozenset((k, _unique_key(x)) for k, x in v.items()))
    return (type(v), v)


def _from_error(e: ValidationError, value: Any, path: Path, order: Order) -> Problem:
    rel = tuple(e.absolute_path)
    keyword = str(e.validator)
    if "propertyNames" in e.relative_schema_path:
        keyword = "propertyNames"
    return Problem((*path, *rel), keyword, e.instance, e.schema if isinstance(e.schema, Mapping) else {},
                   order=(*order, *_order_in(value, rel)))


def _order_in(value: Any, rel: Path) -> Order:
    """Positions of the keys and indices of ``rel`` inside ``value``."""
    out = []
    for part in rel:
        if isinstance(value, dict):
            out.append(list(value).index(part))
        else:
            out.append(int(part))
        value = value[part]
    return tuple(out)


def subschema_at(schema: Schema, path: Path, start: Schema | None = None) -> Schema | None:
    """The subschema that applies at ``path`` through ``properties``, ``additionalProperties`` and
    ``items`` (local ``$ref`` followed), or None where the schema says nothing specific."""
    node: Any = schema if start is None else start
    for part in path:
        node = _resolve(schema, node)
        if not isinstance(node, Mapping):
            return None
        if isinstance(part, int):
            node = node.get("items")
        else:
            node = node.get("properties", {}).get(part, node.get("additionalProperties"))
        if not isinstance(node, Mapping):
            return None
    node = _resolve(schema, node)
    return node if isinstance(node, Mapping) else None


def _resolve(root: Schema, schema: Any) -> Any:
    """Follow a local ``$ref`` (``#/...``) that stands alone; anything else is returned as it is."""
    while isinstance(schema, Mapping) and "$ref" in schema and (schema.keys() - {"$ref"}) <= _ANNOTATIONS:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            break
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        schema = node
    return schema
