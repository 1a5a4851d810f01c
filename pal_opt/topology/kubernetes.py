"""Kubernetes: node descriptions in, per-pod node assignments out.

Nodes in
--------
The input is what ``kubectl get nodes -o json`` prints: a ``List`` (or ``NodeList``) whose
``items`` are ``Node`` objects (a single ``Node`` object is read as a list of one), up to
:data:`NODE_LIST_MAX_BYTES` (a large cluster's list is far past other inputs' 64 MiB).  Per node:

``metadata.name``
    The server id (what a pod is bound to).
``metadata.labels``
    The topology levels, as Kueue's topology-aware scheduling names them: a list of label keys
    from the outermost level in (``levels``, default ``cloud.google.com/gce-topology-block``,
    ``cloud.google.com/gce-topology-subblock``, ``kubernetes.io/hostname``).  A last
    ``kubernetes.io/hostname`` stands for the node itself; every other label is a level of
    groups, and a GPU node must carry each of them.  A group is named by its path of label
    values from the outermost level, joined with ``/`` (``block-a/sub-1``), since a label value
    need only be unique under its parent.
``metadata.labels["nvidia.com/gpu.product"]``
    The GPU model (``NVIDIA-A100-SXM4-80GB``), as NVIDIA's GPU Feature Discovery labels a node:
    the GPU type of its GPUs.  When every GPU node carries it the cluster is typed
    (:attr:`pal_opt.model.Cluster.type_names`); when none does, untyped; a GPU node without it
    among nodes with it is an error.
``status.capacity["nvidia.com/gpu"]``
    The node's GPUs (a whole number, written as a string as Kubernetes does).  Nodes without
    GPUs are left out.  When ``status.allocatable`` offers fewer, the difference (GPUs the
    device plugin found unhealthy) is marked failed, at the node's highest local indices.
``spec.unschedulable``, ``spec.taints``, ``status.conditions``
    A cordoned node (``unschedulable: true``), one with a taint under which it takes no new
    pod (:data:`OUT_OF_SERVICE_TAINTS`: lifecycle, pressure, network, uninitialised, being
    deleted by the autoscaler) or whose ``Ready`` condition is not ``"True"`` is out of
    service: all its GPUs are **failed**.  Other taints (such as ``nvidia.com/gpu:NoSchedule``
    on GPU pools, which GPU pods tolerate) are ignored; a node with no ``conditions`` at all is
    taken as ready.

GPUs are numbered 0, 1, ... in node order.  In pal-opt's three-level model the innermost group
label (the sub-block by default) is the rack; outer labels collapse into the cluster level
(:func:`~pal_opt.topology.to_cluster`).

Device numbers
--------------
None: the round has no :attr:`~pal_opt.model.Cluster.devices`, as after a Slurm import from
GPU counts.  A Node object counts its GPUs (``capacity``/``allocatable``; GPU Feature
Discovery's ``nvidia.com/gpu.count``, and ``nvidia.com/gpu.replicas`` under time-slicing) and
names their model (``nvidia.com/gpu.product``, ``.memory``, ``.family``...), but names no device:
the device plugin lists its devices, by ID (a UUID by default), to the kubelet alone, and the kubelet chooses
which of them a pod gets.  Numbering a node's GPUs 0..n-1 as device numbers would write made-up
``/dev/nvidiaN`` numbers into the instance file (``cluster.gpus.device``) and Blox rows
(``Local_GPU_ID``), and would put the unhealthy GPUs on devices nobody named.  The exports
number a node's GPUs by rank instead (:func:`~pal_opt.topology.placement.local_indices`), which
here is 0..n-1 in the same order, unhealthy ones highest.  Per-device numbers live in Dynamic
Resource Allocation's ``ResourceSlice`` objects (NVIDIA's driver gives each GPU an ``index`` and
a ``minor``), which this reader does not take.

Placements out
--------------
:func:`pod_placements` gives one pod per job and node, for a scheduler extension to bind::

    {"apiVersion": "pal-opt/v1", "kind": "PodPlacements",
     "items": [{"job": 0, "pod": 0, "node": "gke-a3-0", "gpus": [0, 1, 2, 3]},
               {"job": 0, "pod": 1, "node": "gke-a3-1", "gpus": [0, 1, 2, 3]}]}

``job`` is the job id as in the instance (integer or string); ``pod`` counts the job's pods
from 0, in node order; ``gpus`` are the local indices of the job's GPUs on that node, ascending
(device numbers where the instance has them, else ranks: after this reader, always ranks), so
``len(gpus)`` is the pod's ``nvidia.com/gpu`` request.  Under the device plugin a pod asks for a
count and the kubelet picks the devices, so within a node only the count binds, unless a
launcher maps ranks to devices itself.  Items follow
the queue order.  A pipeline job's pods also have ``stages``: the stage (from 0) that each GPU
of ``gpus`` runs, in the same order (``{..., "gpus": [0, 1, 2, 3], "stages": [0, 0, 1, 1]}``);
other pods are as before, without the key.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InstanceError, OptionError
from ..model import RoundInstance
from ..options import require_items, require_text
from ..result import PlacementResult
from .hierarchy import Topology, TopologyLevel
from .placement import placement_by_host

__all__ = [
    "DEFAULT_LEVELS",
    "HOSTNAME_LABEL",
    "GPU_RESOURCE",
    "GPU_PRODUCT_LABEL",
    "OUT_OF_SERVICE_TAINTS",
    "NODE_LIST_MAX_BYTES",
    "NODE_LIST_MAX_VALUES",
    "group_labels",
    "parse_nodes",
    "load_nodes",
    "pod_placements",
    "dumps_pod_placements",
]

#: The label that names the node itself (Kueue's lowest level).
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Kueue's topology levels on GKE, outermost first.
DEFAULT_LEVELS: tuple[str, ...] = (
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    HOSTNAME_LABEL,
)
#: The extended resource that counts a node's GPUs.
GPU_RESOURCE = "nvidia.com/gpu"
#: The node label that names its GPU model (NVIDIA GPU Feature Discovery): the GPU type.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Taints under which a node takes no new training pod (with effect NoSchedule or NoExecute):
#: those the node lifecycle controller sets on a node out of service, the kubelet's resource
#: pressure and network taints, a cloud node not yet initialised, and the cluster autoscaler's
#: mark of a node it is deleting.
OUT_OF_SERVICE_TAINTS: frozenset[str] = frozenset({
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/out-of-service",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable",
    "node.cloudprovider.kubernetes.io/uninitialized",
    "ToBeDeletedByClusterAutoscaler",
})

#: Largest node list read, in bytes.  ``kubectl get nodes -o json`` prints 15-25 kB a node
#: (``status.images`` alone lists up to 50 images), so the 64 MiB of other inputs held about
#: 3,000 nodes; this admits about 25,000.  Parsing takes about three times the file in memory.
NODE_LIST_MAX_BYTES: int = 512 * 1024 * 1024
#: Most JSON values a node list may hold (about 200 a node; other inputs: 2,000,000).
NODE_LIST_MAX_VALUES: int = 8_000_000

logger = logging.getLogger("pal_opt.topology")
_WHOLE = re.compile(r"\d{1,9}")


def group_labels(levels: Sequence[str]) -> tuple[str, ...]:
    """The group levels of a Kueue label list (outermost first): the list without a last
    ``kubernetes.io/hostname``; empty or repeated labels, or the hostname label elsewhere, are
    an :class:`OptionError`."""
    labels = [x.strip() for x in require_items(levels, "levels", "a list of label names", of=str)]
    if any(not x for x in labels):
        raise OptionError("--levels: empty label name")
    if len(set(labels)) != len(labels):
        raise OptionError(f"--levels: a label is listed twice: {','.join(labels)}")
    if labels and labels[-1] == HOSTNAME_LABEL:
        labels.pop()
    if HOSTNAME_LABEL in labels:
        raise OptionError(f"--levels: {HOSTNAME_LABEL} names the node and can only be the last level")
    return tuple(labels)


_KIND_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "true or false"}


def _shown(v: Any) -> str:
    """A short description of a bad value (a JSON container by its kind, anything else by repr)."""
    if isinstance(v, (dict, list)):
        return _KIND_NAMES[type(v)]
    text = repr(v)  # a refused JSON number (NaN, overflow) reprs as its description
    return text if len(text) <= 40 else text[:37] + "..."


def _field(obj: Mapping[str, Any], key: str, kind: type, path: str, source: str) -> Any:
    """``obj[key]`` if present (None if not), checked to be of ``kind``."""
    v = obj.get(key)
    if v is not None and not isinstance(v, kind):
        raise InstanceError(f"must be {_KIND_NAMES[kind]}, got {_shown(v)}", source=source,
                            path=f"{path}.{key}")
    return v


def _count(v: Any, path: str, source: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, str) and _WHOLE.fullmatch(v):
        return int(v)
    if isinstance(v, str) and v.isascii() and v.isdigit():  # a whole number all the same: say what is wrong
        raise InstanceError(f"must be at most 999,999,999 GPUs, got {_shown(v)}", source=source, path=path)
    raise InstanceError(f"must be a whole number of GPUs such as \"8\", got {_shown(v)}",
                        source=source, path=path)


@dataclass(frozen=True)
class _Node:
    name: str
    labels: Mapping[str, Any]
    gpus: int
    unhealthy: int
    why_out: str


def _why_out(spec: Mapping[str, Any], status: Mapping[str, Any], at: str, source: str) -> str:
    """Why a node is out of service ('' if it is not)."""
    if _field(spec, "unschedulable", bool, f"{at}.spec", source):
        return "unschedulable (cordoned)"
    for k, t in enumerate(_field(spec, "taints", list, f"{at}.spec", source) or ()):
        if not isinstance(t, dict):
            raise InstanceError("must be an object", source=source, path=f"{at}.spec.taints[{k}]")
        key = t.get("key")
        if isinstance(key, str) and key in OUT_OF_SERVICE_TAINTS and t.get("effect") in ("NoSchedule", "NoExecute"):
            return f"taint {t['key']}:{t['effect']}"
    for k, c in enumerate(_field(status, "conditions", list, f"{at}.status", source) or ()):
        if not isinstance(c, dict):
            raise InstanceError("must be an object", source=source, path=f"{at}.status.conditions[{k}]")
        if c.get("type") == "Ready" and c.get("status") != "True":
            return f"Ready is {c.get('status')!r}"
    return ""


def _node(item: Any, k: int, source: str, resource: str) -> _Node:
    at = f"items[{k}]"
    if not isinstance(item, dict):
        raise InstanceError("must be a Node object", source=source, path=at)
    if item.get("kind", "Node") != "Node":
        raise InstanceError(f"must be a Node, got kind {item.get('kind')!r}", source=source, path=f"{at}.kind")
    meta = _field(item, "metadata", dict, at, source) or {}
    name = _field(meta, "name", str, f"{at}.metadata", source)
    if not name:
        raise InstanceError("must be a non-empty string", source=source, path=f"{at}.metadata.name")
    labels = _field(meta, "labels", dict, f"{at}.metadata", source) or {}
    for key, value in labels.items():  # Kubernetes label values are strings, always
        if not isinstance(value, str):
            raise InstanceError(f"must be a string (Kubernetes label values are strings), got {_shown(value)}",
                                source=source, path=f'{at}.metadata.labels["{key}"]')
    spec = _field(item, "spec", dict, at, source) or {}
    status = _field(item, "status", dict, at, source) or {}
    cap = _field(status, "capacity", dict, f"{at}.status", source) or {}
    alloc = _field(status, "allocatable", dict, f"{at}.status", source) or {}
    gpus = _count(cap.get(resource), f'{at}.status.capacity["{resource}"]', source) or 0
    usable = _count(alloc.get(resource), f'{at}.status.allocatable["{resource}"]', source)
    if usable is not None and usable > gpus:
        raise InstanceError(f"allocatable {resource} ({usable}) exceeds the capacity ({gpus})", source=source,
                            path=f'{at}.status.allocatable["{resource}"]')
    unhealthy = gpus - usable if usable is not None else 0
    return _Node(name, labels, gpus, unhealthy, _why_out(spec, status, at, source))


def _items(doc: Any, source: str) -> list[Any]:
    if not isinstance(doc, dict):
        raise InstanceError("must be a JSON object (kubectl get nodes -o json)", source=source, path="top level")
    if doc.get("kind") == "Node":
        return [doc]
    fmt = doc.get("format")
    if "kind" not in doc and isinstance(fmt, str) and fmt.startswith("pal-opt/"):
        raise InstanceError(f"is a {fmt.replace('/', ' ')} file, not a node list (kubectl get nodes -o json)",
                            source=source)
    if doc.get("kind") not in ("List", "NodeList"):
        got = f"got kind {doc['kind']!r}" if "kind" in doc else "the document has no 'kind'"
        raise InstanceError(f"must be a List or NodeList of nodes (kubectl get nodes -o json), {got}",
                            source=source, path="kind")
    items = doc.get("items")
    if not isinstance(items, list):
        raise InstanceError("must be an array of Node objects", source=source, path="items")
    return items


def parse_nodes(
    doc: Any,
    *,
    levels: Sequence[str] = DEFAULT_LEVELS,
    resource: str = GPU_RESOURCE,
    source: str = "<memory>",
) -> Topology:
    """The :class:`Topology` of a parsed ``kubectl get nodes -o json`` document (module docstring)."""
    require_text(source, "source")
    if not isinstance(resource, str) or not resource.strip():
        raise OptionError(f"--gpu-resource: must be a resource name such as {GPU_RESOURCE}, got {resource!r}")
    groups = group_labels(levels)
    hint = ("; the default levels are GKE's: name your cluster's with --levels, e.g. "
            f"topology.kubernetes.io/zone,{HOSTNAME_LABEL}") if tuple(levels) == DEFAULT_LEVELS else ""
    hosts: list[str] = []
    gpus: dict[str, int] = {}
    failed: dict[str, int] = {}
    paths: dict[str, list[str]] = {}
    products: dict[str, tuple[Any, int]] = {}
    seen: dict[str, int] = {}
    for k, item in enumerate(_items(doc, source)):
        node = _node(item, k, source, resource)
        if node.name in seen:
            raise InstanceError(f"node {node.name!r} is listed twice (also items[{seen[node.name]}])",
                                source=source, path=f"items[{k}].metadata.name")
        seen[node.name] = k
        if node.gpus == 0:
            continue
        values: list[str] = []
        for lb in groups:
            v = node.labels.get(lb)
            if not v:
                raise InstanceError(f"GPU node {node.name!r} has no label {lb!r} (a --levels label{hint})" if v is None else
                                    f"is empty; GPU node {node.name!r} needs a value for this --levels label",
                                    source=source, path=f"items[{k}].metadata.labels" + ("" if v is None else f'["{lb}"]'))
            values.append(v)
        hosts.append(node.name)
        products[node.name] = (node.labels.get(GPU_PRODUCT_LABEL), k)
        gpus[node.name] = node.gpus
        paths[node.name] = ["/".join(values[: i + 1]) for i in range(len(values))]
        failed[node.name] = node.gpus if node.why_out else node.unhealthy
        if node.why_out:
            logger.info("%s: node %s is out of service (%s): its %d GPUs are failed", source, node.name,
                        node.why_out, node.gpus)
    if not hosts:
        raise InstanceError(f"no node has {resource} capacity", source=source, path="items")
    tiers = tuple(
        TopologyLevel(lb, {h: paths[h][i] for h in hosts}) for i, lb in reversed(list(enumerate(groups)))
    )
    return Topology.from_counts(hosts, tiers, gpus, failed, source=source, types=_gpu_products(products, source),
                                notes=_time_sliced(doc, hosts))


#: The label NVIDIA's GPU Feature Discovery sets to the slices each GPU offers under time-slicing.
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"


def _time_sliced(doc: Mapping[str, Any], hosts: Sequence[str]) -> tuple[str, ...]:
    """A warning naming the GPU nodes whose devices are time-sliced (``nvidia.com/gpu.replicas``
    above 1, or a ``-SHARED`` product): their capacity counts slices, which pal-opt takes for
    GPUs, so one gang may get several slices of one device."""
    wanted = set(hosts)
    shared = []
    for item in doc.get("items") or ():
        meta = item.get("metadata") or {}
        labels = meta.get("labels") or {}
        replicas = str(labels.get(GPU_REPLICAS_LABEL, "1"))
        product = str(labels.get(GPU_PRODUCT_LABEL, ""))
        if meta.get("name") in wanted and ((replicas.isdigit() and int(replicas) > 1) or product.endswith("-SHARED")):
            shared.append(str(meta["name"]))
    if not shared:
        return ()
    shown = ", ".join(shared[:3]) + (f" and {len(shared) - 3} more" if len(shared) > 3 else "")
    return (f"{len(shared)} node{'s offer' if len(shared) > 1 else ' offers'} time-sliced GPUs ({GPU_REPLICAS_LABEL} above 1 or a "
            f"-SHARED product): each slice is counted as a GPU, so a gang may get several slices of one device: "
            f"{shown}",)


def _gpu_products(products: Mapping[str, tuple[Any, int]], source: str) -> dict[str, str] | None:
    """Each GPU node's ``nvidia.com/gpu.product`` label: all (a typed cluster), or none (None)."""
    given = {h: v for h, (v, _) in products.items() if v is not None}
    if not given:
        return None
    for h, (v, k) in products.items():
        if not isinstance(v, str) or not v:
            what = "has no label" if v is None else f"has an empty or non-text label {_shown(v)} for"
            raise InstanceError(f"GPU node {h!r} {what} {GPU_PRODUCT_LABEL!r}, which other GPU nodes have "
                                "(the GPU type: every GPU node or none)", source=source,
                                path=f"items[{k}].metadata.labels")
    return {h: str(v) for h, (v, _) in products.items()}


def load_nodes(
    path: str | os.PathLike[str], *, levels: Sequence[str] = DEFAULT_LEVELS, resource: str = GPU_RESOURCE
) -> Topology:
    """Read a ``kubectl get nodes -o json`` file (guarded JSON reading, :func:`pal_opt.io.load_json`,
    up to :data:`NODE_LIST_MAX_BYTES` and :data:`NODE_LIST_MAX_VALUES`)."""
    from ..io import load_json

    doc = load_json(path, what="node list", max_bytes=NODE_LIST_MAX_BYTES, max_values=NODE_LIST_MAX_VALUES)
    return parse_nodes(doc, levels=levels, resource=resource, source=os.fspath(path))


def pod_placements(
    instance: RoundInstance, placement: PlacementResult | Mapping[str, Any], *, source: str | None = None
) -> dict[str, Any]:
    """The placement as per-pod node assignments (module docstring), checked against the
    instance first (:func:`~pal_opt.topology.placement.placement_by_host`)."""
    items = [
        {"job": job.job, "pod": i, "node": share.host, "gpus": list(share.gpus),
         **({} if share.stages is None else {"stages": list(share.stages)})}
        for job in placement_by_host(instance, placement, source=source)
        for i, share in enumerate(job.hosts)
    ]
    return {"apiVersion": "pal-opt/v1", "kind": "PodPlacements", "items": items}


def dumps_pod_placements(doc: Mapping[str, Any]) -> str:
    """A :func:`pod_placements` document as JSON text, one item per line."""
    lines = [json.dumps(item) for item in doc["items"]]
    items = "[\n    " + ",\n    ".join(lines) + "\n  ]" if lines else "[]"
    head = {k: v for k, v in doc.items() if k != "items"}
    fields = "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items())
    return f'{{\n{fields}  "items": {items}\n}}\n'
