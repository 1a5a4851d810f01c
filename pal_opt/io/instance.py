"""The instance file: one scheduling round as JSON, read and validated.

Format (``"format": "pal-opt/instance"``, ``"version": 1``)
------------------------------------------------------------
The cluster is stored **columnar** (one array per GPU attribute), so a 16,384-GPU file is a
few megabytes and loads in well under a second.  The machine-readable description is
``pal_opt/io/instance.schema.json`` (JSON Schema draft 2020-12, :mod:`pal_opt.io.schema`): the
loader validates every document against it with ``jsonschema``, then checks what a schema cannot
say (the cross-field rules below: column lengths, job ids unique as text, known servers,
classes with factors, running placements), and names the field path of anything wrong.

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
    ``restart_cost`` (≥ 0, default 0: PAL's non-sticky rounds): seconds of work a moved running
    job loses on each of its GPUs, priced as a share of ``round_length`` (seconds, > 0, default
    360; :mod:`pal_opt.cost.restart`).
``cluster.gpus``
    ``id``: unique non-negative integers.  ``server``: each GPU's server id (integer or
    string).  ``state``: optional, ``"free"``, ``"busy"`` (held by a job outside the queue) or
    ``"failed"``; all free if omitted.  GPUs held by a *queued* running job are ``"free"`` (unless
    they have failed or been taken since: the job must move).
``cluster.gpus.type``
    Optional: each GPU's type name (``"aws"``, ``"rtx"``...); without it the cluster has one
    type.
``cluster.factors``
    ``{class: [factor per GPU]}``: measured slowdown, 1.0 = the median GPU, finite and > 0.
``cluster.throughput``
    Optional, typed clusters only: ``{class: {type: relative throughput}}`` (> 0, higher is
    faster), a value for every type of the cluster in each row given; a class without a row
    runs at 1.0 everywhere.  A class's factors are divided by its throughput on each GPU's type
    (:func:`pal_opt.binning.binned_factors`).
``cluster.servers``
    Optional.  ``id``: the servers (every GPU's ``server`` must be one of them and every
    server must hold a GPU); ``rack``: optional, each server's rack id — present for a racked
    cluster, absent for a flat one.
``jobs``
    The queue, in order.  ``id`` (integer or string, unique also when compared as text),
    ``demand`` (positive integer; a job needing more GPUs than the cluster has is kept and
    reported unplaceable by the round), ``class`` (a key of
    ``cluster.factors``) and/or ``model`` (a class is looked up in
    :data:`pal_opt.model.MODEL_CLASS` when ``class`` is absent), ``locality`` (optional
    ``[server, rack, cluster]`` penalties, finite, > 0 and non-decreasing; default
    ``(1, λ, λ)``), ``placement`` (optional: the GPU ids a running job holds now — exactly
    ``demand`` distinct GPUs, not shared with another running job, of the job's usable GPU
    types and of one type unless it mixes types; a GPU of the placement that is ``"failed"`` or
    ``"busy"`` has failed or been taken since, and the job must move); GPU types, as in Sia:
    ``kind`` (``"rigid"``, the default: count fixed, type free; ``"strong-scaling"``;
    ``"guaranteed"``: count and type fixed; ``"adaptive"``), ``gpu_type`` (the one type it may
    use; required for a guaranteed job) or ``allowed_types`` (the types it may use; default
    any), ``allowed_counts`` (strong-scaling and adaptive jobs: the GPU counts it may run on,
    including ``demand``) and ``mix_types`` (one gang on several types; default false).  A type
    the cluster does not have is an error; a job whose types have fewer GPUs than its demand
    (or fewer in service) is kept and reported unplaceable by the round, as a job larger than
    the cluster is (:func:`pal_opt.admission.unplaceable`).
    ``pipeline`` (optional: ``{"stage_times": [...], "replicas": [...]}``, a pipeline-parallel
    job's stages, :class:`pal_opt.model.Pipeline`; the replicas add up to ``demand``).
    ``priority`` (optional integer 0..1,000,000, default 0; higher is more important: the
    preemptive methods preempt running jobs only for waiting jobs of a higher priority) and
    ``started`` (optional: when a running job last started, seconds ≥ 0; the greedy preemption
    comparator evicts the most recently started first).
``meta``
    Optional free-form object, kept for the reader, ignored by pal-opt.

Unknown keys are errors (a typo should not silently change a round); code may register more
``params`` (:func:`pal_opt.io.schema.register_param_schema`).  Writing is
:mod:`pal_opt.io.instance_write`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InstanceError
from ..model import (
    FACTOR_RANGE,
    MODEL_CLASS,
    Cluster,
    Job,
    Pipeline,
    RoundInstance,
    RoundParams,
    check_job_types,
    pal_locality,
    repeated_device,
)
from .instance_write import dumps_instance, instance_to_dict, save_instance
from .jsonfile import describe, load_json, other_output
from .messages import Special, problem_error
from .placements import load_placement_file
from .schema import FORMAT, STATE_NAMES, VERSION, instance_checker
from .textfile import DEFAULT_MAX_BYTES
from .validation import Problem

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
    "plain_json",
    "is_node_list",
]

#: Wording of the schema problems that say more in the format's own terms.
_MESSAGES: Special = {
    ("format", "const"): f"must be {FORMAT!r} (an instance file), got {{got}}",  # as a placement file's
    ("version", "const"): f"unsupported version {{got}} (this pal-opt reads {VERSION})",
    ("cluster.factors", "minProperties"): "must give the factors of at least one class",
    ("cluster.gpus.id[]", "uniqueItems"): "duplicate GPU id {got} (also at index {other})",
    ("cluster.servers.id[]", "uniqueItems"): "duplicate server id {got}",
    ("jobs[]", "anyOf"): ("class", "is required when no known model is given"),
    ("jobs[].locality", "minItems"): "must be [server, rack, cluster] penalties, got {count} values",
    ("jobs[].locality", "maxItems"): "must be [server, rack, cluster] penalties, got {count} values",
    ("jobs[].placement[]", "uniqueItems"): "GPU {got} listed twice",
}


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
    data = load_json(path, max_bytes=max_bytes, what="instance file")
    return instance_from_dict(data, source=os.fspath(path))


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
    problem = _first_problem(d)
    if problem is not None:
        if is_node_list(d):
            raise InstanceError("a Kubernetes node list (kubectl get nodes -o json), not an instance file; convert "
                                f"it first: pal-opt import k8s {source} -o cluster.json", source=source)
        other = other_output(d)
        if other is not None:
            raise InstanceError(f"is {other}, not an instance file", source=source)
        raise problem_error(problem, source, _MESSAGES)
    params = _params(d.get("params", {}), source)
    cluster = _cluster(d["cluster"], source)
    jobs = _jobs(d["jobs"], cluster, params, source)
    return RoundInstance(cluster=cluster, jobs=tuple(jobs), params=params, name=d.get("name", ""))


def is_node_list(doc: Any) -> bool:
    """Whether a parsed JSON document is a Kubernetes node list (``kubectl get nodes -o json``),
    which ``pal-opt import k8s`` converts, rather than an instance file.

    >>> is_node_list({"kind": "List", "items": [{"kind": "Node"}]}), is_node_list({"format": "x"})
    (True, False)
    """
    return isinstance(doc, dict) and "format" not in doc and (doc.get("kind") == "NodeList" or (
        isinstance(doc.get("items"), list) and any(isinstance(i, dict) and i.get("kind") == "Node" for i in doc["items"])))


def _first_problem(d: Any) -> Problem | None:
    """The first schema problem; a file of another format or version is named as such first."""
    checker = instance_checker()
    if isinstance(d, dict):
        for key in ("format", "version"):
            problem = checker.first_problem(d[key], checker.schema["properties"][key], (key,)) if key in d else None
            if problem is not None:
                return problem
    return checker.first_problem(d)


def jobs_from_list(jobs: Any, cluster: Cluster, params: RoundParams, source: str = "<memory>") -> list[Job]:
    """Validate a list of job objects in the file format's ``jobs`` shape against ``cluster``.

    Used by :func:`pal_opt.build.make_instance`; errors name ``jobs[i].<field>``.  In-memory
    values are made plain JSON first (:func:`plain_json`): tuples and numpy arrays as lists,
    numpy scalars as Python numbers, as a round loop passes back the API's own values.
    """
    jobs = plain_json(jobs)
    checker = instance_checker()
    problem = checker.first_problem(jobs, checker.schema["properties"]["jobs"], ("jobs",))
    if problem is not None:
        raise problem_error(problem, source, _MESSAGES)
    return _jobs(jobs, cluster, params, source)


def plain_json(v: Any) -> Any:
    """``v`` with the in-memory forms of JSON values made plain: tuples and numpy arrays as
    lists, mappings as dicts, numpy scalars as Python's ``bool``, ``int``, ``float`` and ``str``.
    Anything else is kept as it is, for the schema to reject.

    >>> plain_json({"placement": (np.int64(0), 1), "started": np.float64(2.5), "x": np.array([[1]])})
    {'placement': [0, 1], 'started': 2.5, 'x': [[1]]}
    """
    if isinstance(v, (list, tuple)):
        return [plain_json(x) for x in v]
    if isinstance(v, Mapping):
        return {k: plain_json(x) for k, x in v.items()}
    if isinstance(v, (np.ndarray, np.generic)):
        return v.tolist()  # numpy's own conversion, to nested lists or a Python scalar
    return v


# --------------------------------------------------------------------------- what the schema cannot say
# Below, the document has passed the schema: types, ranges, required and unknown keys, enums and
# duplicate ids are settled.  Integers may still be integral floats (JSON Schema's "integer").
def _error(source: str, path: str, message: str) -> InstanceError:
    return InstanceError(message, source=source, path=path)


def _ints(values: list[Any]) -> list[Any]:
    """Integral floats (``4.0``) as ints; other values as they are."""
    return [int(x) if type(x) is float else x for x in values] if float in set(map(type, values)) else values


def _params(p: dict[str, Any], source: str) -> RoundParams:
    _check_costs(p.get("costs", {}), source)
    d = RoundParams()
    try:
        return RoundParams(
            locality_penalty=float(p.get("locality_penalty", d.locality_penalty)),
            binning=p.get("binning", d.binning),
            restart_cost=float(p.get("restart_cost", d.restart_cost)),
            costs=p.get("costs", {}),
            round_length=float(p.get("round_length", d.round_length)),
        )
    except InstanceError as exc:  # a rule across fields (restart cost below the round): name the file
        if exc.source is None:
            exc.source = source
        raise


def _check_costs(costs: Mapping[str, Mapping[str, Any]], source: str) -> None:
    """Cost terms and parameters the registry knows (:mod:`pal_opt.cost.registry`), checked as
    the file is read: a typo named with its file and path, not when a method first prices."""
    from ..cost.registry import COST_TERMS

    for name, given in costs.items():
        term = COST_TERMS.get(name)
        if term is None:
            raise _error(source, f"params.costs.{name}", f"unknown cost term; known: {', '.join(COST_TERMS)} "
                                                         "(pal_opt.register_cost_term adds one)")
        for key in given:
            if key not in term.params:
                raise _error(source, f"params.costs.{name}.{key}",
                             f"no such parameter of cost term {name!r}; known: {', '.join(term.params) or 'none'}")


def _column(values: list[Any], n: int, path: str, source: str) -> list[Any]:
    if len(values) != n:
        raise _error(source, path, f"must have {n} entries (one per GPU), got {len(values)}")
    return values


def _cluster(c: dict[str, Any], source: str) -> Cluster:
    g = c["gpus"]
    ids = _ints(g["id"])
    n = len(ids)
    servers = _ints(_column(g["server"], n, "cluster.gpus.server", source))
    state = np.zeros(n, dtype=np.int8)
    if "state" in g:
        names = np.asarray(_column(g["state"], n, "cluster.gpus.state", source))
        for code, name in enumerate(STATE_NAMES[1:], start=1):
            state[names == name] = code
    factors = {
        name: np.asarray(_column(v, n, f"cluster.factors.{name}", source), dtype=np.float64)
        for name, v in c["factors"].items()
    }
    for name, arr in factors.items():  # named here by index in the file (the model names GPU ids)
        bad = ~((arr >= FACTOR_RANGE[0]) & (arr <= FACTOR_RANGE[1]))
        if bad.any():
            i = int(np.argmax(bad))
            raise _error(source, f"cluster.factors.{name}[{i}]",
                         f"must be in {FACTOR_RANGE[0]:g}..{FACTOR_RANGE[1]:g} (a slowdown relative to a typical "
                         f"GPU), got {float(arr[i])!r}")
    racks = _racks(c["servers"], servers, source) if "servers" in c else None
    types = _column(g["type"], n, "cluster.gpus.type", source) if "type" in g else None
    devices = _ints(_column(g["device"], n, "cluster.gpus.device", source)) if "device" in g else None
    if devices is not None:
        _distinct_devices(devices, servers, source)
    throughput = c.get("throughput", {})
    _check_throughput(throughput, types, factors, source)
    try:
        return Cluster.from_arrays(ids, servers, factors, state, racks, source=source, gpu_types=types,
                                   throughput=throughput, devices=devices)
    except InstanceError as exc:
        raise (exc if exc.source else exc.with_source(source)) from None


def _distinct_devices(devices: list[int], servers: list[Any], source: str) -> None:
    """Named by index in the file: the first GPU whose device number an earlier GPU of its server has."""
    again = repeated_device(servers, devices)
    if again is not None:
        i, first = again
        raise _error(source, f"cluster.gpus.device[{i}]", f"device {devices[i]} of server {servers[i]!r} is also "
                     f"cluster.gpus.device[{first}] (a server's GPUs have distinct device numbers)")


def _check_throughput(table: dict[str, Any], types: list[str] | None, factors: dict[str, Any], source: str) -> None:
    """Every row names a class with factors and gives every GPU type of the cluster, no other."""
    have = list(dict.fromkeys(types or ()))
    for cname, row in table.items():
        at = f"cluster.throughput.{cname}"
        if cname not in factors:
            raise _error(source, at, f"class {cname!r} has no GPU factors (cluster.factors has: {', '.join(factors)})")
        if not have:
            raise _error(source, at, "the cluster has no GPU types (cluster.gpus.type)")
        for t in row:
            if t not in have:
                raise _error(source, f"{at}.{t}", f"unknown GPU type {t!r} (cluster types: {', '.join(have)})")
        missing = [t for t in have if t not in row]
        if missing:
            raise _error(source, at, f"no throughput on GPU type {missing[0]!r} (a row gives every type: "
                                     f"{', '.join(have)})")


def _racks(s: dict[str, Any], gpu_servers: list[Any], source: str) -> dict[Any, Any] | None:
    """Check the declared servers against the GPUs' servers; ``{server: rack}`` if racked."""
    sids = _ints(s["id"])
    declared = {x: i for i, x in enumerate(sids)}
    if not declared.keys() >= set(gpu_servers):
        i, x = next((i, x) for i, x in enumerate(gpu_servers) if x not in declared)
        raise _error(source, f"cluster.gpus.server[{i}]", f"unknown server {describe(x)} (not in cluster.servers.id)")
    unused = declared.keys() - set(gpu_servers)
    if unused:
        i = min(declared[x] for x in unused)
        raise _error(source, f"cluster.servers.id[{i}]", f"server {describe(sids[i])} has no GPUs")
    if "rack" not in s:
        return None
    rk = _ints(s["rack"])
    if len(rk) != len(sids):
        raise _error(source, "cluster.servers.rack", f"must have {len(sids)} entries (one per server), got {len(rk)}")
    return dict(zip(sids, rk, strict=True))


def _jobs(jobs_in: list[dict[str, Any]], cluster: Cluster, params: RoundParams, source: str) -> list[Job]:
    default_loc = pal_locality(params.locality_penalty)
    ids_seen: dict[str, int] = {}
    held: dict[int, int] = {}
    out: list[Job] = []
    for i, j in enumerate(jobs_in):
        p = f"jobs[{i}]"
        jid = int(j["id"]) if type(j["id"]) is float else j["id"]
        if ids_seen.setdefault(str(jid), i) != i:
            raise _error(source, f"{p}.id", f"duplicate job id {describe(jid)} (same as jobs[{ids_seen[str(jid)]}].id)")
        demand = int(j["demand"])  # more than the cluster has is allowed: such a job is unplaceable
        loc = j.get("locality")
        if loc is not None and not loc[0] <= loc[1] <= loc[2]:
            raise _error(source, f"{p}.locality", f"penalties must not decrease from server to rack to cluster, got {loc}")
        pipeline = _pipeline(j, p, source)
        if pipeline is not None and pipeline.gpus != demand:
            raise _error(source, f"{p}.pipeline.replicas",
                         f"must add up to demand={demand}, got {list(pipeline.replicas)} (sum {pipeline.gpus})")
        job = _job(j, i, jid, demand, default_loc if loc is None else (float(loc[0]), float(loc[1]), float(loc[2])),
                   cluster, held, source, pipeline)
        for g in job.placement or ():
            held[g] = i
        out.append(job)
    return out


def _job(j: dict[str, Any], i: int, jid: Any, demand: int, loc: tuple[float, float, float], cluster: Cluster,
         held: dict[int, int], source: str, pipeline: Pipeline | None = None) -> Job:
    """One job, checked against the cluster's GPU types (:func:`_check_job_types`)."""
    p = f"jobs[{i}]"
    counts = j.get("allowed_counts")
    try:
        job = Job(id=jid, demand=demand, perfclass=_perfclass(j, p, cluster, source), position=i, locality=loc,
                  placement=_placement(j, p, _ints(counts) if counts else [demand], cluster, held, source), model=j.get("model"),
                  kind=j.get("kind", "rigid"), gpu_type=j.get("gpu_type"),
                  allowed_types=tuple(j["allowed_types"]) if "allowed_types" in j else None,
                  allowed_counts=tuple(_ints(counts)) if counts is not None else None,
                  mix_types=bool(j.get("mix_types", False)), pipeline=pipeline,
                  priority=int(j.get("priority", 0)), started=j.get("started"))
    except InstanceError as exc:
        raise (exc if exc.source else exc.with_source(source)) from None
    _check_job_types(job, cluster, source)
    return job


def _check_job_types(job: Job, cluster: Cluster, source: str) -> None:
    """The job against the cluster's GPU types (:func:`pal_opt.model.check_job_types`, the check
    :class:`~pal_opt.model.RoundInstance` makes): every type it names is one of the cluster's, and
    a running job holds GPUs of its usable types only.  (A job whose types cannot hold its demand,
    or its class's throughput, is kept, as a job larger than the cluster is: the round finds it
    unplaceable, :func:`pal_opt.gputypes.type_problem`.)"""
    try:
        check_job_types(cluster, job, f"jobs[{job.position}]", no_types="cluster.gpus.type is not given")
    except InstanceError as exc:
        raise exc.with_source(source) from None


def _pipeline(j: dict[str, Any], p: str, source: str) -> Pipeline | None:
    """The job's pipeline stages, if it has any (the schema checked their shape)."""
    if "pipeline" not in j:
        return None
    try:
        # replicas are JSON Schema integers, 4.0 among them, as demand is
        return Pipeline(tuple(j["pipeline"]["stage_times"]), tuple(_ints(j["pipeline"]["replicas"])))
    except InstanceError as exc:
        raise _error(source, f"{p}.{exc.path}", exc.message) from None


def _perfclass(j: dict[str, Any], p: str, cluster: Cluster, source: str) -> str:
    """The job's class: ``class``, else its model's; it must have GPU factors."""
    if "class" in j:
        if j["class"] not in cluster.factors:
            raise _error(
                source, f"{p}.class", f"class {j['class']!r} has no GPU factors (cluster.factors has: {_have(cluster)})"
            )
        return str(j["class"])
    model = j["model"]
    if model not in MODEL_CLASS:
        raise _error(
            source, f"{p}.model", f"unknown model {model!r} and no class given (known models: {', '.join(MODEL_CLASS)})"
        )
    perfclass = MODEL_CLASS[model]
    if perfclass not in cluster.factors:
        raise _error(
            source, f"{p}.model", f"model {model!r} is {perfclass}, which has no GPU factors (cluster.factors has: {_have(cluster)})"
        )
    return perfclass


def _have(cluster: Cluster) -> str:
    return ", ".join(cluster.factors)


def _placement(
    j: dict[str, Any], p: str, counts: list[int], cluster: Cluster, held: dict[int, int], source: str
) -> tuple[int, ...] | None:
    """A running job's GPUs: exactly ``demand`` (or one of its counts) known GPUs no earlier job
    holds.  A GPU that has failed or been taken (``busy``) since is allowed: the job must move
    (:class:`~pal_opt.model.RoundInstance`)."""
    if j.get("placement") is None:
        return None
    gpus = tuple(_ints(j["placement"]))
    if len(gpus) not in counts:
        want = f"demand={counts[0]}" if len(counts) == 1 else f"one of allowed_counts={counts}"
        raise _error(source, f"{p}.placement", f"a running job must hold exactly {want} GPU{'' if counts == (1,) else 's'}, got {len(gpus)}")
    for k, g in enumerate(gpus):
        pos = cluster.position.get(g)
        if pos is None:
            raise _error(source, f"{p}.placement[{k}]", f"unknown GPU {g}")
        if g in held:
            raise _error(source, f"{p}.placement[{k}]", f"GPU {g} is also held by jobs[{held[g]}]")
    return gpus
