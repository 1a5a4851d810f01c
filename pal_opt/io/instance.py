"""The instance file: one scheduling round as JSON, read and written.

Format (``"format": "pal-opt/instance"``, ``"version": 1``)
------------------------------------------------------------
The cluster is stored **columnar** (one array per GPU attribute), so a 16,384-GPU file is a
few megabytes and loads in well under a second.  The machine-readable description is
``pal_opt/io/instance.schema.json`` (JSON Schema draft 2020-12); the loader does its own checks
and names the field path of anything wrong.

.. code-block:: json

    {
      "format": "pal-opt/instance",
      "version": 1,
      "name": "paper-16x4",
      "params": {"locality_penalty": 1.7, "binning": "pal-artifact", "restart_cost": 0.0},
      "cluster": {
        "servers": {"id": [0, 1], "rack": ["r0", "r0"]},
        "gpus": {"id": [0, 1, 2, 3], "server": [0, 0, 1, 1],
                 "state": ["free", "busy", "free", "failed"]},
        "factors": {"classA": [1.01, 0.98, 1.12, 1.0], "classD": [1.0, 1.0, 1.001, 0.999]}
      },
      "jobs": [
        {"id": 0, "demand": 2, "class": "classA", "model": "resnet50"},
        {"id": "x7", "demand": 1, "model": "PointNet", "locality": [1.0, 1.3, 2.0]},
        {"id": 2, "demand": 1, "class": "classD", "placement": [2]}
      ],
      "meta": {"generator": "..."}
    }

Fields
~~~~~~
``format``, ``version``
    Required; ``"pal-opt/instance"`` and ``1``.
``name``
    Optional string.
``params``
    Optional.  ``locality_penalty`` (PAL's λ, ≥ 1, default 1.7): the default per-job penalty
    ``(1, λ, λ)``; ``binning`` (``"pal-artifact"``, ``"silhouette"`` or ``"none"``);
    ``restart_cost`` (≥ 0, default 0: PAL's non-sticky rounds).
``cluster.gpus``
    ``id``: unique non-negative integers.  ``server``: each GPU's server id (integer or
    string).  ``state``: optional, ``"free"``, ``"busy"`` (held by a job outside the queue) or
    ``"failed"``; all free if omitted.  GPUs held by a *queued* running job are ``"free"``.
``cluster.factors``
    ``{class: [factor per GPU]}``: measured slowdown, 1.0 = the median GPU, finite and > 0.
``cluster.servers``
    Optional.  ``id``: the servers (every GPU's ``server`` must be one of them and every
    server must hold a GPU); ``rack``: optional, each server's rack id — present for a racked
    cluster, absent for a flat one.
``jobs``
    The queue, in order.  ``id`` (integer or string, unique also when compared as text),
    ``demand`` (positive integer, at most the cluster's GPU count), ``class`` (a key of
    ``cluster.factors``) and/or ``model`` (a class is looked up in
    :data:`pal_opt.model.MODEL_CLASS` when ``class`` is absent), ``locality`` (optional
    ``[server, rack, cluster]`` penalties, finite, > 0 and non-decreasing; default
    ``(1, λ, λ)``), ``placement`` (optional: the GPU ids a running job holds now — exactly
    ``demand`` distinct free GPUs, not shared with another running job).
``meta``
    Optional free-form object, kept for the reader, ignored by pal-opt.

Unknown keys are errors (a typo should not silently change a round).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..binning import BINNING_MODES
from ..errors import InstanceError
from ..model import MODEL_CLASS, Cluster, GpuState, Job, RoundInstance, RoundParams, pal_locality
from .safe import DEFAULT_MAX_BYTES, BadNumber, atomic_write_text, load_json

__all__ = [
    "FORMAT",
    "VERSION",
    "STATE_NAMES",
    "load_instance",
    "instance_from_dict",
    "instance_to_dict",
    "dumps_instance",
    "save_instance",
    "load_placement_file",
    "describe",
    "jobs_from_list",
]

FORMAT = "pal-opt/instance"
VERSION = 1
#: GPU state names in files, indexed by :class:`~pal_opt.model.GpuState` value.
STATE_NAMES: tuple[str, ...] = ("free", "busy", "failed")
_STATE_CODE = {n: i for i, n in enumerate(STATE_NAMES)}
_INT64_MAX = 2**63 - 1

_TOP_KEYS = {"format", "version", "name", "params", "cluster", "jobs", "meta", "$schema"}
_PARAM_KEYS = {"locality_penalty", "binning", "restart_cost"}
_CLUSTER_KEYS = {"servers", "gpus", "factors"}
_GPU_KEYS = {"id", "server", "state"}
_SERVER_KEYS = {"id", "rack"}
_JOB_KEYS = {"id", "demand", "class", "model", "locality", "placement"}


# --------------------------------------------------------------------------- value checks
def describe(v: Any) -> str:
    """A short JSON-flavoured description of a value for error messages."""
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


class _Checker:
    """Field checks that raise :class:`InstanceError` with the file and field path."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, message: str) -> InstanceError:
        return InstanceError(message, source=self.source, path=path)

    def obj(self, v: Any, path: str, allowed: set[str], required: Sequence[str] = ()) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(path, f"must be an object, got {describe(v)}")
        for k in required:
            if k not in v:
                raise self.fail(_join(path, k), "is required")
        extra = [k for k in v if k not in allowed]
        if extra:
            raise self.fail(
                _join(path, extra[0]), f"unknown field (expected one of: {', '.join(sorted(allowed))})"
            )
        return v

    def array(self, v: Any, path: str, length: int | None = None, *, nonempty: bool = False) -> list[Any]:
        if not isinstance(v, list):
            raise self.fail(path, f"must be an array, got {describe(v)}")
        if length is not None and len(v) != length:
            raise self.fail(path, f"must have {length} entries (one per GPU), got {len(v)}")
        if nonempty and not v:
            raise self.fail(path, "must not be empty")
        return v

    def integer(self, v: Any, path: str, *, minimum: int | None = None, what: str = "an integer") -> int:
        if type(v) is float and v.is_integer() and abs(v) <= 2**53:
            v = int(v)  # JSON Schema's "integer" admits 4.0
        elif type(v) is not int:
            raise self.fail(path, f"must be {what}, got {describe(v)}")
        if abs(v) > _INT64_MAX:
            raise self.fail(path, f"must be {what} that fits in 64 bits, got {describe(v)}")
        if minimum is not None and v < minimum:
            raise self.fail(path, f"must be {what}, got {describe(v)}")
        return v

    def number(self, v: Any, path: str, *, positive: bool = False, minimum: float | None = None) -> float:
        if type(v) not in (int, float):
            raise self.fail(path, f"must be a finite number, got {describe(v)}")
        f = _to_float(v)
        if not math.isfinite(f):
            raise self.fail(path, f"must be a finite number, got {describe(v)}")
        if positive and f <= 0:
            raise self.fail(path, f"must be a positive number, got {describe(v)}")
        if minimum is not None and f < minimum:
            raise self.fail(path, f"must be at least {minimum:g}, got {describe(v)}")
        return f

    def string(self, v: Any, path: str) -> str:
        if not isinstance(v, str) or not v:
            raise self.fail(path, f"must be a non-empty string, got {describe(v)}")
        return v

    def ident(self, v: Any, path: str) -> int | str:
        if isinstance(v, str):
            if not v:
                raise self.fail(path, "must be an integer or a non-empty string, got ''")
            return v
        if type(v) in (int, float):
            return self.integer(v, path, what="an integer or a non-empty string")
        raise self.fail(path, f"must be an integer or a non-empty string, got {describe(v)}")


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


# --------------------------------------------------------------------------- loading
def load_instance(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> RoundInstance:
    """Read an instance file.

    Parameters
    ----------
    path
        A ``pal-opt/instance`` JSON file (format in the module docstring).
    max_bytes
        Files larger than this are rejected unread (default 64 MiB).

    Returns
    -------
    RoundInstance

    Raises
    ------
    InstanceError
        Anything wrong with the file, as ``file: field path: what``.
    OSError
        The file cannot be opened.
    """
    src = os.fspath(path)
    data = load_json(path, max_bytes=max_bytes, what="instance file")
    return instance_from_dict(data, source=src)


def instance_from_dict(d: Any, source: str = "<memory>") -> RoundInstance:
    """Validate a parsed instance document and build the :class:`RoundInstance`.

    >>> d = {"format": "pal-opt/instance", "version": 1,
    ...      "cluster": {"gpus": {"id": [0, 1], "server": [0, 0]}, "factors": {"classA": [1.0, 1.1]}},
    ...      "jobs": [{"id": 1, "demand": 2, "model": "resnet50"}]}
    >>> inst = instance_from_dict(d)
    >>> inst.cluster.num_gpus, inst.jobs[0].perfclass
    (2, 'classA')
    >>> instance_from_dict({**d, "jobs": [{"id": 1, "demand": 2.5, "class": "classA"}]}, "a.json")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: a.json: jobs[0].demand: must be a positive integer, got 2.5
    """
    ck = _Checker(source)
    if not isinstance(d, dict):
        raise ck.fail("top level", f"must be an object, got {describe(d)}")
    top = ck.obj(d, "", _TOP_KEYS, ("format", "version", "cluster", "jobs"))
    if not isinstance(top["format"], str) or top["format"] != FORMAT:
        raise ck.fail("format", f"must be {FORMAT!r}, got {describe(top['format'])}")
    if type(top["version"]) is not int or top["version"] != VERSION:
        raise ck.fail("version", f"unsupported version {describe(top['version'])} (this pal-opt reads {VERSION})")
    name = ck.string(top["name"], "name") if "name" in top else ""
    if "$schema" in top:
        ck.string(top["$schema"], "$schema")
    if "meta" in top:
        if not isinstance(top["meta"], dict):
            raise ck.fail("meta", f"must be an object, got {describe(top['meta'])}")
        _check_free_form(ck, top["meta"], "meta")
    params = _params(ck, top.get("params", {}))
    cluster = _cluster(ck, top["cluster"])
    jobs = _jobs(ck, top["jobs"], cluster, params)
    try:
        return RoundInstance(cluster=cluster, jobs=tuple(jobs), params=params, name=name)
    except InstanceError as exc:  # pragma: no cover - checked above
        raise exc.with_source(source) from None


def _check_free_form(ck: _Checker, v: Any, path: str) -> None:
    """Reject NaN, infinities and huge numbers anywhere inside ``v``.

    Iterative; a field path is built for containers only (and for the bad value), so a long
    array costs one ``isinstance`` per entry, not one string.
    """
    if isinstance(v, BadNumber):
        raise ck.fail(path, f"must be a finite number, got {v.describe()}")
    stack = [(v, path)]
    while stack:
        node, p = stack.pop()
        items: Any
        if isinstance(node, dict):
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        for k, x in items:
            if isinstance(x, BadNumber):
                raise ck.fail(_join(p, k), f"must be a finite number, got {x.describe()}")
            if isinstance(x, (dict, list)):
                stack.append((x, _join(p, k)))


def _params(ck: _Checker, v: Any) -> RoundParams:
    p = ck.obj(v, "params", _PARAM_KEYS)
    lam = ck.number(p["locality_penalty"], "params.locality_penalty", minimum=1.0) if "locality_penalty" in p else 1.7
    binning = p.get("binning", "pal-artifact")
    if not isinstance(binning, str) or binning not in BINNING_MODES:
        raise ck.fail("params.binning", f"must be one of {', '.join(BINNING_MODES)}, got {describe(binning)}")
    rc = ck.number(p["restart_cost"], "params.restart_cost", minimum=0.0) if "restart_cost" in p else 0.0
    return RoundParams(locality_penalty=lam, binning=binning, restart_cost=rc)


def _cluster(ck: _Checker, v: Any) -> Cluster:
    c = ck.obj(v, "cluster", _CLUSTER_KEYS, ("gpus", "factors"))
    g = ck.obj(c["gpus"], "cluster.gpus", _GPU_KEYS, ("id", "server"))
    ids_in = ck.array(g["id"], "cluster.gpus.id", nonempty=True)
    n = len(ids_in)
    seen: dict[int, int] = {}
    ids: list[int] = []
    for i, x in enumerate(ids_in):
        x = ck.integer(x, f"cluster.gpus.id[{i}]", minimum=0, what="a non-negative integer")
        if x in seen:
            raise ck.fail(f"cluster.gpus.id[{i}]", f"duplicate GPU id {x} (also at index {seen[x]})")
        seen[x] = i
        ids.append(x)
    servers_in = ck.array(g["server"], "cluster.gpus.server", n)
    servers = [ck.ident(x, f"cluster.gpus.server[{i}]") for i, x in enumerate(servers_in)]
    if "state" in g:
        states = ck.array(g["state"], "cluster.gpus.state", n)
        code = []
        for i, x in enumerate(states):
            sc = _STATE_CODE.get(x) if isinstance(x, str) else None
            if sc is None:
                raise ck.fail(
                    f"cluster.gpus.state[{i}]", f"must be one of {', '.join(map(repr, STATE_NAMES))}, got {describe(x)}"
                )
            code.append(sc)
        state = np.asarray(code, dtype=np.int8)
    else:
        state = np.zeros(n, dtype=np.int8)

    racks: dict[Any, Any] | None = None
    if "servers" in c:
        s = ck.obj(c["servers"], "cluster.servers", _SERVER_KEYS, ("id",))
        sids_in = ck.array(s["id"], "cluster.servers.id", nonempty=True)
        sids = [ck.ident(x, f"cluster.servers.id[{i}]") for i, x in enumerate(sids_in)]
        declared: dict[Any, int] = {}
        for i, x in enumerate(sids):
            if x in declared:
                raise ck.fail(f"cluster.servers.id[{i}]", f"duplicate server id {describe(x)}")
            declared[x] = i
        for i, x in enumerate(servers):
            if x not in declared:
                raise ck.fail(f"cluster.gpus.server[{i}]", f"unknown server {describe(x)} (not in cluster.servers.id)")
        used = set(servers)
        for x, i in declared.items():
            if x not in used:
                raise ck.fail(f"cluster.servers.id[{i}]", f"server {describe(x)} has no GPUs")
        if "rack" in s:
            rk = s["rack"]
            if not isinstance(rk, list):
                raise ck.fail("cluster.servers.rack", f"must be an array, got {describe(rk)}")
            if len(rk) != len(sids):
                raise ck.fail("cluster.servers.rack", f"must have {len(sids)} entries (one per server), got {len(rk)}")
            racks = dict(zip(sids, (ck.ident(x, f"cluster.servers.rack[{i}]") for i, x in enumerate(rk)), strict=True))

    fac_in = c["factors"]
    if not isinstance(fac_in, dict):
        raise ck.fail("cluster.factors", f"must be an object, got {describe(fac_in)}")
    if not fac_in:
        raise ck.fail("cluster.factors", "must give the factors of at least one class")
    factors: dict[str, np.ndarray] = {}
    for cname, vals in fac_in.items():
        path = f"cluster.factors.{cname}"
        if not cname:
            raise ck.fail("cluster.factors", "class names must be non-empty")
        ck.array(vals, path, n)
        arr = _float_column(vals)
        if arr is None or not (np.isfinite(arr) & (arr > 0)).all():
            i = _first_bad_factor(vals)
            raise ck.fail(f"{path}[{i}]", f"must be a finite positive number, got {describe(vals[i])}")
        factors[cname] = arr
    try:
        return Cluster.from_arrays(ids, servers, factors, state, racks, source=ck.source)
    except InstanceError as exc:
        raise (exc if exc.source else exc.with_source(ck.source)) from None


def _float_column(vals: list[Any]) -> np.ndarray | None:
    """The column as float64, or None if an entry is not a JSON number (bools included)."""
    for x in vals:
        t = type(x)
        if t is not float and t is not int:
            return None
    try:
        return np.asarray(vals, dtype=np.float64)
    except OverflowError:  # ints too large for a float (JSON caps them at 40 digits; Python does not)
        return None


def _to_float(v: int | float) -> float:
    """``float(v)``, with an int too large for a float (possible from Python, not JSON) as inf."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _first_bad_factor(vals: list[Any]) -> int:
    for i, x in enumerate(vals):
        if type(x) not in (int, float) or not math.isfinite(_to_float(x)) or x <= 0:
            return i
    return 0  # pragma: no cover


def _jobs(ck: _Checker, v: Any, cluster: Cluster, params: RoundParams) -> list[Job]:
    jobs_in = ck.array(v, "jobs")
    default_loc = pal_locality(params.locality_penalty)
    ids_seen: dict[str, int] = {}
    held: dict[int, int] = {}
    state = cluster.state
    position = cluster.position
    n_gpus = cluster.num_gpus
    out: list[Job] = []
    for i, jd in enumerate(jobs_in):
        p = f"jobs[{i}]"
        j = ck.obj(jd, p, _JOB_KEYS, ("id", "demand"))
        jid = ck.ident(j["id"], f"{p}.id")
        key = str(jid)
        if key in ids_seen:
            raise ck.fail(f"{p}.id", f"duplicate job id {describe(jid)} (same as jobs[{ids_seen[key]}].id)")
        ids_seen[key] = i
        demand = ck.integer(j["demand"], f"{p}.demand", minimum=1, what="a positive integer")
        if demand > n_gpus:
            raise ck.fail(f"{p}.demand", f"needs {demand} GPUs but the cluster has {n_gpus}")
        model = ck.string(j["model"], f"{p}.model") if "model" in j else None
        if "class" in j:
            perfclass = ck.string(j["class"], f"{p}.class")
            if perfclass not in cluster.factors:
                raise ck.fail(
                    f"{p}.class",
                    f"class {perfclass!r} has no GPU factors (cluster.factors has: {', '.join(cluster.factors)})",
                )
        elif model is not None:
            if model not in MODEL_CLASS:
                raise ck.fail(
                    f"{p}.model",
                    f"unknown model {model!r} and no class given (known models: {', '.join(MODEL_CLASS)})",
                )
            perfclass = MODEL_CLASS[model]
            if perfclass not in cluster.factors:
                raise ck.fail(
                    f"{p}.model",
                    f"model {model!r} is {perfclass}, which has no GPU factors "
                    f"(cluster.factors has: {', '.join(cluster.factors)})",
                )
        else:
            raise ck.fail(f"{p}.class", "is required when no known model is given")
        if "locality" in j:
            loc_in = ck.array(j["locality"], f"{p}.locality")
            if len(loc_in) != 3:
                raise ck.fail(f"{p}.locality", f"must be [server, rack, cluster] penalties, got {len(loc_in)} values")
            loc = tuple(ck.number(x, f"{p}.locality[{k}]", positive=True) for k, x in enumerate(loc_in))
            if not (loc[0] <= loc[1] <= loc[2]):
                raise ck.fail(f"{p}.locality", f"penalties must not decrease from server to rack to cluster, got {list(loc)}")
            locality: tuple[float, float, float] = (loc[0], loc[1], loc[2])
        else:
            locality = default_loc
        placement: tuple[int, ...] | None = None
        if "placement" in j and j["placement"] is not None:
            pl = ck.array(j["placement"], f"{p}.placement")
            if len(pl) != demand:
                raise ck.fail(f"{p}.placement", f"a running job must hold exactly demand={demand} GPUs, got {len(pl)}")
            mine: set[int] = set()
            for k, g in enumerate(pl):
                gp = f"{p}.placement[{k}]"
                g = ck.integer(g, gp, minimum=0, what="a GPU id")
                pos = position.get(g)
                if pos is None:
                    raise ck.fail(gp, f"unknown GPU {g}")
                if g in mine:
                    raise ck.fail(gp, f"GPU {g} listed twice")
                if state[pos] != GpuState.FREE:
                    raise ck.fail(
                        gp,
                        f"GPU {g} is {STATE_NAMES[state[pos]]}; GPUs held by a queued job must be 'free'",
                    )
                if g in held:
                    raise ck.fail(gp, f"GPU {g} is also held by jobs[{held[g]}]")
                mine.add(g)
            for g in mine:
                held[g] = i
            placement = tuple(ck.integer(g, p) for g in pl)
        out.append(
            Job(
                id=jid,
                demand=demand,
                perfclass=perfclass,
                position=i,
                locality=locality,
                placement=placement,
                model=model,
            )
        )
    return out


def jobs_from_list(jobs: Any, cluster: Cluster, params: RoundParams, source: str = "<memory>") -> list[Job]:
    """Validate a list of job objects in the file format's ``jobs`` shape against ``cluster``.

    Used by :func:`pal_opt.build.make_instance`; errors name ``jobs[i].<field>``.
    """
    return _jobs(_Checker(source), jobs, cluster, params)


# --------------------------------------------------------------------------- writing
def instance_to_dict(instance: RoundInstance, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The instance as a JSON-ready document (inverse of :func:`instance_from_dict`)."""
    cl = instance.cluster
    prm = instance.params
    servers = list(cl.server_ids)
    cluster: dict[str, Any] = {}
    if cl.racked:
        cluster["servers"] = {
            "id": [_plain(s) for s in servers],
            "rack": [_plain(cl.rack_ids[r]) for r in cl.rack_of_server.tolist()],
        }
    cluster["gpus"] = {
        "id": cl.gpu_ids.tolist(),
        "server": [_plain(servers[s]) for s in cl.server_of.tolist()],
        "state": [STATE_NAMES[s] for s in cl.state.tolist()],
    }
    cluster["factors"] = {c: np.asarray(v, dtype=np.float64).tolist() for c, v in cl.factors.items()}
    default_loc = pal_locality(prm.locality_penalty)
    jobs = []
    for j in instance.jobs:
        jd: dict[str, Any] = {"id": _plain(j.id), "demand": int(j.demand), "class": j.perfclass}
        if j.model is not None:
            jd["model"] = j.model
        if tuple(j.locality) != default_loc:
            jd["locality"] = [float(x) for x in j.locality]
        if j.placement is not None:
            jd["placement"] = [int(g) for g in j.placement]
        jobs.append(jd)
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    if instance.name:
        doc["name"] = instance.name
    doc["params"] = {
        "locality_penalty": float(prm.locality_penalty),
        "binning": prm.binning,
        "restart_cost": float(prm.restart_cost),
    }
    doc["cluster"] = cluster
    doc["jobs"] = jobs
    if meta:
        doc["meta"] = dict(meta)
    return doc


def _plain(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    return x


def _is_flat(v: Any) -> bool:
    if isinstance(v, list):
        return all(not isinstance(x, (list, dict)) for x in v)
    if isinstance(v, dict):
        return all(not isinstance(x, (list, dict)) or (isinstance(x, list) and len(x) <= 8 and _is_flat(x))
                   for x in v.values())
    return True


def _dump(v: Any, indent: int, out: list[str]) -> None:
    """Pretty JSON: containers of scalars (and small objects such as a job) on one line."""
    if _is_flat(v):
        out.append(json.dumps(v, allow_nan=False, separators=(", ", ": ")))
        return
    pad = "  " * (indent + 1)
    if isinstance(v, dict):
        out.append("{\n")
        for k, (key, x) in enumerate(v.items()):
            out.append(f"{pad}{json.dumps(key)}: ")
            _dump(x, indent + 1, out)
            out.append(",\n" if k < len(v) - 1 else "\n")
        out.append("  " * indent + "}")
    else:
        out.append("[\n")
        for k, x in enumerate(v):
            out.append(pad)
            _dump(x, indent + 1, out)
            out.append(",\n" if k < len(v) - 1 else "\n")
        out.append("  " * indent + "]")


def dumps_instance(instance: RoundInstance, meta: Mapping[str, Any] | None = None) -> str:
    """The instance file's text: readable, one job per line, GPU columns on one line each."""
    out: list[str] = []
    _dump(instance_to_dict(instance, meta), 0, out)
    out.append("\n")
    return "".join(out)


def save_instance(
    instance: RoundInstance, path: str | os.PathLike[str], meta: Mapping[str, Any] | None = None
) -> None:
    """Write ``instance`` to ``path`` atomically (see :func:`~pal_opt.io.safe.atomic_write_text`).

    Floats are written with Python's shortest round-trip repr, so
    ``load_instance(save_instance(x))`` reproduces every factor bit for bit.
    """
    atomic_write_text(path, dumps_instance(instance, meta))


# --------------------------------------------------------------------------- placements
def load_placement_file(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """Read a placement file written by ``pal-opt solve --out`` (``PlacementResult.to_dict()``).

    A bare ``{job id: [GPU ids]}`` object is accepted too and wrapped as
    ``{"placements": ...}``.  Only the shape is checked here (an object of arrays of
    integers); whether the placement is valid for an instance is :func:`pal_opt.check.check`'s job.
    """
    src = os.fspath(path)
    d = load_json(path, max_bytes=max_bytes, what="placement file")
    ck = _Checker(src)
    if not isinstance(d, dict):
        raise ck.fail("top level", f"must be an object, got {describe(d)}")
    if "placements" not in d:
        d = {"placements": d}
    pl = d["placements"]
    if not isinstance(pl, dict):
        raise ck.fail("placements", f"must be an object {{job id: [GPU ids]}}, got {describe(pl)}")
    for jid, gpus in pl.items():
        p = f"placements.{jid}"
        ck.array(gpus, p)
        for k, g in enumerate(gpus):
            ck.integer(g, f"{p}[{k}]", what="a GPU id (integer)")
    _check_free_form(ck, d, "")
    return d
