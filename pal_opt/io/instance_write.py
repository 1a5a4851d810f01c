"""The instance file, written: :func:`instance_to_dict`, :func:`dumps_instance`, :func:`save_instance`.

The inverse of :mod:`pal_opt.io.instance` (format in its docstring): columns of GPU attributes
on one line each, one job per line, floats in Python's shortest round-trip form, so
``load_instance(save_instance(x))`` reproduces every factor bit for bit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InstanceError
from ..model import Job, RoundInstance, pal_locality, require_instance
from ..options import DEFAULT_ROUND_LENGTH, require_mapping, require_type
from .atomic import atomic_write_text
from .jsonfile import check_value_count
from .schema import FORMAT, STATE_NAMES, VERSION
from .textfile import DEFAULT_MAX_BYTES

__all__ = ["instance_to_dict", "job_to_dict", "dumps_instance", "save_instance", "check_readable"]


def instance_to_dict(instance: RoundInstance, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The instance as a JSON-ready document (inverse of :func:`instance_from_dict`)."""
    require_instance(instance)  # save_instance(path, instance): AttributeError 'cluster' otherwise
    if meta is not None:
        require_mapping(meta, "meta", "a mapping of names to JSON values")
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
    if cl.typed:
        cluster["gpus"]["type"] = cl.gpu_type_names()
    if cl.devices is not None:
        cluster["gpus"]["device"] = cl.devices.tolist()
    cluster["factors"] = {c: np.asarray(v, dtype=np.float64).tolist() for c, v in cl.factors.items()}
    if cl.throughput:
        cluster["throughput"] = {c: dict(row) for c, row in cl.throughput.items()}
    default_loc = pal_locality(prm.locality_penalty)
    jobs = [job_to_dict(j, default_loc) for j in instance.jobs]
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    if instance.name:
        doc["name"] = instance.name
    doc["params"] = {
        "locality_penalty": float(prm.locality_penalty),
        "binning": prm.binning,
        "restart_cost": float(prm.restart_cost),
    }
    if prm.restart_cost > 0 or prm.round_length != DEFAULT_ROUND_LENGTH:  # what the restart cost is a share of
        doc["params"]["round_length"] = float(prm.round_length)
    if prm.costs:
        doc["params"]["costs"] = {t: {k: float(v) for k, v in ps.items()} for t, ps in prm.costs.items()}
    doc["cluster"] = cluster
    doc["jobs"] = jobs
    if meta:
        doc["meta"] = dict(meta)
    return doc


def job_to_dict(j: Job, default_locality: tuple[float, float, float] | None = None) -> dict[str, Any]:
    """A job as the instance file's ``jobs`` entry: every field that differs from its default, so
    that reading it back (:func:`pal_opt.io.instance.jobs_from_list`) gives the same job.

    ``default_locality``: the round's locality penalties, left out when the job's are these
    (None: always written).

    >>> job_to_dict(Job(7, 2, "classA", kind="guaranteed", gpu_type="a100", priority=3))
    {'id': 7, 'demand': 2, 'class': 'classA', 'locality': [1.0, 1.7, 1.7], 'kind': 'guaranteed', 'gpu_type': 'a100', 'priority': 3}
    """
    jd: dict[str, Any] = {"id": _plain(j.id), "demand": int(j.demand), "class": j.perfclass}
    if j.model is not None:
        jd["model"] = j.model
    if tuple(j.locality) != default_locality:
        jd["locality"] = [float(x) for x in j.locality]
    if j.placement is not None:
        jd["placement"] = [int(g) for g in j.placement]
    jd.update(_type_fields(j))
    if j.pipeline is not None:
        jd["pipeline"] = {"stage_times": list(j.pipeline.stage_times), "replicas": list(j.pipeline.replicas)}
    return jd


def _type_fields(j: Job) -> dict[str, Any]:
    """A job's GPU-type fields that differ from the defaults."""
    out: dict[str, Any] = {}
    if j.kind != "rigid":
        out["kind"] = j.kind
    if j.gpu_type is not None:
        out["gpu_type"] = j.gpu_type
    if j.allowed_types is not None:
        out["allowed_types"] = list(j.allowed_types)
    if j.allowed_counts is not None:
        out["allowed_counts"] = list(j.allowed_counts)
    if j.mix_types:
        out["mix_types"] = True
    if j.priority:
        out["priority"] = int(j.priority)
    if j.started is not None:
        out["started"] = float(j.started)
    return out


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


def check_readable(text: str, instance: RoundInstance, *, source: str) -> None:
    """Raise :class:`InstanceError` (naming ``source``) if :func:`~pal_opt.io.load_instance` with
    its default limits, which ``pal-opt solve`` uses, would refuse the instance file ``text`` of
    ``instance``: more JSON values or bytes than ``docs/limits.md`` allows."""
    cl = instance.cluster
    what = (f"the instance it makes ({cl.num_gpus:,} GPUs on {cl.num_servers:,} servers, {len(instance.jobs):,} jobs, "
            f"{len(cl.factors)} classes)")
    refused = "so pal-opt solve would refuse the file (docs/limits.md); nothing written"
    try:
        check_value_count(text, source=source)
    except InstanceError as exc:
        raise InstanceError(f"{what} {exc.message}, {refused}", source=source) from None
    size = len(text.encode("utf-8"))
    if size > DEFAULT_MAX_BYTES:
        raise InstanceError(f"{what} is {size:,} bytes, larger than the limit of {DEFAULT_MAX_BYTES:,} bytes, {refused}",
                            source=source)


def save_instance(
    instance: RoundInstance, path: str | os.PathLike[str], meta: Mapping[str, Any] | None = None,
    *, readable_from: str | None = None,
) -> None:
    """Write ``instance`` to ``path`` atomically (see :func:`~pal_opt.io.atomic.atomic_write_text`).

    Floats are written with Python's shortest round-trip repr, so
    ``load_instance(save_instance(x))`` reproduces every factor bit for bit.

    ``readable_from``: first check that :func:`~pal_opt.io.load_instance` with its default limits
    could read the file back (:func:`check_readable`), and name this input (the file or options
    the instance came from) in the error; nothing is written if not.  The CLI's ``generate`` and
    ``import`` commands do, so they never write a round that ``solve`` refuses.
    """
    if readable_from is not None:
        require_type(readable_from, str, "readable_from", " (the input's name, for the error)")
    text = dumps_instance(instance, meta)
    if readable_from is not None:
        check_readable(text, instance, source=readable_from)
    atomic_write_text(path, text)
