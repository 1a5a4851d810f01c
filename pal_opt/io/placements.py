"""Placement files: what ``pal-opt solve --out`` writes, read back for ``pal-opt check``."""

from __future__ import annotations

import functools
import os
from typing import Any

from ..errors import InstanceError
from ..result import PLACEMENT_FORMAT, PLACEMENT_VERSION
from .jsonfile import load_json, other_output
from .messages import INT64_MAX, Special, problem_error
from .textfile import DEFAULT_MAX_BYTES
from .validation import SchemaChecker

__all__ = ["PLACEMENT_SCHEMA", "load_placement_file"]

#: The shape :func:`load_placement_file` checks (the rest of a result file is free-form).
PLACEMENT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "pal-opt placement file (PlacementResult.to_dict())",
    "type": "object",
    "required": ["placements"],
    "properties": {
        "format": {"const": PLACEMENT_FORMAT},
        "version": {"const": PLACEMENT_VERSION},
        "placements": {
            "description": "{job id: [GPU ids]}",
            "type": "object",
            "additionalProperties": {
                "type": "array",
                "items": {"title": "GPU id", "type": "integer", "minimum": -INT64_MAX, "maximum": INT64_MAX},
            },
        }
    },
}

_MESSAGES: Special = {
    ("placements", "type"): "must be an object {{job id: [GPU ids]}}, got {got}",
    ("format", "const"): f"must be {PLACEMENT_FORMAT!r} (a placement file), got {{got}}",
    ("version", "const"): f"unsupported version {{got}} (this pal-opt reads placement files of version "
                          f"{PLACEMENT_VERSION}: is the file from a newer pal-opt?)",
}


@functools.cache
def _checker() -> SchemaChecker:
    return SchemaChecker(PLACEMENT_SCHEMA)


def load_placement_file(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """Read a placement file written by ``pal-opt solve --out`` (``PlacementResult.to_dict()``).

    A bare ``{job id: [GPU ids]}`` object is accepted too and wrapped as
    ``{"placements": ...}``.  Only the shape is checked here (:data:`PLACEMENT_SCHEMA`: an object
    of arrays of integers, and JSON values only elsewhere); whether the placement is valid for an
    instance is :func:`pal_opt.check.check`'s job.

    GPU ids follow the instance file's rule (JSON Schema's integers): ``6`` and ``6.0`` are the
    GPU id 6, read as the integer (in ``placements`` and in ``stages``); ``"6"`` and ``6.5`` are
    bad input naming their field (``placements.2[0]: must be a GPU id (integer), got '6'``).

    ``format`` and ``version``, when present, must be :data:`~pal_opt.result.PLACEMENT_FORMAT`
    and :data:`~pal_opt.result.PLACEMENT_VERSION`; files of earlier pal-opt, without them, are read
    as version 1.
    """
    d = load_json(path, max_bytes=max_bytes, what="placement file")
    other = other_output(d)
    if other is not None and "placements" not in d:
        raise InstanceError(f"is {other}, not a placement file", source=os.fspath(path))
    # a file naming its format is a result file even without placements (a job named "format"
    # would map to a list)
    bare = isinstance(d, dict) and "placements" not in d and not isinstance(d.get("format"), str)
    if bare:
        d = {"placements": d}
    elif isinstance(d, dict) and d.get("format", PLACEMENT_FORMAT) != PLACEMENT_FORMAT:
        # before the missing placements: an instance file given for the placement, say so
        wrong = _checker().first_problem({"format": d["format"], "placements": {}})
        assert wrong is not None
        raise problem_error(wrong, os.fspath(path), _MESSAGES)
    problem = _checker().first_problem(d)
    if problem is not None:
        err = problem_error(problem, os.fspath(path), _MESSAGES)
        if bare:  # neither a result file nor a bare placement: say both, not only the second
            inner = (err.path or "").removeprefix("placements.")
            raise InstanceError(f"missing, and the file is not a bare {{job id: [GPU ids]}} object either "
                                f"({inner}: {err.message})", source=os.fspath(path), path="placements")
        raise err
    d["placements"] = {k: _integers(v) for k, v in d["placements"].items()}
    stages = d.get("stages")
    if isinstance(stages, dict):  # its shape is check()'s to report
        d["stages"] = {k: [_integers(st) for st in v] if isinstance(v, list) else v for k, v in stages.items()}
    return d


def _integers(ids: Any) -> Any:
    """A list of GPU ids with each integral float (``6.0``) as the integer; anything else as is."""
    if not isinstance(ids, list):
        return ids
    return [int(g) if type(g) is float and g.is_integer() else g for g in ids]
