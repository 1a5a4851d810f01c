"""Slurm: ``topology.conf`` in, placements out as Slurm node lists.

``topology.conf``
-----------------
The two forms of Slurm's ``topology.conf(5)`` are read:

* **topology/tree**: ``SwitchName=NAME`` with either ``Nodes=HOSTLIST`` (a leaf switch) or
  ``Switches=HOSTLIST`` (its child switches), and an optional ``LinkSpeed=`` (ignored);
* **topology/block**: ``BlockName=NAME Nodes=HOSTLIST`` lines and an optional
  ``BlockSizes=`` line (ignored).

Lines are read as Slurm's configuration parser reads them: parameter names are
case-insensitive, white space may surround ``=``, a value may be in double quotes, ``#``
starts a comment, a line ending in ``\\`` continues on the next, and node and switch lists are
hostlist expressions (:mod:`~pal_opt.topology.hostlist`).  Rejected, with the file and line:
unknown keys, a key twice on one line, a switch defined twice, a switch with both ``Nodes``
and ``Switches``, a child switch that is never defined, a cycle of switches (a switch among its
own descendants), a node in two blocks, a file that lists no node, and Slurm's newer
``topology.yaml`` (named as such).

As in Slurm, a switch may be listed under several parents (a fat tree: every spine lists every
leaf), and a node under several leaf switches (Slurm warns; so does the import, naming the
nodes).

Levels (:class:`~pal_opt.topology.hierarchy.TopologyLevel`, innermost first): ``switch-1`` is
each node's leaf switch, ``switch-2`` the switch above that, and so on; in an uneven tree a
node whose chain of switches ends early keeps its topmost switch at the higher levels.  Nodes
that share a switch at a level, directly or through other nodes, form one group there, named
by its switches as a hostlist (two spines above the same leaves: ``spine[1-2]``; leaf switches
sharing a node: ``leaf[1-2]``); in a plain tree a group is its one switch.  A block topology has
the one level ``block``.  In pal-opt's model the leaf switch (or block) is the rack; every switch
above it collapses into the cluster level (:func:`~pal_opt.topology.to_cluster`).

GPUs per node
-------------
A topology says nothing of GPUs: give ``gpus_per_node``, or a ``slurm.conf`` whose
``NodeName=... Gres=gpu:N`` lines (``gpu:TYPE:N`` and several GRES entries allowed; a
``NodeName=DEFAULT`` line sets the default for the lines after it) give each node's GPU count;
``gpus_per_node`` is then the count of nodes without a ``gpu`` GRES.  Nodes with no GPU are
left out.  ``down`` (a hostlist, e.g. from ``sinfo -h -t down,drain -o %N``) marks nodes out of
service: their GPUs are failed.

Placements out
--------------
:func:`slurm_placement_text` writes one tab-separated row per placed job, in queue order::

    job  nodes  gpus  nodelist     sbatch
    0    2      8     node[01-02]  --nodes=2 --nodelist=node[01-02] --gres=gpu:4
    7    2      3     node[03,05]  --nodes=1 --nodelist=node03 --gres=gpu:2 : --nodes=1 --nodelist=node05 --gres=gpu:1

``sbatch`` holds the options that request exactly that allocation: one component when every
node gives the job the same number of GPUs (``--gres`` counts per node), else one Slurm
heterogeneous-job component per GPU count, separated by ``:``.
"""

from __future__ import annotations

import csv
import graphlib
import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InstanceError, OptionError
from ..model import RoundInstance
from ..result import PlacementResult
from .hierarchy import Hierarchy, Topology, TopologyLevel
from .hostlist import compress_hostlist, expand_hostlist
from .placement import JobHosts, placement_by_host

__all__ = [
    "parse_topology_conf",
    "parse_slurm_conf_gpus",
    "load_slurm",
    "slurm_rows",
    "format_slurm_rows",
    "slurm_placement_text",
]

_KEY_VALUE = re.compile(r'\s*([^\s="]+)\s*=\s*(?:"([^"]*)"|([^\s"]+))(?=\s|$)\s*')
_YAML_START = re.compile(r"---|-?\s*(topology|cluster_default|tree|block|flat)\s*:", re.IGNORECASE)
_NODENAME = re.compile(r"\s*nodename\s*=", re.IGNORECASE)
_TOPO_KEYS = {"switchname", "switches", "nodes", "linkspeed", "blockname", "blocksizes"}
_GRES_COUNT = re.compile(r"(\d{1,12})([kKmMgG]?)")
_MULTIPLIER = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line number, text)`` of each non-blank logical line: comments cut, lines ending
    in a backslash joined with the next."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = " ".join(pending).strip()
        pending = []
        if joined:
            out.append((start, joined))
    if pending and " ".join(pending).strip():
        out.append((start, " ".join(pending).strip()))
    return out


def _tokens(line: str, number: int, source: str) -> list[tuple[str, str]]:
    """``(key, value)`` pairs of a line as Slurm's configuration parser reads them: ``KEY=VALUE``,
    white space allowed around ``=``, a value in double quotes may hold white space."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(line):
        m = _KEY_VALUE.match(line, pos)
        if m is None:
            token = line[pos:].split()[0]
            key, eq, rest = line[pos:].strip().partition("=")
            value = rest.split(None, 1)[0] if rest.strip() else ""
            if not eq or not key or any(c.isspace() or c == '"' for c in key.strip()):
                what = f"expected KEY=VALUE, got {token!r}"
            elif '"' in value:
                what = f"bad quoting in the value of {key.strip()}: {rest.strip()!r}"
            else:
                what = f"{key.strip()} has no value"
            raise InstanceError(what, source=source, path=f"line {number}")
        out.append((m.group(1), m.group(2) if m.group(2) is not None else m.group(3)))
        pos = m.end()
    return out


def _pairs(line: str, number: int, source: str) -> dict[str, str]:
    """``{lower-case key: value}`` of a topology.conf line; unknown or repeated keys are errors."""
    out: dict[str, str] = {}
    for key, value in _tokens(line, number, source):
        low = key.lower()
        if low not in _TOPO_KEYS:
            raise InstanceError(f"unknown parameter {key!r} (topology.conf knows SwitchName, Switches, Nodes, "
                                "LinkSpeed, BlockName, BlockSizes)", source=source, path=f"line {number}")
        if low in out:
            raise InstanceError(f"{key} given twice", source=source, path=f"line {number}")
        if not value:
            raise InstanceError(f"{key} has no value", source=source, path=f"line {number}")
        out[low] = value
    return out


def _expand(value: str, number: int, key: str, source: str) -> list[str]:
    try:
        return expand_hostlist(value)
    except InstanceError as exc:
        raise InstanceError(exc.message, source=source, path=f"line {number}, {key}") from None


@dataclass(frozen=True)
class _Group:
    """A switch or block as written: its line, and its nodes or child switches."""

    name: str
    line: int
    nodes: list[str]
    children: list[str]


def _read_groups(text: str, source: str) -> tuple[dict[str, _Group], str]:
    """The switches (or blocks) of a topology.conf, and which of the two forms it uses."""
    groups: dict[str, _Group] = {}
    form = ""
    lines = _logical_lines(text)
    if lines and _YAML_START.match(lines[0][1]):
        raise InstanceError("looks like Slurm's topology.yaml, which pal-opt does not read: give the topology.conf "
                            "form (SwitchName= or BlockName= lines)", source=source, path=f"line {lines[0][0]}")
    for number, line in lines:
        kv = _pairs(line, number, source)
        at = f"line {number}"
        kind = "tree" if "switchname" in kv else "block" if "blockname" in kv else ""
        if not kind:
            if set(kv) == {"blocksizes"}:
                continue
            raise InstanceError("expected a SwitchName= or BlockName= line", source=source, path=at)
        if form and kind != form:
            raise InstanceError("mixes SwitchName (topology/tree) and BlockName (topology/block) lines",
                                source=source, path=at)
        form = kind
        name = kv["switchname" if kind == "tree" else "blockname"]
        wrong = {"switches", "linkspeed"} & set(kv) if kind == "block" else {"blockname", "blocksizes"} & set(kv)
        if wrong:
            raise InstanceError(f"{sorted(wrong)[0]} does not belong on a {kind} line", source=source, path=at)
        if name in groups:
            raise InstanceError(f"{name!r} is defined twice (first on line {groups[name].line})", source=source, path=at)
        if "nodes" in kv and "switches" in kv:
            raise InstanceError(f"switch {name!r} lists both Nodes and Switches (a switch's children are nodes "
                                "or switches)", source=source, path=at)
        nodes = _expand(kv["nodes"], number, "Nodes", source) if "nodes" in kv else []
        children = _expand(kv["switches"], number, "Switches", source) if "switches" in kv else []
        groups[name] = _Group(name, number, nodes, children)
    return groups, form


def _parents(switches: Mapping[str, _Group], source: str) -> dict[str, list[str]]:
    """Each child switch's parents, in file order (a fat tree lists a leaf under every spine);
    an unknown child and a cycle are errors."""
    parents: dict[str, list[str]] = {}
    for sw in switches.values():
        for child in sw.children:
            if child not in switches:
                raise InstanceError(f"unknown switch {child!r} (no SwitchName={child} line)", source=source,
                                    path=f"line {sw.line}, Switches")
            parents.setdefault(child, []).append(sw.name)
    graph = {name: sw.children for name, sw in switches.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        loop = exc.args[1]  # [a, b, ..., a], each a child of the next
        raise InstanceError(f"switches form a cycle: {' -> '.join(reversed(loop))} (each lists the next "
                            "in Switches=)", source=source, path=f"line {switches[loop[-2]].line}") from None
    return parents


def _leaf_of(groups: Mapping[str, _Group], source: str, what: str) -> dict[str, list[str]]:
    """Each node's groups (leaf switches or blocks), in file order; a node in two blocks is an error."""
    leaf: dict[str, list[str]] = {}
    for g in groups.values():
        for node in g.nodes:
            seen = leaf.setdefault(node, [])
            if seen and what == "block":
                first = groups[seen[0]]
                raise InstanceError(f"node {node!r} is also in block {first.name!r} (line {first.line}); "
                                    "a node has one block", source=source, path=f"line {g.line}, Nodes")
            seen.append(g.name)
    if not leaf:
        raise InstanceError("lists no node (no line has Nodes=)", source=source)
    return leaf


def _group_name(switches: list[str]) -> str:
    """A level's group: its one switch, or several switches as a hostlist (``spine[1-2]``)."""
    if len(switches) == 1:
        return switches[0]
    try:
        return compress_hostlist(switches)
    except InstanceError:  # a switch name no hostlist can say
        return "+".join(sorted(switches))


def _tree_level(reach: Mapping[str, list[str]]) -> dict[str, str]:
    """``{node: group}`` of one level from each node's switches at that level: nodes that share a
    switch, directly or through other nodes, are in one group."""
    up: dict[str, str] = {}

    def find(x: str) -> str:
        while up.setdefault(x, x) != x:
            up[x] = up[up[x]]
            x = up[x]
        return x

    for sws in reach.values():
        for sw in sws[1:]:
            up[find(sw)] = find(sws[0])
    members: dict[str, list[str]] = {}
    for sws in reach.values():
        for sw in sws:
            members.setdefault(find(sw), []).append(sw)
    names = {root: _group_name(list(dict.fromkeys(sws))) for root, sws in members.items()}
    return {node: names[find(sws[0])] for node, sws in reach.items()}


def _tree_levels(leaf: Mapping[str, list[str]], parents: Mapping[str, list[str]]) -> tuple[TopologyLevel, ...]:
    """The levels ``switch-1``, ``switch-2``, ... (module docstring): a node's switches at level
    k+1 are the parents of its switches at level k (a switch without a parent stays)."""
    reach = {node: list(sws) for node, sws in leaf.items()}
    levels = [TopologyLevel("switch-1", _tree_level(reach))]
    while True:
        nxt = {n: list(dict.fromkeys(p for sw in sws for p in parents.get(sw, [sw]))) for n, sws in reach.items()}
        if nxt == reach:
            return tuple(levels)
        reach = nxt
        levels.append(TopologyLevel(f"switch-{len(levels) + 1}", _tree_level(reach)))


def parse_topology_conf(text: str, source: str = "<memory>") -> Hierarchy:
    """The hosts and switch (or block) levels of a ``topology.conf`` text (module docstring).

    Examples
    --------
    >>> h = parse_topology_conf("SwitchName=s0 Nodes=n[1-2]\\nSwitchName=s1 Nodes=n3\\n"
    ...                         "SwitchName=spine Switches=s[0-1]")
    >>> h.hosts, [(lv.name, dict(lv.group_of)) for lv in h.levels]
    (('n1', 'n2', 'n3'), [('switch-1', {'n1': 's0', 'n2': 's0', 'n3': 's1'}), \
('switch-2', {'n1': 'spine', 'n2': 'spine', 'n3': 'spine'})])
    """
    groups, form = _read_groups(text, source)
    if form == "block":
        blocks = {node: gs[0] for node, gs in _leaf_of(groups, source, "block").items()}
        return Hierarchy(tuple(blocks), (TopologyLevel("block", blocks),))
    parents = _parents(groups, source)
    leaf = _leaf_of(groups, source, "leaf switch")
    multi = [node for node, sws in leaf.items() if len(sws) > 1]
    notes = (f"nodes under more than one leaf switch: {compress_hostlist(multi)} (Slurm warns of these too); "
             "leaf switches that share a node are taken as one rack",) if multi else ()
    return Hierarchy(tuple(leaf), _tree_levels(leaf, parents), notes)


def _gres_gpus(spec: str, number: int, source: str) -> int:
    """GPUs in a ``Gres=`` value: ``gpu:8``, ``gpu:a100:4,nic:1``, ``gpu:2(S:0-1)``, ``gpu``."""
    total = 0
    for entry in re.sub(r"\([^)]*\)", "", spec).split(","):
        parts = entry.strip().split(":")
        if parts[0].lower() != "gpu":
            continue
        m = _GRES_COUNT.fullmatch(parts[-1]) if len(parts) > 1 else None
        if m is None and len(parts) > 2:
            raise InstanceError(f"bad GPU count in Gres={spec!r}", source=source, path=f"line {number}, Gres")
        total += int(m.group(1)) * _MULTIPLIER[m.group(2).lower()] if m else 1  # gpu, gpu:TYPE: one
    return total


def parse_slurm_conf_gpus(text: str, source: str = "<memory>") -> dict[str, int]:
    """``{node: GPUs}`` from the ``NodeName=... Gres=gpu:N`` lines of a ``slurm.conf`` text.

    Nodes without a ``gpu`` GRES (and no ``NodeName=DEFAULT Gres=`` before them) are absent.

    >>> parse_slurm_conf_gpus("NodeName=DEFAULT Gres=gpu:4\\nNodeName=n[1-2] CPUs=8\\n"
    ...                       "NodeName=n3 Gres=gpu:a100:8,nic:1 # big")
    {'n1': 4, 'n2': 4, 'n3': 8}
    """
    default: int | None = None
    out: dict[str, int] = {}
    line_of: dict[str, int] = {}
    for number, line in _logical_lines(text):
        if _NODENAME.match(line) is None:
            continue
        kv = {k.lower(): v for k, v in _tokens(line, number, source)}
        count = _gres_gpus(kv["gres"], number, source) if "gres" in kv else default
        if kv["nodename"].lower() == "default":
            default = count
            continue
        for node in _expand(kv["nodename"], number, "NodeName", source):
            if node in line_of:
                raise InstanceError(f"node {node!r} is defined twice (first on line {line_of[node]})",
                                    source=source, path=f"line {number}, NodeName")
            line_of[node] = number
            if count is not None:
                out[node] = count
    return out


def load_slurm(
    topology: str | os.PathLike[str],
    *,
    gpus_per_node: int | None = None,
    slurm_conf: str | os.PathLike[str] | None = None,
    down: str | None = None,
) -> Topology:
    """Read a ``topology.conf`` (and optionally a ``slurm.conf``) into a :class:`Topology`.

    Parameters
    ----------
    topology
        The ``topology.conf`` file.
    gpus_per_node
        GPUs of every node (of nodes without a ``gpu`` GRES when ``slurm_conf`` is given).
    slurm_conf
        A ``slurm.conf`` whose ``NodeName`` lines give GPU counts.
    down
        A hostlist of nodes out of service (their GPUs are failed).
    """
    from ..io import read_text

    if gpus_per_node is None and slurm_conf is None:
        raise OptionError("Slurm needs the GPUs per node: give gpus_per_node (--gpus-per-node) or a slurm.conf")
    if gpus_per_node is not None and (isinstance(gpus_per_node, bool) or gpus_per_node < 1):
        raise OptionError(f"gpus per node must be a positive integer, got {gpus_per_node!r}")
    src = os.fspath(topology)
    hier = parse_topology_conf(read_text(topology, what="topology.conf"), src)
    gres: dict[str, int] = {}
    if slurm_conf is not None:
        gres = parse_slurm_conf_gpus(read_text(slurm_conf, what="slurm.conf"), os.fspath(slurm_conf))
    gpus = {h: gres.get(h, gpus_per_node or 0) for h in hier.hosts}
    if not any(gpus.values()):
        raise InstanceError("no node of the topology has a GPU (give --gpus-per-node, or Gres=gpu:N lines "
                            "in the slurm.conf)", source=src)
    failed: dict[str, int] = {}
    if down is not None and not down.strip():
        raise OptionError(f"--down: empty host list, got {down!r}")
    if down:
        try:
            names = expand_hostlist(down)
        except InstanceError as exc:
            raise OptionError(f"--down: {exc.message}") from None
        unknown = [n for n in names if n not in gpus]
        if unknown:
            raise OptionError(f"--down: node {unknown[0]!r} is not in {src}")
        failed = {n: gpus[n] for n in names}
    return Topology.from_counts(hier.hosts, hier.levels, gpus, failed, source=src, notes=hier.notes)


def _sbatch(job: JobHosts) -> str:
    by_count: dict[int, list[str]] = {}
    for share in job.hosts:
        by_count.setdefault(len(share.gpus), []).append(str(share.host))
    parts = [
        f"--nodes={len(hosts)} --nodelist={compress_hostlist(hosts)} --gres=gpu:{count}"
        for count, hosts in by_count.items()
    ]
    return " : ".join(parts)


def slurm_rows(
    instance: RoundInstance, placement: PlacementResult | Mapping[str, Any], *, source: str | None = None
) -> list[dict[str, Any]]:
    """One row per placed job (queue order): ``job``, ``nodes``, ``gpus``, ``nodelist``
    (a compressed hostlist) and ``sbatch`` (module docstring).  The placement is checked
    against the instance first (:func:`~pal_opt.topology.placement.placement_by_host`)."""
    rows = []
    for job in placement_by_host(instance, placement, source=source):
        hosts = [str(s.host) for s in job.hosts]
        try:
            nodelist = compress_hostlist(hosts)
        except InstanceError as exc:
            raise InstanceError(exc.message, source=source, path=f"placements.{job.job}") from None
        rows.append({"job": job.job, "nodes": len(hosts), "gpus": job.num_gpus, "nodelist": nodelist,
                     "sbatch": _sbatch(job)})
    return rows


def format_slurm_rows(rows: list[dict[str, Any]]) -> str:
    """Rows of :func:`slurm_rows` as tab-separated text with a header line."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, ["job", "nodes", "gpus", "nodelist", "sbatch"], delimiter="\t",
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def slurm_placement_text(
    instance: RoundInstance, placement: PlacementResult | Mapping[str, Any], *, source: str | None = None
) -> str:
    """The placement as the tab-separated table of the module docstring."""
    return format_slurm_rows(slurm_rows(instance, placement, source=source))
