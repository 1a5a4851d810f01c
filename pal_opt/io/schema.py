"""The instance format's JSON Schema: the shipped file, parameters added by code, the checker.

``instance.schema.json`` (draft 2020-12) is the format's definition; :func:`instance_schema`
returns it as a dict and the loader validates every document against it with the
``jsonschema`` library (through :class:`~pal_opt.io.validation.SchemaChecker`).

Code that gives a round a new parameter — a cost term with its own weight, say — registers the
parameter's subschema once, at import time::

    register_param_schema("energy_weight", {"type": "number", "minimum": 0})

after which ``params.energy_weight`` is accepted in instance files and checked like every other
field (``params.energy_weight: must be at least 0, got -1``), while a misspelt parameter is
still an unknown field.  The loader's :class:`~pal_opt.model.RoundParams` carries the built-in
parameters only; the registering code reads its own value from the document.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..errors import OptionError
from .validation import SchemaChecker

__all__ = [
    "FORMAT",
    "VERSION",
    "STATE_NAMES",
    "SCHEMA_PATH",
    "BUILTIN_PARAMS",
    "instance_schema",
    "instance_checker",
    "register_param_schema",
    "unregister_param_schema",
    "registered_params",
]

#: ``format`` and ``version`` of the files this pal-opt reads and writes (``const`` in the schema).
FORMAT = "pal-opt/instance"
VERSION = 1
#: GPU state names in files (the schema's ``enum``), indexed by :class:`~pal_opt.model.GpuState` value.
STATE_NAMES: tuple[str, ...] = ("free", "busy", "failed")

#: The instance format's JSON Schema (draft 2020-12), shipped with the package.
SCHEMA_PATH: Path = Path(str(files(__package__).joinpath("instance.schema.json")))

#: Parameters every round has (:class:`~pal_opt.model.RoundParams`); they cannot be registered.
BUILTIN_PARAMS: tuple[str, ...] = ("locality_penalty", "binning", "restart_cost", "round_length")

_registered: dict[str, dict[str, Any]] = {}


def register_param_schema(name: str, subschema: Mapping[str, Any]) -> None:
    """Accept ``params.<name>`` in instance files, validated by ``subschema``.

    Parameters
    ----------
    name
        The parameter's key under ``params``.
    subschema
        A self-contained JSON Schema (draft 2020-12, no ``$ref``) for the value.

    Raises
    ------
    OptionError
        ``name`` is empty, built in, or registered with a different schema, or ``subschema`` is
        not a valid JSON Schema.  Registering the same schema again does nothing.

    Examples
    --------
    >>> register_param_schema("example_weight", {"type": "number", "minimum": 0})
    >>> instance_schema()["properties"]["params"]["properties"]["example_weight"]
    {'type': 'number', 'minimum': 0}
    >>> unregister_param_schema("example_weight")
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(name, str) or not name or name in BUILTIN_PARAMS:
        raise OptionError(f"cannot register a parameter named {name!r}")
    try:
        sub = json.loads(json.dumps(subschema, allow_nan=False))  # a plain copy, JSON values only
        Draft202012Validator.check_schema(sub)
    except (TypeError, ValueError, SchemaError) as exc:
        raise OptionError(f"parameter {name!r}: not a valid JSON Schema ({str(exc).splitlines()[0]})") from None
    if '"$ref"' in json.dumps(sub):
        raise OptionError(f"parameter {name!r}: the schema must be self-contained (no $ref)")
    if name in _registered and _registered[name] != sub:
        raise OptionError(f"parameter {name!r} is already registered with another schema")
    _registered[name] = sub
    _compiled.cache_clear()


def unregister_param_schema(name: str) -> None:
    """Forget a parameter added by :func:`register_param_schema` (no-op if unknown)."""
    if _registered.pop(name, None) is not None:
        _compiled.cache_clear()


def registered_params() -> dict[str, dict[str, Any]]:
    """``{name: subschema}`` of the parameters added by :func:`register_param_schema`."""
    return copy.deepcopy(_registered)


def instance_schema() -> dict[str, Any]:
    """The instance schema as a dict: the shipped file plus registered parameters (a copy)."""
    return copy.deepcopy(_compiled()[0])


def instance_checker() -> SchemaChecker:
    """The validator for :func:`instance_schema`, built once per set of registered parameters."""
    return _compiled()[1]


@functools.cache
def _compiled() -> tuple[dict[str, Any], SchemaChecker]:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    schema["properties"]["params"]["properties"].update(copy.deepcopy(_registered))
    return schema, SchemaChecker(schema)
