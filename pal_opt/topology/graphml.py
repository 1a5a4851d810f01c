"""GraphML: the cluster graph (:attr:`pal_opt.model.Cluster.graph`) as a file, through networkx.

Shape
-----
A **directed** graph, edges from parent to child.  Every vertex has a ``kind``:

``cluster``
    The root (optional, at most one).
``server``
    A host; ``id`` is its id (string or integer; default: the GraphML node id).  Its parent is
    a group, the root or nothing; its children are GPUs.
``gpu``
    ``id``: the GPU id (an integer, unique; digits in a string key are read as one); ``state``: ``free`` (default), ``busy`` or
    ``failed``; ``factor_<class>``: the GPU's slowdown factor for that application class (a
    number > 0; every GPU the same classes, or no factors at all); ``type``: the GPU type's name
    (a non-empty string; on every GPU or on none: a typed or an untyped cluster);
    ``throughput_<class>``: the relative throughput of that class on the GPU's type (a number
    > 0, the same on every GPU of a type, and on every GPU of a type or on none; typed clusters
    only; :attr:`pal_opt.model.Cluster.throughput`); ``device``: the GPU's device number on its
    server (an integer >= 0, distinct on each server; on every GPU or on none;
    :attr:`pal_opt.model.Cluster.devices`).  Exactly one server parent.
any other kind (``rack``, ``pod``, ``block``, ...)
    A group of servers or of other groups; ``id`` as for servers, unique among groups.

A key without ``attr.type`` holds strings, as GraphML says (numbers in them are read for ``id``
and the factors).  Every vertex has at most one parent and the graph has no cycle.  Other attributes (a ``job``
and a pipeline job's ``stage`` written by :func:`graphml_text`, a drawing tool's graphics) are ignored.

Levels, innermost first: the group directly above each server, then the group above that, and
so on; a level is named by its groups' kind (kinds joined with ``/`` if they differ).  In an
uneven tree a server whose chain of groups ends early keeps its topmost group at the higher
levels; either every server has a group or none does.  In pal-opt's model the innermost level
is the rack and higher ones collapse into the cluster level (:func:`~pal_opt.topology.to_cluster`).

:func:`graphml_text` writes a :class:`~pal_opt.model.Cluster` in this shape (vertices
``cluster``, ``r0``..., ``s0``..., ``g0``... in the cluster's order, so reading it back gives
the same cluster: servers, racks, states, GPU types, throughput table, device numbers, factors bit
for bit.
Only the cluster is carried, not jobs or round parameters, and rack ids and server ids come back
as written (an integer id as an integer, any other as a string).
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from typing import Any

import networkx as nx
import numpy as np

from ..errors import InputTypeError, InstanceError
from ..io.textfile import last_line_cut
from ..model import Cluster, GpuState, JobId, repeated_device
from ..options import is_finite_number, require_mapping, shown_number
from .hierarchy import Topology, TopologyLevel

__all__ = ["FACTOR_PREFIX", "THROUGHPUT_PREFIX", "parse_graphml", "load_graphml", "cluster_digraph", "graphml_text"]

#: Attribute name prefix of a GPU's factor for one class (``factor_classA``).
FACTOR_PREFIX = "factor_"
#: Attribute name prefix of a GPU's relative throughput for one class (``throughput_classA``).
THROUGHPUT_PREFIX = "throughput_"
_STATES = {s.name.lower(): int(s) for s in GpuState}
_SPECIAL = ("cluster", "server", "gpu")


def _read(text: str, source: str) -> nx.DiGraph:
    root: ET.Element | None = None
    try:
        with warnings.catch_warnings():  # a key without attr.type is a string, as GraphML says: no warning
            warnings.filterwarnings("ignore", "No key type", UserWarning)
            root = ET.fromstring(text)  # the checks below read this tree (networkx keeps none)
            # networkx's public reader parses the text again: reading our tree with its
            # GraphMLReader's methods saved ~0.45 s of 4.5 at 65,536 GPUs, not worth relying on them
            g = nx.parse_graphml(text)
    except ET.ParseError as exc:  # its text names the line and column; a cut-short file's last line, so said
        raise InstanceError(f"invalid XML: {exc}{last_line_cut(text, exc.position[0])}", source=source) from None
    except (nx.NetworkXError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        where = _bad_value(root) if isinstance(exc, ValueError) and root is not None else None
        if where is not None:  # networkx names no node
            raise InstanceError(where[1], source=source, path=where[0]) from None
        raise InstanceError(f"not a GraphML graph networkx can read: {exc}", source=source) from None
    _declared_once(root, source)
    for _, attrs in g.nodes(data=True):  # a pretty-printed <data>\n  a100\n</data> holds "a100"
        for k, v in attrs.items():
            if isinstance(v, str):
                attrs[k] = v.strip()
    if not g.is_directed() or g.is_multigraph():
        raise InstanceError("must be a simple directed graph (edgedefault=\"directed\", edges parent -> child)",
                            source=source, path="graph")
    return g


_GRAPHML = "{http://graphml.graphdrawing.org/xmlns}"
_NODE = {f"{_GRAPHML}node", "node"}  # an element's tag, in the namespace or not
_EDGE = {f"{_GRAPHML}edge", "edge"}
#: GraphML's attribute types that networkx converts, with how it converts them.
_CONVERT: dict[str, Any] = {"int": int, "long": int, "float": float, "double": float}


def _tag(el: ET.Element) -> str:
    return el.tag.removeprefix(_GRAPHML)


def _bad_value(root: ET.Element) -> tuple[str, str] | None:
    """(path, message) of the first ``<data>`` value its key's ``attr.type`` cannot read, which
    networkx reports without saying where; None if none is found."""
    els = list(root.iter())
    keys = {k.get("id"): (k.get("attr.name"), k.get("attr.type")) for k in els if _tag(k) == "key"}
    for owner in els:
        if _tag(owner) not in ("node", "edge"):
            continue
        what = (f"node {owner.get('id')!r}" if _tag(owner) == "node"
                else f"edge {owner.get('source')!r} -> {owner.get('target')!r}")
        for d in owner:
            name, kind = keys.get(d.get("key"), (None, None))
            convert = _CONVERT.get(kind or "")
            if convert is None:
                continue
            try:
                convert(d.text or "")
            except ValueError:
                return f"{what}.{name}", f"{(d.text or '')!r} is not a {kind} (the key's attr.type)"
    return None


def _declared_once(root: ET.Element, source: str) -> None:
    """A node declared twice is merged by networkx, and an edge to an undeclared node makes one
    without attributes: both reported as what they are (they read as "needs a kind")."""
    seen: set[str | None] = set()
    edges: list[ET.Element] = []
    for el in root.iter():  # every element, in document order
        if el.tag in _NODE:
            nid = el.get("id")
            if nid in seen:
                raise InstanceError("declared twice", source=source, path=f"node {nid!r}")
            seen.add(nid)
        elif el.tag in _EDGE:
            edges.append(el)
    for el in edges:
        for end in (el.get("source"), el.get("target")):
            if end not in seen:
                raise InstanceError(f"node {end!r} is not declared", source=source,
                                    path=f"edge {el.get('source')!r} -> {el.get('target')!r}")


def _structure(g: nx.DiGraph, source: str) -> tuple[dict[Any, str], dict[Any, Any]]:
    """Each vertex's kind and parent; checks the tree shape (module docstring)."""
    kind: dict[Any, str] = {}
    for n, attrs in g.nodes(data=True):
        k = attrs.get("kind")
        if not isinstance(k, str) or not k:
            raise InstanceError("needs a kind (cluster, server, gpu or a group kind such as rack)",
                                source=source, path=f"node {n!r}.kind")
        kind[n] = k
    roots = [n for n, k in kind.items() if k == "cluster"]
    if len(roots) > 1:
        raise InstanceError(f"more than one cluster vertex: {roots[0]!r} and {roots[1]!r}", source=source)
    parent: dict[Any, Any] = {}
    for n, count in g.in_degree():
        if count > 1:
            ups = list(g.predecessors(n))
            raise InstanceError(f"has {len(ups)} parents ({ups[0]!r}, {ups[1]!r}); a vertex has at most one",
                                source=source, path=f"node {n!r}")
        if count:
            parent[n] = next(iter(g.pred[n]))
    if not _acyclic(g, parent):  # networkx finds the cycle to name (its find_cycle on 65,536 GPUs: 0.6-1.5 s)
        cycle = nx.find_cycle(g)
        raise InstanceError(f"the edges form a cycle: {' -> '.join(repr(u) for u, _ in cycle)}", source=source)
    for n, k in kind.items():
        up = kind.get(parent.get(n), "")
        ok = {"cluster": up == "", "gpu": up == "server"}.get(k, up not in ("server", "gpu"))
        if not ok:
            where = f"under a {up} vertex ({parent[n]!r})" if up else "without a server parent"
            raise InstanceError(f"a {k} vertex cannot be {where}", source=source, path=f"node {n!r}")
    return kind, parent


def _acyclic(g: nx.DiGraph, parent: Mapping[Any, Any]) -> bool:
    """Whether ``g``, whose vertices have at most one parent each, has no cycle: every vertex is
    reached from the vertices without a parent (a vertex on a cycle, with its one parent on it, is not)."""
    children: dict[Any, list[Any]] = {}
    for n, up in parent.items():
        children.setdefault(up, []).append(n)
    todo = [n for n in g if n not in parent]
    reached = len(todo)
    while todo:
        below = children.get(todo.pop(), ())
        reached += len(below)
        todo.extend(below)
    return reached == len(g)


def _gpu_id(n: Any, attrs: Mapping[str, Any], source: str) -> int:
    v = attrs.get("id", n)
    if isinstance(v, str) and v.strip().isascii() and v.strip().isdigit():  # not '²', which isdigit() too
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**63:
        raise InstanceError(f"a GPU id must be an integer in 0..2^63-1, got {v!r}", source=source,
                            path=f"node {n!r}.id")
    return v


def _gpu_factors(n: Any, attrs: Mapping[str, Any], source: str, prefix: str = FACTOR_PREFIX) -> dict[str, float]:
    """The GPU's ``<prefix><class>`` numbers (factors, or throughputs) by class."""
    out: dict[str, float] = {}
    for key, v in attrs.items():
        if not key.startswith(prefix):
            continue
        if type(v) is float and 0.0 < v < math.inf and len(key) > len(prefix):  # the usual case, checked at once
            out[key[len(prefix):]] = v
            continue
        if isinstance(v, str):  # an untyped key holds strings
            try:
                v = float(v)
            except ValueError:
                pass
        if not (is_finite_number(v) and v > 0) or len(key) == len(prefix):  # 10**400 (a long) too, as NaN
            raise InstanceError(f"must be a finite number > 0 named {prefix}<class>, got {shown_number(v)}", source=source,
                                path=f"node {n!r}.{key}")
        out[key[len(prefix):]] = float(v)
    return out


def _gpu_type(n: Any, attrs: Mapping[str, Any], source: str) -> str | None:
    t = attrs.get("type")
    if t is not None and (not isinstance(t, str) or not t.strip()):
        raise InstanceError(f"a GPU type must be a non-empty string, got {t!r}", source=source,
                            path=f"node {n!r}.type")
    return t


def _every_or_none(gpus: list[Any], values: list[Any], attr: str, what: str, source: str) -> list[Any] | None:
    """``values`` (one per GPU vertex) when every GPU has one, None when none has; an error naming
    the first GPU without one when only some have."""
    if all(v is None for v in values):
        return None
    if any(v is None for v in values):
        bare = next(n for n, v in zip(gpus, values, strict=True) if v is None)
        raise InstanceError(f"has no {attr}, which other GPUs have (the {what}: every GPU or none)",
                            source=source, path=f"node {bare!r}")
    return values


def _types(gpus: list[Any], attrs: list[Mapping[str, Any]], source: str) -> tuple[str, ...] | None:
    """Each GPU's ``type``: on every GPU vertex (a typed cluster) or on none (None); ``attrs``: the
    GPU vertices' attributes."""
    types = _every_or_none(gpus, [_gpu_type(n, a, source) for n, a in zip(gpus, attrs, strict=True)], "type",
                           "GPU type", source)
    return None if types is None else tuple(str(t) for t in types)


def _devices(gpus: list[Any], attrs: list[Mapping[str, Any]], source: str) -> list[int] | None:
    """Each GPU's ``device``: on every GPU vertex or on none (None); digits in a string key read as one."""
    out: list[int | None] = []
    for n, a in zip(gpus, attrs, strict=True):
        v = a.get("device")
        if isinstance(v, str) and v.strip().isascii() and v.strip().isdigit():
            v = int(v)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**63):
            raise InstanceError(f"a device number must be an integer in 0..2^63-1, got {v!r}", source=source,
                                path=f"node {n!r}.device")
        out.append(v)
    return _every_or_none(gpus, out, "device", "device number", source)


def _throughput(gpus: list[Any], attrs: list[Mapping[str, Any]], types: tuple[str, ...] | None,
                source: str) -> dict[str, dict[str, float]] | None:
    """``{class: {type: throughput}}`` from the GPUs' ``throughput_<class>`` (module docstring)."""
    table: dict[str, dict[str, float]] = {}
    classes_of: dict[str, set[str]] = {}  # per type, the classes its first GPU gives
    for i, n in enumerate(gpus):
        row = _gpu_factors(n, attrs[i], source, THROUGHPUT_PREFIX)
        if types is None:
            if row:
                raise InstanceError("a throughput needs GPU types (a type on every GPU)", source=source,
                                    path=f"node {n!r}")
            continue
        t = types[i]
        if classes_of.setdefault(t, set(row)) != set(row):
            raise InstanceError(f"throughput classes {sorted(row)} differ from {sorted(classes_of[t])} on another "
                                f"GPU of type {t!r}", source=source, path=f"node {n!r}")
        for c, v in row.items():
            old = table.setdefault(c, {}).setdefault(t, v)
            if old != v:
                raise InstanceError(f"throughput {v!r} of GPU type {t!r} differs from {old!r} on another GPU of "
                                    "that type", source=source, path=f"node {n!r}.{THROUGHPUT_PREFIX}{c}")
    return table or None


def _gpus(g: nx.DiGraph, kind: Mapping[Any, str], parent: Mapping[Any, Any], source: str) -> dict[str, Any]:
    """GPU columns in document order: ids, server vertices, states, factors."""
    ids: list[int] = []
    servers: list[Any] = []
    states: list[int] = []
    factors: dict[str, list[float]] = {}
    seen: dict[int, Any] = {}
    gpus: list[Any] = []  # the GPU vertices
    gpu_attrs: list[Mapping[str, Any]] = []  # and their attributes
    # One vertex at a time, no numpy: the values sit in each vertex's attribute dict, read one by one
    # either way; this loop is ~0.4 s of the 4.3 s import of 65,536 GPUs (measured, 2026-12-07).
    for n, attrs in g.nodes(data=True):
        if kind[n] != "gpu":
            continue
        gid = _gpu_id(n, attrs, source)
        if gid in seen:
            raise InstanceError(f"GPU id {gid} is also vertex {seen[gid]!r}'s", source=source, path=f"node {n!r}.id")
        seen[gid] = n
        st = attrs.get("state", "free")
        if not isinstance(st, str) or st.lower() not in _STATES:
            raise InstanceError(f"must be free, busy or failed, got {st!r}", source=source, path=f"node {n!r}.state")
        fac = _gpu_factors(n, attrs, source)
        if ids and fac.keys() != factors.keys():
            raise InstanceError(f"factor classes {sorted(fac)} differ from the first GPU's {sorted(factors)}",
                                source=source, path=f"node {n!r}")
        for c, v in fac.items():
            factors.setdefault(c, []).append(v)
        ids.append(gid)
        servers.append(parent[n])
        states.append(_STATES[st.lower()])
        gpus.append(n)
        gpu_attrs.append(attrs)
    if not ids:
        raise InstanceError("has no gpu vertex", source=source, path="graph")
    types = _types(gpus, gpu_attrs, source)
    devices = _devices(gpus, gpu_attrs, source)
    if devices is not None and (again := repeated_device(servers, devices)) is not None:
        i, first = again
        raise InstanceError(f"device {devices[i]} of server {servers[i]!r} is also GPU vertex {gpus[first]!r}'s (a "
                            "server's GPUs have distinct device numbers)", source=source, path=f"node {gpus[i]!r}.device")
    return {"ids": ids, "servers": servers, "states": states, "factors": factors, "types": types,
            "throughput": _throughput(gpus, gpu_attrs, types, source), "devices": devices}


def _ident(n: Any, attrs: Mapping[str, Any]) -> Any:
    v = attrs.get("id", n)
    return v if isinstance(v, (str, int)) and not isinstance(v, bool) else str(v)


def _levels(g: nx.DiGraph, kind: Mapping[Any, str], parent: Mapping[Any, Any], servers: list[Any],
            source: str) -> list[TopologyLevel]:
    """The group levels above ``servers`` (vertices), innermost first, keyed by server vertex."""
    group_id: dict[Any, Any] = {}
    vertex_of: dict[Any, Any] = {}
    for n, what in kind.items():
        if what not in _SPECIAL:
            ident = group_id[n] = _ident(n, g.nodes[n])
            if vertex_of.setdefault(ident, n) != n:
                raise InstanceError(f"group id {ident!r} is also vertex {vertex_of[ident]!r}'s", source=source,
                                    path=f"node {n!r}.id")
    chains: dict[Any, list[Any]] = {}
    for s in servers:
        chain, up = [], parent.get(s)
        while up is not None and kind[up] != "cluster":
            chain.append(up)
            up = parent.get(up)
        chains[s] = chain
    depth = max(len(c) for c in chains.values())
    if depth and not all(chains.values()):
        bare = next(s for s, c in chains.items() if not c)
        raise InstanceError("either every server hangs under a group or none does", source=source,
                            path=f"node {bare!r}")
    levels = []
    for k in range(depth):
        name = "/".join(sorted({kind[c[k]] for c in chains.values() if len(c) > k}))
        levels.append(TopologyLevel(name, {s: group_id[c[min(k, len(c) - 1)]] for s, c in chains.items()}))
    return levels


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a while: reading a graph makes a million XML
    elements, dicts and lists, none of them in a cycle, and the collector, run again and again as
    they are made, took 2-3 s of a 65,536-GPU file's 7 (measured, 2026-12-07)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_graphml(text: str, source: str = "<memory>") -> Topology:
    """The :class:`Topology` of a GraphML text in the shape of the module docstring."""
    with _collector_paused():
        return _topology(text, source)


def _topology(text: str, source: str) -> Topology:
    g = _read(text, source)
    kind, parent = _structure(g, source)
    cols = _gpus(g, kind, parent, source)
    server_vertices = list(dict.fromkeys(cols["servers"]))
    sid: dict[Any, Any] = {}
    vertex_of: dict[Any, Any] = {}
    for s in server_vertices:
        ident = sid[s] = _ident(s, g.nodes[s])
        if vertex_of.setdefault(ident, s) != s:
            raise InstanceError(f"server id {ident!r} is also vertex {vertex_of[ident]!r}'s", source=source,
                                path=f"node {s!r}.id")
    levels = _levels(g, kind, parent, server_vertices, source)
    hosts = tuple(sid[s] for s in server_vertices)
    host_pos = {s: i for i, s in enumerate(server_vertices)}
    tiers = tuple(TopologyLevel(lv.name, {sid[s]: grp for s, grp in lv.group_of.items()}) for lv in levels)
    factors = {c: np.asarray(v, dtype=np.float64) for c, v in cols["factors"].items()} or None
    return Topology(
        hosts, tiers, np.asarray(cols["ids"], dtype=np.int64),
        np.asarray([host_pos[s] for s in cols["servers"]], dtype=np.int64),
        np.asarray(cols["states"], dtype=np.int8), factors, source, cols["types"], cols["throughput"],
        devices=None if cols["devices"] is None else np.asarray(cols["devices"], dtype=np.int64),
    )


def load_graphml(path: str | os.PathLike[str]) -> Topology:
    """Read a GraphML file (guarded reading, :func:`pal_opt.io.read_text`)."""
    from ..io import read_text
    from ..io.textfile import markup_kind

    text = read_text(path, what="GraphML file")
    kind = markup_kind(text)
    if kind is not None and "XML" not in kind:
        raise InstanceError(f"is {kind}, not a GraphML file", source=os.fspath(path))
    return parse_graphml(text, os.fspath(path))


def _plain(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def cluster_digraph(cluster: Cluster, jobs: Mapping[int, JobId] | None = None,
                    stages: Mapping[int, int] | None = None) -> nx.DiGraph:
    """``cluster`` as a graph of the module docstring's shape (string vertices, scalar
    attributes); ``jobs`` ({GPU id: job id}) adds a ``job`` attribute to those GPUs, ``stages``
    ({GPU id: stage}, a pipeline job's GPUs) a ``stage`` attribute (an integer from 0)."""
    if not isinstance(cluster, Cluster):
        raise InputTypeError(f"must be a pal_opt Cluster, got {type(cluster).__name__}", path="cluster")
    gr = nx.DiGraph()
    gr.add_node("cluster", kind="cluster")
    for r, rid in enumerate(cluster.rack_ids):
        gr.add_node(f"r{r}", kind="rack", id=_plain(rid))
        gr.add_edge("cluster", f"r{r}")
    for s, srv in enumerate(cluster.server_ids):
        gr.add_node(f"s{s}", kind="server", id=_plain(srv))
        gr.add_edge(f"r{cluster.rack_of_server[s]}" if cluster.racked else "cluster", f"s{s}")
    classes = list(cluster.factors)
    columns = [cluster.factors[c].tolist() for c in classes]
    types = cluster.gpu_type_names()
    jobs = {} if jobs is None else require_mapping(jobs, "jobs", "a mapping of GPU ids to job ids")
    stages = {} if stages is None else require_mapping(stages, "stages", "a mapping of GPU ids to stage numbers")
    for i, gid in enumerate(cluster.gpu_ids.tolist()):
        attrs: dict[str, Any] = {"kind": "gpu", "id": gid, "state": GpuState(int(cluster.state[i])).name.lower()}
        attrs.update({f"{FACTOR_PREFIX}{c}": col[i] for c, col in zip(classes, columns, strict=True)})
        if types is not None:
            attrs["type"] = types[i]
            attrs.update({f"{THROUGHPUT_PREFIX}{c}": float(row[types[i]])
                          for c, row in cluster.throughput.items() if types[i] in row})
        if cluster.devices is not None:
            attrs["device"] = int(cluster.devices[i])
        if gid in jobs:
            attrs["job"] = str(jobs[gid])
        if gid in stages:
            attrs["stage"] = int(stages[gid])
        gr.add_node(f"g{i}", **attrs)
        gr.add_edge(f"s{cluster.server_of[i]}", f"g{i}")
    return gr


def graphml_text(cluster: Cluster, jobs: Mapping[int, JobId] | None = None,
                 stages: Mapping[int, int] | None = None) -> str:
    """``cluster`` as GraphML text (:func:`cluster_digraph`, written by networkx)."""
    body = "\n".join(nx.generate_graphml(cluster_digraph(cluster, jobs, stages)))
    return f"<?xml version='1.0' encoding='utf-8'?>\n{body}\n"
